//! `y3 send` and `y3 observe` as shell tools (issue 29): text and raw payload modes, one
//! JSON key for the frame tag (`frame_tag`), a bad line that says how many were sent, and
//! `y3 inspect` on binary stdin.

mod common;

use std::io::Write;
use std::process::{Child, Output, Stdio};

use common::serve::{Launch, Serve};
use common::{run_with_input, wait, y3};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn router() -> Serve {
    Launch::default().quic("").start()
}

/// `y3 send ARGS` to `serve`, `input` on stdin.
fn send(serve: &Serve, args: &[&str], input: &[u8]) -> Output {
    run_with_input(
        y3().args(["send", "--addr", &serve.tcp.to_string()])
            .args(args),
        input,
        "y3 send",
    )
}

/// `y3 observe ARGS` on `serve`, once it is subscribed (its connection counted).
fn observe(serve: &Serve, args: &[&str]) -> Child {
    let before = serve.metric("y3_router_accepted_connections_total{transport=\"tcp\"}");
    let child = y3()
        .args(["observe", "--addr", &serve.tcp.to_string()])
        .args(args)
        .args(["--idle-exit-ms", "3000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while serve.metric("y3_router_accepted_connections_total{transport=\"tcp\"}") <= before {
        assert!(
            std::time::Instant::now() < deadline,
            "observe did not connect"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Admitted is not yet subscribed: give the handshake a moment.
    std::thread::sleep(std::time::Duration::from_millis(200));
    child
}

#[test]
fn text_lines_in_and_out() {
    let serve = router();
    let sink = observe(&serve, &["--tag", "0x33", "--text", "--count", "3"]);
    let out = send(
        &serve,
        &["--text", "--tag", "0x33"],
        "hello\nwörld {not json}\n\nthird\r\n".as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{\"sent\":3,\"payload_bytes\":27}"
    );
    let got = wait(sink, "y3 observe --text");
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(
        String::from_utf8(got.stdout).unwrap(),
        "hello\nwörld {not json}\nthird\n"
    );
}

#[test]
fn raw_bytes_are_one_payload() {
    let serve = router();
    let sink = observe(&serve, &["--tag", "0x34", "--count", "1"]);
    let bytes: Vec<u8> = (0..=255u8).chain(b"\n\r\n\0".iter().copied()).collect();
    let out = send(&serve, &["--raw", "--tag", "0x34"], &bytes);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = wait(sink, "y3 observe");
    let line: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(line["frame_tag"], 0x34);
    assert_eq!(line["payload_hex"], hex::encode(&bytes));
}

#[test]
fn frame_tag_is_one_key_and_the_old_one_still_works() {
    let serve = router();
    let sink = observe(&serve, &["--tag", "0x35", "--tag", "0x36", "--count", "2"]);
    let input =
        "{\"frame_tag\":53,\"payload_hex\":\"01\"}\n{\"tag\":\"0x36\",\"payload_hex\":\"02\"}\n";
    let out = send(&serve, &[], input.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("deprecated"), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("deprecated").count(), 1);
    let got = wait(sink, "y3 observe");
    let tags: Vec<u64> = String::from_utf8(got.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["frame_tag"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(tags, [0x35, 0x36]);
}

#[test]
fn a_bad_line_says_where_and_how_many_were_sent() {
    let serve = router();
    let sink = observe(&serve, &["--tag", "0x10", "--count", "2"]);
    let input = "{\"payload_hex\":\"01\"}\n\n{\"payload_hex\":\"02\"}\nnot json\n{\"payload_hex\":\"03\"}\n";
    let out = send(&serve, &[], input.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.starts_with("error: invalid_json: line 4 (the 2 frames before it were sent"),
        "{text}"
    );
    assert!(text.contains("--text"), "{text}");
    // The two before it did arrive.
    let got = wait(sink, "y3 observe");
    assert_eq!(String::from_utf8(got.stdout).unwrap().lines().count(), 2);
}

#[test]
fn inspect_tells_binary_stdin_to_use_file_dash() {
    let packet = [0x90u8, 0x03, 0x11, 0x01, 0x42];
    let run = |args: &[&str]| {
        let mut child = y3()
            .arg("inspect")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&packet).unwrap();
        drop(stdin);
        wait(child, "y3 inspect")
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("stdin is not hex text"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("  try: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("--file -"), "{}", stderr(&out));
    let out = run(&["--file", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0x11: 42"));
}

#[test]
fn observe_outlives_a_router_restart() {
    let mut serve = router();
    let mut sink = observe(&serve, &["--tag", "0x37", "--text", "--count", "1"]);
    serve.stop();
    // Down longer than one round of the SDK's own reconnection attempts.
    std::thread::sleep(std::time::Duration::from_secs(2));
    serve.restart();
    // Resubscribed: the restarted router counts the observer's connection.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while serve.metric("y3_router_connections") < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "observe did not come back"
        );
        assert!(sink.try_wait().unwrap().is_none(), "observe exited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = send(&serve, &["--text", "--tag", "0x37"], b"after the restart\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let got = wait(sink, "y3 observe across a restart");
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(
        String::from_utf8(got.stdout.clone()).unwrap(),
        "after the restart\n"
    );
    let text = stderr(&got);
    assert!(text.contains("lost the router at"), "{text}");
    assert!(text.contains("reconnected to"), "{text}");
}
