//! The federation report: source and sink on two routers (y3 federated through NATS,
//! YoMo's mesh) next to one router.

use super::*;
use crate::charts::BarChart;
use crate::record::{Metric, Results};
use crate::report::{fill, ratio, Target};
use crate::table::{Align, Cell, Table};

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

/// The federation targets (issue 15), each the worst ratio over the payload sizes.
pub(crate) const TARGETS: [RatioTarget; 2] = [
    RatioTarget {
        name:
            "one-way p50, source and sink on two routers through NATS / on one router, every size",
        column: "p50, y3-federated ÷ y3-single",
        y3: "y3-federated",
        base: "y3-single",
        ratio: |y, p| Some(y.get(Metric::P50Us)? / p.get(Metric::P50Us)?),
        bound: at_most(2.0),
    },
    RatioTarget {
        name: "msg/s across two routers, y3 through NATS / YoMo's mesh, every size",
        column: "msg/s, y3-federated ÷ yomo-mesh",
        y3: "y3-federated",
        base: "yomo-mesh",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(10.0),
    },
];

/// Each target's ratio per case where both rows ran.
fn cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    r.cases()
        .into_iter()
        .filter_map(|case| {
            let v = t.in_cell(r.find(&case, t.y3, 0), r.find(&case, t.base, 0))?;
            Some((v, case))
        })
        .collect()
}

/// The targets, checked: cross-router p50 ≤ 2× one router's, msg/s ≥ 10× YoMo's mesh.
pub fn federation_targets(r: &Results) -> Vec<Target> {
    TARGETS.iter().map(|t| t.check(cells(r, t))).collect()
}

/// The federation report.
pub fn federation_markdown(r: &Results) -> String {
    let mut table = Table::new([
        ("case", Align::Left),
        ("row", Align::Left),
        ("msg/s (flat out)", Align::Right),
        ("p50 / p99 / p999 (paced)", Align::Right),
        ("CPU µs/msg", Align::Right),
    ]);
    for case in r.cases() {
        for i in r.impls() {
            if let Some(x) = r.find(&case, &i, 0) {
                table.row(
                    &i,
                    vec![
                        case.as_str().into(),
                        format!("`{i}`").into(),
                        fig(x.value(Metric::MsgPerS), rate),
                        percentiles(x),
                        Cell::maybe(x.get(Metric::CpuUsPerFrame), |c| format!("{c:.1}")),
                    ],
                );
            }
        }
    }
    let mut ratios = Table::new(std::iter::once(("case".to_string(), Align::Left)).chain(
        TARGETS.iter().map(|t| {
            (
                format!("{} ({})", t.column, t.bound.required()),
                Align::Right,
            )
        }),
    ));
    for case in r.cases() {
        let mut row = vec![Cell::from(case.as_str())];
        row.extend(TARGETS.iter().map(|t| {
            Cell::maybe(
                t.in_cell(r.find(&case, t.y3, 0), r.find(&case, t.base, 0)),
                ratio,
            )
        }));
        ratios.row(&case, row);
    }
    fill(
        include_str!("templates/federation.md"),
        &[
            ("header", &header(r)),
            ("table", &table.markdown()),
            ("ratios", &ratios.markdown()),
            ("targets", &targets(&federation_targets(r))),
            ("charts", &charts_markdown(&federation_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The federation charts.
const FEDERATION_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "federation-msgs.svg",
        title: "msg/s at the sink (flat out)",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: true,
    },
    MetricChart {
        file: "federation-p50.svg",
        title: "one-way latency p50 (paced)",
        label: "µs",
        metric: Metric::P50Us,
        log: true,
    },
];

/// msg/s and p50 per size, one bar per row.
pub fn federation_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &FEDERATION_CHARTS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Meta, Record};

    fn rec(imp: &str, case: &str, rate: f64, p50: f64) -> Record {
        Record::new("federation", imp, case)
            .metric(Metric::MsgPerS, rate)
            .metric(Metric::P50Us, p50)
            .metric(Metric::P99Us, p50 * 3.0)
            .metric(Metric::P999Us, p50 * 5.0)
            .metric(Metric::CpuUsPerFrame, 2.0)
            .with_runs(3)
    }

    #[test]
    fn targets_and_report() {
        let r = Results {
            meta: Meta {
                suite: "federation".into(),
                ..Meta::default()
            },
            records: vec![
                rec("y3-single", "64 B", 500_000.0, 60.0),
                rec("y3-federated", "64 B", 200_000.0, 110.0),
                rec("yomo-mesh", "64 B", 15_000.0, 900.0),
                rec("y3-single", "1024 B", 300_000.0, 70.0),
                rec("y3-federated", "1024 B", 100_000.0, 150.0),
                rec("yomo-mesh", "1024 B", 12_000.0, 950.0),
            ],
            notes: vec!["a note".into()],
            ..Results::default()
        };
        let t = federation_targets(&r);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].met, Some(false), "150 / 70 µs at 1 KiB");
        assert!(t[0].shortfall.contains("1024 B"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(false), "100k / 12k = 8.3×");
        let (md, charts, _) = render(&r);
        assert!(
            md.contains("| 64 B | `y3-federated` | 200k | 110 µs / 330 µs / 550 µs | 2.0 |"),
            "{md}"
        );
        assert!(md.contains("| 64 B | 1.8× | 13× |"), "{md}");
        assert!(md.contains("- a note"), "{md}");
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].1.groups, ["64 B", "1024 B"]);
        let missing = Results {
            records: r.records[..2].to_vec(),
            ..r.clone()
        };
        assert_eq!(federation_targets(&missing)[1].met, None, "no YoMo row");
    }
}
