//! The federation report: source and sink on one router, or on two routers federated
//! through nats-server.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};

/// The federation report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "federation",
    name: "net-federation",
    markdown: federation_markdown,
    charts: federation_charts,
    targets: federation_targets,
    summary,
    print_tables: true,
};

/// The federation suite sets no targets: it shows what the extra hop costs.
pub fn federation_targets(_: &Results) -> Vec<Target> {
    Vec::new()
}

/// The federation report.
pub fn federation_markdown(r: &Results) -> String {
    let first = r.records.first();
    let mut table = format!(
        "| path | size | msg/s (flat out, {} msgs) | received | p50 µs | p99 µs (paced {} msg/s) |\n\
         | --- | --: | --: | --: | --: | --: |\n",
        first.map_or(0.0, |x| x.value(Metric::Messages)),
        first.map_or(0, |x| x.count(Dim::Rate)),
    );
    for x in &r.records {
        let _ = writeln!(
            table,
            "| {} | {} B | {:.0} | {} | {:.0} | {:.0} |",
            x.implementation,
            x.count(Dim::Payload),
            x.value(Metric::MsgPerS),
            x.value(Metric::Received),
            x.value(Metric::P50Us),
            x.value(Metric::P99Us),
        );
    }
    fill(
        include_str!("templates/federation.md"),
        &[
            ("header", &header(r)),
            ("table", &table),
            ("charts", &charts_markdown(&federation_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s and paced p99 per payload, one bar per path.
pub fn federation_charts(r: &Results) -> Vec<(String, BarChart)> {
    let cases = r.cases();
    let chart = |title: &str, label: &str, m: Metric| BarChart {
        title: title.into(),
        y_label: label.into(),
        groups: cases.clone(),
        series: r
            .impls()
            .into_iter()
            .map(|i| {
                let v = cases
                    .iter()
                    .map(|c| r.find(c, &i, 0).and_then(|x| x.get(m)))
                    .collect();
                (i, v)
            })
            .collect(),
        log: false,
    };
    vec![
        (
            "federation-msgs.svg".into(),
            chart("source → sink msg/s, flat out", "msg/s", Metric::MsgPerS),
        ),
        (
            "federation-p99.svg".into(),
            chart("one-way latency p99 (paced)", "µs", Metric::P99Us),
        ),
    ]
}
