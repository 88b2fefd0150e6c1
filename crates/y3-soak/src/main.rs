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
mod run;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

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
    let result = runtime.block_on(async { tokio::time::timeout(bound, run::run(&args)).await });
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

/// How long the run may take past its duration: restarts' drains, the in-flight frames,
/// the final drain (30 s at most) and the report.
const WIND_DOWN: Duration = Duration::from_secs(120);
