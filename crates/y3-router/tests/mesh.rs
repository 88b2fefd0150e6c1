//! The mesh (`[mesh]`): a router forwards every frame of its local clients to each downstream
//! zipper, which delivers it locally and never forwards it again. Two real routers on
//! loopback, QUIC and TCP links, every wait bounded.

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use y3_router::config::{DownstreamConfig, MeshTransport};
use y3_router::metrics::Drop;
use y3_router::{Router, RouterConfig, RouterHandle};
use y3_transport::frame::Data;
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{new_id, Backoff, ClientOptions, Sink, Source};

/// Every wait is bounded by this.
const WAIT: Duration = Duration::from_secs(15);

/// The tag sources write.
const TAG: u32 = 0x33;

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// A UDP port on 127.0.0.1 that was free a moment ago.
fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free UDP port")
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free TCP port")
}

/// A test configuration: ephemeral loopback listeners, metrics off, short drain, dials
/// bounded by 1 s (a QUIC dial to a dead port would otherwise wait its idle timeout).
fn config(name: &str) -> RouterConfig {
    let mut config = RouterConfig::ephemeral();
    config.shutdown.drain_timeout_ms = 3000;
    config.shutdown.quiet_ms = 50;
    config.limits.handshake_timeout_ms = 1000;
    config.mesh.name = name.into();
    config
}

fn downstream(name: &str, addr: SocketAddr, transport: MeshTransport) -> DownstreamConfig {
    DownstreamConfig {
        name: name.into(),
        addr: addr.to_string(),
        credential: String::new(),
        transport,
    }
}

/// Where `router` listens for a downstream link over `transport`.
fn mesh_addr(router: &RouterHandle, transport: MeshTransport) -> SocketAddr {
    match transport {
        MeshTransport::Quic => router.quic_addr(),
        MeshTransport::Tcp => router.tcp_addr(),
    }
    .expect("listener on")
}

async fn start(config: RouterConfig) -> RouterHandle {
    Router::start(config).await.expect("router starts")
}

/// Starts a router on a fixed port that a router just shut down may still hold for a
/// moment (its endpoint is dropped with its last task): retries while the port is taken.
async fn restart(config: RouterConfig) -> RouterHandle {
    within("the port to be free again", async {
        loop {
            match Router::start(config.clone()).await {
                Ok(router) => return router,
                Err(e) if e.kind() == "bind" => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("router does not start: {e}"),
            }
        }
    })
    .await
}

/// SDK options for a local client of `router` (plain TCP, short backoff).
fn client(router: &RouterHandle, name: &str) -> ClientOptions {
    ClientOptions::new(router.tcp_addr().expect("tcp on"))
        .name(name)
        .backoff(Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            attempts: 5,
        })
}

/// Waits until `router`'s link to `name` is up.
async fn link_up(router: &RouterHandle, name: &str) {
    eventually(&format!("the mesh link to {name}"), || {
        router
            .metrics()
            .downstream_stats(name)
            .is_some_and(|s| s.connected)
    })
    .await;
}

/// Router A, its mesh forwarding to a downstream named `b` at `addr` over `transport`.
async fn a_forwarding_to(addr: SocketAddr, transport: MeshTransport) -> RouterHandle {
    let mut a_config = config("a");
    a_config
        .mesh
        .downstream
        .push(downstream("b", addr, transport));
    start(a_config).await
}

/// Routers A and B, A's mesh forwarding to B over `transport`, with B's sink on [`TAG`]
/// subscribed and the link up.
async fn a_linked_to_b(transport: MeshTransport) -> (RouterHandle, RouterHandle, Sink) {
    let b = start(config("b")).await;
    let a = a_forwarding_to(mesh_addr(&b, transport), transport).await;
    let sink = Sink::connect(client(&b, "sink-b"), &[TAG]).await.unwrap();
    link_up(&a, "b").await;
    (a, b, sink)
}

/// Checks `a`'s ledger and shuts it down, then `b`'s.
async fn ledgers_and_shutdown(a: RouterHandle, b: RouterHandle) {
    common::ledger(&a).await;
    a.shutdown().await;
    common::ledger(&b).await;
    b.shutdown().await;
}

/// Sends `seqs` under [`TAG`], each payload the sequence number, with the metadata a YoMo
/// source writes plus `origin`.
async fn send(source: &mut Source, origin: &str, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        let tid = new_id();
        let meta = Metadata::from_pairs([
            (metadata::SOURCE_ID, source.id()),
            (metadata::TID, tid.as_str()),
            ("origin", origin),
        ]);
        let data = Data::new(TAG, seq.to_be_bytes().to_vec()).with_metadata(meta);
        source.send_data(data).await.expect("send");
    }
    source.flush().await.expect("flush");
}

/// Receives exactly `n` frames.
async fn recv_n(sink: &mut Sink, n: usize) -> Vec<Data> {
    within(&format!("{n} frames"), async {
        let mut got = Vec::with_capacity(n);
        while got.len() < n {
            got.push(sink.recv().await.expect("sink open").expect("frame"));
        }
        got
    })
    .await
}

/// Asserts nothing more arrives for a while (frames still in flight would show).
async fn quiet(sink: &mut Sink, what: &str) {
    if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(400), sink.recv()).await {
        panic!("{what}: an extra frame arrived: {extra:?}");
    }
}

fn seq(data: &Data) -> u64 {
    u64::from_be_bytes(data.payload[..].try_into().expect("8-byte payload"))
}

/// The sequence numbers received, checked to be distinct, sorted.
fn seqs(frames: &[Data]) -> Vec<u64> {
    let mut seqs: Vec<u64> = frames.iter().map(seq).collect();
    seqs.sort_unstable();
    let before = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), before, "duplicates");
    seqs
}

/// A source on A, a sink on B: every frame arrives once, its metadata as it was sent.
async fn forwards_every_frame(transport: MeshTransport) {
    let (a, b, mut sink) = a_linked_to_b(transport).await;

    let mut source = Source::connect(client(&a, "source-a")).await.unwrap();
    const N: u64 = 500;
    send(&mut source, "a", 0..N).await;
    let got = recv_n(&mut sink, N as usize).await;
    assert_eq!(seqs(&got), (0..N).collect::<Vec<_>>());
    let mut tids = std::collections::HashSet::new();
    for data in &got {
        assert_eq!(data.tag, TAG);
        let map = data.metadata.to_map().expect("metadata");
        let want: BTreeMap<String, String> = [
            (metadata::SOURCE_ID, source.id()),
            ("origin", "a"),
            (
                metadata::TID,
                map.get(metadata::TID).map_or("", |t| t.as_str()),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(map, want, "metadata of seq {}", seq(data));
        assert!(tids.insert(map[metadata::TID].clone()), "tid repeated");
    }
    quiet(&mut sink, "B's sink").await;

    let stats = a.metrics().downstream_stats("b").expect("downstream b");
    assert_eq!((stats.connects, stats.frames, stats.dropped), (1, N, 0));
    // On A the frames had no local subscriber, yet none counts as dropped: B took them.
    assert_eq!(a.stats().total_drops(), 0, "{:?}", a.stats());
    source.close().await.unwrap();
    ledgers_and_shutdown(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_on_a_reaches_a_sink_on_b_over_quic() {
    forwards_every_frame(MeshTransport::Quic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_on_a_reaches_a_sink_on_b_over_tcp() {
    forwards_every_frame(MeshTransport::Tcp).await;
}

/// A lists B and B lists A: frames from each side's source reach both sinks exactly once;
/// a frame that came over the mesh is not sent back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_that_list_each_other_do_not_loop() {
    let b_quic = free_udp();
    let a = a_forwarding_to(b_quic, MeshTransport::Quic).await;
    let mut b_config = config("b");
    b_config.listen.quic = b_quic.to_string();
    b_config.mesh.downstream.push(downstream(
        "a",
        mesh_addr(&a, MeshTransport::Quic),
        MeshTransport::Quic,
    ));
    let b = start(b_config).await;
    let mut sink_a = Sink::connect(client(&a, "sink-a"), &[TAG]).await.unwrap();
    let mut sink_b = Sink::connect(client(&b, "sink-b"), &[TAG]).await.unwrap();
    link_up(&a, "b").await;
    link_up(&b, "a").await;

    const N: u64 = 300;
    const M: u64 = 200;
    let mut source_a = Source::connect(client(&a, "source-a")).await.unwrap();
    let mut source_b = Source::connect(client(&b, "source-b")).await.unwrap();
    send(&mut source_a, "a", 0..N).await;
    send(&mut source_b, "b", 10_000..10_000 + M).await;

    let want: Vec<u64> = (0..N).chain(10_000..10_000 + M).collect();
    for (name, sink) in [("sink-a", &mut sink_a), ("sink-b", &mut sink_b)] {
        let got = recv_n(sink, (N + M) as usize).await;
        assert_eq!(seqs(&got), want, "{name}");
        for data in &got {
            let origin = data.metadata.get("origin").unwrap().unwrap();
            assert_eq!(
                origin == "a",
                seq(data) < N,
                "{name}: origin of seq {}",
                seq(data)
            );
        }
        quiet(sink, name).await;
    }
    // Each link carried its own router's frames only.
    let a_to_b = a.metrics().downstream_stats("b").unwrap();
    let b_to_a = b.metrics().downstream_stats("a").unwrap();
    assert_eq!((a_to_b.frames, b_to_a.frames), (N, M));
    assert_eq!(a.stats().frames_in, N + M, "{:?}", a.stats());
    assert_eq!(b.stats().frames_in, N + M, "{:?}", b.stats());
    source_a.close().await.unwrap();
    source_b.close().await.unwrap();
    ledgers_and_shutdown(a, b).await;
}

/// B is down when A starts: A dials until B is up, and later frames arrive. B restarts:
/// A dials again, and frames after that arrive too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnects_when_b_comes_up_and_after_b_restarts() {
    let b_quic = free_udp();
    let a = a_forwarding_to(b_quic, MeshTransport::Quic).await;
    let mut source = Source::connect(client(&a, "source-a")).await.unwrap();
    // Sent while B is down: kept (bounded) for B, or dropped and counted; never blocking.
    send(&mut source, "a", 0..20).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = a.metrics().downstream_stats("b").unwrap();
    assert_eq!((stats.connected, stats.connects), (false, 0));

    let b_config = || {
        let mut c = config("b");
        c.listen.quic = b_quic.to_string();
        c
    };
    let b = start(b_config()).await;
    let mut sink = Sink::connect(client(&b, "sink-b"), &[TAG]).await.unwrap();
    link_up(&a, "b").await;
    // Whatever was kept while B was down (and reached B after its sink subscribed).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut early = Vec::new();
    while let Ok(Some(Ok(data))) =
        tokio::time::timeout(Duration::from_millis(100), sink.recv()).await
    {
        early.push(data);
    }
    assert!(seqs(&early).iter().all(|&s| s < 20), "{early:?}");

    send(&mut source, "a", 100..200).await;
    let got = recv_n(&mut sink, 100).await;
    assert_eq!(seqs(&got), (100..200).collect::<Vec<_>>());
    quiet(&mut sink, "B's sink").await;

    // B restarts on the same port: it tells A goaway, A dials until the new B is up.
    drop(sink);
    common::ledger(&b).await;
    b.shutdown().await;
    eventually("A to see B gone", || {
        !a.metrics().downstream_stats("b").unwrap().connected
    })
    .await;
    let b = restart(b_config()).await;
    let mut sink = Sink::connect(client(&b, "sink-b2"), &[TAG]).await.unwrap();
    eventually("A to dial the new B", || {
        a.metrics().downstream_stats("b").unwrap().connects == 2
    })
    .await;
    link_up(&a, "b").await;
    send(&mut source, "a", 300..400).await;
    let got = recv_n(&mut sink, 100).await;
    assert_eq!(seqs(&got), (300..400).collect::<Vec<_>>());
    quiet(&mut sink, "the new B's sink").await;
    source.close().await.unwrap();
    ledgers_and_shutdown(a, b).await;
}

/// A downstream that never answers does not hold back A's local delivery, even under the
/// block policy: its queue keeps `capacity` frames and every other one is counted as a
/// `mesh` drop; at shutdown the kept ones are counted too, without waiting out the drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_downstream_does_not_block_local_delivery() {
    const CAPACITY: u64 = 16;
    const N: u64 = 1000;
    let mut a_config = config("a");
    a_config.queue.capacity = CAPACITY as usize;
    a_config.shutdown.drain_timeout_ms = 10_000;
    a_config
        .mesh
        .downstream
        .push(downstream("dead", free_udp(), MeshTransport::Quic));
    a_config
        .mesh
        .downstream
        .push(downstream("dead-tcp", free_tcp(), MeshTransport::Tcp));
    let a = start(a_config).await;
    let mut sink = Sink::connect(client(&a, "sink-a"), &[TAG]).await.unwrap();
    let mut source = Source::connect(client(&a, "source-a")).await.unwrap();

    let (_, got) = within(
        "local delivery",
        futures_util::future::join(send(&mut source, "a", 0..N), recv_n(&mut sink, N as usize)),
    )
    .await;
    assert_eq!(seqs(&got), (0..N).collect::<Vec<_>>());

    for name in ["dead", "dead-tcp"] {
        let stats = a.metrics().downstream_stats(name).unwrap();
        assert_eq!(
            (stats.connected, stats.connects, stats.frames, stats.dropped),
            (false, 0, 0, N - CAPACITY),
            "{name}"
        );
    }
    assert_eq!(a.stats().drops(Drop::Mesh), 2 * (N - CAPACITY));
    assert_eq!(a.stats().drops(Drop::QueueFull), 0);
    let text = a.metrics().encode();
    for needle in [
        "y3_router_dropped_total{reason=\"mesh\"} 1968",
        "y3_router_mesh_dropped_total{downstream=\"dead\"} 984",
        "y3_router_mesh_connected{downstream=\"dead-tcp\"} 0",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }

    source.close().await.unwrap();
    drop(sink);
    let started = Instant::now();
    let stats = a.shutdown().await;
    common::ledger_of(&stats);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the dead downstream held the shutdown for {:?}",
        started.elapsed()
    );
    assert_eq!(stats.drops(Drop::Mesh), 2 * N, "{stats:?}");
}

/// The link presents `credential`: B with a token admits A's link with the right one and
/// refuses a wrong one, which A keeps retrying (and counting drops for) without harm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credential_reaches_the_downstream() {
    let mut b_config = config("b");
    b_config.auth.token = "secret".into();
    let b = start(b_config).await;
    let b_addr = mesh_addr(&b, MeshTransport::Quic);
    let mut a_config = config("a");
    a_config.mesh.downstream.push(DownstreamConfig {
        credential: "token:secret".into(),
        ..downstream("good", b_addr, MeshTransport::Quic)
    });
    a_config.mesh.downstream.push(DownstreamConfig {
        credential: "token:wrong".into(),
        ..downstream("bad", b_addr, MeshTransport::Quic)
    });
    let a = start(a_config).await;
    let mut sink = Sink::connect(client(&b, "sink-b").token("secret"), &[TAG])
        .await
        .unwrap();
    link_up(&a, "good").await;
    eventually("B to refuse the bad link twice", || {
        b.stats().rejected.get("unauthorized").copied().unwrap_or(0) >= 2
    })
    .await;

    let mut source = Source::connect(client(&a, "source-a")).await.unwrap();
    send(&mut source, "a", 0..50).await;
    let got = recv_n(&mut sink, 50).await;
    assert_eq!(seqs(&got), (0..50).collect::<Vec<_>>());
    quiet(&mut sink, "B's sink").await;
    let bad = a.metrics().downstream_stats("bad").unwrap();
    assert_eq!((bad.connected, bad.connects), (false, 0));
    source.close().await.unwrap();
    ledgers_and_shutdown(a, b).await;
}

/// A durable source on A whose frames only B (a downstream zipper over TCP) takes: each is
/// stored once B's TCP acknowledged it (`tcp_acked.rs`), none refused as `no_subscriber`
/// and none resent; before, the mesh writer dropped the frames' "written" signals untold,
/// so every such frame was refused as `no_subscriber` and sent again, forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_sources_frames_only_a_downstream_takes_are_stored() {
    use y3_transport::sdk::DurableSource;
    let transport = MeshTransport::Tcp;
    let (a, b, mut sink) = a_linked_to_b(transport).await;

    let mut source = DurableSource::connect(client(&a, "durable-a"))
        .await
        .unwrap();
    const N: u64 = 2_000;
    for seq in 0..N {
        let data = Data::new(TAG, seq.to_be_bytes().to_vec());
        source.send_data(data).await.expect("send");
    }
    assert!(
        source.wait_stored(WAIT).await.expect("wait"),
        "every frame stored: {} unacknowledged, {} retried",
        source.unacked(),
        source.retried()
    );
    let got = recv_n(&mut sink, N as usize).await;
    assert_eq!(seqs(&got), (0..N).collect::<Vec<_>>());
    assert_eq!((source.retried(), source.refused()), (0, 0));
    quiet(&mut sink, "after every frame").await;
    let closed = source.finish(WAIT).await.unwrap();
    assert!(closed.all_stored(), "{closed:?}");
    a.shutdown().await;
    b.shutdown().await;
}
