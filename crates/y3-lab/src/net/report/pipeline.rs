//! The pipeline report: source → router → function → sink in one process, msg/s and
//! latency per transport × payload.

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};
use crate::table::{Align, Table};

/// The pipeline report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "pipeline",
    name: "net-pipeline",
    markdown: pipeline_markdown,
    charts: pipeline_charts,
    targets: pipeline_targets,
    summary,
    print_tables: true,
};

/// The pipeline has no targets: it is y3 against itself over each transport.
pub fn pipeline_targets(_: &Results) -> Vec<Target> {
    Vec::new()
}

/// The pipeline report.
pub fn pipeline_markdown(r: &Results) -> String {
    let mut table = Table::new([
        ("transport", Align::Left),
        ("payload", Align::Right),
        ("messages", Align::Right),
        ("msg/s", Align::Right),
        ("MiB/s", Align::Right),
        ("loaded p50 / p99", Align::Left),
        ("paced p50 / p99 / max", Align::Left),
    ]);
    for x in &r.records {
        let rate = x.value(Metric::MsgPerS);
        let payload = x.count(Dim::Payload);
        table.row(
            &x.implementation,
            vec![
                x.text(Dim::Transport).into(),
                format!("{payload} B").into(),
                fig(x.value(Metric::Messages), |v| v.to_string()),
                fig(rate, |v| format!("{v:.0}")),
                fig(rate * payload as f64 / (1 << 20) as f64, |v| {
                    format!("{v:.1}")
                }),
                format!(
                    "{} / {}",
                    us(x.get(Metric::LoadedP50Us)),
                    us(x.get(Metric::LoadedP99Us))
                )
                .into(),
                latencies(x, [Metric::P50Us, Metric::P99Us, Metric::MaxUs]),
            ],
        );
    }
    fill(
        include_str!("templates/pipeline.md"),
        &[
            ("header", &header(r)),
            (
                "threads",
                &r.records
                    .first()
                    .map_or(0, |x| x.count(Dim::Threads))
                    .to_string(),
            ),
            (
                "paced",
                &r.records
                    .first()
                    .map_or(0, |x| x.count(Dim::Paced))
                    .to_string(),
            ),
            (
                "rate",
                &r.records
                    .first()
                    .map_or(0, |x| x.count(Dim::Rate))
                    .to_string(),
            ),
            ("table", &table.markdown()),
            ("charts", &charts_markdown(&pipeline_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The pipeline charts.
const PIPELINE_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "pipeline-msgs.svg",
        title: "source → function → sink msg/s",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: true,
    },
    MetricChart {
        file: "pipeline-p99.svg",
        title: "one-way latency p99 (paced)",
        label: "µs",
        metric: Metric::P99Us,
        log: true,
    },
];

/// msg/s and paced p99 per payload, one bar per transport.
pub fn pipeline_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &PIPELINE_CHARTS)
}
