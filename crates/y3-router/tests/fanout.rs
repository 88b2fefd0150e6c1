//! Fan-out is not a loop: a function may write any number of outputs per input, and every
//! one is delivered; a message coming back to a function its own output led to is a loop,
//! bounded per turn (`limits.max_loop_returns`), counted, and a function writing a tag it
//! observes is reported. Also the handshake limits a real app can reach. All on the
//! router's default settings.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use y3_router::metrics::Drop;
use y3_router::RouterConfig;
use y3_transport::frame::{ClientType, Data, Frame, GoawayCode};

use common::*;

/// A function as YoMo runs one: for every frame it receives, the outputs `outputs` makes
/// of it are written with the frame's metadata (as YoMo's `ctx.Write` does; no y3 hop
/// count). Reading and writing are decoupled so that a loop cannot deadlock it. Ends once
/// nothing arrived for `quiet`; returns the frames it received.
fn function(
    conn: y3_transport::Connection,
    quiet: Duration,
    outputs: impl Fn(&Data) -> Vec<(u32, Bytes)> + Send + 'static,
) -> tokio::task::JoinHandle<u64> {
    let y3_transport::Connection {
        mut reader,
        mut writer,
        ..
    } = conn;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Frame>();
    tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if writer.feed(frame).await.is_err() {
                return;
            }
            while let Ok(frame) = rx.try_recv() {
                if writer.feed(frame).await.is_err() {
                    return;
                }
            }
            if writer.flush().await.is_err() {
                return;
            }
        }
    });
    tokio::spawn(async move {
        let mut seen = 0u64;
        while let Ok(Some(Ok(Frame::Data(d)))) = tokio::time::timeout(quiet, reader.next()).await {
            seen += 1;
            for (tag, payload) in outputs(&d) {
                let out = Data::new(tag, payload).with_metadata(d.metadata.clone());
                if tx.send(Frame::Data(out)).is_err() {
                    return seen;
                }
            }
        }
        seen
    })
}

/// A YoMo function observing `observed`.
async fn yomo_function(
    router: &y3_router::RouterHandle,
    observed: &[u32],
) -> y3_transport::Connection {
    admit(
        router.connect_in_memory(),
        yomo_hello(ClientType::StreamFunction, observed),
    )
    .await
}

/// Reads data frames until `want` arrived (bounded by [`WAIT`]) or, past it, until nothing
/// arrived for 300 ms; returns how many.
async fn count(conn: &mut y3_transport::Connection, want: u64) -> u64 {
    let mut got = 0;
    within("the sink's frames", async {
        while got < want {
            match conn.reader.next().await {
                Some(Ok(Frame::Data(_))) => got += 1,
                other => panic!("expected data, got {other:?}"),
            }
        }
    })
    .await;
    while let Ok(Some(Ok(Frame::Data(_)))) =
        tokio::time::timeout(Duration::from_millis(300), conn.reader.next()).await
    {
        got += 1;
    }
    got
}

/// A splitter writing 10,000 outputs per input, a mapper turning each into one more, and a
/// sink: every output of every stage arrives (3 inputs → 30,000 at the sink), none is a
/// loop drop. The router once delivered 128 per input and dropped the rest as `loop`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_outputs_per_input_are_all_delivered() {
    const INPUTS: u64 = 3;
    const FAN: u64 = 10_000;
    let router = router(|_| {}).await;
    let quiet = Duration::from_secs(3);
    let splitter = function(yomo_function(&router, &[0x10]).await, quiet, |d| {
        (0..FAN)
            .map(|i| (0x11, Bytes::from(format!("{:?}/{i}", d.payload))))
            .collect()
    });
    let mapper = function(yomo_function(&router, &[0x11]).await, quiet, |d| {
        vec![(0x12, d.payload.clone())]
    });
    let mut sink = yomo_function(&router, &[0x12]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x10, 0..INPUTS, b"split me").await;
    let got = count(&mut sink, INPUTS * FAN).await;
    assert_eq!(got, INPUTS * FAN);
    assert_eq!(within("the splitter", splitter).await.unwrap(), INPUTS);
    assert_eq!(within("the mapper", mapper).await.unwrap(), INPUTS * FAN);
    let stats = router.stats();
    assert_eq!(stats.drops(Drop::Loop), 0);
    assert_eq!(stats.self_loops, 0);
    drop(sink);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// The honest loops, on the defaults (`max_loop_returns` = 8), with exact numbers: a
/// function echoing the tag it observes takes its input and 8 returns per message (9),
/// its sink every output (1 + 9); a ring of two functions takes 9 per message each; one
/// return per message is dropped as `loop` in each. Only the self-loop is reported. The
/// router's old budget (128 deliveries per message) let each message make 129 deliveries
/// in the self-loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_loops_die_out_after_their_returns_counted() {
    const MESSAGES: u64 = 100;
    let returns = u64::from(RouterConfig::default().limits.max_loop_returns);
    assert_eq!(returns, 8);
    let router = router(|_| {}).await;
    let quiet = Duration::from_millis(700);
    let echo = |tag| move |d: &Data| vec![(tag, d.payload.clone())];
    let self_loop = function(yomo_function(&router, &[0x30]).await, quiet, echo(0x30));
    let mut sink = yomo_function(&router, &[0x30]).await;
    let f = function(yomo_function(&router, &[0x40]).await, quiet, echo(0x41));
    let g = function(yomo_function(&router, &[0x41]).await, quiet, echo(0x40));
    let mut source = join(&router, ClientType::Source, &[]).await;
    let started = Instant::now();
    send_all(&mut source, 0x30, 0..MESSAGES, b"loop").await;
    send_all(&mut source, 0x40, MESSAGES..2 * MESSAGES, b"ring").await;
    let sunk = count(&mut sink, MESSAGES * (2 + returns)).await;
    let (looped, f, g) = (
        within("the self-loop", self_loop).await.unwrap(),
        within("f", f).await.unwrap(),
        within("g", g).await.unwrap(),
    );
    let stats = router.stats();
    eprintln!(
        "honest loops, {MESSAGES} messages each: self-loop {looped} deliveries (+{sunk} to \
         its sink), ring {f} + {g}; {} dropped as loop; died out within {:?} (incl. 700 ms idle)",
        stats.drops(Drop::Loop),
        started.elapsed()
    );
    assert_eq!(looped, MESSAGES * (1 + returns));
    assert_eq!(sunk, MESSAGES * (2 + returns));
    assert_eq!((f, g), (MESSAGES * (1 + returns), MESSAGES * (1 + returns)));
    assert_eq!(stats.drops(Drop::Loop), 2 * MESSAGES);
    assert_eq!(stats.self_loops, 1, "the ring writes no tag it observes");
    let text = router.metrics().encode();
    assert!(
        text.lines().any(|l| l == "y3_router_self_loops_total 1"),
        "{text}"
    );
    drop(sink);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// A function observing 1,024 tags with a 1,024-byte name is served on every tag (YoMo
/// sets no limit; the old defaults refused 65 tags and 129-byte names); one more tag or
/// byte is refused with `bad_handshake`, saying which limit.
#[tokio::test]
async fn a_thousand_tags_and_a_kilobyte_name_are_served() {
    let router = router(|_| {}).await;
    let limits = RouterConfig::default().limits;
    assert_eq!(
        (limits.max_observed_tags, limits.max_name_len),
        (1024, 1024)
    );
    let tags: Vec<u32> = (0x1000..0x1000 + 1024).collect();
    let mut big = yomo_hello(ClientType::StreamFunction, &tags);
    big.name = "n".repeat(1024);
    let mut function = admit(router.connect_in_memory(), big.clone()).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    for &tag in &tags {
        source
            .writer
            .feed(Frame::Data(numbered(tag, u64::from(tag), Bytes::new())))
            .await
            .unwrap();
    }
    source.writer.flush().await.unwrap();
    for &tag in &tags {
        assert_eq!(next_data(&mut function).await.tag, tag);
    }
    for (tags, name, limit) in [
        (1025, 1024, "limits.max_observed_tags (1024)"),
        (1024, 1025, "limits.max_name_len (1024 bytes)"),
    ] {
        // A y3 client, told the code as well as the reason.
        let mut hello = big.clone();
        hello.extension = 1;
        hello.observed = (0..tags).map(|t| 0x1000 + t as u32).collect();
        hello.name = "n".repeat(name);
        let mut conn = router.connect_in_memory();
        conn.writer.send(Frame::from(hello)).await.unwrap();
        let got = rest(&mut conn).await;
        let refusal = rejection(&got);
        assert_eq!(refusal.code, GoawayCode::BadHandshake);
        assert!(refusal.reason.contains(limit), "{}", refusal.reason);
    }
    assert_eq!(rejected(&router, "bad_handshake"), 2);
    ledger(&router).await;
    router.shutdown().await;
}

/// A loop across two routers that list each other: F on A turns 0x50 into 0x51, G on B turns
/// 0x51 into 0x50, and each router forwards its functions' outputs to the other. A frame
/// from the mesh that reaches a function which already wrote its message is a return too:
/// each function takes its input and 8 returns per message (9), the ninth return to F is
/// dropped as `loop` on A, and the loop ends. Without it, one message would circulate
/// between the routers for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_across_a_mesh_ends_too() {
    use y3_router::config::{DownstreamConfig, MeshTransport};
    const MESSAGES: u64 = 20;
    let returns = u64::from(RouterConfig::default().limits.max_loop_returns);
    let mesh = |name: &str, to: &str, addr: std::net::SocketAddr| {
        let mut c = RouterConfig::ephemeral();
        c.shutdown.drain_timeout_ms = 3000;
        c.shutdown.quiet_ms = 50;
        c.mesh.name = name.into();
        c.mesh.downstream.push(DownstreamConfig {
            name: to.into(),
            addr: addr.to_string(),
            credential: String::new(),
            transport: MeshTransport::Tcp,
        });
        c
    };
    let b_tcp = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let a = y3_router::Router::start(mesh("a", "b", b_tcp))
        .await
        .unwrap();
    let mut b_config = mesh("b", "a", a.tcp_addr().unwrap());
    b_config.listen.tcp = b_tcp.to_string();
    let b = y3_router::Router::start(b_config).await.unwrap();
    for (router, to) in [(&a, "b"), (&b, "a")] {
        eventually("the mesh link", || {
            router
                .metrics()
                .downstream_stats(to)
                .is_some_and(|s| s.connected)
        })
        .await;
    }
    let quiet = Duration::from_millis(700);
    let echo = |tag| move |d: &Data| vec![(tag, d.payload.clone())];
    let f = function(yomo_function(&a, &[0x50]).await, quiet, echo(0x51));
    let g = function(yomo_function(&b, &[0x51]).await, quiet, echo(0x50));
    let mut source = join(&a, ClientType::Source, &[]).await;
    send_all(&mut source, 0x50, 0..MESSAGES, b"around").await;
    let (f, g) = (within("f", f).await.unwrap(), within("g", g).await.unwrap());
    let (on_a, on_b) = (a.stats().drops(Drop::Loop), b.stats().drops(Drop::Loop));
    eprintln!("a loop across a mesh, {MESSAGES} messages: f {f}, g {g}; loop drops {on_a} on A, {on_b} on B");
    assert_eq!((f, g), (MESSAGES * (1 + returns), MESSAGES * (1 + returns)));
    assert_eq!((on_a, on_b), (MESSAGES, 0));
    ledger(&a).await;
    a.shutdown().await;
    ledger(&b).await;
    b.shutdown().await;
}

/// A reader wakes each recipient's writer once per read (`wakes.rs`), not per frame: a
/// burst to five subscribers, one of them slow (it pauses every 100 frames) among fast ones,
/// reaches every one of them whole and in order, and a lone frame after the burst (a read
/// of one frame, no more to come) reaches all five at once, not when more frames come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_to_five_reaches_each_in_order_and_a_lone_frame_at_once() {
    let router = router(|_| {}).await;
    let tag = 0x61;
    const FRAMES: u64 = 5_000;
    let mut readers = Vec::new();
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    for slow in [false, false, true, false, false] {
        let mut sub = join(&router, ClientType::StreamFunction, &[tag]).await;
        let mut done = done_rx.clone();
        readers.push(tokio::spawn(async move {
            for i in 0..FRAMES {
                let d = next_data(&mut sub).await;
                assert_eq!(seq(&d), i, "slow: {slow}: in order, none lost");
                if slow && i % 100 == 99 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            // The lone frame comes after the test says so, with nothing behind it.
            done.changed().await.unwrap();
            let started = Instant::now();
            let d = next_data(&mut sub).await;
            (seq(&d), started.elapsed(), sub)
        }));
    }
    eventually("all admitted", || router.stats().connections == 5).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    for chunk in 0..FRAMES / 500 {
        send_all(&mut source, tag, chunk * 500..(chunk + 1) * 500, &[7u8; 64]).await;
    }
    eventually("the burst delivered", || {
        router.stats().frames_out == 5 * FRAMES
    })
    .await;
    done_tx.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    send_all(&mut source, tag, FRAMES..FRAMES + 1, b"lone").await;
    let mut subs = Vec::new();
    for reader in readers {
        let (id, took, sub) = within("a subscriber's frames", reader).await.unwrap();
        assert_eq!(id, FRAMES);
        // Well under the wait for a frame that never woke its writer (forever) or one
        // woken only by a later frame (none comes); generous for a loaded machine.
        assert!(
            took < Duration::from_secs(5),
            "the lone frame took {took:?}"
        );
        subs.push(sub);
    }
    let stats = router.stats();
    assert_eq!(stats.total_drops(), 0, "{stats:?}");
    assert_eq!(stats.frames_out, 5 * (FRAMES + 1));
    drop((subs, source));
    let last = router.shutdown().await;
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}
