//! `y3-soak`: `y3 serve` under mixed load and chaos, with every frame accounted.
//!
//! Healthy flows (a paced source and an eager sink per tag, over TCP and QUIC) run beside
//! the chaos: a relay stream function killed mid-stream, a consumer that keeps stalling
//! past the router's write deadline (and is evicted), a sink that pauses 1–5 s at random
//! (and must lose nothing: `pausing.rs`), garbage and partial frames, storms of short-lived
//! sources, the hostile clients of `attacks.rs` (a metadata bomb, budget hogs, partial
//! 1 MiB handshakes), and router restarts (SIGTERM: drain, exit, start again on the same
//! ports). At the end it checks the ledger (see `report.rs`): zero unaccounted frames and
//! no negative balance, every frame a healthy sink missed dropped and counted by the
//! router, per tag frames written equal to frames received, healthy sinks in order,
//! nothing lost for the pausing sink, and every kind of chaos it claims counted as having
//! happened. It writes
//! `soak.json`, `soak.md` and the RSS chart `soak-rss.svg`, and exits non-zero on a failure.
//!
//! ```text
//! y3-soak --y3 target/release/y3 --duration 30m        # the lab's soak
//! y3-soak --y3 target/debug/y3 --duration 60s --restart-every 30s   # the test command's
//! ```

mod attacks;
mod chaos;
mod chart;
mod flows;
mod pausing;
mod prom;
mod report;
mod router;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;
use y3_transport::sdk::{Backoff, ClientOptions, Transport};
use y3_transport::tls::Trust;

use crate::attacks::AttackCounts;
use crate::chaos::ChaosCounts;
use crate::flows::Pace;
use crate::pausing::{Pauses, Quiet};
use crate::report::{Expected, FlowLedger, PausingLedger, Report};
use crate::router::RouterSpec;

/// Soak `y3 serve` under load and chaos.
#[derive(Debug, Parser)]
#[command(name = "y3-soak", version)]
struct Args {
    /// The `y3` binary to run as the router.
    #[arg(long, value_name = "PATH", default_value = "target/release/y3")]
    y3: PathBuf,
    /// How long to run (e.g. 60s, 30m).
    #[arg(long, value_parser = parse_duration, default_value = "30m")]
    duration: Duration,
    /// Restart the router this often.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    restart_every: Duration,
    /// Kill the relay function this often.
    #[arg(long, value_parser = parse_duration, default_value = "7s")]
    kill_every: Duration,
    /// A storm of short-lived sources this often.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    storm_every: Duration,
    /// Sources per storm.
    #[arg(long, default_value_t = 100)]
    storm_clients: usize,
    /// Frames per second of each source.
    #[arg(long, default_value_t = 2000)]
    rate: u32,
    /// Payload bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Keys in the metadata bomb's metadata (100,000: about 1 MB of msgpack).
    #[arg(long, default_value_t = 100_000)]
    bomb_keys: usize,
    /// A metadata bomb this often.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    bomb_every: Duration,
    /// Subscribers that never read (budget hogs).
    #[arg(long, default_value_t = 50)]
    hogs: usize,
    /// Unauthenticated partial 1 MiB handshakes per wave.
    #[arg(long, default_value_t = 100)]
    partial_hellos: usize,
    /// A wave of partial handshakes this often.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    partial_hello_every: Duration,
    /// Where the report goes.
    #[arg(long, value_name = "DIR", default_value = "bench-results/soak")]
    out: PathBuf,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n.parse().map_err(|_| format!("not a duration: {s}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("unknown unit in {s} (ms, s, m, h)")),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // A router frozen by an attack must fail the soak, not hang it: the whole run, wind
    // down included, is bounded (dropping it kills the router).
    let bound = args.duration + WIND_DOWN;
    let result = runtime.block_on(async { tokio::time::timeout(bound, run(&args)).await });
    // Clients still stuck on a frozen router must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(5));
    let report = result.map_err(|_| {
        anyhow::anyhow!(
            "soak failed: the run did not finish within {} s (the duration plus {} s to \
                 wind down): a frozen router, or clients stuck on it",
            bound.as_secs(),
            WIND_DOWN.as_secs()
        )
    })??;
    let md = report.markdown();
    print!("{md}");
    std::fs::write(args.out.join("soak.md"), &md)?;
    std::fs::write(
        args.out.join("soak.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let failures = report.failures();
    if !failures.is_empty() {
        anyhow::bail!("soak failed:\n  {}", failures.join("\n  "));
    }
    println!("soak passed; report in {}", args.out.display());
    Ok(())
}

async fn run(args: &Args) -> anyhow::Result<Report> {
    let dir = args.out.canonicalize()?;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem())?;
    std::fs::write(&key, certified.signing_key.serialize_pem())?;
    let bin = args
        .y3
        .canonicalize()
        .with_context(|| format!("no y3 binary at {}", args.y3.display()))?;
    let spec = RouterSpec::prepare(bin, &dir, &cert, &key)?;
    let trust = Trust::Pinned(vec![certified.cert.der().clone()]);
    let client = |name: &str, quic: bool| {
        let (addr, transport) = if quic {
            (spec.quic, Transport::Quic)
        } else {
            (spec.tcp, Transport::Tcp)
        };
        ClientOptions::new(addr)
            .transport(transport)
            .trust(trust.clone())
            .name(name)
            .backoff(Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(500),
                attempts: 200,
            })
    };

    let epoch = Instant::now();
    let mut router = Some(spec.start(0)?);
    let (stop_sources, stop_sinks) = (CancellationToken::new(), CancellationToken::new());
    let counts = Arc::new(ChaosCounts::default());
    let attacked = Arc::new(AttackCounts::default());

    // Healthy flows: (name, tag, over QUIC).
    let healthy = [
        ("healthy-tcp", 0x10u32, false),
        ("healthy-quic", 0x11, true),
    ];
    let mut sources = Vec::new();
    let mut seen = Vec::new();
    let mut sinks = tokio::task::JoinSet::new();
    for (name, tag, quic) in healthy {
        let rec = flows::received();
        seen.push(rec.clone());
        sinks.spawn(flows::sink(
            client(&format!("{name}-sink"), quic),
            tag,
            Pace::Eager,
            epoch,
            stop_sinks.clone(),
            rec,
        ));
    }
    // Chaos flows: relay 0x20 -> 0x21 through a function that gets killed; a stalling
    // consumer of 0x30.
    let relayed = flows::received();
    sinks.spawn(flows::sink(
        client("relay-sink", false),
        0x21,
        Pace::Eager,
        epoch,
        stop_sinks.clone(),
        relayed.clone(),
    ));
    let stalled = flows::received();
    // 1 KiB frames and 20 s stalls: the socket buffers take the first few seconds' frames
    // (~10 MB on loopback), the router's queue the rest; past the router's 10 s write
    // deadline the consumer is evicted, as a real stuck one would be (its backlog stays
    // within the 64 MiB queue: the deadline evicts it, not the budget).
    let stalling = Pace::Stalling {
        read: Duration::from_secs(3),
        stall: Duration::from_secs(20),
    };
    sinks.spawn(flows::sink(
        client("stalling-sink", false),
        0x30,
        stalling,
        epoch,
        stop_sinks.clone(),
        stalled.clone(),
    ));
    // The pausing flow: 1 KiB frames at the sources' rate on 0x12, a sink pausing 1–5 s.
    let end = epoch + args.duration;
    let next_quiet = |from: Instant| (from + args.restart_every).min(end);
    let quiet = Arc::new(Quiet::new(next_quiet(Instant::now())));
    let paused_seen = flows::received();
    let pauses = Arc::new(Pauses::default());
    sinks.spawn(pausing::sink(
        client(PAUSING_SINK, false),
        PAUSING_TAG,
        epoch,
        quiet.clone(),
        stop_sinks.clone(),
        paused_seen.clone(),
        pauses.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pausing_source = tokio::spawn(flows::quiet_source(
        client("pausing-source", false),
        PAUSING_TAG,
        args.rate,
        1024,
        epoch,
        stop_sources.clone(),
        Some(quiet.clone()),
    ));
    for (name, tag, quic) in healthy {
        sources.push(tokio::spawn(flows::source(
            client(name, quic),
            tag,
            args.rate,
            args.size,
            epoch,
            stop_sources.clone(),
        )));
    }
    let mut chaos = tokio::task::JoinSet::new();
    chaos.spawn(flows_ignored(flows::source(
        client("relay-source", false),
        0x20,
        args.rate,
        args.size,
        epoch,
        stop_sources.clone(),
    )));
    chaos.spawn(flows_ignored(flows::source(
        client("stalled-source", false),
        0x30,
        args.rate,
        1024,
        epoch,
        stop_sources.clone(),
    )));
    chaos.spawn(chaos::killed_function(
        client("relay", false),
        0x20,
        0x21,
        args.kill_every,
        stop_sources.clone(),
        counts.clone(),
    ));
    chaos.spawn(chaos::garbage(
        spec.tcp,
        Duration::from_millis(250),
        stop_sources.clone(),
        counts.clone(),
    ));
    chaos.spawn(chaos::partial_frames(
        spec.tcp,
        Duration::from_secs(2),
        stop_sources.clone(),
        counts.clone(),
    ));
    chaos.spawn(flows_ignored(flows::source(
        client("hog-source", false),
        attacks::HOG_TAG,
        args.rate,
        1024,
        epoch,
        stop_sources.clone(),
    )));
    chaos.spawn(attacks::budget_hogs(
        spec.tcp,
        args.hogs,
        stop_sources.clone(),
        attacked.clone(),
    ));
    chaos.spawn(attacks::metadata_bombs(
        spec.tcp,
        args.bomb_keys,
        args.bomb_every,
        stop_sources.clone(),
        attacked.clone(),
    ));
    chaos.spawn(attacks::partial_hellos(
        spec.tcp,
        args.partial_hellos,
        args.partial_hello_every,
        stop_sources.clone(),
        attacked.clone(),
    ));
    chaos.spawn(chaos::storms(
        client("storm", false),
        args.storm_clients,
        0x40,
        args.storm_every,
        stop_sources.clone(),
        counts.clone(),
    ));

    // The clock: RSS every second, a restart every `restart_every`.
    let mut samples = Vec::new();
    let mut lifetimes = Vec::new();
    let mut last_restart = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let progress = args.duration.as_secs().max(10) / 10;
    while epoch.elapsed() < args.duration {
        tick.tick().await;
        let live = router.as_ref().context("a router runs")?;
        if let Some(rss) = live.rss() {
            samples.push((
                epoch.elapsed().as_secs_f64(),
                rss as f64 / 1048576.0,
                lifetimes.len(),
            ));
        }
        let secs = epoch.elapsed().as_secs();
        if secs.is_multiple_of(progress) {
            eprintln!(
                "soak: {secs} s, router RSS {:.1} MiB, lifetime {}",
                samples.last().map_or(0.0, |s| s.1),
                lifetimes.len()
            );
        }
        let remaining = args.duration.saturating_sub(epoch.elapsed());
        if last_restart.elapsed() >= args.restart_every && remaining > Duration::from_secs(10) {
            let (totals, _) = tokio::task::spawn_blocking({
                let r = router.take().context("a router runs")?;
                move || r.stop()
            })
            .await??;
            eprintln!(
                "soak: router lifetime {} stopped, {} unaccounted",
                lifetimes.len(),
                totals.unaccounted()
            );
            lifetimes.push(totals);
            router = Some(spec.start(lifetimes.len())?);
            last_restart = Instant::now();
            quiet.restarted(next_quiet(last_restart));
        }
    }

    // Wind down: sources stop, the in-flight frames arrive, then the sinks stop, then the
    // router drains and reports.
    stop_sources.cancel();
    let mut sent = Vec::new();
    for s in sources {
        sent.push(s.await?);
    }
    let pausing_sent = pausing_source.await?;
    while chaos.join_next().await.is_some() {}
    tokio::time::sleep(Duration::from_secs(2)).await;
    let live = router.take().context("a router runs")?;
    let (totals, _) = tokio::task::spawn_blocking(move || live.stop()).await??;
    lifetimes.push(totals);
    stop_sinks.cancel();
    while sinks.join_next().await.is_some() {}

    let seconds = epoch.elapsed().as_secs_f64();
    let healthy = healthy
        .iter()
        .zip(&sent)
        .zip(&seen)
        .map(|(((name, tag, _), sent), seen)| {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            FlowLedger::new(name, *tag, *sent, &seen, &lifetimes)
        })
        .collect();
    let frames = |r: &Arc<std::sync::Mutex<flows::Received>>| {
        r.lock().unwrap_or_else(|e| e.into_inner()).frames
    };
    let chaos_sinks = vec![
        ("relay-sink (0x21)".to_owned(), frames(&relayed)),
        ("stalling-sink (0x30)".to_owned(), frames(&stalled)),
    ];
    let pausing = {
        let seen = paused_seen.lock().unwrap_or_else(|e| e.into_inner());
        let flow = FlowLedger::new(PAUSING_SINK, PAUSING_TAG, pausing_sent, &seen, &lifetimes);
        let pauses = Arc::try_unwrap(pauses).unwrap_or_default();
        PausingLedger::new(flow, pauses, &lifetimes)
    };
    chart::rss(&samples, &args.out.join("soak-rss.svg"))?;
    let peak = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    let last_life = lifetimes.len() - 1;
    let last_peak = samples
        .iter()
        .filter(|s| s.2 == last_life)
        .map(|s| s.1)
        .fold(0.0, f64::max);
    let rss_mib = [
        samples.first().map_or(0.0, |s| s.1),
        peak,
        samples.last().map_or(0.0, |s| s.1),
        last_peak,
    ];
    let counts = Arc::try_unwrap(counts).unwrap_or_default();
    let attacked = Arc::try_unwrap(attacked).unwrap_or_default();
    let expected = Expected {
        kills: args.duration > args.kill_every + Duration::from_secs(1),
        restarts: args.duration > args.restart_every + Duration::from_secs(10),
        evictions: args.duration >= Duration::from_secs(30),
        storms: true,
        bombs: true,
        hogs: args.hogs > 0,
        partial_hellos: args.partial_hellos > 0,
    };
    Ok(Report {
        expected,
        attacks: attacked,
        seconds,
        lifetimes,
        healthy,
        pausing,
        chaos_sinks,
        chaos: counts,
        rss_mib,
    })
}

/// How long the run may take past its duration: restarts' drains, the in-flight frames,
/// the final drain (30 s at most) and the report.
const WIND_DOWN: Duration = Duration::from_secs(120);

/// The pausing sink's client name and tag.
const PAUSING_SINK: &str = "pausing-sink";
const PAUSING_TAG: u32 = 0x12;

/// Runs a chaos flow's source; its counts are not part of the healthy ledger.
async fn flows_ignored(source: impl std::future::Future<Output = flows::Sent>) {
    source.await;
}
