//! The soak's run, phase by phase:
//!
//! ```text
//!   Soak::prepare (certificate, router spec, clients' options) ─▶ router lifetime 0
//!     ─▶ Sinks::start ─▶ Sources::start ─▶ start_chaos
//!     ─▶ Clock::run (RSS each second, a restart every restart_every) until the duration
//!     ─▶ wind_down (sources stop, the router drains and reports, sinks stop) ─▶ report
//! ```

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use y3_transport::sdk::{Backoff, ClientOptions, Transport};
use y3_transport::tls::Trust;

use crate::attacks::{self, AttackCounts};
use crate::chaos::{self, ChaosCounts};
use crate::flows::{self, Pace, Received, Sent};
use crate::pausing::{self, Pauses, Quiet};
use crate::prom::Totals;
use crate::report::{Expected, FlowLedger, PausingLedger, Report};
use crate::router::{RouterProcess, RouterSpec};
use crate::{chart, Args};

/// The pausing sink's client name and tag.
const PAUSING_SINK: &str = "pausing-sink";
const PAUSING_TAG: u32 = 0x12;

/// Healthy flows: (name, tag, over QUIC).
const HEALTHY: [(&str, u32, bool); 2] =
    [("healthy-tcp", 0x10, false), ("healthy-quic", 0x11, true)];

/// Runs the soak of `args` and returns its report (the checks are the caller's).
pub async fn run(args: &Args) -> anyhow::Result<Report> {
    let soak = Soak::prepare(args)?;
    let router = soak.spec.start(0)?;
    let sinks = Sinks::start(&soak);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sources = Sources::start(&soak, &sinks.quiet);
    let chaos = start_chaos(&soak);
    let (mut clock, router) = Clock::run(&soak, router, &sinks.quiet).await?;
    let (ended, last_lifetime) = wind_down(&soak, sources, chaos, sinks.tasks, router).await?;
    clock.lifetimes.push(last_lifetime);
    report(soak, sinks.seen, ended, clock)
}

/// What every phase shares: the arguments, the router's spec, the clients' trust, the
/// run's start, the stop signals and the chaos' counters.
struct Soak<'a> {
    args: &'a Args,
    spec: RouterSpec,
    trust: Trust,
    epoch: Instant,
    /// Stops sources and chaos (first).
    stop_sources: CancellationToken,
    /// Stops sinks (once the in-flight frames arrived).
    stop_sinks: CancellationToken,
    counts: Arc<ChaosCounts>,
    attacked: Arc<AttackCounts>,
}

impl<'a> Soak<'a> {
    /// Writes a self-signed certificate into the report directory and the router's
    /// config beside it (`RouterSpec::prepare`).
    fn prepare(args: &'a Args) -> anyhow::Result<Soak<'a>> {
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
        Ok(Soak {
            args,
            spec,
            trust: Trust::Pinned(vec![certified.cert.der().clone()]),
            epoch: Instant::now(),
            stop_sources: CancellationToken::new(),
            stop_sinks: CancellationToken::new(),
            counts: Arc::default(),
            attacked: Arc::default(),
        })
    }

    /// The options of client `name`, over QUIC or TCP, reconnecting quickly (a restart).
    fn client(&self, name: &str, quic: bool) -> ClientOptions {
        let (addr, transport) = if quic {
            (self.spec.quic, Transport::Quic)
        } else {
            (self.spec.tcp, Transport::Tcp)
        };
        ClientOptions::new(addr)
            .transport(transport)
            .trust(self.trust.clone())
            .name(name)
            .backoff(Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(500),
                attempts: 200,
            })
    }

    /// The router's TCP address (the raw-socket chaos uses it).
    fn tcp(&self) -> SocketAddr {
        self.spec.tcp
    }

    /// When the next quiet window (of the pausing flow) starts after `from`.
    fn next_quiet(&self, from: Instant) -> Instant {
        (from + self.args.restart_every).min(self.epoch + self.args.duration)
    }
}

/// Shared received-frame records of a sink.
type Seen = Arc<Mutex<Received>>;

/// What the sinks saw, as the report reads it.
struct SinksSeen {
    /// The healthy flows' sinks, in [`HEALTHY`]'s order.
    healthy: Vec<Seen>,
    relayed: Seen,
    stalled: Seen,
    paused: Seen,
    pauses: Arc<Pauses>,
}

/// The running sinks.
struct Sinks {
    tasks: JoinSet<()>,
    seen: SinksSeen,
    /// The pausing flow's quiet windows (around restarts).
    quiet: Arc<Quiet>,
}

impl Sinks {
    /// Starts an eager sink per healthy flow, the relay's sink, the stalling consumer and
    /// the pausing sink.
    fn start(soak: &Soak<'_>) -> Sinks {
        let mut tasks = JoinSet::new();
        let mut healthy = Vec::new();
        for (name, tag, quic) in HEALTHY {
            let rec = flows::received();
            healthy.push(rec.clone());
            tasks.spawn(flows::sink(
                soak.client(&format!("{name}-sink"), quic),
                tag,
                Pace::Eager,
                soak.epoch,
                soak.stop_sinks.clone(),
                rec,
            ));
        }
        // Chaos flows: relay 0x20 -> 0x21 through a function that gets killed; a stalling
        // consumer of 0x30.
        let relayed = flows::received();
        tasks.spawn(flows::sink(
            soak.client("relay-sink", false),
            0x21,
            Pace::Eager,
            soak.epoch,
            soak.stop_sinks.clone(),
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
        tasks.spawn(flows::sink(
            soak.client("stalling-sink", false),
            0x30,
            stalling,
            soak.epoch,
            soak.stop_sinks.clone(),
            stalled.clone(),
        ));
        // The pausing flow: 1 KiB frames at the sources' rate on 0x12, a sink pausing 1–5 s.
        let quiet = Arc::new(Quiet::new(soak.next_quiet(Instant::now())));
        let paused = flows::received();
        let pauses = Arc::new(Pauses::default());
        tasks.spawn(pausing::sink(
            soak.client(PAUSING_SINK, false),
            PAUSING_TAG,
            soak.epoch,
            quiet.clone(),
            soak.stop_sinks.clone(),
            paused.clone(),
            pauses.clone(),
        ));
        Sinks {
            tasks,
            seen: SinksSeen {
                healthy,
                relayed,
                stalled,
                paused,
                pauses,
            },
            quiet,
        }
    }
}

/// The running sources whose counts the ledger checks.
struct Sources {
    /// The pausing flow's source.
    pausing: JoinHandle<Sent>,
    /// The healthy flows' sources, in [`HEALTHY`]'s order.
    healthy: Vec<JoinHandle<Sent>>,
}

impl Sources {
    /// Starts the pausing flow's source (quiet in `quiet`'s windows) and one paced source
    /// per healthy flow.
    fn start(soak: &Soak<'_>, quiet: &Arc<Quiet>) -> Sources {
        let args = soak.args;
        let pausing = tokio::spawn(flows::quiet_source(
            soak.client("pausing-source", false),
            PAUSING_TAG,
            args.rate,
            1024,
            soak.epoch,
            soak.stop_sources.clone(),
            Some(quiet.clone()),
        ));
        let healthy = HEALTHY
            .iter()
            .map(|&(name, tag, quic)| {
                tokio::spawn(flows::source(
                    soak.client(name, quic),
                    tag,
                    args.rate,
                    args.size,
                    soak.epoch,
                    soak.stop_sources.clone(),
                ))
            })
            .collect();
        Sources { pausing, healthy }
    }
}

/// Starts the chaos beside the healthy flows: the relay's source and killed function, the
/// stalled consumer's source, garbage, partial frames, the budget hogs (and their source),
/// metadata bombs, partial handshakes, and storms of short-lived sources.
fn start_chaos(soak: &Soak<'_>) -> JoinSet<()> {
    let (args, epoch, stop, tcp) = (soak.args, soak.epoch, &soak.stop_sources, soak.tcp());
    let (counts, attacked) = (&soak.counts, &soak.attacked);
    let mut chaos = JoinSet::new();
    chaos.spawn(flows_ignored(flows::source(
        soak.client("relay-source", false),
        0x20,
        args.rate,
        args.size,
        epoch,
        stop.clone(),
    )));
    chaos.spawn(flows_ignored(flows::source(
        soak.client("stalled-source", false),
        0x30,
        args.rate,
        1024,
        epoch,
        stop.clone(),
    )));
    chaos.spawn(chaos::killed_function(
        soak.client("relay", false),
        0x20,
        0x21,
        args.kill_every,
        stop.clone(),
        counts.clone(),
    ));
    chaos.spawn(chaos::garbage(
        tcp,
        Duration::from_millis(250),
        stop.clone(),
        counts.clone(),
    ));
    chaos.spawn(chaos::partial_frames(
        tcp,
        Duration::from_secs(2),
        stop.clone(),
        counts.clone(),
    ));
    chaos.spawn(flows_ignored(flows::source(
        soak.client("hog-source", false),
        attacks::HOG_TAG,
        args.rate,
        1024,
        epoch,
        stop.clone(),
    )));
    chaos.spawn(attacks::budget_hogs(
        tcp,
        args.hogs,
        stop.clone(),
        attacked.clone(),
    ));
    chaos.spawn(attacks::metadata_bombs(
        tcp,
        args.bomb_keys,
        args.bomb_every,
        stop.clone(),
        attacked.clone(),
    ));
    chaos.spawn(attacks::partial_hellos(
        tcp,
        args.partial_hellos,
        args.partial_hello_every,
        stop.clone(),
        attacked.clone(),
    ));
    chaos.spawn(chaos::storms(
        soak.client("storm", false),
        args.storm_clients,
        0x40,
        args.storm_every,
        stop.clone(),
        counts.clone(),
    ));
    chaos
}

/// The run's clock: the router's RSS each second, and its lifetimes.
struct Clock {
    /// (seconds since the start, RSS in MiB, the lifetime it was taken in).
    samples: Vec<(f64, f64, usize)>,
    /// The final totals of each stopped lifetime.
    lifetimes: Vec<Totals>,
}

impl Clock {
    /// Until the duration: samples the router's RSS every second, prints progress, and
    /// restarts it (SIGTERM, then a new lifetime on the same ports) every `restart_every`
    /// unless less than 10 s remain. The lifetime still running comes back with the clock.
    async fn run(
        soak: &Soak<'_>,
        router: RouterProcess,
        quiet: &Quiet,
    ) -> anyhow::Result<(Clock, RouterProcess)> {
        let (args, epoch) = (soak.args, soak.epoch);
        let mut router = Some(router);
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
                router = Some(soak.spec.start(lifetimes.len())?);
                last_restart = Instant::now();
                quiet.restarted(soak.next_quiet(last_restart));
            }
        }
        let router = router.context("a router runs")?;
        Ok((Clock { samples, lifetimes }, router))
    }
}

/// What the wind-down collected.
struct Ended {
    /// What each healthy source wrote, in [`HEALTHY`]'s order.
    sent: Vec<Sent>,
    /// What the pausing source wrote.
    pausing_sent: Sent,
}

/// Winds down: sources and chaos stop, the in-flight frames arrive, then the router
/// drains and reports (the final totals of its last lifetime, returned beside what the
/// sources wrote), then the sinks stop.
async fn wind_down(
    soak: &Soak<'_>,
    sources: Sources,
    mut chaos: JoinSet<()>,
    mut sinks: JoinSet<()>,
    router: RouterProcess,
) -> anyhow::Result<(Ended, Totals)> {
    soak.stop_sources.cancel();
    let mut sent = Vec::new();
    for s in sources.healthy {
        sent.push(s.await?);
    }
    let pausing_sent = sources.pausing.await?;
    while chaos.join_next().await.is_some() {}
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (last_lifetime, _) = tokio::task::spawn_blocking(move || router.stop()).await??;
    soak.stop_sinks.cancel();
    while sinks.join_next().await.is_some() {}
    Ok((Ended { sent, pausing_sent }, last_lifetime))
}

/// The report: each flow's ledger against the router's lifetimes, the RSS chart (written
/// into the report directory) and its figures, and what the chaos did and was expected to.
fn report(soak: Soak<'_>, seen: SinksSeen, ended: Ended, clock: Clock) -> anyhow::Result<Report> {
    let args = soak.args;
    let Clock { samples, lifetimes } = clock;
    let seconds = soak.epoch.elapsed().as_secs_f64();
    let healthy = HEALTHY
        .iter()
        .zip(&ended.sent)
        .zip(&seen.healthy)
        .map(|(((name, tag, _), sent), seen)| {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            FlowLedger::new(name, *tag, *sent, &seen, &lifetimes)
        })
        .collect();
    let frames = |r: &Seen| r.lock().unwrap_or_else(|e| e.into_inner()).frames;
    let chaos_sinks = vec![
        ("relay-sink (0x21)".to_owned(), frames(&seen.relayed)),
        ("stalling-sink (0x30)".to_owned(), frames(&seen.stalled)),
    ];
    let pausing = {
        let paused = seen.paused.lock().unwrap_or_else(|e| e.into_inner());
        let flow = FlowLedger::new(
            PAUSING_SINK,
            PAUSING_TAG,
            ended.pausing_sent,
            &paused,
            &lifetimes,
        );
        let pauses = Arc::try_unwrap(seen.pauses).unwrap_or_default();
        PausingLedger::new(flow, pauses, &lifetimes)
    };
    chart::rss(&samples, &args.out.join("soak-rss.svg"))?;
    let rss_mib = rss_figures(&samples, lifetimes.len() - 1);
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
        attacks: Arc::try_unwrap(soak.attacked).unwrap_or_default(),
        seconds,
        lifetimes,
        healthy,
        pausing,
        chaos_sinks,
        chaos: Arc::try_unwrap(soak.counts).unwrap_or_default(),
        rss_mib,
    })
}

/// The RSS figures of the report (MiB): the first sample, the peak, the last sample, and
/// the peak of lifetime `last_life`.
fn rss_figures(samples: &[(f64, f64, usize)], last_life: usize) -> [f64; 4] {
    let peak = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    let last_peak = samples
        .iter()
        .filter(|s| s.2 == last_life)
        .map(|s| s.1)
        .fold(0.0, f64::max);
    [
        samples.first().map_or(0.0, |s| s.1),
        peak,
        samples.last().map_or(0.0, |s| s.1),
        last_peak,
    ]
}

/// Runs a chaos flow's source; its counts are not part of the healthy ledger.
async fn flows_ignored(source: impl std::future::Future<Output = flows::Sent>) {
    source.await;
}
