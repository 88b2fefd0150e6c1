//! Mutual TLS from the command line (issue 25): `y3 serve --client-ca` and YoMo's own
//! variables (`YOMO_TLS_VERIFY_PEER=true`, `YOMO_TLS_CACERT_FILE`, `YOMO_TLS_CERT_FILE`,
//! `YOMO_TLS_KEY_FILE`) require client certificates; `y3 send` presents one from `--cert`/
//! `--key` or from the same variables, as YoMo's clients do. A conflict between the variables
//! and the configuration, or a plain TCP listener beside client certificates, stops `y3 serve`
//! with an error naming the setting.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::serve::{Launch, Serve};
use common::{wait, y3};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA in `dir` (ca.pem), the router's certificate (router.pem/.key, for localhost and
/// 127.0.0.1) and a client certificate (client.pem/.key).
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("y3-mtls-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "y3 test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        std::fs::write(dir.join("ca.pem"), ca.self_signed(&key).unwrap().pem()).unwrap();
        let issuer = Issuer::new(ca, key);
        for (leaf, names, usage) in [
            (
                "router",
                vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
                ExtendedKeyUsagePurpose::ServerAuth,
            ),
            (
                "client",
                vec!["client".to_owned()],
                ExtendedKeyUsagePurpose::ClientAuth,
            ),
        ] {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &issuer).unwrap();
            std::fs::write(dir.join(format!("{leaf}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{leaf}.key")), key.serialize_pem()).unwrap();
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `y3 send` of one frame over QUIC to `serve`, with `args` and `env`.
fn send(serve: &Serve, args: &[&str], env: &[(&str, &str)]) -> Output {
    let addr = serve.quic.unwrap().to_string();
    let mut child = y3()
        .args(["send", "--transport", "quic", "--addr", &addr])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"payload_hex\":\"0102\"}\n");
    wait(child, "y3 send")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn yomo_env<'a>(pki: &'a Pki, cert: &'a str, key: &'a str) -> Vec<(&'static str, String)> {
    vec![
        ("YOMO_TLS_VERIFY_PEER", "true".to_owned()),
        ("YOMO_TLS_CACERT_FILE", pki.path("ca.pem")),
        ("YOMO_TLS_CERT_FILE", pki.path(cert)),
        ("YOMO_TLS_KEY_FILE", pki.path(key)),
    ]
}

fn launch_with(env: &[(&'static str, String)], runtime: &Path) -> Launch {
    env.iter().fold(
        Launch::default().env("XDG_RUNTIME_DIR", runtime),
        |l, (k, v)| l.env(k, v),
    )
}

#[test]
fn client_certificates_from_flags_and_from_yomos_variables() {
    let pki = Pki::new("flags");
    let serve = Launch::default()
        .env("XDG_RUNTIME_DIR", &pki.dir)
        .args(["--tcp-tls"])
        .arg_path("--tls-cert", pki.dir.join("router.pem"))
        .arg_path("--tls-key", pki.dir.join("router.key"))
        .arg_path("--client-ca", pki.dir.join("ca.pem"))
        .start();
    let ca = pki.path("ca.pem");
    // With the client certificate: sent.
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let out = send(&serve, &["--ca", &ca, "--cert", &cert, "--key", &key], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // From YoMo's variables alone, as a YoMo client takes them.
    let env = yomo_env(&pki, "client.pem", "client.key");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = send(&serve, &[], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    // Without one: refused, exit status 2, and counted.
    let out = send(&serve, &["--ca", &ca], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));
    // The router's own certificate is not a client certificate.
    let out = send(
        &serve,
        &[
            "--ca",
            &ca,
            "--cert",
            &pki.path("router.pem"),
            "--key",
            &pki.path("router.key"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    // Each refused once (not retried: the refusal would repeat), never admitted.
    for (metric, want) in [
        (
            "y3_router_rejected_total{reason=\"no_client_certificate\"}",
            1,
        ),
        (
            "y3_router_rejected_total{reason=\"bad_client_certificate\"}",
            1,
        ),
        (
            "y3_router_accepted_connections_total{transport=\"quic\"}",
            2,
        ),
    ] {
        assert_eq!(counted(&serve, metric, want), want, "{metric}");
    }
}

/// `metric`, once it reached `want` (the router counts a refusal as the client learns of
/// it), or after a second.
fn counted(serve: &Serve, metric: &str, want: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let n = serve.metric(metric);
        if n >= want || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn yomos_variables_configure_the_router_and_conflicts_stop_it() {
    let pki = Pki::new("env");
    let env = yomo_env(&pki, "router.pem", "router.key");
    // As YoMo's zipper reads them, with TLS on the TCP listener.
    let serve = launch_with(&env, &pki.dir).args(["--tcp-tls"]).start();
    let ca = pki.path("ca.pem");
    let out = send(&serve, &["--ca", &ca], &[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let out = send(&serve, &["--ca", &ca, "--cert", &cert, "--key", &key], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let metric = "y3_router_rejected_total{reason=\"no_client_certificate\"}";
    assert_eq!(counted(&serve, metric, 1), 1);
    drop(serve);

    let refused = |env: &[(&'static str, String)], args: &[&str]| {
        let mut cmd = y3();
        cmd.args(["serve", "--quic", "127.0.0.1:0", "--metrics", ""])
            .args(args)
            .env("XDG_RUNTIME_DIR", &pki.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = wait(cmd.spawn().unwrap(), "y3 serve");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stderr(&out)
    };
    // Plain TCP beside client certificates would be a door without them.
    let text = refused(&env, &["--tcp", "127.0.0.1:0"]);
    assert!(text.contains("tls.client_ca"), "{text}");
    // The variables and the flags disagree: an error, not a pick.
    let text = refused(&env, &["--tcp", "", "--client-ca", &pki.path("client.pem")]);
    assert!(
        text.contains("tls.client_ca") && text.contains("YOMO_TLS_CACERT_FILE"),
        "{text}"
    );
    let mut half = env.clone();
    half.retain(|(k, _)| *k != "YOMO_TLS_KEY_FILE");
    let text = refused(&half, &["--tcp", ""]);
    assert!(text.contains("YOMO_TLS_KEY_FILE"), "{text}");
}
