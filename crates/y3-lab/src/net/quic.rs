//! `y3-lab net quic`: data frames one way over y3's transports, the same frames through the
//! same frame codec, on loopback, in this process (one tokio runtime, two workers).
//!
//! ```text
//!  sender ── Frame::Data(tag 0x10, [send time ns u64 LE][filler]) ──▶ receiver
//!  rows:  tcp             y3's TCP adapter (plain; the reference)
//!         quinn-defaults  y3's QUIC adapter with quinn's defaults for the tuned knobs
//!                         (quic::Tuning::QUINN_DEFAULTS: what y3 ran before)
//!         quinn-y3        y3's QUIC adapter as the router and the clients run it
//!                         (quic::Tuning::default())
//!         s2n-quic        s2n-quic with its defaults, TLS by rustls, under the same codec
//!                         (y3-lab feature net-s2n-quic; see quic_s2n.rs)
//! ```
//!
//! Per row and payload size, on a fresh connection after a warm-up: **flat out**,
//! `messages` frames fed as fast as the writer takes them (flushed when its buffer fills);
//! msg/s is that count over first feed → last receipt, and CPU per frame the process's CPU
//! time (sender and receiver together, user + system) over the frames. **Paced**, `paced`
//! frames at `rate` msg/s, each flushed: one-way latency p50/p99 (receipt minus the stamp,
//! one clock). Medians of `runs` runs, the rows interleaved in each round.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use futures_util::{SinkExt, StreamExt};
use tokio_util::bytes::Bytes;
use y3_transport::frame::{Data, Frame};
use y3_transport::quic::{self, QuicServer, Recovery, ResetSecret, Tuning};
use y3_transport::tcp::{self, TcpServer};
use y3_transport::tls::{Identity, Trust};
use y3_transport::{Connection, FrameCodec};

use crate::measure::median;
use crate::net::Load;
use crate::record::{Dim, Metric, Record, Results};

/// The rows, in display order.
pub const ROWS: [&str; 4] = ["tcp", "quinn-defaults", "quinn-y3", S2N_QUIC];

/// The row of the second QUIC stack (built with the y3-lab feature `net-s2n-quic`).
pub const S2N_QUIC: &str = "s2n-quic";

/// The tag of every frame.
const TAG: u32 = 0x10;

/// Frames sent (and received) before each measured run.
const WARM_UP: u64 = 500;

/// The longest a receiver waits for the next frame before the run fails.
const STALL: Duration = Duration::from_secs(20);

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Payload sizes (at least 8: the stamp).
    pub sizes: Vec<usize>,
    /// Frames, pacing, runs.
    pub load: Load,
    /// Only rows whose name contains one of these.
    pub only: Vec<String>,
    /// The command line.
    pub command: String,
    /// `--quick`.
    pub quick: bool,
}

/// One measured flat-out or paced run.
#[derive(Debug, Clone, Copy)]
struct Run {
    rate: f64,
    cpu_us_per_frame: f64,
    p50_us: f64,
    p99_us: f64,
}

/// What keeps a pair's listener alive while its connections run.
enum Held {
    Tcp(#[allow(dead_code)] TcpServer),
    Quic(#[allow(dead_code)] Arc<QuicServer>),
    #[cfg(feature = "net-s2n-quic")]
    S2n(#[allow(dead_code)] crate::net::quic_s2n::Held),
}

fn local() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn frame(size: usize, epoch: Instant) -> Frame {
    let mut v = vec![b'm'; size.max(8)];
    let ns = epoch.elapsed().as_nanos() as u64;
    v[..8].copy_from_slice(&ns.to_le_bytes());
    Frame::Data(Data::new(TAG, Bytes::from(v)))
}

/// The stamp of a received frame, as a latency now.
fn latency_ns(frame: &Frame, epoch: Instant) -> Result<u64> {
    let Frame::Data(d) = frame else {
        bail!("unexpected frame {frame:?}")
    };
    let stamp = d
        .payload
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| anyhow!("a payload without its stamp"))?;
    Ok((epoch.elapsed().as_nanos() as u64).saturating_sub(stamp))
}

/// Reads `n` frames; their latencies go to `hist`.
async fn receive(
    rx: &mut Connection,
    n: u64,
    epoch: Instant,
    hist: &mut hdrhistogram::Histogram<u64>,
) -> Result<()> {
    for i in 0..n {
        let frame = tokio::time::timeout(STALL, rx.reader.next())
            .await
            .map_err(|_| anyhow!("stalled after {i} of {n} frames"))?
            .ok_or_else(|| anyhow!("closed after {i} of {n} frames"))??;
        hist.saturating_record(latency_ns(&frame, epoch)?.max(1));
    }
    Ok(())
}

/// Sends `n` frames, paced at `rate` (0: flat out, flushed when the buffer fills).
async fn send(tx: &mut Connection, n: u64, size: usize, rate: u64, epoch: Instant) -> Result<()> {
    let start = Instant::now();
    for i in 0..n {
        crate::net::pace(start, i, rate as f64).await;
        tx.writer.feed(frame(size, epoch)).await?;
        if rate > 0 {
            tx.writer.flush().await?;
        }
    }
    tx.writer.flush().await?;
    Ok(())
}

/// A connected (sender, receiver) pair of `row`, warmed up with [`WARM_UP`] frames.
async fn pair(row: &str, size: usize, epoch: Instant) -> Result<(Held, Connection, Connection)> {
    let codec = FrameCodec::default();
    let (held, mut tx, mut rx) = match row {
        "tcp" => {
            let server = TcpServer::bind(local(), None, codec).await?;
            let addr = server.local_addr()?;
            let (tx, rx) = tokio::join!(tcp::connect(addr, None, codec), async {
                server.accept().await?.establish().await
            });
            (Held::Tcp(server), tx?, rx?)
        }
        "quinn-defaults" | "quinn-y3" => {
            let tuning = if row == "quinn-y3" {
                Tuning::default()
            } else {
                Tuning::QUINN_DEFAULTS
            };
            let id = Identity::self_signed()?;
            let recovery = Recovery {
                secret: ResetSecret::random()?,
                peers_dir: None,
            };
            let server = Arc::new(QuicServer::bind_tuned(
                local(),
                id.server_config()?,
                codec,
                &recovery,
                &tuning,
            )?);
            let addr = server.local_addr()?;
            let trust = Trust::Pinned(vec![id.certificate().clone()]).client_config()?;
            let accept = {
                let server = server.clone();
                async move {
                    let incoming = server.accept().await.context("endpoint closed")?;
                    Ok::<_, anyhow::Error>(incoming.establish().await?)
                }
            };
            // The client's stream shows only once it carries bytes: the first warm-up frame.
            let connect = async {
                let mut tx = quic::connect_tuned(addr, trust, "localhost", codec, &tuning).await?;
                tx.writer.send(frame(size, epoch)).await?;
                Ok::<_, anyhow::Error>(tx)
            };
            let (tx, rx) = tokio::join!(connect, accept);
            let (tx, mut rx) = (tx?, rx?);
            let mut ignored = crate::net::latency_histogram();
            receive(&mut rx, 1, epoch, &mut ignored).await?;
            (Held::Quic(server), tx, rx)
        }
        #[cfg(feature = "net-s2n-quic")]
        S2N_QUIC => {
            let (held, tx, mut rx) = crate::net::quic_s2n::pair(codec, frame(size, epoch)).await?;
            let mut ignored = crate::net::latency_histogram();
            receive(&mut rx, 1, epoch, &mut ignored).await?;
            (Held::S2n(held), tx, rx)
        }
        other => bail!("unknown row {other:?}"),
    };
    let mut ignored = crate::net::latency_histogram();
    let (sent, got) = tokio::join!(
        send(&mut tx, WARM_UP, size, 0, epoch),
        receive(&mut rx, WARM_UP, epoch, &mut ignored)
    );
    sent?;
    got?;
    Ok((held, tx, rx))
}

/// One run of `n` frames at `rate` (0: flat out) on a fresh pair.
async fn one_run(row: &str, size: usize, n: u64, rate: u64, epoch: Instant) -> Result<Run> {
    let (held, mut tx, mut rx) = pair(row, size, epoch).await?;
    let mut hist = crate::net::latency_histogram();
    let cpu = cpu_time::ProcessTime::now();
    let start = Instant::now();
    let (sent, got) = tokio::join!(
        send(&mut tx, n, size, rate, epoch),
        receive(&mut rx, n, epoch, &mut hist)
    );
    let wall = start.elapsed();
    let cpu = cpu.elapsed();
    sent?;
    got?;
    let _ = tx.writer.close().await;
    tx.guard.close();
    rx.guard.close();
    drop(held);
    Ok(Run {
        rate: n as f64 / wall.as_secs_f64().max(1e-9),
        cpu_us_per_frame: cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
        p50_us: hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: hist.value_at_quantile(0.99) as f64 / 1e3,
    })
}

/// The rows `only` asks for that this build runs (`s2n-quic` only with its feature).
pub fn built_rows(only: &[String]) -> Vec<&'static str> {
    let mut rows = crate::net::wanted(&ROWS, only);
    if !crate::net::S2N_QUIC_ENABLED {
        rows.retain(|r| *r != S2N_QUIC);
    }
    rows
}

/// Runs the suite.
///
/// # Errors
/// Setup errors; a row that fails becomes a note.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let epoch = Instant::now();
    let load_before = crate::net::load_average();
    let rows = built_rows(&opts.only);
    let mut records = Vec::new();
    let mut notes = Vec::new();
    if !crate::net::S2N_QUIC_ENABLED && crate::net::wanted(&ROWS, &opts.only).contains(&S2N_QUIC) {
        notes.push(format!(
            "{S2N_QUIC} skipped: built without the y3-lab feature net-s2n-quic"
        ));
    }
    for &size in &opts.sizes {
        let case = format!("{size} B");
        let flat = crate::net::rounds(
            "quic",
            &format!("{case}, flat out"),
            &rows,
            opts.load.runs,
            bar,
            &mut notes,
            |row| rt.block_on(one_run(row, size, opts.load.messages, 0, epoch)),
        );
        let paced = crate::net::rounds(
            "quic",
            &format!("{case}, paced"),
            &rows,
            opts.load.runs,
            bar,
            &mut notes,
            |row| rt.block_on(one_run(row, size, opts.load.paced, opts.load.rate, epoch)),
        );
        for ((row, flat), paced) in rows.iter().zip(&flat).zip(&paced) {
            if flat.is_empty() || paced.is_empty() {
                continue;
            }
            let med = |f: fn(&Run) -> f64, runs: &[Run]| {
                median(&runs.iter().map(f).collect::<Vec<_>>()).0
            };
            records.push(
                Record::new("quic", row, &case)
                    .dim(Dim::Payload, size)
                    .dim(Dim::Rate, opts.load.rate as usize)
                    .dim(Dim::Paced, opts.load.paced as usize)
                    .metric(Metric::Messages, opts.load.messages as f64)
                    .metric(Metric::MsgPerS, med(|r| r.rate, flat))
                    .metric(Metric::CpuUsPerFrame, med(|r| r.cpu_us_per_frame, flat))
                    .metric(Metric::P50Us, med(|r| r.p50_us, paced))
                    .metric(Metric::P99Us, med(|r| r.p99_us, paced))
                    .with_runs(flat.len()),
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    notes.push(crate::net::load_note(&load_before));
    let mut packages = vec!["quinn", "quinn-proto", "quinn-udp", "rustls", "ring"];
    if rows.contains(&S2N_QUIC) {
        packages.extend(["s2n-quic", "s2n-quic-rustls", "aws-lc-rs"]);
    }
    let versions = packages
        .into_iter()
        .map(|p| (p.to_string(), crate::net::report::lock_version(p)))
        .collect();
    Ok(Results::of(
        crate::net::meta(
            "quic",
            &opts.command,
            opts.quick,
            "none: sender and receiver share one process and every core".to_string(),
            versions,
        ),
        records,
        notes,
    ))
}
