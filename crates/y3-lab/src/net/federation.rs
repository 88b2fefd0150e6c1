//! `y3-lab net federation`: source and sink on different `y3 serve` processes federated
//! through a `nats-server` (issue 15), next to source and sink on one router.
//!
//! ```text
//! single:     source ──▶ y3 serve A ──▶ sink
//! federated:  source ──▶ y3 serve A ──▶ nats-server ──▶ y3 serve B ──▶ sink
//! ```
//!
//! Every router and the NATS server are child processes on 127.0.0.1 (`y3 serve` next to
//! the lab binary, `nats-server` from `PATH`, `target/tools/bin` or `NATS_SERVER_BIN`); the
//! source and the sink are y3's SDK clients in this process, over TCP. Per payload size:
//!
//! 1. **flat out**: the source writes `messages` stamped payloads as fast as it goes; msg/s
//!    is the sink's, first arrival to last.
//! 2. **paced**: `paced` messages at `rate` msg/s; one-way latency p50/p99 (arrival minus
//!    the stamp, nearest rank).
//!
//! Its rows are the lab's records (implementation: the path), reported by
//! `net/report/federation.rs`. YoMo's mesh of two zippers (the issue's third row) is not
//! measured here yet.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use y3_transport::sdk::{ClientOptions, Sink, Source};

use crate::net::proc::{self, Child};
use crate::net::yomo::{stamp, unstamp};
use crate::record::{Dim, Metric, Record, Results};

/// The tag of every message.
const TAG: u32 = 0x33;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Payload sizes in bytes (at least the 16-byte stamp).
    pub sizes: Vec<usize>,
    /// Messages of the flat-out phase.
    pub messages: u64,
    /// Messages of the paced phase.
    pub paced: u64,
    /// Rate of the paced phase, msg/s.
    pub rate: u64,
    /// `y3` (for `y3 serve`).
    pub y3: PathBuf,
    /// `--quick`.
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
}

fn nats_server() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("NATS_SERVER_BIN") {
        return Ok(bin.into());
    }
    let tools = PathBuf::from("target/tools/bin/nats-server");
    if tools.is_file() {
        return Ok(tools);
    }
    proc::which("nats-server")
        .ok_or_else(|| anyhow!("nats-server not found (NATS_SERVER_BIN, target/tools/bin, PATH)"))
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A metric's value from `GET /metrics` (0 when absent).
fn metric(addr: SocketAddr, name: &str) -> f64 {
    let text = (|| -> std::io::Result<String> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    })()
    .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// A `y3 serve` child: its TCP and metrics addresses.
fn serve(
    opts: &Options,
    dir: &std::path::Path,
    name: &str,
    nats: &str,
) -> Result<(Child, SocketAddr, SocketAddr)> {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!("[federation]\nurls = [{nats:?}]\nname = {name:?}\n"),
    )?;
    let args: Vec<String> = [
        "serve",
        "--config",
        &config.display().to_string(),
        "--tcp",
        "127.0.0.1:0",
        "--quic",
        "",
        "--metrics",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut child = Child::spawn(name, &opts.y3, &args, None)?;
    // y3 router listening: tcp A quic B metrics http://C/metrics
    let line = child.expect("y3 router listening:", Duration::from_secs(20))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |key: &str| -> Result<&str> {
        let i = words
            .iter()
            .position(|w| *w == key)
            .ok_or_else(|| anyhow!("no {key} in {line:?}"))?;
        words
            .get(i + 1)
            .copied()
            .ok_or_else(|| anyhow!("no {key} address"))
    };
    let tcp = at("tcp")?.parse()?;
    let metrics = at("metrics")?
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .parse()?;
    Ok((child, tcp, metrics))
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One phase: `n` messages of `size` bytes from `source_at` to a sink at `sink_at`, paced at
/// `rate` (0: flat out). Returns (received, msg/s, sorted latencies in µs).
async fn phase(
    source_at: SocketAddr,
    sink_at: SocketAddr,
    wait_interest: Option<SocketAddr>,
    size: usize,
    n: u64,
    rate: u64,
) -> Result<(u64, f64, Vec<f64>)> {
    let mut sink = Sink::connect(ClientOptions::new(sink_at).name("lab-sink"), &[TAG]).await?;
    if let Some(metrics) = wait_interest {
        let start = Instant::now();
        while metric(metrics, "y3_router_federation_remote_interest") < 1.0 {
            if start.elapsed() > Duration::from_secs(20) {
                bail!("the source's router never learned of the sink");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let receiving = tokio::spawn(async move {
        let mut lat = Vec::with_capacity(n as usize);
        let (mut first, mut last) = (None, Instant::now());
        while (lat.len() as u64) < n {
            match tokio::time::timeout(Duration::from_secs(3), sink.recv()).await {
                Ok(Some(Ok(d))) => {
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = now;
                    if let Some((_, sent)) = unstamp(&d.payload) {
                        lat.push(unix_ns().saturating_sub(sent) as f64 / 1000.0);
                    }
                }
                _ => break,
            }
        }
        let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
        (lat, secs)
    });
    let mut source = Source::connect(ClientOptions::new(source_at).name("lab-source")).await?;
    let start = Instant::now();
    for i in 0..n {
        crate::net::pace(start, i, rate as f64).await;
        source.send(TAG, stamp(i, unix_ns(), size)).await?;
        if rate > 0 {
            source.flush().await?;
        }
    }
    source.close().await?;
    let (mut lat, secs) = receiving.await?;
    let received = lat.len() as u64;
    lat.sort_by(f64::total_cmp);
    let rate = if secs > 0.0 {
        received as f64 / secs
    } else {
        0.0
    };
    Ok((received, rate, lat))
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs both paths at every size: a record per path and size (flat-out msg/s and messages
/// received at the sink, paced p50/p99, the paced rate as a dimension).
///
/// # Errors
/// A process that does not start, a client that cannot connect.
pub fn run(opts: &Options) -> Result<Results> {
    let dir = std::env::temp_dir().join(format!("y3-lab-federation-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let port = free_port()?;
    let nats_args: Vec<String> = ["-a", "127.0.0.1", "-p", &port.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut nats = Child::spawn("nats-server", &nats_server()?, &nats_args, None)?;
    let url = format!("nats://127.0.0.1:{port}");
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(10) {
            bail!("nats-server did not listen");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut a, a_tcp, a_metrics) = serve(opts, &dir, "a", &url)?;
    let (mut b, b_tcp, _) = serve(opts, &dir, "b", &url)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio")?;
    let mut rows = Vec::new();
    for &size in &opts.sizes {
        for (path, sink_at, wait) in [
            ("single", a_tcp, None),
            ("federated", b_tcp, Some(a_metrics)),
        ] {
            let (received, msgs_per_s, _) =
                rt.block_on(phase(a_tcp, sink_at, wait, size, opts.messages, 0))?;
            let (_, _, lat) =
                rt.block_on(phase(a_tcp, sink_at, wait, size, opts.paced, opts.rate))?;
            rows.push(
                Record::new("federation", path, &format!("{size} B"))
                    .dim(Dim::Payload, size)
                    .dim(Dim::Transport, "tcp")
                    .dim(Dim::Rate, opts.rate)
                    .metric(Metric::Messages, opts.messages as f64)
                    .metric(Metric::MsgPerS, msgs_per_s)
                    .metric(Metric::Received, received as f64)
                    .metric(Metric::P50Us, quantile(&lat, 0.50))
                    .metric(Metric::P99Us, quantile(&lat, 0.99))
                    .with_runs(1),
            );
        }
    }
    a.kill();
    b.kill();
    nats.kill();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Results::of(
        crate::net::meta(
            "federation",
            &opts.command,
            opts.quick,
            "none: nats-server, both y3 serve processes and the lab's source and sink share \
             every core"
                .into(),
            Vec::new(),
        ),
        rows,
        Vec::new(),
    ))
}
