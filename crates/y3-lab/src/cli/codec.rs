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
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use y3_lab::codec::{self, CodecOptions};
use y3_lab::measure::{Mode, Settings};
use y3_lab::record::Results;
use y3_lab::report;
use y3_lab::serde_suite::{self, SerdeOptions};

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

/// Options both suites share.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// CI-sized run: 5 samples of 10 ms per row (default: 11 samples of 40 ms).
    #[arg(long)]
    quick: bool,
    /// Write the machine-readable results (one record per case × implementation × mode).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Results directory: the Markdown report and the SVG charts.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
    /// Also write the report and charts here (the README links docs/bench).
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Replace the text between the `<!-- y3-bench:SUITE:start/end -->` markers of this file
    /// with the summary (links point into --docs, default docs/bench).
    #[arg(long, value_name = "FILE")]
    readme: Option<PathBuf>,
    /// serial, parallel or both.
    #[arg(long, value_enum, default_value = "both")]
    mode: ModeArg,
    /// Only implementations whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    only: Vec<String>,
    /// Samples per row (overrides --quick's and the default).
    #[arg(long)]
    samples: Option<usize>,
    /// Length of one sample in milliseconds (overrides --quick's and the default).
    #[arg(long, value_name = "MS")]
    sample_ms: Option<u64>,
    /// Render the report from a results file written by --json instead of measuring.
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    from: Option<PathBuf>,
}

impl CommonArgs {
    fn settings(&self) -> Settings {
        let mut s = if self.quick {
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

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("y3-lab {}", args.join(" "))
}

/// Writes the report, charts, JSON and README section of one suite.
fn publish(common: &CommonArgs, results: &Results, suite: &str, out: &mut dyn Write) -> Result<()> {
    if let Some(path) = &common.json {
        results.write_json(path)?;
        writeln!(out, "wrote {}", path.display())?;
    }
    let (markdown, charts) = match suite {
        "codec" => (
            report::codec_markdown(results),
            report::codec_charts(results),
        ),
        _ => (
            report::serde_markdown(results),
            report::serde_charts(results),
        ),
    };
    let mut dirs = vec![common.out.clone()];
    dirs.extend(common.docs.clone());
    for dir in &dirs {
        for file in report::write_report(dir, suite, &markdown, &charts)? {
            writeln!(out, "wrote {}", file.display())?;
        }
    }
    if let Some(readme) = &common.readme {
        let docs = common
            .docs
            .clone()
            .unwrap_or_else(|| PathBuf::from("docs/bench"));
        let rel = relative_to(&docs, readme);
        let body = match suite {
            "codec" => report::codec_summary(results, &rel),
            _ => report::serde_summary(results, &rel),
        };
        report::update_readme(readme, suite, &body)?;
        writeln!(out, "updated {} ({suite} section)", readme.display())?;
    }
    let targets = match suite {
        "codec" => report::codec_targets(results),
        _ => report::serde_targets(results),
    };
    print_verdicts(out, &targets, &results.notes)
}

/// Prints one line per target (met, missed by how much, or not measurable) and the run's
/// notes: the closing lines of every lab command.
pub fn print_verdicts(
    out: &mut dyn Write,
    targets: &[report::Target],
    notes: &[String],
) -> Result<()> {
    for t in targets {
        let verdict = match t.met {
            Some(true) => "met".to_string(),
            Some(false) => format!("MISSED ({})", t.shortfall),
            None => "n/a".to_string(),
        };
        writeln!(
            out,
            "target: {}: {} (need {}) {verdict}",
            t.name, t.measured, t.required
        )?;
    }
    for n in notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}

/// `docs` as a path relative to the directory of `readme` (both relative to the current
/// directory), with forward slashes.
fn relative_to(docs: &Path, readme: &Path) -> String {
    let base = readme.parent().unwrap_or(Path::new(""));
    let rel = docs.strip_prefix(base).unwrap_or(docs);
    rel.to_string_lossy().replace('\\', "/")
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
    let results = match &args.common.from {
        Some(path) => Results::read_json(path)?,
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
                only: args.common.only.clone(),
                go: !args.no_go,
                go_dir: args.go_dir.clone(),
                work_dir: args.common.out.clone(),
                quick: args.common.quick,
                command: command_line(),
            };
            let bar = y3_lab::progress_bar(0);
            let results = codec::run(&opts, &bar)?;
            bar.finish_and_clear();
            results
        }
    };
    publish(&args.common, &results, "codec", out)
}

/// Runs `y3-lab serde`.
///
/// # Errors
/// IO errors.
pub fn run_serde(args: &SerdeArgs, out: &mut dyn Write) -> Result<()> {
    let results = match &args.common.from {
        Some(path) => Results::read_json(path)?,
        None => {
            let opts = SerdeOptions {
                settings: args.common.settings(),
                modes: args.common.mode.modes(),
                only: args.common.only.clone(),
                quick: args.common.quick,
                command: command_line(),
            };
            let bar = y3_lab::progress_bar(0);
            let results = serde_suite::run(&opts, &bar)?;
            bar.finish_and_clear();
            results
        }
    };
    publish(&args.common, &results, "serde", out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_path_relative_to_the_readme() {
        assert_eq!(
            relative_to(Path::new("docs/bench"), Path::new("README.md")),
            "docs/bench"
        );
        assert_eq!(
            relative_to(Path::new("docs/bench"), Path::new("docs/README.md")),
            "bench"
        );
    }

    #[test]
    fn modes() {
        assert_eq!(ModeArg::Both.modes(), [Mode::Serial, Mode::Parallel]);
    }
}
