//! The README's main command, `y3 demo`: the whole pipeline (source → router → function →
//! sink) in one process, checked from outside. (The lab's `y3-lab net pipeline` smoke run
//! is a test of crates/y3-lab/src/main.rs.)

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Runs `y3 ARGS` to completion, at most [`WAIT`].
fn y3(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_y3"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > WAIT {
            let _ = child.kill();
            panic!("y3 {args:?} did not finish in {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "y3 {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn demo_runs_by_itself_and_summarizes() {
    let out = y3(&[
        "demo",
        "--readings",
        "60",
        "--interval-ms",
        "5",
        "--transport",
        "tcp",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("embedded router on TCP 127.0.0.1:"), "{text}");
    assert!(text.contains("reading #1 "), "{text}");
    assert!(text.contains("ALERT"), "{text}");
    assert!(text.contains("summary: 60 readings sent"), "{text}");
    assert!(text.contains("(0 missing)"), "{text}");
    assert!(text.contains("end-to-end latency"), "{text}");
    assert!(text.contains(", 0 dropped"), "{text}");
    // Every reading reached the function and every alert the sink.
    let loud = text.lines().filter(|l| l.ends_with("(loud)")).count();
    let alerts = text
        .lines()
        .filter(|l| l.trim_start().starts_with("ALERT"))
        .count();
    assert!(loud > 0);
    assert_eq!(loud, alerts, "{text}");
    assert!(text.contains(&format!(
        "router: {} frames in, {} frames out",
        60 + loud,
        60 + loud
    )));
}

#[test]
fn demo_over_quic_quietly() {
    let out = y3(&["demo", "--readings", "20", "--interval-ms", "5", "--quiet"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("on QUIC"), "{text}");
    assert!(!text.contains("reading #"), "{text}");
    assert!(text.contains("summary: 20 readings sent"), "{text}");
    assert!(text.contains("(0 missing)"), "{text}");
}
