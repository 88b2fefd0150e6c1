//! The machine-readable results: one [`Record`] per case × implementation × mode.
//!
//! ```json
//! {"suite":"codec","case":"C63-K32","order":"ascending","position":"middle","key_pos":32,
//!  "impl":"y3-observe","lang":"rust","format":"y3","op":"observe","mode":"serial",
//!  "threads":1,"ns_per_op":21.3,"cpu_ns_per_op":21.2,"ops_per_s":4.7e7,
//!  "allocs_per_op":0.0,"bytes":333,"samples":11,"batch":1880000}
//! ```
//!
//! A results file is a [`Results`] object: the run's metadata, the records, and notes
//! (skipped rows, disabled peers). Go rows come from `bench/go`, which prints the same
//! record shape, one JSON object per line.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::measure::Measurement;

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `codec` or `serde`.
    pub suite: String,
    /// `C63-K32`, or the serde message name.
    pub case: String,
    /// `ascending` / `published` (codec), empty for serde.
    #[serde(default)]
    pub order: String,
    /// `first`, `middle`, `last`, `pos N`.
    #[serde(default)]
    pub position: String,
    /// 1-based position of the observed key on the wire (0 when not applicable).
    #[serde(default)]
    pub key_pos: usize,
    /// Implementation name (`y3-observe`, `sonic-rs-get`, `go-gjson`, ...).
    #[serde(rename = "impl")]
    pub implementation: String,
    /// `rust` or `go`.
    pub lang: String,
    /// Wire format (`y3`, `json`, `protobuf`, `msgpack`, `postcard`, `rkyv`, `mqtt`).
    pub format: String,
    /// What one op does: `observe`, `get`, `decode+find`, `encode`, `decode`, ...
    pub op: String,
    /// `serial` or `parallel`.
    pub mode: String,
    /// Threads that ran ops.
    pub threads: usize,
    /// Median wall time per op per thread, ns.
    pub ns_per_op: f64,
    /// Median process CPU time per op, ns.
    pub cpu_ns_per_op: f64,
    /// Aggregate ops per second.
    pub ops_per_s: f64,
    /// Allocations per op, where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocs_per_op: Option<f64>,
    /// Input (or output) size in bytes.
    pub bytes: usize,
    /// Samples the median is over.
    pub samples: usize,
    /// Ops per thread per sample.
    pub batch: u64,
}

impl Record {
    /// A record from a measurement; the caller fills the descriptive fields.
    pub fn from_measurement(m: &Measurement) -> Record {
        Record {
            suite: String::new(),
            case: String::new(),
            order: String::new(),
            position: String::new(),
            key_pos: 0,
            implementation: String::new(),
            lang: "rust".into(),
            format: String::new(),
            op: String::new(),
            mode: m.mode.name().into(),
            threads: m.threads,
            ns_per_op: m.ns_per_op,
            cpu_ns_per_op: m.cpu_ns_per_op,
            ops_per_s: m.ops_per_s,
            allocs_per_op: m.allocs_per_op,
            bytes: 0,
            samples: m.samples,
            batch: m.batch,
        }
    }
}

/// Where and how the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `codec` or `serde`.
    pub suite: String,
    /// The command line that produced the file.
    pub command: String,
    /// CPU model, cores, OS.
    pub machine: String,
    /// `rustc --version` at build time is not known; the lab's own version.
    pub lab_version: String,
    /// `go version`, when the Go side ran.
    #[serde(default)]
    pub go_version: String,
    /// Seed of the published order.
    pub seed: u64,
    /// `--quick`.
    pub quick: bool,
    /// Samples per measurement and sample length (ms).
    pub samples: usize,
    /// Target sample length in ms.
    pub sample_ms: u64,
    /// Threads in parallel mode.
    pub threads: usize,
    /// Whether the peers feature was compiled in.
    pub peers: bool,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

/// A whole results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Run metadata.
    pub meta: Meta,
    /// Wire order of each published-order data set (`case` → keys).
    #[serde(default)]
    pub orders: Vec<(String, Vec<u32>)>,
    /// The rows.
    pub records: Vec<Record>,
    /// Skipped rows, disabled peers, target notes.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Results {
    /// The record for `(case, order, impl, mode)`, if measured.
    pub fn find(
        &self,
        case: &str,
        order: &str,
        implementation: &str,
        mode: &str,
    ) -> Option<&Record> {
        self.records.iter().find(|r| {
            r.case == case
                && r.order == order
                && r.implementation == implementation
                && r.mode == mode
        })
    }

    /// Writes the results as pretty JSON.
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

    /// Reads a results file.
    ///
    /// # Errors
    /// IO and parse errors.
    pub fn read_json(path: &Path) -> Result<Results> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Mode;

    pub(crate) fn sample_record(implementation: &str, case: &str, ns: f64) -> Record {
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
        Record {
            suite: "codec".into(),
            case: case.into(),
            order: "ascending".into(),
            implementation: implementation.into(),
            format: "y3".into(),
            op: "observe".into(),
            ..Record::from_measurement(&m)
        }
    }

    #[test]
    fn json_round_trip_with_impl_key() {
        let results = Results {
            records: vec![sample_record("y3-observe", "C63-K32", 20.0)],
            ..Results::default()
        };
        let dir = std::env::temp_dir().join(format!("y3-bench-record-{}", std::process::id()));
        let path = dir.join("r.json");
        results.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""impl": "y3-observe""#), "{text}");
        assert!(text.contains(r#""ns_per_op": 20.0"#));
        assert_eq!(Results::read_json(&path).unwrap(), results);
        std::fs::remove_dir_all(dir).unwrap();
        assert!(results
            .find("C63-K32", "ascending", "y3-observe", "serial")
            .is_some());
        assert!(results
            .find("C63-K32", "ascending", "y3-observe", "parallel")
            .is_none());
    }

    #[test]
    fn go_lines_parse_as_records() {
        let line = r#"{"suite":"codec","case":"C03-K02","order":"ascending","position":"middle",
            "key_pos":2,"impl":"go-gjson","lang":"go","format":"json","op":"get",
            "mode":"serial","threads":1,"ns_per_op":50.5,"cpu_ns_per_op":50.1,
            "ops_per_s":19801980.1,"allocs_per_op":0,"bytes":28,"samples":5,"batch":1000}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(
            (r.implementation.as_str(), r.allocs_per_op),
            ("go-gjson", Some(0.0))
        );
    }
}
