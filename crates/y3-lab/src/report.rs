//! The Markdown reports, the targets and the charts, all computed from [`Results`] alone,
//! so that a `--json` file can be re-rendered (`y3-lab codec --from FILE`).
//!
//! Files written into the results directory (and, with `--docs DIR`, copied there for the
//! README): `codec.md`, `codec-serial.svg`, `codec-parallel.svg`, `codec-speedup.svg`,
//! `codec-position.svg`; `serde.md`, `serde.svg`. With `--readme FILE` the summary replaces
//! the text between `<!-- y3-bench:codec:start -->` and `<!-- y3-bench:codec:end -->` (or
//! the `serde` pair) in that file.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::charts::{self, BarChart};
use crate::data::{CASES, SWEEP};
use crate::record::{Dim, Metric, Record, Results};
use crate::table::{Align, Cell, Table};

/// Display order of the rows; others follow alphabetically.
pub const ORDER: [&str; 23] = [
    "y3-derive",
    "prost",
    "y3-observe",
    "y3-stream7",
    "y3-get",
    "y3-decode",
    "protobuf-scan",
    "prost-decode",
    "rkyv-checked",
    "postcard",
    "sonic-rs-get",
    "simd-json-tape",
    "serde_json-typed",
    "serde_json-value",
    "rmp-serde",
    "go-y3-scan",
    "go-y3-report",
    "go-y3-decode",
    "go-gjson",
    "go-jsonparser",
    "go-json-map",
    "serde_json",
    "mqtt-rumqttc",
];

/// A stable palette index per implementation, so that one implementation has one color in
/// every chart.
pub fn color_of(name: &str) -> usize {
    ORDER
        .iter()
        .position(|n| *n == name)
        .unwrap_or(ORDER.len() + name.len())
}

/// The implementations the summary and the charts show.
pub const HEADLINE: [&str; 10] = [
    "y3-observe",
    "y3-stream7",
    "protobuf-scan",
    "sonic-rs-get",
    "simd-json-tape",
    "go-y3-scan",
    "go-gjson",
    "go-jsonparser",
    "go-y3-report",
    "go-json-map",
];

/// The report's published figures (Go 1.14, 2.6 GHz i7): Y3 serial and parallel ns/op per
/// case (C03-K02, C16-K08, C32-K16, C63-K32), and JSON at C63-K32.
pub const REPORT_Y3_SERIAL: [f64; 4] = [610.0, 1667.0, 1361.0, 2077.0];
/// See [`REPORT_Y3_SERIAL`].
pub const REPORT_Y3_PARALLEL: [f64; 4] = [175.0, 515.0, 505.0, 706.0];
/// The report's JSON/Y3 ratios per case (its figure 3.2), same order.
pub const REPORT_RATIOS: [f64; 4] = [3.3, 6.2, 15.8, 20.7];
/// The report's JSON ns/op at C63-K32.
pub const REPORT_JSON_C63: f64 = 43010.0;

/// `C63-K32`-style names of the report's cases.
pub fn case_names() -> Vec<String> {
    CASES
        .iter()
        .map(|(n, k)| format!("C{n:02}-K{k:02}"))
        .collect()
}

/// Implementation names present in `records`, in display order.
pub fn impl_names(records: &[&Record]) -> Vec<String> {
    let present: BTreeSet<&str> = records.iter().map(|r| r.implementation.as_str()).collect();
    let mut out: Vec<String> = ORDER
        .iter()
        .filter(|n| present.contains(*n))
        .map(|n| n.to_string())
        .collect();
    for n in present {
        if !ORDER.contains(&n) {
            out.push(n.to_string());
        }
    }
    out
}

/// `21.3`, `1390`, `43 010`.
pub fn ns(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{:.0}", v);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push('\u{202f}');
            }
            out.push(c);
        }
        out
    }
}

/// `12.3×`, `0.84×`.
pub fn ratio(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}×")
    } else if v >= 1.0 {
        format!("{v:.1}×")
    } else {
        format!("{v:.2}×")
    }
}

fn get<'a>(r: &'a Results, case: &str, order: &str, imp: &str, mode: &str) -> Option<&'a Record> {
    r.find_where(case, imp, |x| {
        x.text(Dim::Order) == order && x.text(Dim::Mode) == mode
    })
}

/// A record's ns/op as a figure, `–` where not measured.
fn ns_cell(r: Option<&Record>) -> Cell {
    Cell::maybe(r.map(|r| r.value(Metric::NsPerOp)), ns)
}

/// The report's own figure, in italics.
fn published(v: f64, text: String) -> Cell {
    Cell::figure(v, format!("*{text}*"))
}

/// Text columns then figure columns.
fn columns(left: &[&str], right: &[String]) -> Vec<(String, Align)> {
    left.iter()
        .map(|h| (h.to_string(), Align::Left))
        .chain(right.iter().map(|h| (h.clone(), Align::Right)))
        .collect()
}

/// What the codec reports' target tables say of a target whose peer did not run.
const ABSENT: &str = "n/a (peer not in this run)";

/// One checked target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is required, in words.
    pub name: String,
    /// The measured figure, in words (`12.3×`).
    pub measured: String,
    /// The requirement (`≥ 10×`).
    pub required: String,
    /// Met, missed, or not measurable in this run (a peer missing).
    pub met: Option<bool>,
    /// By how much it was missed, in words.
    pub shortfall: String,
}

/// What a [`Bound`] bounds: a ratio of two rows (most targets) or one row's own figure in
/// microseconds (an absolute target, such as a p99 of at most 2 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A ratio, shown `0.84×`.
    Times,
    /// Microseconds, shown `413 µs` or `2.00 ms`.
    Micros,
}

impl Unit {
    /// `v` in this unit: `0.84×`, `413 µs`, `2.63 ms`.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Times => ratio(v),
            Unit::Micros if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
            Unit::Micros => format!("{v:.0} µs"),
        }
    }
}

/// A requirement on a measured figure: at least, or at most, `value`. Every target of every
/// suite is one of these over a measured ratio ([`Unit::Times`]) or, for an absolute target
/// ([`RowTarget`]), over one row's figure ([`Unit::Micros`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// The bound (`1.0` for "at least as fast", `2000.0` for "at most 2 ms").
    pub value: f64,
    /// `≥` (else `≤`).
    pub at_least: bool,
    /// What `value` counts.
    pub unit: Unit,
}

impl Bound {
    /// The requirement in words: `≥ 1.0×`, `≤ 2.00 ms`.
    pub fn required(self) -> String {
        let sign = if self.at_least { "≥" } else { "≤" };
        format!("{sign} {}", self.unit.show(self.value))
    }

    /// The same requirement on a figure in microseconds: `at_most(2000.0).micros()` is
    /// "at most 2 ms".
    pub const fn micros(self) -> Bound {
        Bound {
            unit: Unit::Micros,
            ..self
        }
    }

    /// Whether `v` meets it.
    pub fn met(self, v: f64) -> bool {
        if self.at_least {
            v >= self.value
        } else {
            v <= self.value
        }
    }

    /// The worst of `values` (largest for `≤`, smallest for `≥`), skipping what is not a
    /// number.
    fn worst<T>(self, values: Vec<(f64, T)>) -> Option<(f64, T)> {
        let max = !self.at_least;
        values
            .into_iter()
            .filter(|(v, _)| v.is_finite())
            .reduce(|a, b| if (b.0 > a.0) == max { b } else { a })
    }

    /// The target `name` checked over `cells` (value, where), naming the worst cell
    /// (network reports: `1.2× (worst, 80 conns)`); not measured without a cell.
    pub fn check(self, name: &str, cells: Vec<(f64, String)>) -> Target {
        match self.worst(cells) {
            None => Target {
                name: name.into(),
                measured: "not measured".into(),
                required: self.required(),
                met: None,
                shortfall: String::new(),
            },
            Some((v, at)) => {
                let met = self.met(v);
                let shortfall = if met {
                    String::new()
                } else {
                    format!("by {:.1}% at {at}", self.missed_pct(v))
                };
                Target {
                    name: name.into(),
                    measured: format!("{} (worst, {at})", self.unit.show(v)),
                    required: self.required(),
                    met: Some(met),
                    shortfall,
                }
            }
        }
    }

    /// How far `v` is on the wrong side, in percent of the bound.
    pub fn missed_pct(self, v: f64) -> f64 {
        if self.at_least {
            (1.0 - v / self.value) * 100.0
        } else {
            (v / self.value - 1.0) * 100.0
        }
    }
}

/// `≤ value`.
pub const fn at_most(value: f64) -> Bound {
    Bound {
        value,
        at_least: false,
        unit: Unit::Times,
    }
}

/// `≥ value`.
pub const fn at_least(value: f64) -> Bound {
    Bound {
        value,
        at_least: true,
        unit: Unit::Times,
    }
}

/// A target of any suite, declared as data: `ratio(y3 row, base row)` in every cell the
/// suite pairs (a case, a case × thread count, ...), the worst of them within `bound`.
pub struct RatioTarget {
    /// What is required, in words.
    pub name: &'static str,
    /// The ratio's column in a report table (yomo), else empty.
    pub column: &'static str,
    /// The y3 row.
    pub y3: &'static str,
    /// The row it is compared with.
    pub base: &'static str,
    /// The ratio in one cell, when both rows measured it.
    pub ratio: fn(&Record, &Record) -> Option<f64>,
    /// Where the worst cell must stay.
    pub bound: Bound,
}

impl RatioTarget {
    /// The ratio in one cell: `y3`'s and `base`'s records there.
    pub fn in_cell(&self, y3: Option<&Record>, base: Option<&Record>) -> Option<f64> {
        (self.ratio)(y3?, base?)
    }

    /// The worst of `values` (largest for `≤`, smallest for `≥`), skipping what is not a
    /// number.
    fn worst<T>(&self, values: Vec<(f64, T)>) -> Option<(f64, T)> {
        self.bound.worst(values)
    }

    /// The target checked over `cells` (value, where), naming the worst cell (network
    /// reports: `1.2× (worst, 80 conns)`).
    pub fn check(&self, cells: Vec<(f64, String)>) -> Target {
        self.bound.check(self.name, cells)
    }

    /// The target checked over cells that must all have been measured (codec and serde
    /// reports: the worst ratio alone, `12×`, and by how much it falls short).
    pub fn check_all(&self, cells: Option<Vec<f64>>) -> Target {
        let bound = self.bound;
        let worst = cells.and_then(|c| self.worst(c.into_iter().map(|v| (v, ())).collect()));
        match worst {
            None => self.unmeasured(),
            Some((v, ())) => {
                let met = bound.met(v);
                let shortfall = if met {
                    String::new()
                } else if bound.at_least {
                    format!(
                        "missed by {:.0}% ({} short)",
                        bound.missed_pct(v),
                        ratio(bound.value / v)
                    )
                } else {
                    format!("missed by {:.0}%", bound.missed_pct(v))
                };
                Target {
                    name: self.name.into(),
                    measured: ratio(v),
                    required: bound.required(),
                    met: Some(met),
                    shortfall,
                }
            }
        }
    }

    fn unmeasured(&self) -> Target {
        Target {
            name: self.name.into(),
            measured: "not measured".into(),
            required: self.bound.required(),
            met: None,
            shortfall: String::new(),
        }
    }
}

/// An absolute target, declared as data: one row's own figure (`value(row)`, not a ratio
/// to another row) in every cell the suite pairs, the worst of them within `bound` (yomo:
/// y3's clients' paced p99 at most 2 ms, `at_most(2000.0).micros()`).
pub struct RowTarget {
    /// What is required, in words.
    pub name: &'static str,
    /// The figure's column in a report table.
    pub column: &'static str,
    /// The row whose figure is bounded.
    pub row: &'static str,
    /// The figure in one cell, when the row measured it.
    pub value: fn(&Record) -> Option<f64>,
    /// Where the worst cell must stay.
    pub bound: Bound,
}

impl RowTarget {
    /// The figure in one cell: the row's record there.
    pub fn in_cell(&self, row: Option<&Record>) -> Option<f64> {
        (self.value)(row?)
    }

    /// The target checked over `cells` (value, where), naming the worst cell
    /// (`2.63 ms (worst, relay 1024 B)`).
    pub fn check(&self, cells: Vec<(f64, String)>) -> Target {
        self.bound.check(self.name, cells)
    }
}

/// peer ns / y3 ns in one cell.
fn speedup(r: &Results, case: &str, order: &str, peer: &str, y3: &str, mode: &str) -> Option<f64> {
    let p = get(r, case, order, peer, mode)?;
    let y = get(r, case, order, y3, mode)?;
    Some(p.value(Metric::NsPerOp) / y.value(Metric::NsPerOp))
}

/// `base` ns/op ÷ `y3` ns/op: how many times faster the y3 row is.
fn ns_ratio(y3: &Record, base: &Record) -> Option<f64> {
    Some(base.value(Metric::NsPerOp) / y3.value(Metric::NsPerOp))
}

/// Which cases a codec target is checked over (serial, ascending order).
pub enum Over {
    /// One case.
    Case(&'static str),
    /// Every case of the report (all must have been measured).
    EveryCase,
}

/// The codec targets of the issue.
pub const CODEC_TARGETS: [(Over, RatioTarget); 6] = [
    (
        Over::Case("C63-K32"),
        RatioTarget {
            name: "C63-K32: y3-observe vs sonic-rs-get (speed-up)",
            column: "",
            y3: "y3-observe",
            base: "sonic-rs-get",
            ratio: ns_ratio,
            bound: at_least(10.0),
        },
    ),
    (
        Over::Case("C63-K32"),
        RatioTarget {
            name: "C63-K32: y3-observe vs the report's Go Y3 (go-y3-report, key at 32)",
            column: "",
            y3: "y3-observe",
            base: "go-y3-report",
            ratio: ns_ratio,
            bound: at_least(30.0),
        },
    ),
    (
        Over::Case("C63-K32"),
        RatioTarget {
            name: "C63-K32: y3-observe no slower than the protobuf skip-scan",
            column: "",
            y3: "y3-observe",
            base: "protobuf-scan",
            ratio: ns_ratio,
            bound: at_least(1.0),
        },
    ),
    (
        Over::EveryCase,
        RatioTarget {
            name: "every case: y3-observe vs sonic-rs-get (lowest speed-up)",
            column: "",
            y3: "y3-observe",
            base: "sonic-rs-get",
            ratio: ns_ratio,
            bound: at_least(10.0),
        },
    ),
    (
        Over::EveryCase,
        RatioTarget {
            name: "every case: y3-stream7 / y3-observe (highest)",
            column: "",
            y3: "y3-observe",
            base: "y3-stream7",
            ratio: ns_ratio,
            bound: at_most(STREAM7_BOUND),
        },
    ),
    (
        Over::EveryCase,
        RatioTarget {
            name: "every case: y3-stream7 / y3-stream7-floor (highest)",
            column: "",
            y3: "y3-stream7-floor",
            base: "y3-stream7",
            ratio: ns_ratio,
            bound: at_most(STREAM7_FLOOR_BOUND),
        },
    ),
];

/// The codec targets, checked from the results.
pub fn codec_targets(r: &Results) -> Vec<Target> {
    CODEC_TARGETS
        .iter()
        .map(|(over, t)| {
            let cases = match over {
                Over::Case(c) => vec![c.to_string()],
                Over::EveryCase => case_names(),
            };
            let cells: Option<Vec<f64>> = cases
                .iter()
                .map(|c| {
                    let row = |imp| get(r, c, "ascending", imp, "serial");
                    t.in_cell(row(t.y3), row(t.base))
                })
                .collect();
            t.check_all(cells)
        })
        .collect()
}

/// The targets as a table, every suite's; `absent` is the result of a target that could
/// not be measured (`n/a (peer not in this run)`).
pub fn targets_table(out: &mut String, targets: &[Target], absent: &str) {
    let mut t = Table::new([
        ("target", Align::Left),
        ("measured", Align::Right),
        ("required", Align::Right),
        ("result", Align::Left),
    ]);
    for x in targets {
        let result = match x.met {
            Some(true) => "met".to_string(),
            Some(false) => format!("**missed** — {}", x.shortfall),
            None => absent.to_string(),
        };
        t.row(
            &x.name,
            vec![
                x.name.as_str().into(),
                x.measured.as_str().into(),
                x.required.as_str().into(),
                result.into(),
            ],
        );
    }
    out.push_str(&t.markdown());
}

/// The opening list of the codec and serde reports (`templates/header.md`): machine,
/// command, method, how to read the figures, the run's notes.
fn header(out: &mut String, r: &Results) {
    let m = &r.meta;
    let h = m.harness.clone().unwrap_or_default();
    let go = if m.version("go").is_empty() {
        String::new()
    } else {
        format!(" · Go: {}", m.version("go"))
    };
    let seed = if m.suite == "codec" {
        format!("; published-order seed {}", h.seed)
    } else {
        String::new()
    };
    let notes: String = r.notes.iter().map(|n| format!("- Note: {n}\n")).collect();
    out.push_str(&fill(
        include_str!("templates/header.md"),
        &[
            ("machine", &m.machine),
            ("command", &m.command),
            ("go", &go),
            ("samples", &h.samples.to_string()),
            ("sample_ms", &h.sample_ms.to_string()),
            ("threads", &h.threads.to_string()),
            ("quick", if m.quick { "; **--quick** run" } else { "" }),
            ("seed", &seed),
            ("notes", &notes),
        ],
    ));
    out.push('\n');
}

/// The serial, ascending-order table: ns/op per case, then CPU, allocations and bytes at
/// C63-K32, then the report's rows.
fn codec_serial_table(r: &Results) -> Table {
    let cases = case_names();
    let mut right = cases.clone();
    right.extend(["C63-K32 CPU ns/op", "C63-K32 allocs/op", "C63-K32 bytes"].map(String::from));
    let mut t = Table::new(columns(&["implementation", "format"], &right));
    let serial: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.text(Dim::Mode) == "serial" && x.text(Dim::Order) == "ascending")
        .collect();
    for n in impl_names(&serial) {
        let fmt = serial
            .iter()
            .find(|x| x.implementation == n)
            .map_or("", |x| x.text(Dim::Format));
        let mut cells = vec![format!("`{n}`").into(), fmt.into()];
        cells.extend(
            cases
                .iter()
                .map(|c| ns_cell(get(r, c, "ascending", &n, "serial"))),
        );
        let last = get(r, "C63-K32", "ascending", &n, "serial");
        cells.push(Cell::maybe(last.map(|x| x.value(Metric::CpuNsPerOp)), ns));
        cells.push(Cell::maybe(
            last.and_then(|x| x.get(Metric::AllocsPerOp)),
            |a| format!("{a:.1}"),
        ));
        cells.push(Cell::maybe(last.map(|x| x.count(Dim::Bytes) as f64), |b| {
            b.to_string()
        }));
        t.row(&n, cells);
    }
    let mut report = vec!["*report: Go Y3 (Go 1.14, 2.6 GHz i7)*".into(), "y3".into()];
    report.extend(REPORT_Y3_SERIAL.iter().map(|&v| published(v, ns(v))));
    report.extend(["", "", ""].map(Cell::from));
    t.row("report-y3", report);
    let mut json = vec![
        "*report: Go JSON (Go 1.14, 2.6 GHz i7)*".into(),
        "json".into(),
    ];
    json.extend(
        REPORT_Y3_SERIAL
            .iter()
            .zip(REPORT_RATIOS)
            .map(|(v, k)| published(v * k, format!("≈{}", ns(v * k)))),
    );
    json.extend(["", "", ""].map(Cell::from));
    t.row("report-json", json);
    t
}

/// Speed-up of `y3-observe` over every other row, per case (serial, ascending).
fn codec_speedup_table(r: &Results, names: &[String]) -> Table {
    let cases = case_names();
    let mut t = Table::new(columns(&["peer"], &cases));
    for n in names.iter().filter(|n| n.as_str() != "y3-observe") {
        let mut cells = vec![format!("`{n}`").into()];
        cells.extend(
            cases
                .iter()
                .map(|c| Cell::maybe(speedup(r, c, "ascending", n, "y3-observe", "serial"), ratio)),
        );
        t.row(n, cells);
    }
    t
}

/// The parallel table: ns/op per thread per case, Mops/s and CPU at C63-K32.
fn codec_parallel_table(r: &Results) -> Table {
    let cases = case_names();
    let mut right = cases.clone();
    right.extend(["C63-K32 Mops/s", "C63-K32 CPU ns/op"].map(String::from));
    let mut t = Table::new(columns(&["implementation"], &right));
    let parallel: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.text(Dim::Mode) == "parallel" && x.text(Dim::Order) == "ascending")
        .collect();
    if parallel.is_empty() {
        return t;
    }
    for n in impl_names(&parallel) {
        let mut cells = vec![format!("`{n}`").into()];
        cells.extend(
            cases
                .iter()
                .map(|c| ns_cell(get(r, c, "ascending", &n, "parallel"))),
        );
        let last = get(r, "C63-K32", "ascending", &n, "parallel");
        cells.push(Cell::maybe(
            last.map(|x| x.value(Metric::OpsPerS) / 1e6),
            |v| format!("{v:.2}"),
        ));
        cells.push(Cell::maybe(last.map(|x| x.value(Metric::CpuNsPerOp)), ns));
        t.row(&n, cells);
    }
    let mut report = vec!["*report: Go Y3, GOMAXPROCS=12 (wall ÷ all ops)*".into()];
    report.extend(REPORT_Y3_PARALLEL.iter().map(|&v| published(v, ns(v))));
    report.extend(["", ""].map(Cell::from));
    t.row("report-y3", report);
    t
}

/// Issue 14's streaming bound: `y3-stream7` within this many times `y3-observe`.
const STREAM7_BOUND: f64 = 1.5;

/// Issue 30's streaming bound, on the floor the lab measures: `y3-stream7` within this
/// many times `y3-stream7-floor`.
const STREAM7_FLOOR_BOUND: f64 = 1.5;

/// A row's serial ns/op on a case in ascending order.
fn serial_ns(r: &Results, case: &str, imp: &str) -> Option<f64> {
    get(r, case, "ascending", imp, "serial").map(|x| x.value(Metric::NsPerOp))
}

/// Issue 14's streaming bound ([`STREAM7_BOUND`] × `y3-observe`) beside `y3-stream7` and
/// the streaming floor, per case; `None` where the floor was not measured (results from
/// before it).
fn stream7_floor_table(r: &Results) -> Option<Table> {
    let cases = case_names();
    let value = |c: &str, imp: &str| serial_ns(r, c, imp);
    if cases.iter().all(|c| value(c, "y3-stream7-floor").is_none()) {
        return None;
    }
    let mut t = Table::new(columns(&["ns/op"], &cases));
    let mut line =
        |key: &str, label: &str, f: &dyn Fn(&str) -> Option<f64>, fmt: fn(f64) -> String| {
            let mut cells = vec![Cell::from(label)];
            cells.extend(cases.iter().map(|c| Cell::maybe(f(c), fmt)));
            t.row(key, cells);
        };
    line(
        "bound",
        &format!("{STREAM7_BOUND} × `y3-observe` (the bound)"),
        &|c| value(c, "y3-observe").map(|v| STREAM7_BOUND * v),
        ns,
    );
    line("stream7", "`y3-stream7`", &|c| value(c, "y3-stream7"), ns);
    line(
        "floor",
        "`y3-stream7-floor`",
        &|c| value(c, "y3-stream7-floor"),
        ns,
    );
    line(
        "over",
        "`y3-stream7-floor` ÷ `y3-observe`",
        &|c| Some(value(c, "y3-stream7-floor")? / value(c, "y3-observe")?),
        ratio,
    );
    line(
        "to-floor",
        &format!("`y3-stream7` ÷ `y3-stream7-floor` (bound {STREAM7_FLOOR_BOUND})"),
        &|c| Some(value(c, "y3-stream7")? / value(c, "y3-stream7-floor")?),
        ratio,
    );
    Some(t)
}

/// The cases where issue 14's streaming bound is below the streaming floor, as
/// `C63-K32 (49.0 < 76.9 ns)`.
fn stream7_below_floor(r: &Results) -> Vec<String> {
    case_names()
        .iter()
        .filter_map(|c| {
            let bound = STREAM7_BOUND * serial_ns(r, c, "y3-observe")?;
            let floor = serial_ns(r, c, "y3-stream7-floor")?;
            (bound < floor).then(|| format!("{c} ({} < {} ns)", ns(bound), ns(floor)))
        })
        .collect()
}

/// The key-position sweep (C63 ascending, serial): ns/op per position.
fn codec_sweep_table(r: &Results) -> Table {
    let sweep = sweep_cases();
    let heads: Vec<String> = sweep.iter().map(|(c, p)| format!("{p} ({c})")).collect();
    let mut t = Table::new(columns(&["implementation"], &heads));
    let records: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| {
            x.text(Dim::Mode) == "serial"
                && x.text(Dim::Order) == "ascending"
                && sweep.iter().any(|(c, _)| c == &x.case)
        })
        .collect();
    for n in impl_names(&records) {
        let mut cells = vec![format!("`{n}`").into()];
        cells.extend(
            sweep
                .iter()
                .map(|(c, _)| ns_cell(get(r, c, "ascending", &n, "serial"))),
        );
        t.row(&n, cells);
    }
    t
}

/// The full codec report.
pub fn codec_markdown(r: &Results) -> String {
    let cases = case_names();
    let mut out = String::from("# Codec lab: take the value of one observed key\n\n");
    header(&mut out, r);
    let serial = codec_serial_table(r);
    out.push_str("## Serial, ascending order (key K at position K): median ns/op\n\n");
    out.push_str(&serial.markdown());
    out.push('\n');
    let _ = writeln!(
        out,
        "The report's JSON row is its Y3 row times its published JSON/Y3 ratios \
         ({}), except C63-K32, which it gives as {} ns.\n",
        REPORT_RATIOS
            .iter()
            .map(|v| format!("{v}"))
            .collect::<Vec<_>>()
            .join(", "),
        ns(REPORT_JSON_C63)
    );

    if let Some(t) = stream7_floor_table(r) {
        out.push_str("## Streaming in 7-byte chunks against its floor (serial, ascending)\n\n");
        out.push_str(&t.markdown());
        out.push_str(
            "\n`y3-stream7-floor` is `y3-floor`'s trusting walk fed the same 7-byte chunks, its \
             place kept between them: no check, no error, no level but the root. Where it is \
             above the bound, no checked walk across chunks meets the bound.\n\n",
        );
    }

    out.push_str(
        "## Speed-up of `y3-observe` (serial, ascending): peer ns/op ÷ y3-observe ns/op\n\n",
    );
    let names: Vec<String> = serial
        .rows
        .iter()
        .filter(|x| !x.key.starts_with("report-"))
        .map(|x| x.key.clone())
        .collect();
    out.push_str(&codec_speedup_table(r, &names).markdown());
    out.push('\n');

    let parallel = codec_parallel_table(r);
    if !parallel.is_empty() {
        let threads = r
            .records
            .iter()
            .find(|x| x.text(Dim::Mode) == "parallel" && x.text(Dim::Order) == "ascending")
            .map_or(0, |x| x.count(Dim::Threads));
        let _ = writeln!(
            out,
            "## Parallel ({threads} threads), ascending: median ns/op per thread, and aggregate \
             throughput at C63-K32\n"
        );
        out.push_str(&parallel.markdown());
        out.push('\n');
    }

    let published: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.text(Dim::Mode) == "serial" && x.text(Dim::Order) == "published")
        .collect();
    if !published.is_empty() {
        let _ = writeln!(
            out,
            "## Serial, published order (the report's random map order, seed {}): median ns/op\n",
            r.meta.harness.as_ref().map_or(0, |h| h.seed)
        );
        let heads: Vec<String> = cases
            .iter()
            .map(|c| {
                let pos = published
                    .iter()
                    .find(|x| &x.case == c)
                    .map_or(0, |x| x.count(Dim::KeyPos));
                format!("{c} (key at {pos})")
            })
            .collect();
        let mut t = Table::new(columns(&["implementation"], &heads));
        for n in impl_names(&published) {
            let mut cells = vec![format!("`{n}`").into()];
            cells.extend(
                cases
                    .iter()
                    .map(|c| ns_cell(get(r, c, "published", &n, "serial"))),
            );
            t.row(&n, cells);
        }
        out.push_str(&t.markdown());
        out.push('\n');
    }

    let sweep = codec_sweep_table(r);
    if !sweep.is_empty() {
        out.push_str("## Key position sweep, C63 ascending, serial: median ns/op\n\n");
        out.push_str(&sweep.markdown());
        out.push('\n');
    }

    out.push_str("## Targets\n\n");
    targets_table(&mut out, &codec_targets(r), ABSENT);
    out.push_str("\n## Charts\n\n");
    for (file, alt) in CODEC_CHARTS {
        let _ = writeln!(out, "![{alt}]({file})\n");
    }
    out
}

/// The sweep's cases and position names.
fn sweep_cases() -> Vec<(String, &'static str)> {
    SWEEP
        .iter()
        .map(|(n, k, p)| (format!("C{n:02}-K{k:02}"), *p))
        .collect()
}

/// Chart files of the codec report and their alt text.
pub const CODEC_CHARTS: [(&str, &str); 4] = [
    ("codec-serial.svg", "ns/op per case, serial"),
    ("codec-speedup.svg", "speed-up of y3-observe over each peer"),
    ("codec-parallel.svg", "ns/op per case, parallel"),
    ("codec-position.svg", "ns/op by key position, C63"),
];

/// The codec charts, each from its report table's figures: the headline rows' ns/op per
/// case (serial, parallel), their speed-ups, and ns/op by key position.
pub fn codec_charts(r: &Results) -> Vec<(String, BarChart)> {
    let cases = case_names();
    let per_case: Vec<usize> = (1..=cases.len()).collect();
    let serial = codec_serial_table(r);
    let threads = r
        .records
        .iter()
        .find(|x| x.text(Dim::Mode) == "parallel")
        .map_or(0, |x| x.count(Dim::Threads));
    let names: Vec<String> = serial.rows.iter().map(|x| x.key.clone()).collect();
    let peers: Vec<&str> = HEADLINE
        .iter()
        .copied()
        .filter(|n| *n != "y3-observe")
        .collect();
    let sweep = codec_sweep_table(r);
    let sweep_cols: Vec<usize> = (1..sweep.columns.len()).collect();
    vec![
        (
            "codec-serial.svg".into(),
            BarChart {
                title: "Take one observed key: ns/op, serial (lower is better)".into(),
                y_label: "ns/op (log)".into(),
                groups: cases.clone(),
                series: serial.series(
                    &HEADLINE,
                    &per_case.iter().map(|c| c + 1).collect::<Vec<_>>(),
                ),
                log: true,
            },
        ),
        (
            "codec-speedup.svg".into(),
            BarChart {
                title: "Speed-up of y3-observe: peer ns/op ÷ y3 ns/op, serial".into(),
                y_label: "× (log)".into(),
                groups: cases.clone(),
                series: codec_speedup_table(r, &names).series(&peers, &per_case),
                log: true,
            },
        ),
        (
            "codec-parallel.svg".into(),
            BarChart {
                title: format!("Take one observed key: ns/op per thread, {threads} threads"),
                y_label: "ns/op (log)".into(),
                groups: cases,
                series: codec_parallel_table(r).series(&HEADLINE, &per_case),
                log: true,
            },
        ),
        (
            "codec-position.svg".into(),
            BarChart {
                title: "C63: ns/op by position of the observed key, serial".into(),
                y_label: "ns/op (log)".into(),
                groups: sweep.headings(&sweep_cols),
                series: sweep.series(&HEADLINE, &sweep_cols),
                log: true,
            },
        ),
    ]
}

/// The short README section: machine, command, the serial table of the headline rows, the
/// targets and the charts (paths relative to the README, under `docs_rel`).
pub fn codec_summary(r: &Results, docs_rel: &str) -> String {
    let cases = case_names();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured on {} with `{}` ({}median of {} samples; Go {}).\n",
        r.meta.machine,
        r.meta.command,
        if r.meta.quick { "`--quick`, " } else { "" },
        r.meta.harness.as_ref().map_or(0, |h| h.samples),
        if r.meta.version("go").is_empty() {
            "not run"
        } else {
            r.meta.version("go")
        }
    );
    let mut right = cases.clone();
    right.push("y3 speed-up at C63-K32".into());
    let mut t = Table::new(columns(&["ns/op, serial"], &right));
    for n in HEADLINE {
        if get(r, "C63-K32", "ascending", n, "serial").is_none() {
            continue;
        }
        let mut cells = vec![format!("`{n}`").into()];
        cells.extend(
            cases
                .iter()
                .map(|c| ns_cell(get(r, c, "ascending", n, "serial"))),
        );
        cells.push(if n == "y3-observe" {
            Cell::figure(1.0, "1×".into())
        } else {
            Cell::maybe(
                speedup(r, "C63-K32", "ascending", n, "y3-observe", "serial"),
                ratio,
            )
        });
        t.row(n, cells);
    }
    let mut report = vec!["*report's Go Y3 (Go 1.14, i7)*".into()];
    report.extend(REPORT_Y3_SERIAL.iter().map(|&v| published(v, ns(v))));
    report.push("".into());
    t.row("report-y3", report);
    out.push_str(&t.markdown());
    out.push('\n');
    targets_table(&mut out, &codec_targets(r), ABSENT);
    let below = stream7_below_floor(r);
    if !below.is_empty() {
        let _ = writeln!(
            out,
            "\nThe streaming bound ({STREAM7_BOUND} × `y3-observe`) lies below the streaming floor measured in \
             the same run (`y3-stream7-floor`, a trusting walk fed the same 7-byte chunks) at {}: \
             [the streaming table]({docs_rel}/codec.md#streaming-in-7-byte-chunks-against-its-floor-serial-ascending).",
            below.join(" and ")
        );
    }
    let _ = writeln!(out, "\nFull tables (parallel, published order, key sweep, CPU time, allocations, all peers): [{docs_rel}/codec.md]({docs_rel}/codec.md).\n");
    for (file, alt) in CODEC_CHARTS.iter().take(2) {
        let _ = writeln!(out, "![{alt}]({docs_rel}/{file})\n");
    }
    out
}

/// The Erlang report's figures (msg/s): protobuf encode, decode.
pub const ERLANG_PROTOBUF: (f64, f64) = (103_000.0, 61_000.0);

/// An implementation's serial encode + decode round as one record: msg/s of the round in
/// `ops_per_s`.
fn serde_round(r: &Results, imp: &str) -> Option<Record> {
    let op = |name: &str| {
        r.records.iter().find(|x| {
            x.implementation == imp && x.text(Dim::Op) == name && x.text(Dim::Mode) == "serial"
        })
    };
    let ns = op("encode")?.value(Metric::NsPerOp) + op("decode")?.value(Metric::NsPerOp);
    Some(Record::new("serde", imp, "").metric(Metric::OpsPerS, 1e9 / ns))
}

/// The serde targets: y3 encode+decode at least prost's.
pub const SERDE_TARGETS: [RatioTarget; 1] = [RatioTarget {
    name: "envelope: y3-derive encode+decode msg/s ÷ prost's",
    column: "",
    y3: "y3-derive",
    base: "prost",
    ratio: |y, p| Some(y.value(Metric::OpsPerS) / p.value(Metric::OpsPerS)),
    bound: at_least(1.0),
}];

/// The serde targets, checked from the results.
pub fn serde_targets(r: &Results) -> Vec<Target> {
    SERDE_TARGETS
        .iter()
        .map(|t| {
            let v = t.in_cell(
                serde_round(r, t.y3).as_ref(),
                serde_round(r, t.base).as_ref(),
            );
            t.check_all(v.map(|v| vec![v]))
        })
        .collect()
}

fn kmsg(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else {
        format!("{:.0} k", v / 1e3)
    }
}

/// The serde suite's serial table: msg/s and ns of encode and decode per row, then the
/// Erlang report's figures.
fn serde_serial_table(r: &Results) -> Table {
    let mut t = Table::new(columns(
        &["implementation", "case"],
        &[
            "bytes",
            "encode msg/s",
            "decode msg/s",
            "encode+decode msg/s",
            "encode ns",
            "decode ns",
            "decode allocs",
        ]
        .map(String::from),
    ));
    let serial: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.text(Dim::Mode) == "serial")
        .collect();
    let op = |n: &str, op: &str| {
        serial
            .iter()
            .find(|x| x.implementation == n && x.text(Dim::Op) == op)
            .copied()
    };
    for n in impl_names(&serial) {
        let (Some(e), Some(d)) = (op(&n, "encode"), op(&n, "decode")) else {
            continue;
        };
        let (e_ns, d_ns) = (e.value(Metric::NsPerOp), d.value(Metric::NsPerOp));
        let msgs = |v: f64| Cell::figure(v, kmsg(v));
        t.row(
            &n,
            vec![
                format!("`{n}`").into(),
                e.case.as_str().into(),
                e.count(Dim::Bytes).to_string().into(),
                msgs(e.value(Metric::OpsPerS)),
                msgs(d.value(Metric::OpsPerS)),
                msgs(1e9 / (e_ns + d_ns)),
                Cell::figure(e_ns, ns(e_ns)),
                Cell::figure(d_ns, ns(d_ns)),
                Cell::maybe(d.get(Metric::AllocsPerOp), |a| format!("{a:.1}")),
            ],
        );
    }
    let (enc, dec) = ERLANG_PROTOBUF;
    t.row(
        "erlang",
        vec![
            "*Erlang report: protobuf (its machine)*".into(),
            "~130 B message".into(),
            "".into(),
            published(enc, kmsg(enc)),
            published(dec, kmsg(dec)),
            "".into(),
            "".into(),
            "".into(),
            "".into(),
        ],
    );
    t
}

/// The serde report.
pub fn serde_markdown(r: &Results) -> String {
    let mut out = String::from("# Serialization lab: encode and decode msg/s\n\n");
    header(&mut out, r);
    out.push_str("## Serial: messages per second (median), the Erlang report's unit\n\n");
    out.push_str(&serde_serial_table(r).markdown());
    out.push('\n');
    let parallel: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.text(Dim::Mode) == "parallel")
        .collect();
    if !parallel.is_empty() {
        let _ = writeln!(
            out,
            "## Parallel ({} threads): aggregate msg/s\n",
            parallel[0].count(Dim::Threads)
        );
        let mut t = Table::new(columns(
            &["implementation"],
            &["encode msg/s", "decode msg/s"].map(String::from),
        ));
        for n in impl_names(&parallel) {
            let op = |op: &str| {
                parallel
                    .iter()
                    .find(|x| x.implementation == n && x.text(Dim::Op) == op)
                    .map(|x| x.value(Metric::OpsPerS))
            };
            t.row(
                &n,
                vec![
                    format!("`{n}`").into(),
                    Cell::maybe(op("encode"), kmsg),
                    Cell::maybe(op("decode"), kmsg),
                ],
            );
        }
        out.push_str(&t.markdown());
        out.push('\n');
    }
    out.push_str("## Targets\n\n");
    targets_table(&mut out, &serde_targets(r), ABSENT);
    out.push_str("\n## Chart\n\n![encode and decode msg/s](serde.svg)\n");
    out
}

/// The serde chart: the serial table's encode and decode msg/s, in millions.
pub fn serde_charts(r: &Results) -> Vec<(String, BarChart)> {
    let table = serde_serial_table(r);
    let keys: Vec<&str> = table.rows.iter().map(|x| x.key.as_str()).collect();
    let series = table
        .series(&keys[..keys.len() - 1], &[3, 4])
        .into_iter()
        .map(|(n, v)| (n, v.into_iter().map(|x| x.map(|m| m / 1e6)).collect()))
        .collect();
    vec![(
        "serde.svg".into(),
        BarChart {
            title: "Envelope (~120 B) and MQTT PUBLISH: million msg/s, serial (higher is better)"
                .into(),
            y_label: "M msg/s".into(),
            groups: vec!["encode".into(), "decode".into()],
            series,
            log: false,
        },
    )]
}

/// The short README section for the serde suite.
pub fn serde_summary(r: &Results, docs_rel: &str) -> String {
    let mut out = format!(
        "Measured on {} with `{}`.\n\n",
        r.meta.machine, r.meta.command
    );
    out.push_str(&serde_serial_table(r).markdown());
    out.push('\n');
    targets_table(&mut out, &serde_targets(r), ABSENT);
    let _ = writeln!(out, "\n![encode and decode msg/s]({docs_rel}/serde.svg)\n");
    out
}

/// Fills a report template: every `{{name}}` in `template` becomes its value, in one pass
/// (a value is never searched for placeholders). The prose of the reports lives in Markdown
/// templates (`include_str!`), the figures come from code. A template file ends with a
/// newline that is not part of the text.
///
/// # Panics
/// When a placeholder of the template has no value, or a value no placeholder (a template
/// out of step with its code: caught by every test that renders a report).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut rest = template.strip_suffix('\n').unwrap_or(template);
    let mut out = String::with_capacity(rest.len());
    let mut used = vec![false; values.len()];
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find("}}").expect("a template placeholder is closed");
        let name = &after[..end];
        let Some(i) = values.iter().position(|(n, _)| *n == name) else {
            panic!("template placeholder {{{{{name}}}}} has no value");
        };
        used[i] = true;
        out.push_str(values[i].1);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    if let Some(i) = used.iter().position(|u| !u) {
        panic!("template has no {{{{{}}}}}", values[i].0);
    }
    out
}

/// One suite's report: what renders its results. Every suite of the lab has one, in
/// [`REPORTS`] (codec, serde) or [`crate::net::suites::SUITES`] (network suites), and the
/// publishing step of every command goes through it.
pub struct SuiteReport {
    /// `meta.suite` of its results (`codec`, `pingpong`, ...).
    pub suite: &'static str,
    /// The report's name: files `NAME.md`, README markers `y3-bench:NAME:start/end`.
    pub name: &'static str,
    /// The full Markdown report.
    pub markdown: fn(&Results) -> String,
    /// The charts: (file name, chart).
    pub charts: fn(&Results) -> Vec<(String, BarChart)>,
    /// The targets, checked.
    pub targets: fn(&Results) -> Vec<Target>,
    /// The README section, linking the report and charts under the given directory.
    pub summary: fn(&Results, &str) -> String,
    /// Whether the command prints the report's tables when it is done (network suites).
    pub print_tables: bool,
}

/// The codec and serde reports.
pub const REPORTS: [SuiteReport; 2] = [
    SuiteReport {
        suite: "codec",
        name: "codec",
        markdown: codec_markdown,
        charts: codec_charts,
        targets: codec_targets,
        summary: codec_summary,
        print_tables: false,
    },
    SuiteReport {
        suite: "serde",
        name: "serde",
        markdown: serde_markdown,
        charts: serde_charts,
        targets: serde_targets,
        summary: serde_summary,
        print_tables: false,
    },
];

/// The report of `suite` (results of an unknown suite render as ping-pong's, the first
/// network suite's).
pub fn suite_report(suite: &str) -> &'static SuiteReport {
    let net = crate::net::suites::SUITES;
    REPORTS
        .iter()
        .chain(net.iter().map(|s| s.report))
        .find(|s| s.suite == suite)
        .unwrap_or(net[0].report)
}

impl Results {
    /// The report's name: files `NAME.md`, README markers `y3-bench:NAME:start/end`.
    pub fn name(&self) -> &'static str {
        suite_report(&self.meta.suite).name
    }

    /// The full report, its charts (file name, chart) and its targets.
    pub fn render(&self) -> (String, Vec<(String, BarChart)>, Vec<Target>) {
        let s = suite_report(&self.meta.suite);
        ((s.markdown)(self), (s.charts)(self), (s.targets)(self))
    }

    /// The README section, linking the report and charts under `docs_rel`.
    pub fn summary(&self, docs_rel: &str) -> String {
        (suite_report(&self.meta.suite).summary)(self, docs_rel)
    }

    /// Whether the command prints the report's tables when it is done (network suites).
    pub fn print_tables(&self) -> bool {
        suite_report(&self.meta.suite).print_tables
    }
}

/// Writes a report (`name`.md plus charts) into `dir`; returns the files written.
///
/// # Errors
/// IO errors.
pub fn write_report(
    dir: &Path,
    name: &str,
    markdown: &str,
    charts: &[(String, BarChart)],
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    let md = dir.join(format!("{name}.md"));
    std::fs::write(&md, markdown)?;
    files.push(md);
    for (file, chart) in charts {
        if chart.is_empty() {
            continue;
        }
        let path = dir.join(file);
        charts::draw(chart, &path)?;
        files.push(path);
    }
    Ok(files)
}

/// Replaces the text between `<!-- y3-bench:{section}:start -->` and
/// `<!-- y3-bench:{section}:end -->` in `path` with `body`.
///
/// # Errors
/// When the file or a marker is missing.
pub fn update_readme(path: &Path, section: &str, body: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let out = replace_section(&text, section, body)
        .with_context(|| format!("{}: no y3-bench:{section} markers", path.display()))?;
    std::fs::write(path, out)?;
    Ok(())
}

/// The text with the marked section replaced (see [`update_readme`]).
///
/// # Errors
/// When a marker is missing or out of order.
pub fn replace_section(text: &str, section: &str, body: &str) -> Result<String> {
    let start = format!("<!-- y3-bench:{section}:start -->");
    let end = format!("<!-- y3-bench:{section}:end -->");
    let (Some(a), Some(b)) = (text.find(&start), text.find(&end)) else {
        bail!("markers missing");
    };
    if b < a {
        bail!("markers out of order");
    }
    Ok(format!(
        "{}{start}\n{}\n{}",
        &text[..a],
        body.trim_end(),
        &text[b..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{Measurement, Mode};

    fn rec(imp: &str, case: &str, order: &str, mode: Mode, ns_per_op: f64) -> Record {
        let m = Measurement {
            mode,
            threads: if mode == Mode::Serial { 1 } else { 2 },
            ns_per_op,
            ns_range: (ns_per_op, ns_per_op),
            cpu_ns_per_op: ns_per_op,
            ops_per_s: 1e9 / ns_per_op,
            samples: 5,
            batch: 100,
            allocs_per_op: Some(0.0),
        };
        let mut r = Record::from_measurement("codec", &m)
            .dim(Dim::Order, order)
            .dim(Dim::Format, "y3")
            .dim(Dim::Op, "observe")
            .dim(Dim::KeyPos, 32usize);
        r.implementation = imp.into();
        r.case = case.into();
        r
    }

    fn results() -> Results {
        let mut records = Vec::new();
        for c in case_names() {
            records.push(rec("y3-observe", &c, "ascending", Mode::Serial, 20.0));
            records.push(rec("y3-stream7", &c, "ascending", Mode::Serial, 26.0));
            records.push(rec("sonic-rs-get", &c, "ascending", Mode::Serial, 400.0));
            records.push(rec("protobuf-scan", &c, "ascending", Mode::Serial, 40.0));
            records.push(rec("go-y3-report", &c, "ascending", Mode::Serial, 500.0));
            records.push(rec("y3-observe", &c, "ascending", Mode::Parallel, 21.0));
            records.push(rec("y3-observe", &c, "published", Mode::Serial, 15.0));
        }
        Results {
            records,
            ..Results::default()
        }
    }

    #[test]
    fn targets_are_checked_with_shortfalls() {
        let mut r = results();
        for c in case_names() {
            r.records
                .push(rec("y3-stream7-floor", &c, "ascending", Mode::Serial, 13.0));
        }
        let t = codec_targets(&r);
        assert_eq!(t.len(), 6);
        assert_eq!((t[0].met, t[0].measured.as_str()), (Some(true), "20×"));
        // 500 / 20 = 25× against 30×: missed by 17%.
        assert_eq!(t[1].met, Some(false));
        assert!(t[1].shortfall.contains("17%"), "{}", t[1].shortfall);
        assert_eq!(t[2].met, Some(true));
        assert_eq!(t[4].met, Some(true));
        // 26 / 13 = 2× against 1.5× (issue 30's bound on the floor).
        assert_eq!((t[5].met, t[5].measured.as_str()), (Some(false), "2.0×"));
        let empty = codec_targets(&Results::default());
        assert!(empty.iter().all(|t| t.met.is_none()));
    }

    #[test]
    fn markdown_has_the_tables_and_report_rows() {
        let md = codec_markdown(&results());
        assert!(
            md.contains("| `y3-observe` | y3 | 20.0 | 20.0 | 20.0 | 20.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| `sonic-rs-get` | 20× | 20× | 20× | 20× |"),
            "{md}"
        );
        assert!(md.contains("*2\u{202f}077*"));
        assert!(md.contains("## Parallel (2 threads)"));
        assert!(md.contains("C63-K32 (key at 32)"));
        assert!(md.contains("![ns/op per case, serial](codec-serial.svg)"));
        let summary = codec_summary(&results(), "docs/bench");
        assert!(summary.contains("(docs/bench/codec.md)"));
        assert!(
            summary.contains("| `sonic-rs-get` | 400 | 400 | 400 | 400 | 20× |"),
            "{summary}"
        );
    }

    #[test]
    fn the_streaming_bound_is_set_beside_its_floor() {
        // Without the floor's row (results from before it): no table, no sentence.
        let mut r = results();
        assert!(stream7_floor_table(&r).is_none());
        assert!(!codec_markdown(&r).contains("against its floor"));
        // Bound 1.5 × 20 = 30 ns: the floor above it at C32 and C63 only.
        for (c, floor) in case_names().iter().zip([12.0, 29.0, 31.0, 45.0]) {
            r.records
                .push(rec("y3-stream7-floor", c, "ascending", Mode::Serial, floor));
        }
        let md = codec_markdown(&r);
        assert!(md.contains("| 1.5 × `y3-observe` (the bound) | 30.0 | 30.0 | 30.0 | 30.0 |"));
        assert!(md.contains("| `y3-stream7-floor` ÷ `y3-observe` | 0.60× | 1.4× | 1.6× | 2.2× |"));
        assert_eq!(
            stream7_below_floor(&r),
            ["C32-K16 (30.0 < 31.0 ns)", "C63-K32 (30.0 < 45.0 ns)"]
        );
        assert!(codec_summary(&r, "docs/bench").contains("at C32-K16 (30.0 < 31.0 ns) and C63-K32"));
    }

    #[test]
    fn fill_replaces_placeholders_once() {
        let text = fill("# {{a}}\n{{b}} and {a}\n", &[("a", "x {{b}}"), ("b", "y")]);
        assert_eq!(text, "# x {{b}}\ny and {a}");
    }

    #[test]
    fn readme_section_is_replaced_between_markers() {
        let text = "a\n<!-- y3-bench:codec:start -->\nold\n<!-- y3-bench:codec:end -->\nb\n";
        let out = replace_section(text, "codec", "new table\n").unwrap();
        assert_eq!(
            out,
            "a\n<!-- y3-bench:codec:start -->\nnew table\n<!-- y3-bench:codec:end -->\nb\n"
        );
        assert!(replace_section("no markers", "codec", "x").is_err());
    }

    #[test]
    fn writes_markdown_and_charts() {
        let r = results();
        let dir = std::env::temp_dir().join(format!("y3-bench-report-{}", std::process::id()));
        let files = write_report(&dir, "codec", &codec_markdown(&r), &codec_charts(&r)).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
            .collect();
        assert!(names.contains(&"codec.md".to_string()));
        assert!(names.contains(&"codec-serial.svg".to_string()));
        assert!(names.contains(&"codec-speedup.svg".to_string()));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn number_formats() {
        assert_eq!(ns(21.34), "21.3");
        assert_eq!(ns(43010.0), "43\u{202f}010");
        assert_eq!(ratio(20.4), "20×");
        assert_eq!(ratio(1.26), "1.3×");
        assert_eq!(ratio(0.844), "0.84×");
    }
}
