//! Errors with a way out (issue 29): every error names the address, file and line, or
//! peer, gives its cause once, says what to try on a `  try:` line, and exits with the
//! status `y3 --help` documents (1 runtime, 2 bad input, 3 cannot connect, 4 refused).

mod common;

use std::process::Output;

use common::serve::{Launch, Serve};
use common::{run_with_input, y3, TempDir};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `y3 ARGS` with `stdin` as its input, in the private directory `dir`.
fn run(args: &[&str], stdin: &str, dir: &TempDir) -> Output {
    run_with_input(
        y3().args(args)
            .env("XDG_RUNTIME_DIR", &dir.0)
            .env("XDG_STATE_HOME", &dir.0),
        stdin.as_bytes(),
        &format!("y3 {args:?}"),
    )
}

/// Asserts exit status `code`, the error line's kind, that each of `needles` is in the
/// text, that `cause` is told exactly once, and that there is something to try.
fn assert_error(out: &Output, code: i32, kind: &str, needles: &[&str], cause: &str) {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{text}");
    assert!(text.starts_with(&format!("error: {kind}: ")), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing from {text}");
    }
    assert_eq!(
        text.matches(cause).count(),
        1,
        "{cause:?} not once in {text}"
    );
    assert!(text.contains("\n  try: "), "no hint in {text}");
}

const LINE: &str = "{\"payload_hex\":\"01\"}\n";

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn router_down_names_the_address_and_the_cause() {
    let dir = TempDir::new("down");
    let addr = closed_port();
    let out = run(&["send", "--addr", &addr], LINE, &dir);
    assert_error(
        &out,
        3,
        "unreachable",
        &[&format!("router at {addr} over tcp"), "y3 serve"],
        "refused",
    );
    let out = run(&["observe", "--addr", &addr, "--tag", "0x10"], "", &dir);
    assert_error(&out, 3, "unreachable", &[&addr], "refused");
}

#[test]
fn host_names_are_addresses_and_bad_ones_are_usage_errors() {
    let dir = TempDir::new("names");
    let serve = Launch::default()
        .quic("")
        .env("XDG_RUNTIME_DIR", &dir.0)
        .start();
    let by_name = format!("localhost:{}", serve.tcp.port());
    let out = run(&["send", "--addr", &by_name], LINE, &dir);
    assert!(out.status.success(), "{}", stderr(&out));
    // And y3 serve listens on a name.
    let named = Launch::default()
        .tcp("localhost:0")
        .quic("")
        .env("XDG_RUNTIME_DIR", &dir.0)
        .start();
    assert!(named.tcp.ip().is_loopback(), "{}", named.tcp);
    let out = run(
        &["send", "--addr", &format!("localhost:{}", named.tcp.port())],
        LINE,
        &dir,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["send", "--addr", "no-such-host.invalid:9000"], LINE, &dir);
    assert_error(
        &out,
        2,
        "bad_address",
        &["no-such-host.invalid:9000"],
        "no-such-host",
    );
}

#[test]
fn a_port_in_use_names_the_address_once() {
    let dir = TempDir::new("busy");
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let out = run(
        &["serve", "--tcp", &addr, "--quic", "", "--metrics", ""],
        "",
        &dir,
    );
    assert_error(
        &out,
        1,
        "bind",
        &[&format!("cannot listen on tcp {addr}"), "--tcp"],
        "in use",
    );
}

#[test]
fn config_errors_name_file_line_and_column_once() {
    let dir = TempDir::new("config");
    let file = dir.file("router.toml", "[listen]\ntcp = 3\n");
    let path = file.to_str().unwrap();
    let out = run(&["serve", "-c", path], "", &dir);
    assert_error(
        &out,
        2,
        "config_toml",
        &[&format!("{path}:2:7: ")],
        "expected a string",
    );
    // A value the schema takes but the router refuses: the field, and where the file sets it.
    let file = dir.file("values.toml", "[listen]\nquic = \"\"\ntcp = \"nowhere\"\n");
    let out = run(
        &["serve", "-c", file.to_str().unwrap(), "--metrics", ""],
        "",
        &dir,
    );
    assert_error(
        &out,
        2,
        "config",
        &["listen.tcp", &format!("{}:3", file.display())],
        "not an IP:port",
    );
    let file = dir.file("broken.toml", "[listen\n");
    let out = run(&["serve", "-c", file.to_str().unwrap()], "", &dir);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("broken.toml:1:"), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("TOML parse error").count(), 0);
}

#[test]
fn tls_trust_failures_are_told_in_plain_words() {
    let dir = TempDir::new("tls");
    let serve = Serve::start(&[
        "--tcp-tls".to_owned(),
        "--dev-cert-out".to_owned(),
        dir.0.join("router.pem").to_str().unwrap().to_owned(),
    ]);
    let plain = Launch::default()
        .quic("")
        .args(["--dev-cert-out", dir.0.join("other.pem").to_str().unwrap()])
        .start();
    let quic = serve.quic.unwrap().to_string();
    let tls = serve.tcp.to_string();
    let wrong_pin = if serve.pin().starts_with('0') {
        "1".repeat(64)
    } else {
        "0".repeat(64)
    };
    let raw = [
        "ApplicationVerificationFailure",
        "BadSignature",
        "InvalidContentType",
    ];
    let no_raw = |out: &Output| {
        for word in raw {
            assert!(!stderr(out).contains(word), "{word} in {}", stderr(out));
        }
    };
    for (transport, addr) in [("quic", &quic), ("tls", &tls)] {
        let args = ["send", "--addr", addr, "--transport", transport];
        let out = run(&[&args[..], &["--pin", &wrong_pin]].concat(), LINE, &dir);
        assert_error(&out, 3, "wrong_pin", &[addr.as_str()], "not the one pinned");
        no_raw(&out);
        let other = dir.0.join("other.pem");
        let out = run(
            &[&args[..], &["--ca", other.to_str().unwrap()]].concat(),
            LINE,
            &dir,
        );
        assert_error(
            &out,
            3,
            "untrusted_certificate",
            &[addr.as_str(), "--ca"],
            "not one you trust",
        );
        no_raw(&out);
    }
    // TLS to a plaintext port, and plaintext to a TLS port.
    let plain_addr = plain.tcp.to_string();
    let out = run(
        &[
            "send",
            "--addr",
            &plain_addr,
            "--transport",
            "tls",
            "--insecure",
        ],
        LINE,
        &dir,
    );
    assert_error(
        &out,
        3,
        "not_tls",
        &[&plain_addr, "--transport tcp"],
        "does not speak TLS",
    );
    no_raw(&out);
    let out = run(&["send", "--addr", &tls], LINE, &dir);
    assert_error(
        &out,
        3,
        "tls_port",
        &[&tls, "--transport tls"],
        "speaks TLS",
    );
}

#[test]
fn a_wrong_token_is_refused_with_status_4() {
    let dir = TempDir::new("token");
    let serve = Launch::default()
        .quic("")
        .args(["--token", "s3cret"])
        .start();
    let addr = serve.tcp.to_string();
    let out = run(&["send", "--addr", &addr, "--token", "guess"], LINE, &dir);
    assert_error(
        &out,
        4,
        "unauthorized",
        &[&addr, "Y3_TOKEN"],
        "invalid token",
    );

    // A tag the token may not publish: refused once connected, the router named.
    let config = dir.0.join("router.toml");
    std::fs::write(
        &config,
        "[[auth.tokens]]\nname = \"s\"\ntoken = \"pub\"\npublish = [0x10]\n",
    )
    .unwrap();
    let serve = Launch::default()
        .quic("")
        .arg_path("--config", &config)
        .start();
    let addr = serve.tcp.to_string();
    let args = ["send", "--addr", &addr, "--token", "pub", "--tag", "0x11"];
    let out = run(&args, LINE, &dir);
    assert_error(
        &out,
        4,
        "forbidden",
        &[&format!("router at {addr}"), "[[auth.tokens]]"],
        "may not publish tag 0x11",
    );
}

#[test]
fn an_integer_asked_of_a_float_says_it_is_a_float() {
    let dir = TempDir::new("get");
    let out = run(
        &[
            "get", "--hex", "10023ff8", "--path", "0x10", "--as", "int64",
        ],
        "",
        &dir,
    );
    assert_error(
        &out,
        2,
        "trailing_bytes",
        &["0x10", "int64", "float64 1.5", "--as float64"],
        "trailing bytes",
    );
}
