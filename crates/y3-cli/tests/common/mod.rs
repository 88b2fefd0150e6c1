//! Helpers the CLI tests share: the `y3` binary as a command, bounded waits for the
//! processes they start, private temporary directories, and `y3 serve` ([`serve`]).
#![allow(dead_code)]

pub mod serve;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every wait for a process is bounded by this.
pub const WAIT: Duration = Duration::from_secs(20);

/// The `y3` binary under test, logging warnings only, without a token in its environment.
pub fn y3() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_y3"));
    cmd.env("RUST_LOG", "warn").env_remove("Y3_TOKEN");
    cmd
}

/// Waits for `child` at most [`WAIT`], killing it on timeout.
pub fn wait(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not finish: stdout {} stderr {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` with `input` on its stdin (then closed) and its output captured, waiting
/// for it as [`wait`] does. A command that exits before reading all of `input` is fine.
pub fn run_with_input(cmd: &mut Command, input: &[u8], what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    wait(child, what)
}

/// A fresh private directory (mode 0700) for one test, removed on drop. `name` tells the
/// tests of one binary apart; the process id, the binaries.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates (or empties) `y3-test-NAME-PID` under the system's temporary directory.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("y3-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        TempDir(dir)
    }

    /// Writes `contents` to the file `name` in the directory; its path.
    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
