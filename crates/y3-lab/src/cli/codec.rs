//! `y3-lab codec` and `y3-lab serde`: the codec benchmark lab (crate `y3-lab`).
//!
//! ```text
//! y3-lab codec [--quick] [--json FILE] [--out DIR] [--docs DIR] [--readme FILE] ...
//! y3-lab serde [--quick] [--json FILE] [--out DIR] [--docs DIR] [--readme FILE] ...
//! ```
//!
//! Peers are compiled in with the `peers` feature; without it only the y3 rows
//! (and the Go side) run, and the report says so. `scripts/bench-codec` builds with it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use y3_lab::codec::{self, CodecOptions};
use y3_lab::measure::{Mode, Settings};
use y3_lab::record::Results;
use y3_lab::serde_suite::{self, SerdeOptions};

use super::{command_line, publish, OutputArgs};

/// Which modes to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// One thread.
    Serial,
    /// One thread per core.
    Parallel,
    /// Serial, then parallel.
    Both,
}

impl ModeArg {
    fn modes(self) -> Vec<Mode> {
        match self {
            ModeArg::Serial => vec![Mode::Serial],
            ModeArg::Parallel => vec![Mode::Parallel],
            ModeArg::Both => vec![Mode::Serial, Mode::Parallel],
        }
    }
}

/// Options both suites share: the lab's output options plus the harness's.
#[derive(Debug, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// serial, parallel or both.
    #[arg(long, value_enum, default_value = "both")]
    mode: ModeArg,
    /// Samples per row (default 11; 5 with --quick).
    #[arg(long)]
    samples: Option<usize>,
    /// Length of one sample in milliseconds (default 40; 10 with --quick).
    #[arg(long, value_name = "MS")]
    sample_ms: Option<u64>,
}

impl CommonArgs {
    fn settings(&self) -> Settings {
        let mut s = if self.output.quick {
            Settings::quick()
        } else {
            Settings::normal()
        };
        if let Some(n) = self.samples {
            s.samples = n.max(1);
        }
        if let Some(ms) = self.sample_ms {
            s.sample = Duration::from_millis(ms.max(1));
        }
        s
    }
}

/// `y3-lab codec`.
#[derive(Debug, Args)]
pub struct CodecArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Seed of the published (random) key order (default: from the clock; recorded).
    #[arg(long)]
    seed: Option<u64>,
    /// Skip the Go side (bench/go).
    #[arg(long)]
    no_go: bool,
    /// The Go module of the Go side.
    #[arg(long, value_name = "DIR", default_value = "bench/go")]
    go_dir: PathBuf,
    /// Only check that every implementation extracts the right value (no timing).
    #[arg(long)]
    check: bool,
}

/// `y3-lab serde`.
#[derive(Debug, Args)]
pub struct SerdeArgs {
    #[command(flatten)]
    common: CommonArgs,
}

/// The recorded results named by `--from` (one file), if any.
fn recorded(output: &OutputArgs) -> Result<Option<Results>> {
    match &output.from[..] {
        [] => Ok(None),
        [path] => Ok(Some(Results::read_json(path)?)),
        _ => bail!("--from: the codec and serde suites write one results file"),
    }
}

/// Runs `y3-lab codec`.
///
/// # Errors
/// Data sets that fail to verify, IO errors, or (with `--check`) a wrong value.
pub fn run_codec(args: &CodecArgs, out: &mut dyn Write) -> Result<()> {
    let seed = args
        .seed
        .unwrap_or_else(|| y3_lab::system::unix_now() ^ u64::from(std::process::id()));
    if args.check {
        let failures = codec::check_all(seed)?;
        for f in &failures {
            writeln!(out, "wrong: {f}")?;
        }
        if !failures.is_empty() {
            bail!(
                "{} implementation(s) extracted a wrong value",
                failures.len()
            );
        }
        writeln!(
            out,
            "all {} implementations extract the expected value on every data set (peers {})",
            codec::impls().len(),
            if y3_lab::PEERS_ENABLED {
                "enabled"
            } else {
                "disabled"
            }
        )?;
        return Ok(());
    }
    let results = match recorded(&args.common.output)? {
        Some(results) => results,
        None => {
            if !y3_lab::PEERS_ENABLED {
                writeln!(
                    out,
                    "peers disabled (built without the y3-lab feature `peers`): y3 and Go rows only"
                )?;
                out.flush()?;
            }
            let opts = CodecOptions {
                settings: args.common.settings(),
                seed,
                modes: args.common.mode.modes(),
                only: args.common.output.only.clone(),
                go: !args.no_go,
                go_dir: args.go_dir.clone(),
                work_dir: args.common.output.out.clone(),
                quick: args.common.output.quick,
                command: command_line(),
            };
            let bar = y3_lab::progress_bar(0);
            let results = codec::run(&opts, &bar)?;
            bar.finish_and_clear();
            results
        }
    };
    publish(&args.common.output, &results, out)
}

/// Runs `y3-lab serde`.
///
/// # Errors
/// IO errors.
pub fn run_serde(args: &SerdeArgs, out: &mut dyn Write) -> Result<()> {
    let results = match recorded(&args.common.output)? {
        Some(results) => results,
        None => {
            let opts = SerdeOptions {
                settings: args.common.settings(),
                modes: args.common.mode.modes(),
                only: args.common.output.only.clone(),
                quick: args.common.output.quick,
                command: command_line(),
            };
            let bar = y3_lab::progress_bar(0);
            let results = serde_suite::run(&opts, &bar)?;
            bar.finish_and_clear();
            results
        }
    };
    publish(&args.common.output, &results, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(ModeArg::Both.modes(), [Mode::Serial, Mode::Parallel]);
    }
}
