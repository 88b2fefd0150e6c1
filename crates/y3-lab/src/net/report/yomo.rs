//! The YoMo report: msg/s, router CPU per frame and paced latency per workload.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Metric, Record, Results};
use crate::report::{fill, ratio, Target};

/// The yomo report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "yomo",
    name: "net-yomo",
    markdown: yomo_markdown,
    charts: yomo_charts,
    targets: yomo_targets,
    summary,
    print_tables: true,
};

/// The row with YoMo's zipper and YoMo's clients: every yomo target's baseline.
const YOMO: &str = "yomo-zipper";
/// `y3 serve` with YoMo's clients.
const Y3_YOMO_CLIENTS: &str = "y3-yomo-clients";

/// `f(y3 row, baseline row)` in every case where both were measured, with the case.
fn yomo_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    r.cases()
        .into_iter()
        .filter_map(|case| {
            let v = (t.ratio)(r.find(&case, t.y3, 0)?, r.find(&case, t.base, 0)?)?;
            Some((v, case))
        })
        .collect()
}

/// The yomo targets (issue 12): `ratio(y3 row, baseline row)` in every case within `bound`.
const YOMO_TARGETS: [RatioTarget; 5] = [
    RatioTarget {
        name: "router CPU per routed frame, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "router CPU/frame, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.get(Metric::CpuUsPerFrame)? / p.get(Metric::CpuUsPerFrame)?),
        bound: at_most(0.1),
    },
    RatioTarget {
        name: "p99 at the paced rate, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "paced p99, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.get(Metric::P99Us)? / p.get(Metric::P99Us)?),
        bound: at_most(0.2),
    },
    RatioTarget {
        name: "msg/s with YoMo's clients, y3 serve / YoMo's zipper, every case",
        column: "msg/s, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(2.0),
    },
    RatioTarget {
        name: "msg/s, y3's clients over QUIC / YoMo's zipper with YoMo's clients, every case",
        column: "msg/s, y3-quic ÷ yomo-zipper",
        y3: "y3-quic",
        base: YOMO,
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(20.0),
    },
    RatioTarget {
        name: "msg/s, y3's clients over QUIC / over TCP, every case",
        column: "msg/s, y3-quic ÷ y3-tcp",
        y3: "y3-quic",
        base: "y3-tcp",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(2.0 / 3.0),
    },
];

/// YoMo targets: y3 serve against YoMo's zipper with YoMo's clients (router CPU per frame
/// ≤ 1/10, p99 ≤ 1/5, msg/s ≥ 2×), y3's clients ≥ 20× YoMo's msg/s, QUIC ≥ 2/3 of TCP.
/// A case without both rows (a run failed every time) is left out of the worst and
/// counted in the measured figure.
pub fn yomo_targets(r: &Results) -> Vec<Target> {
    let cases = r.cases().len();
    YOMO_TARGETS
        .iter()
        .map(|t| {
            let cells = yomo_cells(r, t);
            let measured = cells.len();
            let mut target = t.check(cells);
            if measured > 0 && measured < cases {
                target.measured = format!("{}; {measured} of {cases} cases", target.measured);
            }
            target
        })
        .collect()
}

/// µs per frame, with a precision that suits it.
fn cpu_us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// The yomo report.
pub fn yomo_markdown(r: &Results) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let cases = r.cases();
    out.push_str("| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` msg/s | CPU µs/frame |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: | --: |".repeat(impls.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} | {} |",
                        rate(x.value(Metric::MsgPerS)),
                        cpu_us(x.get(Metric::CpuUsPerFrame))
                    );
                }
                None => out.push_str(" – | – |"),
            }
        }
        out.push('\n');
    }
    let throughput = std::mem::take(&mut out);
    out.push_str("| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` p50 / p99 / p999 |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: |".repeat(impls.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} / {} / {} |",
                        us(x.get(Metric::P50Us)),
                        us(x.get(Metric::P99Us)),
                        us(x.get(Metric::P999Us))
                    );
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    let latency = std::mem::take(&mut out);
    out.push_str("| case |");
    for t in &YOMO_TARGETS {
        let _ = write!(out, " {} ({}) |", t.column, t.bound.required());
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: |".repeat(YOMO_TARGETS.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for t in &YOMO_TARGETS {
            let cell = r
                .find(case, t.y3, 0)
                .zip(r.find(case, t.base, 0))
                .and_then(|(y, p)| (t.ratio)(y, p))
                .map_or("–".into(), ratio);
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    let mut spread = String::new();
    yomo_spread(&mut spread, r);
    fill(
        include_str!("templates/yomo.md"),
        &[
            ("header", &header(r)),
            ("throughput", &throughput),
            ("latency", &latency),
            ("ratios", &out),
            ("targets", &targets(&yomo_targets(r))),
            ("spread", &spread),
            ("charts", &charts_markdown(&yomo_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s medians with the lowest and highest run beside them.
fn yomo_spread(out: &mut String, r: &Results) {
    if r.records.iter().all(|x| x.runs < 2) {
        return;
    }
    out.push_str(
        "## Run-to-run spread\n\n| case | row | runs | msg/s median (lowest–highest) |\n\
         | --- | --- | --: | --: |\n",
    );
    for x in &r.records {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} ({}–{}) |",
            x.case,
            x.implementation,
            x.runs,
            rate(x.value(Metric::MsgPerS)),
            rate(x.spread().0),
            rate(x.spread().1)
        );
    }
    out.push('\n');
}

/// msg/s, router CPU per frame and p99 per case, one bar per row.
pub fn yomo_charts(r: &Results) -> Vec<(String, BarChart)> {
    let cases = r.cases();
    let chart = |title: &str, label: &str, f: fn(&Record) -> Option<f64>| BarChart {
        title: title.into(),
        y_label: label.into(),
        groups: cases.clone(),
        series: r
            .impls()
            .into_iter()
            .map(|i| {
                let v = cases.iter().map(|c| r.find(c, &i, 0).and_then(f)).collect();
                (i, v)
            })
            .collect(),
        log: true,
    };
    vec![
        (
            "yomo-msgs.svg".into(),
            chart("msg/s at the sink (flat out)", "msg/s", |x| {
                Some(x.value(Metric::MsgPerS))
            }),
        ),
        (
            "yomo-cpu.svg".into(),
            chart(
                "router CPU per routed frame (lower is better)",
                "µs",
                |x| x.get(Metric::CpuUsPerFrame),
            ),
        ),
        (
            "yomo-p99.svg".into(),
            chart("one-way latency p99 (paced)", "µs", |x| {
                x.get(Metric::P99Us)
            }),
        ),
    ]
}

// ---------------------------------------------------------------------------------------
