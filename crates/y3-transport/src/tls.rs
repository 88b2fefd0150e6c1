//! TLS 1.3 settings shared by the QUIC adapter and TLS over TCP (one place, as zenoh's
//! `TlsConfigurator` serves both of its QUIC links).
//!
//! - The server side is an [`Identity`]: a certificate chain and key loaded from PEM files,
//!   or a self-signed development certificate generated at startup.
//! - The client side is a [`Trust`]: pin certificates (the dev certificate's DER, or a PEM
//!   file), pin the SHA-256 [`fingerprint`] of the router's certificate (what `y3 serve`
//!   prints), or `Insecure`, which accepts any certificate and exists for development only.
//! - Mutual TLS: a server given a [`ClientCa`] requires every client to present a
//!   certificate issued by it ([`Identity::server_config_with`]); a client presents one
//!   with [`Trust::client_config_with`]. A refused client certificate is told apart from
//!   other setup failures by [`client_cert_refusal`].
//! - YoMo v1.22's own switches ([`YomoTlsEnv`]): `YOMO_TLS_VERIFY_PEER`,
//!   `YOMO_TLS_CACERT_FILE`, `YOMO_TLS_CERT_FILE`, `YOMO_TLS_KEY_FILE`, read as YoMo's
//!   `pkg/tls` reads them.
//!
//! A development certificate is written for local clients with
//! [`Identity::write_certificate_pem`]: mode 0600, in a directory that no other user can
//! write to (a missing one is created 0700; [`default_dev_cert_path`] is a per-user one), and
//! never through a symbolic link.
//!
//! Only TLS 1.3 with the `ring` provider is offered; ALPN is [`ALPN`].

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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

/// ring's provider, its TLS 1.3 suites ordered AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305
/// (ring's own order starts with AES-256-GCM). A y3 client offers them in this order and a
/// y3 router follows the client's, so y3 talks to itself with AES-128-GCM, as YoMo's Go
/// clients (Go's order on AES hardware) already do: ten AES rounds instead of fourteen on
/// every QUIC packet and TLS record, where sealing and opening were 7.5% of the router's
/// and of the clients' CPU samples at 1 KiB frames over QUIC (`perf`, net e2e).
fn provider() -> Arc<CryptoProvider> {
    let mut provider = crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|suite| match suite.suite() {
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => 0,
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => 1,
            _ => 2,
        });
    Arc::new(provider)
}

/// The SHA-256 digest of a certificate's DER bytes: what [`Trust::Fingerprint`] pins.
pub fn fingerprint(cert: &CertificateDer<'_>) -> [u8; 32] {
    sha256(cert)
}

/// A fingerprint as lowercase hex without separators (how `y3 serve` prints it and
/// `--pin` takes it).
pub fn fingerprint_hex(fingerprint: &[u8; 32]) -> String {
    fingerprint.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    // A TLS 1.3 suite always carries its hash; this suite's is SHA-256, 32 bytes long.
    if let Some(suite) = crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256.tls13() {
        out.copy_from_slice(suite.common.hash_provider.hash(data).as_ref());
    }
    out
}

/// Where `y3 serve` keeps its development certificate unless told otherwise, in a per-user
/// directory: `$XDG_RUNTIME_DIR/y3`, else `$XDG_CACHE_HOME/y3`, else `~/.cache/y3`, else
/// `y3-$USER` in the temp directory.
pub fn default_dev_cert_path() -> PathBuf {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let dir = if let Some(run) = absolute("XDG_RUNTIME_DIR") {
        run.join("y3")
    } else if let Some(cache) = absolute("XDG_CACHE_HOME") {
        cache.join("y3")
    } else if let Some(home) = absolute("HOME") {
        home.join(".cache").join("y3")
    } else {
        let user = std::env::var("USER").unwrap_or_else(|_| "user".to_owned());
        std::env::temp_dir().join(format!("y3-{user}"))
    };
    dir.join("dev-cert.pem")
}

/// Where `y3 serve` writes the dev certificate of the router listening on `listener`
/// unless told otherwise, and where `y3 send`/`observe` look for it first: beside
/// [`default_dev_cert_path`], one file per address (`dev-cert-127.0.0.1_9000.pem`), so two
/// routers on a host do not overwrite one file. An ephemeral port (0) has no name of its
/// own: [`default_dev_cert_path`].
pub fn default_dev_cert_path_for(listener: SocketAddr) -> PathBuf {
    let shared = default_dev_cert_path();
    if listener.port() == 0 {
        return shared;
    }
    shared.with_file_name(format!("dev-cert-{}.pem", address_name(listener)))
}

fn refuse(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what.to_owned())
}

/// Checks (creating it 0700 when missing) the directory a private file goes in: a real
/// directory, not a symbolic link, that no other user can write to (unless sticky, as the
/// temp directory is). The one check for every directory y3 keeps secrets in (the dev
/// certificate here, the router's state directory).
///
/// # Errors
/// The directory cannot be made or read, or it fails a check (`PermissionDenied`).
pub fn private_dir(dir: &Path) -> io::Result<fs::Metadata> {
    if let Err(e) = fs::symlink_metadata(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(e);
        }
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
    }
    let meta = fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(refuse("the directory is a symbolic link (not followed)"));
    }
    if !meta.is_dir() {
        return Err(refuse("not a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(refuse("the directory is writable by other users"));
        }
    }
    Ok(meta)
}

/// Writes `contents` to `path`, readable by this user only (0600), without following a
/// symbolic link at `path` and without writing into a file someone else created there: the
/// bytes go to a fresh file (`create_new`, `O_EXCL`) beside it that is then renamed over
/// `path`.
fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| refuse("not a file name"))?
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir_meta = private_dir(dir)?;
    let tmp = dir.join(format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        fastrand::u64(..)
    ));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    let written = (|| {
        #[cfg(unix)]
        {
            // The directory must be this user's (or root's, as the temp directory is): the
            // owner of a directory may replace any file in it.
            use std::os::unix::fs::MetadataExt;
            let me = file.metadata()?.uid();
            if dir_meta.uid() != me && dir_meta.uid() != 0 {
                return Err(refuse("the directory belongs to another user"));
            }
        }
        #[cfg(not(unix))]
        let _ = &dir_meta;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    let meta = fs::symlink_metadata(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refuse("the written file is readable by other users"));
        }
    }
    if !meta.is_file() {
        return Err(refuse("the written path is not a plain file"));
    }
    Ok(())
}

/// Days a generated development certificate is valid.
pub const DEV_CERT_VALIDITY_DAYS: u64 = 365;

/// A kept development certificate is made anew when fewer days than this are left.
pub const DEV_CERT_RENEW_DAYS: u64 = 30;

/// The first line of a kept development identity: its expiry, in days since 1970.
const KEPT_HEADER: &str = "# y3 development certificate; not after day ";

/// Whether [`Identity::kept_self_signed`] reused the kept certificate or made one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The kept one, still valid long enough.
    Reused,
    /// A new one (none kept, expiring soon, or damaged), now kept.
    Made,
}

/// Where the development identity of the listener on `listener` is kept in `dir`:
///
/// ```text
///  <dir>/dev-identity-127.0.0.1_9000.pem   0600
///    # y3 development certificate; not after day 20855
///    -----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----
///    -----BEGIN PRIVATE KEY----- ... -----END PRIVATE KEY-----
/// ```
pub fn dev_identity_path(dir: &Path, listener: SocketAddr) -> PathBuf {
    dir.join(format!("dev-identity-{}.pem", address_name(listener)))
}

/// An address as part of a file name: `127.0.0.1:9000` → `127.0.0.1_9000`.
fn address_name(addr: SocketAddr) -> String {
    addr.to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Reads a kept identity and its expiry day; refuses a file others may read.
fn read_kept(path: &Path) -> io::Result<(Identity, i64)> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(refuse("the kept dev identity is not a plain file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refuse("the kept dev identity is readable by other users"));
        }
    }
    let text = fs::read_to_string(path)?;
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let not_after = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix(KEPT_HEADER))
        .and_then(|day| day.trim().parse::<i64>().ok())
        .ok_or_else(|| invalid("no expiry line"))?;
    let chain = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("invalid certificate PEM"))?;
    let key = PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|_| invalid("no key"))?;
    if chain.len() != 1 {
        return Err(invalid("not one certificate"));
    }
    let identity = Identity {
        chain,
        key,
        self_signed: true,
    };
    // A key that does not match its certificate is damage: made anew.
    identity
        .server_config()
        .map_err(|_| invalid("key and certificate differ"))?;
    Ok((identity, not_after))
}

/// Days since 1970-01-01 now.
fn unix_days_now() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs / 86_400) as i64
}

/// The civil date (year, month, day) of `days` since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Days near now: the year fits an i32, month and day a u8.
    (year as i32, month as u8, day as u8)
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
    /// development, valid from a day ago for [`DEV_CERT_VALIDITY_DAYS`]. Clients pin it
    /// with [`Trust::Pinned`] of [`Identity::certificate`].
    ///
    /// # Errors
    /// [`TransportError::Certificate`] when key generation fails.
    pub fn self_signed() -> Result<Identity, TransportError> {
        Identity::self_signed_until(unix_days_now() + DEV_CERT_VALIDITY_DAYS as i64)
            .map(|(id, _)| id)
    }

    /// [`Identity::self_signed`], valid until the start of day `not_after_days` (days
    /// since 1970): the identity and its PEM (certificate, then private key).
    fn self_signed_until(not_after_days: i64) -> Result<(Identity, String), TransportError> {
        let bad = || TransportError::Certificate("cannot generate a self-signed certificate");
        let names = vec![
            DEV_SERVER_NAME.to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        let mut params = rcgen::CertificateParams::new(names).map_err(|_| bad())?;
        let date = |days: i64| {
            let (y, m, d) = civil_from_days(days);
            rcgen::date_time_ymd(y, m, d)
        };
        params.not_before = date(unix_days_now() - 1);
        params.not_after = date(not_after_days);
        let key = rcgen::KeyPair::generate().map_err(|_| bad())?;
        let cert = params.self_signed(&key).map_err(|_| bad())?;
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        let key = PrivatePkcs8KeyDer::from(key.serialize_der());
        let identity = Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(key),
            self_signed: true,
        };
        Ok((identity, pem))
    }

    /// The development certificate kept for the listener on `listener` in the state
    /// directory `dir` ([`dev_identity_path`]), reused while more than
    /// [`DEV_CERT_RENEW_DAYS`] of its validity are left (so that clients' pins survive
    /// restarts), else made anew and kept there (0600, in a directory only this user can
    /// write to). Each listener address has its own, so routers sharing a directory do
    /// not share or overwrite keys.
    ///
    /// # Errors
    /// IO errors of the directory or the file (the caller falls back to
    /// [`Identity::self_signed`]); a kept file readable by others is refused.
    pub fn kept_self_signed(dir: &Path, listener: SocketAddr) -> io::Result<(Identity, Kept)> {
        private_dir(dir)?;
        let path = dev_identity_path(dir, listener);
        let today = unix_days_now();
        match read_kept(&path) {
            Ok((identity, not_after_days))
                if not_after_days - today > DEV_CERT_RENEW_DAYS as i64 =>
            {
                return Ok((identity, Kept::Reused));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Err(e),
            // A damaged file is replaced.
            Err(_) => {}
        }
        let not_after = today + DEV_CERT_VALIDITY_DAYS as i64;
        let (identity, pem) = Identity::self_signed_until(not_after).map_err(io::Error::other)?;
        let text = format!("{KEPT_HEADER}{not_after}\n{pem}");
        write_private(&path, text.as_bytes())?;
        Ok((identity, Kept::Made))
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

    /// The SHA-256 [`fingerprint`] of the end-entity certificate.
    pub fn fingerprint(&self) -> [u8; 32] {
        fingerprint(self.certificate())
    }

    /// Writes [`Identity::certificate_pem`] to `path` for local clients: mode 0600, never
    /// through a symbolic link, in a directory no other user can write to (created 0700 if
    /// missing). The private key is never written.
    ///
    /// # Errors
    /// IO errors, and `PermissionDenied` for a directory that is a symbolic link, belongs
    /// to another user or is writable by others.
    pub fn write_certificate_pem(&self, path: &Path) -> io::Result<()> {
        write_private(path, self.certificate_pem().as_bytes())
    }

    /// A rustls server configuration: TLS 1.3 only, ALPN [`ALPN`].
    ///
    /// # Errors
    /// [`TransportError::Tls`] when the key does not match the certificate.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TransportError> {
        self.server_config_with(None)
    }

    /// A rustls server configuration that, given `client_ca`, requires every client to
    /// present a certificate issued by one of its certificates (and refuses the
    /// handshake of one that does not: see [`client_cert_refusal`]).
    ///
    /// # Errors
    /// [`TransportError::Tls`] when the key does not match the certificate,
    /// [`TransportError::Certificate`] for a CA certificate rustls cannot use.
    pub fn server_config_with(
        &self,
        client_ca: Option<&ClientCa>,
    ) -> Result<Arc<rustls::ServerConfig>, TransportError> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => builder.with_client_cert_verifier(ca.verifier()?),
        };
        let mut config = builder.with_single_cert(self.chain.clone(), self.key.clone_key())?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Arc::new(config))
    }

    /// Loads a client certificate chain and its key (what a client presents to a router
    /// that requires one); the same as [`Identity::from_pem_files`].
    ///
    /// # Errors
    /// As [`Identity::from_pem_files`].
    pub fn client_from_pem_files(cert: &Path, key: &Path) -> Result<Identity, TransportError> {
        Identity::from_pem_files(cert, key)
    }
}

/// Reads every certificate of a PEM file; `what` names the file in errors.
fn pem_certificates(
    path: &Path,
    what: CaFile,
) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|_| TransportError::Certificate(what.unreadable()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| TransportError::Certificate(what.invalid()))?;
    if certs.is_empty() {
        return Err(TransportError::Certificate(what.empty()));
    }
    Ok(certs)
}

/// Which CA file an error is about.
#[derive(Clone, Copy)]
enum CaFile {
    /// A client's: the router's CA or pinned certificate.
    Server,
    /// A router's: the CA of client certificates.
    Client,
}

impl CaFile {
    fn unreadable(self) -> &'static str {
        match self {
            CaFile::Server => "cannot read the CA file",
            CaFile::Client => "cannot read the client CA file",
        }
    }

    fn invalid(self) -> &'static str {
        match self {
            CaFile::Server => "invalid PEM in the CA file",
            CaFile::Client => "invalid PEM in the client CA file",
        }
    }

    fn empty(self) -> &'static str {
        match self {
            CaFile::Server => "no certificate in the CA file",
            CaFile::Client => "no certificate in the client CA file",
        }
    }
}

/// The certificate authorities a router accepts client certificates from (`[tls]
/// client_ca`, or YoMo's `YOMO_TLS_CACERT_FILE` with `YOMO_TLS_VERIFY_PEER=true`).
#[derive(Debug, Clone)]
pub struct ClientCa {
    roots: Vec<CertificateDer<'static>>,
}

impl ClientCa {
    /// The CA certificates of a PEM bundle.
    ///
    /// # Errors
    /// [`TransportError::Certificate`] when the file cannot be read or holds none.
    pub fn from_pem_file(path: &Path) -> Result<ClientCa, TransportError> {
        pem_certificates(path, CaFile::Client).map(|roots| ClientCa { roots })
    }

    /// These CA certificates.
    pub fn from_certificates(roots: Vec<CertificateDer<'static>>) -> ClientCa {
        ClientCa { roots }
    }

    fn verifier(
        &self,
    ) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TransportError> {
        let mut store = rustls::RootCertStore::empty();
        for cert in &self.roots {
            store.add(cert.clone()).map_err(|_| {
                TransportError::Certificate("a client CA certificate is not usable as a root")
            })?;
        }
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider())
            .build()
            .map_err(|_| TransportError::Certificate("the client CA file holds no usable root"))
    }
}

/// Why a router refused a client at the TLS layer for its certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClientCertRefusal {
    /// The client presented no certificate.
    #[error("the client presented no certificate")]
    Missing,
    /// The certificate was not issued by the client CA, or is expired, or not for
    /// client authentication.
    #[error("the client certificate was not accepted (not issued by the client CA, expired, or not for client authentication)")]
    Invalid,
}

impl ClientCertRefusal {
    /// The stable snake_case name (the `reason` of the router's `rejected` counter).
    pub fn kind(self) -> &'static str {
        match self {
            ClientCertRefusal::Missing => "no_client_certificate",
            ClientCertRefusal::Invalid => "bad_client_certificate",
        }
    }
}

/// TLS alerts (RFC 8446 §6) a server sends over a client certificate it refuses.
const CERTIFICATE_REQUIRED: u8 = 116;
const CERTIFICATE_ALERTS: [u8; 8] = [42, 43, 44, 45, 46, 48, 49, 51];

/// The refusal a TLS alert code (one of the above) stands for, if any.
fn refusal_of_alert(alert: u8) -> Option<ClientCertRefusal> {
    if alert == CERTIFICATE_REQUIRED {
        Some(ClientCertRefusal::Missing)
    } else if CERTIFICATE_ALERTS.contains(&alert) {
        Some(ClientCertRefusal::Invalid)
    } else {
        None
    }
}

/// The TLS alert a QUIC connection was closed with (crypto error codes `0x100 + alert`,
/// RFC 9001 §4.8).
#[cfg(feature = "quic")]
fn quic_alert(code: u64) -> Option<u8> {
    Some(code.checked_sub(0x100).filter(|a| *a < 0x100)? as u8)
}

/// The QUIC connection error an IO error of a QUIC stream carries (its read or write
/// learned the connection was lost), if it is one.
#[cfg(feature = "quic")]
pub(crate) fn quic_connection_lost<'a>(
    inner: &'a (dyn std::error::Error + Send + Sync + 'static),
) -> Option<&'a quinn::ConnectionError> {
    if let Some(quinn::ReadError::ConnectionLost(e)) = inner.downcast_ref() {
        Some(e)
    } else if let Some(quinn::WriteError::ConnectionLost(e)) = inner.downcast_ref() {
        Some(e)
    } else {
        inner.downcast_ref::<quinn::ConnectionError>()
    }
}

fn refusal_of(error: &rustls::Error) -> Option<ClientCertRefusal> {
    match error {
        rustls::Error::NoCertificatesPresented => Some(ClientCertRefusal::Missing),
        rustls::Error::InvalidCertificate(_) => Some(ClientCertRefusal::Invalid),
        _ => None,
    }
}

/// Whether a server-side setup error is the refusal of the client's certificate (and
/// which), as opposed to any other failed handshake. Over TLS/TCP the rustls error itself
/// says; over QUIC, the alert the server closed the connection with.
pub fn client_cert_refusal(error: &TransportError) -> Option<ClientCertRefusal> {
    match error {
        TransportError::Tls(e) => refusal_of(e),
        TransportError::Io(e) => e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .and_then(refusal_of),
        #[cfg(feature = "quic")]
        TransportError::QuicConnection(quinn::ConnectionError::TransportError(e)) => {
            refusal_of_alert(quic_alert(u64::from(e.code))?)
        }
        _ => None,
    }
}

/// Whether a client's connect error is the router refusing its client certificate (or
/// the lack of one): the alert the router sent over TLS/TCP, or closed QUIC with.
pub fn client_cert_refused(error: &TransportError) -> Option<ClientCertRefusal> {
    let of_rustls = |e: &rustls::Error| match e {
        rustls::Error::AlertReceived(alert) => refusal_of_alert(u8::from(*alert)),
        _ => None,
    };
    #[cfg(feature = "quic")]
    let of_close = |lost: &quinn::ConnectionError| match lost {
        quinn::ConnectionError::ConnectionClosed(close) => {
            refusal_of_alert(quic_alert(u64::from(close.error_code))?)
        }
        _ => None,
    };
    match error {
        TransportError::Tls(e) => of_rustls(e),
        TransportError::Io(e) => {
            let inner = e.get_ref()?;
            if let Some(e) = inner.downcast_ref::<rustls::Error>() {
                return of_rustls(e);
            }
            // Over QUIC, the first read or write after the handshake learns of the close.
            #[cfg(feature = "quic")]
            {
                return quic_connection_lost(inner).and_then(of_close);
            }
            #[allow(unreachable_code)]
            None
        }
        #[cfg(feature = "quic")]
        TransportError::QuicConnection(e) => of_close(e),
        TransportError::GaveUp { last, .. } => client_cert_refused(last),
        _ => None,
    }
}

/// Why a client did not trust the router it reached, in plain words (the raw rustls error
/// names `ApplicationVerificationFailure`, `BadSignature`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TrustFailure {
    /// The certificate's SHA-256 fingerprint is not the pinned one (`--pin`).
    #[error("its certificate is not the one pinned: the fingerprint differs (a different router, or one that made a new certificate)")]
    WrongPin,
    /// The certificate is not issued by (or is not) a certificate the client trusts.
    #[error("its certificate is not one you trust (not issued by the CA file, or not the pinned certificate)")]
    Untrusted,
    /// The certificate has expired or is not valid yet.
    #[error("its certificate has expired or is not valid yet")]
    Expired,
    /// The certificate is not issued for the name the client asked for.
    #[error("its certificate is not issued for the server name asked for")]
    WrongName,
    /// The port answered something that is not TLS (a plaintext listener).
    #[error("the port does not speak TLS (a plaintext listener?)")]
    NotTls,
}

impl TrustFailure {
    /// The stable snake_case name.
    pub fn kind(self) -> &'static str {
        match self {
            TrustFailure::WrongPin => "wrong_pin",
            TrustFailure::Untrusted => "untrusted_certificate",
            TrustFailure::Expired => "expired_certificate",
            TrustFailure::WrongName => "wrong_server_name",
            TrustFailure::NotTls => "not_tls",
        }
    }

    fn of_rustls(error: &rustls::Error) -> Option<TrustFailure> {
        use rustls::CertificateError as C;
        match error {
            // Only the fingerprint verifier (`Verifier`) fails this way.
            rustls::Error::InvalidCertificate(C::ApplicationVerificationFailure) => {
                Some(TrustFailure::WrongPin)
            }
            rustls::Error::InvalidCertificate(
                C::Expired
                | C::NotValidYet
                | C::ExpiredContext { .. }
                | C::NotValidYetContext { .. },
            ) => Some(TrustFailure::Expired),
            rustls::Error::InvalidCertificate(
                C::NotValidForName | C::NotValidForNameContext { .. },
            ) => Some(TrustFailure::WrongName),
            rustls::Error::InvalidCertificate(_) => Some(TrustFailure::Untrusted),
            rustls::Error::InvalidMessage(_) => Some(TrustFailure::NotTls),
            _ => None,
        }
    }

    /// Over QUIC, quinn keeps only the rustls error's text.
    fn of_text(text: &str) -> Option<TrustFailure> {
        if !text.contains("invalid peer certificate") {
            return None;
        }
        Some(if text.contains("ApplicationVerificationFailure") {
            TrustFailure::WrongPin
        } else if text.contains("Expired") || text.contains("NotValidYet") {
            TrustFailure::Expired
        } else if text.contains("NotValidForName") {
            TrustFailure::WrongName
        } else {
            TrustFailure::Untrusted
        })
    }

    /// Whether a client's connect error is a TLS trust failure, and which.
    pub fn of(error: &TransportError) -> Option<TrustFailure> {
        match error {
            TransportError::Tls(e) => TrustFailure::of_rustls(e),
            TransportError::Io(e) => e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .and_then(TrustFailure::of_rustls),
            #[cfg(feature = "quic")]
            TransportError::QuicConnection(quinn::ConnectionError::TransportError(e)) => {
                TrustFailure::of_text(&e.reason)
            }
            TransportError::GaveUp { last, .. } => TrustFailure::of(last),
            _ => None,
        }
    }
}

/// YoMo v1.22's TLS environment variables, as its `pkg/tls` reads them: an empty value is
/// unset, `YOMO_TLS_VERIFY_PEER` is on only when it says `true` (any case).
///
/// What YoMo does with them: the zipper serves `YOMO_TLS_CERT_FILE`/`YOMO_TLS_KEY_FILE`
/// (both set; one alone is ignored) and, with `YOMO_TLS_VERIFY_PEER=true`, requires client
/// certificates issued by `YOMO_TLS_CACERT_FILE`; its clients present the same certificate
/// files when both are set, and verify the zipper against `YOMO_TLS_CACERT_FILE` only with
/// `YOMO_TLS_VERIFY_PEER=true` (otherwise they accept any certificate).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct YomoTlsEnv {
    /// `YOMO_TLS_VERIFY_PEER`, when set: whether it says `true`.
    pub verify_peer: Option<bool>,
    /// `YOMO_TLS_CACERT_FILE`.
    pub ca_cert_file: Option<PathBuf>,
    /// `YOMO_TLS_CERT_FILE`.
    pub cert_file: Option<PathBuf>,
    /// `YOMO_TLS_KEY_FILE`.
    pub key_file: Option<PathBuf>,
    /// `YOMO_TLS_CA_CERT_FILE` is set: a name YoMo does not read (a likely typo).
    pub misspelt_ca: bool,
}

impl YomoTlsEnv {
    /// The variable that turns client certificates on.
    pub const VERIFY_PEER: &'static str = "YOMO_TLS_VERIFY_PEER";
    /// The variable naming the CA file.
    pub const CACERT_FILE: &'static str = "YOMO_TLS_CACERT_FILE";
    /// The variable naming the certificate chain file.
    pub const CERT_FILE: &'static str = "YOMO_TLS_CERT_FILE";
    /// The variable naming the private key file.
    pub const KEY_FILE: &'static str = "YOMO_TLS_KEY_FILE";

    /// The variables of this process's environment.
    pub fn from_env() -> YomoTlsEnv {
        YomoTlsEnv::from_lookup(|name| std::env::var_os(name))
    }

    /// The variables as `lookup` gives them (for tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> YomoTlsEnv {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let path = |name: &str| get(name).map(PathBuf::from);
        YomoTlsEnv {
            verify_peer: get(Self::VERIFY_PEER)
                .map(|v| v.to_string_lossy().eq_ignore_ascii_case("true")),
            ca_cert_file: path(Self::CACERT_FILE),
            cert_file: path(Self::CERT_FILE),
            key_file: path(Self::KEY_FILE),
            misspelt_ca: get("YOMO_TLS_CA_CERT_FILE").is_some(),
        }
    }

    /// Whether `YOMO_TLS_VERIFY_PEER=true`.
    pub fn verifies_peer(&self) -> bool {
        self.verify_peer == Some(true)
    }

    /// The certificate and key files, when both are set (YoMo ignores one alone).
    pub fn cert_and_key(&self) -> Option<(&Path, &Path)> {
        Some((self.cert_file.as_deref()?, self.key_file.as_deref()?))
    }

    /// The certificate a YoMo client would present: both files set.
    ///
    /// # Errors
    /// As [`Identity::from_pem_files`].
    pub fn client_identity(&self) -> Result<Option<Identity>, TransportError> {
        self.cert_and_key()
            .map(|(cert, key)| Identity::client_from_pem_files(cert, key))
            .transpose()
    }

    /// How a YoMo client would verify the router: against `YOMO_TLS_CACERT_FILE` with
    /// `YOMO_TLS_VERIFY_PEER=true`; `None` otherwise (YoMo's clients then verify nothing,
    /// and y3's keep their own trust setting).
    ///
    /// # Errors
    /// As [`Trust::from_pem_file`].
    pub fn client_trust(&self) -> Result<Option<Trust>, TransportError> {
        match (&self.ca_cert_file, self.verifies_peer()) {
            (Some(ca), true) => Trust::from_pem_file(ca).map(Some),
            _ => Ok(None),
        }
    }
}

/// How a client decides to trust the router's certificate.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// Trust exactly these certificates (a pinned self-signed certificate, or CA roots).
    Pinned(Vec<CertificateDer<'static>>),
    /// Trust exactly the certificate whose SHA-256 [`fingerprint`] this is, whatever its
    /// names and dates (the dev certificate `y3 serve` announces).
    Fingerprint([u8; 32]),
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
        pem_certificates(path, CaFile::Server).map(Trust::Pinned)
    }

    /// Trust the certificate with this SHA-256 fingerprint: 64 hex digits, optionally
    /// separated by `:` and prefixed with `sha256:`, in either case.
    ///
    /// # Errors
    /// [`TransportError::Config`] for anything else.
    pub fn from_fingerprint(text: &str) -> Result<Trust, TransportError> {
        let text = text.trim();
        let text = text
            .strip_prefix("sha256:")
            .or_else(|| text.strip_prefix("SHA256:"))
            .unwrap_or(text);
        let digits: Vec<u8> = text.bytes().filter(|&b| b != b':').collect();
        let bad = || TransportError::Config("a fingerprint is 64 hex digits (SHA-256)");
        if digits.len() != 64 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Trust::Fingerprint(out))
    }

    /// A rustls client configuration: TLS 1.3 only, ALPN [`ALPN`].
    ///
    /// # Errors
    /// [`TransportError::Config`] for [`Trust::Unset`], [`TransportError::Tls`] for a
    /// certificate rustls cannot use as a root.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TransportError> {
        self.client_config_with(None)
    }

    /// The same, presenting `identity` as the client certificate when given (to a router
    /// that requires one).
    ///
    /// # Errors
    /// As [`Trust::client_config`]; [`TransportError::Tls`] for a key that does not match
    /// the certificate.
    pub fn client_config_with(
        &self,
        identity: Option<&Identity>,
    ) -> Result<Arc<rustls::ClientConfig>, TransportError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = match self {
            Trust::Pinned(certs) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certs {
                    roots.add(cert.clone())?;
                }
                builder.with_root_certificates(roots)
            }
            Trust::Fingerprint(pin) => {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Verifier {
                        provider: provider(),
                        pin: Some(*pin),
                    }))
            }
            Trust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Verifier {
                    provider: provider(),
                    pin: None,
                })),
            Trust::Unset => {
                return Err(TransportError::Config(
                    "TLS needs a trusted certificate (a CA file) or the insecure option",
                ))
            }
        };
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some(id) => builder.with_client_auth_cert(id.chain.clone(), id.key.clone_key())?,
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

/// Accepts the server certificate with the pinned fingerprint, or any one without a pin
/// (development only), and checks the handshake signatures either way, so the session is
/// encrypted to whoever holds the presented certificate's key.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    pin: Option<[u8; 32]>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.pin {
            Some(pin) if fingerprint(end_entity) != pin => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            )),
            _ => Ok(ServerCertVerified::assertion()),
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
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

    /// Runs a TLS handshake in memory; the suite the two agreed on.
    fn negotiated(
        client: Arc<rustls::ClientConfig>,
        server: Arc<rustls::ServerConfig>,
    ) -> rustls::CipherSuite {
        let name = server_name(DEV_SERVER_NAME).unwrap();
        let mut c = rustls::ClientConnection::new(client, name).unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        while c.is_handshaking() || s.is_handshaking() {
            let mut wire = Vec::new();
            c.write_tls(&mut wire).unwrap();
            s.read_tls(&mut &wire[..]).unwrap();
            s.process_new_packets().unwrap();
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            c.read_tls(&mut &wire[..]).unwrap();
            c.process_new_packets().unwrap();
        }
        c.negotiated_cipher_suite().unwrap().suite()
    }

    #[test]
    fn y3_clients_and_routers_agree_on_aes_128_gcm() {
        let id = Identity::self_signed().unwrap();
        let pinned = Trust::Pinned(vec![id.certificate().clone()]);
        for client in [pinned.client_config(), Trust::Insecure.client_config()] {
            let suite = negotiated(client.unwrap(), id.server_config().unwrap());
            assert_eq!(suite, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        }
        // A client preferring AES-256-GCM (ring's own order) gets it: the router follows.
        let ring = Arc::new(crypto::ring::default_provider());
        let mut client = rustls::ClientConfig::builder_with_provider(ring)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                provider: provider(),
                pin: None,
            }))
            .with_no_client_auth();
        client.alpn_protocols = vec![ALPN.to_vec()];
        let suite = negotiated(Arc::new(client), id.server_config().unwrap());
        assert_eq!(suite, rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn the_dev_identity_is_kept_per_listener_until_near_expiry() {
        let dir = std::env::temp_dir().join(format!("y3-kept-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let a: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let b: SocketAddr = "[::1]:9000".parse().unwrap();
        let (first, kept) = Identity::kept_self_signed(&dir, a).unwrap();
        assert_eq!(kept, Kept::Made);
        let (again, kept) = Identity::kept_self_signed(&dir, a).unwrap();
        assert_eq!(kept, Kept::Reused);
        assert_eq!(again.fingerprint(), first.fingerprint());
        again.server_config().unwrap();
        // Another listener has its own.
        let (other, _) = Identity::kept_self_signed(&dir, b).unwrap();
        assert_ne!(other.fingerprint(), first.fingerprint());
        assert!(dev_identity_path(&dir, b).ends_with("dev-identity-___1__9000.pem"));
        // Near expiry: made anew.
        let path = dev_identity_path(&dir, a);
        let text = fs::read_to_string(&path).unwrap();
        let soon = unix_days_now() + DEV_CERT_RENEW_DAYS as i64 - 1;
        let body = text.split_once('\n').unwrap().1;
        write_private(&path, format!("{KEPT_HEADER}{soon}\n{body}").as_bytes()).unwrap();
        let (renewed, kept) = Identity::kept_self_signed(&dir, a).unwrap();
        assert_eq!(kept, Kept::Made);
        assert_ne!(renewed.fingerprint(), first.fingerprint());
        // Damaged: made anew too.
        write_private(&path, b"garbage").unwrap();
        assert_eq!(Identity::kept_self_signed(&dir, a).unwrap().1, Kept::Made);
        let _ = fs::remove_dir_all(&dir);
    }

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

    #[test]
    fn sha256_and_fingerprints() {
        assert_eq!(
            fingerprint_hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let id = Identity::self_signed().unwrap();
        let hex = fingerprint_hex(&id.fingerprint());
        assert_eq!(hex.len(), 64);
        let Trust::Fingerprint(pin) = Trust::from_fingerprint(&hex).unwrap() else {
            panic!()
        };
        assert_eq!(pin, id.fingerprint());
        // Colons, upper case and a `sha256:` prefix are accepted; anything else is not.
        let colons = id
            .fingerprint()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        let Trust::Fingerprint(again) =
            Trust::from_fingerprint(&format!("sha256:{colons}")).unwrap()
        else {
            panic!()
        };
        assert_eq!(again, pin);
        for bad in [
            "",
            "abc",
            &hex[..62],
            &format!("{}zz", &hex[..62]),
            "é".repeat(32).as_str(),
        ] {
            assert_eq!(
                Trust::from_fingerprint(bad).unwrap_err().kind(),
                "config",
                "{bad}"
            );
        }
        Trust::Fingerprint(pin).client_config().unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn private_files() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        let base = std::env::temp_dir().join(format!("y3-tls-test-{}", fastrand::u64(..)));
        let dir = base.join("a").join("y3");
        let path = dir.join("dev-cert.pem");
        let id = Identity::self_signed().unwrap();
        id.write_certificate_pem(&path).unwrap();
        assert_eq!((mode(&dir), mode(&path)), (0o700, 0o600));
        assert_eq!(fs::read_to_string(&path).unwrap(), id.certificate_pem());
        // A symbolic link planted at the path is replaced, not followed.
        let victim = base.join("victim");
        fs::write(&victim, "keep me").unwrap();
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        id.write_certificate_pem(&path).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(mode(&path), 0o600);
        // A directory that is a symbolic link, or that others may write to, is refused.
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = id.write_certificate_pem(&link.join("c.pem")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        let open = base.join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = id.write_certificate_pem(&open.join("c.pem")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        assert_eq!(fs::read_dir(&open).unwrap().count(), 0);
        fs::remove_dir_all(&base).unwrap();
    }
}
