//! Router configuration: TOML, every field defaulted, so an empty file (or none) works.
//!
//! ```toml
//! [listen]
//! tcp = "127.0.0.1:9000"      # "" turns the listener off
//! quic = "127.0.0.1:9000"     # UDP; same port number as TCP is fine
//! metrics = "127.0.0.1:9002"  # /metrics, /varz, /connz, /tagz, dashboard at / (not 9090: Prometheus's own)
//! tcp_tls = false             # TLS 1.3 on the TCP listener
//! metrics_token = ""          # /metrics and /*z need `Authorization: Bearer <it>`; empty: open
//! metrics_token_file = ""     # ... or read it from this file
//!
//! [tls]
//! cert = ""                   # PEM chain; empty: a self-signed dev certificate
//! key = ""                    # PEM private key
//! dev_cert_out = ""           # write the generated dev certificate here (mode 0600, after
//!                             # the listeners are bound; a missing directory is made 0700)
//! client_ca = ""              # PEM CA bundle: require client certificates it issued, on
//!                             # QUIC and TLS over TCP (mutual TLS; plain TCP then refused)
//!
//! [auth]
//! token = ""                  # the main token (every tag); empty: no token required
//! token_file = ""             # ... or read it from this file (keeps it off the command line)
//! allow_insecure = false      # listen beyond loopback without any token
//! max_failures = 5            # wrong credentials per address refused at once; later ones
//! failure_window_ms = 60000   # (until the address is quiet this long) are refused after
//! tarpit_initial_ms = 250     # this delay, doubling each time,
//! tarpit_max_ms = 3000        # up to this (0: no tarpit). A right credential never waits.
//! tarpit_max_in_flight = 16   # refusals held at once per address; past it, its handshakes
//!                             # are turned away unchecked, to retry (`throttled`)
//!
//! [[auth.tokens]]             # zero or more further tokens, each with its permissions
//! name = "sensors"            # label in logs
//! token_file = "/etc/y3/sensors.token"  # or token = "..."
//! publish = [0x10]            # tags it may send; absent: every tag
//! observe = []                # tags it may observe; absent: every tag
//!
//! [queue]                     # one queue per subscriber (stream function, sink)
//! max_bytes = 67108864        # 64 MiB buffered per subscriber before its publishers wait
//! capacity = 1048576          # frames, likewise (a safety bound: max_bytes binds first)
//! policy = "block"            # "block" (see below) or "drop_oldest" (real-time)
//! block_timeout_ms = 250      # "block", past max_bytes: a publisher waits for the subscriber
//!                             # to take a batch at most this long; then the subscriber's
//!                             # frames queue past max_bytes (up to twice it) without waiting
//! write_deadline_ms = 10000   # "block": a subscriber that takes nothing this long while
//!                             # frames wait for it is evicted (as is one twice max_bytes behind)
//! evicted_backoff_ms = 0      # refuse an evicted client that comes back sooner (0: never)
//!
//! [limits]
//! max_frame_len = 16842752    # 16 MiB payload + 64 KiB; a longer frame is skipped as it
//!                             # streams in (counted: y3_router_skipped_frames_total)
//! max_connections = 10000
//! handshake_timeout_ms = 5000
//! frame_stall_timeout_ms = 30000 # a frame must arrive whole within this of its first byte
//! max_hops = 8
//! max_loop_returns = 8        # times one yomo-tid may come back to a function whose
//!                             # output led to it (a loop); fan-out is not limited
//! max_queued_bytes = 536870912 # the memory budget: queued frames (each once, however many
//!                             # queues hold it), queue slots and partial frames; when full,
//!                             # non-reading subscribers are evicted, largest first (0: none)
//! max_handshake_len = 65536   # longest handshake frame; a longer one is refused from its header
//! max_unauthenticated_bytes = 16777216 # all partial handshakes together; past it, cut
//! max_observed_tags = 1024    # tags one client may observe
//! max_name_len = 1024         # bytes in a client's name, id or wanted target
//! max_metadata_bytes = 65536  # a data frame's metadata (msgpack map); a frame over either
//! max_metadata_entries = 1024 # is refused, counted: skipped_frames_total{metadata_too_large}
//!
//! [shutdown]
//! drain_timeout_ms = 5000     # upper bound of a graceful shutdown
//! quiet_ms = 100              # no traffic for this long means "drained"
//!
//! [state]                     # what survives a restart: the QUIC reset secret and clients (state.rs)
//! dir = ""                    # empty: $STATE_DIRECTORY, else $XDG_STATE_HOME/y3, else
//!                             # ~/.local/state/y3 (made 0700)
//! persist = true              # false: keep nothing, a new secret every start
//!
//! [log]                       # the process's log on stderr (`y3 serve`)
//! level = "info"              # tracing filter directives ("warn", "info,y3_router=debug");
//!                             # RUST_LOG overrides it; SIGHUP reloads it
//! format = "text"             # "text" or "json" (one JSON object per line)
//! summary_secs = 60           # an info line every this many seconds: connections, frames,
//!                             # drops (0: none)
//!
//! [mesh]
//! name = "y3-router"          # this router's name, sent when dialing downstream zippers
//!
//! [[mesh.downstream]]         # zero or more; every local frame is forwarded to each
//! name = "zipper-b"           # label in logs and metrics; unique
//! addr = "10.0.0.2:9000"      # host:port
//! credential = "token:SECRET" # optional, `type:payload` as YoMo writes it
//! transport = "quic"          # "quic" (default) or "tcp"
//!
//! [filters]                   # content filters (spec/filters.md)
//! max_len = 1024              # longest filter text, bytes
//! max_depth = 16              # deepest nesting of ( and not
//! max_paths = 16              # most distinct key paths (at most 16)
//! max_terms = 32              # most comparisons and exists tests
//!
//! [[filters.attach]]          # zero or more: a filter for a function by name, for
//! function = "noise-alert"    # unmodified YoMo functions (a y3 function's own filter on
//! tag = 0x10                  # the same tag applies too: both must match)
//! filter = "0x10/0x11:f32 > 60"
//!
//! [mqtt]                      # MQTT 3.1.1 and 5 devices (mqtt/config.rs, docs/mqtt.md)
//! listen = ""                 # e.g. "127.0.0.1:1883"; "" (default): no MQTT listener
//! tls_listen = ""             # e.g. "0.0.0.0:8883": MQTT over TLS with the router's certificate
//! max_packet_bytes = 1048576  # and the session, retained and in-flight bounds there
//!
//! [[mqtt.publish]]            # zero or more: publishes on matching topics become frames
//! topic = "sensors/+/noise"   # of `tag`, with the topic in metadata `mqtt-topic`
//! tag = 0x10
//!
//! [[mqtt.subscribe]]          # zero or more: frames of `tag` reach MQTT subscribers as
//! tag = 0x20                  # `topic`
//! topic = "alerts/noise"
//! ```
//!
//! The mesh is YoMo's `mesh` configuration (`spec/frames.md`, "Routing"): the router dials
//! each downstream as an upstream zipper (`0x5e`), reconnecting forever, and forwards to it
//! every data frame of its local clients; frames that arrived from an upstream zipper are
//! delivered locally only. Over QUIC the downstream's certificate is **not verified**
//! (`Trust::Insecure`): a YoMo zipper serves a self-signed certificate that no client can
//! verify, and YoMo's own mesh links do not verify it either. The link is encrypted but the
//! downstream is not authenticated; a network that needs that should carry the mesh over a
//! VPN or use `transport = "tcp"` inside one.
//!
//! TLS: YoMo's own variables configure `[tls]` as they configure `yomo serve`
//! ([`TlsConfig::merge_yomo_env`]): `YOMO_TLS_CERT_FILE`/`YOMO_TLS_KEY_FILE` are `cert`/`key`,
//! `YOMO_TLS_VERIFY_PEER=true` with `YOMO_TLS_CACERT_FILE` is `client_ca`. Precedence: the
//! file, then `y3 serve`'s flags, then the variables, which only fill in what is still empty;
//! a variable that disagrees with a value set by the file or a flag stops the router with an
//! error naming both (a deployment's security never depends on which one won).
//!
//! Secrets: a token in a file (`token_file`) is read when the router starts, trailing
//! whitespace removed. [`RouterConfig::validate`] refuses a TCP or QUIC listener beyond
//! loopback when no token is configured, unless `auth.allow_insecure`; the `Debug` output of
//! these types never shows a token.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use y3_transport::tls::{ClientCa, YomoTlsEnv};

use crate::error::RouterError;
use crate::queue::Policy;
use crate::session::{Grant, Permissions};
use crate::throttle::TarpitConfig;

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Listeners.
    pub listen: ListenConfig,
    /// Certificates.
    pub tls: TlsConfig,
    /// Authentication.
    pub auth: AuthConfig,
    /// Per-subscriber queues.
    pub queue: QueueConfig,
    /// Limits on what clients may do.
    pub limits: LimitsConfig,
    /// Graceful shutdown.
    pub shutdown: ShutdownConfig,
    /// Downstream zippers every local frame is forwarded to.
    pub mesh: MeshConfig,
    /// Content filters: their limits, and filters attached to functions by name.
    pub filters: FiltersConfig,
    /// Routers federated over NATS (`federation/config.rs`, `spec/federation.md`).
    pub federation: crate::federation::FederationConfig,
    /// What the router keeps across restarts.
    pub state: StateConfig,
    /// The process's log (`y3 serve`).
    pub log: LogConfig,
    /// The MQTT listener and its topic ↔ tag mapping (`mqtt/config.rs`, `docs/mqtt.md`).
    pub mqtt: crate::mqtt::MqttConfig,
}

/// `[log]`: the log `y3 serve` writes on stderr. Connects and closes are logged at debug;
/// a summary at info every `summary_secs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Filter directives, as `RUST_LOG` takes them (`"info"`, `"warn,y3_router=debug"`);
    /// `RUST_LOG`, when set, overrides it. A reload (SIGHUP) applies a new value.
    pub level: String,
    /// `"text"` (human-readable) or `"json"` (one JSON object per line).
    pub format: LogFormat,
    /// Seconds between the periodic summary lines at info (connections, frames, drops);
    /// 0: none.
    pub summary_secs: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
            summary_secs: 60,
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// `[state]`: the router's state directory, which keeps the secret its QUIC listener's
/// stateless-reset key derives from and the listener's clients (`state.rs`), so that after
/// a crash and restart the old connections' clients are reset at once and reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    /// The directory; empty: `$STATE_DIRECTORY` (systemd's `StateDirectory=`), else
    /// `$XDG_STATE_HOME/y3`, else `$HOME/.local/state/y3`.
    pub dir: PathBuf,
    /// Keep state there; `false`: nothing is written, and each start uses a new secret
    /// (a restarted router's old clients then wait out their idle timeout).
    pub persist: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: PathBuf::new(),
            persist: true,
        }
    }
}

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

/// What `Debug` shows of a secret: whether it is set.
fn redacted(secret: &str) -> Option<&'static str> {
    (!secret.is_empty()).then_some("<redacted>")
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

/// `[auth]`: tokens, their permissions, and the throttling of failed handshakes.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The main token, allowing every tag; empty: none (and with no `tokens`, no token is
    /// required).
    pub token: String,
    /// A file holding the main token (instead of `token`).
    pub token_file: PathBuf,
    /// Listen beyond loopback without any token (refused otherwise).
    pub allow_insecure: bool,
    /// Wrong credentials from one address (an IPv4 address, an IPv6 /64) refused at once;
    /// each further one within the window is refused after a delay (the tarpit,
    /// `throttle.rs`). A right credential is never delayed.
    pub max_failures: u32,
    /// An address's failures are forgotten once it has had none for this long.
    pub failure_window_ms: u64,
    /// The delay of the first delayed refusal; it doubles with each further failure.
    pub tarpit_initial_ms: u64,
    /// The longest delay (kept under the 5 s y3's clients wait for a handshake answer);
    /// 0 turns the tarpit off.
    pub tarpit_max_ms: u64,
    /// Delayed refusals held at once per address. While all are held, that address's next
    /// handshakes are turned away *unchecked*, with a code that makes clients retry
    /// (`rejected{reason="throttled"}`), so that an attacker learns no more guesses than
    /// this per `tarpit_max_ms`, however many connections it opens.
    pub tarpit_max_in_flight: u32,
    /// Removed (addresses are no longer locked out): set, the configuration is refused,
    /// naming the `tarpit_*` settings that replace it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_ms: Option<u64>,
    /// Further tokens (`[[auth.tokens]]`), each allowing only the tags it lists.
    pub tokens: Vec<TokenConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            token: String::new(),
            token_file: PathBuf::new(),
            allow_insecure: false,
            max_failures: 5,
            failure_window_ms: 60_000,
            tarpit_initial_ms: 250,
            tarpit_max_ms: 3_000,
            tarpit_max_in_flight: 16,
            throttle_ms: None,
            tokens: Vec::new(),
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("token", &redacted(&self.token))
            .field("token_file", &self.token_file)
            .field("allow_insecure", &self.allow_insecure)
            .field("max_failures", &self.max_failures)
            .field("failure_window_ms", &self.failure_window_ms)
            .field("tarpit_initial_ms", &self.tarpit_initial_ms)
            .field("tarpit_max_ms", &self.tarpit_max_ms)
            .field("tarpit_max_in_flight", &self.tarpit_max_in_flight)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl AuthConfig {
    /// The tarpit these settings describe.
    pub fn tarpit(&self) -> TarpitConfig {
        TarpitConfig {
            free_failures: self.max_failures,
            window: Duration::from_millis(self.failure_window_ms),
            initial: Duration::from_millis(self.tarpit_initial_ms),
            max: Duration::from_millis(self.tarpit_max_ms),
            max_in_flight: self.tarpit_max_in_flight,
        }
    }

    /// Whether any token is configured (then every handshake must carry one).
    pub fn has_token(&self) -> bool {
        !self.token.is_empty() || !self.token_file.as_os_str().is_empty() || !self.tokens.is_empty()
    }
}

/// `[[auth.tokens]]`: a token and the tags it allows. A tag list that is absent allows every
/// tag; an empty one allows none.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenConfig {
    /// A label for logs (the token itself never is).
    pub name: String,
    /// The token.
    pub token: String,
    /// A file holding the token (instead of `token`).
    pub token_file: PathBuf,
    /// Tags its holder may send data frames on; absent: every tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish: Option<Vec<u32>>,
    /// Tags its holder may observe; absent: every tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observe: Option<Vec<u32>>,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("token", &redacted(&self.token))
            .field("token_file", &self.token_file)
            .field("publish", &self.publish)
            .field("observe", &self.observe)
            .finish()
    }
}

/// Reads a secret from `path`: the file's text without surrounding whitespace.
fn read_secret(field: &'static str, path: &Path) -> Result<String, RouterError> {
    let text = std::fs::read_to_string(path).map_err(|source| RouterError::Secret {
        field,
        path: path.to_owned(),
        source,
    })?;
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                field,
                path = %path.display(),
                "the token file can be read by other users (chmod 600 it)"
            );
        }
    }
    let secret = text.trim();
    if secret.is_empty() {
        return Err(RouterError::Config {
            field,
            problem: "the token file is empty",
        });
    }
    Ok(secret.to_owned())
}

/// One of `value` and the contents of `file`, whichever is set.
fn secret(value: &str, file: &Path, field: &'static str) -> Result<Option<String>, RouterError> {
    match (value.is_empty(), file.as_os_str().is_empty()) {
        (true, true) => Ok(None),
        (false, true) => Ok(Some(value.to_owned())),
        (true, false) => read_secret(field, file).map(Some),
        (false, false) => Err(RouterError::Config {
            field,
            problem: "set the token or its file, not both",
        }),
    }
}

/// `[queue]`: one bounded queue per subscriber (stream function or sink; a mesh downstream's
/// queue has the same bounds and always drops the oldest).
///
/// Under `block` (the default) a subscriber that pauses loses nothing: its frames are
/// buffered up to `max_bytes` (and `capacity` frames) without holding anybody back, as
/// NATS buffers up to its 64 MiB pending limit. Past that, each publisher waits for the
/// subscriber to take a batch (backpressure, as YoMo's zipper holds a source's `Write`);
/// a subscriber that takes nothing for `block_timeout_ms` stops holding them, and its
/// frames queue on past `max_bytes`, up to twice the limits, until it takes a batch again.
/// It is evicted (`slow_consumer`: its queue counted as dropped, the client logged with
/// its name, id and address and counted in `y3_router_evictions_total`) when it has taken
/// nothing for `write_deadline_ms` while frames waited for it, or when, taking nothing,
/// it falls twice the limits behind. A publisher held by several subscribers that stopped
/// at once waits one block timeout in all (each one's clock runs from its last batch).
/// Queued frames also count against the router's `limits.max_queued_bytes` (a frame shared
/// by many queues once): when it is full, the subscribers that took nothing for the block
/// timeout are evicted first, largest backlog first (`memory_budget`), and a reading
/// subscriber's publisher waits rather than lose a frame. The two promises together: a
/// pause shorter than the write deadline (10 s) within 64 MiB loses nothing, and
/// subscribers that do not read cannot take the memory, or more than a block timeout, of
/// anyone else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Frames buffered per subscriber before its publishers wait. A safety bound: every
    /// frame is charged more than 64 bytes (its queue slot included), so with the default
    /// `max_bytes` the default 1,048,576 frames are never reached first.
    pub capacity: usize,
    /// Bytes buffered per subscriber before its publishers wait: payload and metadata,
    /// plus a fixed overhead per frame for its queue slot (and a pinned read buffer for
    /// frames of 8 KiB or more). 64 MiB by default, NATS's pending limit: about 25 s of
    /// 2,000 msg/s × 1 KiB.
    pub max_bytes: usize,
    /// What a full queue does.
    pub policy: Policy,
    /// Under `block`, past `max_bytes`: how long a publisher waits for the subscriber to
    /// take a batch before the subscriber counts as stalled and its frames queue past
    /// `max_bytes` without waiting. A subscriber that stopped reading therefore holds up
    /// its tag's publishers, and their other tags, at most this long per stall; one that
    /// reads, however slowly, holds them back (backpressure) and stays.
    pub block_timeout_ms: u64,
    /// Under `block`, a subscriber that takes nothing for this long while frames wait for
    /// it is evicted. 10 s (NATS's write deadline): far past a GC pause or a network blip,
    /// and short enough that a dead subscriber's backlog does not linger.
    pub write_deadline_ms: u64,
    /// A client evicted as a slow consumer that reconnects within this long is refused
    /// (`slow_consumer`, retryable; counted as `rejected{reason="held_off"}`). 0 (the
    /// default): never, so that an app that was paused, then resumed is let back in at once.
    pub evicted_backoff_ms: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 1 << 20,
            max_bytes: 64 << 20,
            policy: Policy::Block,
            block_timeout_ms: 250,
            write_deadline_ms: 10_000,
            evicted_backoff_ms: 0,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest frame body accepted. A longer frame is skipped as its bytes arrive (never
    /// buffered), counted (`y3_router_skipped_frames_total{reason="too_long"}`) and logged;
    /// the connection stays up. An accepted frame is buffered whole: a connection holds at
    /// most one partial frame, charged to `max_queued_bytes` as it arrives (a handshake to
    /// `max_unauthenticated_bytes`), so partial frames and queued ones together are bounded
    /// by it.
    pub max_frame_len: usize,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Time a new connection has to send its handshake.
    pub handshake_timeout_ms: u64,
    /// A frame must arrive whole within this long of its first bytes, or the connection is
    /// closed (a client stalling or trickling mid-frame must not hold memory forever): cut
    /// between one and one and a half times this long after those bytes (the router looks
    /// again every half timeout while idle; tests/hostile.rs measures it).
    pub frame_stall_timeout_ms: u64,
    /// Data frames with more hops than this are dropped (function loops).
    pub max_hops: u32,
    /// The router's memory budget (0: none): the bytes it holds for clients — queued frames,
    /// each charged once however many queues hold it, a slot per queued frame, and partial
    /// frames as they arrive (before and after the handshake). When a frame finds it full,
    /// the subscribers that took nothing for their block timeout are evicted, largest
    /// backlog first, all in one pass (`budget.rs`); a reading `block` subscriber's
    /// publisher then waits rather than lose a frame (dropped as `memory_budget` only after
    /// the write deadline), a `drop_oldest` one's frame is dropped (counted); a partial
    /// frame that would grow past it is cut. 512 MiB: eight subscribers paused at their
    /// 64 MiB with nothing shared, far more when they share a tag.
    pub max_queued_bytes: usize,
    /// Longest handshake frame, in bytes: the codec refuses a longer one from its header
    /// (`too_long`), before buffering any of it. 64 KiB: a real handshake (names, token,
    /// up to `max_observed_tags` tags) is a few KiB at most.
    pub max_handshake_len: usize,
    /// Bytes of partial handshakes held at once, all connections together (also counted in
    /// the memory budget); a handshake that would grow past it is cut, counted in
    /// `y3_router_budget_actions_total{action="cut_partial_handshake"}`. 16 MiB: 256
    /// handshakes of the largest size at once, thousands of real ones; 1,000 clients each
    /// trickling a large handshake hold no more than this.
    pub max_unauthenticated_bytes: usize,
    /// Times one message (`yomo-tid`) may come back to a stream function whose own output
    /// led to it — a turn around a loop: a function observing a tag it writes, a ring of
    /// functions — before further such deliveries are dropped, counted as `loop` (see
    /// `journeys.rs`). Fan-out is not a loop: a function may write any number of outputs
    /// per input, and each reaches every function and sink downstream. 0: no returns.
    pub max_loop_returns: u32,
    /// Most tags one client may observe (YoMo sets no limit; this bounds the routing
    /// table a handshake can grow).
    pub max_observed_tags: usize,
    /// Longest client name, id or wanted target, in bytes.
    pub max_name_len: usize,
    /// Most encoded bytes of a data frame's metadata (YoMo's apps carry a few short
    /// pairs: a tid, a source id, a target). A frame over it is refused before its
    /// metadata is walked: counted (`y3_router_skipped_frames_total{reason=
    /// "metadata_too_large"}`), logged once per connection, reported to a client that wants
    /// stored acknowledgements (refused, `metadata_too_large`); the connection stays up.
    pub max_metadata_bytes: usize,
    /// Most pairs in a data frame's metadata; over it, as over `max_metadata_bytes`.
    pub max_metadata_entries: usize,
}

impl LimitsConfig {
    /// The metadata limits, as the session checks them.
    pub fn metadata(&self) -> y3_transport::metadata::MetadataLimits {
        y3_transport::metadata::MetadataLimits {
            max_bytes: self.max_metadata_bytes,
            max_entries: self.max_metadata_entries,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_frame_len: y3_transport::DEFAULT_MAX_FRAME_LEN,
            max_connections: 10_000,
            handshake_timeout_ms: 5000,
            frame_stall_timeout_ms: 30_000,
            max_hops: 8,
            max_loop_returns: 8,
            max_queued_bytes: 512 << 20,
            max_handshake_len: 64 << 10,
            max_unauthenticated_bytes: 16 << 20,
            max_observed_tags: 1024,
            max_name_len: 1024,
            max_metadata_bytes: 64 << 10,
            max_metadata_entries: 1024,
        }
    }
}

/// `[shutdown]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Longest a graceful shutdown may take.
    pub drain_timeout_ms: u64,
    /// How long the router must see no traffic to call the pipelines drained.
    pub quiet_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_timeout_ms: 5000,
            quiet_ms: 100,
        }
    }
}

/// `[mesh]`: this router's name and the downstream zippers it forwards local frames to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeshConfig {
    /// This router's name: the handshake name of its links to downstream zippers.
    pub name: String,
    /// The downstream zippers (`[[mesh.downstream]]`); none by default.
    pub downstream: Vec<DownstreamConfig>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            name: "y3-router".into(),
            downstream: Vec::new(),
        }
    }
}

/// `[filters]`: limits on content filters, and filters attached by function name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FiltersConfig {
    /// Longest filter text in bytes.
    pub max_len: usize,
    /// Deepest nesting of parentheses and `not`.
    pub max_depth: usize,
    /// Most distinct key paths in one filter (at most [`y3::filter::MAX_FILTER_PATHS`]).
    pub max_paths: usize,
    /// Most comparisons and `exists` tests in one filter.
    pub max_terms: usize,
    /// Filters for functions by name (`[[filters.attach]]`); none by default.
    pub attach: Vec<AttachConfig>,
}

impl Default for FiltersConfig {
    fn default() -> Self {
        let d = y3::FilterLimits::DEFAULT;
        FiltersConfig {
            max_len: d.max_len,
            max_depth: d.max_depth,
            max_paths: d.max_paths,
            max_terms: d.max_terms,
            attach: Vec::new(),
        }
    }
}

impl FiltersConfig {
    /// The limits every filter is compiled under.
    pub fn limits(&self) -> y3::FilterLimits {
        y3::FilterLimits {
            max_len: self.max_len,
            max_depth: self.max_depth,
            max_paths: self.max_paths,
            max_terms: self.max_terms,
        }
    }
}

/// `[[filters.attach]]`: a content filter for the stream functions named `function`, on
/// tag `tag` (applied when such a function observes the tag).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachConfig {
    /// The function's handshake name.
    pub function: String,
    /// The observed tag the filter applies to.
    pub tag: u32,
    /// The filter (`spec/filters.md`).
    pub filter: String,
}

/// `[[mesh.downstream]]`: one downstream zipper (a `y3 serve` or a YoMo zipper).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DownstreamConfig {
    /// Its name, unique in the mesh: the label of its logs and metrics.
    pub name: String,
    /// `host:port` (an IP address or a host name, resolved at every connection attempt).
    pub addr: String,
    /// Credential as `type:payload` (`token:SECRET`); empty: none.
    pub credential: String,
    /// The adapter.
    pub transport: MeshTransport,
}

/// How a downstream zipper is dialed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeshTransport {
    /// QUIC, as YoMo's zippers serve it; the certificate is not verified (see the module
    /// docs).
    #[default]
    Quic,
    /// Plain TCP (a downstream `y3 serve`; YoMo serves QUIC only).
    Tcp,
}

impl DownstreamConfig {
    /// The host and port of [`addr`](DownstreamConfig::addr), checked: a non-empty host
    /// (brackets around an IPv6 address removed) and a port number.
    ///
    /// # Errors
    /// [`RouterError::Config`] naming `mesh.downstream.addr`.
    pub fn host_port(&self) -> Result<(&str, u16), RouterError> {
        let bad = |problem| RouterError::Config {
            field: "mesh.downstream.addr",
            problem,
        };
        let addr = self.addr.trim();
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or(bad("not a host:port address"))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(|c: char| c.is_whitespace()) {
            return Err(bad("not a host:port address"));
        }
        if host.contains(':') && !addr.starts_with('[') {
            return Err(bad("an IPv6 address goes in brackets: [addr]:port"));
        }
        let port = port.parse::<u16>().map_err(|_| bad("not a port number"))?;
        if port == 0 {
            return Err(bad("port 0 cannot be dialed"));
        }
        Ok((host, port))
    }
}

impl RouterConfig {
    /// Parses TOML text.
    ///
    /// # Errors
    /// [`RouterError::ConfigToml`] for bad TOML, unknown keys or wrong types.
    pub fn from_toml(text: &str) -> Result<RouterConfig, RouterError> {
        Ok(toml::from_str(text)?)
    }

    /// Reads a TOML file.
    ///
    /// # Errors
    /// [`RouterError::ConfigIo`], or as [`RouterConfig::from_toml`].
    pub fn from_file(path: &Path) -> Result<RouterConfig, RouterError> {
        let text = std::fs::read_to_string(path).map_err(RouterError::ConfigIo)?;
        RouterConfig::from_toml(&text)
    }

    /// The configuration as TOML (every field, defaults included).
    pub fn to_toml(&self) -> String {
        // Every field is a plain string, number, bool or path: serialization cannot fail.
        toml::to_string(self).unwrap_or_default()
    }

    /// A configuration for tests and embedding: every listener on an ephemeral loopback
    /// port, metrics off, no state kept.
    pub fn ephemeral() -> RouterConfig {
        let mut config = RouterConfig::default();
        config.listen.tcp = "127.0.0.1:0".into();
        config.listen.quic = "127.0.0.1:0".into();
        config.listen.metrics = String::new();
        config.state.persist = false;
        config
    }

    /// The main token and the further tokens with their permissions, token files read.
    ///
    /// # Errors
    /// [`RouterError::Secret`] for a token file that cannot be read, [`RouterError::Config`]
    /// for an empty one, a token set twice, a `[[auth.tokens]]` entry without a token, or
    /// a token given twice.
    pub fn tokens(&self) -> Result<(String, Vec<Grant>), RouterError> {
        let main = secret(&self.auth.token, &self.auth.token_file, "auth.token_file")?;
        let mut grants: Vec<Grant> = Vec::with_capacity(self.auth.tokens.len());
        for (i, entry) in self.auth.tokens.iter().enumerate() {
            let token = secret(&entry.token, &entry.token_file, "auth.tokens.token_file")?.ok_or(
                RouterError::Config {
                    field: "auth.tokens.token",
                    problem: "every [[auth.tokens]] entry needs a token or a token_file",
                },
            )?;
            let twice =
                main.as_deref() == Some(token.as_str()) || grants.iter().any(|g| g.token == token);
            if twice {
                return Err(RouterError::Config {
                    field: "auth.tokens.token",
                    problem: "the same token is configured twice",
                });
            }
            grants.push(Grant {
                name: if entry.name.is_empty() {
                    format!("token-{}", i + 1)
                } else {
                    entry.name.clone()
                },
                token,
                permissions: Arc::new(Permissions::new(
                    entry.publish.clone(),
                    entry.observe.clone(),
                )),
            });
        }
        Ok((main.unwrap_or_default(), grants))
    }

    /// The bearer token of the metrics endpoint, if any, its file read.
    ///
    /// # Errors
    /// As [`RouterConfig::tokens`].
    pub fn metrics_token(&self) -> Result<Option<String>, RouterError> {
        secret(
            &self.listen.metrics_token,
            &self.listen.metrics_token_file,
            "listen.metrics_token_file",
        )
    }

    /// What an operator should hear about these settings (logged at start): a listener
    /// beyond loopback allowed without a token, tokens sent in clear over plain TCP beyond
    /// loopback, an open metrics endpoint beyond loopback.
    pub fn warnings(&self, listen: &Listen) -> Vec<&'static str> {
        let exposed = |addr: Option<SocketAddr>| addr.is_some_and(|a| !a.ip().is_loopback());
        let mut out = Vec::new();
        if (exposed(listen.tcp) || exposed(listen.quic)) && !self.auth.has_token() {
            out.push("listening beyond loopback without a token (auth.allow_insecure): anyone who can reach the router may publish and observe every tag");
        }
        if exposed(listen.tcp) && !self.listen.tcp_tls && self.auth.has_token() {
            out.push("tokens cross plain TCP beyond loopback in clear: turn on listen.tcp_tls or use QUIC");
        }
        let metrics_token = !self.listen.metrics_token.is_empty()
            || !self.listen.metrics_token_file.as_os_str().is_empty();
        if exposed(listen.metrics) && !metrics_token {
            out.push("the metrics endpoint listens beyond loopback without listen.metrics_token");
        }
        out
    }

    /// Checks values and parses addresses.
    ///
    /// # Errors
    /// [`RouterError::Config`] naming the field; a TCP or QUIC listener beyond loopback
    /// without a token, unless `auth.allow_insecure`, names `auth.token`.
    pub fn validate(&self) -> Result<Listen, RouterError> {
        let addr = |field: &'static str, text: &str| -> Result<Option<SocketAddr>, RouterError> {
            if text.trim().is_empty() {
                return Ok(None);
            }
            text.trim()
                .parse()
                .map(Some)
                .map_err(|_| RouterError::Config {
                    field,
                    problem: "not an IP:port address",
                })
        };
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        if self.queue.capacity == 0 {
            return bad("queue.capacity", "must be at least 1");
        }
        if self.queue.write_deadline_ms == 0 {
            return bad("queue.write_deadline_ms", "must be at least 1");
        }
        if self.limits.max_frame_len == 0 || self.limits.max_frame_len > i32::MAX as usize {
            return bad("limits.max_frame_len", "must be within 1..=2147483647");
        }
        if self.limits.max_connections == 0 {
            return bad("limits.max_connections", "must be at least 1");
        }
        if self.tls.cert.as_os_str().is_empty() != self.tls.key.as_os_str().is_empty() {
            return bad("tls.cert", "tls.cert and tls.key go together");
        }
        if self.auth.throttle_ms.is_some() {
            return bad(
                "auth.throttle_ms",
                "removed: addresses are no longer locked out; wrong credentials are slowed down (auth.tarpit_initial_ms, auth.tarpit_max_ms, auth.tarpit_max_in_flight)",
            );
        }
        if self.auth.tarpit_max_ms > 0 && self.auth.tarpit_max_in_flight == 0 {
            return bad("auth.tarpit_max_in_flight", "must be at least 1");
        }
        let listen = Listen {
            tcp: addr("listen.tcp", &self.listen.tcp)?,
            quic: addr("listen.quic", &self.listen.quic)?,
            metrics: addr("listen.metrics", &self.listen.metrics)?,
        };
        self.validate_mesh()?;
        self.validate_filters()?;
        self.federation.validate()?;
        if listen.tcp.is_some()
            && !self.listen.tcp_tls
            && !self.tls.client_ca.as_os_str().is_empty()
        {
            return bad(
                "tls.client_ca",
                "client certificates need TLS, and plain TCP would let clients in without one: with tls.client_ca, turn on listen.tcp_tls (--tcp-tls) or turn listen.tcp off (--tcp '')",
            );
        }
        if listen.tcp.is_none() && listen.quic.is_none() {
            return bad(
                "listen",
                "at least one of listen.tcp and listen.quic is needed",
            );
        }
        let exposed = [listen.tcp, listen.quic]
            .into_iter()
            .flatten()
            .any(|a| !a.ip().is_loopback());
        if exposed && !self.auth.has_token() && !self.auth.allow_insecure {
            return bad(
                "auth.token",
                "listening beyond loopback needs a token (auth.token_file, `y3 serve --token-file` or Y3_TOKEN) or auth.allow_insecure",
            );
        }
        Ok(listen)
    }

    fn validate_filters(&self) -> Result<(), RouterError> {
        let limits = self.filters.limits();
        if limits.max_paths == 0 || limits.max_paths > y3::filter::MAX_FILTER_PATHS {
            return Err(RouterError::Config {
                field: "filters.max_paths",
                problem: "must be within 1..=16",
            });
        }
        for attach in &self.filters.attach {
            if attach.function.trim().is_empty() {
                return Err(RouterError::Config {
                    field: "filters.attach.function",
                    problem: "must not be empty",
                });
            }
            if let Err(e) = y3::Filter::parse_with(&attach.filter, &limits, y3::Config::DEFAULT) {
                return Err(RouterError::Config {
                    field: "filters.attach.filter",
                    problem: e.kind(),
                });
            }
        }
        Ok(())
    }

    fn validate_mesh(&self) -> Result<(), RouterError> {
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        if self.mesh.downstream.is_empty() {
            return Ok(());
        }
        if self.mesh.name.trim().is_empty() {
            return bad("mesh.name", "must not be empty with downstream zippers");
        }
        if self.mesh.name.len() > self.limits.max_name_len {
            return bad("mesh.name", "longer than limits.max_name_len");
        }
        let mut names = std::collections::HashSet::new();
        for downstream in &self.mesh.downstream {
            if downstream.name.trim().is_empty() {
                return bad("mesh.downstream.name", "must not be empty");
            }
            if !names.insert(downstream.name.as_str()) {
                return bad(
                    "mesh.downstream.name",
                    "two downstream zippers have this name",
                );
            }
            downstream.host_port()?;
        }
        Ok(())
    }

    /// `limits.handshake_timeout_ms` as a duration.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.handshake_timeout_ms)
    }

    /// `limits.frame_stall_timeout_ms` as a duration.
    pub fn frame_stall_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.frame_stall_timeout_ms)
    }
}

/// Parsed listener addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// TCP, if on.
    pub tcp: Option<SocketAddr>,
    /// QUIC, if on.
    pub quic: Option<SocketAddr>,
    /// Metrics, if on.
    pub metrics: Option<SocketAddr>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_is_the_default() {
        let config = RouterConfig::from_toml("").unwrap();
        assert_eq!(config, RouterConfig::default());
        let listen = config.validate().unwrap();
        assert_eq!(listen.tcp, Some("127.0.0.1:9000".parse().unwrap()));
        // What we print, we read back.
        assert_eq!(RouterConfig::from_toml(&config.to_toml()).unwrap(), config);
    }

    #[test]
    fn partial_toml_keeps_other_defaults() {
        let config = RouterConfig::from_toml(
            "[queue]\npolicy = \"drop_oldest\"\ncapacity = 8\n[listen]\nquic = \"\"\n",
        )
        .unwrap();
        assert_eq!(config.queue.policy, Policy::DropOldest);
        assert_eq!(config.queue.capacity, 8);
        assert_eq!(config.queue.block_timeout_ms, 250);
        assert_eq!(config.queue.write_deadline_ms, 10_000);
        assert_eq!(config.validate().unwrap().quic, None);
    }

    #[test]
    fn bad_configs_name_the_field() {
        let err = RouterConfig::from_toml("[queue]\nsize = 3\n").unwrap_err();
        assert_eq!(err.kind(), "config_toml");
        let mut config = RouterConfig::default();
        config.listen.tcp = "localhost".into();
        let RouterError::Config { field, .. } = config.validate().unwrap_err() else {
            panic!()
        };
        assert_eq!(field, "listen.tcp");
        config.listen.tcp = String::new();
        config.listen.quic = String::new();
        assert!(config.validate().is_err());
    }

    #[test]
    fn mesh_section() {
        let config = RouterConfig::from_toml(
            "[mesh]\nname = \"a\"\n\
             [[mesh.downstream]]\nname = \"b\"\naddr = \"127.0.0.1:9100\"\n\
             [[mesh.downstream]]\nname = \"c\"\naddr = \"zipper-c.local:9000\"\n\
             credential = \"token:s\"\ntransport = \"tcp\"\n",
        )
        .unwrap();
        assert_eq!(config.mesh.name, "a");
        let [b, c] = &config.mesh.downstream[..] else {
            panic!("{:?}", config.mesh)
        };
        assert_eq!(
            (b.transport, b.credential.as_str()),
            (MeshTransport::Quic, "")
        );
        assert_eq!(c.host_port().unwrap(), ("zipper-c.local", 9000));
        assert_eq!(c.transport, MeshTransport::Tcp);
        config.validate().unwrap();
        assert_eq!(RouterConfig::from_toml(&config.to_toml()).unwrap(), config);
        // The default prints an empty mesh and reads it back.
        let default = RouterConfig::default().to_toml();
        assert!(default.contains("[mesh]"), "{default}");
        assert_eq!(
            RouterConfig::from_toml(&default).unwrap(),
            RouterConfig::default()
        );
    }

    #[test]
    fn auth_tokens_and_their_permissions() {
        let dir = std::env::temp_dir().join(format!("y3-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("sensors.token");
        std::fs::write(&file, "from-a-file\n").unwrap();
        let text = format!(
            "[auth]\ntoken = \"main\"\n\
             [[auth.tokens]]\nname = \"sensors\"\ntoken_file = {file:?}\npublish = [0x10, 17]\nobserve = []\n\
             [[auth.tokens]]\ntoken = \"reader\"\nobserve = [0x20]\n"
        );
        let config = RouterConfig::from_toml(&text).unwrap();
        assert_eq!(config.auth.tokens[0].publish, Some(vec![0x10, 0x11]));
        assert_eq!(config.auth.tokens[1].publish, None);
        let (main, grants) = config.tokens().unwrap();
        assert_eq!(main, "main");
        assert_eq!(grants.len(), 2);
        assert_eq!(
            (grants[0].name.as_str(), grants[0].token.as_str()),
            ("sensors", "from-a-file")
        );
        let p = &grants[0].permissions;
        assert!(p.may_publish(0x11) && !p.may_publish(0x12) && !p.may_observe(0x10));
        let p = &grants[1].permissions;
        assert_eq!(grants[1].name, "token-2");
        assert!(p.may_publish(0x99) && p.may_observe(0x20) && !p.may_observe(0x21));
        // What is printed reads back; no token shows in Debug.
        assert_eq!(RouterConfig::from_toml(&config.to_toml()).unwrap(), config);
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("main") && !debug.contains("reader"),
            "{debug}"
        );

        // A token and its file, an entry without a token, a token twice, an empty or
        // missing file: each named.
        let field = |text: &str| match RouterConfig::from_toml(text).unwrap().tokens() {
            Err(RouterError::Config { field, .. } | RouterError::Secret { field, .. }) => field,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            field(&format!("[auth]\ntoken = \"a\"\ntoken_file = {file:?}\n")),
            "auth.token_file"
        );
        assert_eq!(
            field("[[auth.tokens]]\nname = \"x\"\n"),
            "auth.tokens.token"
        );
        assert_eq!(
            field("[auth]\ntoken = \"a\"\n[[auth.tokens]]\ntoken = \"a\"\n"),
            "auth.tokens.token"
        );
        let missing = dir.join("missing");
        assert_eq!(
            field(&format!("[auth]\ntoken_file = {missing:?}\n")),
            "auth.token_file"
        );
        std::fs::write(&file, " \n").unwrap();
        assert_eq!(
            field(&format!("[auth]\ntoken_file = {file:?}\n")),
            "auth.token_file"
        );
        std::fs::write(&file, "m3trics").unwrap();
        let config =
            RouterConfig::from_toml(&format!("[listen]\nmetrics_token_file = {file:?}\n")).unwrap();
        assert_eq!(config.metrics_token().unwrap().as_deref(), Some("m3trics"));
        assert_eq!(RouterConfig::default().metrics_token().unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn beyond_loopback_needs_a_token() {
        let mut config = RouterConfig::default();
        config.listen.tcp = "0.0.0.0:9000".into();
        let RouterError::Config { field, .. } = config.validate().unwrap_err() else {
            panic!()
        };
        assert_eq!(field, "auth.token");
        config.listen.tcp = "127.0.0.1:9000".into();
        config.listen.quic = "[::]:9000".into();
        assert!(config.validate().is_err());
        // A token (or a file, or per-token entries), or the explicit opt-out.
        config.auth.token_file = "/run/secrets/y3".into();
        config.validate().unwrap();
        config.auth.token_file = PathBuf::new();
        config.auth.tokens.push(TokenConfig::default());
        config.validate().unwrap();
        config.auth.tokens.clear();
        config.auth.allow_insecure = true;
        let listen = config.validate().unwrap();
        assert_eq!(
            config.warnings(&listen).len(),
            1,
            "{:?}",
            config.warnings(&listen)
        );
        // Over plain TCP beyond loopback, a token travels in clear; metrics beyond loopback
        // without their token are open.
        config.auth.token = "t".into();
        config.listen.tcp = "10.1.2.3:9000".into();
        config.listen.metrics = "0.0.0.0:9090".into();
        let listen = config.validate().unwrap();
        let warnings = config.warnings(&listen);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("plain TCP") && warnings[1].contains("metrics"));
        config.listen.tcp_tls = true;
        config.listen.metrics_token = "m".into();
        assert_eq!(config.warnings(&listen), Vec::<&str>::new());
        // Loopback needs nothing.
        let default = RouterConfig::default();
        assert!(default.warnings(&default.validate().unwrap()).is_empty());
    }

    #[test]
    fn bad_mesh_addresses_are_refused() {
        for (addr, field) in [
            ("localhost", "mesh.downstream.addr"),
            (":9000", "mesh.downstream.addr"),
            ("host:port", "mesh.downstream.addr"),
            ("host:0", "mesh.downstream.addr"),
            ("::1:9000", "mesh.downstream.addr"),
        ] {
            let mut config = RouterConfig::default();
            config.mesh.downstream.push(DownstreamConfig {
                name: "b".into(),
                addr: addr.into(),
                ..DownstreamConfig::default()
            });
            let err = config.validate().unwrap_err();
            let RouterError::Config { field: f, .. } = err else {
                panic!("{addr}: {err}")
            };
            assert_eq!(f, field, "{addr}");
        }
        let mut config = RouterConfig::default();
        let b = DownstreamConfig {
            name: "b".into(),
            addr: "[::1]:9000".into(),
            ..DownstreamConfig::default()
        };
        assert_eq!(b.host_port().unwrap(), ("::1", 9000));
        config.mesh.downstream = vec![b.clone(), b];
        let RouterError::Config { field, .. } = config.validate().unwrap_err() else {
            panic!()
        };
        assert_eq!(field, "mesh.downstream.name");
    }

    /// YoMo's TLS variables, as `y3 serve` merges them into `[tls]`.
    #[test]
    fn yomo_tls_variables_map_onto_tls_and_conflicts_are_errors() {
        let env = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            YomoTlsEnv::from_lookup(move |name| {
                pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.into())
            })
        };
        let field = |tls: &mut TlsConfig, e: &YomoTlsEnv| match tls.merge_yomo_env(e) {
            Err(RouterError::Config { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let zipper = env(&[
            ("YOMO_TLS_VERIFY_PEER", "TRUE"),
            ("YOMO_TLS_CACERT_FILE", "/pki/ca.pem"),
            ("YOMO_TLS_CERT_FILE", "/pki/zipper.pem"),
            ("YOMO_TLS_KEY_FILE", "/pki/zipper.key"),
        ]);
        // Nothing configured: the variables fill [tls] in.
        let mut tls = TlsConfig::default();
        tls.merge_yomo_env(&zipper).unwrap();
        assert_eq!(
            (tls.cert.to_str(), tls.key.to_str(), tls.client_ca.to_str()),
            (
                Some("/pki/zipper.pem"),
                Some("/pki/zipper.key"),
                Some("/pki/ca.pem")
            )
        );
        // The same again agrees with itself.
        tls.merge_yomo_env(&zipper).unwrap();
        // No variables: nothing changes.
        let before = tls.clone();
        tls.merge_yomo_env(&env(&[])).unwrap();
        assert_eq!(tls, before);
        // Verify off (YoMo: anything but "true"), or on without a CA: no client CA.
        let mut tls = TlsConfig::default();
        tls.merge_yomo_env(&env(&[
            ("YOMO_TLS_VERIFY_PEER", "false"),
            ("YOMO_TLS_CACERT_FILE", "/ca"),
        ]))
        .unwrap();
        assert_eq!(tls, TlsConfig::default());
        assert_eq!(
            field(
                &mut TlsConfig::default(),
                &env(&[("YOMO_TLS_VERIFY_PEER", "true")])
            ),
            "tls.client_ca"
        );
        // Disagreements are errors, never a silent pick.
        let mut configured = TlsConfig {
            client_ca: "/other/ca.pem".into(),
            ..TlsConfig::default()
        };
        assert_eq!(field(&mut configured, &zipper), "tls.client_ca");
        assert_eq!(
            field(&mut configured, &env(&[("YOMO_TLS_VERIFY_PEER", "no")])),
            "tls.client_ca"
        );
        let mut configured = TlsConfig {
            cert: "/etc/y3/cert.pem".into(),
            key: "/etc/y3/key.pem".into(),
            ..TlsConfig::default()
        };
        assert_eq!(field(&mut configured, &zipper), "tls.cert");
        assert_eq!(
            field(
                &mut TlsConfig::default(),
                &env(&[("YOMO_TLS_CERT_FILE", "/c")])
            ),
            "tls.cert"
        );
        // Empty values are unset, as YoMo reads them; the misspelt CA variable is noticed.
        let blank = env(&[
            ("YOMO_TLS_VERIFY_PEER", ""),
            ("YOMO_TLS_CA_CERT_FILE", "/ca"),
        ]);
        assert_eq!(blank.verify_peer, None);
        assert!(blank.misspelt_ca);
    }

    #[test]
    fn the_tarpit_settings_and_the_removed_lockout() {
        let config = RouterConfig::default();
        let tarpit = config.auth.tarpit();
        assert_eq!(tarpit.delay(5), Duration::ZERO);
        assert_eq!(tarpit.delay(6), Duration::from_millis(250));
        assert_eq!(tarpit.delay(100), Duration::from_secs(3));
        assert_eq!(tarpit.max_in_flight, 16);
        let old = RouterConfig::from_toml("[auth]\nthrottle_ms = 60000\n").unwrap();
        let RouterError::Config { field, .. } = old.validate().unwrap_err() else {
            panic!()
        };
        assert_eq!(field, "auth.throttle_ms");
        let mut none = RouterConfig::default();
        none.auth.tarpit_max_in_flight = 0;
        assert!(none.validate().is_err());
        none.auth.tarpit_max_ms = 0;
        none.validate().unwrap();
    }
}
