//! The MQTT report: msg/s and paced p50/p99 per broker × payload × QoS, and y3's ratios
//! to each peer in every cell (issue 31's targets: msg/s ≥ 1.5× each, p99 ≤ each).

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, RatioTarget, Target};
use crate::table::{Align, Table};

/// The MQTT report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "mqtt",
    name: "net-mqtt",
    markdown: mqtt_markdown,
    charts: mqtt_charts,
    targets: mqtt_targets,
    summary,
    print_tables: true,
};

/// Issue 31's targets, in every cell (payload × QoS): y3's msg/s at least 1.5× each
/// peer's, its paced p99 no worse than each peer's.
const TARGETS: [RatioTarget; 6] = [
    RatioTarget {
        name: "msg/s y3 / mosquitto, every cell",
        column: "",
        y3: "y3",
        base: "mosquitto",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.5),
    },
    RatioTarget {
        name: "msg/s y3 / nats-mqtt, every cell",
        column: "",
        y3: "y3",
        base: "nats-mqtt",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.5),
    },
    RatioTarget {
        name: "paced p99 y3 / mosquitto, every cell",
        column: "",
        y3: "y3",
        base: "mosquitto",
        ratio: |y, p| Some(y.get(Metric::P99Us)? / p.get(Metric::P99Us)?),
        bound: at_most(1.0),
    },
    RatioTarget {
        name: "paced p99 y3 / nats-mqtt, every cell",
        column: "",
        y3: "y3",
        base: "nats-mqtt",
        ratio: |y, p| Some(y.get(Metric::P99Us)? / p.get(Metric::P99Us)?),
        bound: at_most(1.0),
    },
    // End to end, sensor → YoMo function → MQTT subscriber: y3 at least 3× better in p50.
    RatioTarget {
        name: "e2e paced p50 y3 / mosquitto+bridge+yomo, every cell",
        column: "",
        y3: "y3",
        base: crate::net::mqtt::E2E_BASELINE,
        ratio: |y, p| Some(y.get(Metric::P50Us)? / p.get(Metric::P50Us)?),
        bound: at_most(1.0 / 3.0),
    },
    RatioTarget {
        name: "e2e msg/s y3 / mosquitto+bridge+yomo, every cell",
        column: "",
        y3: "y3",
        base: crate::net::mqtt::E2E_BASELINE,
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.0),
    },
];

/// `t`'s ratio in every cell y3's row measured.
fn mqtt_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    r.records
        .iter()
        .filter(|x| x.implementation == t.y3)
        .filter_map(|y| {
            let v = t.in_cell(Some(y), r.find(&y.case, t.base, 0))?;
            Some((v, y.case.clone()))
        })
        .collect()
}

/// The MQTT targets, checked.
pub fn mqtt_targets(r: &Results) -> Vec<Target> {
    TARGETS.iter().map(|t| t.check(mqtt_cells(r, t))).collect()
}

/// The MQTT charts.
const MQTT_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "mqtt-msgs.svg",
        title: "MQTT publish → subscribe msg/s",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: true,
    },
    MetricChart {
        file: "mqtt-p99.svg",
        title: "MQTT one-way latency p99 (paced)",
        label: "µs",
        metric: Metric::P99Us,
        log: true,
    },
];

/// msg/s and p99 per cell, one bar per broker.
pub fn mqtt_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &MQTT_CHARTS)
}

/// The MQTT report.
pub fn mqtt_markdown(r: &Results) -> String {
    let mut table = Table::new([
        ("broker", Align::Left),
        ("case", Align::Left),
        ("msg/s", Align::Right),
        ("paced p50 / p99", Align::Left),
    ]);
    for x in &r.records {
        table.row(
            &x.implementation,
            vec![
                x.implementation.clone().into(),
                x.case.clone().into(),
                fig(x.value(Metric::MsgPerS), |v| format!("{v:.0}")),
                format!(
                    "{} / {}",
                    us(x.get(Metric::P50Us)),
                    us(x.get(Metric::P99Us))
                )
                .into(),
            ],
        );
    }
    let mut ratios = String::from("y3 against each peer, per cell:\n\n");
    for case in r.cases() {
        let Some(y3) = r.find(&case, "y3", 0) else {
            continue;
        };
        for peer in ["mosquitto", "nats-mqtt", crate::net::mqtt::E2E_BASELINE] {
            let Some(p) = r.find(&case, peer, 0) else {
                continue;
            };
            let rate = y3.value(Metric::MsgPerS) / p.value(Metric::MsgPerS);
            let p50 = y3.value(Metric::P50Us) / p.value(Metric::P50Us);
            let p99 = y3.value(Metric::P99Us) / p.value(Metric::P99Us);
            let (met, goal) = if peer == crate::net::mqtt::E2E_BASELINE {
                (p50 <= 1.0 / 3.0, "p50 ≤ 0.33×")
            } else {
                (rate >= 1.5 && p99 <= 1.0, "msg/s ≥ 1.5×, p99 ≤ 1×")
            };
            let _ = writeln!(
                ratios,
                "- {case} vs {peer}: msg/s {rate:.2}×, p50 {p50:.2}×, p99 {p99:.2}× (target {goal}) — {}",
                if met { "met" } else { "missed" }
            );
        }
    }
    let first = r.records.first();
    fill(
        include_str!("templates/mqtt.md"),
        &[
            ("header", &header(r)),
            (
                "paced",
                &first.map_or(0, |x| x.count(Dim::Paced)).to_string(),
            ),
            ("rate", &first.map_or(0, |x| x.count(Dim::Rate)).to_string()),
            ("table", &table.markdown()),
            ("ratios", &ratios),
            ("targets", &targets(&mqtt_targets(r))),
            ("charts", &charts_markdown(&mqtt_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}
