//! The ready file (`y3 serve --ready-file PATH`): one JSON document, written once every
//! listener is bound, that tells a test, a supervisor or a script where the router listens
//! and which certificate it serves, instead of its human-readable startup lines.
//!
//! ```json
//! {
//!   "schema": 1,
//!   "pid": 4242,
//!   "version": "0.1.0",
//!   "listeners": {
//!     "tcp": "127.0.0.1:40001",
//!     "quic": "127.0.0.1:40002",
//!     "metrics": "127.0.0.1:40003",
//!     "mqtt": "127.0.0.1:40004"
//!   },
//!   "tcp_tls": false,
//!   "certificate": {
//!     "sha256": "3f…64 hex digits…a1",
//!     "self_signed": true,
//!     "path": "/run/user/1000/y3/dev-cert-127.0.0.1_40002.pem"
//!   },
//!   "config": "/etc/y3/router.toml"
//! }
//! ```
//!
//! A listener that is off has no key in `listeners`. `certificate.path` is the generated
//! development certificate's PEM file (`tls.dev_cert_out`), `null` for a configured
//! certificate or when none is written; `config` is the configuration file (`-c`) or
//! `null`. `schema` grows by one when a key changes meaning or goes away; new keys may
//! appear without it. The file is written to a temporary name beside `PATH` and renamed
//! over it ([`Ready::write_atomic`]), so a reader that sees it sees all of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{RouterConfig, RouterHandle};

/// The ready file's layout version (the `schema` key).
pub const READY_SCHEMA: u32 = 1;

/// The ready file's document: see the [module](self) for its JSON form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    /// [`READY_SCHEMA`] of the writer.
    pub schema: u32,
    /// The router's process id.
    pub pid: u32,
    /// The router's version (the workspace's).
    pub version: String,
    /// Each listener that is on, by kind (`tcp`, `quic`, `metrics`, `mqtt`): its bound
    /// address (the port the system picked for a `:0` address).
    pub listeners: BTreeMap<String, SocketAddr>,
    /// Whether the TCP listener speaks TLS (`listen.tcp_tls`).
    pub tcp_tls: bool,
    /// The server certificate.
    pub certificate: ReadyCertificate,
    /// The configuration file, if one was read.
    pub config: Option<PathBuf>,
}

/// The `certificate` object of [`Ready`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyCertificate {
    /// SHA-256 of the certificate (DER), 64 lower-case hex digits: what `--pin` takes.
    pub sha256: String,
    /// Whether it is the generated development certificate.
    pub self_signed: bool,
    /// Where the development certificate was written (PEM), if it was.
    pub path: Option<PathBuf>,
}

impl Ready {
    /// The document for `router`, started from `config` (read from `file`, if any), in
    /// this process.
    pub fn of(router: &RouterHandle, config: &RouterConfig, file: Option<&Path>) -> Ready {
        let listeners = [
            ("tcp", router.tcp_addr()),
            ("quic", router.quic_addr()),
            ("metrics", router.metrics_addr()),
            ("mqtt", router.mqtt_addr()),
        ]
        .into_iter()
        .filter_map(|(kind, addr)| Some((kind.to_owned(), addr?)))
        .collect();
        let identity = router.identity();
        let dev_cert = &config.tls.dev_cert_out;
        let written = identity.is_self_signed() && !dev_cert.as_os_str().is_empty();
        Ready {
            schema: READY_SCHEMA,
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            listeners,
            tcp_tls: config.listen.tcp_tls && router.tcp_addr().is_some(),
            certificate: ReadyCertificate {
                sha256: y3_transport::tls::fingerprint_hex(&identity.fingerprint()),
                self_signed: identity.is_self_signed(),
                path: written.then(|| absolute(dev_cert)),
            },
            config: file.map(absolute),
        }
    }

    /// The address of the listener `kind` (`tcp`, `quic`, `metrics`, `mqtt`), if on.
    pub fn listener(&self, kind: &str) -> Option<SocketAddr> {
        self.listeners.get(kind).copied()
    }

    /// The document as pretty JSON, ending in a newline.
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and maps with string keys always serializes.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Writes the document to `path` atomically: to `.NAME.PID.tmp` beside it, then
    /// renamed over it, so a reader never sees half of it.
    ///
    /// # Errors
    /// The file system's, naming nothing: the caller says which file.
    pub fn write_atomic(&self, path: &Path) -> std::io::Result<()> {
        let name = path
            .file_name()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".{}.tmp", std::process::id()));
        let temp = path.with_file_name(temp_name);
        std::fs::write(&temp, self.to_json())
            .and_then(|()| std::fs::rename(&temp, path))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&temp);
            })
    }

    /// Reads a ready file.
    ///
    /// # Errors
    /// The file system's, or `InvalidData` for a document that is not a [`Ready`].
    pub fn read(path: &Path) -> std::io::Result<Ready> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}

/// `path` made absolute against the working directory (as it is when that fails).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document round-trips through its JSON, off listeners have no key, and the
    /// atomic write leaves no temporary file behind.
    #[test]
    fn round_trips_and_leaves_no_temp_file() {
        let ready = Ready {
            schema: READY_SCHEMA,
            pid: 7,
            version: "0.1.0".into(),
            listeners: [("tcp".to_owned(), "127.0.0.1:1".parse().unwrap())].into(),
            tcp_tls: false,
            certificate: ReadyCertificate {
                sha256: "00".repeat(32),
                self_signed: true,
                path: None,
            },
            config: None,
        };
        let json: serde_json::Value = serde_json::from_str(&ready.to_json()).unwrap();
        assert_eq!(json["listeners"], serde_json::json!({"tcp": "127.0.0.1:1"}));
        assert_eq!(json["certificate"]["path"], serde_json::Value::Null);
        let dir = std::env::temp_dir().join(format!("y3-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ready.json");
        ready.write_atomic(&path).unwrap();
        assert_eq!(Ready::read(&path).unwrap(), ready);
        assert_eq!(ready.listener("tcp"), Some("127.0.0.1:1".parse().unwrap()));
        assert_eq!(ready.listener("quic"), None);
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1, "only ready.json: {names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
