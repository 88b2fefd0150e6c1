//! `y3-lab net pipeline`: source → router → stream function → sink on loopback, in one process.
//!
//! For each transport and payload size, on a fresh router (block policy, defaults):
//!
//! 1. a warm-up of 2% of the messages;
//! 2. **throughput**: the source sends `--messages` frames as fast as it can; msg/s is the
//!    count over the time from the first send to the last receive at the sink. The
//!    latency percentiles of this run are reported too ("loaded": mostly queueing);
//! 3. **latency**: frames paced at `--rate` msg/s; p50/p99/max of the one-way time from
//!    the source's send call to the sink's receive, recorded in an hdrhistogram.
//!
//! Every payload starts with the send time (nanoseconds since the run's epoch, LE); the
//! function passes the payload through unchanged (zero-copy `Bytes`) under a new tag.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use serde_json::json;
use y3_router::{Router, RouterConfig};
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Transport};

/// Transports the benchmark can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchTransport {
    /// Plain TCP.
    Tcp,
    /// QUIC (TLS 1.3).
    Quic,
    /// TLS 1.3 over TCP.
    Tls,
}

impl BenchTransport {
    fn name(self) -> &'static str {
        match self {
            BenchTransport::Tcp => "tcp",
            BenchTransport::Quic => "quic",
            BenchTransport::Tls => "tls",
        }
    }
}

/// Options of `y3-lab net pipeline`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "End-to-end msg/s and latency: source → router → function → sink on loopback",
    long_about = "Run source → router → stream function → sink in one process over loopback TCP and
QUIC, for 64-byte and 1 KiB payloads: msg/s of a flat-out run and p50/p99 one-way latency
(hdrhistogram) of a paced run. A benchmark, not a test: numbers depend on the machine.",
    after_help = "Examples:
  y3-lab net pipeline --quick
  y3-lab net pipeline --json e2e.json
  y3-lab net pipeline --transport quic --sizes 64,1024,16384 --messages 500000"
)]
pub struct PipelineArgs {
    /// A short run (20k messages, 2k paced) for smoke tests.
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Transports to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [BenchTransport::Tcp, BenchTransport::Quic])]
    pub transport: Vec<BenchTransport>,
    /// Payload sizes in bytes (at least 8, for the timestamp).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    pub sizes: Vec<usize>,
    /// Messages in the throughput run (default 200000; 20000 with --quick).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Rate of the latency run in msg/s.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Messages in the latency run (default 20000; 2000 with --quick).
    #[arg(long)]
    pub paced: Option<u64>,
    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy)]
struct Latency {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1e3;
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({"p50_us": round(self.p50), "p99_us": round(self.p99), "max_us": round(self.max)})
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// One transport × payload result.
#[derive(Debug, Clone)]
struct Result1 {
    transport: &'static str,
    payload: usize,
    messages: u64,
    seconds: f64,
    loaded: Latency,
    paced_messages: u64,
    paced: Latency,
}

impl Result1 {
    fn msg_per_s(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
}

fn payload(size: usize, epoch: Instant) -> Bytes {
    let mut v = vec![0u8; size.max(8)];
    let ns = epoch.elapsed().as_nanos() as u64;
    v[..8].copy_from_slice(&ns.to_le_bytes());
    Bytes::from(v)
}

/// Sends `n` frames (paced at `rate` if given) while receiving them at the sink.
async fn phase(
    source: &mut Source,
    sink: &mut Sink,
    n: u64,
    size: usize,
    rate: Option<u64>,
    epoch: Instant,
) -> anyhow::Result<(Duration, Histogram<u64>)> {
    let start = Instant::now();
    let send = async {
        for i in 0..n {
            y3_lab::net::pace(start, i, rate.map_or(0.0, |r| r as f64)).await;
            source.send(0x10, payload(size, epoch)).await?;
        }
        source.flush().await?;
        anyhow::Ok(())
    };
    let recv = async {
        let mut hist = y3_lab::net::latency_histogram();
        for _ in 0..n {
            let data = tokio::time::timeout(Duration::from_secs(30), sink.recv())
                .await
                .context("no frame for 30 s")?
                .context("sink closed")??;
            let sent = u64::from_le_bytes(data.payload[..8].try_into()?);
            let now = epoch.elapsed().as_nanos() as u64;
            hist.saturating_record(now.saturating_sub(sent).max(1));
        }
        anyhow::Ok((start.elapsed(), hist))
    };
    let (sent, received) = tokio::join!(send, recv);
    sent?;
    received
}

async fn run_one(
    transport: BenchTransport,
    size: usize,
    messages: u64,
    paced: u64,
    rate: u64,
) -> anyhow::Result<Result1> {
    let mut config = RouterConfig::ephemeral();
    config.listen.tcp_tls = transport == BenchTransport::Tls;
    let router = Router::start(config).await?;
    let (addr, kind) = match transport {
        BenchTransport::Tcp => (router.tcp_addr(), Transport::Tcp),
        BenchTransport::Tls => (router.tcp_addr(), Transport::TcpTls),
        BenchTransport::Quic => (router.quic_addr(), Transport::Quic),
    };
    let addr = addr.context("listener missing")?;
    let options = |name: &str| {
        let mut o = ClientOptions::new(addr)
            .transport(kind)
            .trust(router.trust())
            .name(name);
        o.send_queue = 4096;
        o
    };
    let function = StreamFunction::new(options("bench-function"), &[0x10]);
    let function = tokio::spawn(function.run(|d| async move { Some((0x11, d.payload)) }));
    let mut sink = Sink::connect(options("bench-sink"), &[0x11]).await?;
    let ready = Instant::now();
    while router.stats().connections < 2 && ready.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut source = Source::connect(options("bench-source")).await?;
    let epoch = Instant::now();
    phase(
        &mut source,
        &mut sink,
        (messages / 50).max(100),
        size,
        None,
        epoch,
    )
    .await?;
    let (elapsed, loaded) = phase(&mut source, &mut sink, messages, size, None, epoch).await?;
    let (_, paced_hist) = phase(&mut source, &mut sink, paced, size, Some(rate), epoch).await?;
    source.close().await?;
    function.abort();
    sink.close().await;
    router.shutdown().await;
    Ok(Result1 {
        transport: transport.name(),
        payload: size,
        messages,
        seconds: elapsed.as_secs_f64(),
        loaded: Latency::of(&loaded),
        paced_messages: paced,
        paced: Latency::of(&paced_hist),
    })
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// Runs `y3-lab net pipeline`.
///
/// # Errors
/// Router or connection failures, a frame not arriving within 30 s, JSON write errors.
pub fn run(args: &PipelineArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.sizes.iter().any(|&s| s < 8) {
        anyhow::bail!("payload sizes must be at least 8 bytes (the send timestamp)");
    }
    let messages = args
        .messages
        .unwrap_or(if args.quick { 20_000 } else { 200_000 });
    let paced = args
        .paced
        .unwrap_or(if args.quick { 2_000 } else { 20_000 });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(threads) = args.threads {
        builder.worker_threads(threads.max(1));
    }
    let runtime = builder.build()?;
    writeln!(
        out,
        "y3-lab net pipeline: source → router → function → sink, loopback, one process, {} worker threads ({cores} cores)",
        args.threads.unwrap_or(cores)
    )?;
    writeln!(
        out,
        "{:<9} {:>7} {:>10} {:>12} {:>9}   {:<22} paced {}k msg/s p50 / p99 / max",
        "transport",
        "payload",
        "messages",
        "msg/s",
        "MiB/s",
        "loaded p50 / p99",
        args.rate / 1000
    )?;
    out.flush()?;
    let mut results = Vec::new();
    for &transport in &args.transport {
        for &size in &args.sizes {
            let r = runtime.block_on(run_one(transport, size, messages, paced, args.rate))?;
            writeln!(
                out,
                "{:<9} {:>5} B {:>10} {:>12.0} {:>9.1}   {:<22} {} / {} / {}",
                r.transport,
                r.payload,
                r.messages,
                r.msg_per_s(),
                r.msg_per_s() * r.payload as f64 / (1 << 20) as f64,
                format!("{} / {}", fmt_us(r.loaded.p50), fmt_us(r.loaded.p99)),
                fmt_us(r.paced.p50),
                fmt_us(r.paced.p99),
                fmt_us(r.paced.max),
            )?;
            out.flush()?;
            results.push(r);
        }
    }
    if let Some(path) = &args.json {
        let runs: Vec<_> = results
            .iter()
            .map(|r| {
                json!({
                    "transport": r.transport,
                    "payload_bytes": r.payload,
                    "messages": r.messages,
                    "seconds": r.seconds,
                    "msg_per_s": r.msg_per_s().round(),
                    "loaded_latency": r.loaded.json(),
                    "paced_rate_msg_per_s": args.rate,
                    "paced_messages": r.paced_messages,
                    "paced_latency": r.paced.json(),
                })
            })
            .collect();
        let doc = json!({
            "bench": "e2e",
            "pipeline": "source -> router -> stream function -> sink",
            "cores": cores,
            "worker_threads": args.threads.unwrap_or(cores),
            "runs": runs,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
