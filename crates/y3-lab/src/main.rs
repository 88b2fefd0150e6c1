//! `y3-lab`: the y3 benchmark lab, apart from the product binary `y3`.
//!
//! ```text
//! y3-lab codec  ...                 take one key out of a packet: y3 vs peers vs the report's Go
//! y3-lab serde  ...                 encode/decode msg/s of a ~130-byte message and MQTT PUBLISH
//! y3-lab net pingpong|echo|e2e|yomo|pipeline ...   the network suite
//! ```
//!
//! The lab is both the orchestrator and the child processes it starts: servers and clients
//! run as `y3-lab net server|client KIND` (hidden commands); `y3 serve` rows run the product
//! binary `y3` built next to this one. Peers are compiled in with the `peers` (codec) and
//! `net-peers` (network) features; `scripts/bench-codec` and `scripts/bench-net.sh` turn them on.

mod cli;

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "y3-lab",
    version,
    about = "The y3 benchmark lab: codec and network suites against peers, with reports and charts",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Take the value of one observed key: y3 vs JSON/protobuf/... peers and the report's Go.
    Codec(cli::codec::CodecArgs),
    /// Encode/decode msg/s of a ~130-byte message and an MQTT PUBLISH frame.
    Serde(cli::codec::SerdeArgs),
    /// The network suite: `y3-lab net pingpong|echo|e2e|yomo|pipeline`.
    Net(cli::net::NetArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = match &cli.command {
        Command::Codec(args) => cli::codec::run_codec(args, &mut out),
        Command::Serde(args) => cli::codec::run_serde(args, &mut out),
        Command::Net(args) => cli::net::run(args, &mut out),
    };
    let flushed = out.flush();
    match result.and_then(|()| Ok(flushed?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
