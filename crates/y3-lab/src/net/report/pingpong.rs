//! The ping-pong report: total time per sessions × threads, y3 / peer ratios.

use super::*;
use crate::charts::BarChart;
use crate::record::{Metric, Record, Results};
use crate::report::{fill, ratio, Target};
use crate::table::{Align, Cell, Table};

/// The pingpong report, registered in [`crate::net::suites::SUITES`].
pub(crate) const REPORT: SuiteReport = SuiteReport {
    suite: "pingpong",
    name: "net-pingpong",
    markdown: pingpong_markdown,
    charts: pingpong_charts,
    targets: pingpong_targets,
    summary,
    print_tables: true,
};

/// The ping-pong targets: y3's time no longer than each peer's, in every cell.
const TARGETS: [RatioTarget; 2] = [
    RatioTarget {
        name: "ping-pong time y3-transport / asio, every cell",
        column: "",
        y3: "y3-transport",
        base: "asio",
        ratio: |y, p| Some(y.value(Metric::Seconds) / p.value(Metric::Seconds)),
        bound: at_most(1.0),
    },
    RatioTarget {
        name: "ping-pong time y3-transport / tokio, every cell",
        column: "",
        y3: "y3-transport",
        base: "tokio",
        ratio: |y, p| Some(y.value(Metric::Seconds) / p.value(Metric::Seconds)),
        bound: at_most(1.0),
    },
];

/// `y3 time / peer time` per (session count, threads) cell.
fn pingpong_cells(r: &Results, t: &RatioTarget) -> Vec<(f64, String)> {
    let mut cells = Vec::new();
    for case in r.cases() {
        for th in r.threads() {
            if let (Some(y), Some(p)) = (r.find(&case, t.y3, th), r.find(&case, t.base, th)) {
                if let Some(v) = (t.ratio)(y, p) {
                    cells.push((v, format!("{case}, {th} thr")));
                }
            }
        }
    }
    cells
}

/// The ping-pong targets, checked.
pub fn pingpong_targets(r: &Results) -> Vec<Target> {
    TARGETS
        .iter()
        .map(|t| t.check(pingpong_cells(r, t)))
        .collect()
}

/// The ping-pong report.
pub fn pingpong_markdown(r: &Results) -> String {
    let impls = r.impls();
    let peers: Vec<&String> = impls.iter().filter(|i| *i != "y3-transport").collect();
    let mut t = Table::new(
        [
            ("sessions".to_string(), Align::Right),
            ("threads".into(), Align::Right),
        ]
        .into_iter()
        .chain(impls.iter().map(|i| (format!("`{i}` s"), Align::Right)))
        .chain(peers.iter().map(|p| (format!("y3 / {p}"), Align::Right))),
    );
    for case in r.cases() {
        for th in r.threads() {
            let row: Vec<Option<&Record>> = impls.iter().map(|i| r.find(&case, i, th)).collect();
            if row.iter().all(Option::is_none) {
                continue;
            }
            let sessions = case.split(' ').next().unwrap_or("");
            let mut cells = vec![Cell::from(sessions), th.to_string().into()];
            cells.extend(
                row.iter()
                    .map(|x| Cell::maybe(x.map(|x| x.value(Metric::Seconds)), secs)),
            );
            let y = r.find(&case, "y3-transport", th);
            cells.extend(peers.iter().map(|p| {
                let v = y
                    .zip(r.find(&case, p, th))
                    .map(|(y, p)| y.value(Metric::Seconds) / p.value(Metric::Seconds));
                Cell::maybe(v, ratio)
            }));
            t.row(&format!("{case}, {th}"), cells);
        }
    }
    fill(
        include_str!("templates/pingpong.md"),
        &[
            ("header", &header(r)),
            ("table", &t.markdown()),
            ("targets", &targets(&pingpong_targets(r))),
            ("charts", &charts_markdown(&pingpong_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// One chart per session count: total time per thread count, one bar per implementation.
pub fn pingpong_charts(r: &Results) -> Vec<(String, BarChart)> {
    let threads = r.threads();
    r.cases()
        .into_iter()
        .map(|case| {
            let series = r
                .impls()
                .into_iter()
                .map(|i| {
                    let v = threads
                        .iter()
                        .map(|&t| r.find(&case, &i, t).map(|x| x.value(Metric::Seconds)))
                        .collect();
                    (i, v)
                })
                .collect();
            let slug = case.split(' ').next().unwrap_or("x").to_string();
            (
                format!("pingpong-{slug}.svg"),
                BarChart {
                    title: format!("ping-pong, {case}: total time (lower is better)"),
                    y_label: "seconds".into(),
                    groups: threads.iter().map(|t| format!("{t} threads")).collect(),
                    series,
                    log: false,
                },
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Echo
