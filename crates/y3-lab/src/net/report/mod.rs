//! The network lab's Markdown reports, targets and charts, computed from [`NetResults`]
//! alone (so a `--json` file re-renders with `--from`). The files go through
//! [`crate::report::write_report`]; the charts are [`crate::charts::BarChart`]s mirroring
//! the reports' figures: total time vs threads per session count (ping-pong), QPS and p99
//! vs connections (echo), msg/s and p50 per payload × subscribers (e2e), msg/s, router CPU
//! per frame and p99 per workload × payload (yomo).
//!
//! One file per suite (`pingpong.rs`, `echo.rs`, `e2e.rs`, `yomo.rs`), each declaring its
//! [`SuiteReport`], with its prose in `templates/SUITE.md`; this module holds what they
//! share and [`SUITES`], the registry that rendering goes through.

use std::fmt::Write as _;

use crate::charts::BarChart;
use crate::net::record::{NetRecord, NetResults};
use crate::report::{ratio, targets_table, Bound, Target};

mod e2e;
mod echo;
mod pingpong;
mod yomo;

pub use e2e::{e2e_charts, e2e_markdown, e2e_targets};
pub use echo::{echo_charts, echo_markdown, echo_targets};
pub use pingpong::{pingpong_charts, pingpong_markdown, pingpong_targets};
pub use yomo::{yomo_charts, yomo_markdown, yomo_targets};

/// The version of `package` in the workspace's `Cargo.lock` (read at run time from the
/// current directory), or `?`.
pub fn lock_version(package: &str) -> String {
    let Ok(text) = std::fs::read_to_string("Cargo.lock") else {
        return "?".into();
    };
    let needle = format!("name = \"{package}\"\nversion = \"");
    text.find(&needle)
        .and_then(|i| {
            let rest = &text[i + needle.len()..];
            rest.find('"').map(|j| rest[..j].to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// The report's opening list: machine, command, pinning, peers.
pub(crate) fn header(r: &NetResults) -> String {
    let mut out = String::new();
    let m = &r.meta;
    let _ = writeln!(out, "- Machine: {}", m.machine);
    let _ = writeln!(
        out,
        "- Command: `{}`{}",
        m.command,
        if m.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(out, "- Pinning: {}", m.pinning);
    if !m.versions.is_empty() {
        let v: Vec<String> = m.versions.iter().map(|(p, v)| format!("{p} {v}")).collect();
        let _ = writeln!(out, "- Peers: {}", v.join("; "));
    }
    out.push('\n');
    out
}

/// The targets table.
pub(crate) fn targets(targets: &[Target]) -> String {
    let mut out = String::new();
    targets_table(&mut out, targets, ABSENT);
    out
}

/// The charts, as Markdown images under their file names.
pub(crate) fn charts_markdown(charts: &[(String, BarChart)]) -> String {
    let mut out = String::new();
    for (file, chart) in charts {
        let _ = writeln!(out, "![{}]({file})\n", chart.title);
    }
    out
}

/// What the network reports' target tables say of a target whose row did not run.
const ABSENT: &str = "n/a (not in this run)";

/// The run's notes as a section (empty without notes).
pub(crate) fn notes(r: &NetResults) -> String {
    let mut out = String::new();
    if r.notes.is_empty() {
        return out;
    }
    out.push_str("\n## Notes\n\n");
    for n in &r.notes {
        let _ = writeln!(out, "- {}", n.replace('\n', " "));
    }
    out
}

/// A target on a ratio `y3 / peer` (or `peer / y3`) that must stay within `bound`.
/// `worst` is the worst ratio over the cells and where it was.
fn ratio_target(name: String, worst: Option<(f64, String)>, bound: f64, at_most: bool) -> Target {
    let bound = Bound {
        value: bound,
        at_least: !at_most,
    };
    let required = bound.required();
    match worst {
        None => Target {
            name,
            measured: "not measured".into(),
            required,
            met: None,
            shortfall: String::new(),
        },
        Some((v, at)) => {
            let met = bound.met(v);
            let shortfall = if met {
                String::new()
            } else {
                format!("by {:.1}% at {at}", bound.missed_pct(v))
            };
            Target {
                name,
                measured: format!("{} (worst, {at})", ratio(v)),
                required,
                met: Some(met),
                shortfall,
            }
        }
    }
}

/// A network target declared as data: `ratio(y3 row, base row)` in every cell the suite
/// pairs, the worst of them within `bound`.
pub(crate) struct RatioTarget {
    /// What is required, in words.
    pub(crate) name: &'static str,
    /// The ratio's column in a report table (yomo, federation), else empty.
    pub(crate) column: &'static str,
    /// The y3 row.
    pub(crate) y3: &'static str,
    /// The row it is compared with.
    pub(crate) base: &'static str,
    /// The ratio in one cell, when both rows measured it.
    pub(crate) ratio: fn(&NetRecord, &NetRecord) -> Option<f64>,
    /// Where the worst cell must stay.
    pub(crate) bound: Bound,
}

impl RatioTarget {
    /// The target checked over `cells` (value, where).
    pub(crate) fn check(&self, cells: Vec<(f64, String)>) -> Target {
        let at_most = !self.bound.at_least;
        ratio_target(
            self.name.into(),
            worst(cells, at_most),
            self.bound.value,
            at_most,
        )
    }
}

impl RatioTarget {
    /// The ratio in `case`, when both rows were measured there (any thread count).
    pub(crate) fn in_case(&self, r: &NetResults, case: &str) -> Option<f64> {
        (self.ratio)(r.find(case, self.y3, 0)?, r.find(case, self.base, 0)?)
    }

    /// The ratio in every case where both rows were measured, with the case.
    pub(crate) fn cells_by_case(&self, r: &NetResults) -> Vec<(f64, String)> {
        r.cases()
            .into_iter()
            .filter_map(|case| Some((self.in_case(r, &case)?, case)))
            .collect()
    }
}

/// A chart with a group per case and a bar per implementation: `f` of its record, on a
/// log scale.
pub(crate) fn case_chart(
    r: &NetResults,
    title: &str,
    label: &str,
    f: fn(&NetRecord) -> Option<f64>,
) -> BarChart {
    let cases = r.cases();
    BarChart {
        title: title.into(),
        y_label: label.into(),
        series: r
            .impls()
            .into_iter()
            .map(|i| {
                let v = cases.iter().map(|c| r.find(c, &i, 0).and_then(f)).collect();
                (i, v)
            })
            .collect(),
        groups: cases,
        log: true,
    }
}

/// `≤ value`.
pub(crate) const fn at_most(value: f64) -> Bound {
    Bound {
        value,
        at_least: false,
    }
}

/// `≥ value`.
pub(crate) const fn at_least(value: f64) -> Bound {
    Bound {
        value,
        at_least: true,
    }
}

/// The worst (largest if `max`, else smallest) of `cells`.
fn worst(cells: Vec<(f64, String)>, max: bool) -> Option<(f64, String)> {
    cells
        .into_iter()
        .filter(|(v, _)| v.is_finite())
        .reduce(|a, b| if (b.0 > a.0) == max { b } else { a })
}

fn secs(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

pub(crate) fn us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Some(v) => format!("{v:.0} µs"),
    }
}

pub(crate) fn rate(v: f64) -> String {
    crate::charts::format_value(v.round())
}

// ---------------------------------------------------------------------------------------
// Ping-pong

/// One network suite's report: the suite name its results carry and what renders them.
pub struct SuiteReport {
    /// `meta.suite` of its results (`pingpong`, ...); files and README markers `net-SUITE`.
    pub suite: &'static str,
    /// The full Markdown report (prose from `templates/SUITE.md`).
    pub markdown: fn(&NetResults) -> String,
    /// The charts: (file name, chart).
    pub charts: fn(&NetResults) -> Vec<(String, BarChart)>,
    /// The targets, checked.
    pub targets: fn(&NetResults) -> Vec<Target>,
}

/// Every network suite's report. A new suite's report is a file of this module declaring
/// its `REPORT`, plus its line here.
pub const SUITES: &[SuiteReport] = &[
    pingpong::REPORT,
    echo::REPORT,
    e2e::REPORT,
    yomo::REPORT,
    crate::net::federation::REPORT,
];

/// The report, charts and targets of `r`'s suite (results of an unknown suite render as
/// ping-pong's, the first).
pub fn render(r: &NetResults) -> (String, Vec<(String, BarChart)>, Vec<Target>) {
    let suite = SUITES
        .iter()
        .find(|s| s.suite == r.meta.suite)
        .unwrap_or(&SUITES[0]);
    ((suite.markdown)(r), (suite.charts)(r), (suite.targets)(r))
}

impl crate::report::Publish for NetResults {
    fn name(&self) -> String {
        format!("net-{}", self.meta.suite)
    }

    fn write_json(&self, path: &std::path::Path) -> anyhow::Result<()> {
        crate::record::ResultsFile::write_json(self, path)
    }

    fn render(&self) -> (String, Vec<(String, BarChart)>, Vec<Target>) {
        render(self)
    }

    fn summary(&self, docs_rel: &str) -> String {
        summary(self, docs_rel)
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn print_tables(&self) -> bool {
        true
    }
}

/// The README section: the report's tables and targets without the prose, charts linked
/// under `docs_rel`.
pub fn summary(r: &NetResults, docs_rel: &str) -> String {
    let (md, charts, _) = render(r);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Network lab, `{}` on {} ([full report]({docs_rel}/net-{}.md)).\n",
        r.meta.command, r.meta.machine, r.meta.suite
    );
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with('|') || line.starts_with("## ") {
            if line.starts_with("## Notes") {
                break;
            }
            // The README nests these under its own `###` headings.
            if let Some(heading) = line.strip_prefix("## ") {
                let _ = writeln!(out, "#### {heading}");
            } else {
                out.push_str(line);
                out.push('\n');
            }
            in_table = line.starts_with('|');
        } else if in_table {
            out.push('\n');
            in_table = false;
        }
    }
    out.push('\n');
    for (file, chart) in charts.iter().filter(|(_, c)| !c.is_empty()) {
        let _ = writeln!(out, "![{}]({docs_rel}/{file})\n", chart.title);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::record::NetMeta;

    fn pp(imp: &str, sessions: usize, threads: usize, seconds: f64) -> NetRecord {
        NetRecord {
            suite: "pingpong".into(),
            implementation: imp.into(),
            case: format!("{sessions} sessions"),
            sessions,
            threads,
            seconds,
            runs: 1,
            ..NetRecord::default()
        }
    }

    fn pingpong() -> NetResults {
        NetResults {
            meta: NetMeta {
                suite: "pingpong".into(),
                command: "y3 bench net pingpong --quick".into(),
                ..NetMeta::default()
            },
            records: vec![
                pp("y3-transport", 100, 1, 0.9),
                pp("tokio", 100, 1, 1.0),
                pp("asio", 100, 1, 1.2),
                pp("y3-transport", 100, 2, 1.1),
                pp("tokio", 100, 2, 1.0),
                pp("asio", 100, 2, 1.5),
            ],
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn pingpong_report_targets_and_charts() {
        let r = pingpong();
        let md = pingpong_markdown(&r);
        assert!(
            md.contains("| 100 | 1 | 0.900 | 1.000 | 1.200 | 0.90× | 0.75× |"),
            "{md}"
        );
        assert!(md.contains("![ping-pong, 100 sessions"));
        assert!(md.contains("- a note"));
        let t = pingpong_targets(&r);
        assert_eq!(t[0].met, Some(true), "asio");
        assert_eq!(t[1].met, Some(false), "tokio at 2 threads");
        assert!(t[1].shortfall.contains("10.0%"), "{}", t[1].shortfall);
        assert!(t[1].shortfall.contains("2 thr"), "{}", t[1].shortfall);
        let charts = pingpong_charts(&r);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].0, "pingpong-100.svg");
        assert_eq!(charts[0].1.groups, ["1 threads", "2 threads"]);
        let dir = std::env::temp_dir().join(format!("y3-bench-net-report-{}", std::process::id()));
        let charts: Vec<(&str, BarChart)> = charts
            .iter()
            .map(|(f, c)| (f.as_str(), c.clone()))
            .collect();
        let files = crate::report::write_report(&dir, "net-pingpong", &md, &charts).unwrap();
        assert_eq!(files.len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
        let s = summary(&r, "docs/bench");
        assert!(s.contains("(docs/bench/net-pingpong.md)"), "{s}");
        assert!(s.contains("| 100 | 2 |"), "{s}");
        assert!(!s.contains("a note"));
    }

    #[test]
    fn echo_and_e2e_targets() {
        let rec =
            |suite: &str, imp: &str, case: &str, conns: usize, qps: f64, p99: f64| NetRecord {
                suite: suite.into(),
                implementation: imp.into(),
                case: case.into(),
                sessions: conns,
                msg_per_s: qps,
                p50_us: Some(p99 / 2.0),
                p99_us: Some(p99),
                server_cpu_pct: Some(99.0),
                ..NetRecord::default()
            };
        let echo = NetResults {
            meta: NetMeta {
                suite: "echo".into(),
                ..NetMeta::default()
            },
            records: vec![
                rec("echo", "y3-tokio", "100 B", 80, 110_000.0, 900.0),
                rec("echo", "tokio", "100 B", 80, 100_000.0, 1000.0),
                rec("echo", "y3-tokio", "100 B", 250, 95_000.0, 2000.0),
                rec("echo", "tokio", "100 B", 250, 100_000.0, 2100.0),
                rec("echo", "y3-tokio", "peak 100 B", 1, 20_000.0, 60.0),
                rec("echo", "tokio", "peak 100 B", 1, 10_000.0, 90.0),
                rec("echo", "y3-tokio", "peak 100 B", 50, 120_000.0, 500.0),
                rec("echo", "tokio", "peak 100 B", 50, 130_000.0, 450.0),
            ],
            notes: vec![],
        };
        let t = echo_targets(&echo);
        assert_eq!(t[0].met, Some(false));
        assert!(t[0].shortfall.contains("5.0%"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(true));
        let (md, charts, _) = render(&echo);
        assert!(
            md.contains("| 80 | 110k | 450 µs / 900 µs / – | 99% |"),
            "{md}"
        );
        assert!(
            md.contains("over the sweep: `y3-tokio` 120k at 50 conns; `tokio` 130k at 50 conns."),
            "{md}"
        );
        assert_eq!(
            charts.len(),
            4,
            "QPS and p99 for the size and for the sweep"
        );
        assert!(!md.contains("Run-to-run"), "one run per cell has no spread");
        let mut spread = echo.clone();
        for x in &mut spread.records {
            x.runs = 3;
            x.range = (x.msg_per_s * 0.8, x.msg_per_s * 1.1);
        }
        let md = echo_markdown(&spread);
        assert!(
            md.contains("| 100 B, 250 conns | 3 | 95k (76k–104.5k) | 100k (80k–110k) | 0.95× |"),
            "{md}"
        );
        assert!(!md.contains("| peak 100 B, 1 conns"), "{md}");
        let e2e = NetResults {
            meta: NetMeta {
                suite: "e2e".into(),
                ..NetMeta::default()
            },
            records: vec![
                rec("e2e", "y3-router-tcp", "64 B × 1 sub", 0, 2e6, 40.0),
                rec("e2e", "nats", "64 B × 1 sub", 0, 1e6, 60.0),
                rec("e2e", "zenoh-router", "64 B × 1 sub", 0, 1e6, 30.0),
            ],
            notes: vec![],
        };
        let t = e2e_targets(&e2e);
        assert_eq!(t[0].met, Some(true));
        assert_eq!(t[1].met, Some(false), "p50 20 µs against 15 µs");
        let (md, _, _) = render(&e2e);
        assert!(md.contains("| 64 B × 1 sub | 2M | 20 µs / 40 µs |"), "{md}");
    }

    #[test]
    fn yomo_ratios_and_targets() {
        let rec = |imp: &str, case: &str, rate: f64, cpu: f64, p99: f64| NetRecord {
            suite: "yomo".into(),
            implementation: imp.into(),
            case: case.into(),
            msg_per_s: rate,
            cpu_us_per_frame: Some(cpu),
            p50_us: Some(p99 / 4.0),
            p99_us: Some(p99),
            p999_us: Some(p99 * 2.0),
            runs: 3,
            range: (rate * 0.9, rate * 1.1),
            ..NetRecord::default()
        };
        let r = NetResults {
            meta: NetMeta {
                suite: "yomo".into(),
                versions: vec![("yomo".into(), "v1.22.0".into())],
                ..NetMeta::default()
            },
            records: vec![
                rec("yomo-zipper", "sink 64 B", 40_000.0, 14.0, 5000.0),
                rec("y3-yomo-clients", "sink 64 B", 100_000.0, 1.0, 500.0),
                rec("y3-quic", "sink 64 B", 900_000.0, 0.8, 100.0),
                rec("y3-tcp", "sink 64 B", 1_000_000.0, 0.5, 80.0),
                rec("yomo-zipper", "relay 64 B", 20_000.0, 14.0, 10_000.0),
                rec("y3-yomo-clients", "relay 64 B", 30_000.0, 3.5, 1000.0),
                rec("y3-tcp", "relay 64 B", 500_000.0, 0.5, 80.0),
            ],
            notes: vec![],
        };
        let t = yomo_targets(&r);
        assert_eq!(t.len(), 5);
        assert_eq!(t[0].met, Some(false), "3.5 / 14 µs at relay");
        assert!(t[0].shortfall.contains("relay 64 B"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(true), "p99 0.1×");
        assert_eq!(t[2].met, Some(false), "1.5× at relay");
        assert_eq!(t[3].met, Some(true), "22× where y3-quic ran");
        assert_eq!(t[3].measured, "22× (worst, sink 64 B); 1 of 2 cases");
        assert_eq!(t[0].measured, "0.25× (worst, relay 64 B)");
        assert_eq!(t[4].met, Some(true), "0.9× at sink 64 B");
        let (md, charts, _) = render(&r);
        assert!(md.contains("- Peers: yomo v1.22.0"), "{md}");
        assert!(
            md.contains("| sink 64 B | 40k | 14.0 | 100k | 1.00 | 900k | 0.80 | 1M | 0.50 |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | 20k | 14.0 | 30k | 3.50 | – | – | 500k | 0.50 |"),
            "{md}"
        );
        assert!(
            md.contains("| sink 64 B | 1.25 ms / 5.00 ms / 10.00 ms | 125 µs / 500 µs / 1.00 ms |"),
            "{md}"
        );
        assert!(
            md.contains("| sink 64 B | 0.07× | 0.10× | 2.5× | 22× | 0.90× |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | 0.25× | 0.10× | 1.5× | – | – |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | `y3-tcp` | 3 | 500k (450k–550k) |"),
            "{md}"
        );
        assert_eq!(charts.len(), 3);
        assert_eq!(charts[1].1.groups, ["sink 64 B", "relay 64 B"]);
        let s = summary(&r, "docs/bench");
        assert!(s.contains("(docs/bench/net-yomo.md)"), "{s}");
        assert!(s.contains("#### Targets"), "{s}");
    }

    #[test]
    fn lock_version_reads_the_lockfile_or_says_unknown() {
        let v = lock_version("no-such-package-here");
        assert_eq!(v, "?");
    }
}
