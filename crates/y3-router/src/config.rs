//! Router configuration: TOML, every field defaulted, so an empty file (or none) works.
//!
//! ```toml
//! [listen]
//! tcp = "127.0.0.1:9000"      # "" turns the listener off
//! quic = "127.0.0.1:9000"     # UDP; same port number as TCP is fine
//! metrics = "127.0.0.1:9090"  # Prometheus text at GET /metrics
//! tcp_tls = false             # TLS 1.3 on the TCP listener
//! metrics_token = ""          # GET /metrics needs `Authorization: Bearer <it>`; empty: open
//! metrics_token_file = ""     # ... or read it from this file
//!
//! [tls]
//! cert = ""                   # PEM chain; empty: a self-signed dev certificate
//! key = ""                    # PEM private key
//! dev_cert_out = ""           # write the generated dev certificate here (mode 0600, after
//!                             # the listeners are bound; a missing directory is made 0700)
//!
//! [auth]
//! token = ""                  # the main token (every tag); empty: no token required
//! token_file = ""             # ... or read it from this file (keeps it off the command line)
//! allow_insecure = false      # listen beyond loopback without any token
//! max_failures = 20           # wrong credentials from one address within failure_window_ms
//! failure_window_ms = 60000   # ... after which its handshakes are refused (`throttled`)
//! throttle_ms = 60000         # ... for this long; max_failures = 0 turns throttling off
//!
//! [[auth.tokens]]             # zero or more further tokens, each with its permissions
//! name = "sensors"            # label in logs
//! token_file = "/etc/y3/sensors.token"  # or token = "..."
//! publish = [0x10]            # tags it may send; absent: every tag
//! observe = []                # tags it may observe; absent: every tag
//!
//! [queue]
//! capacity = 1024             # frames queued per subscriber
//! max_bytes = 16777216        # bytes queued per subscriber
//! policy = "block"            # "block" (lossless) or "drop_oldest" (real-time)
//! block_timeout_ms = 250      # under "block", a subscriber full and not reading this long
//!                             # is disconnected
//! evicted_backoff_ms = 3000   # ...and refused if it comes back sooner than this
//!
//! [limits]
//! max_frame_len = 16842752    # 16 MiB payload + 64 KiB; a longer frame is skipped as it
//!                             # streams in (counted: y3_router_skipped_frames_total)
//! max_connections = 10000
//! handshake_timeout_ms = 5000
//! frame_stall_timeout_ms = 30000 # a frame must arrive whole within this of its first byte
//! max_hops = 8
//! max_deliveries_per_message = 128 # deliveries of one yomo-tid's function outputs
//! max_queued_bytes = 536870912 # all subscribers' queues together (0: no budget)
//! max_observed_tags = 64
//! max_name_len = 128
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

use crate::error::RouterError;
use crate::queue::Policy;
use crate::session::{Grant, Permissions};

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

/// `[listen]`: where to listen. An empty string turns a listener off.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// TCP listener address.
    pub tcp: String,
    /// QUIC (UDP) listener address.
    pub quic: String,
    /// Metrics HTTP listener address.
    pub metrics: String,
    /// Serve TLS 1.3 on the TCP listener.
    pub tcp_tls: bool,
    /// Bearer token `GET /metrics` requires (`401` without it); empty: none.
    pub metrics_token: String,
    /// A file holding the metrics token (instead of `metrics_token`).
    pub metrics_token_file: PathBuf,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            tcp: "127.0.0.1:9000".into(),
            quic: "127.0.0.1:9000".into(),
            metrics: "127.0.0.1:9090".into(),
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

/// `[tls]`: the server certificate. Without one, a self-signed dev certificate is generated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain file.
    pub cert: PathBuf,
    /// PEM private key file.
    pub key: PathBuf,
    /// Where to write a generated dev certificate (PEM) for clients to pin; empty: nowhere.
    pub dev_cert_out: PathBuf,
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
    /// Failed handshakes from one address (an IPv4 address, an IPv6 /64) within
    /// `failure_window_ms` after which its handshakes are refused for `throttle_ms`
    /// (`rejected{reason="throttled"}`); 0: no throttling.
    pub max_failures: u32,
    /// The window in which failures are counted.
    pub failure_window_ms: u64,
    /// How long a throttled address is refused.
    pub throttle_ms: u64,
    /// Further tokens (`[[auth.tokens]]`), each allowing only the tags it lists.
    pub tokens: Vec<TokenConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            token: String::new(),
            token_file: PathBuf::new(),
            allow_insecure: false,
            max_failures: 20,
            failure_window_ms: 60_000,
            throttle_ms: 60_000,
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
            .field("throttle_ms", &self.throttle_ms)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl AuthConfig {
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

/// `[queue]`: one bounded queue per subscriber.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Frames.
    pub capacity: usize,
    /// Bytes (payload and metadata, plus a fixed overhead per frame).
    pub max_bytes: usize,
    /// What a full queue does.
    pub policy: Policy,
    /// Under `block`, a subscriber whose queue stays full with no frame taken for this long
    /// is disconnected (`slow_consumer`, named in the log and in
    /// `y3_router_evictions_total`) so that its sources can go on: a subscriber that
    /// stopped reading holds up its tag's publishers, and their other tags, at most this
    /// long. One that reads, however slowly, holds them back (backpressure) and stays.
    pub block_timeout_ms: u64,
    /// A client evicted as a slow consumer that reconnects within this long is refused
    /// (`slow_consumer`, retryable; counted as `rejected{reason="held_off"}`).
    pub evicted_backoff_ms: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 1024,
            max_bytes: 16 << 20,
            policy: Policy::Block,
            block_timeout_ms: 250,
            evicted_backoff_ms: 3_000,
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
    /// most one partial frame, so partial frames take at most `max_connections` times this,
    /// and queued ones are bounded by `queue.max_bytes` per subscriber and
    /// `max_queued_bytes` in all.
    pub max_frame_len: usize,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Time a new connection has to send its handshake.
    pub handshake_timeout_ms: u64,
    /// A frame must arrive whole within this long of its first bytes, or the connection is
    /// closed (a client stalling or trickling mid-frame must not hold memory forever).
    pub frame_stall_timeout_ms: u64,
    /// Data frames with more hops than this are dropped (function loops).
    pub max_hops: u32,
    /// Bytes queued over all subscribers together (the router's memory budget; 0: none). A
    /// frame that does not fit is dropped, counted as `memory_budget`, whatever the policy.
    pub max_queued_bytes: usize,
    /// Deliveries the outputs of stream functions may cause per message (`yomo-tid`),
    /// within a window of seconds: bounds loops in width (functions that re-emit what they
    /// observe multiply a message) where `max_hops` bounds their depth. Frames from sources
    /// are not counted.
    pub max_deliveries_per_message: u32,
    /// Most tags one client may observe.
    pub max_observed_tags: usize,
    /// Longest client name, in bytes.
    pub max_name_len: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_frame_len: y3_transport::DEFAULT_MAX_FRAME_LEN,
            max_connections: 10_000,
            handshake_timeout_ms: 5000,
            frame_stall_timeout_ms: 30_000,
            max_hops: 8,
            max_deliveries_per_message: 128,
            max_queued_bytes: 512 << 20,
            max_observed_tags: 64,
            max_name_len: 128,
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
        if self.limits.max_frame_len == 0 || self.limits.max_frame_len > i32::MAX as usize {
            return bad("limits.max_frame_len", "must be within 1..=2147483647");
        }
        if self.limits.max_connections == 0 {
            return bad("limits.max_connections", "must be at least 1");
        }
        if self.tls.cert.as_os_str().is_empty() != self.tls.key.as_os_str().is_empty() {
            return bad("tls.cert", "tls.cert and tls.key go together");
        }
        let listen = Listen {
            tcp: addr("listen.tcp", &self.listen.tcp)?,
            quic: addr("listen.quic", &self.listen.quic)?,
            metrics: addr("listen.metrics", &self.listen.metrics)?,
        };
        self.validate_mesh()?;
        self.validate_filters()?;
        self.federation.validate()?;
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
}
