//! The YoMo report: msg/s, router CPU per frame and paced latency per workload.

use super::*;
use crate::charts::BarChart;
use crate::record::{Metric, Results};
use crate::report::{fill, ratio, RowTarget, Target};
use crate::table::{Align, Cell, Table};

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
            let v = t.in_cell(r.find(&case, t.y3, 0), r.find(&case, t.base, 0))?;
            Some((v, case))
        })
        .collect()
}

/// The yomo ratio targets (issue 28): YoMo's own clients on `y3 serve` against YoMo's
/// zipper, `ratio(y3 row, baseline row)` in every case within `bound`.
const YOMO_TARGETS: [RatioTarget; 3] = [
    RatioTarget {
        name: "router CPU per routed frame, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "router CPU/frame, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.get(Metric::CpuUsPerFrame)? / p.get(Metric::CpuUsPerFrame)?),
        bound: at_most(0.15),
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
        name: "p99 at the paced rate, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "paced p99, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.get(Metric::P99Us)? / p.get(Metric::P99Us)?),
        bound: at_most(0.5),
    },
];

/// The yomo absolute target (issue 28): y3's own clients over QUIC, paced p99 at most 2 ms
/// in every case.
const QUIC_P99: RowTarget = RowTarget {
    name: "p99 at the paced rate, y3's clients over QUIC, every case",
    column: "paced p99, y3-quic",
    row: "y3-quic",
    value: |x| x.get(Metric::P99Us),
    bound: at_most(2000.0).micros(),
};

/// YoMo targets (issue 28): `y3 serve` against YoMo's zipper with YoMo's clients (router CPU
/// per routed frame ≤ 0.15×, msg/s ≥ 2×, paced p99 ≤ 0.5×), then y3's clients over QUIC
/// (paced p99 ≤ 2 ms), every case. A case without the rows a target needs (a run failed
/// every time) is left out of the worst and counted in the measured figure.
pub fn yomo_targets(r: &Results) -> Vec<Target> {
    let cases = r.cases();
    let quic: Vec<(f64, String)> = cases
        .iter()
        .filter_map(|case| {
            Some((
                QUIC_P99.in_cell(r.find(case, QUIC_P99.row, 0))?,
                case.clone(),
            ))
        })
        .collect();
    YOMO_TARGETS
        .iter()
        .map(|t| {
            let cells = yomo_cells(r, t);
            (cells.len(), t.check(cells))
        })
        .chain(std::iter::once((quic.len(), QUIC_P99.check(quic))))
        .map(|(measured, mut target)| {
            if measured > 0 && measured < cases.len() {
                target.measured =
                    format!("{}; {measured} of {} cases", target.measured, cases.len());
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
    let rows = case_rows(r);
    let find = |case: &str, i: &str| r.find(case, i, 0);
    let throughput = per_impl_table(
        r,
        ("case", Align::Left),
        &rows,
        &["msg/s", "CPU µs/frame"],
        find,
        |x| {
            vec![
                fig(x.value(Metric::MsgPerS), rate),
                cpu_us(x.get(Metric::CpuUsPerFrame)).into(),
            ]
        },
    );
    let latency = per_impl_table(
        r,
        ("case", Align::Left),
        &rows,
        &["p50 / p99 / p999"],
        find,
        |x| vec![percentiles(x)],
    );
    let figures = YOMO_TARGETS
        .iter()
        .map(|t| (t.column, t.bound))
        .chain(std::iter::once((QUIC_P99.column, QUIC_P99.bound)))
        .map(|(column, bound)| (format!("{column} ({})", bound.required()), Align::Right));
    let mut ratios = Table::new(std::iter::once(("case".to_string(), Align::Left)).chain(figures));
    for (case, _) in &rows {
        let mut cells = vec![Cell::from(case.as_str())];
        cells.extend(
            YOMO_TARGETS
                .iter()
                .map(|t| Cell::maybe(t.in_cell(find(case, t.y3), find(case, t.base)), ratio)),
        );
        cells.push(Cell::maybe(
            QUIC_P99.in_cell(find(case, QUIC_P99.row)),
            |v| QUIC_P99.bound.unit.show(v),
        ));
        ratios.row(case, cells);
    }
    fill(
        include_str!("templates/yomo.md"),
        &[
            ("header", &header(r)),
            ("throughput", &throughput.markdown()),
            ("latency", &latency.markdown()),
            ("ratios", &ratios.markdown()),
            ("targets", &targets(&yomo_targets(r))),
            ("spread", &spread_table(r)),
            ("charts", &charts_markdown(&yomo_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s medians with the lowest and highest run beside them.
fn spread_table(r: &Results) -> String {
    if r.records.iter().all(|x| x.runs < 2) {
        return String::new();
    }
    let mut t = Table::new([
        ("case", Align::Left),
        ("row", Align::Left),
        ("runs", Align::Right),
        ("msg/s median (lowest–highest)", Align::Right),
    ]);
    for x in &r.records {
        let (low, high) = x.spread();
        t.row(
            &x.implementation,
            vec![
                x.case.as_str().into(),
                format!("`{}`", x.implementation).into(),
                x.runs.to_string().into(),
                format!(
                    "{} ({}–{})",
                    rate(x.value(Metric::MsgPerS)),
                    rate(low),
                    rate(high)
                )
                .into(),
            ],
        );
    }
    format!("## Run-to-run spread\n\n{}\n", t.markdown())
}

/// The yomo charts.
const YOMO_CHARTS: [MetricChart; 3] = [
    MetricChart {
        file: "yomo-msgs.svg",
        title: "msg/s at the sink (flat out)",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: true,
    },
    MetricChart {
        file: "yomo-cpu.svg",
        title: "router CPU per routed frame (lower is better)",
        label: "µs",
        metric: Metric::CpuUsPerFrame,
        log: true,
    },
    MetricChart {
        file: "yomo-p99.svg",
        title: "one-way latency p99 (paced)",
        label: "µs",
        metric: Metric::P99Us,
        log: true,
    },
];

/// msg/s, router CPU per frame and p99 per case, one bar per row.
pub fn yomo_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &YOMO_CHARTS)
}
