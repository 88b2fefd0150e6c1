//! The YoMo report: msg/s, router CPU per frame and paced latency per workload.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::net::record::{NetRecord, NetResults};
use crate::report::{fill, ratio, Target};

/// The yomo report, registered in [`super::SUITES`].
pub(super) const REPORT: SuiteReport = SuiteReport {
    suite: "yomo",
    markdown: yomo_markdown,
    charts: yomo_charts,
    targets: yomo_targets,
};

/// The row with YoMo's zipper and YoMo's clients: every yomo target's baseline.
const YOMO: &str = "yomo-zipper";
/// `y3 serve` with YoMo's clients.
const Y3_YOMO_CLIENTS: &str = "y3-yomo-clients";

/// The yomo targets (issue 12): `ratio(y3 row, baseline row)` in every case within `bound`.
const YOMO_TARGETS: [RatioTarget; 5] = [
    RatioTarget {
        name: "router CPU per routed frame, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "router CPU/frame, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.cpu_us_per_frame? / p.cpu_us_per_frame?),
        bound: at_most(0.1),
    },
    RatioTarget {
        name: "p99 at the paced rate, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "paced p99, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.p99_us? / p.p99_us?),
        bound: at_most(0.2),
    },
    RatioTarget {
        name: "msg/s with YoMo's clients, y3 serve / YoMo's zipper, every case",
        column: "msg/s, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: at_least(2.0),
    },
    RatioTarget {
        name: "msg/s, y3's clients over QUIC / YoMo's zipper with YoMo's clients, every case",
        column: "msg/s, y3-quic ÷ yomo-zipper",
        y3: "y3-quic",
        base: YOMO,
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: at_least(20.0),
    },
    RatioTarget {
        name: "msg/s, y3's clients over QUIC / over TCP, every case",
        column: "msg/s, y3-quic ÷ y3-tcp",
        y3: "y3-quic",
        base: "y3-tcp",
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: at_least(2.0 / 3.0),
    },
];

/// YoMo targets: y3 serve against YoMo's zipper with YoMo's clients (router CPU per frame
/// ≤ 1/10, p99 ≤ 1/5, msg/s ≥ 2×), y3's clients ≥ 20× YoMo's msg/s, QUIC ≥ 2/3 of TCP.
/// A case without both rows (a run failed every time) is left out of the worst and
/// counted in the measured figure.
pub fn yomo_targets(r: &NetResults) -> Vec<Target> {
    let cases = r.cases().len();
    YOMO_TARGETS
        .iter()
        .map(|t| {
            let cells = t.cells_by_case(r);
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
pub fn yomo_markdown(r: &NetResults) -> String {
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
                        rate(x.msg_per_s),
                        cpu_us(x.cpu_us_per_frame)
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
                        us(x.p50_us),
                        us(x.p99_us),
                        us(x.p999_us)
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
            let cell = t.in_case(r, case).map_or("–".into(), ratio);
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
fn yomo_spread(out: &mut String, r: &NetResults) {
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
            rate(x.msg_per_s),
            rate(x.range.0),
            rate(x.range.1)
        );
    }
    out.push('\n');
}

/// msg/s, router CPU per frame and p99 per case, one bar per row.
pub fn yomo_charts(r: &NetResults) -> Vec<(String, BarChart)> {
    let chart =
        |title: &str, label: &str, f: fn(&NetRecord) -> Option<f64>| case_chart(r, title, label, f);
    vec![
        (
            "yomo-msgs.svg".into(),
            chart("msg/s at the sink (flat out)", "msg/s", |x| {
                Some(x.msg_per_s)
            }),
        ),
        (
            "yomo-cpu.svg".into(),
            chart(
                "router CPU per routed frame (lower is better)",
                "µs",
                |x| x.cpu_us_per_frame,
            ),
        ),
        (
            "yomo-p99.svg".into(),
            chart("one-way latency p99 (paced)", "µs", |x| x.p99_us),
        ),
    ]
}

// ---------------------------------------------------------------------------------------
