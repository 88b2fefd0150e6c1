//! The Rust SDK (`y3_transport::sdk`) with YoMo v1.22's own zipper and clients: pipelines
//! mixing YoMo's clients and Rust's both ways, targets, and a refused token, through a real
//! YoMo zipper and, for symmetry, through `y3 serve`.
//!
//! YoMo's side is `yomo-peer` (`interop/yomo/cmd/yomo-peer`: YoMo's zipper, source and
//! stream functions with JSON reports on stdout), built once per test run with `go build`:
//! these tests need Go. Everything runs on loopback, every wait is bounded, and every child
//! process is killed when its handle drops.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::serve::{Launch, Serve};
use serde_json::Value;
use tokio::runtime::Runtime;
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{
    new_id, Backoff, ClientOptions, Sink, Source, StreamFunction, Transport, Writer,
};
use y3_transport::tls::Trust;
use y3_transport::{Data, GoawayCode, TransportError};

/// Bound of every wait for a process or a frame.
const WAIT: Duration = Duration::from_secs(15);
/// Bound of `go build` (a first build also downloads YoMo's module).
const BUILD_WAIT: Duration = Duration::from_secs(300);
/// How long to wait for frames that must NOT arrive.
const SETTLE: Duration = Duration::from_millis(300);
/// Sequence numbers from here on are probes, sent until a path is known to work.
const PROBE: u64 = 1_000_000;

/// The router under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// YoMo v1.22.0's zipper: `yomo-peer zipper`.
    YoMo,
    /// `y3 serve`.
    Y3,
}

const KINDS: [Kind; 2] = [Kind::YoMo, Kind::Y3];

/// `yomo-peer`, built once into the cargo target's test directory.
fn yomo_peer() -> &'static Path {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BIN.get_or_init(build_yomo_peer) {
        Ok(bin) => bin,
        Err(e) => panic!("{e}"),
    }
}

fn build_yomo_peer() -> Result<PathBuf, String> {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/yomo");
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("yomo-peer");
    let child = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg("./cmd/yomo-peer")
        .current_dir(&module)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "`go` is not on PATH: the YoMo interop tests \
                 (crates/y3-cli/tests/yomo.rs) build interop/yomo/cmd/yomo-peer and need Go \
                 1.25 or later"
                .to_owned(),
            _ => format!("cannot run `go build`: {e}"),
        })?;
    let mut build = Proc::new("go build ./cmd/yomo-peer", child);
    match build.exit(BUILD_WAIT) {
        Some(0) => Ok(bin),
        code => Err(format!(
            "go build ./cmd/yomo-peer in {} failed (exit {code:?}):\n{}",
            module.display(),
            build.stderr()
        )),
    }
}

/// A child process: stdout lines through a channel, stderr kept, killed on drop.
struct Proc {
    what: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr piped.
    fn spawn(what: impl Into<String>, cmd: &mut Command) -> Proc {
        let what = what.into();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        Proc::new(what, child)
    }

    fn new(what: impl Into<String>, mut child: Child) -> Proc {
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf) {
                    lock(&stderr).push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
        }
        Proc {
            what: what.into(),
            child,
            lines,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        lock(&self.stderr).clone()
    }

    /// The first stdout line starting with `prefix` (others are skipped).
    fn line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(e) => panic!(
                    "{}: no line starting {prefix:?} ({e:?})\nstderr:\n{}",
                    self.what,
                    self.stderr()
                ),
            }
        }
    }

    /// Waits at most `timeout` for the process to exit: its status code (`None`: killed by
    /// a signal, or by us after the timeout).
    fn exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads stdout to its end and waits for the exit: the last line as JSON (`yomo-peer`'s
    /// summary) and the exit status.
    fn report(&mut self) -> (Value, Option<i32>) {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => last = line,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "{}: no end of output within {WAIT:?}\nstderr:\n{}",
                        self.what,
                        self.stderr()
                    )
                }
            }
        }
        let code = self.exit(WAIT);
        let report = serde_json::from_str(&last).unwrap_or_else(|e| {
            panic!(
                "{}: last line {last:?} is not JSON ({e})\nstderr:\n{}",
                self.what,
                self.stderr()
            )
        });
        (report, code)
    }

    /// SIGTERM (`yomo-peer` then prints its summary and exits), as router.rs sends it.
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {}", self.what);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked, which fails the test anyway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `yomo-peer` subcommand (`source`, `sfn`, `sink`, `zipper`).
fn yomo(args: &[&str]) -> Proc {
    Proc::spawn(
        format!("yomo-peer {}", args.join(" ")),
        Command::new(yomo_peer()).args(args),
    )
}

/// A running router: YoMo's zipper or `y3 serve` (through its ready file), killed on drop.
struct Router {
    _running: Running,
    /// Its QUIC address.
    addr: SocketAddr,
}

/// The process behind a [`Router`], kept until it is dropped.
enum Running {
    YoMo(#[allow(dead_code)] Proc),
    Y3(#[allow(dead_code)] Box<Serve>),
}

impl Router {
    fn start(kind: Kind, token: &str) -> Router {
        match kind {
            Kind::YoMo => {
                let proc = yomo(&["zipper", "--addr", "127.0.0.1:0", "--token", token]);
                // {"listening":"127.0.0.1:PORT"}
                let ready: Value = serde_json::from_str(&proc.line("{\"listening\"")).unwrap();
                let addr = ready["listening"].as_str().unwrap().parse().unwrap();
                Router {
                    _running: Running::YoMo(proc),
                    addr,
                }
            }
            Kind::Y3 => {
                let serve = Launch::default()
                    .metrics("")
                    .args(["--token", token])
                    .start();
                let addr = serve.quic.expect("QUIC on");
                Router {
                    _running: Running::Y3(Box::new(serve)),
                    addr,
                }
            }
        }
    }

    /// How a Rust client named `name` reaches this router: QUIC, any certificate (YoMo's
    /// zipper serves a self-signed one), `token`.
    fn client(&self, name: &str, token: &str) -> ClientOptions {
        ClientOptions::new(self.addr)
            .transport(Transport::Quic)
            .trust(Trust::Insecure)
            .name(name)
            .token(token)
            .backoff(Backoff {
                initial: Duration::from_millis(100),
                max: Duration::from_secs(1),
                attempts: 5,
            })
    }

    /// `--addr A --token T`, for `yomo-peer`'s clients.
    fn yomo_args(&self, token: &str) -> [String; 4] {
        [
            "--addr".into(),
            self.addr.to_string(),
            "--token".into(),
            token.into(),
        ]
    }
}

/// A `yomo-peer` client (`source`, `sfn`, `sink`) of `router` with `args`.
fn yomo_client(router: &Router, token: &str, command: &str, args: &[&str]) -> Proc {
    let common = router.yomo_args(token);
    let mut all = vec![command];
    all.extend(common.iter().map(String::as_str));
    all.extend(args);
    yomo(&all)
}

/// A `yomo-peer` payload: 8-byte big-endian sequence number, 8-byte big-endian send time
/// (Unix nanoseconds), zeros up to `size`.
fn stamp(seq: u64, size: usize) -> Vec<u8> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut payload = Vec::with_capacity(size.max(16));
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.extend_from_slice(&nanos.to_be_bytes());
    payload.resize(size.max(16), 0);
    payload
}

/// The sequence number of a stamped payload.
fn seq_of(payload: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(payload.get(..8)?.try_into().ok()?))
}

/// A metadata value, "" when absent.
fn meta(data: &Data, key: &str) -> String {
    match data.metadata.get(key) {
        Ok(value) => value.unwrap_or_default().to_owned(),
        Err(e) => panic!("bad metadata {:?}: {e}", data.metadata),
    }
}

/// The next frame of `sink`, at most [`WAIT`] away.
async fn next(sink: &mut Sink) -> Data {
    match tokio::time::timeout(WAIT, sink.recv()).await {
        Ok(Some(Ok(data))) => data,
        Ok(other) => panic!("sink ended: {other:?}"),
        Err(_) => panic!("no frame within {WAIT:?}"),
    }
}

/// Fails if `sink` receives anything within [`SETTLE`].
async fn nothing_more(sink: &mut Sink) {
    if let Ok(extra) = tokio::time::timeout(SETTLE, sink.recv()).await {
        panic!("unexpected frame: {extra:?}");
    }
}

/// What the Rust stream function of [`yomo_source_to_rust_function_to_yomo_sink`] saw.
#[derive(Default)]
struct Relayed {
    /// `(seq, yomo-tid, yomo-source-id)` of every message, probes left out.
    frames: Vec<(u64, String, String)>,
    /// Whether a probe arrived.
    probed: bool,
}

/// A YoMo source's 300 messages go through a Rust stream function, which re-emits each
/// under another tag, to a YoMo sink: every message exactly once, with the source's
/// metadata (its `yomo-source-id`, one `yomo-tid` per message) carried across the Rust
/// function.
#[test]
fn yomo_source_to_rust_function_to_yomo_sink() {
    const N: usize = 300;
    let rt = Runtime::new().unwrap();
    for kind in KINDS {
        let router = Router::start(kind, "t");
        let count = N.to_string();
        let mut sink = yomo_client(
            &router,
            "t",
            "sink",
            &["--observe", "0x34", "--count", &count, "--timeout-s", "15"],
        );
        sink.line("{\"connected\"");

        let seen: Arc<Mutex<Relayed>> = Arc::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let function = StreamFunction::new(router.client("rust-relay", "t"), &[0x33]);
        let handler_seen = seen.clone();
        let relay = rt.spawn(function.run_until(
            move |data: Data| {
                let seen = handler_seen.clone();
                async move {
                    let seq = seq_of(&data.payload)?;
                    let mut seen = lock(&seen);
                    if seq >= PROBE {
                        seen.probed = true;
                        return None;
                    }
                    let ids = (meta(&data, metadata::TID), meta(&data, metadata::SOURCE_ID));
                    seen.frames.push((seq, ids.0, ids.1));
                    Some((0x34, data.payload))
                }
            },
            async {
                let _ = stopped.await;
            },
        ));
        // The function says nothing once connected: probe until it has seen a probe (it
        // does not re-emit probes).
        let probe = rt.block_on(async {
            let mut probe = Source::connect(router.client("rust-probe", "t"))
                .await
                .unwrap();
            let start = Instant::now();
            for seq in PROBE.. {
                probe.send(0x33, stamp(seq, 32)).await.unwrap();
                probe.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                if lock(&seen).probed {
                    break;
                }
                assert!(
                    start.elapsed() < WAIT,
                    "{kind:?}: the Rust function got no probe"
                );
            }
            probe
        });
        // Closing a client lingers (up to 2 s against YoMo's zipper, which never closes
        // first): in the background, while YoMo's clients run.
        let probe = rt.spawn(probe.close());

        let mut source = yomo_client(
            &router,
            "t",
            "source",
            &["--tag", "0x33", "--count", &count, "--size", "64"],
        );
        let (report, code) = source.report();
        assert_eq!(code, Some(0), "{kind:?} source: {report}");
        assert_eq!(report["sent"], N, "{kind:?} source: {report}");
        let (report, code) = sink.report();
        assert_eq!(code, Some(0), "{kind:?} sink: {report}");
        for (key, want) in [
            ("received", Value::from(N)),
            ("unique", N.into()),
            ("missing", 0.into()),
            ("duplicates", 0.into()),
            ("bad_payloads", 0.into()),
            ("tid_ok", true.into()),
            ("source_id_ok", true.into()),
            ("distinct_tids", N.into()),
        ] {
            assert_eq!(report[key], want, "{kind:?} sink {key}: {report}");
        }
        assert_eq!(report["tags"], serde_json::json!({ "0x34": N }), "{report}");
        let source_ids = report["source_ids"].as_array().expect("source_ids");
        assert_eq!(source_ids.len(), 1, "{kind:?}: {report}");

        stop.send(()).unwrap();
        let (relay, probe) = rt.block_on(async {
            tokio::join!(
                tokio::time::timeout(WAIT, relay),
                tokio::time::timeout(WAIT, probe)
            )
        });
        assert!(
            matches!(relay, Ok(Ok(Ok(())))),
            "{kind:?} function: {relay:?}"
        );
        assert!(matches!(probe, Ok(Ok(Ok(())))), "{kind:?} probe: {probe:?}");
        // What the Rust function saw: every message once, the source's id on each (the one
        // the sink saw after the function re-emitted it), a distinct yomo-tid on each.
        let seen = lock(&seen);
        let seqs: BTreeSet<u64> = seen.frames.iter().map(|s| s.0).collect();
        assert_eq!(seen.frames.len(), N, "{kind:?}");
        assert_eq!(seqs, (0..N as u64).collect(), "{kind:?}");
        let tids: BTreeSet<&str> = seen.frames.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(tids.len(), N, "{kind:?}: one yomo-tid per message");
        assert!(!tids.contains(""), "{kind:?}: a frame without yomo-tid");
        for (_, _, source_id) in &seen.frames {
            assert_eq!(source_id.as_str(), source_ids[0], "{kind:?}");
        }
    }
}

/// A Rust source's 300 messages go through a YoMo stream function, which re-emits each
/// under another tag with `ctx.Write`, to a Rust sink: every message exactly once, payload
/// unchanged, metadata kept (source id, each message's `yomo-tid`, a custom key).
#[test]
fn rust_source_to_yomo_function_to_rust_sink() {
    const N: usize = 300;
    let rt = Runtime::new().unwrap();
    for kind in KINDS {
        let router = Router::start(kind, "t");
        let mut sink = rt
            .block_on(Sink::connect(router.client("rust-sink", "t"), &[0x36]))
            .unwrap();
        let count = N.to_string();
        let mut relay = yomo_client(
            &router,
            "t",
            "sfn",
            &[
                "--observe",
                "0x35",
                "--emit",
                "0x36",
                "--exit-after",
                &count,
            ],
        );
        relay.line("{\"connected\"");

        rt.block_on(async {
            let mut source = Source::connect(router.client("rust-source", "t"))
                .await
                .unwrap();
            let id = source.id().to_owned();
            let mut sent = BTreeMap::new();
            for seq in 0..N as u64 {
                let tid = new_id();
                let metadata = Metadata::from_pairs([
                    (metadata::SOURCE_ID, id.as_str()),
                    (metadata::TID, tid.as_str()),
                    ("x-y3-test", "kept"),
                ]);
                let payload = stamp(seq, 64);
                let data = Data::new(0x35, payload.clone()).with_metadata(metadata);
                source.send_data(data).await.unwrap();
                sent.insert(seq, (tid, payload));
            }
            source.flush().await.unwrap();

            let mut got = BTreeSet::new();
            while got.len() < N {
                let data = next(&mut sink).await;
                let seq = seq_of(&data.payload).expect("stamped payload");
                let (tid, payload) = &sent[&seq];
                assert_eq!(data.tag, 0x36, "{kind:?}: {data:?}");
                assert_eq!(&data.payload[..], &payload[..], "{kind:?}: seq {seq}");
                assert_eq!(meta(&data, metadata::SOURCE_ID), id, "{kind:?}: {data:?}");
                assert_eq!(&meta(&data, metadata::TID), tid, "{kind:?}: {data:?}");
                assert_eq!(meta(&data, "x-y3-test"), "kept", "{kind:?}: {data:?}");
                // YoMo's stream functions clear the target of what they write.
                assert_eq!(meta(&data, metadata::TARGET), "", "{kind:?}: {data:?}");
                assert!(got.insert(seq), "{kind:?}: seq {seq} twice");
            }
            nothing_more(&mut sink).await;
            // Closing lingers (up to 2 s against YoMo's zipper): both at once.
            let (closed, ()) = tokio::join!(source.close(), sink.close());
            closed.unwrap();
        });
        let (report, code) = relay.report();
        assert_eq!(code, Some(0), "{kind:?} sfn: {report}");
        assert_eq!(report["relayed"], N, "{kind:?} sfn: {report}");
        assert_eq!(report["errors"], 0, "{kind:?} sfn: {report}");
    }
}

/// `Source::send_with_target` reaches only the YoMo stream function wanting that target;
/// a target nobody wants reaches nobody; `Source::send` (no target) reaches both. The two
/// YoMo functions re-emit under tags of their own to one Rust sink.
#[test]
fn rust_targets_reach_only_the_yomo_functions_wanting_them() {
    const N: u64 = 50;
    let rt = Runtime::new().unwrap();
    for kind in KINDS {
        let router = Router::start(kind, "t");
        let mut sink = rt
            .block_on(Sink::connect(
                router.client("rust-sink", "t"),
                &[0x37, 0x38],
            ))
            .unwrap();
        let relays: Vec<Proc> = [("a", "0x37"), ("b", "0x38")]
            .into_iter()
            .map(|(target, emit)| {
                let name = format!("relay-{target}");
                let relay = yomo_client(
                    &router,
                    "t",
                    "sfn",
                    &[
                        "--observe",
                        "0x35",
                        "--emit",
                        emit,
                        "--wanted-target",
                        target,
                        "--name",
                        &name,
                    ],
                );
                relay.line("{\"connected\"");
                relay
            })
            .collect();

        // Seqs [0, N) for a, [N, 2N) for b, [2N, 3N) for nobody, [3N, 4N) for everyone.
        let got = rt.block_on(async {
            let mut source = Source::connect(router.client("rust-source", "t"))
                .await
                .unwrap();
            for seq in 0..4 * N {
                let payload = stamp(seq, 32);
                match seq / N {
                    0 => source.send_with_target(0x35, payload, "a").await,
                    1 => source.send_with_target(0x35, payload, "b").await,
                    2 => source.send_with_target(0x35, payload, "nobody").await,
                    _ => source.send(0x35, payload).await,
                }
                .unwrap();
            }
            source.flush().await.unwrap();
            let mut got: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for _ in 0..4 * N {
                let data = next(&mut sink).await;
                let seq = seq_of(&data.payload).expect("stamped payload");
                got.entry(data.tag).or_default().push(seq);
            }
            nothing_more(&mut sink).await;
            // Closing lingers (up to 2 s against YoMo's zipper): both at once.
            let (closed, ()) = tokio::join!(source.close(), sink.close());
            closed.unwrap();
            got
        });
        let sorted = |tag: u32| {
            let mut seqs = got.get(&tag).cloned().unwrap_or_default();
            seqs.sort_unstable();
            seqs
        };
        let want_a: Vec<u64> = (0..N).chain(3 * N..4 * N).collect();
        let want_b: Vec<u64> = (N..2 * N).chain(3 * N..4 * N).collect();
        assert_eq!(
            sorted(0x37),
            want_a,
            "{kind:?}: what relay-a (target a) got"
        );
        assert_eq!(
            sorted(0x38),
            want_b,
            "{kind:?}: what relay-b (target b) got"
        );

        for mut relay in relays {
            relay.terminate();
            let (report, code) = relay.report();
            assert_eq!(code, Some(0), "{kind:?} {}: {report}", relay.what);
            assert_eq!(
                report["received"],
                2 * N,
                "{kind:?} {}: {report}",
                relay.what
            );
        }
    }
}

/// A Rust stream function writes 300 outputs per input with `Writer::write` (YoMo's
/// `ctx.Write` in a loop) and one with `Writer::write_with_target` to target "a": a Rust
/// sink gets every one of the 3 × 300 outputs exactly once, each with its input's
/// `yomo-tid` and the source's id; the targeted output reaches only the YoMo function that
/// wants "a" (3 frames), never the one that wants "b" (0).
///
/// On `y3 serve`'s defaults this needs the router to cap loops per cycle rather than
/// deliveries per `yomo-tid` (`limits.max_deliveries_per_message`, 128 before).
#[test]
fn rust_function_writes_300_outputs_per_input_and_one_to_a_target() {
    const INPUTS: u64 = 3;
    const FAN_OUT: u64 = 300;
    let rt = Runtime::new().unwrap();
    for kind in KINDS {
        let router = Router::start(kind, "t");
        let mut sink = rt
            .block_on(Sink::connect(
                router.client("rust-sink", "t"),
                &[0x41, 0x47, 0x48],
            ))
            .unwrap();
        let relays: Vec<Proc> = [("a", "0x47"), ("b", "0x48")]
            .into_iter()
            .map(|(target, emit)| {
                let name = format!("relay-{target}");
                let args = [
                    "--observe",
                    "0x42",
                    "--emit",
                    emit,
                    "--wanted-target",
                    target,
                    "--name",
                    &name,
                ];
                let relay = yomo_client(&router, "t", "sfn", &args);
                relay.line("{\"connected\"");
                relay
            })
            .collect();

        let probed = Arc::new(Mutex::new(false));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let function = StreamFunction::new(router.client("rust-splitter", "t"), &[0x40]);
        let handler_probed = probed.clone();
        let splitter = rt.spawn(function.run_with_writer_until(
            move |data: Data, out: Writer| {
                let probed = handler_probed.clone();
                async move {
                    let Some(seq) = seq_of(&data.payload) else {
                        return;
                    };
                    if seq >= PROBE {
                        *lock(&probed) = true;
                        return;
                    }
                    for i in 0..FAN_OUT {
                        out.write(0x41, stamp(seq * 1000 + i, 32)).await.unwrap();
                    }
                    out.write_with_target(0x42, data.payload, "a")
                        .await
                        .unwrap();
                }
            },
            async {
                let _ = stopped.await;
            },
        ));

        let got = rt.block_on(async {
            let mut source = Source::connect(router.client("rust-source", "t"))
                .await
                .unwrap();
            // The function says nothing once connected: probe until it has seen a probe.
            let start = Instant::now();
            for seq in PROBE.. {
                source.send(0x40, stamp(seq, 32)).await.unwrap();
                source.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                if *lock(&probed) {
                    break;
                }
                assert!(
                    start.elapsed() < WAIT,
                    "{kind:?}: the function got no probe"
                );
            }
            let id = source.id().to_owned();
            let mut tids = BTreeMap::new();
            for seq in 0..INPUTS {
                let tid = new_id();
                let metadata = Metadata::from_pairs([
                    (metadata::SOURCE_ID, id.as_str()),
                    (metadata::TID, tid.as_str()),
                ]);
                let data = Data::new(0x40, stamp(seq, 32)).with_metadata(metadata);
                source.send_data(data).await.unwrap();
                tids.insert(seq, tid);
            }
            source.flush().await.unwrap();

            let mut got: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
            for _ in 0..INPUTS * (FAN_OUT + 1) {
                let data = next(&mut sink).await;
                let seq = seq_of(&data.payload).expect("stamped payload");
                let input = if data.tag == 0x41 { seq / 1000 } else { seq };
                assert_eq!(
                    meta(&data, metadata::TID),
                    tids[&input],
                    "{kind:?}: {data:?}"
                );
                assert_eq!(meta(&data, metadata::SOURCE_ID), id, "{kind:?}: {data:?}");
                assert_eq!(meta(&data, metadata::TARGET), "", "{kind:?}: {data:?}");
                let fresh = got.entry(data.tag).or_default().insert(seq);
                assert!(fresh, "{kind:?}: {:#x} seq {seq} twice", data.tag);
            }
            nothing_more(&mut sink).await;
            let (closed, ()) = tokio::join!(source.close(), sink.close());
            closed.unwrap();
            got
        });
        let fanned: BTreeSet<u64> = (0..INPUTS)
            .flat_map(|seq| (0..FAN_OUT).map(move |i| seq * 1000 + i))
            .collect();
        assert_eq!(got.get(&0x41), Some(&fanned), "{kind:?}: the 900 outputs");
        let inputs: BTreeSet<u64> = (0..INPUTS).collect();
        assert_eq!(
            got.get(&0x47),
            Some(&inputs),
            "{kind:?}: relay-a (target a)"
        );
        assert_eq!(got.get(&0x48), None, "{kind:?}: relay-b (target b)");

        stop.send(()).unwrap();
        let splitter = rt.block_on(async { tokio::time::timeout(WAIT, splitter).await });
        assert!(
            matches!(splitter, Ok(Ok(Ok(())))),
            "{kind:?} function: {splitter:?}"
        );
        for (mut relay, want) in relays.into_iter().zip([INPUTS, 0]) {
            relay.terminate();
            let (report, code) = relay.report();
            assert_eq!(code, Some(0), "{kind:?} {}: {report}", relay.what);
            assert_eq!(
                report["received"], want,
                "{kind:?} {}: {report}",
                relay.what
            );
        }
    }
}

/// A wrong token: YoMo's zipper refuses the handshake with a RejectedFrame that carries no
/// y3 code, which the Rust clients return as a `Goaway` of kind `rejected`, not retried
/// (y3 says `unauthorized`). The right token still connects.
#[test]
fn wrong_token_is_a_typed_refusal() {
    let rt = Runtime::new().unwrap();
    for (kind, code) in [
        (Kind::YoMo, GoawayCode::Unspecified),
        (Kind::Y3, GoawayCode::Unauthorized),
    ] {
        let router = Router::start(kind, "right");
        rt.block_on(async {
            let start = Instant::now();
            let check = |what: &str, result: Result<(), TransportError>| match result {
                Err(e @ TransportError::Goaway { .. }) => {
                    let TransportError::Goaway { code: got, .. } = &e else {
                        unreachable!()
                    };
                    assert_eq!(*got, code, "{kind:?} {what}: {e}");
                    assert_eq!(e.kind(), code.kind(), "{kind:?} {what}: {e}");
                    assert!(!e.is_retryable(), "{kind:?} {what}: {e}");
                }
                other => panic!("{kind:?} {what} with a wrong token: {other:?}"),
            };
            let source = Source::connect(router.client("rust-source", "wrong")).await;
            check("source", source.map(drop));
            let sink = Sink::connect(router.client("rust-sink", "wrong"), &[0x33]).await;
            check("sink", sink.map(drop));
            let function = StreamFunction::new(router.client("rust-sfn", "wrong"), &[0x33]);
            check("function", function.run(|_| async { None }).await);
            // Refusals are not retried: three clients in far less than one backoff round.
            assert!(start.elapsed() < Duration::from_secs(3), "{kind:?}");

            // Dropped, not closed: closing would linger up to 2 s for YoMo's zipper.
            let source = Source::connect(router.client("rust-source", "right")).await;
            drop(source.unwrap());
        });
    }
    assert_eq!(GoawayCode::Unspecified.kind(), "rejected");
}
