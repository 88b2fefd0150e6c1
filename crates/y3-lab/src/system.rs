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

/// CPU time, ns, that process `pid`'s live threads have run (user + system): the sum of
/// the first field of `/proc/PID/task/*/schedstat`, nanosecond-exact where `/proc/PID/stat`
/// counts 10 ms ticks. Threads that ended are not counted (a broker's workers live as long
/// as it does). `None` when the process is gone or the kernel has no schedstat.
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path().join("schedstat");
        // A thread that ended between the listing and the read counts nothing.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        sum += text.split_whitespace().next()?.parse::<u64>().ok()?;
        any = true;
    }
    any.then_some(sum)
}

#[cfg(test)]
mod tests {
    #[test]
    fn machine_names_cores() {
        assert!(super::machine().contains("cores"));
    }

    /// A busy child process (one thread, so no thread ends between two readings, as this
    /// test binary's do) accumulates CPU time in the readings; a process that does not
    /// exist has none.
    #[test]
    fn a_busy_process_cpu_time_grows() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let before = super::process_cpu_ns(child.id()).expect("schedstat");
        // 20 ms of the child's CPU time, however long a loaded machine takes to give it.
        let start = std::time::Instant::now();
        let mut after = before;
        while after < before + 20_000_000 && start.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(10));
            after = super::process_cpu_ns(child.id()).expect("schedstat");
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(after >= before + 20_000_000, "{before} -> {after}");
        assert_eq!(super::process_cpu_ns(u32::MAX), None);
    }
}
