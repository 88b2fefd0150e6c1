//! The router end-to-end report: msg/s and latency per payload × subscribers.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::net::record::NetResults;
use crate::report::{fill, Target};

/// The e2e report, registered in [`super::SUITES`].
pub(super) const REPORT: SuiteReport = SuiteReport {
    suite: "e2e",
    markdown: e2e_markdown,
    charts: e2e_charts,
    targets: e2e_targets,
};

/// E2e targets: y3's router msg/s ≥ NATS's, and its p50 ≤ Zenoh brokered's.
const TARGETS: [RatioTarget; 2] = [
    RatioTarget {
        name: "router msg/s y3-router-tcp / nats, every case",
        column: "",
        y3: "y3-router-tcp",
        base: "nats",
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: at_least(1.0),
    },
    RatioTarget {
        name: "router p50 y3-router-tcp / zenoh-router, every case",
        column: "",
        y3: "y3-router-tcp",
        base: "zenoh-router",
        ratio: |y, p| Some(y.p50_us? / p.p50_us?),
        bound: at_most(1.0),
    },
];

/// `t`'s ratio in every case (payload × subscribers) y3's row measured.
fn e2e_cells(r: &NetResults, t: &RatioTarget) -> Vec<(f64, String)> {
    let mut cells = Vec::new();
    for y in r.records.iter().filter(|x| x.implementation == t.y3) {
        if let Some(p) = r.find(&y.case, t.base, 0) {
            if let Some(v) = (t.ratio)(y, p) {
                cells.push((v, y.case.clone()));
            }
        }
    }
    cells
}

/// The e2e targets, checked.
pub fn e2e_targets(r: &NetResults) -> Vec<Target> {
    TARGETS.iter().map(|t| t.check(e2e_cells(r, t))).collect()
}

/// The e2e report.
pub fn e2e_markdown(r: &NetResults) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let _ = write!(out, "| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` msg/s | p50 / p99 |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: | --: |".repeat(impls.len()));
    for case in r.cases() {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(&case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} | {} / {} |",
                        rate(x.msg_per_s),
                        us(x.p50_us),
                        us(x.p99_us)
                    );
                }
                None => out.push_str(" – | – |"),
            }
        }
        out.push('\n');
    }
    fill(
        include_str!("templates/e2e.md"),
        &[
            ("header", &header(r)),
            ("table", &out),
            ("targets", &targets(&e2e_targets(r))),
            ("charts", &charts_markdown(&e2e_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s and p50 per case, one bar per implementation.
pub fn e2e_charts(r: &NetResults) -> Vec<(String, BarChart)> {
    vec![
        (
            "e2e-msgs.svg".into(),
            case_chart(r, "publish → subscribe msg/s", "msg/s", |x| {
                Some(x.msg_per_s)
            }),
        ),
        (
            "e2e-p50.svg".into(),
            case_chart(r, "one-way latency p50 (paced)", "µs", |x| x.p50_us),
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// YoMo's zipper and clients against y3
