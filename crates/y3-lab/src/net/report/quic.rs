//! The QUIC report: one-way frames over y3's TCP adapter and its QUIC adapter (quinn with
//! its defaults, quinn as y3 tunes it), and each QUIC row's ratio to TCP in every cell
//! (issue 28's target for the router: QUIC ≥ 0.8× TCP).

use std::fmt::Write as _;

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Metric, Results};
use crate::report::{fill, Target};
use crate::table::{Align, Table};

/// The QUIC report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "quic",
    name: "net-quic",
    markdown: quic_markdown,
    charts: quic_charts,
    targets: quic_targets,
    summary,
    print_tables: true,
};

/// The ratios are in the Markdown (every cell); no target table.
pub fn quic_targets(_: &Results) -> Vec<Target> {
    Vec::new()
}

/// No charts.
pub fn quic_charts(_: &Results) -> Vec<(String, BarChart)> {
    Vec::new()
}

/// The QUIC report.
pub fn quic_markdown(r: &Results) -> String {
    let mut table = Table::new([
        ("row", Align::Left),
        ("case", Align::Left),
        ("msg/s", Align::Right),
        ("CPU µs/frame", Align::Right),
        ("paced p50 / p99", Align::Left),
    ]);
    for x in &r.records {
        table.row(
            &x.implementation,
            vec![
                format!("`{}`", x.implementation).into(),
                x.case.clone().into(),
                fig(x.value(Metric::MsgPerS), |v| format!("{v:.0}")),
                fig(x.value(Metric::CpuUsPerFrame), |v| format!("{v:.2}")),
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
        String::from("Each QUIC row against `tcp`, per cell (msg/s; CPU per frame):\n\n");
    for case in r.cases() {
        let Some(tcp) = r.find(&case, "tcp", 0) else {
            continue;
        };
        for row in ["quinn-defaults", "quinn-y3"] {
            let Some(q) = r.find(&case, row, 0) else {
                continue;
            };
            let rate = q.value(Metric::MsgPerS) / tcp.value(Metric::MsgPerS).max(1e-9);
            let cpu = q.value(Metric::CpuUsPerFrame) / tcp.value(Metric::CpuUsPerFrame).max(1e-9);
            let _ = writeln!(ratios, "- {case}, `{row}`: msg/s {rate:.2}×, CPU {cpu:.2}×");
        }
    }
    let first = r.records.first();
    fill(
        include_str!("templates/quic.md"),
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
