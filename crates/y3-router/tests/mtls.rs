//! Mutual TLS (issue 25): `[tls] client_ca` makes the router require a client certificate
//! issued by that CA on QUIC and on TLS over TCP. A client with one is served; one without,
//! or with one issued by another CA, is refused at the TLS layer, counted by reason and
//! never admitted; plain TCP beside it is a configuration error.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use y3_router::{Router, RouterConfig, RouterError, RouterHandle};
use y3_transport::sdk::{ClientOptions, Sink, Source, Transport};
use y3_transport::tls::{Identity, Trust};

/// A CA (its PEM file) that issues certificates into `dir`.
struct Ca {
    dir: PathBuf,
    name: String,
    params: CertificateParams,
    key: KeyPair,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        Ca {
            dir: dir.to_owned(),
            name: name.to_owned(),
            params,
            key,
        }
    }

    fn pem(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// Issues a certificate for `names` and `usage`; returns its (cert, key) files.
    fn issue(
        &self,
        leaf: &str,
        names: &[&str],
        usages: &[ExtendedKeyUsagePurpose],
    ) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, leaf);
        params.extended_key_usages = usages.to_vec();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let (c, k) = (
            self.dir.join(format!("{leaf}.pem")),
            self.dir.join(format!("{leaf}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

/// A CA, the router's certificate, a client certificate, and one from another CA.
struct Pki {
    ca: Ca,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
    stranger: (PathBuf, PathBuf),
}

fn pki(test: &str) -> Pki {
    let dir = std::env::temp_dir().join(format!("y3-mtls-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new(&dir, "ca");
    let server = ca.issue(
        "router",
        &["localhost", "127.0.0.1"],
        &[ExtendedKeyUsagePurpose::ServerAuth],
    );
    let client = ca.issue(
        "client",
        &["client"],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    let other = Ca::new(&dir, "other-ca");
    let stranger = other.issue(
        "stranger",
        &["stranger"],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    Pki {
        ca,
        server,
        client,
        stranger,
    }
}

async fn mtls_router(pki: &Pki) -> RouterHandle {
    router(|c| {
        c.tls.cert = pki.server.0.clone();
        c.tls.key = pki.server.1.clone();
        c.tls.client_ca = pki.ca.pem();
        c.listen.tcp_tls = true;
    })
    .await
}

fn client(router: &RouterHandle, pki: &Pki, transport: Transport, name: &str) -> ClientOptions {
    // Up to 3 attempts: a refused certificate must not be retried.
    options(router, transport, name).trust(Trust::from_pem_file(&pki.ca.pem()).unwrap())
}

fn with_cert(options: ClientOptions, files: &(PathBuf, PathBuf)) -> ClientOptions {
    options.client_identity(Identity::client_from_pem_files(&files.0, &files.1).unwrap())
}

#[tokio::test]
async fn a_client_certificate_from_the_ca_is_served_and_others_are_refused() {
    let pki = pki("serve");
    let router = mtls_router(&pki).await;
    for (i, transport) in [Transport::Quic, Transport::TcpTls].into_iter().enumerate() {
        let what = format!("{transport:?}");
        // With a certificate issued by the CA: served.
        let mut sink = Sink::connect(
            with_cert(client(&router, &pki, transport, "sink"), &pki.client),
            &[0x10],
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut source = Source::connect(with_cert(
            client(&router, &pki, transport, "src"),
            &pki.client,
        ))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        source.send(0x10, vec![i as u8]).await.unwrap();
        source.flush().await.unwrap();
        let got = within("the frame", sink.recv()).await.unwrap().unwrap();
        assert_eq!(&got.payload[..], &[i as u8], "{what}");
        source.close().await.unwrap();
        sink.close().await;

        // Without one: refused at the TLS layer, never admitted.
        let n = rejected(&router, "no_client_certificate");
        let err = Source::connect(client(&router, &pki, transport, "bare"))
            .await
            .err()
            .unwrap_or_else(|| panic!("{what}: admitted without a certificate"));
        assert!(
            !err.is_retryable() && err.kind() != "gave_up",
            "{what}: {err}"
        );
        eventually(&format!("{what}: no_client_certificate counted"), || {
            rejected(&router, "no_client_certificate") == n + 1
        })
        .await;

        // With one from another CA: refused too.
        let n = rejected(&router, "bad_client_certificate");
        let err = Source::connect(with_cert(
            client(&router, &pki, transport, "stranger"),
            &pki.stranger,
        ))
        .await
        .err()
        .unwrap_or_else(|| panic!("{what}: admitted with a foreign certificate"));
        assert!(
            !err.is_retryable() && err.kind() != "gave_up",
            "{what}: {err}"
        );
        eventually(&format!("{what}: bad_client_certificate counted"), || {
            rejected(&router, "bad_client_certificate") == n + 1
        })
        .await;
    }
    // Only the two certified pairs were ever admitted.
    assert_eq!(
        counter(&router, "accepted_connections", "transport", "quic")
            + counter(&router, "accepted_connections", "transport", "tcp_tls"),
        4
    );
    ledger(&router).await;
    router.shutdown().await;
}

/// A mesh link presents the router's own certificate, as YoMo's zipper presents
/// `YOMO_TLS_CERT_FILE`: a downstream requiring client certificates admits it when the
/// certificate is issued for client authentication too, and refuses it otherwise.
#[tokio::test]
async fn a_mesh_link_presents_the_routers_certificate() {
    use y3_router::config::{DownstreamConfig, MeshTransport};
    let pki = pki("mesh");
    let b = mtls_router(&pki).await;
    let node = pki.ca.issue(
        "node",
        &["localhost", "127.0.0.1"],
        &[
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    );
    let upstream = |cert: &(PathBuf, PathBuf)| {
        let (cert, b_quic) = (cert.clone(), b.quic_addr().unwrap());
        router(move |c| {
            c.tls.cert = cert.0;
            c.tls.key = cert.1;
            c.mesh.name = "a".into();
            c.mesh.downstream.push(DownstreamConfig {
                name: "b".into(),
                addr: b_quic.to_string(),
                credential: String::new(),
                transport: MeshTransport::Quic,
            });
        })
    };
    let mut sink = Sink::connect(
        with_cert(client(&b, &pki, Transport::Quic, "sink"), &pki.client),
        &[0x10],
    )
    .await
    .unwrap();
    // A certificate for client authentication too: the link is admitted, frames cross.
    let a = upstream(&node).await;
    let mut source = Source::connect(options(&a, Transport::Tcp, "src"))
        .await
        .unwrap();
    let got = within("a frame across the link", async {
        loop {
            source.send(0x10, vec![7]).await.unwrap();
            source.flush().await.unwrap();
            if let Ok(Some(got)) =
                tokio::time::timeout(std::time::Duration::from_millis(100), sink.recv()).await
            {
                return got.unwrap();
            }
        }
    })
    .await;
    assert_eq!(&got.payload[..], &[7]);
    source.close().await.unwrap();
    ledger(&a).await;
    a.shutdown().await;
    // The server-only certificate is not one for clients: refused, counted.
    let n = rejected(&b, "bad_client_certificate");
    let a = upstream(&pki.server).await;
    eventually("the link refused", || {
        rejected(&b, "bad_client_certificate") > n
    })
    .await;
    a.shutdown().await;
    sink.close().await;
    ledger(&b).await;
    b.shutdown().await;
}

#[tokio::test]
async fn client_certificates_leave_no_plain_door_open() {
    let pki = pki("plain");
    let mut config = RouterConfig::ephemeral();
    config.tls.client_ca = pki.ca.pem();
    // Plain TCP beside it would let clients in without a certificate.
    let err = Router::start(config.clone()).await.err().unwrap();
    assert!(
        matches!(
            err,
            RouterError::Config {
                field: "tls.client_ca",
                ..
            }
        ),
        "{err}"
    );
    config.listen.tcp = String::new();
    let router = Router::start(config).await.unwrap();
    ledger(&router).await;
    router.shutdown().await;
    // A CA file that holds no certificate is an error, not mutual TLS turned off.
    let empty = pki.ca.dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let mut config = RouterConfig::ephemeral();
    config.listen.tcp_tls = true;
    config.tls.client_ca = empty;
    let err = Router::start(config).await.err().unwrap();
    assert_eq!(err.kind(), "certificate", "{err}");
}
