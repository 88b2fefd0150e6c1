//! Routers federated over NATS (`spec/federation.md`): three real `nats-server` processes
//! clustered on loopback with JetStream, three `y3 serve` processes, one per node, and y3
//! clients in this process. nats-server comes from `NATS_SERVER_BIN`, `PATH` or
//! `target/tools/bin` (where `scripts/test.sh` installs it); without it these tests fail.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::serve::{Launch, Serve};
use common::WAIT;
use futures_util::StreamExt;
use y3_transport::frame::{Data, RefusedReason};
use y3_transport::metadata::Metadata;
use y3_transport::sdk::{ClientOptions, DurableSource, Sink, Source, StreamFunction};

/// A received frame: its source, its index, the frame.
type Got = (String, u64, Data);

fn nats_server_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATS_SERVER_BIN") {
        return bin.into();
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/nats-server");
    if tools.exists() {
        return tools;
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if dir.join("nats-server").exists() {
            return dir.join("nats-server");
        }
    }
    panic!(
        "nats-server not found: set NATS_SERVER_BIN or run scripts/test.sh, which installs it \
         (GOBIN=target/tools/bin go install github.com/nats-io/nats-server/v2@v2.15.2)"
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on a loopback HTTP port; the body.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// Waits for `cond` at most [`WAIT`].
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Killed(Option<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One nats-server of the cluster.
struct Node {
    proc: Killed,
    client: u16,
    monitor: SocketAddr,
}

impl Node {
    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.client)
    }

    /// Whether a route told this node of a subscription to exactly `subject` (its routes'
    /// subscription lists, `/routez?subs=1`).
    fn routes_know(&self, subject: &str) -> bool {
        let body = http_get(self.monitor, "/routez?subs=1").unwrap_or_default();
        body.contains(&format!("{subject:?}"))
    }

    fn varz_in_msgs(&self) -> u64 {
        let body = http_get(self.monitor, "/varz").unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["in_msgs"].as_u64().unwrap_or(0)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.proc.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three clustered nats-servers with JetStream, each with its own store directory.
///
/// Ports come from [`free_port`], which can race with another process taking the port
/// between its release and the server's bind (route connections use ephemeral ports too):
/// a node that exits, or a cluster that does not form in [`WAIT`], is started again on fresh
/// ports, three times at most. Each node's log is `<dir>/js<i>-<attempt>.log`.
fn cluster(dir: &Path) -> Vec<Node> {
    let mut why = Vec::new();
    for attempt in 0..3 {
        match try_cluster(dir, attempt) {
            Ok(nodes) => return nodes,
            Err(e) => why.push(e),
        }
    }
    panic!("the NATS cluster did not form: {why:?}");
}

/// One attempt of [`cluster`].
fn try_cluster(dir: &Path, attempt: usize) -> Result<Vec<Node>, String> {
    let bin = nats_server_bin();
    let ports: Vec<(u16, u16, u16)> = (0..3)
        .map(|_| (free_port(), free_port(), free_port()))
        .collect();
    let routes: Vec<String> = ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{}", p.2))
        .collect();
    let mut nodes = Vec::new();
    for (i, &(client, monitor, cluster)) in ports.iter().enumerate() {
        let store = dir.join(format!("js{i}"));
        let log = std::fs::File::create(dir.join(format!("js{i}-{attempt}.log")))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args(["-a", "127.0.0.1", "-n", &format!("n{i}"), "-js"])
            .args(["-p", &client.to_string(), "-m", &monitor.to_string()])
            .arg("-sd")
            .arg(&store)
            .args(["--cluster_name", "y3test"])
            .args(["--cluster", &format!("nats://127.0.0.1:{cluster}")])
            .args(["--routes", &routes.join(",")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        nodes.push(Node {
            proc: Killed(Some(child)),
            client,
            monitor: SocketAddr::from(([127, 0, 0, 1], monitor)),
        });
    }
    let start = Instant::now();
    for (i, node) in nodes.iter_mut().enumerate() {
        loop {
            if let Some(Ok(Some(status))) = node.proc.0.as_mut().map(|c| c.try_wait()) {
                return Err(format!("attempt {attempt}: node n{i} exited: {status}"));
            }
            let routez = http_get(node.monitor, "/routez").unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&routez).unwrap_or_default();
            if v["num_routes"].as_u64().unwrap_or(0) >= 2
                && http_get(node.monitor, "/healthz").is_some_and(|b| b.contains("\"ok\""))
            {
                break;
            }
            if start.elapsed() > WAIT {
                return Err(format!(
                    "attempt {attempt}: node n{i} not clustered in {WAIT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(nodes)
}

/// A `y3 serve` process federated through the cluster, its own node (`nodes[node]`) first,
/// QUIC off, its log in `<dir>/<name>.log`.
struct Router {
    serve: Serve,
}

impl Router {
    fn start(dir: &Path, nodes: &[Node], node: usize, name: &str, durable: &[u32]) -> Router {
        Router::start_with(dir, nodes, node, name, durable, "", "")
    }

    /// As [`Router::start`], with `federation` lines in its `[federation]` table and `extra`
    /// tables after it.
    fn start_with(
        dir: &Path,
        nodes: &[Node],
        node: usize,
        name: &str,
        durable: &[u32],
        federation: &str,
        extra: &str,
    ) -> Router {
        let config = dir.join(format!("{name}.toml"));
        let urls: Vec<String> = (0..nodes.len())
            .map(|k| format!("{:?}", nodes[(node + k) % nodes.len()].url()))
            .collect();
        std::fs::write(
            &config,
            format!(
                "[federation]\nurls = [{}]\nname = {name:?}\ndurable_tags = {durable:?}\n\
                 {federation}\n[federation.stream]\nreplicas = 3\nack_wait_ms = 1000\n{extra}",
                urls.join(", ")
            ),
        )
        .unwrap();
        let serve = Launch::default()
            .quic("")
            .arg_path("--config", &config)
            .env("RUST_LOG", "info,y3_router::federation=debug")
            .stderr_to(config.with_extension("log"))
            .start();
        Router { serve }
    }

    /// A metric's value (summed over its labels; 0 when absent).
    fn metric(&self, name: &str) -> u64 {
        self.serve.metric(name)
    }

    /// Deliveries owed and neither written, dropped and counted, nor queued (the router's
    /// `Stats::unaccounted`, from its metrics; no mesh here).
    fn unaccounted(&self) -> i64 {
        let owed = self.metric("y3_router_deliveries_total") as i64;
        let settled = self.metric("y3_router_frames_out_total")
            + self.metric("y3_router_dropped_total")
            + self.metric("y3_router_queue_depth");
        owed - settled as i64
    }

    fn lost(&self, reason: &str) -> u64 {
        let key = format!("y3_router_federation_lost_total{{reason=\"{reason}\"}} ");
        self.serve
            .metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&key)?.parse().ok())
            .unwrap_or(0)
    }

    fn options(&self, name: &str) -> ClientOptions {
        ClientOptions::new(self.serve.tcp).name(name)
    }
}

/// One nats-server without JetStream (where a durable tag's frames are never stored), its
/// log `<dir>/lone.log`.
fn lone_node(dir: &Path) -> Node {
    let (client, monitor) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join("lone.log")).unwrap();
    let child = Command::new(nats_server_bin())
        .args(["-a", "127.0.0.1", "-p", &client.to_string()])
        .args(["-m", &monitor.to_string()])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start nats-server");
    let node = Node {
        proc: Killed(Some(child)),
        client,
        monitor: SocketAddr::from(([127, 0, 0, 1], monitor)),
    };
    wait_for("the lone nats-server", || {
        http_get(node.monitor, "/healthz").is_some_and(|b| b.contains("\"ok\""))
    });
    node
}

/// Connects to the MQTT listener at `addr` as protocol level `level` (4: 3.1.1, 5), publishes
/// one QoS 1 message on topic "t" and waits for its PUBACK: `Some(reason code)` (0 for 3.1.1,
/// whose PUBACK has none), or `None` when the connection closed first.
async fn mqtt_publish_qos1(addr: SocketAddr, level: u8) -> Option<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let props: &[u8] = if level == 5 { &[0] } else { &[] };
    // CONNECT: "MQTT", level, clean start, keep-alive 60 s, [properties], client id.
    let mut connect = vec![0, 4, b'M', b'Q', b'T', b'T', level, 0x02, 0, 60];
    connect.extend_from_slice(props);
    connect.extend_from_slice(&[0, 1, b'0' + level]);
    // PUBLISH QoS 1: topic "t", packet id 1, [properties], payload.
    let mut publish = vec![0, 1, b't', 0, 1];
    publish.extend_from_slice(props);
    publish.extend_from_slice(b"reading");
    for (kind, body) in [(0x10, connect), (0x32, publish)] {
        tcp.write_all(&[kind, body.len() as u8]).await.unwrap();
        tcp.write_all(&body).await.unwrap();
    }
    // CONNACK, then the PUBACK (or the end of the connection, a DISCONNECT before it).
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let read = tokio::time::timeout(Duration::from_secs(40), tcp.read(&mut buf)).await;
        match read.expect("no PUBACK nor close in 40 s") {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        // Packets: type byte, one-byte remaining length (all of these are short).
        let mut at = 0;
        while at + 2 <= got.len() && at + 2 + usize::from(got[at + 1]) <= got.len() {
            let (kind, len) = (got[at], usize::from(got[at + 1]));
            if kind == 0x40 {
                return Some(if len > 2 { got[at + 4] } else { 0 });
            }
            at += 2 + len;
        }
    }
}

/// Routers A, B and C, one per node of the cluster, federated with `durable` tags.
fn three_routers(dir: &Path, nodes: &[Node], durable: &[u32]) -> (Router, Router, Router) {
    (
        Router::start(dir, nodes, 0, "a", durable),
        Router::start(dir, nodes, 1, "b", durable),
        Router::start(dir, nodes, 2, "c", durable),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("y3-fed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Frame `i` of source `s`: payload "s:i", metadata with a custom key.
fn frame(tag: u32, s: &str, i: u64) -> Data {
    let tid = format!("{s}-{i}");
    Data::new(tag, Bytes::from(format!("{s}:{i}"))).with_metadata(Metadata::from_pairs([
        ("yomo-source-id", s),
        ("yomo-tid", tid.as_str()),
        ("k", "v"),
    ]))
}

/// Sends `n` frames of `tag` as source `s`, 50 at a time, with a short pause between.
async fn send(options: ClientOptions, tag: u32, s: &str, n: u64) {
    send_paced(options, tag, s, n, Duration::from_millis(2)).await;
}

/// As [`send`], with `pause` between every 50 frames.
async fn send_paced(options: ClientOptions, tag: u32, s: &str, n: u64, pause: Duration) {
    let mut source = Source::connect(options).await.unwrap();
    for i in 0..n {
        source.send_data(frame(tag, s, i)).await.unwrap();
        if i % 50 == 49 {
            source.flush().await.unwrap();
            tokio::time::sleep(pause).await;
        }
    }
    source.close().await.unwrap();
}

/// Receives until `want` frames arrived or `quiet` passed without one: (source, i) in order.
async fn receive(sink: &mut Sink, want: usize, quiet: Duration) -> Vec<Got> {
    let mut got = Vec::new();
    while got.len() < want {
        match tokio::time::timeout(quiet, sink.recv()).await {
            Ok(Some(Ok(data))) => {
                let text = String::from_utf8(data.payload.to_vec()).unwrap();
                let (s, i) = text.split_once(':').unwrap();
                got.push((s.to_owned(), i.parse().unwrap(), data));
            }
            _ => break,
        }
    }
    got
}

/// Receives on a task of its own (a sink must be read while the sources send, or the
/// router evicts it as a slow consumer); the sink comes back with what it got.
fn receiving(
    mut sink: Sink,
    want: usize,
    quiet: Duration,
) -> tokio::task::JoinHandle<(Sink, Vec<Got>)> {
    tokio::spawn(async move {
        let got = receive(&mut sink, want, quiet).await;
        (sink, got)
    })
}

/// How often each index arrived, of `0..n`.
struct Tally {
    seen: HashMap<u64, u32>,
    missing: Vec<u64>,
    twice: usize,
}

fn tally(got: &[Got], n: u64) -> Tally {
    let mut seen: HashMap<u64, u32> = HashMap::new();
    for (_, i, _) in got {
        *seen.entry(*i).or_default() += 1;
    }
    let missing = (0..n).filter(|i| !seen.contains_key(i)).collect();
    let twice = seen.values().filter(|&&k| k > 1).count();
    Tally {
        seen,
        missing,
        twice,
    }
}

/// Per source: every index once and in order.
fn check_exact(got: &[Got], sources: &[(&str, u64)]) {
    let mut per: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for (s, i, _) in got {
        per.entry(s.as_str()).or_default().push(*i);
    }
    for &(s, n) in sources {
        let seen = per.remove(s).unwrap_or_default();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "source {s}");
    }
    assert!(per.is_empty(), "frames of unknown sources: {per:?}");
}

#[test]
fn pipeline_across_three_routers_interest_and_two_publishers() {
    let dir = temp_dir("pipeline");
    let nodes = cluster(&dir);
    let (a, b, c) = three_routers(&dir, &nodes, &[]);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        // The relay on B: 0x10 -> 0x11. The sink on C observes 0x11 and 0x12.
        let relay = StreamFunction::new(b.options("relay"), &[0x10]);
        let relay = tokio::spawn(relay.run(|d| async move { Some((0x11, d.payload)) }));
        let sink = Sink::connect(c.options("sink"), &[0x11, 0x12])
            .await
            .unwrap();
        let local = Sink::connect(a.options("local"), &[0x12]).await.unwrap();
        // (router, tag) pairs: A hears B's relay (0x10) and C's sink (0x11, 0x12); B hears
        // C's sink and A's local sink (0x12). Two would let C's sink alone satisfy A before
        // B's relay is heard, and A would refuse s1's frames as no_subscriber.
        wait_for("interest to reach A and B", || {
            a.metric("y3_router_federation_remote_interest") >= 3
                && b.metric("y3_router_federation_remote_interest") >= 3
        });
        let p = Pipeline {
            a: &a,
            b: &b,
            c: &c,
            nodes: &nodes,
        };
        let sink = p.relayed_exactly(sink).await;
        p.unobserved_tag_is_silent().await;
        let (sink, local) = p.two_publishers_no_echo(sink, local).await;
        let (sink, local) = p.burst_in_batches(sink, local).await;
        let (sink, local) = p.hostile_batches_dropped(sink, local).await;
        drop((sink, local));

        // Every delivery each router owed is accounted for, frames from NATS included.
        for r in [&a, &b, &c] {
            assert_eq!(r.unaccounted(), 0);
        }
        relay.abort();
    });
    eprintln!("pipeline test: {:?}", started.elapsed());
    drop((a, b, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pipeline test's routers (the relay on B) and cluster, its steps in order.
struct Pipeline<'a> {
    a: &'a Router,
    b: &'a Router,
    c: &'a Router,
    nodes: &'a [Node],
}

impl Pipeline<'_> {
    /// Frames each of step 1's two sources sends.
    const PER_SOURCE: u64 = 2000;

    /// 1. A -> relay on B -> C: exact counts, order per source, metadata intact.
    async fn relayed_exactly(&self, sink: Sink) -> Sink {
        let (a, n) = (self.a, Self::PER_SOURCE);
        let on_c = receiving(sink, 2 * n as usize, Duration::from_secs(3));
        tokio::join!(
            send(a.options("s1"), 0x10, "s1", n),
            send(a.options("s2"), 0x10, "s2", n)
        );
        let (sink, got) = on_c.await.unwrap();
        check_exact(&got, &[("s1", n), ("s2", n)]);
        for (s, i, data) in &got {
            let m = data.metadata.to_map().unwrap();
            assert_eq!(m["k"], "v");
            assert_eq!(m["yomo-source-id"], *s);
            assert_eq!(m["yomo-tid"], format!("{s}-{i}"));
            assert_eq!(data.hops, 1);
            assert_eq!(data.tag, 0x11);
        }
        sink
    }

    /// 2. A tag nobody observes creates no NATS traffic.
    async fn unobserved_tag_is_silent(&self) {
        let before: u64 = self.nodes.iter().map(Node::varz_in_msgs).sum();
        send(self.a.options("s3"), 0x20, "s3", 1000).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after: u64 = self.nodes.iter().map(Node::varz_in_msgs).sum();
        // Only interest announcements (every 5 s per router) may have gone by.
        assert!(
            after - before < 20,
            "{} messages for an unobserved tag",
            after - before
        );
        let published = self.a.metric("y3_router_federation_published_total");
        assert_eq!(published, 2 * Self::PER_SOURCE);
    }

    /// 3. Two routers publish the same tag: sinks on A and C get each frame once; nothing
    ///    comes back to its publisher or loops.
    async fn two_publishers_no_echo(&self, sink: Sink, local: Sink) -> (Sink, Sink) {
        let (a, b) = (self.a, self.b);
        let (on_c, on_a) = (
            receiving(sink, 1000, Duration::from_secs(5)),
            receiving(local, 1000, Duration::from_secs(5)),
        );
        tokio::join!(
            send(a.options("pa"), 0x12, "pa", 500),
            send(b.options("pb"), 0x12, "pb", 500)
        );
        let ((mut sink, on_c), (mut local, on_a)) = (on_c.await.unwrap(), on_a.await.unwrap());
        check_exact(&on_c, &[("pa", 500), ("pb", 500)]);
        check_exact(&on_a, &[("pa", 500), ("pb", 500)]);
        // Nothing more arrives: no echo, no loop.
        assert!(receive(&mut sink, 1, Duration::from_millis(500))
            .await
            .is_empty());
        assert!(receive(&mut local, 1, Duration::from_millis(500))
            .await
            .is_empty());
        assert_eq!(a.metric("y3_router_federation_received_total"), 500);
        (sink, local)
    }

    /// 4. A burst from A to C, sent without pauses: the frames waiting together at A's
    ///    publisher travel in fewer NATS messages than frames (batches), and C gets every
    ///    one, in order, with its own metadata, no gap counted.
    async fn burst_in_batches(&self, sink: Sink, local: Sink) -> (Sink, Sink) {
        let a = self.a;
        let frames = |r: &Router| r.metric("y3_router_federation_published_total");
        let messages = |r: &Router| r.metric("y3_router_federation_published_messages_total");
        let (frames_before, messages_before) = (frames(a), messages(a));
        let burst = 6000;
        let (on_c, on_a) = (
            receiving(sink, burst as usize, Duration::from_secs(5)),
            receiving(local, burst as usize, Duration::from_secs(5)),
        );
        send_paced(a.options("pc"), 0x12, "pc", burst, Duration::ZERO).await;
        let ((sink, on_c), (local, on_a)) = (on_c.await.unwrap(), on_a.await.unwrap());
        check_exact(&on_c, &[("pc", burst)]);
        check_exact(&on_a, &[("pc", burst)]);
        for (s, i, data) in &on_c {
            let m = data.metadata.to_map().unwrap();
            assert_eq!(m["yomo-tid"], format!("{s}-{i}"));
            assert_eq!((data.tag, data.hops), (0x12, 0));
        }
        let (sent_frames, sent_messages) =
            (frames(a) - frames_before, messages(a) - messages_before);
        eprintln!("burst: {sent_frames} frames in {sent_messages} NATS messages");
        assert_eq!(sent_frames, burst);
        assert!(
            sent_messages < sent_frames,
            "{sent_messages} messages for {sent_frames} frames: nothing batched"
        );
        for reason in ["gap", "malformed", "queue_full", "publish_failed"] {
            let lost = a.lost(reason) + self.b.lost(reason) + self.c.lost(reason);
            assert_eq!(lost, 0, "{reason}");
        }
        (sink, local)
    }

    /// 5. Hostile batches from a rogue NATS client: each is dropped whole and counted as
    ///    malformed by both routers observing the tag, and they go on routing.
    async fn hostile_batches_dropped(&self, sink: Sink, local: Sink) -> (Sink, Sink) {
        let (a, c) = (self.a, self.c);
        let rogue = async_nats::connect(self.nodes[0].url()).await.unwrap();
        let hostile = hostile_batches();
        let k = hostile.len() as u64;
        for (h, body) in hostile {
            rogue
                .publish_with_headers("y3.tag.18", h, body)
                .await
                .unwrap();
        }
        rogue.flush().await.unwrap();
        wait_for("the hostile batches to be counted", || {
            a.lost("malformed") == k && c.lost("malformed") == k
        });
        let (on_c, on_a) = (
            receiving(sink, 500, Duration::from_secs(5)),
            receiving(local, 500, Duration::from_secs(5)),
        );
        send_paced(a.options("pd"), 0x12, "pd", 500, Duration::ZERO).await;
        let ((sink, on_c), (local, on_a)) = (on_c.await.unwrap(), on_a.await.unwrap());
        check_exact(&on_c, &[("pd", 500)]);
        check_exact(&on_a, &[("pd", 500)]);
        (sink, local)
    }
}

/// Batches a rogue NATS client publishes, each malformed its own way: (headers, body).
fn hostile_batches() -> Vec<(async_nats::HeaderMap, Bytes)> {
    let batch = |count: &str, body: &[u8]| {
        let mut h = async_nats::HeaderMap::new();
        for (k, v) in [("Y3-Origin", "rogue"), ("Y3-Epoch", "1"), ("Y3-Seq", "1")] {
            h.insert(k, v);
        }
        h.insert("Y3-Batch", count);
        (h, Bytes::copy_from_slice(body))
    };
    let entry = |hops: u32, meta: u32, payload: u32| {
        [
            hops.to_be_bytes(),
            meta.to_be_bytes(),
            payload.to_be_bytes(),
        ]
        .concat()
    };
    let mut one = entry(0, 0, 2);
    one.extend_from_slice(b"x:");
    vec![
        batch("2", &one),                                 // fewer entries than announced
        batch("1", &[one.clone(), one.clone()].concat()), // more than announced
        batch("1", &one[..7]),                            // truncated entry
        batch("1", &entry(0, 0, u32::MAX)),               // length past the body
        batch("100000", &one),                            // past the bound
    ]
}

#[test]
fn nats_node_killed_mid_stream_durable_exact_plain_counted() {
    let dir = temp_dir("nodekill");
    let mut nodes = cluster(&dir);
    // A publishes through node 0, which dies; C receives through node 2.
    let a = Router::start(&dir, &nodes, 0, "a", &[0x30]);
    let c = Router::start(&dir, &nodes, 2, "c", &[0x30]);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        let durable = Sink::connect(c.options("durable-sink"), &[0x30]).await.unwrap();
        let plain = Sink::connect(c.options("plain-sink"), &[0x31]).await.unwrap();
        wait_for("interest and the durable consumer", || {
            a.metric("y3_router_federation_remote_interest") >= 1
                && c.metric("y3_router_federation_subscriptions") >= 2
        });
        let n = 3000;
        // JetStream elects new leaders for the stream and the consumer (seconds, longer on a
        // loaded machine); the publisher stores again what was not acknowledged meanwhile.
        let durable = receiving(durable, n as usize, Duration::from_secs(20));
        let plain = receiving(plain, n as usize, Duration::from_secs(3));
        let sending = tokio::spawn({
            let (da, pa) = (a.options("d"), a.options("p"));
            async move { tokio::join!(send(da, 0x30, "d", n), send(pa, 0x31, "p", n)) }
        });
        tokio::time::sleep(Duration::from_millis(150)).await;
        nodes[0].kill();
        sending.await.unwrap();
        let (_, got_d) = durable.await.unwrap();
        let (_, got_p) = plain.await.unwrap();
        for (r, name) in [(&a, "a"), (&c, "c")] {
            let text = r.serve.metrics();
            for l in text.lines().filter(|l| l.starts_with("y3_router_federation")) {
                eprintln!("{name}: {l}");
            }
        }
        // Durable: every frame exactly once after de-duplication.
        let mut ids: Vec<u64> = got_d.iter().map(|(_, i, _)| *i).collect();
        ids.sort_unstable();
        let missing: Vec<u64> = (0..n).filter(|i| ids.binary_search(i).is_err()).collect();
        assert!(
            missing.is_empty() && ids.len() as u64 == n,
            "durable: {} received, missing {} (first {:?}); A lost {}, C duplicates {}",
            ids.len(),
            missing.len(),
            &missing[..missing.len().min(10)],
            a.lost("publish_failed"),
            c.metric("y3_router_federation_duplicates_total"),
        );
        // Plain: whatever did not arrive is counted (at A's queue, or as a gap at C). Frames
        // lost at the end of the stream (A's client drops what it buffered for the dead
        // node) are counted when A's next mark reaches C (every 250 ms, and once A's client
        // is connected again): wait for it, boundedly.
        let received = got_p.len() as u64;
        let counted = || a.lost("queue_full") + a.lost("publish_failed") + c.lost("gap");
        let marked = Instant::now();
        while received + counted() < n && marked.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let lost = counted();
        eprintln!(
            "node kill: durable {}/{n} (duplicates skipped {}), plain {received}/{n}, counted lost {lost}",
            got_d.len(),
            c.metric("y3_router_federation_duplicates_total"),
        );
        assert_eq!(received + lost, n, "plain frames: every loss counted");
        assert_eq!(c.unaccounted(), 0, "C's deliveries, durable ones included");
    });
    eprintln!("node kill test: {:?}", started.elapsed());
    drop((a, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn durable_relay_router_restarted_mid_stream_misses_nothing() {
    let dir = temp_dir("restart");
    let nodes = cluster(&dir);
    let (a, mut b, c) = three_routers(&dir, &nodes, &[0x40, 0x41]);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        let relay = StreamFunction::new(b.options("relay"), &[0x40]);
        let relay = tokio::spawn(relay.run(|d| async move { Some((0x41, d.payload)) }));
        let sink = Sink::connect(c.options("sink"), &[0x41]).await.unwrap();
        wait_for("durable consumers on B and C", || {
            b.metric("y3_router_federation_subscriptions") >= 1
                && c.metric("y3_router_federation_subscriptions") >= 1
        });
        let n = 2000;
        let on_c = receiving(sink, n as usize, Duration::from_secs(15));
        // About 0.8 s of sending; B stops after 0.2 s and is back 0.3 s after it stopped.
        let pause = Duration::from_millis(20);
        let sending = tokio::spawn(send_paced(a.options("s"), 0x40, "s", n, pause));
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.serve.stop();
        let stopped = sending.is_finished();
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.serve.restart();
        sending.await.unwrap();
        assert!(!stopped, "the source had finished before B stopped");
        let (_, got) = on_c.await.unwrap();
        let Tally { seen, missing, .. } = tally(&got, n);
        eprintln!(
            "router restart: {} received, {} distinct, missing {}; restarted B took {} from its \
             durable consumer",
            got.len(),
            seen.len(),
            missing.len(),
            b.metric("y3_router_federation_received_total"),
        );
        assert!(missing.is_empty(), "missing {missing:?}");
        assert!(seen.values().all(|&k| k == 1), "a frame delivered twice");
        relay.abort();
    });
    eprintln!("restart test: {:?}", started.elapsed());
    drop((a, b, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn source_router_killed_mid_stream_durable_source_resends_and_sink_gets_each_once() {
    let dir = temp_dir("sourcekill");
    let nodes = cluster(&dir);
    let mut a = Router::start(&dir, &nodes, 0, "a", &[0x50]);
    let c = Router::start(&dir, &nodes, 2, "c", &[0x50]);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        let sink = Sink::connect(c.options("sink"), &[0x50]).await.unwrap();
        wait_for("the durable consumer on C", || {
            c.metric("y3_router_federation_subscriptions") >= 1
        });
        // As fast as JetStream stores them: frames are in flight when A is killed.
        let n = 10_000u64;
        let on_c = receiving(sink, n as usize, Duration::from_secs(15));
        let options = a.options("durable-source");
        let sending = tokio::spawn(async move {
            let mut source = DurableSource::connect(options).await.unwrap();
            for i in 0..n {
                source.send_data(frame(0x50, "s", i)).await.unwrap();
            }
            let stored = source.wait_stored(Duration::from_secs(10)).await.unwrap();
            let resent = source.resent();
            source.close(Duration::from_secs(1)).await.unwrap();
            (stored, resent)
        });
        // SIGKILL: whatever A had read and not stored is lost there; the source still
        // holds it and sends it again to A's successor.
        tokio::time::sleep(Duration::from_millis(250)).await;
        a.serve.kill();
        let killed_at = sending.is_finished();
        tokio::time::sleep(Duration::from_millis(200)).await;
        a.serve.restart();
        let (all_stored, resent) = sending.await.unwrap();
        assert!(!killed_at, "the source had finished before A was killed");
        assert!(all_stored, "the source's frames were not all stored");
        let (_, got) = on_c.await.unwrap();
        let Tally {
            seen,
            missing,
            twice,
        } = tally(&got, n);
        let missing = missing.len();
        eprintln!(
            "source router killed: the source sent {resent} again; {} received, {} distinct, \
             missing {missing}, twice {twice}; C skipped {} duplicates",
            got.len(),
            seen.len(),
            c.metric("y3_router_federation_duplicates_total"),
        );
        assert_eq!((missing, twice), (0, 0));
    });
    eprintln!("source kill test: {:?}", started.elapsed());
    drop((a, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn durable_function_router_killed_mid_stream_outputs_resent_and_sink_gets_each_once() {
    let dir = temp_dir("functionkill");
    let nodes = cluster(&dir);
    let (a, mut b, c) = three_routers(&dir, &nodes, &[0x60, 0x61]);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        // The relay on B keeps its outputs until B stored them in JetStream.
        let relay = StreamFunction::new(b.options("relay"), &[0x60]).durable();
        let relay = tokio::spawn(relay.run(|d| async move { Some((0x61, d.payload)) }));
        let sink = Sink::connect(c.options("sink"), &[0x61]).await.unwrap();
        wait_for("durable consumers on B and C", || {
            b.metric("y3_router_federation_subscriptions") >= 1
                && c.metric("y3_router_federation_subscriptions") >= 1
        });
        let n = 3000u64;
        let on_c = receiving(sink, n as usize, Duration::from_secs(20));
        let options = a.options("durable-source");
        // About 0.6 s of sending: B is killed after 0.25 s, while the relay's outputs and
        // B's deliveries to it are in flight, and is back 0.3 s later.
        let sending = tokio::spawn(async move {
            let mut source = DurableSource::connect(options).await.unwrap();
            for i in 0..n {
                source.send_data(frame(0x60, "s", i)).await.unwrap();
                if i % 50 == 49 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            source.close(Duration::from_secs(10)).await.unwrap()
        });
        tokio::time::sleep(Duration::from_millis(250)).await;
        b.serve.kill();
        let killed_at = sending.is_finished();
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.serve.restart();
        assert!(
            sending.await.unwrap(),
            "the source's frames were not all stored"
        );
        assert!(!killed_at, "the source had finished before B was killed");
        let (_, got) = on_c.await.unwrap();
        assert!(got.iter().all(|(_, _, data)| data.tag == 0x61));
        let Tally {
            seen,
            missing,
            twice,
        } = tally(&got, n);
        eprintln!(
            "function router killed: {} received, {} distinct, missing {}, twice {twice}; \
             restarted B took {} inputs from its durable consumer; C skipped {} duplicates",
            got.len(),
            seen.len(),
            missing.len(),
            b.metric("y3_router_federation_received_total"),
            c.metric("y3_router_federation_duplicates_total"),
        );
        assert!(missing.is_empty(), "missing {missing:?}");
        assert_eq!(twice, 0, "a frame delivered twice");
        relay.abort();
    });
    eprintln!("function kill test: {:?}", started.elapsed());
    drop((a, b, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A durable function that writes three outputs per input (fan-out: the outputs share their
/// input's `yomo-tid`) on a durable tag: every output is stored in JetStream and reaches the
/// sink on another router once. JetStream de-duplicated by tag and tid alone kept only the
/// first output of each input (20 of 60 arrived, nothing counted).
#[test]
fn durable_fan_out_stores_every_output_of_an_input() {
    let dir = temp_dir("durablefanout");
    let nodes = cluster(&dir);
    let (a, b, c) = three_routers(&dir, &nodes, &[0x62, 0x63]);
    let rt = runtime();
    rt.block_on(async {
        let splitter = StreamFunction::new(b.options("splitter"), &[0x62]).durable();
        let splitter = tokio::spawn(splitter.run_with_writer(|d, out| async move {
            let text = String::from_utf8(d.payload.to_vec()).unwrap();
            let (s, i) = text.split_once(':').unwrap();
            let i: u64 = i.parse().unwrap();
            for k in 0..3 {
                out.write(0x63, format!("{s}:{}", i * 3 + k)).await.unwrap();
            }
        }));
        let sink = Sink::connect(c.options("sink"), &[0x63]).await.unwrap();
        wait_for("durable consumers on B and C", || {
            b.metric("y3_router_federation_subscriptions") >= 1
                && c.metric("y3_router_federation_subscriptions") >= 1
        });
        let inputs = 20u64;
        let on_c = receiving(sink, 3 * inputs as usize, Duration::from_secs(10));
        let mut source = DurableSource::connect(a.options("durable-source"))
            .await
            .unwrap();
        for i in 0..inputs {
            source.send_data(frame(0x62, "s", i)).await.unwrap();
        }
        assert!(source.close(Duration::from_secs(10)).await.unwrap());
        let (_, got) = on_c.await.unwrap();
        let Tally { missing, twice, .. } = tally(&got, 3 * inputs);
        assert!(missing.is_empty(), "outputs never delivered: {missing:?}");
        assert_eq!(twice, 0, "an output delivered twice");
        assert_eq!(got.len(), 60);
        assert_eq!(c.metric("y3_router_federation_duplicates_total"), 0);
        splitter.abort();
    });
    drop((a, b, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source faster than the NATS path, through a two-frame publish queue with one frame per
/// NATS message: under the default `[queue]` policy (`block`) router A holds the source back
/// and C gets every frame, in order; under `drop_oldest` A drops what does not fit and
/// counts exactly what C missed.
#[test]
fn full_publish_queue_holds_the_source_back_or_drops_and_counts() {
    let dir = temp_dir("hold");
    let nodes = cluster(&dir);
    let small = "publish_queue = 2\nbatch_frames = 1";
    // The default `[queue]` (block, 250 ms block timeout): lossless block as shipped.
    let a = Router::start_with(&dir, &nodes, 0, "a", &[], small, "");
    let d = Router::start_with(
        &dir,
        &nodes,
        1,
        "d",
        &[],
        small,
        "[queue]\npolicy = \"drop_oldest\"\n",
    );
    let c = Router::start(&dir, &nodes, 2, "c", &[]);
    let rt = runtime();
    rt.block_on(async {
        let sink = Sink::connect(c.options("sink"), &[0x13]).await.unwrap();
        wait_for("interest to reach A and D", || {
            a.metric("y3_router_federation_remote_interest") >= 1
                && d.metric("y3_router_federation_remote_interest") >= 1
        });
        let n = 20_000;

        // Block: held back, nothing lost.
        let on_c = receiving(sink, n as usize, Duration::from_secs(5));
        send_paced(a.options("held"), 0x13, "held", n, Duration::ZERO).await;
        let (sink, got) = on_c.await.unwrap();
        let held = a.metric("y3_router_federation_held_total");
        eprintln!(
            "block: {} of {n} arrived, source held back {held} times",
            got.len()
        );
        check_exact(&got, &[("held", n)]);
        assert_eq!(a.lost("queue_full"), 0);
        assert_eq!(c.lost("gap"), 0);

        // Drop: what C missed is what D counted.
        let on_c = receiving(sink, n as usize, Duration::from_secs(3));
        send_paced(d.options("dropped"), 0x13, "dropped", n, Duration::ZERO).await;
        let (_sink, got) = on_c.await.unwrap();
        let counted = d.lost("queue_full");
        let t = tally(&got, n);
        eprintln!(
            "drop_oldest: {} of {n} arrived, {counted} counted",
            got.len()
        );
        assert_eq!(t.twice, 0);
        assert_eq!(t.missing.len() as u64, counted, "missed vs counted");
        assert_eq!(d.metric("y3_router_federation_held_total"), 0);
        let order: Vec<u64> = got.iter().map(|(_, i, _)| *i).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "out of order");
    });
    for r in [&a, &c, &d] {
        assert_eq!(r.unaccounted(), 0);
    }
}

/// A router older than batches (a NATS client that announces interest the way such a router
/// does, without `Y3-Reads-Batches`) gets one frame per message; once it announces that it
/// reads batches, every message is a batch (a frame alone a batch of one), and a burst
/// travels in fewer messages than frames; once it announces that it reads packed messages
/// too, every message is packed (no headers). Each announcement adds a tag, so that A's
/// `remote_interest` (tags over routers) tells when A has heard it: one burst then.
#[test]
fn batches_only_to_routers_that_read_them() {
    let dir = temp_dir("negotiate");
    let nodes = cluster(&dir);
    let a = Router::start(&dir, &nodes, 0, "a", &[]);
    let rt = runtime();
    rt.block_on(async {
        let old = async_nats::connect(nodes[1].url()).await.unwrap();
        let mut sub = old.subscribe("y3.tag.20").await.unwrap();
        // 0: older than batches; 1: reads batches; 2: reads batches and packed messages.
        let announce = |reads: usize| {
            let old = old.clone();
            async move {
                let mut h = async_nats::HeaderMap::new();
                if reads >= 1 {
                    h.insert("Y3-Reads-Batches", "1");
                }
                if reads >= 2 {
                    h.insert("Y3-Reads-Packed", "1");
                }
                let tags = ["20", "20,21", "20,21,22"][reads];
                old.publish_with_headers("y3.interest.old", h, tags.into())
                    .await
                    .unwrap();
                old.flush().await.unwrap();
            }
        };
        let mut bursts = Vec::new();
        for reads in 0..3 {
            // Announced again until A, which connects in the background, has heard it (a
            // router announces every 5 s).
            let start = Instant::now();
            loop {
                announce(reads).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                if a.metric("y3_router_federation_remote_interest") > reads as u64 {
                    break;
                }
                assert!(start.elapsed() < WAIT, "A never heard announcement {reads}");
            }
            let source = format!("s{reads}");
            let got = burst(a.options(&source), source, &mut sub).await;
            eprintln!("announcement {reads}: {got:?}");
            bursts.push(got);
        }
        let [old, batches, packed] = bursts[..] else {
            unreachable!()
        };
        assert_eq!(
            old,
            Burst {
                messages: old.frames,
                frames: 3000,
                batches: 0,
                packed: 0
            }
        );
        assert_eq!((batches.batches, batches.packed), (batches.messages, 0));
        assert!(batches.messages < batches.frames, "{batches:?}");
        assert_eq!((packed.batches, packed.packed), (0, packed.messages));
        assert!(packed.messages < packed.frames, "{packed:?}");
    });
    assert_eq!(a.lost("queue_full"), 0);
}

/// What [`burst`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Burst {
    /// NATS messages.
    messages: u64,
    /// Frames in them.
    frames: u64,
    /// Messages with a `Y3-Batch` header (batches of one included).
    batches: u64,
    /// Messages without headers (packed).
    packed: u64,
}

/// Sends 3,000 frames of tag 20 as source `name` without pauses and reads them on `sub`.
async fn burst(options: ClientOptions, name: String, sub: &mut async_nats::Subscriber) -> Burst {
    let n = 3000u64;
    let sent = tokio::spawn(async move {
        send_paced(options, 20, &name, n, Duration::ZERO).await;
    });
    let mut got = Burst {
        messages: 0,
        frames: 0,
        batches: 0,
        packed: 0,
    };
    while got.frames < n {
        let msg = tokio::time::timeout(Duration::from_secs(5), sub.next())
            .await
            .expect("frames stopped")
            .unwrap();
        let batch = msg.headers.as_ref().and_then(|h| h.get("Y3-Batch"));
        let count = match (&msg.headers, batch) {
            (_, Some(count)) => {
                got.batches += 1;
                count.as_str().parse::<u64>().unwrap()
            }
            (Some(h), None) if !h.is_empty() => 1,
            _ => {
                // Packed: "Y3P1" | origin length | origin | epoch | seq | count u16 | ...
                got.packed += 1;
                let body = &msg.payload;
                assert!(body.starts_with(b"Y3P1"), "{body:?}");
                let at = 5 + usize::from(body[4]) + 16;
                u64::from(u16::from_be_bytes([body[at], body[at + 1]]))
            }
        };
        got.messages += 1;
        got.frames += count;
    }
    sent.await.unwrap();
    assert_eq!(got.frames, n);
    got
}

/// Marks (`spec/federation.md`, "Marks"), both ends, with a plain NATS client standing in
/// for the other router: A marks a subject within a period of its last frame, with that
/// frame's `Y3-Seq`, only once the subscriber announces `Y3-Reads-Marks` (none to a router
/// that does not, which would count one as malformed); C counts the frames between the last
/// one it received and a mark as `gap`, once, and a mark with a body as `malformed`.
#[test]
fn marks_only_to_routers_that_read_them_and_a_mark_counts_a_lost_tail() {
    let dir = temp_dir("marks");
    let nodes = cluster(&dir);
    let a = Router::start(&dir, &nodes, 0, "a", &[]);
    let c = Router::start(&dir, &nodes, 2, "c", &[]);
    let rt = runtime();
    rt.block_on(async {
        let other = async_nats::connect(nodes[1].url()).await.unwrap();
        let mut sub = other.subscribe("y3.tag.23").await.unwrap();
        other.flush().await.unwrap();
        let announce = |marks: bool| {
            let other = other.clone();
            async move {
                let mut h = async_nats::HeaderMap::new();
                h.insert("Y3-Reads-Batches", "1");
                h.insert("Y3-Reads-Packed", "1");
                if marks {
                    h.insert("Y3-Reads-Marks", "1");
                }
                other
                    .publish_with_headers("y3.interest.other", h, "23".into())
                    .await
                    .unwrap();
                other.flush().await.unwrap();
            }
        };
        let start = Instant::now();
        while a.metric("y3_router_federation_remote_interest") == 0 {
            announce(false).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(start.elapsed() < WAIT, "A never heard the announcement");
        }
        send_paced(a.options("s"), 23, "s", 100, Duration::ZERO).await;
        // Frames, and nothing else for a second (four marking periods).
        let mut frames = 0u64;
        loop {
            let msg = match tokio::time::timeout(Duration::from_secs(1), sub.next()).await {
                Ok(msg) => msg.unwrap(),
                Err(_) => break,
            };
            let h = msg.headers.as_ref();
            assert!(
                h.is_none_or(|h| h.get("Y3-Mark").is_none()),
                "a mark to a router that does not read them"
            );
            assert!(msg.payload.starts_with(b"Y3P1"), "{msg:?}");
            let at = 5 + usize::from(msg.payload[4]) + 16;
            frames += u64::from(u16::from_be_bytes([msg.payload[at], msg.payload[at + 1]]));
        }
        assert_eq!(frames, 100);
        // Now it reads marks: the next one says 100, with A's stamp.
        announce(true).await;
        let mark = tokio::time::timeout(Duration::from_secs(6), sub.next())
            .await
            .expect("no mark")
            .unwrap();
        let h = mark.headers.as_ref().expect("a mark has headers");
        let get = |n: &str| h.get(n).map(|v| v.as_str().to_owned());
        assert_eq!(get("Y3-Mark").as_deref(), Some("1"));
        assert_eq!(get("Y3-Seq").as_deref(), Some("100"));
        assert_eq!(get("Y3-Origin").as_deref(), Some("a"));
        assert!(mark.payload.is_empty());

        // The receiving end: frames 1..=3 of publisher "z" arrive, 4..=10 are lost, then
        // its mark says 10 (twice: counted once).
        let mut sink = Sink::connect(c.options("sink"), &[24]).await.unwrap();
        wait_for("C's subscription", || {
            c.metric("y3_router_federation_subscriptions") >= 1
        });
        let stamp = |seq: u64| {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Y3-Origin", "z");
            h.insert("Y3-Epoch", "1");
            h.insert("Y3-Seq", seq.to_string().as_str());
            h
        };
        for seq in 1..=3u64 {
            let mut h = stamp(seq);
            h.insert("Y3-Hops", "0");
            let payload = Bytes::from(format!("z:{seq}"));
            other
                .publish_with_headers("y3.tag.24", h, payload)
                .await
                .unwrap();
        }
        for body in ["", "", "not empty"] {
            let mut h = stamp(10);
            h.insert("Y3-Mark", "1");
            other
                .publish_with_headers("y3.tag.24", h, body.into())
                .await
                .unwrap();
        }
        other.flush().await.unwrap();
        let got = receive(&mut sink, 3, Duration::from_secs(2)).await;
        assert_eq!(got.len(), 3);
        wait_for("the malformed mark to be counted", || {
            c.lost("malformed") == 1
        });
        assert_eq!(c.lost("gap"), 7);
        assert_eq!(c.metric("y3_router_federation_received_total"), 3);
    });
    drop((a, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A frame larger than the NATS server's `max_payload` (nats-server's default, 1 MiB; a y3
/// frame may be 16 MiB) crosses to no router: on a plain tag and on a durable one it is
/// counted once, at the publisher, as `too_large` (a durable one at once, not after seconds
/// of publishing it again while the stream's other frames wait, and its durable source is
/// told it was refused as too long rather than left waiting); the frames around it arrive,
/// and the receiver counts no gap for it, marks included.
#[test]
fn frames_over_nats_max_payload_are_counted_once_as_too_large() {
    let dir = temp_dir("maxpayload");
    let nodes = cluster(&dir);
    let a = Router::start(&dir, &nodes, 0, "a", &[0x61]);
    let c = Router::start(&dir, &nodes, 2, "c", &[0x61]);
    let rt = runtime();
    rt.block_on(async {
        let mut plain = Sink::connect(c.options("plain-sink"), &[0x60])
            .await
            .unwrap();
        let mut durable = Sink::connect(c.options("durable-sink"), &[0x61])
            .await
            .unwrap();
        wait_for("interest and the durable consumer", || {
            a.metric("y3_router_federation_remote_interest") >= 1
                && c.metric("y3_router_federation_subscriptions") >= 2
        });
        // The durable tag's source wants stored acknowledgements.
        let mut source = Source::connect(a.options("s")).await.unwrap();
        let mut durable_source = DurableSource::connect(a.options("d")).await.unwrap();
        let big = |mut data: Data, i: u64| {
            if i == 5 {
                data.payload = Bytes::from(vec![b'x'; 2 << 20]);
            }
            data
        };
        for i in 0..10u64 {
            source.send_data(big(frame(0x60, "s", i), i)).await.unwrap();
            durable_source
                .send_data(big(frame(0x61, "s", i), i))
                .await
                .unwrap();
        }
        source.close().await.unwrap();
        // Told, not left waiting: nine stored, the big one refused as too long (so it is
        // not sent again).
        assert!(durable_source
            .wait_stored(Duration::from_secs(20))
            .await
            .unwrap());
        let refused: Vec<_> = durable_source
            .refusals()
            .list()
            .into_iter()
            .map(|r| (r.tid, r.reason))
            .collect();
        assert_eq!(refused, [("s-5".to_owned(), RefusedReason::TooLong)]);
        assert!(!durable_source.close(Duration::from_secs(1)).await.unwrap());
        // The durable frames wait for the new stream's leader (seconds on a loaded machine).
        let want: Vec<String> = (0..10)
            .filter(|&i| i != 5)
            .map(|i| format!("s:{i}"))
            .collect();
        for (sink, what) in [(&mut plain, "plain"), (&mut durable, "durable")] {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut got = Vec::new();
            while got.len() < want.len() && Instant::now() < deadline {
                match tokio::time::timeout(Duration::from_millis(500), sink.recv()).await {
                    Ok(Some(Ok(data))) => {
                        got.push(String::from_utf8(data.payload.to_vec()).unwrap())
                    }
                    Ok(other) => panic!("{what} sink: {other:?}"),
                    Err(_) => {}
                }
            }
            assert_eq!(got, want, "{what}");
        }
        // A mark has had time to arrive: still no gap.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(a.lost("too_large"), 2);
        assert_eq!((a.lost("publish_failed"), c.lost("gap")), (0, 0));
        assert_eq!(c.metric("y3_router_federation_received_total"), 18);
        let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
        assert!(log.contains("max_payload"), "A logs the limit by name");
    });
    drop((a, c, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A durable frame JetStream never stores (here: a NATS server without JetStream) is
/// counted (`publish_failed`) after the publisher's attempts, and a `DurableSource` waiting
/// for it is told it was not stored (`not_stored`), so it sends it again later, rather than
/// its stored count stopping at that frame for as long as the connection lasts.
#[test]
fn a_durable_frame_never_stored_is_sent_again_by_its_durable_source() {
    let dir = temp_dir("nostore");
    let nodes = vec![lone_node(&dir)];
    let mqtt = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let extra =
        format!("[mqtt]\nlisten = \"{mqtt}\"\n[[mqtt.publish]]\ntopic = \"t\"\ntag = 0x62\n");
    let a = Router::start_with(&dir, &nodes, 0, "a", &[0x62], "", &extra);
    let rt = runtime();
    rt.block_on(async {
        wait_for("A connected to NATS", || {
            a.metric("y3_router_federation_connected") == 1
        });
        // MQTT devices publishing QoS 1 on the durable tag, one per version.
        let v5 = tokio::spawn(mqtt_publish_qos1(mqtt, 5));
        let v311 = tokio::spawn(mqtt_publish_qos1(mqtt, 4));
        let mut source = DurableSource::connect(a.options("d")).await.unwrap();
        source.send_data(frame(0x62, "d", 0)).await.unwrap();
        // 20 attempts with pauses of 0.1 to 1 s: about 16 s, then the refusal.
        let start = Instant::now();
        while source.retried() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(40),
                "the durable source was never told"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(a.lost("publish_failed") >= 1);
        assert!(
            source.refusals().list().is_empty(),
            "kept, not refused for good"
        );
        // MQTT 5 hears the failure in its PUBACK; MQTT 3.1.1, whose PUBACK has no code, is
        // disconnected with no PUBACK, to send the publish again.
        assert_eq!(v5.await.unwrap(), Some(0x80), "MQTT 5 PUBACK reason");
        assert_eq!(
            v311.await.unwrap(),
            None,
            "MQTT 3.1.1: closed, not acknowledged"
        );
    });
    drop((a, nodes));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two routers given one `federation.name`: the second refuses to start (exit status 1, a runtime failure,
/// `federation_name_taken`, the name and its holder named) before it publishes anything;
/// the holder counts the refused claim and keeps routing both ways with a third router,
/// every frame once. A message another router publishes under the holder's name (a second
/// router that got through, e.g. started while NATS was down) is counted as `same_name`
/// and raises `name_conflict`, not routed as the holder's own nor dropped silently.
#[test]
fn a_second_router_with_a_name_in_use_refuses_to_start() {
    let dir = temp_dir("same-name");
    let nodes = cluster(&dir);
    let a = Router::start(&dir, &nodes, 0, "a", &[]);
    let b = Router::start(&dir, &nodes, 1, "b", &[]);

    // The impostor: router "a" again, on the third node, once that node has heard of the
    // holder's claim (the cluster tells its nodes of a subscription within milliseconds;
    // two routers starting inside that window is the race the module doc describes).
    wait_for("the claim of \"a\" to reach the third node", || {
        nodes[2].routes_know("y3.name.a")
    });
    let config = dir.join("a-again.toml");
    std::fs::write(
        &config,
        format!(
            "[federation]\nurls = [{:?}]\nname = \"a\"\n",
            nodes[2].url()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let twin_dir = y3_testkit::ServeDir::new("twin").unwrap();
    let mut twin = common::y3();
    twin.args([
        "serve",
        "--tcp",
        "127.0.0.1:0",
        "--quic",
        "",
        "--metrics",
        "",
    ]);
    let child = twin_dir
        .command(&mut twin)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::wait(child, "the second router named a");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("refused in {:?}: {stderr}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains(
            "error: federation_name_taken: federation.name \"a\" is in use by another router \
             (process "
        ),
        "{stderr}"
    );
    assert!(!twin_dir.ready_path().exists(), "it announced itself");
    // One refused claim; its request asked again when an answer came late (a loaded host).
    let refused = a.metric("y3_router_federation_name_claims_refused_total");
    assert!((1..=3).contains(&refused), "{refused} claims refused");
    assert_eq!(
        b.metric("y3_router_federation_name_claims_refused_total"),
        0
    );

    let rt = runtime();
    rt.block_on(async {
        let on_a = Sink::connect(a.options("sink-a"), &[0x30]).await.unwrap();
        let on_b = Sink::connect(b.options("sink-b"), &[0x31]).await.unwrap();
        wait_for("interest to reach A and B", || {
            a.metric("y3_router_federation_remote_interest") >= 1
                && b.metric("y3_router_federation_remote_interest") >= 1
        });
        let n = 200;
        let to_a = receiving(on_a, n as usize, Duration::from_secs(3));
        let to_b = receiving(on_b, n as usize, Duration::from_secs(3));
        tokio::join!(
            send(b.options("from-b"), 0x30, "from-b", n),
            send(a.options("from-a"), 0x31, "from-a", n)
        );
        let (on_a, got) = to_a.await.unwrap();
        check_exact(&got, &[("from-b", n)]);
        let (_on_b, got) = to_b.await.unwrap();
        check_exact(&got, &[("from-a", n)]);

        // Interest announced under A's own name (by someone else): A raises name_conflict
        // and still publishes what it asks for, so that a y3 router there counts each frame
        // (`same_name`, below) instead of never seeing it.
        let other = async_nats::connect(nodes[1].url()).await.unwrap();
        let mut wanted = other.subscribe("y3.tag.50").await.unwrap();
        other.flush().await.unwrap();
        let start = Instant::now();
        while a.metric("y3_router_federation_name_conflict") == 0 {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Y3-Reads-Batches", "1");
            other
                .publish_with_headers("y3.interest.a", h, "50".into())
                .await
                .unwrap();
            other.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(start.elapsed() < WAIT, "A never heard the announcement");
        }
        send(a.options("to-impostor"), 0x32, "to-impostor", 5).await;
        let mut frames = 0;
        while frames < 5 {
            let msg = tokio::time::timeout(Duration::from_secs(5), wanted.next())
                .await
                .expect("A did not publish for the impostor's interest")
                .unwrap();
            frames += msg
                .headers
                .as_ref()
                .and_then(|h| h.get("Y3-Batch"))
                .map_or(1, |v| v.as_str().parse::<u64>().unwrap());
        }
        assert_eq!(frames, 5);

        // Frames under A's own name, published by someone else: counted at A, not routed.
        for seq in 1..=3u64 {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Y3-Origin", "a");
            h.insert("Y3-Epoch", "1");
            h.insert("Y3-Seq", seq.to_string().as_str());
            h.insert("Y3-Hops", "0");
            other
                .publish_with_headers("y3.tag.48", h, "impostor:0".into())
                .await
                .unwrap();
        }
        other.flush().await.unwrap();
        wait_for("the impostor's frames to be counted", || {
            a.lost("same_name") == 3
        });
        let mut on_a = on_a;
        let late = receive(&mut on_a, 1, Duration::from_millis(500)).await;
        assert!(late.is_empty(), "routed as A's own: {late:?}");
    });
    assert_eq!(b.lost("same_name"), 0);
    assert_eq!(b.metric("y3_router_federation_name_conflict"), 0);
    assert_eq!((a.unaccounted(), b.unaccounted()), (0, 0));

    // A holder that crashed does not lock its successor out: SIGKILL, restart at once.
    let mut a = a;
    a.serve.kill();
    let restarted = Instant::now();
    a.serve.restart();
    eprintln!("A restarted after SIGKILL in {:?}", restarted.elapsed());
    assert!(restarted.elapsed() < WAIT);
    assert_eq!(
        b.metric("y3_router_federation_name_claims_refused_total"),
        0
    );
}

/// Frames arriving over the federation meet the same metadata limits as a direct
/// client's (`limits.max_metadata_bytes`, `max_metadata_entries`): router A, configured
/// with 8× the default limits, federates frames with 2,000 metadata pairs that router B
/// (defaults: 1,024 pairs) refuses at its link, counted as
/// `lost_total{reason="metadata_too_large"}`, while the ordinary frames between them reach
/// B's sink, each once; B's ledger stays at 0.
#[test]
fn frames_over_the_metadata_limits_are_refused_at_the_federation_link() {
    let dir = temp_dir("metadata-limits");
    let nodes = cluster(&dir);
    let wide = "[limits]\nmax_metadata_entries = 8192\nmax_metadata_bytes = 524288\n";
    let a = Router::start_with(&dir, &nodes, 0, "a", &[], "", wide);
    let b = Router::start(&dir, &nodes, 1, "b", &[]);
    let rt = runtime();
    let n = 200u64;
    let got = rt.block_on(async {
        let sink = Sink::connect(b.options("sink"), &[0x70]).await.unwrap();
        wait_for("interest to reach A", || {
            a.metric("y3_router_federation_remote_interest") >= 1
        });
        let on_b = receiving(sink, n as usize, Duration::from_secs(3));
        let mut source = Source::connect(a.options("wide")).await.unwrap();
        let keys: Vec<String> = (0..2000).map(|k| format!("k{k}")).collect();
        let big = Metadata::from_pairs(keys.iter().map(|k| (k.as_str(), "v")));
        for i in 0..2 * n {
            let data = if i % 2 == 0 {
                frame(0x70, "s", i / 2)
            } else {
                Data::new(0x70, Bytes::from(format!("big:{i}"))).with_metadata(big.clone())
            };
            source.send_data(data).await.unwrap();
            if i % 50 == 49 {
                source.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        source.close().await.unwrap();
        let (_sink, got) = on_b.await.unwrap();
        got
    });
    check_exact(&got, &[("s", n)]);
    wait_for("B to count every refused frame", || {
        b.lost("metadata_too_large") >= n
    });
    let refused = b.lost("metadata_too_large");
    eprintln!(
        "B: {} frames routed from the federation, {refused} refused (metadata_too_large)",
        got.len()
    );
    assert_eq!(refused, n);
    assert_eq!(a.lost("metadata_too_large"), 0);
    assert_eq!(b.unaccounted(), 0);
}
