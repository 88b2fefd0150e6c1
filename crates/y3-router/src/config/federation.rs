//! `[federation]`: routers federated over a NATS cluster (`spec/federation.md`).
//!
//! ```toml
//! [federation]
//! urls = []                   # NATS servers, "nats://host:4222"; empty: federation off
//! name = ""                   # this router's name in the cluster (header Y3-Origin);
//!                             # unique per router (claimed through NATS: a second router
//!                             # with it is refused at start); empty: [mesh].name
//! subject_prefix = "y3"       # subjects are <prefix>.tag.<tag in decimal>
//! tags = []                   # tags that federate; empty: every tag
//! durable_tags = []           # tags replayed from JetStream to observers that were away
//! token = ""                  # NATS credentials: a token ...
//! token_file = ""
//! user = ""                   # ... or a user and password ...
//! password = ""
//! password_file = ""
//! nkey_file = ""              # ... or a file holding an nkey seed ("SU...")
//! credentials_file = ""       # ... or a .creds file (JWT and nkey)
//! tls_ca = ""                 # PEM CA to verify the servers by; implies TLS
//! tls_required = false        # TLS even without a CA of our own (system roots)
//! publish_queue = 8192        # frames waiting for the NATS publisher; past it, as for a
//!                             # slow subscriber: [queue] policy "block" holds the client
//!                             # back while NATS takes frames, else dropped and counted
//! batch_frames = 64          # plain frames of one tag waiting together travel as one
//! batch_bytes = 32768         # NATS message, up to this many frames / bytes; 0 or 1: one
//!                             # frame per message (nothing waits to fill a batch)
//! dedup_window = 65536        # yomo-tids remembered per durable consumer
//!
//! [federation.stream]          # the JetStream stream of the durable tags
//! name = "Y3"
//! replicas = 1                # 3 in a three-node cluster survives the loss of one node
//! max_age_s = 86400           # what an absent observer can catch up on
//! max_bytes = -1              # -1: unlimited
//! duplicate_window_s = 120    # Nats-Msg-Id de-duplication of re-sent frames
//! consumer_inactive_s = 604800 # a durable consumer unused this long is removed
//! ack_wait_ms = 5000          # a message not acknowledged in this time is sent again
//! ```

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::RouterError;

/// The most frames one batch may carry (`federation.batch_frames` is bounded by it); a
/// message announcing more is malformed.
pub(crate) const MAX_BATCH_FRAMES: usize = 1024;

/// The largest `federation.batch_bytes`: half of NATS's default payload limit.
const MAX_BATCH_BYTES: usize = 512 * 1024;

/// `[federation]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FederationConfig {
    /// NATS server URLs; empty: federation off.
    pub urls: Vec<String>,
    /// This router's name in the federation, claimed through NATS at start (`claim.rs`);
    /// empty: `mesh.name`.
    pub name: String,
    /// First token of every subject.
    pub subject_prefix: String,
    /// Tags that federate; empty: every tag.
    pub tags: Vec<u32>,
    /// Tags that go through JetStream and are replayed to observers that were away.
    pub durable_tags: Vec<u32>,
    /// A NATS token.
    pub token: String,
    /// A file holding the NATS token.
    pub token_file: PathBuf,
    /// A NATS user (with `password` or `password_file`).
    pub user: String,
    /// The NATS user's password.
    pub password: String,
    /// A file holding the NATS user's password.
    pub password_file: PathBuf,
    /// A file holding an nkey seed.
    pub nkey_file: PathBuf,
    /// A NATS `.creds` file.
    pub credentials_file: PathBuf,
    /// A PEM CA bundle to verify NATS servers by (implies TLS).
    pub tls_ca: PathBuf,
    /// Require TLS to the NATS servers.
    pub tls_required: bool,
    /// Frames waiting for the publisher, at most.
    pub publish_queue: usize,
    /// Plain frames of one tag published as one NATS message, at most (0 or 1: one each).
    pub batch_frames: usize,
    /// Bytes of frames (as batch entries) in one NATS message, at most; a larger frame
    /// goes alone.
    pub batch_bytes: usize,
    /// Message ids remembered per durable consumer.
    pub dedup_window: usize,
    /// The JetStream stream of `durable_tags`.
    pub stream: StreamConfig,
}

impl Default for FederationConfig {
    fn default() -> Self {
        FederationConfig {
            urls: Vec::new(),
            name: String::new(),
            subject_prefix: "y3".into(),
            tags: Vec::new(),
            durable_tags: Vec::new(),
            token: String::new(),
            token_file: PathBuf::new(),
            user: String::new(),
            password: String::new(),
            password_file: PathBuf::new(),
            nkey_file: PathBuf::new(),
            credentials_file: PathBuf::new(),
            tls_ca: PathBuf::new(),
            tls_required: false,
            publish_queue: 8192,
            batch_frames: 64,
            batch_bytes: 32 * 1024,
            dedup_window: 65536,
            stream: StreamConfig::default(),
        }
    }
}

impl fmt::Debug for FederationConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FederationConfig")
            .field("urls", &self.urls)
            .field("name", &self.name)
            .field("subject_prefix", &self.subject_prefix)
            .field("tags", &self.tags)
            .field("durable_tags", &self.durable_tags)
            .field("token", &(!self.token.is_empty()).then_some("<hidden>"))
            .field("user", &self.user)
            .field(
                "password",
                &(!self.password.is_empty()).then_some("<hidden>"),
            )
            .field("nkey_file", &self.nkey_file)
            .field("credentials_file", &self.credentials_file)
            .field("tls_ca", &self.tls_ca)
            .field("publish_queue", &self.publish_queue)
            .field("batch_frames", &self.batch_frames)
            .field("batch_bytes", &self.batch_bytes)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// `[federation.stream]`: the JetStream stream and consumers of the durable tags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamConfig {
    /// The stream's name.
    pub name: String,
    /// Copies of every message in the cluster.
    pub replicas: usize,
    /// Messages older than this are removed.
    pub max_age_s: u64,
    /// The stream's size bound; -1: none.
    pub max_bytes: i64,
    /// Re-sent messages with the same `Nats-Msg-Id` within this are stored once.
    pub duplicate_window_s: u64,
    /// A durable consumer nobody used this long is removed by the server.
    pub consumer_inactive_s: u64,
    /// A delivered message not acknowledged in this time is delivered again.
    pub ack_wait_ms: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            name: "Y3".into(),
            replicas: 1,
            max_age_s: 86400,
            max_bytes: -1,
            duplicate_window_s: 120,
            consumer_inactive_s: 7 * 86400,
            ack_wait_ms: 5000,
        }
    }
}

impl FederationConfig {
    /// Whether federation is on (at least one URL).
    pub fn enabled(&self) -> bool {
        !self.urls.is_empty()
    }

    /// Whether frames of `tag` federate.
    pub fn federates(&self, tag: u32) -> bool {
        (self.tags.is_empty() || self.tags.contains(&tag)) && !super::RESERVED_TAGS.contains(&tag)
    }

    /// Whether `tag` is durable.
    pub fn is_durable(&self, tag: u32) -> bool {
        self.federates(tag) && self.durable_tags.contains(&tag)
    }

    /// Checks the section.
    ///
    /// # Errors
    /// [`RouterError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), RouterError> {
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        if !self.enabled() {
            return Ok(());
        }
        if self.subject_prefix.is_empty()
            || !self
                .subject_prefix
                .split('.')
                .all(|t| !t.is_empty() && t.bytes().all(is_subject_byte))
        {
            return bad(
                "federation.subject_prefix",
                "dot-separated tokens of letters, digits, '-' and '_'",
            );
        }
        if !self.name.bytes().all(is_subject_byte) {
            return bad(
                "federation.name",
                "letters, digits, '-' and '_' only (it is a subject token)",
            );
        }
        if self.publish_queue == 0 {
            return bad("federation.publish_queue", "must be at least 1");
        }
        if self.batch_frames > MAX_BATCH_FRAMES {
            return bad("federation.batch_frames", "must be at most 1024");
        }
        if self.batch_bytes > MAX_BATCH_BYTES {
            return bad(
                "federation.batch_bytes",
                "must be at most 524288 (NATS's default payload limit is 1 MiB)",
            );
        }
        if self.stream.name.is_empty() || !self.stream.name.bytes().all(is_subject_byte) {
            return bad(
                "federation.stream.name",
                "letters, digits, '-' and '_' only",
            );
        }
        if self.stream.replicas == 0 || self.stream.replicas > 5 {
            return bad("federation.stream.replicas", "must be within 1..=5");
        }
        let secrets = [
            !self.token.is_empty() || !self.token_file.as_os_str().is_empty(),
            !self.user.is_empty(),
            !self.nkey_file.as_os_str().is_empty(),
            !self.credentials_file.as_os_str().is_empty(),
        ];
        if secrets.iter().filter(|s| **s).count() > 1 {
            return bad(
                "federation.token",
                "one of token, user, nkey_file and credentials_file",
            );
        }
        if !self.token.is_empty() && !self.token_file.as_os_str().is_empty() {
            return bad("federation.token", "token and token_file are exclusive");
        }
        Ok(())
    }
}

fn is_subject_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_off_and_federate_everything() {
        let config = FederationConfig::default();
        assert!(!config.enabled());
        assert!(config.federates(0x33));
        assert!(!config.federates(0xf001));
        assert!(!config.is_durable(0x33));
        config.validate().unwrap();
    }

    #[test]
    fn durable_only_among_federated_tags() {
        let config = FederationConfig {
            urls: vec!["nats://127.0.0.1:4222".into()],
            tags: vec![0x10, 0x11],
            durable_tags: vec![0x11, 0x12],
            ..FederationConfig::default()
        };
        assert!(config.federates(0x10) && !config.federates(0x12));
        assert!(config.is_durable(0x11) && !config.is_durable(0x12));
        config.validate().unwrap();
    }

    #[test]
    fn bad_values_are_refused() {
        let on = || FederationConfig {
            urls: vec!["nats://127.0.0.1:4222".into()],
            ..FederationConfig::default()
        };
        let mut c = on();
        c.subject_prefix = "y3..x".into();
        assert!(c.validate().is_err());
        let mut c = on();
        c.token = "t".into();
        c.user = "u".into();
        assert!(c.validate().is_err());
        let mut c = on();
        c.stream.replicas = 0;
        assert!(c.validate().is_err());
        let mut c = on();
        c.batch_frames = MAX_BATCH_FRAMES + 1;
        assert!(c.validate().is_err());
        let mut c = on();
        c.batch_bytes = MAX_BATCH_BYTES + 1;
        assert!(c.validate().is_err());
        let mut c = on();
        (c.batch_frames, c.batch_bytes) = (0, 0);
        c.validate().unwrap();
    }
}
