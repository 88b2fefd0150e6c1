//! `[listen]` and `[tls]`: the listeners' addresses and their certificates.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::RouterError;

use super::auth::redacted;
use super::*;

/// The metrics listener's default address. Port 9002 sits beside the router's 9000 and
/// clear of the ports monitoring tools own: 9090-9094 (Prometheus, its Pushgateway and
/// Alertmanager), 9100-9999 (Prometheus's exporter allocations, all taken), 9464
/// (OpenTelemetry's Prometheus exporter), 8222 (NATS monitoring), and 9001 (supervisord's
/// and MinIO's consoles by default).
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9002";

/// `[listen]`: where to listen. An empty string turns a listener off.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// TCP listener address.
    pub tcp: String,
    /// QUIC (UDP) listener address.
    pub quic: String,
    /// Metrics HTTP listener address (by default [`DEFAULT_METRICS_ADDR`]): Prometheus text
    /// at `GET /metrics`, the JSON status endpoints `/varz`, `/connz` and `/tagz`, the live
    /// dashboard at `/` and `/healthz` (docs/operations.md).
    pub metrics: String,
    /// Serve TLS 1.3 on the TCP listener.
    pub tcp_tls: bool,
    /// Bearer token `/metrics` and the JSON status endpoints require (`401` without it);
    /// empty: none. `/healthz` and the dashboard's page stay open (the page asks for the
    /// token and sends it with its requests).
    pub metrics_token: String,
    /// A file holding the metrics token (instead of `metrics_token`).
    pub metrics_token_file: PathBuf,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            tcp: "127.0.0.1:9000".into(),
            quic: "127.0.0.1:9000".into(),
            metrics: DEFAULT_METRICS_ADDR.into(),
            tcp_tls: false,
            metrics_token: String::new(),
            metrics_token_file: PathBuf::new(),
        }
    }
}

impl fmt::Debug for ListenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenConfig")
            .field("tcp", &self.tcp)
            .field("quic", &self.quic)
            .field("metrics", &self.metrics)
            .field("tcp_tls", &self.tcp_tls)
            .field("metrics_token", &redacted(&self.metrics_token))
            .field("metrics_token_file", &self.metrics_token_file)
            .finish()
    }
}

/// `[tls]`: the server certificate (without one, a self-signed dev certificate is
/// generated) and mutual TLS.
///
/// YoMo's own variables map onto it ([`TlsConfig::merge_yomo_env`], which `y3 serve`
/// applies): `YOMO_TLS_CERT_FILE`/`YOMO_TLS_KEY_FILE` are `cert`/`key`, and
/// `YOMO_TLS_VERIFY_PEER=true` with `YOMO_TLS_CACERT_FILE` is `client_ca`. A variable fills
/// in what the file and flags leave empty; one that disagrees with them is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain file.
    pub cert: PathBuf,
    /// PEM private key file.
    pub key: PathBuf,
    /// Where to write a generated dev certificate (PEM) for clients to pin; empty: nowhere.
    pub dev_cert_out: PathBuf,
    /// PEM bundle of the CAs client certificates must be issued by; set, every QUIC and
    /// TLS-over-TCP client must present one (refused at the TLS layer otherwise, counted
    /// as `rejected{reason="no_client_certificate"|"bad_client_certificate"}`), and a
    /// plain TCP listener is a configuration error. Empty: no client certificates.
    pub client_ca: PathBuf,
}

/// A field and what is wrong with it.
type Conflict = (&'static str, &'static str);

impl TlsConfig {
    /// Fills in YoMo's TLS variables (see the type's doc), as YoMo's zipper reads them.
    ///
    /// # Errors
    /// [`RouterError::Config`] when a variable disagrees with the configuration,
    /// `YOMO_TLS_CERT_FILE` comes without `YOMO_TLS_KEY_FILE` (or the other way round), or
    /// `YOMO_TLS_VERIFY_PEER=true` comes without `YOMO_TLS_CACERT_FILE` (y3 verifies client
    /// certificates against a CA file, never the system's roots, as YoMo would).
    pub fn merge_yomo_env(&mut self, env: &YomoTlsEnv) -> Result<(), RouterError> {
        self.merge(env)
            .map_err(|(field, problem)| RouterError::Config { field, problem })
    }

    fn merge(&mut self, env: &YomoTlsEnv) -> Result<(), Conflict> {
        match (&env.cert_file, &env.key_file) {
            (Some(cert), Some(key)) => {
                if self.cert.as_os_str().is_empty() && self.key.as_os_str().is_empty() {
                    self.cert.clone_from(cert);
                    self.key.clone_from(key);
                } else if self.cert != *cert || self.key != *key {
                    return Err((
                        "tls.cert",
                        "YOMO_TLS_CERT_FILE/YOMO_TLS_KEY_FILE name another certificate than tls.cert/tls.key (--tls-cert/--tls-key): unset them or make them agree",
                    ));
                }
            }
            (None, None) => {}
            _ => {
                return Err((
                    "tls.cert",
                    "YOMO_TLS_CERT_FILE and YOMO_TLS_KEY_FILE go together (YoMo ignores one alone; y3 refuses it)",
                ))
            }
        }
        match env.verify_peer {
            Some(true) => {
                let Some(ca) = &env.ca_cert_file else {
                    return Err((
                        "tls.client_ca",
                        "YOMO_TLS_VERIFY_PEER=true needs YOMO_TLS_CACERT_FILE: y3 verifies client certificates against that CA file, never the system's roots",
                    ));
                };
                if self.client_ca.as_os_str().is_empty() {
                    self.client_ca.clone_from(ca);
                } else if self.client_ca != *ca {
                    return Err((
                        "tls.client_ca",
                        "YOMO_TLS_CACERT_FILE names another CA than tls.client_ca (--client-ca): unset it or make them agree",
                    ));
                }
            }
            Some(false) if !self.client_ca.as_os_str().is_empty() => {
                return Err((
                    "tls.client_ca",
                    "YOMO_TLS_VERIFY_PEER is set but not true, while tls.client_ca (--client-ca) requires client certificates: unset it or set it to true",
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// The client CA, when mutual TLS is on.
    ///
    /// # Errors
    /// [`RouterError::Transport`] for a file that cannot be read or holds no certificate.
    pub fn client_ca(&self) -> Result<Option<ClientCa>, RouterError> {
        if self.client_ca.as_os_str().is_empty() {
            return Ok(None);
        }
        Ok(Some(ClientCa::from_pem_file(&self.client_ca)?))
    }
}
