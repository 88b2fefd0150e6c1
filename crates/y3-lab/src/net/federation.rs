//! `y3-lab net federation` (issue 15's benchmark): source and sink on different routers,
//! next to source and sink on one router, for y3's routers federated through a
//! `nats-server` and for two real YoMo v1.22.0 zippers linked by YoMo's own mesh.
//!
//! ```text
//! single:     source ──▶ router ──▶ sink
//! y3, two:    source ──▶ y3 serve A ──▶ nats-server ──▶ y3 serve B ──▶ sink
//! YoMo, two:  source ──▶ zipper A ──mesh (A dials B as an UpstreamZipper)──▶ zipper B ──▶ sink
//! NATS hop:   nats-source ──▶ nats-server ──▶ nats-sink
//! ```
//!
//! Rows ([`ROWS`]), each a path and the clients driving it:
//!
//! - `y3-single`, `y3-federated`: `y3 serve` (release) with y3's own clients over TCP
//!   (`y3-lab net client y3-source|y3-sink`);
//! - `y3-federated-yomo-clients`: the two federated `y3 serve` with YoMo's own clients over
//!   QUIC (`yomo-peer source|sink`): the same clients as YoMo's rows;
//! - `yomo-single`, `yomo-mesh`: YoMo's zipper (`yomo-peer zipper`; zipper A lists B in its
//!   mesh, and the lab starts the source once A reports the link up) with YoMo's clients;
//! - `nats-hop`: no router, a publisher and a subscriber of the same `nats-server`
//!   (`y3-lab net client nats-source|nats-sink`, [`super::nats_hop`]): what the NATS pass
//!   alone costs, for issue 28's target (federated p50 ≤ 1.1 × (single-router p50 + the
//!   hop's p50), all three from the same run).
//!
//! The processes, clients, stamps and sink reports are the `yomo` suite's ([`super::yomo`]);
//! one `nats-server` (from `NATS_SERVER_BIN`, `target/tools/bin` or `PATH`) serves the
//! whole run, and every phase starts fresh routers. Per payload size:
//!
//! 1. **flat out**: the source writes `messages` stamped messages as fast as its client
//!    goes; msg/s is the sink's, first arrival to last. A router that drops (y3's federation
//!    under `[queue] policy = "drop_oldest"`, or a NATS that stalls: past its queue it drops
//!    and counts) delivers less than it was given: the sink stops once frames stop for [`IDLE`], and what it
//!    missed, next to what the routers counted, is a note.
//! 2. **paced**: `paced` messages at `rate` msg/s; one-way latency p50/p99/p999 (arrival
//!    minus the stamp, nearest rank).
//!
//! Router CPU per message: user + system time of every router process and of
//! `nats-server` over the flat-out phase, over the messages written (the hop: nats-server's
//! alone).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use y3_transport::sdk::Transport;

use crate::measure::median;
use crate::net::nats_hop;
use crate::net::proc::{self, Child};
use crate::net::report as net_report;
use crate::net::yomo::{
    self, await_json, spawn_client, strings, Clients, Peers, Phase, Role, Router, RouterProc,
    SinkReport, Workload, CONNECT,
};
use crate::net::{Load, Programs};
use crate::record::{Dim, Metric, Record, Results};

/// How long a sink waits for the next frame once frames have started arriving, before it
/// reports the rest as lost.
pub const IDLE: Duration = Duration::from_secs(2);

/// Where source and sink are, and what is between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// Both on one router, with these clients.
    Single(Router, Clients),
    /// The source on router A, the sink on router B: y3's through NATS, YoMo's through
    /// its mesh.
    TwoRouters(Router, Clients),
    /// No router: a NATS publisher and subscriber of the run's `nats-server`.
    NatsHop,
}

/// One row of the report.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The row's name.
    pub name: &'static str,
    pub(crate) via: Via,
}

/// The row of the NATS hop alone.
pub const NATS_HOP: &str = "nats-hop";

/// The rows, in display order.
pub const ROWS: [Row; 6] = [
    Row {
        name: "y3-single",
        via: Via::Single(Router::Y3, Clients::Y3(Transport::Tcp)),
    },
    Row {
        name: "y3-federated",
        via: Via::TwoRouters(Router::Y3, Clients::Y3(Transport::Tcp)),
    },
    Row {
        name: NATS_HOP,
        via: Via::NatsHop,
    },
    Row {
        name: "y3-federated-yomo-clients",
        via: Via::TwoRouters(Router::Y3, Clients::Yomo),
    },
    Row {
        name: "yomo-single",
        via: Via::Single(Router::Zipper, Clients::Yomo),
    },
    Row {
        name: "yomo-mesh",
        via: Via::TwoRouters(Router::Zipper, Clients::Yomo),
    },
];

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Payload sizes in bytes (at least the 16-byte stamp).
    pub sizes: Vec<usize>,
    /// Messages, pacing and runs.
    pub load: Load,
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
    /// `y3 serve`'s `[queue] block_timeout_ms`.
    pub block_timeout_ms: u64,
}

fn nats_server() -> Result<PathBuf> {
    crate::net::find_nats_server().ok_or_else(|| anyhow!(crate::net::NATS_SERVER_MISSING))
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The text of `GET /metrics` (empty when it cannot be read).
fn scrape(addr: SocketAddr) -> String {
    (|| -> std::io::Result<String> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    })()
    .unwrap_or_default()
}

/// The sum of every sample of the metrics named `name` (any labels).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labels) => labels.split_once("} ")?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

/// What routers say they dropped: federation losses and local drops.
const DROP_METRICS: [&str; 2] = ["y3_router_federation_lost_total", "y3_router_dropped_total"];

/// A router of a phase, and its metrics address (y3's).
struct Node {
    router: RouterProc,
    metrics: Option<SocketAddr>,
}

/// Starts `y3 serve` with `config` written next to the run's other files.
fn start_y3(peers: &Peers, config: &Path) -> Result<Node> {
    let mut args = strings(&[
        "serve",
        "--tcp",
        "127.0.0.1:0",
        "--quic",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--dev-cert-out",
    ]);
    args.push(peers.cert.display().to_string());
    args.push("--config".into());
    args.push(config.display().to_string());
    let (router, ready) = RouterProc::serve(&peers.y3, &args, "lab-federation")?;
    Ok(Node {
        router,
        metrics: ready.listener("metrics"),
    })
}

/// What one phase measured.
#[derive(Debug, Clone)]
struct PhaseResult {
    sink: SinkReport,
    /// CPU seconds of the routers and nats-server from just before the source started to
    /// the sink's report.
    cpu: Option<f64>,
    /// Frames the routers counted as dropped (y3's metrics; 0 for YoMo's zippers).
    counted: f64,
}

/// The run's shared state: programs, the NATS server, the configuration files.
struct Bench {
    peers: Peers,
    nats: Child,
    /// Where `nats` listens (the hop's clients connect there).
    nats_addr: SocketAddr,
    /// `y3 serve`'s configuration for one router and for federated routers `a` and `b`.
    configs: [PathBuf; 3],
}

impl Bench {
    fn start(peers: Peers, block_timeout_ms: u64) -> Result<Bench> {
        let port = free_port()?;
        let args = strings(&["-a", "127.0.0.1", "-p", &port.to_string()]);
        let nats = Child::spawn("nats-server", &nats_server()?, &args, None)?;
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if start.elapsed() > Duration::from_secs(10) {
                bail!("nats-server did not listen");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let url = format!("nats://127.0.0.1:{port}");
        let dir = std::env::temp_dir();
        let pid = std::process::id();
        let base = yomo::serve_config(block_timeout_ms);
        let configs = [
            ("single", String::new()),
            (
                "a",
                format!("\n[federation]\nurls = [{url:?}]\nname = \"a\"\n"),
            ),
            (
                "b",
                format!("\n[federation]\nurls = [{url:?}]\nname = \"b\"\n"),
            ),
        ]
        .map(|(name, federation)| {
            let path = dir.join(format!("y3-bench-federation-{pid}-{name}.toml"));
            (path, format!("{base}{federation}"))
        });
        for (path, text) in &configs {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(Bench {
            peers,
            nats,
            nats_addr: SocketAddr::from(([127, 0, 0, 1], port)),
            configs: configs.map(|(path, _)| path),
        })
    }

    /// The routers of `via` (none for the NATS hop), the source's first, the sink's last.
    fn routers(&self, via: Via) -> Result<Vec<Node>> {
        let peers = &self.peers;
        let zipper = |args: &[&str]| -> Result<Node> {
            Ok(Node {
                router: RouterProc::start_with(peers, Router::Zipper, &strings(args))?,
                metrics: None,
            })
        };
        Ok(match via {
            Via::Single(Router::Y3, _) => vec![start_y3(peers, &self.configs[0])?],
            Via::Single(Router::Zipper, _) => vec![zipper(&[])?],
            Via::TwoRouters(Router::Y3, _) => {
                let b = start_y3(peers, &self.configs[2])?;
                vec![start_y3(peers, &self.configs[1])?, b]
            }
            Via::TwoRouters(Router::Zipper, _) => {
                let b = zipper(&["--name", "zipper-b"])?;
                let mesh = format!("zipper-b={}", b.router.quic);
                vec![zipper(&["--name", "zipper-a", "--mesh", &mesh])?, b]
            }
            Via::NatsHop => Vec::new(),
        })
    }

    /// Starts the client of `role` for `row` (the routers: `routers`, the source's first).
    fn client(&self, row: &Row, routers: &[Node], role: Role, phase: &Phase) -> Result<Child> {
        let (router, clients) = match row.via {
            Via::Single(r, c) | Via::TwoRouters(r, c) => (r, c),
            Via::NatsHop => return self.hop_client(row, role, phase),
        };
        let at = match role {
            Role::Sink => routers.last(),
            _ => routers.first(),
        };
        let clients = yomo::Row {
            name: row.name,
            router,
            clients,
        };
        spawn_client(
            &self.peers,
            &clients,
            &at.context("no router")?.router,
            role,
            phase,
        )
    }

    /// `y3-lab net client nats-source|nats-sink` against the run's nats-server.
    fn hop_client(&self, row: &Row, role: Role, phase: &Phase) -> Result<Child> {
        let kind = nats_hop::client_kind(role)?;
        let mut args = strings(&["net", "client", kind, "--addr"]);
        args.push(self.nats_addr.to_string());
        for (flag, value) in [
            ("--count", phase.count.to_string()),
            ("--size", phase.size.to_string()),
            ("--rate", phase.rate.to_string()),
            ("--limit-s", phase.limit.as_secs().max(1).to_string()),
            (
                "--idle-s",
                phase.idle.map_or(0.0, |d| d.as_secs_f64()).to_string(),
            ),
        ] {
            args.extend([flag.to_string(), value]);
        }
        let name = format!("{} {kind}", row.name);
        self.peers
            .spawn(&name, &["RUST_LOG=warn"], &self.peers.lab, &args)
    }

    /// Waits until router A can reach the sink on router B: y3's A has heard of B's
    /// interest; YoMo's zipper A reports its mesh link up. Nothing to wait for elsewhere.
    fn await_reachable(&self, via: Via, routers: &mut [Node]) -> Result<()> {
        let (Via::TwoRouters(..), Some(first)) = (via, routers.first_mut()) else {
            return Ok(());
        };
        match first.metrics {
            Some(metrics) => {
                let start = Instant::now();
                while metric_sum(&scrape(metrics), "y3_router_federation_remote_interest") < 1.0 {
                    if start.elapsed() > CONNECT {
                        bail!("router A never learned of the sink's interest");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(())
            }
            None => {
                await_json(
                    &mut first.router.child,
                    "zipper A",
                    "mesh_connected",
                    CONNECT,
                )?;
                Ok(())
            }
        }
    }

    /// CPU seconds so far of nats-server and `routers`.
    fn cpu(&self, routers: &[Node]) -> Option<f64> {
        let mut sum = self.nats.cpu_seconds()?;
        for n in routers {
            sum += n.router.child.cpu_seconds()?;
        }
        Some(sum)
    }

    /// One phase on fresh routers: the sink connects to the last router (the hop's to
    /// nats-server); once the first router can reach it the source writes to the first;
    /// the sink reports.
    fn phase(&self, row: &Row, phase: &Phase) -> Result<PhaseResult> {
        let mut routers = self.routers(row.via)?;
        let mut sink = self.client(row, &routers, Role::Sink, phase)?;
        await_json(&mut sink, "sink", "connected", CONNECT)?;
        self.await_reachable(row.via, &mut routers)?;
        let cpu0 = self.cpu(&routers);
        let mut source = self.client(row, &routers, Role::Source, phase)?;
        let v = await_json(&mut sink, "sink", "received", phase.limit + CONNECT)?;
        let cpu1 = self.cpu(&routers);
        let report: SinkReport = serde_json::from_value(v)?;
        let counted = routers
            .iter()
            .filter_map(|n| n.metrics)
            .map(|m| {
                let text = scrape(m);
                DROP_METRICS
                    .iter()
                    .map(|name| metric_sum(&text, name))
                    .sum::<f64>()
            })
            .sum();
        match report.error.as_deref() {
            None => {}
            Some("idle") if report.unique > 0 => {}
            Some(e) => {
                let why = match await_json(&mut source, "source", "sent", Duration::from_secs(1)) {
                    Ok(v) => v
                        .get("error")
                        .and_then(|e| e.as_str())
                        .map_or_else(String::new, |e| format!("; source: {e}")),
                    Err(_) => String::new(),
                };
                bail!(
                    "sink: {e}: {} of {} messages missing{why}",
                    report.missing,
                    phase.count
                );
            }
        }
        Ok(PhaseResult {
            sink: report,
            cpu: cpu0.zip(cpu1).map(|(a, b)| b - a),
            counted,
        })
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for path in &self.configs {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_file(&self.peers.cert);
    }
}

/// One run of a case: both phases.
#[derive(Debug, Clone)]
struct Sample {
    flat: PhaseResult,
    paced: PhaseResult,
}

/// The `yomo` suite's options for building the peers (`yomo-peer`, release `y3`, `y3-lab`).
fn yomo_options(opts: &Options) -> yomo::Options {
    yomo::Options {
        sizes: opts.sizes.clone(),
        workloads: vec![Workload::Sink],
        load: opts.load,
        only: opts.only.clone(),
        quick: opts.quick,
        command: opts.command.clone(),
        programs: opts.programs.clone(),
        yomo_dir: opts.yomo_dir.clone(),
        block_timeout_ms: opts.block_timeout_ms,
    }
}

/// The versions the report names: YoMo, nats-server, async-nats, `y3 serve`.
fn versions(opts: &Options, peers: &Peers) -> Result<Vec<(String, String)>> {
    let nats_bin = nats_server()?;
    let go_mod = std::fs::read_to_string(opts.yomo_dir.join("go.mod")).unwrap_or_default();
    Ok(vec![
        (
            "yomo".to_string(),
            yomo::go_mod_version(&go_mod, "github.com/yomorun/yomo").unwrap_or_else(|| "?".into()),
        ),
        (
            "nats-server".into(),
            proc::version_of(&nats_bin, &["--version"]).unwrap_or_default(),
        ),
        ("async-nats".into(), net_report::lock_version("async-nats")),
        ("y3 serve".into(), super::y3_build::label_of(&peers.y3)),
    ])
}

/// The flat-out and the paced phase of one payload size.
fn phases(load: &Load, size: usize) -> (Phase, Phase) {
    let flat = Phase {
        workload: Workload::Sink,
        size,
        count: load.messages,
        rate: 0.0,
        limit: Duration::from_secs(20 + load.messages / 2000),
        idle: Some(IDLE),
    };
    let paced = Phase {
        count: load.paced,
        rate: load.rate as f64,
        limit: Duration::from_secs_f64(20.0 + load.paced as f64 / load.rate.max(1) as f64),
        ..flat
    };
    (flat, paced)
}

/// A note per phase where the sink missed messages, with what the routers counted.
fn missing_notes(row: &Row, case: &str, counts: [u64; 2], samples: &[Sample]) -> Vec<String> {
    let mut notes = Vec::new();
    for (phase, count, pick) in [
        (
            "flat out",
            counts[0],
            (|s| &s.flat) as fn(&Sample) -> &PhaseResult,
        ),
        ("paced", counts[1], |s| &s.paced),
    ] {
        let missing: Vec<u64> = samples.iter().map(|s| pick(s).sink.missing).collect();
        if missing.iter().all(|&m| m == 0) {
            continue;
        }
        let counted: Vec<u64> = samples
            .iter()
            .map(|s| pick(s).counted.max(0.0).round() as u64)
            .collect();
        let as_f64: Vec<f64> = missing.iter().map(|&m| m as f64).collect();
        let uncounted = match row.via {
            Via::Single(Router::Zipper, _) | Via::TwoRouters(Router::Zipper, _) => {
                " (YoMo's zipper counts nothing)"
            }
            Via::NatsHop => " (no router: nats-server's drops are not read here)",
            _ => "",
        };
        notes.push(format!(
            "{}, {case}, {phase}: the sink missed {} of {count} messages (median of {} runs; \
             per run {missing:?}); the routers counted {counted:?} as dropped{uncounted}",
            row.name,
            median(&as_f64).0,
            missing.len(),
        ));
    }
    notes
}

/// The record of `row` in one case: medians over its samples.
fn record(row: &Row, case: &str, size: usize, load: &Load, samples: &[Sample]) -> Record {
    let med = |f: &dyn Fn(&Sample) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
    let cpu: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.flat.cpu)
        .map(|c| c * 1e6 / load.messages as f64)
        .collect();
    let (rate, range) = med(&|s| s.flat.sink.msg_per_s);
    Record::new("federation", row.name, case)
        .dim(Dim::Payload, size)
        .dim(Dim::Subscribers, 1usize)
        .metric(Metric::Seconds, med(&|s| s.flat.sink.seconds).0)
        .metric(Metric::Messages, load.messages as f64)
        .metric(Metric::MsgPerS, rate)
        .metric(Metric::P50Us, med(&|s| s.paced.sink.p50_us).0)
        .metric(Metric::P99Us, med(&|s| s.paced.sink.p99_us).0)
        .metric(Metric::P999Us, med(&|s| s.paced.sink.p999_us).0)
        .metric_opt(
            Metric::CpuUsPerFrame,
            (!cpu.is_empty()).then(|| median(&cpu).0),
        )
        .with_spread(samples.len(), Metric::MsgPerS, range)
}

/// Runs every row at every size.
///
/// # Errors
/// Setup errors (building the peers, starting nats-server); failing rows become notes.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    if opts.sizes.iter().any(|&s| s < yomo::STAMP_LEN) {
        bail!(
            "payload sizes must be at least {} bytes (sequence number and send time)",
            yomo::STAMP_LEN
        );
    }
    let peers = Peers::build(&yomo_options(opts), bar)?;
    let load_before = crate::net::load_average();
    let versions = versions(opts, &peers)?;
    let bench = Bench::start(peers, opts.block_timeout_ms)?;
    let rows: Vec<Row> = ROWS
        .iter()
        .copied()
        .filter(|r| crate::net::wanted(&[r.name], &opts.only).len() == 1)
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let runs = opts.load.runs.max(1);
    bar.set_length((opts.sizes.len() * rows.len() * runs) as u64);
    let mut notes = Vec::new();
    let mut records = Vec::new();
    for &size in &opts.sizes {
        let case = format!("{size} B");
        let (flat, paced) = phases(&opts.load, size);
        let got = crate::net::rounds("federation", &case, &names, runs, bar, &mut notes, |name| {
            // Every name came from `rows`.
            let row = rows.iter().find(|r| r.name == name).expect("a row");
            Ok(Sample {
                flat: bench.phase(row, &flat)?,
                paced: bench.phase(row, &paced)?,
            })
        });
        for (row, samples) in rows.iter().zip(&got) {
            if samples.is_empty() {
                continue;
            }
            notes.extend(missing_notes(
                row,
                &case,
                [flat.count, paced.count],
                samples,
            ));
            records.push(record(row, &case, size, &opts.load, samples));
        }
    }
    notes.push(crate::net::load_note(&load_before));
    Ok(Results::of(
        crate::net::meta(
            "federation",
            &opts.command,
            opts.quick,
            format!(
                "none: routers, nats-server and client processes share all {} cores",
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
    fn metrics_are_summed_over_labels() {
        let text = "# HELP x\n\
                    y3_router_federation_lost_total{reason=\"queue_full\"} 12\n\
                    y3_router_federation_lost_total{reason=\"gap\"} 3\n\
                    y3_router_federation_lost_total_other 99\n\
                    y3_router_federation_remote_interest 1\n";
        assert_eq!(metric_sum(text, "y3_router_federation_lost_total"), 15.0);
        assert_eq!(
            metric_sum(text, "y3_router_federation_remote_interest"),
            1.0
        );
        assert_eq!(metric_sum(text, "y3_router_dropped_total"), 0.0);
    }

    #[test]
    fn rows() {
        let names: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "y3-single",
                "y3-federated",
                "nats-hop",
                "y3-federated-yomo-clients",
                "yomo-single",
                "yomo-mesh"
            ]
        );
        let hop = &crate::net::report::federation::HOP_TARGET;
        for row in [hop.federated, hop.single, hop.hop] {
            assert!(names.contains(&row), "{row}");
        }
        for t in &crate::net::report::federation::TARGETS {
            assert!(
                names.contains(&t.y3) && names.contains(&t.base),
                "{}",
                t.name
            );
        }
    }
}
