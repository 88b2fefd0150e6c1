//! The processes the lab starts: every server, client and peer runs as a child process on
//! 127.0.0.1, optionally pinned to cores with `taskset`, with its file-descriptor limit
//! raised to the hard limit, and is killed and reaped when its [`Child`] guard is dropped.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// A running child process; killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct Child {
    name: String,
    child: std::process::Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// Whether `taskset` (util-linux) is on the `PATH`.
pub fn has_taskset() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| which("taskset").is_some())
}

/// The first `name` on the `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

impl Child {
    /// Starts `program args` through `sh`, which raises the soft open-files limit to the
    /// hard one, then (with `cpus`, when `taskset` exists) pins it to those cores.
    ///
    /// # Errors
    /// When the process cannot be started.
    pub fn spawn(name: &str, program: &Path, args: &[String], cpus: Option<&str>) -> Result<Child> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@""#)
            .arg("sh");
        if let Some(cpus) = cpus.filter(|_| has_taskset()) {
            cmd.arg("taskset").arg("-c").arg(cpus);
        }
        cmd.arg(program).args(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let stderr = child.stderr.take().context("child stderr")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&tail);
        std::thread::spawn(move || {
            let mut text = String::new();
            let mut reader = BufReader::new(stderr);
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                while let Some(i) = text.find('\n') {
                    let line: String = text.drain(..=i).collect();
                    if let Ok(mut t) = keep.lock() {
                        t.push(line.trim_end().to_string());
                        if t.len() > 20 {
                            t.remove(0);
                        }
                    }
                }
            }
        });
        Ok(Child {
            name: name.to_string(),
            child,
            lines,
            stderr: tail,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines the child wrote on stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.join("\n")).unwrap_or_default()
    }

    /// The next line on the child's stdout, waiting at most `timeout`.
    ///
    /// # Errors
    /// Timeout, or the child closed its stdout (exited); the error carries its stderr.
    pub fn line(&mut self, timeout: Duration) -> Result<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(anyhow!(
                "{}: no output within {:.0?}{}",
                self.name,
                timeout,
                self.stderr_suffix()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.try_wait().ok().flatten();
                // Give the stderr reader a moment to collect the last words.
                std::thread::sleep(Duration::from_millis(50));
                Err(anyhow!(
                    "{} exited ({}){}",
                    self.name,
                    status.map_or("running".into(), |s| s.to_string()),
                    self.stderr_suffix()
                ))
            }
        }
    }

    /// Skips stdout lines until one starts with `prefix`; returns the rest of it, trimmed.
    ///
    /// # Errors
    /// As [`line`](Self::line), over the whole `timeout`.
    pub fn expect(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.line(left)?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok(rest.trim().to_string());
            }
        }
    }

    /// Starts `y3 serve` (the binary `y3`, then `args`, the subcommand first) the one way
    /// every harness does (`y3_testkit`): in `dir` (its dev certificate, state and ready
    /// file), its environment set through `env`(1) with `vars` (`VAR=VALUE`) after the
    /// directory's; waits at most `within` for the ready file.
    ///
    /// # Errors
    /// When it cannot be started, exits first or writes no ready file in time; with its
    /// stderr.
    pub fn serve(
        name: &str,
        y3: &Path,
        vars: &[&str],
        args: &[String],
        dir: &y3_testkit::ServeDir,
        within: Duration,
    ) -> Result<(Child, y3_testkit::Ready)> {
        let mut all: Vec<String> = dir
            .env()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.display()))
            .collect();
        all.extend(vars.iter().map(|v| v.to_string()));
        all.push(y3.display().to_string());
        all.extend(args.iter().cloned());
        all.extend(
            dir.prepare()
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        // `sh` and `env` exec: the process id is y3's.
        let mut child = Child::spawn(name, Path::new("env"), &all, None)?;
        let pid = child.pid();
        let ready = dir.wait_pid(pid, within, || child.child.try_wait());
        match ready {
            Ok(ready) => Ok((child, ready)),
            Err(e) => {
                std::thread::sleep(Duration::from_millis(50));
                Err(anyhow!("{name}: {e}{}", child.stderr_suffix()))
            }
        }
    }

    fn stderr_suffix(&self) -> String {
        let tail = self.stderr_tail();
        if tail.is_empty() {
            String::new()
        } else {
            format!("; stderr:\n{tail}")
        }
    }

    /// User + system CPU seconds the process (all its threads) has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(self.pid())
    }

    /// Waits for the child to exit, at most `timeout`; kills it past that.
    ///
    /// # Errors
    /// Timeout (the child is killed).
    pub fn wait(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                self.kill();
                bail!("{}: still running after {:.0?}; killed", self.name, timeout);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills and reaps the child (idempotent).
    pub fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// User + system CPU seconds of process `pid` so far: [`crate::system::process_cpu_ns`],
/// the lab's one reader of another process's CPU time (nanosecond-exact; a thread that ends
/// between two readings takes its time with it, which a server's long-lived workers do not).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    crate::system::process_cpu_ns(pid).map(|ns| ns as f64 / 1e9)
}

/// User + system CPU seconds of this process so far, every thread counted (ended ones
/// too): `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`, through the cpu-time crate.
pub fn own_cpu_seconds() -> Option<f64> {
    cpu_time::ProcessTime::try_now()
        .ok()
        .map(|t| t.as_duration().as_secs_f64())
}

/// The first line `program args` prints (stdout or stderr), for version records.
pub fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_lines_cpu_and_kill_on_drop() {
        let sh = which("sh").expect("sh on PATH");
        let args = vec![
            "-c".to_string(),
            "echo noise; echo 'listening 127.0.0.1:1'; exec sleep 30".to_string(),
        ];
        let mut child = Child::spawn("sleeper", &sh, &args, None).unwrap();
        let addr = child.expect("listening ", Duration::from_secs(10)).unwrap();
        assert_eq!(addr, "127.0.0.1:1");
        assert!(child.cpu_seconds().is_some());
        let pid = child.pid();
        drop(child);
        // Reaped: no /proc entry left (or a different process reusing the pid).
        let gone = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .map_or(true, |c| !c.contains("sleep"));
        assert!(gone);
    }

    /// The lab's own CPU time counts a thread that ended inside the window (filter's
    /// function threads, joined before the second reading).
    #[test]
    fn own_cpu_counts_a_thread_that_ended() {
        let before = own_cpu_seconds().expect("CLOCK_PROCESS_CPUTIME_ID");
        std::thread::spawn(|| {
            let spin = cpu_time::ThreadTime::now();
            while spin.elapsed() < Duration::from_millis(30) {
                std::hint::black_box(0u64);
            }
        })
        .join()
        .unwrap();
        let after = own_cpu_seconds().unwrap();
        assert!(after - before >= 0.030, "{before} -> {after}");
    }

    #[test]
    fn exited_child_reports_its_stderr() {
        let sh = which("sh").unwrap();
        let args = vec!["-c".to_string(), "echo boom >&2; exit 3".to_string()];
        let mut child = Child::spawn("failer", &sh, &args, None).unwrap();
        let err = child.line(Duration::from_secs(10)).unwrap_err().to_string();
        assert!(err.contains("failer exited"), "{err}");
        assert!(child.wait(Duration::from_secs(5)).unwrap().code() == Some(3));
    }
}
