//! The lab's one data model: every suite (codec, serde, every network suite) measures rows
//! of one [`Record`] type, kept in one [`Results`] file type with one [`Meta`].
//!
//! A record is (suite, dimensions, implementation, metrics): the case in words, the named
//! dimensions that place it (`mode`, `threads`, `sessions`, `payload`, ...), the
//! implementation that ran, and the named metrics it measured (`ns_per_op`, `msg_per_s`,
//! `p99_us`, ...), with the number of runs the medians are over and the spread of one of
//! them.
//!
//! ```json
//! {"suite":"codec","impl":"y3-observe","case":"C63-K32",
//!  "dims":{"order":"ascending","position":"middle","key_pos":32,"lang":"rust",
//!          "format":"y3","op":"observe","mode":"serial","threads":1,"bytes":333,
//!          "batch":1880000},
//!  "metrics":{"ns_per_op":21.3,"cpu_ns_per_op":21.2,"ops_per_s":4.7e7,"allocs_per_op":0.0},
//!  "runs":11}
//! {"suite":"pingpong","impl":"y3-transport","case":"100 sessions",
//!  "dims":{"sessions":100,"threads":1,"payload":100},
//!  "metrics":{"seconds":0.91,"messages":819200.0,"msg_per_s":900219.8},
//!  "runs":3,"range":{"metric":"seconds","low":0.9,"high":0.93}}
//! ```
//!
//! A dimension that does not apply is absent (a count reads as 0, a name as empty), as is a
//! metric that was not measured. Files written before this model (flat rows, `NetRecord`s)
//! are upgraded when read ([`Results::read_json`]); `bench/go` still prints flat codec rows,
//! one JSON object per line, read through the same upgrade ([`Record::from_flat`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::measure::Measurement;

/// A named dimension of a row: what places it among the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    /// Codec: `ascending` or `published` wire order.
    Order,
    /// Codec: `first`, `middle`, `last`, `pos N`.
    Position,
    /// Codec: 1-based position of the observed key on the wire.
    KeyPos,
    /// `rust` or `go`.
    Lang,
    /// Wire format (`y3`, `json`, `protobuf`, ...).
    Format,
    /// What one op does: `observe`, `get`, `encode`, `decode`, ...
    Op,
    /// `serial` or `parallel`.
    Mode,
    /// Threads that ran ops (codec, serde), of each side (ping-pong) or of the server (echo).
    Threads,
    /// Input (or output) size in bytes.
    Bytes,
    /// Ops per thread per sample.
    Batch,
    /// Sessions (ping-pong) or connections (echo).
    Sessions,
    /// Message or payload size in bytes (ping-pong: the first body).
    Payload,
    /// Subscribers, sinks or functions that receive each message.
    Subscribers,
    /// The transport under the clients (`tcp`, `quic`).
    Transport,
    /// The paced run's rate, msg/s.
    Rate,
    /// Messages of the paced run.
    Paced,
    /// e2e: which side used more CPU per message in the flat-out run, `clients` (the lab's
    /// publisher and subscribers) or `broker`; a `clients` cell measures the clients as
    /// much as the broker.
    Bound,
}

/// The value of a dimension: a count or a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Level {
    /// A count (threads, bytes, sessions).
    Count(u64),
    /// A name (mode, order, format).
    Name(String),
}

impl From<usize> for Level {
    fn from(v: usize) -> Level {
        Level::Count(v as u64)
    }
}

impl From<u64> for Level {
    fn from(v: u64) -> Level {
        Level::Count(v)
    }
}

impl From<&str> for Level {
    fn from(v: &str) -> Level {
        Level::Name(v.into())
    }
}

impl From<String> for Level {
    fn from(v: String) -> Level {
        Level::Name(v)
    }
}

impl Level {
    /// Whether the dimension does not apply (0 or empty): such a level is not recorded.
    fn is_blank(&self) -> bool {
        match self {
            Level::Count(v) => *v == 0,
            Level::Name(s) => s.is_empty(),
        }
    }
}

/// A named metric of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Median wall time per op per thread, ns.
    NsPerOp,
    /// Median process CPU time per op, ns.
    CpuNsPerOp,
    /// Aggregate ops per second.
    OpsPerS,
    /// Allocations per op.
    AllocsPerOp,
    /// Median wall time of the timed part, seconds.
    Seconds,
    /// Messages (ping-pong: sent by both sides; echo: round trips; e2e: published; yomo:
    /// written by the source).
    Messages,
    /// Messages per second (echo: QPS; e2e: published msg/s, each delivered to every
    /// subscriber; yomo: received by the sink, first to last arrival).
    MsgPerS,
    /// Median latency, µs.
    P50Us,
    /// 99th percentile latency, µs.
    P99Us,
    /// 99.9th percentile latency, µs.
    P999Us,
    /// Server CPU over the timed window, percent of one core (200% = two cores busy).
    ServerCpuPct,
    /// Router CPU (user + system) per routed frame, µs.
    CpuUsPerFrame,
    /// Router CPU (user + system) per message sent, ns.
    RouterNsPerMsg,
    /// Payload bytes delivered to all functions together.
    BytesToFunctions,
    /// The source's CPU per message sent, ns.
    SourceNsPerMsg,
    /// e2e: the clients' CPU (publisher and subscribers, the lab's process) per message
    /// published, ns.
    ClientsNsPerMsg,
    /// The functions' CPU (client I/O, filter evaluation) per message sent, ns.
    FunctionsNsPerMsg,
    /// Highest latency of the paced run, µs.
    MaxUs,
    /// Median latency of the flat-out run (mostly queueing), µs.
    LoadedP50Us,
    /// 99th percentile latency of the flat-out run, µs.
    LoadedP99Us,
}

/// The lowest and highest value of one metric over a row's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// The metric.
    pub metric: Metric,
    /// Lowest of the runs.
    pub low: f64,
    /// Highest of the runs.
    pub high: f64,
}

/// One measured row: (suite, dimensions, implementation, metrics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `codec`, `serde`, `pingpong`, `echo`, `e2e`, `yomo`, `pipeline`, `filter`, ...
    pub suite: String,
    /// Implementation (`y3-observe`, `sonic-rs-get`, `go-gjson`, `y3-transport`, `nats`, ...).
    #[serde(rename = "impl")]
    pub implementation: String,
    /// The case in words (`C63-K32`, `1000 sessions`, `64 B × 5 subs`, `relay 64 B`).
    pub case: String,
    /// What places the row, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dims: BTreeMap<Dim, Level>,
    /// What was measured, by name.
    #[serde(default)]
    pub metrics: BTreeMap<Metric, f64>,
    /// Runs (network suites) or samples (codec, serde) the medians are over.
    #[serde(default)]
    pub runs: usize,
    /// The spread of one metric over the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<Range>,
}

impl Record {
    /// A row of `suite` for `implementation` in `case`, with nothing measured yet.
    pub fn new(suite: &str, implementation: &str, case: &str) -> Record {
        Record {
            suite: suite.into(),
            implementation: implementation.into(),
            case: case.into(),
            ..Record::default()
        }
    }

    /// A `rust` row from a harness measurement (mode, threads, batch, ns/CPU ns per op,
    /// ops/s, allocations, samples); the caller names it.
    pub fn from_measurement(suite: &str, m: &Measurement) -> Record {
        let mut r = Record::new(suite, "", "")
            .dim(Dim::Lang, "rust")
            .dim(Dim::Mode, m.mode.name())
            .dim(Dim::Threads, m.threads)
            .dim(Dim::Batch, m.batch)
            .metric(Metric::NsPerOp, m.ns_per_op)
            .metric(Metric::CpuNsPerOp, m.cpu_ns_per_op)
            .metric(Metric::OpsPerS, m.ops_per_s);
        if let Some(a) = m.allocs_per_op {
            r = r.metric(Metric::AllocsPerOp, a);
        }
        r.runs = m.samples;
        r
    }

    /// With dimension `d` at `level` (not recorded when 0 or empty: it does not apply).
    pub fn dim(mut self, d: Dim, level: impl Into<Level>) -> Record {
        self.set_dim(d, level);
        self
    }

    /// Sets dimension `d` (removes it when 0 or empty).
    pub fn set_dim(&mut self, d: Dim, level: impl Into<Level>) {
        let level = level.into();
        if level.is_blank() {
            self.dims.remove(&d);
        } else {
            self.dims.insert(d, level);
        }
    }

    /// With metric `m` at `value`.
    pub fn metric(mut self, m: Metric, value: f64) -> Record {
        self.metrics.insert(m, value);
        self
    }

    /// With metric `m` at `value` where measured.
    pub fn metric_opt(mut self, m: Metric, value: Option<f64>) -> Record {
        if let Some(v) = value {
            self.metrics.insert(m, v);
        }
        self
    }

    /// With `runs` runs and no spread recorded.
    pub fn with_runs(mut self, runs: usize) -> Record {
        self.runs = runs;
        self
    }

    /// With `runs` runs whose `metric` spread from `low` to `high`.
    pub fn with_spread(mut self, runs: usize, metric: Metric, (low, high): (f64, f64)) -> Record {
        self.runs = runs;
        self.range = Some(Range { metric, low, high });
        self
    }

    /// Metric `m`, where measured.
    pub fn get(&self, m: Metric) -> Option<f64> {
        self.metrics.get(&m).copied()
    }

    /// Metric `m`, 0 where not measured.
    pub fn value(&self, m: Metric) -> f64 {
        self.get(m).unwrap_or(0.0)
    }

    /// Dimension `d` as a name (empty where it does not apply, or is a count).
    pub fn text(&self, d: Dim) -> &str {
        match self.dims.get(&d) {
            Some(Level::Name(s)) => s,
            _ => "",
        }
    }

    /// Dimension `d` as a count (0 where it does not apply, or is a name).
    pub fn count(&self, d: Dim) -> usize {
        match self.dims.get(&d) {
            Some(Level::Count(v)) => *v as usize,
            _ => 0,
        }
    }

    /// The lowest and highest value of the runs' spread ((0, 0) when not recorded).
    pub fn spread(&self) -> (f64, f64) {
        self.range.map_or((0.0, 0.0), |r| (r.low, r.high))
    }

    /// A row from a flat JSON object, the shape `bench/go` prints and the lab wrote before
    /// this model: `suite`, `impl`, `case`, dimensions and metrics side by side, `samples`
    /// or `runs`, and `range` as `[low, high]` of `seconds` (ping-pong) or `msg_per_s`.
    ///
    /// # Errors
    /// A field that is none of these, or of the wrong type.
    pub fn from_flat(value: Value) -> Result<Record> {
        let Value::Object(fields) = value else {
            bail!("a flat record is a JSON object");
        };
        let mut r = Record::default();
        let mut range = None;
        for (key, v) in fields {
            let name = Value::String(key.clone());
            match key.as_str() {
                "suite" => r.suite = serde_json::from_value(v)?,
                "impl" => r.implementation = serde_json::from_value(v)?,
                "case" => r.case = serde_json::from_value(v)?,
                "samples" | "runs" => r.runs = serde_json::from_value(v)?,
                "range" => range = Some(serde_json::from_value::<(f64, f64)>(v)?),
                _ => {
                    if let Ok(d) = serde_json::from_value::<Dim>(name.clone()) {
                        let level: Level = serde_json::from_value(v)
                            .with_context(|| format!("dimension {key}"))?;
                        r.set_dim(d, level);
                    } else if let Ok(m) = serde_json::from_value::<Metric>(name) {
                        // An absent optional metric was written as null, or left out.
                        if let Some(x) = serde_json::from_value::<Option<f64>>(v)
                            .with_context(|| format!("metric {key}"))?
                        {
                            r.metrics.insert(m, x);
                        }
                    } else {
                        bail!("unknown field {key:?} in a flat record");
                    }
                }
            }
        }
        if let Some((low, high)) = range.filter(|&(l, h)| (l, h) != (0.0, 0.0)) {
            let metric = if r.suite == "pingpong" {
                Metric::Seconds
            } else {
                Metric::MsgPerS
            };
            r.range = Some(Range { metric, low, high });
        }
        Ok(r)
    }
}

/// The harness settings of a codec or serde run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Harness {
    /// Seed of the published order.
    pub seed: u64,
    /// Samples per measurement.
    pub samples: usize,
    /// Target sample length in ms.
    pub sample_ms: u64,
    /// Threads in parallel mode.
    pub threads: usize,
    /// Whether the peers feature was compiled in.
    pub peers: bool,
}

/// Where and how the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The suite (`codec`, `serde`, `pingpong`, ...).
    pub suite: String,
    /// The command line that produced the file.
    pub command: String,
    /// CPU model, cores, OS.
    pub machine: String,
    /// The lab's version.
    pub lab_version: String,
    /// `--quick`.
    pub quick: bool,
    /// How the processes were pinned to cores, in words (network suites).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pinning: String,
    /// `(peer, version)`: every peer that reported a version (`go` for the Go side).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<(String, String)>,
    /// The harness settings (codec, serde).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<Harness>,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

impl Meta {
    /// The metadata of a run of `suite` on this machine, stamped now.
    pub fn now(suite: &str, command: &str, quick: bool) -> Meta {
        Meta {
            suite: suite.into(),
            command: command.into(),
            machine: crate::system::machine(),
            lab_version: env!("CARGO_PKG_VERSION").into(),
            quick,
            started_unix: crate::system::unix_now(),
            ..Meta::default()
        }
    }

    /// The version `peer` reported (empty when it did not run).
    pub fn version(&self, peer: &str) -> &str {
        self.versions
            .iter()
            .find(|(p, _)| p == peer)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// A whole results file: written by `--json`, read back by `--from`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Run metadata.
    pub meta: Meta,
    /// Codec: wire order of each published-order data set (`case` → keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<(String, Vec<u32>)>,
    /// The rows.
    pub records: Vec<Record>,
    /// Skipped rows, disabled or missing peers, timeouts.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Results {
    /// The results of a run: its metadata, records and notes.
    pub fn of(meta: Meta, records: Vec<Record>, notes: Vec<String>) -> Results {
        Results {
            meta,
            records,
            notes,
            ..Results::default()
        }
    }

    /// The first record of `implementation` in `case` that `also` accepts.
    pub fn find_where(
        &self,
        case: &str,
        implementation: &str,
        also: impl Fn(&Record) -> bool,
    ) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.case == case && r.implementation == implementation && also(r))
    }

    /// The record of `implementation` in `case` with `threads` (any thread count when 0).
    pub fn find(&self, case: &str, implementation: &str, threads: usize) -> Option<&Record> {
        self.find_where(case, implementation, |r| {
            threads == 0 || r.count(Dim::Threads) == threads
        })
    }

    /// Cases in the order they were first measured.
    pub fn cases(&self) -> Vec<String> {
        first_seen(self.records.iter().map(|r| &r.case))
    }

    /// Implementations in the order they were first measured.
    pub fn impls(&self) -> Vec<String> {
        first_seen(self.records.iter().map(|r| &r.implementation))
    }

    /// Thread counts present, ascending.
    pub fn threads(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.records.iter().map(|r| r.count(Dim::Threads)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Writes the results as pretty JSON (creating the directory).
    ///
    /// # Errors
    /// IO errors.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    /// Reads a results file, upgrading one written before this model (see
    /// [`Results::from_value`]).
    ///
    /// # Errors
    /// IO and parse errors.
    pub fn read_json(path: &Path) -> Result<Results> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let value: Value = serde_json::from_str(&text)?;
        Results::from_value(value).with_context(|| format!("reading {}", path.display()))
    }

    /// Results from their JSON, in this model or the one before it: flat records (codec and
    /// serde `Record`s, network `NetRecord`s, see [`Record::from_flat`]) become records of
    /// this model, and the old metadata's `go_version` becomes the version of `go`, its
    /// `seed`, `samples`, `sample_ms`, `threads` and `peers` the [`Harness`]. Nothing is
    /// lost: every figure keeps its value and meaning.
    ///
    /// # Errors
    /// Parse errors, or a field neither model knows.
    pub fn from_value(mut value: Value) -> Result<Results> {
        if let Some(meta) = value.get_mut("meta").and_then(Value::as_object_mut) {
            if let Some(go) = meta.remove("go_version") {
                let go: String = serde_json::from_value(go)?;
                if !go.is_empty() {
                    let versions = meta.entry("versions").or_insert(Value::Array(Vec::new()));
                    if let Value::Array(list) = versions {
                        list.push(serde_json::json!(["go", go]));
                    }
                }
            }
            if meta.contains_key("seed") {
                let mut harness = serde_json::Map::new();
                for key in ["seed", "samples", "sample_ms", "threads", "peers"] {
                    if let Some(v) = meta.remove(key) {
                        harness.insert(key.into(), v);
                    }
                }
                meta.insert("harness".into(), Value::Object(harness));
            }
        }
        if let Some(records) = value.get_mut("records").and_then(Value::as_array_mut) {
            for r in records.iter_mut() {
                if r.get("metrics").is_none() {
                    let flat = Record::from_flat(r.take())?;
                    *r = serde_json::to_value(flat)?;
                }
            }
        }
        Ok(serde_json::from_value(value)?)
    }

    /// Reads one suite's results written in parts (say, the long 10 000-session ping-pong
    /// run with fewer runs than the rest) and joins them: records and notes of every part in
    /// order, the first part's metadata with every part's command line and every peer
    /// version.
    ///
    /// # Errors
    /// IO and parse errors, no file, or parts of different suites or machines.
    pub fn read_parts(paths: &[impl AsRef<Path>]) -> Result<Results> {
        let mut parts = paths.iter().map(|p| Results::read_json(p.as_ref()));
        let mut all = parts.next().context("no results file")??;
        for part in parts {
            let part = part?;
            anyhow::ensure!(
                part.meta.suite == all.meta.suite && part.meta.machine == all.meta.machine,
                "cannot join {} results from {} with {} results from {}",
                part.meta.suite,
                part.meta.machine,
                all.meta.suite,
                all.meta.machine
            );
            all.meta.command = format!("{}` and `{}", all.meta.command, part.meta.command);
            all.meta.quick |= part.meta.quick;
            for v in part.meta.versions {
                if !all.meta.versions.contains(&v) {
                    all.meta.versions.push(v);
                }
            }
            all.records.extend(part.records);
            all.notes.extend(part.notes);
        }
        Ok(all)
    }
}

/// The distinct names, in the order first seen.
fn first_seen<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Mode;

    fn sample_record(implementation: &str, case: &str, ns: f64) -> Record {
        let m = Measurement {
            mode: Mode::Serial,
            threads: 1,
            ns_per_op: ns,
            ns_range: (ns, ns),
            cpu_ns_per_op: ns,
            ops_per_s: 1e9 / ns,
            samples: 3,
            batch: 10,
            allocs_per_op: Some(0.0),
        };
        let mut r = Record::from_measurement("codec", &m)
            .dim(Dim::Order, "ascending")
            .dim(Dim::Format, "y3")
            .dim(Dim::Op, "observe");
        r.implementation = implementation.into();
        r.case = case.into();
        r
    }

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("y3-lab-record-{name}-{}", std::process::id()))
    }

    #[test]
    fn json_round_trip_with_impl_key() {
        let results = Results {
            records: vec![sample_record("y3-observe", "C63-K32", 20.0)],
            ..Results::default()
        };
        let dir = temp("codec");
        let path = dir.join("r.json");
        results.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""impl": "y3-observe""#), "{text}");
        assert!(text.contains(r#""ns_per_op": 20.0"#));
        assert_eq!(Results::read_json(&path).unwrap(), results);
        std::fs::remove_dir_all(dir).unwrap();
        let serial = |r: &Record| r.text(Dim::Mode) == "serial";
        assert!(results
            .find_where("C63-K32", "y3-observe", serial)
            .is_some());
        assert!(results
            .find_where("C63-K32", "y3-observe", |r| r.text(Dim::Mode) == "parallel")
            .is_none());
    }

    #[test]
    fn go_lines_parse_as_records() {
        let line = r#"{"suite":"codec","case":"C03-K02","order":"ascending","position":"middle",
            "key_pos":2,"impl":"go-gjson","lang":"go","format":"json","op":"get",
            "mode":"serial","threads":1,"ns_per_op":50.5,"cpu_ns_per_op":50.1,
            "ops_per_s":19801980.1,"allocs_per_op":0,"bytes":28,"samples":5,"batch":1000}"#;
        let r = Record::from_flat(serde_json::from_str(line).unwrap()).unwrap();
        assert_eq!(
            (r.implementation.as_str(), r.get(Metric::AllocsPerOp)),
            ("go-gjson", Some(0.0))
        );
        assert_eq!((r.text(Dim::Lang), r.count(Dim::KeyPos)), ("go", 2));
        assert_eq!((r.runs, r.count(Dim::Batch)), (5, 1000));
        let bad = r#"{"suite":"codec","impl":"x","case":"c","color":"red"}"#;
        let err = Record::from_flat(serde_json::from_str(bad).unwrap()).unwrap_err();
        assert!(err.to_string().contains("color"), "{err}");
    }

    #[test]
    fn old_files_upgrade_with_every_figure() {
        let old = r#"{"meta":{"suite":"codec","command":"c","machine":"m","lab_version":"0.1.0",
            "go_version":"go1.26","seed":7,"quick":false,"samples":11,"sample_ms":40,
            "threads":2,"peers":true,"started_unix":1},
          "orders":[["C03-K02",[2,1,3]]],
          "records":[{"suite":"codec","case":"C03-K02","order":"ascending","position":"",
            "key_pos":2,"impl":"y3-observe","lang":"rust","format":"y3","op":"observe",
            "mode":"serial","threads":1,"ns_per_op":9.5,"cpu_ns_per_op":9.4,
            "ops_per_s":1.0e8,"bytes":13,"samples":11,"batch":100}],
          "notes":["n"]}"#;
        let r = Results::from_value(serde_json::from_str(old).unwrap()).unwrap();
        assert_eq!(r.meta.version("go"), "go1.26");
        assert_eq!(
            r.meta.harness.as_ref().map(|h| (h.seed, h.threads)),
            Some((7, 2))
        );
        let x = &r.records[0];
        assert_eq!(
            (x.value(Metric::NsPerOp), x.get(Metric::AllocsPerOp)),
            (9.5, None)
        );
        assert_eq!((x.text(Dim::Position), x.count(Dim::Bytes)), ("", 13));
        assert!(
            !x.dims.contains_key(&Dim::Position),
            "blank dimensions are absent"
        );
        let net = r#"{"meta":{"suite":"pingpong","command":"c","machine":"m","lab_version":"0",
            "quick":true,"pinning":"p","versions":[["tokio","1"]],"started_unix":1},
          "records":[{"suite":"pingpong","impl":"tokio","case":"100 sessions","sessions":100,
            "threads":1,"payload":100,"subscribers":0,"seconds":0.9,"messages":819200,
            "msg_per_s":900000.0,"p50_us":null,"runs":3,"range":[0.8,1.0]}]}"#;
        let r = Results::from_value(serde_json::from_str(net).unwrap()).unwrap();
        let x = &r.records[0];
        assert_eq!(x.range.map(|g| g.metric), Some(Metric::Seconds));
        assert_eq!((x.spread(), x.runs), ((0.8, 1.0), 3));
        assert_eq!(
            (x.value(Metric::Messages), x.get(Metric::P50Us)),
            (819_200.0, None)
        );
        assert_eq!(r.meta.harness, None);
        // Upgrading what is already upgraded changes nothing.
        let again = Results::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(again, r);
    }

    #[test]
    fn json_round_trip_and_lookups() {
        let rec = |imp: &str, threads: usize| {
            Record::new("pingpong", imp, "100 sessions")
                .dim(Dim::Sessions, 100usize)
                .dim(Dim::Threads, threads)
                .dim(Dim::Payload, 100usize)
                .metric(Metric::Seconds, 1.5)
                .metric(Metric::Messages, 819_200.0)
                .metric(Metric::MsgPerS, 546_133.3)
                .with_spread(3, Metric::Seconds, (1.4, 1.6))
        };
        let results = Results {
            records: vec![rec("y3-transport", 1), rec("asio", 1), rec("asio", 2)],
            ..Results::default()
        };
        let dir = temp("net");
        let path = dir.join("r.json");
        results.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""impl": "y3-transport""#), "{text}");
        assert!(!text.contains("p50_us"), "absent percentiles are left out");
        assert_eq!(Results::read_json(&path).unwrap(), results);
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(results.impls(), ["y3-transport", "asio"]);
        assert_eq!(results.threads(), [1, 2]);
        assert_eq!(results.cases(), ["100 sessions"]);
        assert!(results.find("100 sessions", "asio", 2).is_some());
        assert!(results.find("100 sessions", "y3-transport", 2).is_none());
    }

    #[test]
    fn parts_of_one_suite_join_in_order() {
        let part = |case: &str, command: &str, suite: &str| Results {
            meta: Meta {
                suite: suite.into(),
                command: command.into(),
                machine: "m".into(),
                versions: vec![("tokio".into(), "1".into())],
                ..Meta::default()
            },
            records: vec![Record::new(suite, "tokio", case)],
            notes: vec![format!("note {case}")],
            ..Results::default()
        };
        let dir = temp("parts");
        let paths = [dir.join("a.json"), dir.join("b.json"), dir.join("c.json")];
        part("100 sessions", "y3 a", "pingpong")
            .write_json(&paths[0])
            .unwrap();
        part("10000 sessions", "y3 b", "pingpong")
            .write_json(&paths[1])
            .unwrap();
        part("80 conns", "y3 c", "echo")
            .write_json(&paths[2])
            .unwrap();
        let joined = Results::read_parts(&paths[..2]).unwrap();
        assert_eq!(joined.cases(), ["100 sessions", "10000 sessions"]);
        assert_eq!(joined.notes, ["note 100 sessions", "note 10000 sessions"]);
        assert_eq!(joined.meta.command, "y3 a` and `y3 b");
        assert_eq!(joined.meta.versions.len(), 1, "versions are not repeated");
        let err = Results::read_parts(&paths[1..]).unwrap_err();
        assert!(err.to_string().contains("cannot join echo"), "{err}");
        let none: [&Path; 0] = [];
        assert!(Results::read_parts(&none).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
