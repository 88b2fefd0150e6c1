//! The pipeline report: source → router → function → sink in one process, msg/s and
//! latency per transport × payload.

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};

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
    let mut table = String::from(
        "| transport | payload | messages | msg/s | MiB/s | loaded p50 / p99 | paced p50 / p99 / max |\n\
         | --- | --: | --: | --: | --: | --- | --- |\n",
    );
    for x in &r.records {
        let rate = x.value(Metric::MsgPerS);
        let _ = writeln!(
            table,
            "| {} | {} B | {} | {:.0} | {:.1} | {} / {} | {} / {} / {} |",
            x.text(Dim::Transport),
            x.count(Dim::Payload),
            x.value(Metric::Messages),
            rate,
            rate * x.count(Dim::Payload) as f64 / (1 << 20) as f64,
            us(x.get(Metric::LoadedP50Us)),
            us(x.get(Metric::LoadedP99Us)),
            us(x.get(Metric::P50Us)),
            us(x.get(Metric::P99Us)),
            us(x.get(Metric::MaxUs)),
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
            ("table", &table),
            ("charts", &charts_markdown(&pipeline_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s and paced p99 per payload, one bar per transport.
pub fn pipeline_charts(r: &Results) -> Vec<(String, BarChart)> {
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
        log: true,
    };
    vec![
        (
            "pipeline-msgs.svg".into(),
            chart("source → function → sink msg/s", "msg/s", Metric::MsgPerS),
        ),
        (
            "pipeline-p99.svg".into(),
            chart("one-way latency p99 (paced)", "µs", Metric::P99Us),
        ),
    ]
}
