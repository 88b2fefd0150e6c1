//! The MQTT report: msg/s and paced p50/p99 per broker × payload × QoS, and y3's ratios
//! to each peer in every cell (issue 31's targets: msg/s ≥ 1.5× each, p99 ≤ each).

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};
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

/// The targets are reported as ratios in the Markdown (every cell); none here.
pub fn mqtt_targets(_: &Results) -> Vec<Target> {
    Vec::new()
}

/// No charts yet.
pub fn mqtt_charts(_: &Results) -> Vec<(String, BarChart)> {
    Vec::new()
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
    let mut ratios =
        String::from("y3 against each peer, per cell (target: msg/s ≥ 1.5×, p99 ≤ 1×):\n\n");
    for case in r.cases() {
        let Some(y3) = r.find(&case, "y3", 0) else {
            continue;
        };
        for peer in ["mosquitto", "nats-mqtt"] {
            let Some(p) = r.find(&case, peer, 0) else {
                continue;
            };
            let rate = y3.value(Metric::MsgPerS) / p.value(Metric::MsgPerS);
            let p99 = y3.value(Metric::P99Us) / p.value(Metric::P99Us);
            let met = rate >= 1.5 && p99 <= 1.0;
            let _ = writeln!(
                ratios,
                "- {case} vs {peer}: msg/s {rate:.2}×, p99 {p99:.2}× — {}",
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
            ("notes", &notes(r)),
        ],
    )
}
