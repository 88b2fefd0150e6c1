//! `y3 serve`, `y3 send` and `y3 observe` as processes on loopback: addresses from the
//! startup line, frames through the router, a refused token, garbage that does not stop
//! the router, the printed configuration, and a drain on SIGTERM. Every wait is bounded.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use common::serve::{Launch, Serve};
use common::{run_with_input, wait, y3, WAIT};

/// Where [`start`] has the router write its dev certificate.
fn cert_path(test: &str) -> PathBuf {
    // One file per test: the tests of this file run at once, each with its own router.
    std::env::temp_dir().join(format!("y3-test-cert-{}-{test}.pem", std::process::id()))
}

/// A `y3 serve` on ephemeral ports (plus `extra`) writing its dev certificate to
/// [`cert_path`] of `test`.
fn start(test: &str, extra: &[&str]) -> Serve {
    Launch::default()
        .arg_path("--dev-cert-out", cert_path(test))
        .args(extra)
        .start()
}

fn send(server: &Serve, args: &[&str], lines: &str) -> Output {
    run_with_input(
        y3().args(["send", "--addr", &server.tcp.to_string()])
            .args(args),
        lines.as_bytes(),
        "y3 send",
    )
}

#[test]
fn send_and_observe_through_serve_over_tcp_and_quic() {
    let server = start("send_and_observe", &[]);
    let observe = y3()
        .args([
            "observe",
            "--addr",
            &server.quic.unwrap().to_string(),
            "--transport",
            "quic",
        ])
        .arg("--ca")
        .arg(cert_path("send_and_observe"))
        .args([
            "--tag",
            "0x10",
            "--path",
            "0x10/0x11",
            "--as",
            "float32",
            "--count",
            "3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_metric("y3_router_connections{client_type=\"stream_function\"} 1");
    let sent = send(
        &server,
        &["--tag", "0x10"],
        "{\"tag\":16,\"node\":[{\"tag\":17,\"float32\":40}]}\n\n{\"payload_hex\":\"9003110142\"}\n{\"payload_hex\":\"01\",\"tag\":\"0x99\"}\n{\"tag\":16,\"node\":[{\"tag\":18,\"int32\":1}]}\n",
    );
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&sent.stdout).trim(),
        "{\"sent\":4,\"payload_bytes\":17}"
    );
    let out = wait(observe, "y3 observe");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["value"], 40.0);
    assert_eq!(lines[0]["payload_hex"], "900411024220");
    assert_eq!(lines[1]["value"], 32.0);
    // The 0x99 frame went nowhere; the last one has no 0x11 field.
    assert_eq!(lines[2]["value"], serde_json::Value::Null);
    // Like YoMo's sources, `y3 send` gives every frame its id and a fresh transaction id.
    let (first, last) = (&lines[0]["metadata"], &lines[2]["metadata"]);
    assert_eq!(first["yomo-source-id"], last["yomo-source-id"]);
    assert_eq!(last["yomo-source-id"].as_str().map(str::len), Some(21));
    assert_ne!(first["yomo-tid"], last["yomo-tid"]);
    let metrics = server.metrics();
    assert!(
        metrics.contains("y3_router_frames_in_total{tag=\"0x10\"} 3"),
        "{metrics}"
    );
    assert!(metrics.contains("y3_router_dropped_total{reason=\"no_subscriber\"} 1"));
    server.ledger();
}

#[test]
fn observe_where_gets_only_matching_frames_and_the_router_counts_the_rest() {
    let server = start("observe_where", &[]);
    let filter = "0x10/0x11:f32 > 60";
    let observe = y3()
        .args([
            "observe",
            "--addr",
            &server.tcp.to_string(),
            "--tag",
            "0x10",
        ])
        .args(["--where", filter, "--path", "0x10/0x11", "--as", "float32"])
        .args(["--count", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_metric("y3_router_connections{client_type=\"stream_function\"} 1");
    // Noise 10, 20, ..., 100, and one payload that is not Y3.
    let mut lines: String = (1..=10)
        .map(|i| {
            format!(
                "{{\"tag\":16,\"node\":[{{\"tag\":17,\"float32\":{}}}]}}\n",
                i * 10
            )
        })
        .collect();
    lines.push_str("{\"payload_hex\":\"907f\"}\n");
    let sent = send(&server, &["--tag", "0x10"], &lines);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = wait(observe, "y3 observe --where");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["value"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(values, [70.0, 80.0, 90.0, 100.0]);
    let label = format!("{{tag=\"0x10\",filter=\"{filter}\"}}");
    server.wait_metric(&format!("y3_router_filter_matched_total{label} 4"));
    server.wait_metric(&format!("y3_router_filter_withheld_total{label} 7"));
    server.wait_metric(&format!("y3_router_filter_malformed_total{label} 1"));
    server.ledger();

    // A filter that does not parse is refused before connecting, with its kind.
    let bad = wait(
        y3().args([
            "observe",
            "--addr",
            &server.tcp.to_string(),
            "--tag",
            "0x10",
        ])
        .args(["--where", "0x10/0x11 > 60.5"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
        "y3 observe --where (bad)",
    );
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("filter_untyped_float"), "{stderr}");
}

#[test]
fn wrong_token_is_a_clear_error_and_garbage_does_not_stop_the_router() {
    let server = start("wrong_token", &["--token", "s3cret"]);
    let out = send(&server, &["--token", "guess"], "{\"payload_hex\":\"00\"}\n");
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: unauthorized"), "{stderr}");

    let mut garbage = TcpStream::connect(server.tcp).unwrap();
    garbage.write_all(&[0xff; 64]).unwrap();
    garbage.set_read_timeout(Some(WAIT)).unwrap();
    let mut reply = Vec::new();
    let _ = garbage.read_to_end(&mut reply);
    // A rejected frame (tag b9) with y3 code 3 (protocol_error) came back before the close.
    assert_eq!(reply[0], 0xb9, "{reply:02x?}");
    assert!(reply.ends_with(&[0x30, 0x01, 0x03]), "{reply:02x?}");

    let out = send(
        &server,
        &["--token", "s3cret"],
        "{\"payload_hex\":\"00\"}\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metrics = server.metrics();
    assert!(
        metrics.contains("y3_router_rejected_total{reason=\"unauthorized\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("y3_router_protocol_errors_total{kind=\"unknown_frame\"} 1"));
    server.ledger();
}

#[test]
fn print_config_is_valid_toml_with_every_default() {
    let out = wait(
        y3().args(["serve", "--print-config", "--policy", "drop-oldest"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
        "print-config",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for key in [
        "[listen]",
        "[queue]",
        "policy = \"drop_oldest\"",
        "max_frame_len",
        "drain_timeout_ms",
        "[filters]",
        "max_terms = 32",
        "attach = []",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    let file = std::env::temp_dir().join(format!("y3-test-config-{}.toml", std::process::id()));
    std::fs::write(&file, &text).unwrap();
    let again = wait(
        y3().args(["serve", "--print-config", "--config"])
            .arg(&file)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
        "print-config --config",
    );
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
    std::fs::write(&file, "[queue]\nsize = 1\n").unwrap();
    let bad = wait(
        y3().args(["serve", "--config"])
            .arg(&file)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        "bad config",
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown field"));
    let _ = std::fs::remove_file(file);
}

#[cfg(unix)]
#[test]
fn sigterm_drains_and_reports() {
    let mut server = start("sigterm", &[]);
    let out = send(&server, &[], "{\"payload_hex\":\"00\"}\n");
    assert!(out.status.success());
    server.ledger();
    let out = server.stop().expect("running");
    assert!(out.status.success());
}
