//! `y3-lab net SUITE`: the network lab (library module `y3_lab::net`), one subcommand per
//! suite of the registry `y3_lab::net::suites::SUITES`.
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
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, FromArgMatches};
use y3_lab::net::{self, Programs};
use y3_lab::record::Results;

use super::{command_line, publish, OutputArgs};

/// `y3-lab net SUITE`: one subcommand per suite of [`net::suites::SUITES`] (its own
/// options and the shared output options), plus the hidden `server` and `client` roles.
#[derive(Debug)]
pub struct NetArgs {
    matches: clap::ArgMatches,
}

impl FromArgMatches for NetArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(NetArgs {
            matches: matches.clone(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.matches = matches.clone();
        Ok(())
    }
}

impl Args for NetArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let mut cmd = cmd.subcommand_required(true).arg_required_else_help(true);
        for suite in net::suites::SUITES {
            let sub = OutputArgs::augment_args(clap::Command::new(suite.name));
            cmd = cmd.subcommand((suite.args)(sub).about(suite.about));
        }
        cmd.subcommand(
            ServerArgs::augment_args(clap::Command::new("server"))
                .about("A lab server (started by the lab itself)")
                .hide(true),
        )
        .subcommand(
            ClientArgs::augment_args(clap::Command::new("client"))
                .about("A lab client (started by the lab itself)")
                .hide(true),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        NetArgs::augment_args(cmd)
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
    /// `y3-sink`, `nats-source`, `nats-sink` (--addr: the nats-server).
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

/// Runs a suite (`measure`, with a progress bar) unless `--from` names recorded parts of
/// it, then publishes the results.
fn measure_or_read(
    output: &OutputArgs,
    out: &mut dyn Write,
    measure: impl FnOnce(&indicatif::ProgressBar) -> Result<Results>,
) -> Result<()> {
    let results = match &output.from[..] {
        [] => {
            let bar = y3_lab::progress_bar(0);
            let results = measure(&bar)?;
            bar.finish_and_clear();
            results
        }
        parts => Results::read_parts(parts)?,
    };
    publish(output, &results, out)
}

fn server(args: &ServerArgs) -> Result<()> {
    net::exit_when_stdin_closes();
    net::serve(&args.kind, args.addr, args.threads)
}

fn client(args: &ClientArgs, out: &mut dyn Write) -> Result<()> {
    let limit = Duration::from_secs(args.limit_s.max(1));
    let yomo_role = net::yomo::Role::from_client_kind(&args.kind);
    let nats_role = net::nats_hop::role_of(&args.kind);
    if let Some(role) = yomo_role.or(nats_role) {
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
        if nats_role.is_some() {
            return net::nats_hop::client(&run, out);
        }
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
    match args.matches.subcommand() {
        Some(("server", m)) => server(&ServerArgs::from_arg_matches(m)?),
        Some(("client", m)) => client(&ClientArgs::from_arg_matches(m)?, out),
        Some((name, m)) => {
            let suite = net::suites::find(name).with_context(|| format!("no suite {name}"))?;
            let output = OutputArgs::from_arg_matches(m)?;
            measure_or_read(&output, out, |bar| {
                let shared = net::suites::Shared {
                    quick: output.quick,
                    only: output.only.clone(),
                    command: command_line(),
                    programs: Programs::find(
                        std::env::current_exe().context("locating the y3-lab binary")?,
                        None,
                    ),
                };
                (suite.measure)(m, &shared, bar)
            })
        }
        None => anyhow::bail!("a suite is needed: y3-lab net --help"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_defaults_per_suite() {
        let args = net::suites::LoadArgs {
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
