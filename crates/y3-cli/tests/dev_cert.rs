//! The dev certificate survives restarts (issue 29): it is kept in the router's state
//! directory per listener address, so a client's `--pin` still works after `y3 serve`
//! restarts, and two routers on one host keep their own.

mod common;

use std::process::Output;

use common::serve::Launch;
use common::{run_with_input, y3, TempDir};

/// A loopback port free for both TCP and UDP right now.
fn free_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn launch(dir: &TempDir, port: u16) -> Launch {
    let addr = format!("127.0.0.1:{port}");
    Launch::default()
        .tcp(addr.clone())
        .quic(addr)
        .env("XDG_STATE_HOME", dir.0.join("state"))
        .env("XDG_RUNTIME_DIR", dir.0.join("run"))
}

fn send_pinned(addr: &str, pin: &str) -> Output {
    send_with(&mut y3(), addr, &["--pin", pin])
}

/// `y3 send --transport quic` trusting the certificate file `y3 serve` wrote in `dir`.
fn send_found(dir: &TempDir, addr: &str) -> Output {
    send_with(y3().env("XDG_RUNTIME_DIR", dir.0.join("run")), addr, &[])
}

fn send_with(cmd: &mut std::process::Command, addr: &str, extra: &[&str]) -> Output {
    run_with_input(
        cmd.args(["send", "--addr", addr, "--transport", "quic"])
            .args(extra),
        b"{\"payload_hex\":\"01\"}\n",
        "y3 send --transport quic",
    )
}

#[test]
fn pins_survive_a_restart_and_routers_keep_their_own() {
    let dir = TempDir::new("restart");
    let port = free_port();
    let mut serve = launch(&dir, port).start();
    let pin = serve.pin();
    let addr = format!("127.0.0.1:{port}");
    let out = send_pinned(&addr, &pin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serve.stop();
    let kept = dir
        .0
        .join("state/y3")
        .join(format!("dev-identity-127.0.0.1_{port}.pem"));
    assert!(kept.is_file(), "{} missing", kept.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }

    // Restarted on the same address: the same certificate, the old pin works.
    let serve = launch(&dir, port).start();
    assert_eq!(serve.pin(), pin);
    let out = send_pinned(&addr, &pin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Another router in the same state directory, on another address: its own, in a
    // certificate file of its own; clients find each router's.
    let other_port = free_port();
    let other = launch(&dir, other_port).start();
    assert_ne!(other.pin(), pin);
    for port in [port, other_port] {
        let file = dir.0.join(format!("run/y3/dev-cert-127.0.0.1_{port}.pem"));
        assert!(file.is_file(), "{} missing", file.display());
        let out = send_found(&dir, &format!("127.0.0.1:{port}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(other);
    drop(serve);
    let serve = launch(&dir, port).start();
    assert_eq!(serve.pin(), pin);
}
