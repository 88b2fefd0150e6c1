//! Helpers the CLI tests share: the `y3` binary as a command, bounded waits for the
//! processes they start, and `y3 serve` ([`serve`]).
#![allow(dead_code)]

pub mod serve;

use std::process::{Child, Command, Output};
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
