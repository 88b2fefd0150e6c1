//! The network suites' registry: every suite's command-line options, how they become its
//! run, and its report, in one table ([`SUITES`]). `y3-lab net NAME` is built from it, and
//! so is rendering recorded results (`--from`).
//!
//! # Adding a network suite
//!
//! Its measurement in `net/NAME.rs` (`run(&Options, &ProgressBar) -> Result<Results>`,
//! with `pub mod NAME;` in `net/mod.rs`), its report in `net/report/NAME.rs` (a
//! [`SuiteReport`], with `mod NAME;` there), and here: its options (a clap `Args` struct
//! implementing [`SuiteArgs`]) and its line in [`SUITES`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, FromArgMatches};
use indicatif::ProgressBar;

use crate::net::{report, Load, Programs};
use crate::record::Results;
use crate::report::SuiteReport;

/// What every network suite gets besides its own options.
#[derive(Debug, Clone)]
pub struct Shared {
    /// `--quick`.
    pub quick: bool,
    /// `--only`: implementations whose name contains one of these.
    pub only: Vec<String>,
    /// The command line, for the report.
    pub command: String,
    /// The lab's programs (this binary, `y3`, the peers found).
    pub programs: Programs,
}

/// A network suite's own options: parsed from its subcommand, they measure it.
pub trait SuiteArgs: Args + FromArgMatches {
    /// Runs the suite with these options.
    ///
    /// # Errors
    /// Setup errors (failing rows become notes).
    fn measure(&self, shared: &Shared, bar: &ProgressBar) -> Result<Results>;
}

/// One network suite: its subcommand, what measures it, its report.
pub struct NetSuite {
    /// `y3-lab net NAME`; also `meta.suite` of its results.
    pub name: &'static str,
    /// One line of help.
    pub about: &'static str,
    /// Adds its options to its subcommand.
    pub args: fn(clap::Command) -> clap::Command,
    /// Parses its options from the subcommand's matches and measures.
    pub measure: fn(&clap::ArgMatches, &Shared, &ProgressBar) -> Result<Results>,
    /// Its report.
    pub report: &'static SuiteReport,
}

/// Measures suite `A` with the options in `matches`.
fn measure_with<A: SuiteArgs>(
    matches: &clap::ArgMatches,
    shared: &Shared,
    bar: &ProgressBar,
) -> Result<Results> {
    A::from_arg_matches(matches)?.measure(shared, bar)
}

/// Suite `A`'s entry in [`SUITES`].
const fn suite<A: SuiteArgs>(
    name: &'static str,
    about: &'static str,
    report: &'static SuiteReport,
) -> NetSuite {
    NetSuite {
        name,
        about,
        args: A::augment_args,
        measure: measure_with::<A>,
        report,
    }
}

/// Every network suite, in the order `y3-lab net --help` lists them.
pub const SUITES: &[NetSuite] = &[
    suite::<PingpongArgs>(
        "pingpong",
        "Header/body ping-pong (evpp vs asio report): total time per sessions × threads",
        &report::pingpong::REPORT,
    ),
    suite::<EchoArgs>(
        "echo",
        "Echo server (monoio vs tokio report): QPS, p50/p99/p999, server CPU per connections",
        &report::echo::REPORT,
    ),
    suite::<E2eArgs>(
        "e2e",
        "Publish → route → subscribe: y3's router vs NATS and Zenoh",
        &report::e2e::REPORT,
    ),
    suite::<YomoArgs>(
        "yomo",
        "YoMo's zipper vs `y3 serve` with YoMo's own clients, then y3's clients",
        &report::yomo::REPORT,
    ),
    suite::<PipelineArgs>(
        "pipeline",
        "Source → router → function → sink msg/s and latency over TCP and QUIC, one process",
        &report::pipeline::REPORT,
    ),
    suite::<FilterArgs>(
        "filter",
        "Content filters: router-side filter vs deliver everything and filter in the function \
         (y3, and NATS with the feature net-nats)",
        &report::filter::REPORT,
    ),
    suite::<FederationArgs>(
        "federation",
        "Source and sink on two routers (y3 federated through nats-server, YoMo's mesh) vs \
         one router",
        &report::federation::REPORT,
    ),
    suite::<MqttArgs>(
        "mqtt",
        "MQTT publish → subscribe: y3's [mqtt] listener vs Mosquitto and nats-server's MQTT",
        &report::mqtt::REPORT,
    ),
    suite::<QuicArgs>(
        "quic",
        "Frames one way over y3's TCP adapter and its QUIC adapter (quinn's defaults, y3's tuning)",
        &report::quic::REPORT,
    ),
];

/// `y3-lab net quic`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net quic --quick
  y3-lab net quic --sizes 64,1024,16384 --messages 500000 --runs 5")]
pub struct QuicArgs {
    /// Payload sizes in bytes (at least 8, for the stamp).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
}

impl SuiteArgs for QuicArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let opts = crate::net::quic::Options {
            sizes: self.sizes.iter().map(|&n| n.max(8)).collect(),
            load: self.load.load(s.quick, (200_000, 20_000)),
            only: s.only.clone(),
            command: s.command.clone(),
            quick: s.quick,
        };
        let rows = crate::net::quic::built_rows(&opts.only).len();
        bar.set_length((2 * opts.sizes.len() * rows * opts.load.runs) as u64);
        crate::net::quic::run(&opts, bar)
    }
}

/// `y3-lab net mqtt`.
#[derive(Debug, Args)]
#[command(
    after_help = "Needs the release y3 (cargo build --release -p y3-cli), Debian's
mosquitto and nats-server (NATS_SERVER_BIN or target/tools/bin, as scripts/test.sh installs it).

Examples:
  y3-lab net mqtt --quick
  y3-lab net mqtt --messages 20000 --paced 2000 --rate 2000 --json bench-results/net-mqtt.json"
)]
pub struct MqttArgs {
    /// Payload sizes in bytes (at least 8, for the stamp).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    /// QoS levels.
    #[arg(long, value_delimiter = ',', default_values_t = [0u8, 1])]
    qos: Vec<u8>,
    #[command(flatten)]
    load: LoadArgs,
    /// The Go module with cmd/yomo-peer and cmd/mqtt-bridge (the end-to-end cases).
    #[arg(long, value_name = "DIR", default_value = "interop/yomo")]
    yomo_dir: PathBuf,
    /// Skip the end-to-end cases (sensor → YoMo function → MQTT subscriber).
    #[arg(long)]
    no_e2e: bool,
}

impl SuiteArgs for MqttArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let opts = crate::net::mqtt::Options {
            sizes: self.sizes.iter().map(|&n| n.max(8)).collect(),
            qos: self.qos.iter().map(|&q| q.min(1)).collect(),
            load: self.load.load(s.quick, (20_000, 2_000)),
            only: s.only.clone(),
            command: s.command.clone(),
            quick: s.quick,
            programs: s.programs.clone(),
            yomo_dir: (!self.no_e2e).then(|| self.yomo_dir.clone()),
        };
        bar.set_length(
            (opts.sizes.len() * opts.qos.len() * crate::net::mqtt::BROKERS.len()) as u64,
        );
        crate::net::mqtt::run(&opts, bar)
    }
}

/// The suite named `name`.
pub fn find(name: &str) -> Option<&'static NetSuite> {
    SUITES.iter().find(|s| s.name == name)
}

/// The load options of the suites that run flat out, then paced (`e2e`, `yomo`, `pipeline`).
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Messages of the flat-out run (default e2e 200000, yomo 100000; 20000, 5000 with
    /// --quick).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Messages of the paced latency run (default 20000; 2000 with --quick).
    #[arg(long)]
    pub paced: Option<u64>,
    /// Rate of the paced run in msg/s.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Runs per case, each row in turn every round; medians reported (default 3, pipeline
    /// 1; 1 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
}

impl LoadArgs {
    /// The load, with the suite's flat-out message count `(full, quick)`.
    pub fn load(&self, quick: bool, messages: (u64, u64)) -> Load {
        let pick = |full, short| if quick { short } else { full };
        Load {
            messages: self.messages.unwrap_or(pick(messages.0, messages.1)),
            paced: self.paced.unwrap_or(pick(20_000, 2_000)),
            rate: self.rate.max(1),
            runs: self.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
        }
    }
}

/// `y3-lab net pingpong`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net pingpong --quick
  y3-lab net pingpong --sessions 100,1000,10000 --threads 1,2,4,8 --json pingpong.json")]
pub struct PingpongArgs {
    /// Session counts (default 100,1000; 100 with --quick).
    #[arg(long, value_delimiter = ',')]
    sessions: Vec<usize>,
    /// Thread counts of each side (default 1,2).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Messages per session.
    #[arg(long, default_value_t = crate::net::pingpong::TOTAL_COUNT)]
    total: u32,
    /// Timed runs per row, median reported (default 3; 1 with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Time limit of one run in seconds.
    #[arg(long, default_value_t = 300)]
    limit_s: u64,
    /// The asio program (default bench/cpp/build/pingpong_asio).
    #[arg(long, value_name = "FILE")]
    asio: Option<PathBuf>,
}

/// `y3-lab net echo`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net echo --quick
  y3-lab net echo --conns 80,250 --sizes 100,1024 --peak --seconds 10")]
pub struct EchoArgs {
    /// Connection counts (default 80,250; 80 with --quick).
    #[arg(long, value_delimiter = ',')]
    conns: Vec<usize>,
    /// Message sizes in bytes (default 100,1024; 100 with --quick).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Also sweep connection counts at the first size to find each server's peak QPS.
    #[arg(long)]
    peak: bool,
    /// Connection counts of the peak sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 10, 50, 100, 250, 500, 1000])]
    peak_conns: Vec<usize>,
    /// Timed seconds per point (default 5; 1 with --quick).
    #[arg(long)]
    seconds: Option<f64>,
    /// Warm-up seconds per point (default 1; 0.3 with --quick).
    #[arg(long)]
    warmup: Option<f64>,
    /// Runs per point, each server in turn every round; medians reported (default 3; 1
    /// with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Server threads.
    #[arg(long, default_value_t = 1)]
    server_threads: usize,
    /// Cores of the server (taskset list).
    #[arg(long, default_value = "0")]
    server_cpus: String,
    /// Cores of the load client (taskset list).
    #[arg(long, default_value = "1")]
    client_cpus: String,
}

/// `y3-lab net e2e`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net e2e --quick
  y3-lab net e2e --sizes 16,64,1024 --subs 1,5 --messages 1000000")]
pub struct E2eArgs {
    /// Payload sizes in bytes (at least 16, for the timestamp and sequence).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    /// Subscriber counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 5])]
    subs: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
}

/// `y3-lab net pipeline`.
#[derive(Debug, Args)]
#[command(
    long_about = "Run source → router → stream function → sink in one process over loopback TCP and
QUIC, for 64-byte and 1 KiB payloads: msg/s of a flat-out run and p50/p99 one-way latency
(hdrhistogram) of a paced run, on the e2e suite's engine. A benchmark, not a test: numbers
depend on the machine.",
    after_help = "Examples:
  y3-lab net pipeline --quick
  y3-lab net pipeline --json pipeline.json
  y3-lab net pipeline --transport quic --sizes 64,1024,16384 --messages 500000"
)]
pub struct PipelineArgs {
    /// Transports to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PipelineTransport::Tcp, PipelineTransport::Quic])]
    transport: Vec<PipelineTransport>,
    /// Payload sizes in bytes (at least 16, for the timestamp and phase).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// Transports the pipeline runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PipelineTransport {
    /// Plain TCP.
    Tcp,
    /// QUIC (TLS 1.3).
    Quic,
    /// TLS 1.3 over TCP.
    Tls,
}

/// `y3-lab net yomo`.
#[derive(Debug, Args)]
#[command(
    after_help = "Builds interop/yomo's yomo-peer (go build) and, from a debug build, the
release y3 and y3-lab (cargo build --release -p y3-cli -p y3-lab) before measuring.

Examples:
  y3-lab net yomo --quick
  y3-lab net yomo --runs 3 --messages 100000 --json bench-results/net-yomo.json"
)]
pub struct YomoArgs {
    /// Workloads: `sink` (source → sink), `relay` (source → relay → sink).
    #[arg(long, value_delimiter = ',', default_values_t = ["sink".to_string(), "relay".to_string()])]
    workloads: Vec<String>,
    #[command(flatten)]
    peers: PeerArgs,
}

/// What the suites that run YoMo's own clients beside y3's share (`yomo`, `federation`).
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Payload sizes in bytes (at least 16, for the sequence number and send time).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
    /// The Go module with cmd/yomo-peer.
    #[arg(long, value_name = "DIR", default_value = "interop/yomo")]
    yomo_dir: PathBuf,
    /// y3 serve's `[queue] block_timeout_ms`: how long a subscriber past its 64 MiB queue
    /// that takes nothing holds its sources back before its frames queue on without
    /// holding them (y3's default; a subscriber that reads, however slowly, slows its
    /// source down as YoMo's zipper does, and one that takes nothing for 10 s is evicted).
    #[arg(long, default_value_t = 250)]
    block_timeout_ms: u64,
}

/// `y3-lab net filter`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net filter --quick
  y3-lab net filter --functions 10 --messages 200000")]
pub struct FilterArgs {
    /// Functions, each wanting 1/N of the frames.
    #[arg(long, default_value_t = 10)]
    functions: usize,
    /// Messages the source sends (overrides --quick).
    #[arg(long)]
    messages: Option<u64>,
}

/// `y3-lab net federation`.
#[derive(Debug, Args)]
#[command(
    after_help = "Starts one nats-server (NATS_SERVER_BIN, target/tools/bin or PATH), builds
interop/yomo's yomo-peer (go build) and, from a debug build, the release y3 and y3-lab.

Examples:
  y3-lab net federation --quick
  y3-lab net federation --runs 3 --json bench-results/net-federation.json --docs docs/bench"
)]
pub struct FederationArgs {
    #[command(flatten)]
    peers: PeerArgs,
}

impl SuiteArgs for PingpongArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let sessions = if !args.sessions.is_empty() {
            args.sessions.clone()
        } else if quick {
            vec![100]
        } else {
            vec![100, 1000]
        };
        let opts = crate::net::pingpong::Options {
            sessions,
            threads: args.threads.clone(),
            total: args.total,
            runs: args.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
            only: s.only.clone(),
            limit: Duration::from_secs(args.limit_s.max(1)),
            quick,
            command: s.command.clone(),
            programs: s.programs.with_asio(args.asio.clone()),
        };
        crate::net::pingpong::run(&opts, bar)
    }
}

impl SuiteArgs for EchoArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let pick = |v: &Vec<usize>, q: Vec<usize>, d: Vec<usize>| {
            if !v.is_empty() {
                v.clone()
            } else if quick {
                q
            } else {
                d
            }
        };
        let opts = crate::net::echo::Options {
            conns: pick(&args.conns, vec![80], vec![80, 250]),
            sizes: pick(&args.sizes, vec![100], vec![100, 1024]),
            peak: args.peak.then(|| args.peak_conns.clone()),
            seconds: args.seconds.unwrap_or(if quick { 1.0 } else { 5.0 }),
            warmup: args.warmup.unwrap_or(if quick { 0.3 } else { 1.0 }),
            runs: args.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
            server_threads: args.server_threads.max(1),
            server_cpus: args.server_cpus.clone(),
            client_cpus: args.client_cpus.clone(),
            only: s.only.clone(),
            quick,
            command: s.command.clone(),
            programs: s.programs.clone(),
        };
        crate::net::echo::run(&opts, bar)
    }
}

impl SuiteArgs for E2eArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let opts = crate::net::e2e::Options {
            topology: crate::net::e2e::Topology::Broker,
            sizes: args.sizes.clone(),
            subs: args.subs.clone(),
            load: args.load.load(quick, (200_000, 20_000)),
            only: s.only.clone(),
            quick,
            command: s.command.clone(),
            programs: s.programs.clone(),
        };
        crate::net::e2e::run(&opts, bar)
    }
}

impl SuiteArgs for PipelineArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let mut load = args.load.load(quick, (200_000, 20_000));
        // One run per case unless asked: the pipeline's rows are y3 against itself.
        load.runs = args.load.runs.unwrap_or(1).max(1);
        let transports = args
            .transport
            .iter()
            .map(|t| {
                match t {
                    PipelineTransport::Tcp => "tcp",
                    PipelineTransport::Quic => "quic",
                    PipelineTransport::Tls => "tls",
                }
                .to_string()
            })
            .collect();
        let opts = crate::net::e2e::Options {
            topology: crate::net::e2e::Topology::Pipeline {
                transports,
                threads: args.threads,
            },
            sizes: args.sizes.clone(),
            subs: vec![1],
            load,
            only: s.only.clone(),
            quick,
            command: s.command.clone(),
            programs: s.programs.clone(),
        };
        crate::net::e2e::run(&opts, bar)
    }
}

impl SuiteArgs for YomoArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let workloads = args
            .workloads
            .iter()
            .map(|w| {
                crate::net::yomo::Workload::from_name(w)
                    .with_context(|| format!("unknown workload {w:?} (sink, relay)"))
            })
            .collect::<Result<Vec<_>>>()?;
        let peers = &args.peers;
        let opts = crate::net::yomo::Options {
            sizes: peers.sizes.clone(),
            workloads,
            load: peers.load.load(quick, (100_000, 5_000)),
            only: s.only.clone(),
            quick,
            command: s.command.clone(),
            programs: s.programs.clone(),
            yomo_dir: peers.yomo_dir.clone(),
            block_timeout_ms: peers.block_timeout_ms,
        };
        crate::net::yomo::run(&opts, bar)
    }
}

impl SuiteArgs for FilterArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let args = self;
        let quick = s.quick;
        let opts = crate::net::filter::Options {
            functions: args.functions.max(1),
            // --quick: 20 000 messages instead of 200 000.
            messages: args
                .messages
                .unwrap_or(if quick { 20_000 } else { 200_000 }),
            programs: s.programs.clone(),
            quick,
            command: s.command.clone(),
        };
        crate::net::filter::run(&opts, bar)
    }
}

impl SuiteArgs for FederationArgs {
    fn measure(&self, s: &Shared, bar: &ProgressBar) -> Result<Results> {
        let peers = &self.peers;
        let opts = crate::net::federation::Options {
            sizes: peers.sizes.clone(),
            load: peers.load.load(s.quick, (100_000, 5_000)),
            only: s.only.clone(),
            quick: s.quick,
            command: s.command.clone(),
            programs: s.programs.clone(),
            yomo_dir: peers.yomo_dir.clone(),
            block_timeout_ms: peers.block_timeout_ms,
        };
        crate::net::federation::run(&opts, bar)
    }
}
