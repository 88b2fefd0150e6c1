//! `y3 serve` as a service (issue 29): SIGHUP reloads tokens without dropping connections
//! and names what needs a restart, systemd's readiness datagrams, JSON logs, and a
//! `RUST_LOG` that does not parse.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::serve::{Launch, Serve};
use common::{run_with_input, wait, y3, TempDir};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn signal(serve: &Serve, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &serve.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (bounded) until the file at `path` holds `needle`; its text.
fn wait_for_text(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(Instant::now() < deadline, "{needle:?} never in {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `y3 send` of one frame on tag 0x10 with `token`.
fn send(serve: &Serve, token: &str) -> Output {
    run_with_input(
        y3().args(["send", "--addr", &serve.tcp.to_string()])
            .env("Y3_TOKEN", token),
        b"{\"payload_hex\":\"2a\"}\n",
        "y3 send",
    )
}

/// A `y3 observe` of tag 0x10 with `token`, and its output lines.
fn observe(serve: &Serve, token: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = y3()
        .args(["observe", "--addr", &serve.tcp.to_string(), "--tag", "0x10"])
        .env("Y3_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

#[test]
fn sighup_reloads_tokens_keeps_connections_and_names_what_needs_a_restart() {
    let dir = TempDir::new("hup");
    let config = dir.0.join("router.toml");
    let log = dir.0.join("stderr.log");
    std::fs::write(&config, "[auth]\ntoken = \"old\"\n").unwrap();
    let serve = Launch::default()
        .quic("")
        .arg_path("--config", &config)
        .env("RUST_LOG", "info")
        .stderr_to(&log)
        .start();
    // An observer admitted with the old token.
    let (mut sink, lines) = observe(&serve, "old");
    let deadline = Instant::now() + Duration::from_secs(20);
    while serve.metric("y3_router_connections") < 1 {
        assert!(Instant::now() < deadline, "observer never admitted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(send(&serve, "old").status.success());
    assert!(lines.recv_timeout(Duration::from_secs(20)).is_ok());

    // A new token, and a queue change that needs a restart.
    std::fs::write(
        &config,
        "[auth]\ntoken = \"new\"\n[queue]\ncapacity = 5000\n",
    )
    .unwrap();
    signal(&serve, "HUP");
    let text = wait_for_text(&log, "reloaded on SIGHUP");
    assert!(
        text.contains("configuration changed in [queue]: needs restart"),
        "{text}"
    );
    let refused = send(&serve, "old");
    assert_eq!(refused.status.code(), Some(4), "{}", stderr(&refused));
    let sent = send(&serve, "new");
    assert!(sent.status.success(), "{}", stderr(&sent));
    // The observer admitted under the old token is still connected and gets the frame.
    let line = lines.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(line.contains("\"payload_hex\":\"2a\""), "{line}");
    assert!(sink.try_wait().unwrap().is_none(), "observer dropped");

    // A file that does not load is refused; the running configuration stays.
    std::fs::write(&config, "[auth\n").unwrap();
    signal(&serve, "HUP");
    let text = wait_for_text(&log, "reload refused");
    assert!(text.contains("router.toml:1:"), "{text}");
    assert!(send(&serve, "new").status.success());
    let _ = sink.kill();
    let _ = sink.wait();
}

#[cfg(unix)]
#[test]
fn systemd_hears_ready_reloading_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = TempDir::new("notify");
    let path = dir.0.join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut serve = Launch::default()
        .quic("")
        .env("NOTIFY_SOCKET", &path)
        .start();
    let next = || {
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(next(), "READY=1");
    signal(&serve, "HUP");
    assert_eq!(next(), "RELOADING=1");
    assert_eq!(next(), "READY=1");
    let out = serve.stop().unwrap();
    assert!(out.status.success());
    assert_eq!(next(), "STOPPING=1");
}

#[test]
fn json_logs_and_a_bad_rust_log() {
    let dir = TempDir::new("json");
    let log = dir.0.join("stderr.log");
    let config = dir.0.join("router.toml");
    std::fs::write(&config, "[log]\nsummary_secs = 1\n").unwrap();
    let mut serve = Launch::default()
        .quic("")
        .arg_path("--config", &config)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stderr_to(&log)
        .start();
    // A client comes and goes: at debug, so not in an info log; the summary counts it.
    assert!(send(&serve, "").status.success());
    wait_for_text(&log, "\"frames_in\":1");
    serve.stop();
    let text = wait_for_text(&log, "router stopped");
    let mut summaries = 0;
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let message = value["fields"]["message"].as_str().unwrap();
        assert!(!message.contains("client admitted"), "{line}");
        if message == "summary" {
            summaries += 1;
            assert!(value["fields"]["connections"].is_u64(), "{line}");
            assert!(value["fields"]["dropped"].is_u64(), "{line}");
        }
    }
    assert!(summaries >= 1, "{text}");
    let out = wait(
        y3().args([
            "serve",
            "--tcp",
            "127.0.0.1:0",
            "--quic",
            "",
            "--metrics",
            "",
        ])
        .env("RUST_LOG", "info,y3=loud")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
        "y3 serve with a bad RUST_LOG",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: bad_log_filter: RUST_LOG=\"info,y3=loud\""),
        "{}",
        stderr(&out)
    );
}
