//! The federation report: source and sink on two routers (y3 federated through NATS,
//! YoMo's mesh) next to one router.

use super::*;
use crate::charts::BarChart;
use crate::net::federation::NATS_HOP;
use crate::record::{Metric, Results};
use crate::report::{fill, ratio, Bound, Target};
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

/// Issue 28's federation target: the federation adds nothing beyond the NATS hop itself.
/// In every case, the federated p50 within `bound` × (the single router's p50 + the NATS
/// hop's p50), all three rows from the same run.
pub(crate) struct HopTarget {
    /// What is required, in words.
    pub name: &'static str,
    /// The ratio's column.
    pub column: &'static str,
    /// Source and sink on two routers through NATS.
    pub federated: &'static str,
    /// Source and sink on one router.
    pub single: &'static str,
    /// A publisher and a subscriber of the same nats-server, no router.
    pub hop: &'static str,
    /// Where the worst case must stay.
    pub bound: Bound,
}

impl HopTarget {
    /// `(single p50, hop p50, federated p50)` in `case`, where all three rows ran.
    fn p50s(&self, r: &Results, case: &str) -> Option<(f64, f64, f64)> {
        let p50 = |row: &str| r.find(case, row, 0)?.get(Metric::P50Us);
        Some((p50(self.single)?, p50(self.hop)?, p50(self.federated)?))
    }

    /// federated p50 ÷ (single p50 + hop p50) in `case`.
    fn in_case(&self, r: &Results, case: &str) -> Option<f64> {
        let (single, hop, federated) = self.p50s(r, case)?;
        Some(federated / (single + hop))
    }

    /// The target checked over every case where all three rows ran.
    fn check(&self, r: &Results) -> Target {
        let cells = r
            .cases()
            .into_iter()
            .filter_map(|case| Some((self.in_case(r, &case)?, case)))
            .collect();
        self.bound.check(self.name, cells)
    }
}

/// Issue 28's p50 target (it replaced issue 15's "federated p50 ≤ 2× single", which was
/// below this machine's floor: a NATS pass costs about as much as a y3 pass).
pub(crate) const HOP_TARGET: HopTarget = HopTarget {
    name:
        "one-way p50 through two routers and NATS / (one router + the NATS hop alone), every size",
    column: "p50, y3-federated ÷ (y3-single + nats-hop)",
    federated: "y3-federated",
    single: "y3-single",
    hop: NATS_HOP,
    bound: at_most(1.1),
};

/// The other federation target (issue 15), the worst ratio over the payload sizes.
pub(crate) const TARGETS: [RatioTarget; 1] = [RatioTarget {
    name: "msg/s across two routers, y3 through NATS / YoMo's mesh, every size",
    column: "msg/s, y3-federated ÷ yomo-mesh",
    y3: "y3-federated",
    base: "yomo-mesh",
    ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
    bound: at_least(10.0),
}];

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

/// The targets, checked: federated p50 ≤ 1.1 × (single + NATS hop), msg/s ≥ 10× YoMo's
/// mesh.
pub fn federation_targets(r: &Results) -> Vec<Target> {
    std::iter::once(HOP_TARGET.check(r))
        .chain(TARGETS.iter().map(|t| t.check(cells(r, t))))
        .collect()
}

/// The three p50s of [`HOP_TARGET`] side by side per case, and their ratio; empty for a
/// recording without the hop row (made before issue 28).
fn p50_side_by_side(r: &Results) -> String {
    let t = &HOP_TARGET;
    if !r.impls().iter().any(|i| i == t.hop) {
        return String::new();
    }
    let mut table = Table::new([
        ("case".to_string(), Align::Left),
        (format!("`{}` p50", t.single), Align::Right),
        (format!("`{}` p50", t.hop), Align::Right),
        ("sum".to_string(), Align::Right),
        (format!("`{}` p50", t.federated), Align::Right),
        (format!("÷ sum ({})", t.bound.required()), Align::Right),
    ]);
    for case in r.cases() {
        let p50 = |row: &str| r.find(&case, row, 0).and_then(|x| x.get(Metric::P50Us));
        let (single, hop) = (p50(t.single), p50(t.hop));
        let sum = single.zip(hop).map(|(a, b)| a + b);
        table.row(
            &case,
            vec![
                case.as_str().into(),
                Cell::maybe(single, |v| us(Some(v))),
                Cell::maybe(hop, |v| us(Some(v))),
                Cell::maybe(sum, |v| us(Some(v))),
                Cell::maybe(p50(t.federated), |v| us(Some(v))),
                Cell::maybe(t.in_case(r, &case), ratio),
            ],
        );
    }
    format!(
        "## p50: one router, the NATS hop alone, two routers through NATS\n\n\
         Issue 28's target: the federation adds nothing beyond the NATS hop itself, \
         `{}` p50 ÷ (`{}` p50 + `{}` p50) {}, the three rows from this run.\n\n{}\n",
        t.federated,
        t.single,
        t.hop,
        t.bound.required(),
        table.markdown()
    )
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
    let mut ratios = Table::new(
        [
            ("case".to_string(), Align::Left),
            (
                format!("{} ({})", HOP_TARGET.column, HOP_TARGET.bound.required()),
                Align::Right,
            ),
        ]
        .into_iter()
        .chain(TARGETS.iter().map(|t| {
            (
                format!("{} ({})", t.column, t.bound.required()),
                Align::Right,
            )
        })),
    );
    for case in r.cases() {
        let mut row = vec![
            Cell::from(case.as_str()),
            Cell::maybe(HOP_TARGET.in_case(r, &case), ratio),
        ];
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
            ("p50s", &p50_side_by_side(r)),
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

    fn federation_meta() -> Meta {
        Meta {
            suite: "federation".into(),
            ..Meta::default()
        }
    }

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
            meta: federation_meta(),
            records: vec![
                rec("y3-single", "64 B", 500_000.0, 60.0),
                rec("y3-federated", "64 B", 200_000.0, 110.0),
                rec("nats-hop", "64 B", 700_000.0, 50.0),
                rec("yomo-mesh", "64 B", 15_000.0, 900.0),
                rec("y3-single", "1024 B", 300_000.0, 70.0),
                rec("y3-federated", "1024 B", 100_000.0, 150.0),
                rec("nats-hop", "1024 B", 400_000.0, 60.0),
                rec("yomo-mesh", "1024 B", 12_000.0, 950.0),
            ],
            notes: vec!["a note".into()],
            ..Results::default()
        };
        let t = federation_targets(&r);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].met, Some(false), "150 / (70 + 60) µs at 1 KiB");
        assert!(t[0].measured.starts_with("1.2×"), "{}", t[0].measured);
        assert!(t[0].shortfall.contains("1024 B"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(false), "100k / 12k = 8.3×");
        let (md, charts, _) = render(&r);
        assert!(
            md.contains("| 64 B | `y3-federated` | 200k | 110 µs / 330 µs / 550 µs | 2.0 |"),
            "{md}"
        );
        // The three p50s side by side, their sum and the ratio.
        assert!(
            md.contains("| 1024 B | 70 µs | 60 µs | 130 µs | 150 µs | 1.2× |"),
            "{md}"
        );
        assert!(md.contains("| 64 B | 1.0× | 13× |"), "{md}");
        assert!(md.contains("- a note"), "{md}");
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].1.groups, ["64 B", "1024 B"]);
        let missing = Results {
            records: r.records[..2].to_vec(),
            ..r.clone()
        };
        assert_eq!(federation_targets(&missing)[1].met, None, "no YoMo row");
    }

    /// A recording made before the hop row: no hop row, no side-by-side section, the p50
    /// target not measured (rather than a ratio against a missing row).
    #[test]
    fn a_recording_without_the_hop_row() {
        let r = Results {
            meta: federation_meta(),
            records: vec![
                rec("y3-single", "64 B", 500_000.0, 60.0),
                rec("y3-federated", "64 B", 200_000.0, 110.0),
            ],
            ..Results::default()
        };
        let t = federation_targets(&r);
        assert_eq!(t[0].met, None);
        assert_eq!(t[0].measured, "not measured");
        let (md, _, _) = render(&r);
        assert!(!md.contains("`nats-hop` p50"), "{md}");
        assert!(md.contains("|\n\n## Ratios"), "{md}");
        assert!(md.contains("| 64 B | – | – |"), "{md}");
    }
}
