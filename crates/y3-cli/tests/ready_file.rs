//! `y3 serve --ready-file`: the document names the ports the router really bound (each one
//! answers), the certificate a client can pin, the dev certificate's file, the config file
//! and the process; an off listener has no key; the file is removed after the drain.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpStream, UdpSocket};

use common::serve::Launch;
use common::{run_with_input, y3, TempDir, WAIT};

#[test]
fn the_ready_file_names_the_bound_ports_and_the_certificate() {
    let dir = TempDir::new("ready");
    let config = dir.file("router.toml", "[mqtt]\nlisten = \"127.0.0.1:0\"\n");
    let mut serve = Launch::default()
        .arg_path("--config", &config)
        .args(["--tcp-tls"])
        .start();
    let ready = serve.ready.clone();
    assert_eq!(ready.schema, y3_testkit::READY_SCHEMA);
    assert_eq!(ready.pid, serve.pid());
    assert_eq!(ready.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(ready.config.as_deref(), Some(config.as_path()));
    assert!(ready.tcp_tls);
    let kinds: Vec<&str> = ready.listeners.keys().map(String::as_str).collect();
    assert_eq!(kinds, ["metrics", "mqtt", "quic", "tcp"]);
    for (kind, addr) in &ready.listeners {
        assert!(addr.ip().is_loopback() && addr.port() != 0, "{kind} {addr}");
    }

    // The TCP-based listeners accept; the metrics one answers HTTP.
    for kind in ["tcp", "mqtt"] {
        let addr = ready.listener(kind).unwrap();
        TcpStream::connect_timeout(&addr, WAIT).unwrap_or_else(|e| panic!("{kind} {addr}: {e}"));
    }
    let mut http = TcpStream::connect_timeout(&ready.listener("metrics").unwrap(), WAIT).unwrap();
    http.set_read_timeout(Some(WAIT)).unwrap();
    http.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The QUIC port is the router's: nobody else can bind it, and a client pinning the
    // certificate's SHA-256 sends through it.
    let quic = ready.listener("quic").unwrap();
    assert!(UdpSocket::bind(quic).is_err(), "{quic} is not bound");
    let sent = run_with_input(
        y3().args(["send", "--transport", "quic", "--addr", &quic.to_string()])
            .args(["--pin", &ready.certificate.sha256]),
        b"{\"payload_hex\":\"01\"}\n",
        "y3 send --pin",
    );
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    // The dev certificate was written where the document says, in the router's directory.
    assert!(ready.certificate.self_signed);
    let cert = ready
        .certificate
        .path
        .clone()
        .expect("a dev certificate path");
    assert!(cert.starts_with(serve.dir()), "{}", cert.display());
    let pem = std::fs::read_to_string(&cert).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    // Atomic: no temporary file beside it.
    let names: Vec<String> = std::fs::read_dir(serve.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");

    // Removed once the router has drained.
    let ready_path = serve.dir().join(y3_testkit::READY_FILE);
    assert!(ready_path.exists());
    let out = serve.stop().expect("running");
    assert!(out.status.success());
    assert!(!ready_path.exists(), "left after the drain");
}

#[test]
fn an_off_listener_has_no_key_and_no_config_is_null() {
    let serve = Launch::default().quic("").metrics("").start();
    let kinds: Vec<&str> = serve.ready.listeners.keys().map(String::as_str).collect();
    assert_eq!(kinds, ["tcp"]);
    assert_eq!(serve.ready.config, None);
    assert!(!serve.ready.tcp_tls);
}
