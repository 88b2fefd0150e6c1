//! `y3-lab net pingpong|echo|e2e|yomo`: the network lab (library module `y3_lab::net`).
//!
//! ```text
//! y3-lab net pingpong [--quick] [--sessions 100,1000] [--threads 1,2] [--json FILE] ...
//! y3-lab net echo     [--quick] [--conns 80,250] [--sizes 100,1024] [--peak] ...
//! y3-lab net e2e      [--quick] [--sizes 64,1024] [--subs 1,5] ...
//! y3-lab net yomo     [--quick] [--sizes 64,1024] [--workloads sink,relay] ...
//! y3-lab net pipeline [--quick] [--transport tcp,quic] [--sizes 64,1024] ...
//! y3-lab net filter   [--quick] [--functions 10] [--messages 200000]
//! y3-lab net federation [--quick] [--sizes 64,1024] [--runs 3] ...
//! ```
//!
//! The lab starts every server and client as a child process of this binary (the hidden
//! `y3-lab net server|client` commands), or of a peer's own program, on 127.0.0.1, and
//! stops them all. The heavy peers are compiled in with `--features net-peers`;
//! `scripts/bench-net.sh` builds with it, installs the Debian peers and builds bench/cpp.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use y3_lab::net::record::NetResults;
use y3_lab::net::{self, Programs};

use super::{command_line, publish, OutputArgs};

/// `y3-lab net SUITE`.
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    command: NetCommand,
}

#[derive(Debug, Subcommand)]
enum NetCommand {
    /// Header/body ping-pong (evpp vs asio report): total time per sessions × threads.
    Pingpong(PingpongArgs),
    /// Echo server (monoio vs tokio report): QPS, p50/p99/p999, server CPU per connections.
    Echo(EchoArgs),
    /// Publish → route → subscribe: y3's router vs NATS and Zenoh.
    E2e(E2eArgs),
    /// YoMo's zipper vs `y3 serve` with YoMo's own clients, then y3's clients.
    Yomo(YomoArgs),
    /// Source → router → function → sink msg/s and latency over TCP and QUIC, one process.
    Pipeline(net::pipeline::PipelineArgs),
    /// Content filters: router-side filter vs deliver everything and filter in the function
    /// (y3, and NATS with the feature net-nats).
    Filter(FilterArgs),
    /// Source and sink on two routers (y3 federated through nats-server, YoMo's mesh) vs
    /// one router.
    Federation(FederationArgs),
    /// A lab server (started by the lab itself).
    #[command(hide = true)]
    Server(ServerArgs),
    /// A lab client (started by the lab itself).
    #[command(hide = true)]
    Client(ClientArgs),
}

/// `y3-lab net pingpong`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net pingpong --quick
  y3-lab net pingpong --sessions 100,1000,10000 --threads 1,2,4,8 --json pingpong.json")]
pub struct PingpongArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// Session counts (default 100,1000; 100 with --quick).
    #[arg(long, value_delimiter = ',')]
    sessions: Vec<usize>,
    /// Thread counts of each side (default 1,2).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Messages per session.
    #[arg(long, default_value_t = y3_lab::net::pingpong::TOTAL_COUNT)]
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
    #[command(flatten)]
    output: OutputArgs,
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
    #[command(flatten)]
    output: OutputArgs,
    /// Payload sizes in bytes (at least 16, for the timestamp and sequence).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    /// Subscriber counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 5])]
    subs: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
}

/// The load options of the suites that run flat out, then paced (`e2e`, `yomo`).
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Messages of the flat-out run (default e2e 200000, yomo 100000; 20000, 5000 with
    /// --quick).
    #[arg(long)]
    messages: Option<u64>,
    /// Messages of the paced latency run (default 20000; 2000 with --quick).
    #[arg(long)]
    paced: Option<u64>,
    /// Rate of the paced run in msg/s.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Runs per case, each row in turn every round; medians reported (default 3; 1 with
    /// --quick).
    #[arg(long)]
    runs: Option<usize>,
}

impl LoadArgs {
    /// The load, with the suite's flat-out message count `(full, quick)`.
    fn load(&self, quick: bool, messages: (u64, u64)) -> net::Load {
        let pick = |full, short| if quick { short } else { full };
        net::Load {
            messages: self.messages.unwrap_or(pick(messages.0, messages.1)),
            paced: self.paced.unwrap_or(pick(20_000, 2_000)),
            rate: self.rate.max(1),
            runs: self.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
        }
    }
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
    #[command(flatten)]
    output: OutputArgs,
    /// Payload sizes in bytes (at least 16, for the sequence number and send time).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    /// Workloads: `sink` (source → sink), `relay` (source → relay → sink).
    #[arg(long, value_delimiter = ',', default_values_t = ["sink".to_string(), "relay".to_string()])]
    workloads: Vec<String>,
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    peers: YomoPeerArgs,
}

/// Where `yomo-peer` is built from and how `y3 serve` is configured (`yomo`, `federation`).
#[derive(Debug, Args)]
pub struct YomoPeerArgs {
    /// The Go module with cmd/yomo-peer.
    #[arg(long, value_name = "DIR", default_value = "interop/yomo")]
    yomo_dir: PathBuf,
    /// y3 serve's `[queue] block_timeout_ms`: how long a full subscriber that takes nothing
    /// holds its sources back before it is evicted (y3's default; a subscriber that reads,
    /// however slowly, slows its source down as YoMo's zipper does).
    #[arg(long, default_value_t = 250)]
    block_timeout_ms: u64,
}

impl YomoPeerArgs {
    /// The options of a suite run with YoMo's peers (`workloads`: the yomo suite's).
    fn options(
        &self,
        output: &OutputArgs,
        sizes: &[usize],
        workloads: Vec<net::yomo::Workload>,
        load: net::Load,
    ) -> Result<net::yomo::Options> {
        Ok(net::yomo::Options {
            sizes: sizes.to_vec(),
            workloads,
            load,
            only: output.only.clone(),
            quick: output.quick,
            command: command_line(),
            programs: programs(None)?,
            yomo_dir: self.yomo_dir.clone(),
            block_timeout_ms: self.block_timeout_ms,
        })
    }
}

/// `y3-lab net server KIND`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// `pingpong-y3-transport`, `pingpong-tokio`, `echo-y3-tokio`, `echo-tokio`,
    /// `echo-y3-monoio`, `echo-monoio`, `echo-monoio-legacy`, `router-y3`, `zenoh-router`.
    kind: String,
    /// Threads (runtimes or workers).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
}

/// `y3-lab net client KIND`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// `pingpong-y3-transport`, `pingpong-tokio`, `echo`, `y3-source`, `y3-relay`,
    /// `y3-sink`.
    kind: String,
    /// Server address.
    #[arg(long)]
    addr: SocketAddr,
    /// Threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Ping-pong sessions, or echo connections.
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Ping-pong messages per session.
    #[arg(long, default_value_t = y3_lab::net::pingpong::TOTAL_COUNT)]
    total: u32,
    /// Echo message size.
    #[arg(long, default_value_t = 100)]
    size: usize,
    /// Echo timed seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Echo warm-up seconds.
    #[arg(long, default_value_t = 0.3)]
    warmup: f64,
    /// Time limit in seconds.
    #[arg(long, default_value_t = 300)]
    limit_s: u64,
    /// y3-source|relay|sink: `tcp` or `quic`.
    #[arg(long, default_value = "tcp")]
    transport: String,
    /// y3-source: the tag written; y3-relay, y3-sink: the tag observed.
    #[arg(long, default_value_t = net::yomo::TAG_IN)]
    tag: u32,
    /// y3-relay: the tag emitted.
    #[arg(long, default_value_t = net::yomo::TAG_OUT)]
    emit: u32,
    /// y3-source: messages written; y3-sink: distinct messages awaited.
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// y3-source: msg/s (0: as fast as it goes).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// y3-sink: stop once no frame arrived for this many seconds after the first (0: wait
    /// for every frame until --limit-s).
    #[arg(long, default_value_t = 0.0)]
    idle_s: f64,
}

/// `y3-lab net filter`: a minimal registration (Markdown table on stdout, no records yet).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  y3-lab net filter --quick
  y3-lab net filter --functions 10 --messages 200000")]
pub struct FilterArgs {
    /// 20 000 messages instead of 200 000.
    #[arg(long)]
    quick: bool,
    /// Functions, each wanting 1/N of the frames.
    #[arg(long, default_value_t = 10)]
    functions: usize,
    /// Messages the source sends (overrides --quick).
    #[arg(long)]
    messages: Option<u64>,
}

fn filter(args: &FilterArgs, out: &mut dyn Write) -> Result<()> {
    let opts = net::filter::Options {
        functions: args.functions.max(1),
        messages: args
            .messages
            .unwrap_or(if args.quick { 20_000 } else { 200_000 }),
        programs: programs(None)?,
    };
    let (rows, notes) = net::filter::run(&opts)?;
    net::filter::write_table(&rows, &notes, &opts, out)
}

fn programs(asio: Option<PathBuf>) -> Result<Programs> {
    Ok(Programs::find(
        std::env::current_exe().context("locating the y3-lab binary")?,
        asio,
    ))
}

/// Runs a suite (`measure`, with a progress bar) unless `--from` names recorded parts of
/// it, then publishes the results.
fn measure_or_read(
    output: &OutputArgs,
    out: &mut dyn Write,
    measure: impl FnOnce(&indicatif::ProgressBar) -> Result<NetResults>,
) -> Result<()> {
    let results = match &output.from[..] {
        [] => {
            let bar = y3_lab::progress_bar(0);
            let results = measure(&bar)?;
            bar.finish_and_clear();
            results
        }
        parts => NetResults::read_parts(parts)?,
    };
    publish(output, &results, out)
}

fn pingpong(args: &PingpongArgs, out: &mut dyn Write) -> Result<()> {
    measure_or_read(&args.output, out, |bar| {
        let quick = args.output.quick;
        let sessions = if !args.sessions.is_empty() {
            args.sessions.clone()
        } else if quick {
            vec![100]
        } else {
            vec![100, 1000]
        };
        let opts = net::pingpong::Options {
            sessions,
            threads: args.threads.clone(),
            total: args.total,
            runs: args.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
            only: args.output.only.clone(),
            limit: Duration::from_secs(args.limit_s.max(1)),
            quick,
            command: command_line(),
            programs: programs(args.asio.clone())?,
        };
        net::pingpong::run(&opts, bar)
    })
}

fn echo(args: &EchoArgs, out: &mut dyn Write) -> Result<()> {
    measure_or_read(&args.output, out, |bar| {
        let quick = args.output.quick;
        let pick = |v: &Vec<usize>, q: Vec<usize>, d: Vec<usize>| {
            if !v.is_empty() {
                v.clone()
            } else if quick {
                q
            } else {
                d
            }
        };
        let opts = net::echo::Options {
            conns: pick(&args.conns, vec![80], vec![80, 250]),
            sizes: pick(&args.sizes, vec![100], vec![100, 1024]),
            peak: args.peak.then(|| args.peak_conns.clone()),
            seconds: args.seconds.unwrap_or(if quick { 1.0 } else { 5.0 }),
            warmup: args.warmup.unwrap_or(if quick { 0.3 } else { 1.0 }),
            runs: args.runs.unwrap_or(if quick { 1 } else { 3 }).max(1),
            server_threads: args.server_threads.max(1),
            server_cpus: args.server_cpus.clone(),
            client_cpus: args.client_cpus.clone(),
            only: args.output.only.clone(),
            quick,
            command: command_line(),
            programs: programs(None)?,
        };
        net::echo::run(&opts, bar)
    })
}

fn e2e(args: &E2eArgs, out: &mut dyn Write) -> Result<()> {
    measure_or_read(&args.output, out, |bar| {
        let quick = args.output.quick;
        let opts = net::e2e::Options {
            sizes: args.sizes.clone(),
            subs: args.subs.clone(),
            load: args.load.load(quick, (200_000, 20_000)),
            only: args.output.only.clone(),
            quick,
            command: command_line(),
            programs: programs(None)?,
        };
        net::e2e::run(&opts, bar)
    })
}

fn yomo(args: &YomoArgs, out: &mut dyn Write) -> Result<()> {
    measure_or_read(&args.output, out, |bar| {
        let quick = args.output.quick;
        let workloads = args
            .workloads
            .iter()
            .map(|w| {
                net::yomo::Workload::from_name(w)
                    .with_context(|| format!("unknown workload {w:?} (sink, relay)"))
            })
            .collect::<Result<Vec<_>>>()?;
        let load = args.load.load(quick, (100_000, 5_000));
        let opts = args
            .peers
            .options(&args.output, &args.sizes, workloads, load)?;
        net::yomo::run(&opts, bar)
    })
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
    output: OutputArgs,
    /// Payload sizes in bytes (at least 16, for the sequence number and send time).
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1024])]
    sizes: Vec<usize>,
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    peers: YomoPeerArgs,
}

fn federation(args: &FederationArgs, out: &mut dyn Write) -> Result<()> {
    measure_or_read(&args.output, out, |bar| {
        let load = args.load.load(args.output.quick, (100_000, 5_000));
        let opts = args.peers.options(
            &args.output,
            &args.sizes,
            vec![net::yomo::Workload::Sink],
            load,
        )?;
        net::federation::run(&opts, bar)
    })
}

fn server(args: &ServerArgs) -> Result<()> {
    net::exit_when_stdin_closes();
    net::serve(&args.kind, args.addr, args.threads)
}

fn client(args: &ClientArgs, out: &mut dyn Write) -> Result<()> {
    let limit = Duration::from_secs(args.limit_s.max(1));
    if let Some(role) = net::yomo::Role::from_client_kind(&args.kind) {
        // These print yomo-peer's JSON lines themselves.
        let run = net::yomo::ClientRun {
            role,
            addr: args.addr,
            transport: net::yomo::transport_from_name(&args.transport)
                .with_context(|| format!("unknown transport {:?} (tcp, quic)", args.transport))?,
            tag: args.tag,
            emit: args.emit,
            count: args.count,
            size: args.size,
            rate: args.rate,
            limit,
            idle: (args.idle_s > 0.0).then(|| Duration::from_secs_f64(args.idle_s)),
        };
        return net::yomo::client(&run, out);
    }
    let json = if let Some(kind) = args.kind.strip_prefix("pingpong-") {
        let imp = net::pingpong::Impl::from_name(kind)
            .with_context(|| format!("unknown ping-pong client {kind:?}"))?;
        let report = net::pingpong::client(
            imp,
            args.addr,
            args.threads,
            args.sessions,
            args.total,
            limit,
        )?;
        serde_json::to_string(&report)?
    } else if args.kind == "echo" {
        let load = net::echo::Load {
            conns: args.sessions,
            size: args.size,
            seconds: args.seconds,
            warmup: args.warmup,
        };
        let report = net::echo::client(args.addr, &load, limit, || {
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "measuring");
            let _ = o.flush();
        })?;
        serde_json::to_string(&report)?
    } else {
        anyhow::bail!("unknown client {:?}", args.kind);
    };
    writeln!(out, "result {json}")?;
    out.flush()?;
    Ok(())
}

/// Runs `y3-lab net ...`.
///
/// # Errors
/// Setup and IO errors (a failing row becomes a note in the report).
pub fn run(args: &NetArgs, out: &mut dyn Write) -> Result<()> {
    match &args.command {
        NetCommand::Pingpong(a) => pingpong(a, out),
        NetCommand::Echo(a) => echo(a, out),
        NetCommand::E2e(a) => e2e(a, out),
        NetCommand::Yomo(a) => yomo(a, out),
        NetCommand::Pipeline(a) => net::pipeline::run(a, out),
        NetCommand::Filter(a) => filter(a, out),
        NetCommand::Federation(a) => federation(a, out),
        NetCommand::Server(a) => server(a),
        NetCommand::Client(a) => client(a, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_defaults_per_suite() {
        let args = LoadArgs {
            messages: None,
            paced: None,
            rate: 0,
            runs: None,
        };
        let full = net::Load {
            messages: 200_000,
            paced: 20_000,
            rate: 1,
            runs: 3,
        };
        assert_eq!(args.load(false, (200_000, 20_000)), full);
        let quick = net::Load {
            messages: 5_000,
            paced: 2_000,
            rate: 1,
            runs: 1,
        };
        assert_eq!(args.load(true, (100_000, 5_000)), quick);
    }
}
