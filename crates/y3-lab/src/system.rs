//! A one-line description of the machine, for the report header.

/// `AMD EPYC, 2 cores, Linux 6.1 (x86_64)`: CPU model, cores available to this process, OS.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!(" {}", s.trim()))
        .unwrap_or_default();
    format!(
        "{cpu}, {} cores, {}{kernel} ({})",
        crate::measure::cores(),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    #[test]
    fn machine_names_cores() {
        assert!(super::machine().contains("cores"));
    }
}
