//! The content-filter report: router-side filter against delivering everything and
//! filtering in the functions (y3, and NATS where it ran).

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Record, Results};
use crate::report::{fill, Target};
use crate::table::{Align, Cell, Table};

/// The filter report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "filter",
    name: "net-filter",
    markdown: filter_markdown,
    charts: filter_charts,
    targets: filter_targets,
    summary,
    print_tables: true,
};

/// The row that filters in the router.
const ROUTER: &str = "router-filter";

/// Bytes to the functions `other / router` (how many times fewer with the router's filter).
fn fewer_bytes(y: &Record, p: &Record) -> Option<f64> {
    Some(p.value(Metric::BytesToFunctions) / y.value(Metric::BytesToFunctions).max(1.0))
}

/// msg/s `router / other`.
fn faster(y: &Record, p: &Record) -> Option<f64> {
    Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS).max(1e-9))
}

/// Filter targets: against each variant that filters after delivery, ≥ 9× fewer bytes to
/// the functions and ≥ 2× the msg/s.
const TARGETS: [RatioTarget; 4] = [
    RatioTarget {
        name: "bytes to functions, function-filter / router-filter",
        column: "",
        y3: ROUTER,
        base: "function-filter",
        ratio: fewer_bytes,
        bound: at_least(9.0),
    },
    RatioTarget {
        name: "msg/s router-filter / function-filter",
        column: "",
        y3: ROUTER,
        base: "function-filter",
        ratio: faster,
        bound: at_least(2.0),
    },
    RatioTarget {
        name: "bytes to functions, nats-filter / router-filter",
        column: "",
        y3: ROUTER,
        base: "nats-filter",
        ratio: fewer_bytes,
        bound: at_least(9.0),
    },
    RatioTarget {
        name: "msg/s router-filter / nats-filter",
        column: "",
        y3: ROUTER,
        base: "nats-filter",
        ratio: faster,
        bound: at_least(2.0),
    },
];

/// `t`'s ratio in every case both rows ran.
fn filter_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    r.records
        .iter()
        .filter(|x| x.implementation == t.y3)
        .filter_map(|y| {
            let p = r.find(&y.case, t.base, 0)?;
            Some(((t.ratio)(y, p)?, y.case.clone()))
        })
        .collect()
}

/// The filter targets, checked.
pub fn filter_targets(r: &Results) -> Vec<Target> {
    TARGETS
        .iter()
        .map(|t| t.check(filter_cells(r, t)))
        .collect()
}

/// The filter report.
pub fn filter_markdown(r: &Results) -> String {
    let mut table = Table::new(
        [("case", Align::Left), ("variant", Align::Left)]
            .into_iter()
            .chain(
                [
                    "msg/s",
                    "router CPU ns/msg",
                    "bytes to functions",
                    "source CPU ns/msg",
                    "functions CPU ns/msg",
                    "p50 µs",
                    "p99 µs",
                ]
                .map(|h| (h, Align::Right)),
            ),
    );
    let whole = |v: f64| format!("{v:.0}");
    for x in &r.records {
        let mut cells = vec![
            Cell::from(x.case.as_str()),
            format!("`{}`", x.implementation).into(),
        ];
        cells.extend(
            [
                Metric::MsgPerS,
                Metric::RouterNsPerMsg,
                Metric::BytesToFunctions,
                Metric::SourceNsPerMsg,
                Metric::FunctionsNsPerMsg,
                Metric::P50Us,
                Metric::P99Us,
            ]
            .map(|m| fig(x.value(m), whole)),
        );
        table.row(&x.implementation, cells);
    }
    let mut against = Table::new(
        [("case", Align::Left), ("against", Align::Left)]
            .into_iter()
            .chain(
                [
                    "bytes to functions, × fewer",
                    "msg/s, ×",
                    "functions CPU, × less",
                    "router CPU ns/msg, difference",
                ]
                .map(|h| (h, Align::Right)),
            ),
    );
    for router in r.records.iter().filter(|x| x.implementation == ROUTER) {
        for other in r
            .records
            .iter()
            .filter(|x| x.case == router.case && x.implementation != ROUTER)
        {
            // The router's extra work shows against the same router delivering everything.
            let router_cpu = if other.implementation == "function-filter" {
                fig(
                    router.value(Metric::RouterNsPerMsg) - other.value(Metric::RouterNsPerMsg),
                    |v| format!("{v:+.0}"),
                )
            } else {
                "–".into()
            };
            let fewer = fewer_bytes(router, other).unwrap_or(f64::NAN);
            let faster = faster(router, other).unwrap_or(f64::NAN);
            let less = other.value(Metric::FunctionsNsPerMsg)
                / router.value(Metric::FunctionsNsPerMsg).max(1e-9);
            against.row(
                &other.implementation,
                vec![
                    router.case.as_str().into(),
                    format!("`{}`", other.implementation).into(),
                    fig(fewer, |v| format!("{v:.1}×")),
                    fig(faster, |v| format!("{v:.2}×")),
                    fig(less, |v| format!("{v:.1}×")),
                    router_cpu,
                ],
            );
        }
    }
    let first = r.records.first();
    fill(
        include_str!("templates/filter.md"),
        &[
            ("header", &header(r)),
            (
                "messages",
                &first.map_or(0.0, |x| x.value(Metric::Messages)).to_string(),
            ),
            (
                "functions",
                &first.map_or(0, |x| x.count(Dim::Subscribers)).to_string(),
            ),
            ("filter", &crate::net::filter::filter_of(0)),
            ("table", &table.markdown()),
            ("against", &against.markdown()),
            ("targets", &targets(&filter_targets(r))),
            ("charts", &charts_markdown(&filter_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The filter charts.
const FILTER_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "filter-msgs.svg",
        title: "source → functions msg/s",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: false,
    },
    MetricChart {
        file: "filter-fn-cpu.svg",
        title: "functions' CPU per message sent",
        label: "ns/msg",
        metric: Metric::FunctionsNsPerMsg,
        log: false,
    },
];

/// msg/s and the functions' CPU per message, one bar per variant.
pub fn filter_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &FILTER_CHARTS)
}
