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
//! [mqtt]                      # MQTT 3.1.1 and 5 devices (config/mqtt.rs, docs/mqtt.md)
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

mod auth;
pub mod federation;
mod filters;
mod limits;
mod listen;
mod mesh;
pub mod mqtt;
mod process;
mod queue;
mod secret;
mod validate;

pub(crate) use auth::secret;
pub use auth::{AuthConfig, Grant, Permissions, TarpitConfig, TokenConfig, RESERVED_TAGS};
pub use filters::{AttachConfig, FiltersConfig};
pub use limits::{LimitsConfig, ShutdownConfig};
pub use listen::{ListenConfig, TlsConfig, DEFAULT_METRICS_ADDR};
pub use mesh::{DownstreamConfig, MeshConfig, MeshTransport};
pub use process::{LogConfig, LogFormat, StateConfig};
pub use queue::{Policy, QueueConfig};
pub(crate) use secret::read_secret;
pub use validate::Listen;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use y3_transport::tls::{ClientCa, YomoTlsEnv};

use crate::error::RouterError;

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
    /// Routers federated over NATS (`config/federation.rs`, `spec/federation.md`).
    pub federation: federation::FederationConfig,
    /// What the router keeps across restarts.
    pub state: StateConfig,
    /// The process's log (`y3 serve`).
    pub log: LogConfig,
    /// The MQTT listener and its topic ↔ tag mapping (`config/mqtt.rs`, `docs/mqtt.md`).
    pub mqtt: mqtt::MqttConfig,
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

    /// `limits.handshake_timeout_ms` as a duration.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.handshake_timeout_ms)
    }

    /// `limits.frame_stall_timeout_ms` as a duration.
    pub fn frame_stall_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.frame_stall_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
