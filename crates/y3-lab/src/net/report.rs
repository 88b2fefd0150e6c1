//! The network lab's Markdown reports, targets and charts, computed from [`NetResults`]
//! alone (so a `--json` file re-renders with `--from`). The files go through
//! [`crate::report::write_report`]; the charts are [`crate::charts::BarChart`]s mirroring
//! the reports' figures: total time vs threads per session count (ping-pong), QPS and p99
//! vs connections (echo), msg/s and p50 per payload × subscribers (e2e), msg/s, router CPU
//! per frame and p99 per workload × payload (yomo).

use std::fmt::Write as _;

use crate::charts::BarChart;
use crate::net::record::{NetRecord, NetResults};
use crate::report::{fill, ratio, targets_table, Bound, Target};

/// The version of `package` in the workspace's `Cargo.lock` (read at run time from the
/// current directory), or `?`.
pub fn lock_version(package: &str) -> String {
    let Ok(text) = std::fs::read_to_string("Cargo.lock") else {
        return "?".into();
    };
    let needle = format!("name = \"{package}\"\nversion = \"");
    text.find(&needle)
        .and_then(|i| {
            let rest = &text[i + needle.len()..];
            rest.find('"').map(|j| rest[..j].to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// The report's opening list: machine, command, pinning, peers.
fn header(r: &NetResults) -> String {
    let mut out = String::new();
    let m = &r.meta;
    let _ = writeln!(out, "- Machine: {}", m.machine);
    let _ = writeln!(
        out,
        "- Command: `{}`{}",
        m.command,
        if m.quick { " (quick)" } else { "" }
    );
    let _ = writeln!(out, "- Pinning: {}", m.pinning);
    if !m.versions.is_empty() {
        let v: Vec<String> = m.versions.iter().map(|(p, v)| format!("{p} {v}")).collect();
        let _ = writeln!(out, "- Peers: {}", v.join("; "));
    }
    out.push('\n');
    out
}

/// The targets table.
fn targets(targets: &[Target]) -> String {
    let mut out = String::new();
    targets_table(&mut out, targets, ABSENT);
    out
}

/// The charts, as Markdown images under their file names.
fn charts_markdown(charts: &[(String, BarChart)]) -> String {
    let mut out = String::new();
    for (file, chart) in charts {
        let _ = writeln!(out, "![{}]({file})\n", chart.title);
    }
    out
}

/// What the network reports' target tables say of a target whose row did not run.
const ABSENT: &str = "n/a (not in this run)";

/// The run's notes as a section (empty without notes).
fn notes(r: &NetResults) -> String {
    let mut out = String::new();
    if r.notes.is_empty() {
        return out;
    }
    out.push_str("\n## Notes\n\n");
    for n in &r.notes {
        let _ = writeln!(out, "- {}", n.replace('\n', " "));
    }
    out
}

/// A target on a ratio `y3 / peer` (or `peer / y3`) that must stay within `bound`.
/// `worst` is the worst ratio over the cells and where it was.
fn ratio_target(name: String, worst: Option<(f64, String)>, bound: f64, at_most: bool) -> Target {
    let bound = Bound {
        value: bound,
        at_least: !at_most,
    };
    let required = bound.required();
    match worst {
        None => Target {
            name,
            measured: "not measured".into(),
            required,
            met: None,
            shortfall: String::new(),
        },
        Some((v, at)) => {
            let met = bound.met(v);
            let shortfall = if met {
                String::new()
            } else {
                format!("by {:.1}% at {at}", bound.missed_pct(v))
            };
            Target {
                name,
                measured: format!("{} (worst, {at})", ratio(v)),
                required,
                met: Some(met),
                shortfall,
            }
        }
    }
}

/// The worst (largest if `max`, else smallest) of `cells`.
fn worst(cells: Vec<(f64, String)>, max: bool) -> Option<(f64, String)> {
    cells
        .into_iter()
        .filter(|(v, _)| v.is_finite())
        .reduce(|a, b| if (b.0 > a.0) == max { b } else { a })
}

fn secs(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Some(v) => format!("{v:.0} µs"),
    }
}

fn rate(v: f64) -> String {
    crate::charts::format_value(v.round())
}

// ---------------------------------------------------------------------------------------
// Ping-pong

/// `y3 time / peer time` per (session count, threads) cell.
fn pingpong_cells(r: &NetResults, peer: &str) -> Vec<(f64, String)> {
    let mut cells = Vec::new();
    for case in r.cases() {
        for t in r.threads() {
            if let (Some(y), Some(p)) = (r.find(&case, "y3-transport", t), r.find(&case, peer, t)) {
                cells.push((y.seconds / p.seconds, format!("{case}, {t} thr")));
            }
        }
    }
    cells
}

/// Ping-pong targets: y3's total time ≤ asio's and ≤ plain tokio's in every cell.
pub fn pingpong_targets(r: &NetResults) -> Vec<Target> {
    ["asio", "tokio"]
        .iter()
        .map(|peer| {
            ratio_target(
                format!("ping-pong time y3-transport / {peer}, every cell"),
                worst(pingpong_cells(r, peer), true),
                1.0,
                true,
            )
        })
        .collect()
}

/// The ping-pong report.
pub fn pingpong_markdown(r: &NetResults) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let peers: Vec<&String> = impls.iter().filter(|i| *i != "y3-transport").collect();
    let _ = write!(out, "| sessions | threads |");
    for i in &impls {
        let _ = write!(out, " `{i}` s |");
    }
    for p in &peers {
        let _ = write!(out, " y3 / {p} |");
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "| --: | --: |{}",
        " --: |".repeat(impls.len() + peers.len())
    );
    for case in r.cases() {
        for t in r.threads() {
            let row: Vec<Option<&NetRecord>> = impls.iter().map(|i| r.find(&case, i, t)).collect();
            if row.iter().all(Option::is_none) {
                continue;
            }
            let sessions = case.split(' ').next().unwrap_or("");
            let _ = write!(out, "| {sessions} | {t} |");
            for rec in &row {
                let _ = write!(out, " {} |", rec.map_or("–".into(), |x| secs(x.seconds)));
            }
            let y = r.find(&case, "y3-transport", t);
            for p in &peers {
                let cell = match (y, r.find(&case, p, t)) {
                    (Some(y), Some(p)) => ratio(y.seconds / p.seconds),
                    _ => "–".into(),
                };
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
    }
    fill(
        include_str!("templates/pingpong.md"),
        &[
            ("header", &header(r)),
            ("table", &out),
            ("targets", &targets(&pingpong_targets(r))),
            ("charts", &charts_markdown(&pingpong_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// One chart per session count: total time per thread count, one bar per implementation.
pub fn pingpong_charts(r: &NetResults) -> Vec<(String, BarChart)> {
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
                        .map(|&t| r.find(&case, &i, t).map(|x| x.seconds))
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

/// The target cells (every non-sweep point): y3 on tokio beside `peer` at the same point.
fn echo_pairs<'a>(r: &'a NetResults, peer: &str) -> Vec<(&'a NetRecord, &'a NetRecord)> {
    r.records
        .iter()
        .filter(|y| y.implementation == "y3-tokio" && !y.case.starts_with("peak"))
        .filter_map(|y| {
            let p = r.records.iter().find(|p| {
                p.implementation == peer && p.case == y.case && p.sessions == y.sessions
            })?;
            Some((y, p))
        })
        .collect()
}

/// How a report names an echo point.
fn echo_cell(x: &NetRecord) -> String {
    format!("{}, {} conns", x.case, x.sessions)
}

fn echo_cells(
    r: &NetResults,
    peer: &str,
    f: impl Fn(&NetRecord, &NetRecord) -> Option<f64>,
) -> Vec<(f64, String)> {
    echo_pairs(r, peer)
        .into_iter()
        .filter_map(|(y, p)| Some((f(y, p)?, echo_cell(y))))
        .collect()
}

/// Echo targets: y3 on tokio ≥ plain tokio's QPS with p99 no worse, in every cell.
pub fn echo_targets(r: &NetResults) -> Vec<Target> {
    vec![
        ratio_target(
            "echo QPS y3-tokio / tokio, every cell".into(),
            worst(
                echo_cells(r, "tokio", |y, p| Some(y.msg_per_s / p.msg_per_s)),
                false,
            ),
            1.0,
            false,
        ),
        ratio_target(
            "echo p99 y3-tokio / tokio, every cell".into(),
            worst(
                echo_cells(r, "tokio", |y, p| Some(y.p99_us? / p.p99_us?)),
                true,
            ),
            1.0,
            true,
        ),
    ]
}

/// The echo report.
pub fn echo_markdown(r: &NetResults) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let mut cases = r.cases();
    cases.sort_by_key(|c| c.starts_with("peak"));
    for case in &cases {
        let _ = writeln!(out, "## {case}\n");
        let _ = write!(out, "| conns |");
        for i in &impls {
            let _ = write!(out, " `{i}` QPS | p50 / p99 / p999 | CPU |");
        }
        out.push('\n');
        let _ = writeln!(out, "| --: |{}", " --: | --: | --: |".repeat(impls.len()));
        let mut conns: Vec<usize> = r
            .records
            .iter()
            .filter(|x| &x.case == case)
            .map(|x| x.sessions)
            .collect();
        conns.sort_unstable();
        conns.dedup();
        for c in conns {
            let _ = write!(out, "| {c} |");
            for i in &impls {
                match r
                    .records
                    .iter()
                    .find(|x| &x.case == case && &x.implementation == i && x.sessions == c)
                {
                    Some(x) => {
                        let _ = write!(
                            out,
                            " {} | {} / {} / {} | {} |",
                            rate(x.msg_per_s),
                            us(x.p50_us),
                            us(x.p99_us),
                            us(x.p999_us),
                            x.server_cpu_pct.map_or("–".into(), |c| format!("{c:.0}%"))
                        );
                    }
                    None => out.push_str(" – | – | – |"),
                }
            }
            out.push('\n');
        }
        out.push('\n');
        if case.starts_with("peak") {
            echo_peaks(&mut out, r, case, &impls);
        }
    }
    let mut spread = String::new();
    echo_spread(&mut spread, r);
    fill(
        include_str!("templates/echo.md"),
        &[
            ("header", &header(r)),
            ("cases", &out),
            ("targets", &targets(&echo_targets(r))),
            ("spread", &spread),
            ("charts", &charts_markdown(&echo_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// The targets' cells again with the lowest and highest QPS of the runs beside each
/// median: on a shared VM the runs spread wider than the servers differ, and a reader
/// should see that next to the verdict.
fn echo_spread(out: &mut String, r: &NetResults) {
    let pairs = echo_pairs(r, "tokio");
    if pairs.is_empty() || pairs.iter().all(|(y, p)| y.runs < 2 && p.runs < 2) {
        return;
    }
    out.push_str(
        "## Run-to-run spread\n\n\
         | cell | runs | `y3-tokio` QPS median (lowest–highest) | `tokio` QPS median \
         (lowest–highest) | y3 / tokio |\n| --- | --: | --: | --: | --: |\n",
    );
    for (y, p) in pairs {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}–{}) | {} ({}–{}) | {} |",
            echo_cell(y),
            y.runs.min(p.runs),
            rate(y.msg_per_s),
            rate(y.range.0),
            rate(y.range.1),
            rate(p.msg_per_s),
            rate(p.range.0),
            rate(p.range.1),
            ratio(y.msg_per_s / p.msg_per_s)
        );
    }
    out.push('\n');
}

/// One line per server: its highest QPS over the sweep `case`, and at how many
/// connections.
fn echo_peaks(out: &mut String, r: &NetResults, case: &str, impls: &[String]) {
    out.push_str("Peak QPS of each server over the sweep:");
    for i in impls {
        let best = r
            .records
            .iter()
            .filter(|x| x.case == case && &x.implementation == i)
            .max_by(|a, b| a.msg_per_s.total_cmp(&b.msg_per_s));
        if let Some(x) = best {
            let _ = write!(out, " `{i}` {} at {} conns;", rate(x.msg_per_s), x.sessions);
        }
    }
    if out.ends_with(';') {
        out.pop();
    }
    out.push_str(".\n\n");
}

/// Per case: QPS vs connections and p99 vs connections.
pub fn echo_charts(r: &NetResults) -> Vec<(String, BarChart)> {
    let mut charts = Vec::new();
    for case in r.cases() {
        let mut conns: Vec<usize> = r
            .records
            .iter()
            .filter(|x| x.case == case)
            .map(|x| x.sessions)
            .collect();
        conns.sort_unstable();
        conns.dedup();
        let slug: String = case
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
            .replace("--", "-")
            .to_lowercase();
        for (metric, label, f) in [
            (
                "qps",
                "QPS",
                (|x: &NetRecord| Some(x.msg_per_s)) as fn(&NetRecord) -> Option<f64>,
            ),
            ("p99", "p99 latency (µs)", |x: &NetRecord| x.p99_us),
        ] {
            let series = r
                .impls()
                .into_iter()
                .map(|i| {
                    let v = conns
                        .iter()
                        .map(|&c| {
                            r.records
                                .iter()
                                .find(|x| {
                                    x.case == case && x.implementation == i && x.sessions == c
                                })
                                .and_then(f)
                        })
                        .collect();
                    (i, v)
                })
                .collect();
            charts.push((
                format!("echo-{metric}-{slug}.svg"),
                BarChart {
                    title: format!("echo, {case}: {label} vs connections"),
                    y_label: label.into(),
                    groups: conns.iter().map(|c| format!("{c} conns")).collect(),
                    series,
                    log: metric == "p99",
                },
            ));
        }
    }
    charts
}

// ---------------------------------------------------------------------------------------
// Router end to end

/// E2e targets: y3's router msg/s ≥ NATS's, and its p50 ≤ Zenoh brokered's.
pub fn e2e_targets(r: &NetResults) -> Vec<Target> {
    let cells = |peer: &str, f: fn(&NetRecord, &NetRecord) -> Option<f64>| {
        let mut cells = Vec::new();
        for y in r
            .records
            .iter()
            .filter(|x| x.implementation == "y3-router-tcp")
        {
            if let Some(p) = r.find(&y.case, peer, 0) {
                if let Some(v) = f(y, p) {
                    cells.push((v, y.case.clone()));
                }
            }
        }
        cells
    };
    vec![
        ratio_target(
            "router msg/s y3-router-tcp / nats, every case".into(),
            worst(cells("nats", |y, p| Some(y.msg_per_s / p.msg_per_s)), false),
            1.0,
            false,
        ),
        ratio_target(
            "router p50 y3-router-tcp / zenoh-router, every case".into(),
            worst(
                cells("zenoh-router", |y, p| Some(y.p50_us? / p.p50_us?)),
                true,
            ),
            1.0,
            true,
        ),
    ]
}

/// The e2e report.
pub fn e2e_markdown(r: &NetResults) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let _ = write!(out, "| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` msg/s | p50 / p99 |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: | --: |".repeat(impls.len()));
    for case in r.cases() {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(&case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} | {} / {} |",
                        rate(x.msg_per_s),
                        us(x.p50_us),
                        us(x.p99_us)
                    );
                }
                None => out.push_str(" – | – |"),
            }
        }
        out.push('\n');
    }
    fill(
        include_str!("templates/e2e.md"),
        &[
            ("header", &header(r)),
            ("table", &out),
            ("targets", &targets(&e2e_targets(r))),
            ("charts", &charts_markdown(&e2e_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s and p50 per case, one bar per implementation.
pub fn e2e_charts(r: &NetResults) -> Vec<(String, BarChart)> {
    let cases = r.cases();
    let chart = |title: &str, label: &str, f: fn(&NetRecord) -> Option<f64>, log: bool| BarChart {
        title: title.into(),
        y_label: label.into(),
        groups: cases.clone(),
        series: r
            .impls()
            .into_iter()
            .map(|i| {
                let v = cases.iter().map(|c| r.find(c, &i, 0).and_then(f)).collect();
                (i, v)
            })
            .collect(),
        log,
    };
    vec![
        (
            "e2e-msgs.svg".into(),
            chart(
                "publish → subscribe msg/s",
                "msg/s",
                |x| Some(x.msg_per_s),
                true,
            ),
        ),
        (
            "e2e-p50.svg".into(),
            chart("one-way latency p50 (paced)", "µs", |x| x.p50_us, true),
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// YoMo's zipper and clients against y3

/// The row with YoMo's zipper and YoMo's clients: every yomo target's baseline.
const YOMO: &str = "yomo-zipper";
/// `y3 serve` with YoMo's clients.
const Y3_YOMO_CLIENTS: &str = "y3-yomo-clients";

/// `f(y3 row, baseline row)` in every case where both were measured, with the case.
fn yomo_cells(
    r: &NetResults,
    y3: &str,
    base: &str,
    f: fn(&NetRecord, &NetRecord) -> Option<f64>,
) -> Vec<(f64, String)> {
    r.cases()
        .into_iter()
        .filter_map(|case| {
            let v = f(r.find(&case, y3, 0)?, r.find(&case, base, 0)?)?;
            Some((v, case))
        })
        .collect()
}

/// One yomo target (issue 12): `ratio(y3 row, baseline row)` in every case within `bound`.
struct YomoTarget {
    name: &'static str,
    /// The ratio's column in the report.
    column: &'static str,
    y3: &'static str,
    base: &'static str,
    ratio: fn(&NetRecord, &NetRecord) -> Option<f64>,
    bound: f64,
    at_most: bool,
}

const YOMO_TARGETS: [YomoTarget; 5] = [
    YomoTarget {
        name: "router CPU per routed frame, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "router CPU/frame, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.cpu_us_per_frame? / p.cpu_us_per_frame?),
        bound: 0.1,
        at_most: true,
    },
    YomoTarget {
        name: "p99 at the paced rate, y3 serve / YoMo's zipper (YoMo's clients), every case",
        column: "paced p99, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.p99_us? / p.p99_us?),
        bound: 0.2,
        at_most: true,
    },
    YomoTarget {
        name: "msg/s with YoMo's clients, y3 serve / YoMo's zipper, every case",
        column: "msg/s, y3-yomo-clients ÷ yomo-zipper",
        y3: Y3_YOMO_CLIENTS,
        base: YOMO,
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: 2.0,
        at_most: false,
    },
    YomoTarget {
        name: "msg/s, y3's clients over QUIC / YoMo's zipper with YoMo's clients, every case",
        column: "msg/s, y3-quic ÷ yomo-zipper",
        y3: "y3-quic",
        base: YOMO,
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: 20.0,
        at_most: false,
    },
    YomoTarget {
        name: "msg/s, y3's clients over QUIC / over TCP, every case",
        column: "msg/s, y3-quic ÷ y3-tcp",
        y3: "y3-quic",
        base: "y3-tcp",
        ratio: |y, p| Some(y.msg_per_s / p.msg_per_s),
        bound: 2.0 / 3.0,
        at_most: false,
    },
];

/// YoMo targets: y3 serve against YoMo's zipper with YoMo's clients (router CPU per frame
/// ≤ 1/10, p99 ≤ 1/5, msg/s ≥ 2×), y3's clients ≥ 20× YoMo's msg/s, QUIC ≥ 2/3 of TCP.
/// A case without both rows (a run failed every time) is left out of the worst and
/// counted in the measured figure.
pub fn yomo_targets(r: &NetResults) -> Vec<Target> {
    let cases = r.cases().len();
    YOMO_TARGETS
        .iter()
        .map(|t| {
            let cells = yomo_cells(r, t.y3, t.base, t.ratio);
            let measured = cells.len();
            let mut target =
                ratio_target(t.name.into(), worst(cells, t.at_most), t.bound, t.at_most);
            if measured > 0 && measured < cases {
                target.measured = format!("{}; {measured} of {cases} cases", target.measured);
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
pub fn yomo_markdown(r: &NetResults) -> String {
    let mut out = String::new();
    let impls = r.impls();
    let cases = r.cases();
    out.push_str("| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` msg/s | CPU µs/frame |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: | --: |".repeat(impls.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} | {} |",
                        rate(x.msg_per_s),
                        cpu_us(x.cpu_us_per_frame)
                    );
                }
                None => out.push_str(" – | – |"),
            }
        }
        out.push('\n');
    }
    let throughput = std::mem::take(&mut out);
    out.push_str("| case |");
    for i in &impls {
        let _ = write!(out, " `{i}` p50 / p99 / p999 |");
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: |".repeat(impls.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for i in &impls {
            match r.find(case, i, 0) {
                Some(x) => {
                    let _ = write!(
                        out,
                        " {} / {} / {} |",
                        us(x.p50_us),
                        us(x.p99_us),
                        us(x.p999_us)
                    );
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    let latency = std::mem::take(&mut out);
    out.push_str("| case |");
    for t in &YOMO_TARGETS {
        let bound = if t.at_most { "≤" } else { "≥" };
        let _ = write!(out, " {} ({bound} {}) |", t.column, ratio(t.bound));
    }
    out.push('\n');
    let _ = writeln!(out, "| --- |{}", " --: |".repeat(YOMO_TARGETS.len()));
    for case in &cases {
        let _ = write!(out, "| {case} |");
        for t in &YOMO_TARGETS {
            let cell = r
                .find(case, t.y3, 0)
                .zip(r.find(case, t.base, 0))
                .and_then(|(y, p)| (t.ratio)(y, p))
                .map_or("–".into(), ratio);
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    let mut spread = String::new();
    yomo_spread(&mut spread, r);
    fill(
        include_str!("templates/yomo.md"),
        &[
            ("header", &header(r)),
            ("throughput", &throughput),
            ("latency", &latency),
            ("ratios", &out),
            ("targets", &targets(&yomo_targets(r))),
            ("spread", &spread),
            ("charts", &charts_markdown(&yomo_charts(r))),
            ("notes", &notes(r)),
        ],
    )
}

/// msg/s medians with the lowest and highest run beside them.
fn yomo_spread(out: &mut String, r: &NetResults) {
    if r.records.iter().all(|x| x.runs < 2) {
        return;
    }
    out.push_str(
        "## Run-to-run spread\n\n| case | row | runs | msg/s median (lowest–highest) |\n\
         | --- | --- | --: | --: |\n",
    );
    for x in &r.records {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} ({}–{}) |",
            x.case,
            x.implementation,
            x.runs,
            rate(x.msg_per_s),
            rate(x.range.0),
            rate(x.range.1)
        );
    }
    out.push('\n');
}

/// msg/s, router CPU per frame and p99 per case, one bar per row.
pub fn yomo_charts(r: &NetResults) -> Vec<(String, BarChart)> {
    let cases = r.cases();
    let chart = |title: &str, label: &str, f: fn(&NetRecord) -> Option<f64>| BarChart {
        title: title.into(),
        y_label: label.into(),
        groups: cases.clone(),
        series: r
            .impls()
            .into_iter()
            .map(|i| {
                let v = cases.iter().map(|c| r.find(c, &i, 0).and_then(f)).collect();
                (i, v)
            })
            .collect(),
        log: true,
    };
    vec![
        (
            "yomo-msgs.svg".into(),
            chart("msg/s at the sink (flat out)", "msg/s", |x| {
                Some(x.msg_per_s)
            }),
        ),
        (
            "yomo-cpu.svg".into(),
            chart(
                "router CPU per routed frame (lower is better)",
                "µs",
                |x| x.cpu_us_per_frame,
            ),
        ),
        (
            "yomo-p99.svg".into(),
            chart("one-way latency p99 (paced)", "µs", |x| x.p99_us),
        ),
    ]
}

// ---------------------------------------------------------------------------------------

/// The report, charts and targets of `r`'s suite.
pub fn render(r: &NetResults) -> (String, Vec<(String, BarChart)>, Vec<Target>) {
    match r.meta.suite.as_str() {
        "echo" => (echo_markdown(r), echo_charts(r), echo_targets(r)),
        "e2e" => (e2e_markdown(r), e2e_charts(r), e2e_targets(r)),
        "yomo" => (yomo_markdown(r), yomo_charts(r), yomo_targets(r)),
        _ => (
            pingpong_markdown(r),
            pingpong_charts(r),
            pingpong_targets(r),
        ),
    }
}

impl crate::report::Publish for NetResults {
    fn name(&self) -> String {
        format!("net-{}", self.meta.suite)
    }

    fn write_json(&self, path: &std::path::Path) -> anyhow::Result<()> {
        NetResults::write_json(self, path)
    }

    fn render(&self) -> (String, Vec<(String, BarChart)>, Vec<Target>) {
        render(self)
    }

    fn summary(&self, docs_rel: &str) -> String {
        summary(self, docs_rel)
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn print_tables(&self) -> bool {
        true
    }
}

/// The README section: the report's tables and targets without the prose, charts linked
/// under `docs_rel`.
pub fn summary(r: &NetResults, docs_rel: &str) -> String {
    let (md, charts, _) = render(r);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Network lab, `{}` on {} ([full report]({docs_rel}/net-{}.md)).\n",
        r.meta.command, r.meta.machine, r.meta.suite
    );
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with('|') || line.starts_with("## ") {
            if line.starts_with("## Notes") {
                break;
            }
            // The README nests these under its own `###` headings.
            if let Some(heading) = line.strip_prefix("## ") {
                let _ = writeln!(out, "#### {heading}");
            } else {
                out.push_str(line);
                out.push('\n');
            }
            in_table = line.starts_with('|');
        } else if in_table {
            out.push('\n');
            in_table = false;
        }
    }
    out.push('\n');
    for (file, chart) in charts.iter().filter(|(_, c)| !c.is_empty()) {
        let _ = writeln!(out, "![{}]({docs_rel}/{file})\n", chart.title);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::record::NetMeta;

    fn pp(imp: &str, sessions: usize, threads: usize, seconds: f64) -> NetRecord {
        NetRecord {
            suite: "pingpong".into(),
            implementation: imp.into(),
            case: format!("{sessions} sessions"),
            sessions,
            threads,
            seconds,
            runs: 1,
            ..NetRecord::default()
        }
    }

    fn pingpong() -> NetResults {
        NetResults {
            meta: NetMeta {
                suite: "pingpong".into(),
                command: "y3 bench net pingpong --quick".into(),
                ..NetMeta::default()
            },
            records: vec![
                pp("y3-transport", 100, 1, 0.9),
                pp("tokio", 100, 1, 1.0),
                pp("asio", 100, 1, 1.2),
                pp("y3-transport", 100, 2, 1.1),
                pp("tokio", 100, 2, 1.0),
                pp("asio", 100, 2, 1.5),
            ],
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn pingpong_report_targets_and_charts() {
        let r = pingpong();
        let md = pingpong_markdown(&r);
        assert!(
            md.contains("| 100 | 1 | 0.900 | 1.000 | 1.200 | 0.90× | 0.75× |"),
            "{md}"
        );
        assert!(md.contains("![ping-pong, 100 sessions"));
        assert!(md.contains("- a note"));
        let t = pingpong_targets(&r);
        assert_eq!(t[0].met, Some(true), "asio");
        assert_eq!(t[1].met, Some(false), "tokio at 2 threads");
        assert!(t[1].shortfall.contains("10.0%"), "{}", t[1].shortfall);
        assert!(t[1].shortfall.contains("2 thr"), "{}", t[1].shortfall);
        let charts = pingpong_charts(&r);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].0, "pingpong-100.svg");
        assert_eq!(charts[0].1.groups, ["1 threads", "2 threads"]);
        let dir = std::env::temp_dir().join(format!("y3-bench-net-report-{}", std::process::id()));
        let charts: Vec<(&str, BarChart)> = charts
            .iter()
            .map(|(f, c)| (f.as_str(), c.clone()))
            .collect();
        let files = crate::report::write_report(&dir, "net-pingpong", &md, &charts).unwrap();
        assert_eq!(files.len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
        let s = summary(&r, "docs/bench");
        assert!(s.contains("(docs/bench/net-pingpong.md)"), "{s}");
        assert!(s.contains("| 100 | 2 |"), "{s}");
        assert!(!s.contains("a note"));
    }

    #[test]
    fn echo_and_e2e_targets() {
        let rec =
            |suite: &str, imp: &str, case: &str, conns: usize, qps: f64, p99: f64| NetRecord {
                suite: suite.into(),
                implementation: imp.into(),
                case: case.into(),
                sessions: conns,
                msg_per_s: qps,
                p50_us: Some(p99 / 2.0),
                p99_us: Some(p99),
                server_cpu_pct: Some(99.0),
                ..NetRecord::default()
            };
        let echo = NetResults {
            meta: NetMeta {
                suite: "echo".into(),
                ..NetMeta::default()
            },
            records: vec![
                rec("echo", "y3-tokio", "100 B", 80, 110_000.0, 900.0),
                rec("echo", "tokio", "100 B", 80, 100_000.0, 1000.0),
                rec("echo", "y3-tokio", "100 B", 250, 95_000.0, 2000.0),
                rec("echo", "tokio", "100 B", 250, 100_000.0, 2100.0),
                rec("echo", "y3-tokio", "peak 100 B", 1, 20_000.0, 60.0),
                rec("echo", "tokio", "peak 100 B", 1, 10_000.0, 90.0),
                rec("echo", "y3-tokio", "peak 100 B", 50, 120_000.0, 500.0),
                rec("echo", "tokio", "peak 100 B", 50, 130_000.0, 450.0),
            ],
            notes: vec![],
        };
        let t = echo_targets(&echo);
        assert_eq!(t[0].met, Some(false));
        assert!(t[0].shortfall.contains("5.0%"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(true));
        let (md, charts, _) = render(&echo);
        assert!(
            md.contains("| 80 | 110k | 450 µs / 900 µs / – | 99% |"),
            "{md}"
        );
        assert!(
            md.contains("over the sweep: `y3-tokio` 120k at 50 conns; `tokio` 130k at 50 conns."),
            "{md}"
        );
        assert_eq!(
            charts.len(),
            4,
            "QPS and p99 for the size and for the sweep"
        );
        assert!(!md.contains("Run-to-run"), "one run per cell has no spread");
        let mut spread = echo.clone();
        for x in &mut spread.records {
            x.runs = 3;
            x.range = (x.msg_per_s * 0.8, x.msg_per_s * 1.1);
        }
        let md = echo_markdown(&spread);
        assert!(
            md.contains("| 100 B, 250 conns | 3 | 95k (76k–104.5k) | 100k (80k–110k) | 0.95× |"),
            "{md}"
        );
        assert!(!md.contains("| peak 100 B, 1 conns"), "{md}");
        let e2e = NetResults {
            meta: NetMeta {
                suite: "e2e".into(),
                ..NetMeta::default()
            },
            records: vec![
                rec("e2e", "y3-router-tcp", "64 B × 1 sub", 0, 2e6, 40.0),
                rec("e2e", "nats", "64 B × 1 sub", 0, 1e6, 60.0),
                rec("e2e", "zenoh-router", "64 B × 1 sub", 0, 1e6, 30.0),
            ],
            notes: vec![],
        };
        let t = e2e_targets(&e2e);
        assert_eq!(t[0].met, Some(true));
        assert_eq!(t[1].met, Some(false), "p50 20 µs against 15 µs");
        let (md, _, _) = render(&e2e);
        assert!(md.contains("| 64 B × 1 sub | 2M | 20 µs / 40 µs |"), "{md}");
    }

    #[test]
    fn yomo_ratios_and_targets() {
        let rec = |imp: &str, case: &str, rate: f64, cpu: f64, p99: f64| NetRecord {
            suite: "yomo".into(),
            implementation: imp.into(),
            case: case.into(),
            msg_per_s: rate,
            cpu_us_per_frame: Some(cpu),
            p50_us: Some(p99 / 4.0),
            p99_us: Some(p99),
            p999_us: Some(p99 * 2.0),
            runs: 3,
            range: (rate * 0.9, rate * 1.1),
            ..NetRecord::default()
        };
        let r = NetResults {
            meta: NetMeta {
                suite: "yomo".into(),
                versions: vec![("yomo".into(), "v1.22.0".into())],
                ..NetMeta::default()
            },
            records: vec![
                rec("yomo-zipper", "sink 64 B", 40_000.0, 14.0, 5000.0),
                rec("y3-yomo-clients", "sink 64 B", 100_000.0, 1.0, 500.0),
                rec("y3-quic", "sink 64 B", 900_000.0, 0.8, 100.0),
                rec("y3-tcp", "sink 64 B", 1_000_000.0, 0.5, 80.0),
                rec("yomo-zipper", "relay 64 B", 20_000.0, 14.0, 10_000.0),
                rec("y3-yomo-clients", "relay 64 B", 30_000.0, 3.5, 1000.0),
                rec("y3-tcp", "relay 64 B", 500_000.0, 0.5, 80.0),
            ],
            notes: vec![],
        };
        let t = yomo_targets(&r);
        assert_eq!(t.len(), 5);
        assert_eq!(t[0].met, Some(false), "3.5 / 14 µs at relay");
        assert!(t[0].shortfall.contains("relay 64 B"), "{}", t[0].shortfall);
        assert_eq!(t[1].met, Some(true), "p99 0.1×");
        assert_eq!(t[2].met, Some(false), "1.5× at relay");
        assert_eq!(t[3].met, Some(true), "22× where y3-quic ran");
        assert_eq!(t[3].measured, "22× (worst, sink 64 B); 1 of 2 cases");
        assert_eq!(t[0].measured, "0.25× (worst, relay 64 B)");
        assert_eq!(t[4].met, Some(true), "0.9× at sink 64 B");
        let (md, charts, _) = render(&r);
        assert!(md.contains("- Peers: yomo v1.22.0"), "{md}");
        assert!(
            md.contains("| sink 64 B | 40k | 14.0 | 100k | 1.00 | 900k | 0.80 | 1M | 0.50 |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | 20k | 14.0 | 30k | 3.50 | – | – | 500k | 0.50 |"),
            "{md}"
        );
        assert!(
            md.contains("| sink 64 B | 1.25 ms / 5.00 ms / 10.00 ms | 125 µs / 500 µs / 1.00 ms |"),
            "{md}"
        );
        assert!(
            md.contains("| sink 64 B | 0.07× | 0.10× | 2.5× | 22× | 0.90× |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | 0.25× | 0.10× | 1.5× | – | – |"),
            "{md}"
        );
        assert!(
            md.contains("| relay 64 B | `y3-tcp` | 3 | 500k (450k–550k) |"),
            "{md}"
        );
        assert_eq!(charts.len(), 3);
        assert_eq!(charts[1].1.groups, ["sink 64 B", "relay 64 B"]);
        let s = summary(&r, "docs/bench");
        assert!(s.contains("(docs/bench/net-yomo.md)"), "{s}");
        assert!(s.contains("#### Targets"), "{s}");
    }

    #[test]
    fn lock_version_reads_the_lockfile_or_says_unknown() {
        let v = lock_version("no-such-package-here");
        assert_eq!(v, "?");
    }
}
