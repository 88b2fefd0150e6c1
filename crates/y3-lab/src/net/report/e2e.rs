//! The router end-to-end report: msg/s and latency per payload × subscribers.

use super::*;
use crate::charts::BarChart;
use crate::record::{Dim, Level, Metric, Record, Results};
use crate::report::{fill, Target};
use crate::table::Align;

/// The e2e report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "e2e",
    name: "net-e2e",
    markdown: e2e_markdown,
    charts: e2e_charts,
    targets: e2e_targets,
    summary,
    print_tables: true,
};

/// E2e targets (issue 28): over TCP, y3's router msg/s ≥ 1.5× NATS's and ≥ 1.3× the Zenoh
/// router's, its p50 ≤ half the Zenoh router's; over QUIC (with TLS), msg/s ≥ NATS's (plain
/// TCP) and ≥ 0.8× y3's own TCP lane.
const TARGETS: [RatioTarget; 5] = [
    RatioTarget {
        name: "router msg/s y3-router-tcp / nats, every case",
        column: "",
        y3: "y3-router-tcp",
        base: "nats",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.5),
    },
    RatioTarget {
        name: "router msg/s y3-router-tcp / zenoh-router, every case",
        column: "",
        y3: "y3-router-tcp",
        base: "zenoh-router",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.3),
    },
    RatioTarget {
        name: "router p50 y3-router-tcp / zenoh-router, every case",
        column: "",
        y3: "y3-router-tcp",
        base: "zenoh-router",
        ratio: |y, p| Some(y.get(Metric::P50Us)? / p.get(Metric::P50Us)?),
        bound: at_most(0.5),
    },
    RatioTarget {
        name: "router msg/s y3-router-quic / nats, every case",
        column: "",
        y3: "y3-router-quic",
        base: "nats",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(1.0),
    },
    RatioTarget {
        name: "router msg/s y3-router-quic / y3-router-tcp, every case",
        column: "",
        y3: "y3-router-quic",
        base: "y3-router-tcp",
        ratio: |y, p| Some(y.value(Metric::MsgPerS) / p.value(Metric::MsgPerS)),
        bound: at_least(0.8),
    },
];

/// `t`'s ratio in every case (payload × subscribers) y3's row measured.
fn e2e_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    let mut cells = Vec::new();
    for y in r.records.iter().filter(|x| x.implementation == t.y3) {
        if let Some(p) = r.find(&y.case, t.base, 0) {
            if let Some(v) = (t.ratio)(y, p) {
                cells.push((v, y.case.clone()));
            }
        }
    }
    cells
}

/// The e2e targets, checked.
pub fn e2e_targets(r: &Results) -> Vec<Target> {
    TARGETS.iter().map(|t| t.check(e2e_cells(r, t))).collect()
}

/// What the report says of the brokers: a recording with CPU per message (`y3 serve` as it
/// ships, in a process of its own) gets the CPU column and its explanation; an older one
/// (the lab's embedded router, no CPU figures) renders as it did.
const BROKERS_WITH_CPU: &str = "Brokers (`y3 serve` as it ships, `nats-server`, the Zenoh \
    router) run as separate processes started and stopped by the lab; the clients share one \
    process. CPU: the broker's and the clients' CPU time per message over the flat-out run \
    (µs); the clients share the cores with the broker, so a cell whose clients took more is \
    marked client-bound: its msg/s measures the clients as much as the broker.";
const BROKERS: &str = "Brokers (y3 router, `nats-server`, the Zenoh router) run as separate \
    processes started and stopped by the lab; the clients share one process.";

/// The e2e report.
pub fn e2e_markdown(r: &Results) -> String {
    let with_cpu = r
        .records
        .iter()
        .any(|x| x.get(Metric::RouterNsPerMsg).is_some());
    let mut columns = vec!["msg/s", "p50 / p99"];
    if with_cpu {
        columns.push("CPU µs/msg broker / clients");
    }
    let table = per_impl_table(
        r,
        ("case", Align::Left),
        &case_rows(r),
        &columns,
        |case, i| r.find(case, i, 0),
        |x| {
            let mut cells = vec![
                fig(x.value(Metric::MsgPerS), rate),
                format!(
                    "{} / {}",
                    us(x.get(Metric::P50Us)),
                    us(x.get(Metric::P99Us))
                )
                .into(),
            ];
            if with_cpu {
                cells.push(cpu_cell(x).into());
            }
            cells
        },
    );
    fill(
        include_str!("templates/e2e.md"),
        &[
            ("header", &header(r)),
            ("brokers", if with_cpu { BROKERS_WITH_CPU } else { BROKERS }),
            ("table", &table.markdown()),
            ("targets", &targets(&e2e_targets(r))),
            ("charts", &charts_markdown(&e2e_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// `broker / clients` CPU per message in µs, `client-bound` appended where the clients took
/// more ([`Dim::Bound`]); `–` for what was not measured.
fn cpu_cell(x: &Record) -> String {
    let f = |m: Metric| {
        x.get(m)
            .map_or("–".to_string(), |ns| format!("{:.2}", ns / 1e3))
    };
    let mut cell = format!(
        "{} / {}",
        f(Metric::RouterNsPerMsg),
        f(Metric::ClientsNsPerMsg)
    );
    if x.dims.get(&Dim::Bound) == Some(&Level::Name("clients".into())) {
        cell.push_str(" client-bound");
    }
    cell
}

/// The e2e charts.
const E2E_CHARTS: [MetricChart; 2] = [
    MetricChart {
        file: "e2e-msgs.svg",
        title: "publish → subscribe msg/s",
        label: "msg/s",
        metric: Metric::MsgPerS,
        log: true,
    },
    MetricChart {
        file: "e2e-p50.svg",
        title: "one-way latency p50 (paced)",
        label: "µs",
        metric: Metric::P50Us,
        log: true,
    },
];

/// msg/s and p50 per case, one bar per implementation.
pub fn e2e_charts(r: &Results) -> Vec<(String, BarChart)> {
    metric_charts(r, &E2E_CHARTS)
}

// ---------------------------------------------------------------------------------------
// YoMo's zipper and clients against y3
