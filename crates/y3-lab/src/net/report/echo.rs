//! The echo report: QPS, latency percentiles and server CPU per connections and size.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Record, Results};
use crate::report::{fill, ratio, Target};
use crate::table::{Align, Cell, Table};

/// The echo report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "echo",
    name: "net-echo",
    markdown: echo_markdown,
    charts: echo_charts,
    targets: echo_targets,
    summary,
    print_tables: true,
};

/// The target cells (every non-sweep point): y3 on tokio beside `peer` at the same point.
fn echo_pairs<'a>(r: &'a Results, peer: &str) -> Vec<(&'a Record, &'a Record)> {
    r.records
        .iter()
        .filter(|y| y.implementation == "y3-tokio" && !y.case.starts_with("peak"))
        .filter_map(|y| {
            let p = r.records.iter().find(|p| {
                p.implementation == peer
                    && p.case == y.case
                    && p.count(Dim::Sessions) == y.count(Dim::Sessions)
            })?;
            Some((y, p))
        })
        .collect()
}

/// How a report names an echo point.
fn echo_cell(x: &Record) -> String {
    format!("{}, {} conns", x.case, x.count(Dim::Sessions))
}

/// The echo targets: y3 on tokio at least plain tokio's QPS, at most its p99, every cell.
const TARGETS: [RatioTarget; 2] = [
    RatioTarget {
        name: "echo QPS y3-tokio / tokio, every cell",
        column: "",
        y3: "y3-tokio",
        base: "tokio",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.0),
    },
    RatioTarget {
        name: "echo p99 y3-tokio / tokio, every cell",
        column: "",
        y3: "y3-tokio",
        base: "tokio",
        ratio: |y, p| Some(y.get(Metric::P99Us)? / p.get(Metric::P99Us)?),
        bound: at_most(1.0),
    },
];

/// `t`'s ratio in every (size, connections) cell outside the peak sweep.
fn echo_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    echo_pairs(r, t.base)
        .into_iter()
        .filter_map(|(y, p)| Some(((t.ratio)(y, p)?, echo_cell(y))))
        .collect()
}

/// The echo targets, checked.
pub fn echo_targets(r: &Results) -> Vec<Target> {
    TARGETS.iter().map(|t| t.check(echo_cells(r, t))).collect()
}

/// The echo report.
pub fn echo_markdown(r: &Results) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let mut cases = r.cases();
    cases.sort_by_key(|c| c.starts_with("peak"));
    for case in &cases {
        let _ = writeln!(out, "## {case}\n");
        let mut conns: Vec<usize> = r
            .records
            .iter()
            .filter(|x| &x.case == case)
            .map(|x| x.count(Dim::Sessions))
            .collect();
        conns.sort_unstable();
        conns.dedup();
        let rows: Vec<(String, String)> = conns
            .iter()
            .map(|c| (c.to_string(), c.to_string()))
            .collect();
        let table = per_impl_table(
            r,
            ("conns", Align::Right),
            &rows,
            &["QPS", "p50 / p99 / p999", "CPU"],
            |conns, i| {
                r.records.iter().find(|x| {
                    &x.case == case
                        && x.implementation == i
                        && x.count(Dim::Sessions).to_string() == conns
                })
            },
            |x| {
                vec![
                    fig(x.value(Metric::MsgPerS), rate),
                    percentiles(x),
                    Cell::maybe(x.get(Metric::ServerCpuPct), |c| format!("{c:.0}%")),
                ]
            },
        );
        out.push_str(&table.markdown());
        out.push('\n');
        if case.starts_with("peak") {
            echo_peaks(&mut out, r, case, &impls);
        }
    }
    fill(
        include_str!("templates/echo.md"),
        &[
            ("header", &header(r)),
            ("cases", &out),
            ("targets", &targets(&echo_targets(r))),
            ("spread", &echo_spread(r)),
            ("charts", &charts_markdown(&echo_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The targets' cells again with the lowest and highest QPS of the runs beside each
/// median: on a shared VM the runs spread wider than the servers differ, and a reader
/// should see that next to the verdict.
fn echo_spread(r: &Results) -> String {
    let pairs = echo_pairs(r, "tokio");
    if pairs.is_empty() || pairs.iter().all(|(y, p)| y.runs < 2 && p.runs < 2) {
        return String::new();
    }
    let mut t = Table::new([
        ("cell", Align::Left),
        ("runs", Align::Right),
        ("`y3-tokio` QPS median (lowest–highest)", Align::Right),
        ("`tokio` QPS median (lowest–highest)", Align::Right),
        ("y3 / tokio", Align::Right),
    ]);
    let spread = |x: &Record| {
        let (low, high) = x.spread();
        format!(
            "{} ({}–{})",
            rate(x.value(Metric::MsgPerS)),
            rate(low),
            rate(high)
        )
    };
    for (y, p) in pairs {
        t.row(
            &echo_cell(y),
            vec![
                echo_cell(y).into(),
                y.runs.min(p.runs).to_string().into(),
                spread(y).into(),
                spread(p).into(),
                fig(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS), ratio),
            ],
        );
    }
    format!("## Run-to-run spread\n\n{}\n", t.markdown())
}

/// One line per server: its highest QPS over the sweep `case`, and at how many
/// connections.
fn echo_peaks(out: &mut String, r: &Results, case: &str, impls: &[String]) {
    out.push_str("Peak QPS of each server over the sweep:");
    for i in impls {
        let best = r
            .records
            .iter()
            .filter(|x| x.case == case && &x.implementation == i)
            .max_by(|a, b| {
                a.value(Metric::MsgPerS)
                    .total_cmp(&b.value(Metric::MsgPerS))
            });
        if let Some(x) = best {
            let _ = write!(
                out,
                " `{i}` {} at {} conns;",
                rate(x.value(Metric::MsgPerS)),
                x.count(Dim::Sessions)
            );
        }
    }
    if out.ends_with(';') {
        out.pop();
    }
    out.push_str(".\n\n");
}

/// Per case: QPS vs connections and p99 vs connections.
pub fn echo_charts(r: &Results) -> Vec<(String, BarChart)> {
    let mut charts = Vec::new();
    for case in r.cases() {
        let mut conns: Vec<usize> = r
            .records
            .iter()
            .filter(|x| x.case == case)
            .map(|x| x.count(Dim::Sessions))
            .collect();
        conns.sort_unstable();
        conns.dedup();
        let slug: String = case
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
            .replace("--", "-")
            .to_lowercase();
        for (metric, label, f) in [
            (
                "qps",
                "QPS",
                (|x: &Record| Some(x.value(Metric::MsgPerS))) as fn(&Record) -> Option<f64>,
            ),
            ("p99", "p99 latency (µs)", |x: &Record| {
                x.get(Metric::P99Us)
            }),
        ] {
            let series = r
                .impls()
                .into_iter()
                .map(|i| {
                    let v = conns
                        .iter()
                        .map(|&c| {
                            r.records
                                .iter()
                                .find(|x| {
                                    x.case == case
                                        && x.implementation == i
                                        && x.count(Dim::Sessions) == c
                                })
                                .and_then(f)
                        })
                        .collect();
                    (i, v)
                })
                .collect();
            charts.push((
                format!("echo-{metric}-{slug}.svg"),
                BarChart {
                    title: format!("echo, {case}: {label} vs connections"),
                    y_label: label.into(),
                    groups: conns.iter().map(|c| format!("{c} conns")).collect(),
                    series,
                    log: metric == "p99",
                },
            ));
        }
    }
    charts
}

// ---------------------------------------------------------------------------------------
// Router end to end
