//! The process as the kernel sees it (Linux `/proc/self`), and the build: the
//! `process_*` metrics Prometheus's own clients export and `y3_build_info`, also shown by
//! `/varz`.
//!
//! ```text
//! process_resident_memory_bytes   gauge    VmRSS of /proc/self/status
//! process_cpu_seconds_total       counter  utime + stime of /proc/self/stat, in USER_HZ (100)
//! process_open_fds                gauge    entries of /proc/self/fd
//! process_start_time_seconds      gauge    /proc/stat btime + starttime / USER_HZ
//! y3_build_info{version,git}      gauge    1
//! ```
//!
//! Off Linux (no `/proc`), the process metrics are left out rather than reported as zero.

use std::fs;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// The crate version this router was built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit shown when the binary did not set one ([`set_git_commit`]).
pub const UNKNOWN_GIT: &str = "unknown";

static GIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets the git commit the program was built from, for `y3_build_info` and `/varz` (the
/// `y3` binary does at start, from its build script: only the binary is rebuilt when
/// HEAD moves, not this library and everything on it; `4a1e7d302303-dirty` when its
/// sources differed from that commit). The first call wins.
pub fn set_git_commit(commit: &'static str) {
    let _ = GIT.set(commit);
}

/// The git commit set by [`set_git_commit`], or [`UNKNOWN_GIT`].
pub fn git_commit() -> &'static str {
    GIT.get().copied().unwrap_or(UNKNOWN_GIT)
}

/// Clock ticks per second in `/proc` times: USER_HZ, 100 on every Linux architecture.
const USER_HZ: f64 = 100.0;

/// The process's resources at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessStats {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// CPU time, user and system, seconds.
    pub cpu_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads `/proc/self`; `None` where there is none.
    pub fn read() -> Option<ProcessStats> {
        let status = fs::read_to_string("/proc/self/status").ok()?;
        let rss_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())?;
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) may hold spaces and parentheses: fields are counted
        // after its last ')'. Then state is field 3, utime 14, stime 15, starttime 22.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        let cpu_ticks = field(14)? + field(15)?;
        let start_ticks = field(22)?;
        let btime: f64 = fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())?;
        let open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        Some(ProcessStats {
            rss_bytes: rss_kib * 1024,
            cpu_seconds: cpu_ticks / USER_HZ,
            open_fds,
            start_time_seconds: btime + start_ticks / USER_HZ,
        })
    }
}

/// Encodes the process metrics at each scrape, and the build info.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let build = prometheus_client::metrics::info::Info::new(vec![
            ("version", VERSION),
            ("git", git_commit()),
        ]);
        build.encode(encoder.encode_descriptor(
            "y3_build",
            "The y3 version and git commit this router was built from",
            None,
            MetricType::Info,
        )?)?;
        let Some(p) = ProcessStats::read() else {
            return Ok(());
        };
        ConstGauge::new(p.rss_bytes as i64).encode(encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            None,
            MetricType::Gauge,
        )?)?;
        ConstCounter::new(p.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?)?;
        ConstGauge::new(p.open_fds as i64).encode(encoder.encode_descriptor(
            "process_open_fds",
            "Number of open file descriptors",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(p.start_time_seconds).encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch in seconds",
            None,
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let p = ProcessStats::read().expect("/proc on Linux");
        assert!(p.rss_bytes > 1 << 20, "{p:?}");
        assert!(p.open_fds >= 3, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started within the last day, and not in the future (clock ticks round down).
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0);
    }
}
