//! YoMo's own software against `y3 serve` (issue 12's benchmark): the same workloads on
//! YoMo's zipper and on y3's router, driven by YoMo's own Go clients, then by y3's clients.
//!
//! Two workloads, at each payload size (64 B and 1 KiB by default):
//!
//! ```text
//! sink:   source ──0x33──▶ router ──0x33──▶ sink
//! relay:  source ──0x33──▶ router ──0x33──▶ relay ──0x34──▶ router ──0x34──▶ sink
//! ```
//!
//! Rows, each a router and the clients that drive it ([`ROWS`]):
//!
//! - `yomo-zipper`: YoMo's zipper (`yomo-peer zipper`, YoMo v1.22.0 built from the module
//!   in `interop/yomo`, log level error) with YoMo's own clients (`yomo-peer
//!   source|sfn|sink`: `yomo.NewSource`, `yomo.NewStreamFunction`);
//! - `y3-yomo-clients`: `y3 serve` (the release build, QUIC) with the same YoMo clients;
//! - `y3-quic`, `y3-tcp`: `y3 serve` with y3's own clients (the SDK's `Source`,
//!   `StreamFunction` and `Sink`, run as `y3-lab net client y3-source|y3-relay|y3-sink`)
//!   over QUIC and over TCP.
//!
//! Every router and client is a child process on 127.0.0.1. `y3 serve` gets a configuration
//! file with its `[queue] block_timeout_ms` (y3's default 250 ms unless the command line
//! says otherwise; see [`Options::block_timeout_ms`]). Each run starts a fresh router per
//! phase:
//!
//! 1. **flat out**: the sink (and relay) connect; then the source writes `messages` stamped
//!    messages as fast as its client goes. msg/s is the sink's: messages received over the
//!    time from the first arrival to the last. Router CPU: user + system time of the router
//!    process ([`proc::cpu_seconds`]: its threads' `/proc/PID/task/*/schedstat`) from just
//!    before the source starts to the sink's report, divided by the frames routed (one per
//!    message, two through the relay).
//! 2. **paced**: fresh router and clients, `paced` messages at `rate` msg/s; one-way latency
//!    p50/p99/p999 as the sink reports it (arrival minus the send time stamped in the
//!    payload, one host clock, nearest rank).
//!
//! y3's clients speak `yomo-peer`'s line protocol (JSON on stdout: `{"connected":ADDR}`,
//! then a summary with the same keys) and stamp payloads the same way, so one driver reads
//! both: a client kind is a row, not a copied block.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use tokio_util::bytes::Bytes;
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Transport};
use y3_transport::tls::Trust;

use crate::measure::median;
use crate::net::proc::{self, Child};
use crate::net::Programs;
use crate::record::{Dim, Metric, Record, Results};
use y3_testkit::ServeDir;

/// The tag sources write (and sinks observe in the `sink` workload).
pub const TAG_IN: u32 = 0x33;
/// The tag the relay emits (and sinks observe in the `relay` workload).
pub const TAG_OUT: u32 = 0x34;
/// Bytes of the stamp at the start of every payload: sequence number and send time.
pub const STAMP_LEN: usize = 16;
/// What y3's relay sends itself on its observed tag until it sees it come back (shorter
/// than a stamp, so never relayed or counted).
const PROBE: &[u8] = b"y3-lab-probe";
/// How long a client may take to connect and report `connected`.
pub(crate) const CONNECT: Duration = Duration::from_secs(20);

/// A workload: what sits between the source and the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// source → sink.
    Sink,
    /// source → relay stream function → sink.
    Relay,
}

impl Workload {
    /// Both, in report order.
    pub const ALL: [Workload; 2] = [Workload::Sink, Workload::Relay];

    /// `sink` or `relay`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Sink => "sink",
            Workload::Relay => "relay",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Frames the router routes per message: the source's, plus the relay's.
    pub fn frames_per_message(self) -> u64 {
        match self {
            Workload::Sink => 1,
            Workload::Relay => 2,
        }
    }

    /// The tag the sink observes.
    fn sink_tag(self) -> u32 {
        match self {
            Workload::Sink => TAG_IN,
            Workload::Relay => TAG_OUT,
        }
    }
}

/// The router of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Router {
    /// `yomo-peer zipper`.
    Zipper,
    /// `y3 serve`.
    Y3,
}

/// The clients of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clients {
    /// `yomo-peer source|sfn|sink` (QUIC).
    Yomo,
    /// `y3-lab net client y3-source|y3-relay|y3-sink` over this adapter.
    Y3(Transport),
}

/// One row of the report: a router and the clients driving it.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The row's name.
    pub name: &'static str,
    pub(crate) router: Router,
    pub(crate) clients: Clients,
}

/// The rows, in display order.
pub const ROWS: [Row; 4] = [
    Row {
        name: "yomo-zipper",
        router: Router::Zipper,
        clients: Clients::Yomo,
    },
    Row {
        name: "y3-yomo-clients",
        router: Router::Y3,
        clients: Clients::Yomo,
    },
    Row {
        name: "y3-quic",
        router: Router::Y3,
        clients: Clients::Y3(Transport::Quic),
    },
    Row {
        name: "y3-tcp",
        router: Router::Y3,
        clients: Clients::Y3(Transport::Tcp),
    },
];

/// Options of the yomo suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Payload sizes (at least [`STAMP_LEN`]).
    pub sizes: Vec<usize>,
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Messages, pacing and runs.
    pub load: crate::net::Load,
    /// Only rows whose name contains one of these.
    pub only: Vec<String>,
    /// `--quick`.
    pub quick: bool,
    /// The command line.
    pub command: String,
    /// The running lab binary.
    pub programs: Programs,
    /// The Go module with `cmd/yomo-peer` (`interop/yomo`).
    pub yomo_dir: PathBuf,
    /// `y3 serve`'s `[queue] block_timeout_ms` (written by `serve_config`).
    pub block_timeout_ms: u64,
}

// ---------------------------------------------------------------------------------------
// The line protocol of yomo-peer (and of y3's clients here)

/// A source's summary (`yomo-peer source`, `y3-lab net client y3-source`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceReport {
    /// Writes that returned no error.
    pub sent: u64,
    /// Writes that returned an error.
    pub errors: u64,
    /// First write to the return of the last.
    pub seconds: f64,
    /// `sent / seconds`.
    pub msg_per_s: f64,
    /// The first error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A sink's summary (`yomo-peer sink`, `y3-lab net client y3-sink`); the keys the lab
/// reads (yomo-peer prints more).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Frames, duplicates included.
    pub received: u64,
    /// Distinct sequence numbers.
    pub unique: u64,
    /// Sequence numbers in `[0, count)` never seen.
    pub missing: u64,
    /// Frames whose sequence number had arrived before.
    pub duplicates: u64,
    /// One-way latency percentiles (nearest rank), µs.
    pub p50_us: f64,
    /// See [`p50_us`](Self::p50_us).
    pub p99_us: f64,
    /// See [`p50_us`](Self::p50_us).
    pub p999_us: f64,
    /// The largest latency, µs.
    pub max_us: f64,
    /// First frame to last.
    pub seconds: f64,
    /// `received / seconds`.
    pub msg_per_s: f64,
    /// `timeout`, or a connect error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one stdout line of a client or zipper says.
#[derive(Debug, Clone, PartialEq)]
enum Line {
    /// A JSON object with the awaited key.
    Found(serde_json::Value),
    /// A JSON object with only an error.
    Failed(String),
    /// Anything else (YoMo's clients print status lines).
    Other,
}

/// Reads one line: the object with `key`, an error object, or something else.
fn classify(line: &str, key: &str) -> Line {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(line) else {
        return Line::Other;
    };
    if map.contains_key(key) {
        return Line::Found(serde_json::Value::Object(map));
    }
    match map.get("error").and_then(|e| e.as_str()) {
        Some(e) => Line::Failed(e.to_string()),
        None => Line::Other,
    }
}

/// Skips `child`'s stdout lines until a JSON object with `key`, within `timeout`.
///
/// # Errors
/// Timeout, the child exiting, or an `{"error": ...}` line.
pub(crate) fn await_json(
    child: &mut Child,
    who: &str,
    key: &str,
    timeout: Duration,
) -> Result<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let line = child.line(deadline.saturating_duration_since(Instant::now()))?;
        match classify(&line, key) {
            Line::Found(v) => return Ok(v),
            Line::Failed(e) => bail!("{who}: {e}"),
            Line::Other => {}
        }
    }
}

/// The version of `module` in a `go.mod` (`require` line or block), e.g. `v1.22.0`.
pub fn go_mod_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("require").trim();
        let mut words = line.split_whitespace();
        (words.next()? == module).then(|| words.next().map(str::to_string))?
    })
}

// ---------------------------------------------------------------------------------------
// Payload stamps and the sink's tally (y3's clients; the same layout as yomo-peer's)

/// A payload of `size` bytes (at least [`STAMP_LEN`]) that starts with `seq` and the send
/// time, both big-endian, then zeros:
///
/// ```text
/// | seq: u64 BE | send time: Unix ns, u64 BE | zeros ... |
/// ```
pub fn stamp(seq: u64, sent_unix_ns: u64, size: usize) -> Vec<u8> {
    let mut p = vec![0u8; size.max(STAMP_LEN)];
    p[..8].copy_from_slice(&seq.to_be_bytes());
    p[8..16].copy_from_slice(&sent_unix_ns.to_be_bytes());
    p
}

/// `(seq, send time ns)` of a stamped payload; `None` when it is too short.
pub fn unstamp(p: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_be_bytes(p.get(..8)?.try_into().ok()?);
    let sent = u64::from_be_bytes(p.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A connected source that [`send_stamped`] writes through: y3's SDK source on one tag
/// ([`TaggedSource`]), the NATS hop's publisher on its subject.
pub(crate) trait StampedSource {
    /// Writes one payload; an error is the client's, in words.
    async fn send(&mut self, payload: Bytes) -> std::result::Result<(), String>;
    /// Returns once everything written has left the client.
    async fn flush(&mut self) -> std::result::Result<(), String>;
}

/// The paced send loop of every stamping source (y3's, the NATS hop's): `run.count`
/// payloads of `run.size` bytes ([`stamp`]ed with their sequence number and send time) at
/// `run.rate` msg/s (0: flat out, [`crate::net::pace`]), then a flush. The first failed write
/// stops the loop (a broken connection would fail, or re-dial, every later one) and counts
/// the writes left as errors. Seconds and msg/s span the first write to the flush's return.
pub(crate) async fn send_stamped(run: &ClientRun, to: &mut impl StampedSource) -> SourceReport {
    let mut report = SourceReport::default();
    let start = Instant::now();
    for i in 0..run.count {
        crate::net::pace(start, i, run.rate).await;
        let payload = Bytes::from(stamp(i, unix_ns(), run.size));
        if let Err(e) = to.send(payload).await {
            report.errors = run.count - i;
            report.error = Some(e);
            break;
        }
        report.sent += 1;
    }
    if let Err(e) = to.flush().await {
        report.error.get_or_insert(e);
    }
    report.seconds = start.elapsed().as_secs_f64();
    if report.seconds > 0.0 {
        report.msg_per_s = report.sent as f64 / report.seconds;
    }
    report
}

/// y3's SDK source writing on one tag, for [`send_stamped`].
struct TaggedSource {
    /// The connected source.
    source: Source,
    /// The tag every payload goes out on.
    tag: u32,
}

impl StampedSource for TaggedSource {
    async fn send(&mut self, payload: Bytes) -> std::result::Result<(), String> {
        self.source
            .send(self.tag, payload)
            .await
            .map_err(|e| e.to_string())
    }

    async fn flush(&mut self) -> std::result::Result<(), String> {
        self.source.flush().await.map_err(|e| e.to_string())
    }
}

/// The nearest-rank `q`-quantile of sorted values, 0 when empty (yomo-peer's definition).
fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).saturating_sub(1);
    sorted[rank.min(sorted.len() - 1)]
}

/// What a sink has received of the sequence numbers `[0, count)`.
#[derive(Debug)]
pub(crate) struct Tally {
    seen: Vec<u32>,
    received: u64,
    unique: u64,
    duplicates: u64,
    latencies_ns: Vec<u64>,
    first: Option<Instant>,
    /// When the last counted payload arrived.
    pub(crate) last: Option<Instant>,
}

impl Tally {
    /// Awaits the sequence numbers `[0, count)`.
    pub(crate) fn new(count: u64) -> Tally {
        Tally {
            seen: vec![0; count as usize],
            received: 0,
            unique: 0,
            duplicates: 0,
            latencies_ns: Vec::with_capacity(count as usize),
            first: None,
            last: None,
        }
    }

    /// Counts one stamped payload received at `now_ns` (Unix) / `at`; probes and payloads
    /// out of range are not counted.
    pub(crate) fn observe(&mut self, payload: &[u8], now_ns: u64, at: Instant) {
        let Some((seq, sent)) = unstamp(payload) else {
            return;
        };
        let Some(slot) = self.seen.get_mut(seq as usize) else {
            return;
        };
        *slot += 1;
        if *slot == 1 {
            self.unique += 1;
        } else {
            self.duplicates += 1;
        }
        self.received += 1;
        self.first.get_or_insert(at);
        self.last = Some(at);
        self.latencies_ns.push(now_ns.saturating_sub(sent));
    }

    /// Whether every sequence number arrived.
    pub(crate) fn done(&self) -> bool {
        self.unique as usize == self.seen.len()
    }

    /// Counts the payloads of `received` until every sequence number arrived, `run`'s limit
    /// passed, or nothing came for `run`'s idle time after the last one; the stream ends
    /// when the subscription does, and an `Err(why)` item is a receive error. The summary
    /// carries why it stopped early.
    pub(crate) async fn drain<S>(mut self, run: &ClientRun, received: S) -> SinkReport
    where
        S: futures_util::Stream<Item = std::result::Result<Bytes, String>>,
    {
        use futures_util::StreamExt;
        let mut received = std::pin::pin!(received);
        let deadline = tokio::time::Instant::now() + run.limit;
        let mut error = None;
        while !self.done() {
            let wait = match (run.idle, self.last) {
                (Some(idle), Some(last)) => deadline.min((last + idle).into()),
                _ => deadline,
            };
            match tokio::time::timeout_at(wait, received.next()).await {
                Err(_) if wait < deadline => error = Some("idle".to_string()),
                Err(_) => error = Some("timeout".to_string()),
                Ok(None) => error = Some("closed".to_string()),
                Ok(Some(Err(e))) => error = Some(e),
                Ok(Some(Ok(payload))) => {
                    self.observe(&payload, unix_ns(), Instant::now());
                    continue;
                }
            }
            break;
        }
        let mut report = self.report();
        report.error = error;
        report
    }

    /// The summary, without an error.
    pub(crate) fn report(mut self) -> SinkReport {
        self.latencies_ns.sort_unstable();
        let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
        let seconds = match (self.first, self.last) {
            (Some(a), Some(b)) if self.received > 1 => (b - a).as_secs_f64(),
            _ => 0.0,
        };
        SinkReport {
            received: self.received,
            unique: self.unique,
            missing: self.seen.iter().filter(|&&n| n == 0).count() as u64,
            duplicates: self.duplicates,
            p50_us: us(nearest_rank(&self.latencies_ns, 0.50)),
            p99_us: us(nearest_rank(&self.latencies_ns, 0.99)),
            p999_us: us(nearest_rank(&self.latencies_ns, 0.999)),
            max_us: us(self.latencies_ns.last().copied().unwrap_or(0)),
            seconds,
            msg_per_s: if seconds > 0.0 {
                self.received as f64 / seconds
            } else {
                0.0
            },
            error: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// y3's clients (`y3-lab net client y3-source|y3-relay|y3-sink`)

/// A y3 client role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Writes stamped messages.
    Source,
    /// A stream function re-emitting every payload under another tag.
    Relay,
    /// Counts what arrives.
    Sink,
}

impl Role {
    /// `y3-source`, `y3-relay`, `y3-sink` → the role.
    pub fn from_client_kind(kind: &str) -> Option<Role> {
        match kind {
            "y3-source" => Some(Role::Source),
            "y3-relay" => Some(Role::Relay),
            "y3-sink" => Some(Role::Sink),
            _ => None,
        }
    }

    fn client_kind(self) -> &'static str {
        match self {
            Role::Source => "y3-source",
            Role::Relay => "y3-relay",
            Role::Sink => "y3-sink",
        }
    }

    fn yomo_command(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Relay => "sfn",
            Role::Sink => "sink",
        }
    }
}

/// What one y3 client does.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The role.
    pub role: Role,
    /// The router.
    pub addr: SocketAddr,
    /// `tcp` or `quic`.
    pub transport: Transport,
    /// Source: the tag written; relay and sink: the tag observed.
    pub tag: u32,
    /// Relay: the tag emitted.
    pub emit: u32,
    /// Source: messages to write; sink: distinct sequence numbers to wait for.
    pub count: u64,
    /// Source: payload bytes.
    pub size: usize,
    /// Source: msg/s, 0 for as fast as it goes.
    pub rate: f64,
    /// Sink: give up after this long.
    pub limit: Duration,
    /// Sink: once a frame arrived, stop when none arrived for this long (the rest were
    /// lost on the way), with error `idle`; `None` waits for every frame.
    pub idle: Option<Duration>,
}

/// `tcp` or `quic`.
pub fn transport_from_name(name: &str) -> Option<Transport> {
    match name {
        "tcp" => Some(Transport::Tcp),
        "quic" => Some(Transport::Quic),
        _ => None,
    }
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Quic => "quic",
        Transport::TcpTls => "tcp-tls",
        Transport::Tcp => "tcp",
    }
}

fn options(run: &ClientRun, name: &str) -> ClientOptions {
    let mut o = ClientOptions::new(run.addr)
        .transport(run.transport)
        .trust(Trust::Insecure)
        .name(name);
    o.send_queue = 4096;
    o
}

/// Prints `value` as one JSON line and flushes.
pub(crate) fn emit<W: Write + ?Sized>(out: &mut W, value: &impl Serialize) -> Result<()> {
    writeln!(out, "{}", serde_json::to_string(value)?)?;
    out.flush()?;
    Ok(())
}

/// Prints `{"connected": ADDR}`: the client is ready.
pub(crate) fn emit_connected<W: Write + ?Sized>(out: &mut W, addr: SocketAddr) -> Result<()> {
    emit(out, &serde_json::json!({ "connected": addr.to_string() }))
}

/// Runs one y3 client of this suite, printing JSON lines as `yomo-peer` does; returns once
/// the source has written everything, the sink has everything (or gave up), or, for the
/// relay, never (the lab kills it).
///
/// # Errors
/// Connect failures; a failed run is also a summary with `"error"`.
pub fn client(run: &ClientRun, out: &mut dyn Write) -> Result<()> {
    crate::net::exit_when_stdin_closes();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match run.role {
            Role::Source => {
                let report = source(run).await;
                emit(out, &report)?;
                match report.error {
                    Some(e) => bail!("{e}"),
                    None => Ok(()),
                }
            }
            Role::Sink => {
                let report = sink(run, out).await?;
                emit(out, &report)?;
                match report.error {
                    Some(e) => bail!("{e}"),
                    None => Ok(()),
                }
            }
            Role::Relay => relay(run, out).await,
        }
    })
}

async fn source(run: &ClientRun) -> SourceReport {
    let source = match Source::connect(options(run, "y3-lab-source")).await {
        Ok(s) => s,
        Err(e) => {
            return SourceReport {
                error: Some(e.to_string()),
                ..SourceReport::default()
            }
        }
    };
    let mut to = TaggedSource {
        source,
        tag: run.tag,
    };
    let report = send_stamped(run, &mut to).await;
    let _ = to.source.close().await;
    report
}

async fn sink<W: Write + ?Sized>(run: &ClientRun, out: &mut W) -> Result<SinkReport> {
    // The router subscribes a client before it acknowledges the handshake: once connect
    // returns, the tag is routed here.
    let mut sink = Sink::connect(options(run, "y3-lab-sink"), &[run.tag]).await?;
    emit_connected(out, run.addr)?;
    let report = Tally::new(run.count)
        .drain(
            run,
            futures_util::stream::unfold(&mut sink, |sink| async move {
                let item = sink.recv().await?.map(|data| data.payload);
                Some((item.map_err(|e| e.to_string()), sink))
            }),
        )
        .await;
    sink.close().await;
    Ok(report)
}

async fn relay<W: Write + ?Sized>(run: &ClientRun, out: &mut W) -> Result<()> {
    let seen = Arc::new(tokio::sync::Notify::new());
    let (notify, emit_tag) = (Arc::clone(&seen), run.emit);
    let function = StreamFunction::new(options(run, "y3-lab-relay"), &[run.tag]);
    let mut task = tokio::spawn(function.run(move |data| {
        let notify = Arc::clone(&notify);
        async move {
            if data.payload.len() < STAMP_LEN {
                notify.notify_one();
                return None;
            }
            Some((emit_tag, data.payload))
        }
    }));
    // The function connects inside `run`: it is routed once a probe on its own tag comes
    // back to it.
    let mut probe = Source::connect(options(run, "y3-lab-probe")).await?;
    let deadline = Instant::now() + CONNECT;
    loop {
        probe.send(run.tag, Bytes::from_static(PROBE)).await?;
        probe.flush().await?;
        tokio::select! {
            _ = seen.notified() => break,
            ended = &mut task => bail!("relay ended before it was routed: {ended:?}"),
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
        if Instant::now() > deadline {
            bail!("relay not routed within {CONNECT:?}");
        }
    }
    let _ = probe.close().await;
    emit_connected(out, run.addr)?;
    match task.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(anyhow!("relay task: {e}")),
    }
}

// ---------------------------------------------------------------------------------------
// The lab side

/// The programs the suite runs, built when it starts.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    /// `yomo-peer`, built from `interop/yomo`.
    pub(crate) yomo_peer: PathBuf,
    /// A release `y3` (the product binary: `y3 serve`).
    pub(crate) y3: PathBuf,
    /// A release `y3-lab` (this binary when it is one): y3's clients.
    pub(crate) lab: PathBuf,
    /// `env`, to set the children's log levels.
    env: PathBuf,
    /// Where `y3 serve` writes its dev certificate.
    pub(crate) cert: PathBuf,
    /// `y3 serve`'s configuration file (see [`serve_config`]).
    pub(crate) config: PathBuf,
}

/// `y3 serve`'s configuration for the lab: defaults, except how long a subscriber may stay
/// full under the `block` policy before it is evicted. The flat-out runs write a fixed count
/// as fast as the source goes, and a sink slower than its source keeps its queue full: with
/// y3's default (250 ms) it is evicted and the run loses messages, where YoMo's zipper holds
/// the source back. A long timeout measures y3 holding the source back too.
pub(crate) fn serve_config(block_timeout_ms: u64) -> String {
    format!("[queue]\nblock_timeout_ms = {block_timeout_ms}\n")
}

/// The Cargo target directory (`$CARGO_TARGET_DIR` or `./target`), absolute.
fn target_dir() -> Result<PathBuf> {
    let dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    Ok(std::env::current_dir()?.join(dir))
}

fn run_build(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: cannot start"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("{what} failed ({}):\n{}", out.status, tail.join("\n"));
    }
    Ok(())
}

/// The environment variable that makes a debug lab's YoMo and federation suites run with
/// the debug binaries next to it (see `Peers::build`); `scripts/test-smoke.sh` sets it.
pub const SMOKE_ENV: &str = "Y3_LAB_SMOKE";

impl Peers {
    /// Builds `yomo-peer` (`go build`) and the release binaries it lacks: from a debug
    /// build of the lab, the release `y3` and `y3-lab` (`cargo build --release -p y3-cli
    /// -p y3-lab`); from a release build, `y3` when it is not next to this binary. With
    /// [`SMOKE_ENV`] set, a debug lab measures with its own debug `y3` and itself instead:
    /// the test command's smoke run (seconds, numbers meaningless, no release build).
    pub(crate) fn build(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Peers> {
        let target = target_dir()?;
        std::fs::create_dir_all(&target)?;
        let yomo_peer = target.join("yomo-peer");
        bar.set_message(format!("yomo: go build {}", yomo_peer.display()));
        run_build(
            Command::new("go")
                .current_dir(&opts.yomo_dir)
                .args(["build", "-o"])
                .arg(&yomo_peer)
                .arg("./cmd/yomo-peer"),
            &format!("go build ./cmd/yomo-peer in {}", opts.yomo_dir.display()),
        )?;
        let smoke = std::env::var_os(SMOKE_ENV).is_some_and(|v| !v.is_empty());
        let (y3, lab) = if cfg!(debug_assertions) && !smoke {
            let build = ["build", "--release", "-p", "y3-cli", "-p", "y3-lab"];
            bar.set_message("yomo: cargo build --release -p y3-cli -p y3-lab");
            run_build(
                Command::new("cargo").args(build),
                "cargo build --release -p y3-cli -p y3-lab",
            )?;
            let release = target.join("release");
            (release.join("y3"), release.join("y3-lab"))
        } else {
            if !opts.programs.y3.is_file() {
                bar.set_message("yomo: cargo build --release -p y3-cli");
                run_build(
                    Command::new("cargo").args(["build", "--release", "-p", "y3-cli"]),
                    "cargo build --release -p y3-cli",
                )?;
            }
            (opts.programs.y3.clone(), opts.programs.lab.clone())
        };
        let env = proc::which("env").context("`env` is not on the PATH")?;
        let tmp = std::env::temp_dir();
        let cert = tmp.join(format!("y3-bench-yomo-{}.pem", std::process::id()));
        let config = tmp.join(format!("y3-bench-yomo-{}.toml", std::process::id()));
        std::fs::write(&config, serve_config(opts.block_timeout_ms))
            .with_context(|| format!("writing {}", config.display()))?;
        Ok(Peers {
            yomo_peer,
            y3,
            lab,
            env,
            cert,
            config,
        })
    }

    /// Starts `program args` with `vars` set (through `env`, which execs it: the pid is the
    /// program's).
    pub(crate) fn spawn(
        &self,
        name: &str,
        vars: &[&str],
        program: &Path,
        args: &[String],
    ) -> Result<Child> {
        let mut all: Vec<String> = vars.iter().map(|v| v.to_string()).collect();
        all.push(program.display().to_string());
        all.extend(args.iter().cloned());
        Child::spawn(name, &self.env, &all, None)
    }
}

/// A router child process and its addresses.
pub(crate) struct RouterProc {
    pub(crate) child: Child,
    pub(crate) quic: SocketAddr,
    pub(crate) tcp: Option<SocketAddr>,
    /// `y3 serve`'s private directory (ready file, state), removed on drop; `None` for
    /// YoMo's zipper.
    pub(crate) _dir: Option<ServeDir>,
}

impl RouterProc {
    /// `y3 serve ARGS` (warnings only) in a private directory named after `name`, once its
    /// ready file says every listener is bound; with that document.
    pub(crate) fn serve(
        y3: &Path,
        args: &[String],
        name: &str,
    ) -> Result<(RouterProc, y3_testkit::Ready)> {
        let dir = ServeDir::new(name)?;
        let (child, ready) = Child::serve("y3 serve", y3, &["RUST_LOG=warn"], args, &dir, CONNECT)?;
        let router = RouterProc {
            child,
            quic: ready
                .listener("quic")
                .context("y3 serve: no QUIC listener")?,
            tcp: ready.listener("tcp"),
            _dir: Some(dir),
        };
        Ok((router, ready))
    }

    fn start(peers: &Peers, router: Router) -> Result<RouterProc> {
        RouterProc::start_with(peers, router, &[])
    }

    /// Starts `router`; `zipper_args` go to `yomo-peer zipper` after its address (its
    /// name, its mesh).
    pub(crate) fn start_with(
        peers: &Peers,
        router: Router,
        zipper_args: &[String],
    ) -> Result<RouterProc> {
        match router {
            Router::Zipper => {
                let mut args = strings(&["zipper", "--addr", "127.0.0.1:0"]);
                args.extend(zipper_args.iter().cloned());
                let mut child = peers.spawn(
                    "yomo zipper",
                    &["YOMO_LOG_LEVEL=error"],
                    &peers.yomo_peer,
                    &args,
                )?;
                let v = await_json(&mut child, "yomo zipper", "listening", CONNECT)?;
                let quic = v["listening"]
                    .as_str()
                    .and_then(|a| a.parse().ok())
                    .context("yomo zipper: no listening address")?;
                Ok(RouterProc {
                    child,
                    quic,
                    tcp: None,
                    _dir: None,
                })
            }
            Router::Y3 => {
                let mut args = strings(&[
                    "serve",
                    "--tcp",
                    "127.0.0.1:0",
                    "--quic",
                    "127.0.0.1:0",
                    "--metrics",
                    "",
                    "--dev-cert-out",
                ]);
                args.push(peers.cert.display().to_string());
                args.push("--config".into());
                args.push(peers.config.display().to_string());
                Ok(RouterProc::serve(&peers.y3, &args, "lab-yomo")?.0)
            }
        }
    }
}

pub(crate) fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// One phase's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Phase {
    pub(crate) workload: Workload,
    pub(crate) size: usize,
    pub(crate) count: u64,
    /// msg/s; 0 for flat out.
    pub(crate) rate: f64,
    /// How long the sink may wait for everything.
    pub(crate) limit: Duration,
    /// The sink stops once no frame arrived for this long (a lossy path); `None`: it waits
    /// for every frame until `limit`.
    pub(crate) idle: Option<Duration>,
}

/// Starts one client of `row` against `router`.
pub(crate) fn spawn_client(
    peers: &Peers,
    row: &Row,
    router: &RouterProc,
    role: Role,
    phase: &Phase,
) -> Result<Child> {
    let tag = match role {
        Role::Source | Role::Relay => TAG_IN,
        Role::Sink => phase.workload.sink_tag(),
    };
    let name = format!("{} {}", row.name, role.client_kind());
    match row.clients {
        Clients::Yomo => {
            let mut args = vec![
                role.yomo_command().to_string(),
                "--addr".into(),
                router.quic.to_string(),
            ];
            let tag = format!("{tag:#x}");
            match role {
                Role::Source => args.extend([
                    "--tag".into(),
                    tag,
                    "--count".into(),
                    phase.count.to_string(),
                    "--size".into(),
                    phase.size.to_string(),
                    "--rate".into(),
                    phase.rate.to_string(),
                    // YoMo's Write returns before the frame is on the wire and Close drops
                    // what is unsent: stay connected until the lab has the sink's report.
                    "--linger".into(),
                    format!("{}s", (phase.limit + CONNECT).as_secs()),
                ]),
                Role::Relay => args.extend([
                    "--observe".into(),
                    tag,
                    "--emit".into(),
                    format!("{TAG_OUT:#x}"),
                ]),
                Role::Sink => args.extend([
                    "--observe".into(),
                    tag,
                    "--count".into(),
                    phase.count.to_string(),
                    "--timeout-s".into(),
                    phase.limit.as_secs_f64().to_string(),
                    "--idle-s".into(),
                    phase.idle.map_or(0.0, |d| d.as_secs_f64()).to_string(),
                ]),
            }
            peers.spawn(&name, &["YOMO_LOG_LEVEL=error"], &peers.yomo_peer, &args)
        }
        Clients::Y3(transport) => {
            let addr = match transport {
                Transport::Quic => router.quic,
                _ => router.tcp.context("y3 serve: no TCP listener")?,
            };
            let mut args: Vec<String> = vec![
                "net".into(),
                "client".into(),
                role.client_kind().into(),
                "--addr".into(),
                addr.to_string(),
                "--transport".into(),
                transport_name(transport).into(),
                "--tag".into(),
                tag.to_string(),
                "--emit".into(),
                TAG_OUT.to_string(),
                "--count".into(),
                phase.count.to_string(),
                "--size".into(),
                phase.size.to_string(),
                "--rate".into(),
                phase.rate.to_string(),
                "--limit-s".into(),
                phase.limit.as_secs().max(1).to_string(),
            ];
            if let Some(idle) = phase.idle {
                args.extend(["--idle-s".into(), idle.as_secs_f64().to_string()]);
            }
            peers.spawn(&name, &["RUST_LOG=warn"], &peers.lab, &args)
        }
    }
}

/// What one phase measured.
#[derive(Debug, Clone)]
struct PhaseResult {
    sink: SinkReport,
    /// Router CPU seconds from just before the source started to the sink's report.
    router_cpu: Option<f64>,
}

/// Runs one phase on a fresh router: sink (and relay) connect, the source writes, the
/// sink reports.
fn run_phase(peers: &Peers, row: &Row, phase: &Phase) -> Result<PhaseResult> {
    let router = RouterProc::start(peers, row.router)?;
    let mut sink = spawn_client(peers, row, &router, Role::Sink, phase)?;
    await_json(&mut sink, "sink", "connected", CONNECT)?;
    let _relay = match phase.workload {
        Workload::Relay => {
            let mut relay = spawn_client(peers, row, &router, Role::Relay, phase)?;
            await_json(&mut relay, "relay", "connected", CONNECT)?;
            Some(relay)
        }
        Workload::Sink => None,
    };
    let cpu0 = router.child.cpu_seconds();
    let mut source = spawn_client(peers, row, &router, Role::Source, phase)?;
    let v = await_json(&mut sink, "sink", "received", phase.limit + CONNECT)?;
    let cpu1 = router.child.cpu_seconds();
    let report: SinkReport = serde_json::from_value(v)?;
    if let Some(e) = &report.error {
        // The source's summary says why, when it has one by now (YoMo's lingers).
        let why = match await_json(&mut source, "source", "sent", Duration::from_secs(1)) {
            Ok(v) => serde_json::from_value::<SourceReport>(v)
                .ok()
                .and_then(|s| s.error)
                .map_or_else(String::new, |e| format!("; source: {e}")),
            Err(_) => String::new(),
        };
        // What the router warned about (y3 serve logs at warn: evictions, closes).
        let tail = router.child.stderr_tail();
        let warned: Vec<&str> = tail
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .take(2)
            .collect();
        let router_says = if warned.is_empty() {
            String::new()
        } else {
            format!("; router: {}", warned.join(" / "))
        };
        bail!(
            "sink: {e}: {} of {} messages missing, {} duplicates{why}{router_says}",
            report.missing,
            phase.count,
            report.duplicates
        );
    }
    // Every message arrived, so the source is done: it is killed with the rest (a YoMo
    // source would linger until then).
    Ok(PhaseResult {
        sink: report,
        router_cpu: cpu0.zip(cpu1).map(|(a, b)| b - a),
    })
}

/// One run of a case: both phases.
#[derive(Debug, Clone)]
struct Sample {
    flat: PhaseResult,
    paced: SinkReport,
}

/// Runs the suite.
///
/// # Errors
/// Setup errors (building the peers); failing rows become notes.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    if opts.sizes.iter().any(|&s| s < STAMP_LEN) {
        bail!("payload sizes must be at least {STAMP_LEN} bytes (sequence number and send time)");
    }
    let peers = Peers::build(opts, bar)?;
    let go_mod = std::fs::read_to_string(opts.yomo_dir.join("go.mod")).unwrap_or_default();
    let mut versions = vec![(
        "yomo".to_string(),
        format!(
            "{} ({}/go.mod)",
            go_mod_version(&go_mod, "github.com/yomorun/yomo").unwrap_or_else(|| "?".into()),
            opts.yomo_dir.display()
        ),
    )];
    if let Some(v) = go_mod_version(&go_mod, "github.com/quic-go/quic-go") {
        versions.push(("quic-go".into(), v));
    }
    versions.push((
        "go".into(),
        proc::version_of(Path::new("go"), &["version"])
            .map(|v| v.trim_start_matches("go version ").to_string())
            .unwrap_or_default(),
    ));
    versions.push((
        "y3 serve".into(),
        format!(
            "{}, with [queue] block_timeout_ms = {}",
            super::y3_build::label_of(&peers.y3),
            opts.block_timeout_ms
        ),
    ));
    let rows: Vec<Row> = ROWS
        .iter()
        .copied()
        .filter(|r| opts.only.is_empty() || opts.only.iter().any(|o| r.name.contains(o.as_str())))
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let mut cases = Vec::new();
    for &w in &opts.workloads {
        for &size in &opts.sizes {
            cases.push((w, size));
        }
    }
    let runs = opts.load.runs.max(1);
    bar.set_length((cases.len() * rows.len() * runs) as u64);
    let mut notes = Vec::new();
    let mut records = Vec::new();
    for &(workload, size) in &cases {
        let case = format!("{} {size} B", workload.name());
        // Room for YoMo's relay at 1 KiB on a busy machine (2 000 msg/s; it does ~7 000).
        let flat = Phase {
            workload,
            size,
            count: opts.load.messages,
            rate: 0.0,
            limit: Duration::from_secs(20 + opts.load.messages / 2000),
            idle: None,
        };
        let paced = Phase {
            count: opts.load.paced,
            rate: opts.load.rate as f64,
            limit: Duration::from_secs_f64(
                20.0 + opts.load.paced as f64 / opts.load.rate.max(1) as f64,
            ),
            ..flat
        };
        let got = crate::net::rounds("yomo", &case, &names, runs, bar, &mut notes, |name| {
            // Every name came from `rows`.
            let row = rows.iter().find(|r| r.name == name).expect("a row");
            let flat = run_phase(&peers, row, &flat)?;
            let paced = run_phase(&peers, row, &paced)?;
            Ok(Sample {
                flat,
                paced: paced.sink,
            })
        });
        for (row, samples) in rows.iter().zip(&got) {
            if samples.is_empty() {
                continue;
            }
            let med =
                |f: &dyn Fn(&Sample) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
            let frames = (opts.load.messages * workload.frames_per_message()) as f64;
            let cpu: Vec<f64> = samples
                .iter()
                .filter_map(|s| s.flat.router_cpu)
                .map(|c| c * 1e6 / frames)
                .collect();
            let (rate, range) = med(&|s| s.flat.sink.msg_per_s);
            if rate < opts.load.rate as f64 {
                notes.push(format!(
                    "{}, {case}: {} msg/s flat out is below the paced rate ({} msg/s), so its \
                     paced latency is mostly queueing",
                    row.name,
                    rate.round(),
                    opts.load.rate
                ));
            }
            records.push(
                Record::new("yomo", row.name, &case)
                    .dim(Dim::Payload, size)
                    .dim(Dim::Subscribers, 1usize)
                    .metric(Metric::Seconds, med(&|s| s.flat.sink.seconds).0)
                    .metric(Metric::Messages, (opts.load.messages) as f64)
                    .metric(Metric::MsgPerS, rate)
                    .metric_opt(Metric::P50Us, Some(med(&|s| s.paced.p50_us).0))
                    .metric_opt(Metric::P99Us, Some(med(&|s| s.paced.p99_us).0))
                    .metric_opt(Metric::P999Us, Some(med(&|s| s.paced.p999_us).0))
                    .metric_opt(
                        Metric::CpuUsPerFrame,
                        (!cpu.is_empty()).then(|| median(&cpu).0),
                    )
                    .with_spread(samples.len(), Metric::MsgPerS, range),
            );
        }
    }
    let _ = std::fs::remove_file(&peers.cert);
    let _ = std::fs::remove_file(&peers.config);
    Ok(Results::of(
        crate::net::meta(
            "yomo",
            &opts.command,
            opts.quick,
            format!(
                "none: the router (y3 serve, a tokio runtime with a worker per core; YoMo's \
                 zipper, GOMAXPROCS = cores) and the client processes (source, relay, sink) \
                 share all {} cores",
                crate::measure::cores()
            ),
            versions,
        ),
        records,
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yomo_peer_lines_parse() {
        // Lines as `yomo-peer` prints them (interop/yomo/README.md).
        assert_eq!(
            classify(r#"{"listening":"127.0.0.1:43121"}"#, "listening"),
            Line::Found(serde_json::json!({"listening": "127.0.0.1:43121"}))
        );
        assert_eq!(
            classify("[yomo-peer-sink] is waiting for request...", "connected"),
            Line::Other
        );
        assert_eq!(
            classify(r#"{"connected":"127.0.0.1:9000"}"#, "received"),
            Line::Other
        );
        assert_eq!(
            classify(r#"{"error":"invalid token: wrong"}"#, "connected"),
            Line::Failed("invalid token: wrong".into())
        );
        let sink = r#"{"received":2000,"unique":2000,"missing":0,"duplicates":0,
            "bad_payloads":0,"tid_ok":true,"source_id_ok":true,"distinct_tids":2000,
            "source_ids":["abc"],"tags":{"0x34":2000},"p50_us":412.5,"p99_us":5012.1,
            "p999_us":6100,"max_us":6200.3,"seconds":0.0475,"msg_per_s":42105.2}"#
            .replace(['\n', ' '], "");
        let Line::Found(v) = classify(&sink, "received") else {
            panic!("not found")
        };
        let r: SinkReport = serde_json::from_value(v).unwrap();
        assert_eq!((r.received, r.missing, r.duplicates), (2000, 0, 0));
        assert_eq!((r.p50_us, r.p99_us, r.p999_us), (412.5, 5012.1, 6100.0));
        assert_eq!(r.msg_per_s, 42105.2);
        assert_eq!(r.error, None);
        let timeout = r#"{"received":5,"unique":5,"missing":995,"duplicates":0,"p50_us":1,
            "p99_us":1,"p999_us":1,"max_us":1,"seconds":1,"msg_per_s":5,"error":"timeout"}"#;
        let r: SinkReport = serde_json::from_str(timeout).unwrap();
        assert_eq!((r.missing, r.error.as_deref()), (995, Some("timeout")));
        let src: SourceReport =
            serde_json::from_str(r#"{"sent":300,"errors":0,"seconds":0.01,"msg_per_s":30000}"#)
                .unwrap();
        assert_eq!((src.sent, src.error), (300, None));
        // Our summaries read back the same way.
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""error":"timeout""#), "{text}");
        let ok = serde_json::to_string(&SourceReport::default()).unwrap();
        assert!(!ok.contains(r#""error""#), "{ok}");
    }

    #[test]
    fn serve_config_changes_only_the_block_timeout() {
        let config = y3_router::RouterConfig::from_toml(&serve_config(60_000)).unwrap();
        let defaults = y3_router::RouterConfig::default();
        assert_eq!(config.queue.block_timeout_ms, 60_000);
        assert_eq!(config.queue.policy, defaults.queue.policy);
        assert_eq!(config.queue.capacity, defaults.queue.capacity);
        assert_eq!(config.listen, defaults.listen);
    }

    #[test]
    fn go_mod_versions() {
        let go_mod = "module github.com/y3-dev/y3/interop/yomo\n\ngo 1.25.0\n\n\
                      require github.com/yomorun/yomo v1.22.0\n\nrequire (\n\
                      \tgithub.com/quic-go/quic-go v0.57.1 // indirect\n\
                      \tgithub.com/yomorun/y3 v1.0.5 // indirect\n)\n";
        assert_eq!(
            go_mod_version(go_mod, "github.com/yomorun/yomo").as_deref(),
            Some("v1.22.0")
        );
        assert_eq!(
            go_mod_version(go_mod, "github.com/quic-go/quic-go").as_deref(),
            Some("v0.57.1")
        );
        assert_eq!(
            go_mod_version(go_mod, "github.com/yomorun/y").as_deref(),
            None
        );
        // The module file of this repository says which YoMo the lab builds.
        let real = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/yomo/go.mod"),
        )
        .unwrap();
        assert_eq!(
            go_mod_version(&real, "github.com/yomorun/yomo").as_deref(),
            Some("v1.22.0")
        );
    }

    #[test]
    fn stamps_and_the_tally() {
        let p = stamp(7, 1_000_000, 64);
        assert_eq!(p.len(), 64);
        assert_eq!(&p[..8], &7u64.to_be_bytes());
        assert_eq!(unstamp(&p), Some((7, 1_000_000)));
        assert_eq!(stamp(1, 2, 3).len(), STAMP_LEN);
        assert_eq!(unstamp(PROBE), None, "a probe is no stamp");

        let t0 = Instant::now();
        let mut tally = Tally::new(4);
        // Latencies 10, 20, 30 µs; seq 1 twice; one probe and one seq out of range.
        tally.observe(&stamp(0, 1_000, 16), 11_000, t0);
        tally.observe(&stamp(1, 1_000, 16), 21_000, t0);
        tally.observe(&stamp(1, 1_000, 16), 31_000, t0);
        tally.observe(PROBE, 99_000, t0);
        tally.observe(&stamp(9, 1_000, 16), 99_000, t0);
        assert!(!tally.done());
        tally.observe(&stamp(3, 5_000, 16), 5_000, t0 + Duration::from_millis(500));
        let r = tally.report();
        assert_eq!(
            (r.received, r.unique, r.missing, r.duplicates),
            (4, 3, 1, 1)
        );
        // Sorted: 0, 10, 20, 30 µs; nearest rank.
        assert_eq!((r.p50_us, r.p99_us, r.max_us), (10.0, 30.0, 30.0));
        assert_eq!(r.seconds, 0.5);
        assert_eq!(r.msg_per_s, 8.0);

        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 0.5), 500);
        assert_eq!(nearest_rank(&v, 0.99), 990);
        assert_eq!(nearest_rank(&v, 0.999), 999);
        assert_eq!(nearest_rank(&[], 0.5), 0);
    }

    #[test]
    fn names() {
        assert_eq!(Workload::from_name("relay"), Some(Workload::Relay));
        assert_eq!(Workload::Relay.frames_per_message(), 2);
        assert_eq!(Role::from_client_kind("y3-sink"), Some(Role::Sink));
        assert_eq!(Role::from_client_kind("sink"), None);
        assert_eq!(transport_from_name("quic"), Some(Transport::Quic));
        let names: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            ["yomo-zipper", "y3-yomo-clients", "y3-quic", "y3-tcp"]
        );
    }

    /// y3's three clients against an in-process router: the relay is routed before it says
    /// so, and the sink counts every message once.
    #[test]
    fn y3_clients_relay_every_message() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let router = rt
            .block_on(y3_router::Router::start(
                y3_router::RouterConfig::ephemeral(),
            ))
            .unwrap();
        let base = ClientRun {
            role: Role::Sink,
            addr: router.tcp_addr().unwrap(),
            transport: Transport::Tcp,
            tag: TAG_OUT,
            emit: TAG_OUT,
            count: 300,
            size: 64,
            rate: 0.0,
            limit: Duration::from_secs(20),
            idle: None,
        };
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        struct Lines(std::sync::mpsc::Sender<String>, Vec<u8>);
        impl Write for Lines {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.1.extend_from_slice(b);
                while let Some(i) = self.1.iter().position(|&c| c == b'\n') {
                    let line: Vec<u8> = self.1.drain(..=i).collect();
                    let _ = self
                        .0
                        .send(String::from_utf8_lossy(&line).trim().to_string());
                }
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink_run = base.clone();
        let sink_tx = tx.clone();
        let sink_task = rt.spawn(async move {
            let mut out = Lines(sink_tx, Vec::new());
            let r = sink(&sink_run, &mut out).await;
            r.map(|r| serde_json::to_string(&r).unwrap())
        });
        assert!(rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .contains("connected"));
        let relay_run = ClientRun {
            role: Role::Relay,
            tag: TAG_IN,
            ..base.clone()
        };
        let relay_tx = tx.clone();
        let relay_task = rt.spawn(async move {
            let mut out = Lines(relay_tx, Vec::new());
            let _ = relay(&relay_run, &mut out).await;
        });
        assert!(rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .contains("connected"));
        let source_run = ClientRun {
            role: Role::Source,
            tag: TAG_IN,
            ..base.clone()
        };
        let sent = rt.block_on(source(&source_run));
        assert_eq!((sent.sent, sent.error), (300, None));
        let report = rt.block_on(sink_task).unwrap().unwrap();
        let report: SinkReport = serde_json::from_str(&report).unwrap();
        assert_eq!(
            (report.received, report.unique, report.missing, report.error),
            (300, 300, 0, None)
        );
        relay_task.abort();
        rt.block_on(router.shutdown());
    }
}
