//! The QUIC report: one-way frames over y3's TCP adapter and its QUIC adapter (quinn with
//! its defaults, quinn as y3 tunes it), and over a second QUIC stack under the same codec
//! (s2n-quic, when the lab was built with it); each QUIC row's ratio to TCP in every cell
//! (issue 28's target for the router: QUIC ≥ 0.8× TCP), and which QUIC stack wins each
//! cell on each figure (issue 28: switch stacks only on numbers).

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Record, Results};
use crate::report::{fill, Target};
use crate::table::{Align, Table};

/// The QUIC report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "quic",
    name: "net-quic",
    markdown: quic_markdown,
    charts: quic_charts,
    targets: quic_targets,
    summary,
    print_tables: true,
};

/// The ratios are in the Markdown (every cell); no target table.
pub fn quic_targets(_: &Results) -> Vec<Target> {
    Vec::new()
}

/// The QUIC charts.
const QUIC_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "quic-msgs.svg",
        title: "frames one way, msg/s (flat out)",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: false,
    },
    MetricChart {
        file: "quic-p99.svg",
        title: "one-way latency p99 (paced)",
        label: "µs",
        metric: Metric::P99Us,
        log: true,
    },
];

/// msg/s and p99 per size, one bar per row.
pub fn quic_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &QUIC_CHARTS)
}

/// The QUIC rows (every row but `tcp`), in display order.
const QUIC_ROWS: [&str; 3] = ["quinn-defaults", "quinn-y3", crate::net::quic::S2N_QUIC];

/// A figure the stacks are compared on: its name, its metric, whether more is better.
const FIGURES: [(&str, Metric, bool); 4] = [
    ("msg/s", Metric::MsgPerS, true),
    ("CPU/frame", Metric::CpuUsPerFrame, false),
    ("p50", Metric::P50Us, false),
    ("p99", Metric::P99Us, false),
];

/// Per case, the QUIC row that wins each figure, and by how much over the runner-up; empty
/// when fewer than two QUIC rows ran.
fn winners(r: &Results) -> String {
    let mut out = String::new();
    for case in r.cases() {
        let rows: Vec<(&str, &Record)> = QUIC_ROWS
            .iter()
            .filter_map(|&row| Some((row, r.find(&case, row, 0)?)))
            .collect();
        if rows.len() < 2 {
            continue;
        }
        let mut wins = Vec::new();
        for (name, metric, more) in FIGURES {
            let mut ranked: Vec<(&str, f64)> = rows
                .iter()
                .filter_map(|(row, x)| Some((*row, x.get(metric)?)))
                .filter(|(_, v)| v.is_finite() && *v > 0.0)
                .collect();
            ranked.sort_by(|a, b| {
                if more {
                    b.1.total_cmp(&a.1)
                } else {
                    a.1.total_cmp(&b.1)
                }
            });
            if let [(best, b), (_, next), ..] = ranked[..] {
                let by = if more { b / next } else { next / b };
                wins.push(format!("{name} `{best}` ({by:.2}× the next)"));
            }
        }
        let _ = writeln!(out, "- {case}: {}", wins.join("; "));
    }
    if out.is_empty() {
        return out;
    }
    format!("Which QUIC stack wins each cell (best of the QUIC rows, and its lead over the next):\n\n{out}\n")
}

/// The switching rule (issue 28: switch only on numbers) applied to this run: the second
/// stack would have to beat the tuned quinn on msg/s, CPU per frame and p99 in every cell.
fn verdict(r: &Results) -> String {
    let (ours, other) = ("quinn-y3", crate::net::quic::S2N_QUIC);
    let mut cells = Vec::new();
    let mut lost = Vec::new();
    for case in r.cases() {
        let (Some(q), Some(o)) = (r.find(&case, ours, 0), r.find(&case, other, 0)) else {
            continue;
        };
        cells.push(case.clone());
        for (name, metric, more) in FIGURES {
            if name == "p50" {
                continue;
            }
            let (Some(qv), Some(ov)) = (q.get(metric), o.get(metric)) else {
                continue;
            };
            let better = if more { ov > qv } else { ov < qv };
            if !better {
                lost.push(format!("{case} {name}"));
            }
        }
    }
    if cells.is_empty() {
        return String::new();
    }
    let outcome = if lost.is_empty() {
        format!("`{other}` beats `{ours}` on all three in every cell: the rule allows a switch")
    } else {
        format!(
            "`{other}` does not beat `{ours}` on {}: the rule keeps quinn",
            lost.join(", ")
        )
    };
    format!(
        "Switching rule (issue 28, switch only on numbers): `{other}` replaces `{ours}` only if \
         it beats it on msg/s, CPU per frame and p99 in every cell. In this run {outcome}.\n\n"
    )
}

/// The QUIC report.
pub fn quic_markdown(r: &Results) -> String {
    let mut table = Table::new([
        ("row", Align::Left),
        ("case", Align::Left),
        ("msg/s", Align::Right),
        ("CPU µs/frame", Align::Right),
        ("paced p50 / p99", Align::Left),
    ]);
    for x in &r.records {
        table.row(
            &x.implementation,
            vec![
                format!("`{}`", x.implementation).into(),
                x.case.clone().into(),
                fig(x.value(Metric::MsgPerS), |v| format!("{v:.0}")),
                fig(x.value(Metric::CpuUsPerFrame), |v| format!("{v:.2}")),
                format!(
                    "{} / {}",
                    us(x.get(Metric::P50Us)),
                    us(x.get(Metric::P99Us))
                )
                .into(),
            ],
        );
    }
    let mut ratios =
        String::from("Each QUIC row against `tcp`, per cell (msg/s; CPU per frame):\n\n");
    for case in r.cases() {
        let Some(tcp) = r.find(&case, "tcp", 0) else {
            continue;
        };
        for row in QUIC_ROWS {
            let Some(q) = r.find(&case, row, 0) else {
                continue;
            };
            let rate = q.value(Metric::MsgPerS) / tcp.value(Metric::MsgPerS).max(1e-9);
            let cpu = q.value(Metric::CpuUsPerFrame) / tcp.value(Metric::CpuUsPerFrame).max(1e-9);
            let _ = writeln!(ratios, "- {case}, `{row}`: msg/s {rate:.2}×, CPU {cpu:.2}×");
        }
    }
    let first = r.records.first();
    fill(
        include_str!("templates/quic.md"),
        &[
            ("header", &header(r)),
            (
                "paced",
                &first.map_or(0, |x| x.count(Dim::Paced)).to_string(),
            ),
            ("rate", &first.map_or(0, |x| x.count(Dim::Rate)).to_string()),
            ("table", &table.markdown()),
            ("ratios", &ratios),
            ("winners", &format!("{}{}", winners(r), verdict(r))),
            ("charts", &charts_markdown(&quic_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Meta, Record};

    fn rec(row: &str, case: &str, rate: f64, cpu: f64, p50: f64, p99: f64) -> Record {
        Record::new("quic", row, case)
            .metric(Metric::MsgPerS, rate)
            .metric(Metric::CpuUsPerFrame, cpu)
            .metric(Metric::P50Us, p50)
            .metric(Metric::P99Us, p99)
            .with_runs(1)
    }

    fn results(records: Vec<Record>) -> Results {
        Results {
            meta: Meta {
                suite: "quic".into(),
                ..Meta::default()
            },
            records,
            ..Results::default()
        }
    }

    #[test]
    fn winners_per_cell_and_the_switching_rule() {
        let r = results(vec![
            rec("tcp", "64 B", 400_000.0, 2.0, 40.0, 80.0),
            rec("quinn-y3", "64 B", 200_000.0, 5.0, 60.0, 120.0),
            rec("s2n-quic", "64 B", 300_000.0, 4.0, 70.0, 100.0),
            rec("tcp", "1024 B", 300_000.0, 3.0, 45.0, 90.0),
            rec("quinn-y3", "1024 B", 150_000.0, 6.0, 65.0, 130.0),
            rec("s2n-quic", "1024 B", 100_000.0, 8.0, 60.0, 200.0),
        ]);
        let md = quic_markdown(&r);
        assert!(
            md.contains(
                "- 64 B: msg/s `s2n-quic` (1.50× the next); CPU/frame `s2n-quic` (1.25× the \
                 next); p50 `quinn-y3` (1.17× the next); p99 `s2n-quic` (1.20× the next)"
            ),
            "{md}"
        );
        assert!(md.contains("- 1024 B, `s2n-quic`: msg/s 0.33×"), "{md}");
        assert!(
            md.contains(
                "does not beat `quinn-y3` on 1024 B msg/s, 1024 B CPU/frame, 1024 B p99: the \
                 rule keeps quinn"
            ),
            "{md}"
        );
        assert_eq!(quic_charts(&r).len(), 2);
        // Winning every cell on all three allows a switch.
        let r = results(r.records[..3].to_vec());
        assert!(quic_markdown(&r).contains("the rule allows a switch"));
        // Without the second stack (a build without net-s2n-quic): no winners, no rule.
        let r = results(vec![
            rec("tcp", "64 B", 400_000.0, 2.0, 40.0, 80.0),
            rec("quinn-y3", "64 B", 200_000.0, 5.0, 60.0, 120.0),
        ]);
        let md = quic_markdown(&r);
        assert!(
            !md.contains("wins each cell") && !md.contains("Switching rule"),
            "{md}"
        );
    }
}
