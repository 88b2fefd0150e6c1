//! The network lab's machine-readable results: one [`NetRecord`] per suite × case ×
//! implementation (the median of `runs` timed runs), in a [`NetResults`] file.
//!
//! ```json
//! {"suite":"pingpong","impl":"y3-transport","case":"100 sessions","sessions":100,
//!  "threads":1,"payload":100,"subscribers":0,"seconds":0.91,"messages":819200,
//!  "msg_per_s":900219.8,"runs":3,"seconds_range":[0.9,0.93]}
//! ```
//!
//! The records are not the codec lab's [`crate::record::Record`] (ns/op of a batch): a
//! network row has connections, percentiles and the server's CPU. The Markdown and the
//! charts still go through [`crate::report::write_report`] and [`crate::charts`].

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One measured row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetRecord {
    /// `pingpong`, `echo`, `e2e` or `yomo`.
    pub suite: String,
    /// Implementation (`y3-transport`, `tokio`, `asio`, `monoio`, `nats`, `zenoh-p2p`, ...).
    #[serde(rename = "impl")]
    pub implementation: String,
    /// The case in words (`1000 sessions`, `250 conns`, `64 B × 5 subs`, `relay 64 B`).
    pub case: String,
    /// Sessions (ping-pong) or connections (echo); 0 for e2e.
    #[serde(default)]
    pub sessions: usize,
    /// Threads of each side (ping-pong) or of the server (echo); 0 when not applicable.
    #[serde(default)]
    pub threads: usize,
    /// Message or payload size in bytes (ping-pong: the first body).
    #[serde(default)]
    pub payload: usize,
    /// Subscribers (e2e, yomo), else 0.
    #[serde(default)]
    pub subscribers: usize,
    /// Median wall time of the timed part, seconds.
    pub seconds: f64,
    /// Messages (ping-pong: sent by both sides; echo: round trips; e2e: published; yomo:
    /// written by the source).
    pub messages: u64,
    /// Messages per second (echo: QPS; e2e: published msg/s, each delivered to every
    /// subscriber; yomo: received by the sink, first to last arrival).
    pub msg_per_s: f64,
    /// Latency percentiles in microseconds, where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    /// See [`p50_us`](Self::p50_us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    /// See [`p50_us`](Self::p50_us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_us: Option<f64>,
    /// Server CPU over the timed window, percent of one core (200% = two cores busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
    /// Router CPU (user + system) per routed frame over the flat-out run, microseconds
    /// (yomo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_frame: Option<f64>,
    /// Timed runs the median is over.
    #[serde(default)]
    pub runs: usize,
    /// Lowest and highest `seconds` (ping-pong) or `msg_per_s` (echo, e2e, yomo) of the runs.
    #[serde(default)]
    pub range: (f64, f64),
}

/// Where and how the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetMeta {
    /// `pingpong`, `echo`, `e2e` or `yomo`.
    pub suite: String,
    /// The command line that produced the file.
    pub command: String,
    /// CPU model, cores, OS.
    pub machine: String,
    /// The lab's version.
    pub lab_version: String,
    /// `--quick`.
    pub quick: bool,
    /// How the processes were pinned to cores, in words.
    pub pinning: String,
    /// `(peer, version)`: every peer that ran, with the version it reported.
    #[serde(default)]
    pub versions: Vec<(String, String)>,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

/// A whole results file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetResults {
    /// Run metadata.
    pub meta: NetMeta,
    /// The rows.
    pub records: Vec<NetRecord>,
    /// Skipped rows, missing peers, timeouts.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl NetResults {
    /// The record of `implementation` in `case` with `threads` (any thread count when 0).
    pub fn find(&self, case: &str, implementation: &str, threads: usize) -> Option<&NetRecord> {
        self.records.iter().find(|r| {
            r.case == case
                && r.implementation == implementation
                && (threads == 0 || r.threads == threads)
        })
    }

    /// Cases in the order they were first measured.
    pub fn cases(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.records {
            if !out.contains(&r.case) {
                out.push(r.case.clone());
            }
        }
        out
    }

    /// Implementations in the order they were first measured.
    pub fn impls(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.records {
            if !out.contains(&r.implementation) {
                out.push(r.implementation.clone());
            }
        }
        out
    }

    /// Thread counts present, ascending.
    pub fn threads(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.records.iter().map(|r| r.threads).collect();
        out.sort_unstable();
        out.dedup();
        out
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
    pub fn read_json(path: &Path) -> Result<NetResults> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// Reads one suite's results written in parts (say, the long 10 000-session ping-pong
    /// run with fewer runs than the rest) and joins them: records and notes of every part in
    /// order, the first part's metadata with every part's command line and every peer
    /// version.
    ///
    /// # Errors
    /// IO and parse errors, no file, or parts of different suites or machines.
    pub fn read_parts(paths: &[impl AsRef<Path>]) -> Result<NetResults> {
        let mut parts = paths.iter().map(|p| NetResults::read_json(p.as_ref()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_lookups() {
        let rec = |imp: &str, threads: usize| NetRecord {
            suite: "pingpong".into(),
            implementation: imp.into(),
            case: "100 sessions".into(),
            sessions: 100,
            threads,
            payload: 100,
            seconds: 1.5,
            messages: 819_200,
            msg_per_s: 546_133.3,
            runs: 3,
            range: (1.4, 1.6),
            ..NetRecord::default()
        };
        let results = NetResults {
            records: vec![rec("y3-transport", 1), rec("asio", 1), rec("asio", 2)],
            ..NetResults::default()
        };
        let dir = std::env::temp_dir().join(format!("y3-bench-net-record-{}", std::process::id()));
        let path = dir.join("r.json");
        results.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""impl": "y3-transport""#), "{text}");
        assert!(!text.contains("p50_us"), "absent percentiles are left out");
        assert_eq!(NetResults::read_json(&path).unwrap(), results);
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(results.impls(), ["y3-transport", "asio"]);
        assert_eq!(results.threads(), [1, 2]);
        assert_eq!(results.cases(), ["100 sessions"]);
        assert!(results.find("100 sessions", "asio", 2).is_some());
        assert!(results.find("100 sessions", "y3-transport", 2).is_none());
    }

    #[test]
    fn parts_of_one_suite_join_in_order() {
        let part = |case: &str, command: &str, suite: &str| NetResults {
            meta: NetMeta {
                suite: suite.into(),
                command: command.into(),
                machine: "m".into(),
                versions: vec![("tokio".into(), "1".into())],
                ..NetMeta::default()
            },
            records: vec![NetRecord {
                case: case.into(),
                implementation: "tokio".into(),
                ..NetRecord::default()
            }],
            notes: vec![format!("note {case}")],
        };
        let dir = std::env::temp_dir().join(format!("y3-bench-net-parts-{}", std::process::id()));
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
        let joined = NetResults::read_parts(&paths[..2]).unwrap();
        assert_eq!(joined.cases(), ["100 sessions", "10000 sessions"]);
        assert_eq!(joined.notes, ["note 100 sessions", "note 10000 sessions"]);
        assert_eq!(joined.meta.command, "y3 a` and `y3 b");
        assert_eq!(joined.meta.versions.len(), 1, "versions are not repeated");
        let err = NetResults::read_parts(&paths[1..]).unwrap_err();
        assert!(err.to_string().contains("cannot join echo"), "{err}");
        let none: [&Path; 0] = [];
        assert!(NetResults::read_parts(&none).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
