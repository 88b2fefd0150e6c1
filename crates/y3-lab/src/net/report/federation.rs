//! The federation report: source and sink on one router, or on two routers federated
//! through nats-server.

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};
use crate::table::{Align, Table};

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
    let mut table = Table::new([
        ("path".to_string(), Align::Left),
        ("size".into(), Align::Right),
        (
            format!(
                "msg/s (flat out, {} msgs)",
                first.map_or(0.0, |x| x.value(Metric::Messages))
            ),
            Align::Right,
        ),
        ("received".into(), Align::Right),
        ("p50 µs".into(), Align::Right),
        (
            format!(
                "p99 µs (paced {} msg/s)",
                first.map_or(0, |x| x.count(Dim::Rate))
            ),
            Align::Right,
        ),
    ]);
    let whole = |v: f64| format!("{v:.0}");
    for x in &r.records {
        table.row(
            &x.implementation,
            vec![
                x.implementation.as_str().into(),
                format!("{} B", x.count(Dim::Payload)).into(),
                fig(x.value(Metric::MsgPerS), whole),
                fig(x.value(Metric::Received), |v| v.to_string()),
                fig(x.value(Metric::P50Us), whole),
                fig(x.value(Metric::P99Us), whole),
            ],
        );
    }
    fill(
        include_str!("templates/federation.md"),
        &[
            ("header", &header(r)),
            ("table", &table.markdown()),
            ("charts", &charts_markdown(&federation_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The federation charts.
const FEDERATION_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "federation-msgs.svg",
        title: "source → sink msg/s, flat out",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: false,
    },
    MetricChart {
        file: "federation-p99.svg",
        title: "one-way latency p99 (paced)",
        label: "µs",
        metric: Metric::P99Us,
        log: false,
    },
];

/// msg/s and paced p99 per payload, one bar per path.
pub fn federation_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &FEDERATION_CHARTS)
}
