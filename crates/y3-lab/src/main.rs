//! `y3-lab`: the y3 benchmark lab, apart from the product binary `y3`.
//!
//! ```text
//! y3-lab codec  ...                 take one key out of a packet: y3 vs peers vs the report's Go
//! y3-lab serde  ...                 encode/decode msg/s of a ~130-byte message and MQTT PUBLISH
//! y3-lab net pingpong|echo|e2e|yomo|pipeline|filter|federation ...   the network suites
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
    /// The network suites: `y3-lab net pingpong|echo|e2e|yomo|pipeline|filter|federation`.
    Net(cli::net::NetArgs),
    /// Rewrites results files of an older lab in the current model (in place).
    Migrate {
        /// Results files written by `--json`.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = run(&cli, &mut out);
    let flushed = out.flush();
    match result.and_then(|()| Ok(flushed?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli, out: &mut dyn Write) -> anyhow::Result<()> {
    match &cli.command {
        Command::Codec(args) => cli::codec::run_codec(args, out),
        Command::Serde(args) => cli::codec::run_serde(args, out),
        Command::Net(args) => cli::net::run(args, out),
        Command::Migrate { files } => {
            for file in files {
                y3_lab::record::Results::read_json(file)?.write_json(file)?;
                writeln!(out, "migrated {}", file.display())?;
            }
            Ok(())
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

    /// `y3-lab net pipeline` (formerly `y3 bench e2e`): source → router → function → sink in
    /// this process, short; it runs and writes its JSON.
    #[test]
    fn pipeline_smoke_writes_json() {
        let file = std::env::temp_dir().join(format!("y3-e2e-{}.json", std::process::id()));
        let out_dir = std::env::temp_dir().join(format!("y3-e2e-{}", std::process::id()));
        let cli = Cli::try_parse_from([
            "y3-lab",
            "net",
            "pipeline",
            "--quick",
            "--messages",
            "2000",
            "--paced",
            "200",
            "--rate",
            "2000",
            "--json",
            file.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .unwrap();
        let mut out = Vec::new();
        run(&cli, &mut out).unwrap();
        let table = String::from_utf8(out).unwrap();
        assert!(table.contains("tcp") && table.contains("quic"), "{table}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let runs = doc["records"].as_array().unwrap();
        assert_eq!(runs.len(), 4, "tcp and quic x 64 B and 1 KiB");
        for run in runs {
            assert!(run["metrics"]["msg_per_s"].as_f64().unwrap() > 0.0, "{run}");
            assert!(run["metrics"]["p99_us"].as_f64().unwrap() > 0.0, "{run}");
        }
        let _ = std::fs::remove_file(file);
        let _ = std::fs::remove_dir_all(out_dir);
    }
}
