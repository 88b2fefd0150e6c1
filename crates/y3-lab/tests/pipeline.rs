//! The lab's in-process pipeline run, `y3-lab net pipeline` (source → router → function →
//! sink, formerly `y3 bench e2e`), smoke-tested from outside: it runs and writes its JSON.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Runs `y3-lab ARGS` to completion, at most [`WAIT`].
fn lab(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_y3-lab"))
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
            panic!("y3-lab {args:?} did not finish in {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "y3-lab {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn pipeline_smoke_writes_json() {
    let file = std::env::temp_dir().join(format!("y3-e2e-{}.json", std::process::id()));
    let out = lab(&[
        "net",
        "pipeline",
        "--quick",
        "--messages",
        "2000",
        "--paced",
        "200",
        "--rate",
        "2000",
        "--json",
        file.to_str().unwrap(),
    ]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("tcp") && table.contains("quic"), "{table}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "tcp and quic x 64 B and 1 KiB");
    for run in runs {
        assert!(run["msg_per_s"].as_f64().unwrap() > 0.0, "{run}");
        assert!(
            run["paced_latency"]["p99_us"].as_f64().unwrap() > 0.0,
            "{run}"
        );
    }
    let _ = std::fs::remove_file(file);
}
