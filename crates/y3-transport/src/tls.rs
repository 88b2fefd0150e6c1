//! TLS 1.3 settings shared by the QUIC adapter and TLS over TCP (one place, as zenoh's
//! `TlsConfigurator` serves both of its QUIC links).
//!
//! - The server side is an [`Identity`]: a certificate chain and key loaded from PEM files,
//!   or a self-signed development certificate generated at startup.
//! - The client side is a [`Trust`]: pin certificates (the dev certificate's DER, or a PEM
//!   file), or `Insecure`, which accepts any certificate and exists for development only.
//!
//! Only TLS 1.3 with the `ring` provider is offered; ALPN is [`ALPN`].

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{self, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::TransportError;

/// The ALPN protocol id of QUIC and TLS connections: YoMo's.
pub const ALPN: &[u8] = b"yomo";

/// The server name development certificates are issued for and clients ask for by default.
pub const DEV_SERVER_NAME: &str = "localhost";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(crypto::ring::default_provider())
}

/// A server's certificate chain and private key.
#[derive(Debug)]
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    self_signed: bool,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            self_signed: self.self_signed,
        }
    }
}

impl Identity {
    /// A fresh self-signed certificate for `localhost`, `127.0.0.1` and `::1`, for
    /// development. Clients pin it with [`Trust::Pinned`] of [`Identity::certificate`].
    ///
    /// # Errors
    /// [`TransportError::Certificate`] when key generation fails.
    pub fn self_signed() -> Result<Identity, TransportError> {
        let names = vec![
            DEV_SERVER_NAME.to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        let certified = rcgen::generate_simple_self_signed(names).map_err(|_| {
            TransportError::Certificate("cannot generate a self-signed certificate")
        })?;
        let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
        Ok(Identity {
            chain: vec![certified.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(key),
            self_signed: true,
        })
    }

    /// Loads a PEM certificate chain and a PEM private key.
    ///
    /// # Errors
    /// [`TransportError::Certificate`] when a file cannot be read or holds no certificate
    /// or key.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Identity, TransportError> {
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(|_| TransportError::Certificate("cannot read the certificate file"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| TransportError::Certificate("invalid PEM in the certificate file"))?;
        if chain.is_empty() {
            return Err(TransportError::Certificate(
                "no certificate in the certificate file",
            ));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|_| {
            TransportError::Certificate("cannot read a private key from the key file")
        })?;
        Ok(Identity {
            chain,
            key,
            self_signed: false,
        })
    }

    /// The end-entity certificate (what a client pins).
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.chain[0]
    }

    /// The end-entity certificate as PEM text.
    pub fn certificate_pem(&self) -> String {
        use std::fmt::Write;
        let mut b64 = String::new();
        base64_encode(self.certificate(), &mut b64);
        let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            // base64 output is ASCII.
            let _ = writeln!(out, "{}", String::from_utf8_lossy(line));
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }

    /// Whether this is a generated development certificate.
    pub fn is_self_signed(&self) -> bool {
        self.self_signed
    }

    /// A rustls server configuration: TLS 1.3 only, ALPN [`ALPN`].
    ///
    /// # Errors
    /// [`TransportError::Tls`] when the key does not match the certificate.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TransportError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Arc::new(config))
    }
}

/// How a client decides to trust the router's certificate.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// Trust exactly these certificates (a pinned self-signed certificate, or CA roots).
    Pinned(Vec<CertificateDer<'static>>),
    /// Accept any certificate. Development only: the connection is encrypted but the
    /// server is not authenticated.
    Insecure,
    /// No trust configured: TLS connections fail with [`TransportError::Config`].
    #[default]
    Unset,
}

impl Trust {
    /// Trust the certificates in a PEM file (a pinned certificate or a CA bundle).
    ///
    /// # Errors
    /// [`TransportError::Certificate`] when the file cannot be read or holds none.
    pub fn from_pem_file(path: &Path) -> Result<Trust, TransportError> {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|_| TransportError::Certificate("cannot read the CA file"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| TransportError::Certificate("invalid PEM in the CA file"))?;
        if certs.is_empty() {
            return Err(TransportError::Certificate("no certificate in the CA file"));
        }
        Ok(Trust::Pinned(certs))
    }

    /// A rustls client configuration: TLS 1.3 only, ALPN [`ALPN`].
    ///
    /// # Errors
    /// [`TransportError::Config`] for [`Trust::Unset`], [`TransportError::Tls`] for a
    /// certificate rustls cannot use as a root.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TransportError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let mut config = match self {
            Trust::Pinned(certs) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certs {
                    roots.add(cert.clone())?;
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            Trust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
                .with_no_client_auth(),
            Trust::Unset => {
                return Err(TransportError::Config(
                    "TLS needs a trusted certificate (a CA file) or the insecure option",
                ))
            }
        };
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Arc::new(config))
    }
}

/// The server name to present for `name` (a DNS name or an IP address).
///
/// # Errors
/// [`TransportError::Config`] for a string that is neither.
pub fn server_name(name: &str) -> Result<ServerName<'static>, TransportError> {
    ServerName::try_from(name.to_owned())
        .map_err(|_| TransportError::Config("invalid TLS server name"))
}

/// Accepts any server certificate but still checks the handshake signatures, so the
/// session is encrypted to whoever holds the presented key. Development only.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Standard base64 with padding (for PEM output; nothing else here needs it).
fn base64_encode(data: &[u8], out: &mut String) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 0x3f) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        for (input, want) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foobar", "Zm9vYmFy"),
        ] {
            let mut out = String::new();
            base64_encode(input, &mut out);
            assert_eq!(out, want);
        }
    }

    #[test]
    fn dev_certificate_pem_roundtrips() {
        let id = Identity::self_signed().unwrap();
        let pem = id.certificate_pem();
        let back = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert_eq!(&back, id.certificate());
        id.server_config().unwrap();
        Trust::Pinned(vec![back]).client_config().unwrap();
        assert_eq!(Trust::Unset.client_config().unwrap_err().kind(), "config");
    }
}
