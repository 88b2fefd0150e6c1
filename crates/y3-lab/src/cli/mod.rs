//! The lab's command line: the options and the publishing step every suite shares (here),
//! and one module per suite's own arguments (`codec` also holds `serde`'s), each calling
//! into the library (`y3_lab::codec`, `y3_lab::serde_suite`, `y3_lab::net`).

pub mod codec;
pub mod net;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use y3_lab::record::Results;
use y3_lab::report::{self, Target};

/// Output options every suite shares.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// CI-sized run (seconds, not minutes).
    #[arg(long)]
    pub quick: bool,
    /// Write the machine-readable results here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Results directory: the Markdown report and the SVG charts.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    pub out: PathBuf,
    /// Also write the report, the charts and the results (NAME.json) here (the README links
    /// docs/bench).
    #[arg(long, value_name = "DIR")]
    pub docs: Option<PathBuf>,
    /// Replace the text between the `<!-- y3-bench:REPORT:start/end -->` markers of this
    /// file with the summary (links point into --docs, default docs/bench).
    #[arg(long, value_name = "FILE")]
    pub readme: Option<PathBuf>,
    /// Only implementations whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub only: Vec<String>,
    /// Render the report from results files written by --json instead of measuring
    /// (network suites: several, comma-separated, parts of one suite joined in order).
    #[arg(
        long,
        value_name = "FILES",
        value_delimiter = ',',
        conflicts_with = "json"
    )]
    pub from: Vec<PathBuf>,
}

/// The command line as recorded in the results (`y3-lab net echo --quick`).
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("y3-lab {}", args.join(" "))
}

/// Writes the JSON, the report and charts (into --out and --docs), the README section;
/// prints the tables (network suites) and the targets.
pub fn publish(output: &OutputArgs, results: &Results, out: &mut dyn Write) -> Result<()> {
    let name = results.name();
    if let Some(path) = &output.json {
        results.write_json(path)?;
        writeln!(out, "wrote {}", path.display())?;
    }
    let (markdown, charts, targets) = results.render();
    let mut dirs = vec![output.out.clone()];
    dirs.extend(output.docs.clone());
    for dir in &dirs {
        for file in report::write_report(dir, name, &markdown, &charts)? {
            writeln!(out, "wrote {}", file.display())?;
        }
    }
    if let Some(docs) = &output.docs {
        // The published pages keep the figures they came from, to re-render with --from.
        let path = docs.join(format!("{name}.json"));
        results.write_json(&path)?;
        writeln!(out, "wrote {}", path.display())?;
    }
    if let Some(readme) = &output.readme {
        let docs = output
            .docs
            .clone()
            .unwrap_or_else(|| PathBuf::from("docs/bench"));
        let body = results.summary(&relative_to(&docs, readme));
        report::update_readme(readme, name, &body)?;
        writeln!(out, "updated {} ({name} section)", readme.display())?;
    }
    if results.print_tables() {
        writeln!(out)?;
        for line in markdown
            .lines()
            .filter(|l| l.starts_with('|') || l.starts_with("## "))
        {
            writeln!(out, "{line}")?;
        }
        writeln!(out)?;
    }
    print_verdicts(out, &targets, &results.notes)
}

/// Prints one line per target (met, missed by how much, or not measurable) and the run's
/// notes: the closing lines of every lab command.
fn print_verdicts(out: &mut dyn Write, targets: &[Target], notes: &[String]) -> Result<()> {
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
}
