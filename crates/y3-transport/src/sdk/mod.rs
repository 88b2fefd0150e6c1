//! The client SDK: [`Source`], [`StreamFunction`] and [`Sink`].
//!
//! ```text
//!  Source ──data 0x10──▶ router ──0x10──▶ StreamFunction ──data 0x11──▶ router ──▶ Sink
//! ```
//!
//! The clients speak YoMo v1.22's protocol (`spec/frames.md`): they work against `y3 serve`
//! and against YoMo's own zipper alike. Every client connects with [`ClientOptions`]
//! (address, adapter, TLS trust, name, credential), sends a handshake with its client type,
//! a YoMo-style id (`<21 characters>-<reconnect count>`) and its observed tags, and waits
//! for the router's ack. A sender encodes each outgoing frame straight into its
//! connection's bounded queue, one buffer that a writer task takes whole and writes at once
//! (no channel crossing per frame), so a fast sender gets batched writes and a slow one
//! gets low latency. A frame counts as sent only once it is written
//! to the connection: `send` returns when the frame is queued, [`Source::flush`] when
//! everything queued is written, and neither says the router has read it (see [`Source`]). Lost connections are re-established with
//! exponential [`Backoff`]; refusals (a wrong token, a bad handshake, a close with YoMo's
//! code 0x13) are returned as typed [`TransportError`](crate::TransportError)s and not
//! retried.
//!
//! Delivery to the router is at most once, as in YoMo. Against a y3 router, a
//! [`DurableSource`] and a [`durable`](StreamFunction::durable) stream function ask for
//! stored acknowledgements instead: they keep what they wrote until the router stored it and
//! write it again after a reconnect (at least once; `spec/frames.md`). A frame the router
//! refuses by its rules is reported with its reason ([`Refusals`]) and not written again.
//!
//! [`Upstream`] is the raw client side of a mesh link (client type `0x5e`), for a router
//! that forwards to a downstream zipper; it leaves batching and reconnection to its caller.
//!
//! # Examples
//!
//! ```no_run
//! use y3_transport::sdk::{ClientOptions, Sink, Source};
//!
//! # async fn demo() -> Result<(), y3_transport::TransportError> {
//! let options = ClientOptions::new("127.0.0.1:9000".parse().unwrap()).name("sensor-1");
//! let mut sink = Sink::connect(options.clone().name("printer"), &[0x10]).await?;
//! let mut source = Source::connect(options).await?;
//! source.send(0x10, &b"\x11\x01\x2a"[..]).await?;
//! source.flush().await?;
//! let data = sink.recv().await.expect("open")?;
//! assert_eq!(&data.payload[..], b"\x11\x01\x2a");
//! # Ok(()) }
//! ```

mod durable;
mod function;
mod id;
mod link;
mod outbox;
mod sink;
mod source;
mod stamp;
mod upstream;
mod window;
mod writer;

use std::net::SocketAddr;
use std::time::Duration;

pub use durable::{Closed, DurableSource};
pub use function::StreamFunction;
pub use id::{new_id, Tids};
pub use outbox::MAX_QUEUED_BYTES;
pub use sink::Sink;
pub use source::Source;
pub use upstream::Upstream;
pub use window::{Refusals, Refused, MAX_REFUSALS_KEPT, RETRY_FIRST, RETRY_MAX};
pub use writer::Writer;

use crate::tls::{Identity, Trust, YomoTlsEnv, DEV_SERVER_NAME};
use crate::DEFAULT_MAX_FRAME_LEN;

/// Which adapter a client connects with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Plain TCP.
    #[default]
    Tcp,
    /// TLS 1.3 over TCP (needs [`ClientOptions::trust`]).
    TcpTls,
    /// QUIC (always TLS 1.3; needs [`ClientOptions::trust`]).
    Quic,
}

impl Transport {
    /// The name errors and logs use: `tcp`, `tcp+tls`, `quic`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::TcpTls => "tcp+tls",
            Transport::Quic => "quic",
        }
    }
}

/// Exponential backoff between connection attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failed attempt.
    pub initial: Duration,
    /// Largest delay.
    pub max: Duration,
    /// Attempts per (re)connection before giving up with
    /// [`TransportError::GaveUp`](crate::TransportError::GaveUp); at least 1.
    /// [`Backoff::FOREVER`], the default, never gives up: a client outlives a router
    /// restart or outage of any length, retrying every [`max`](Backoff::max) at worst.
    pub attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
            attempts: Backoff::FOREVER,
        }
    }
}

impl Backoff {
    /// [`Backoff::attempts`] that never gives up (the default).
    pub const FOREVER: u32 = u32::MAX;

    /// Whether these attempts never give up.
    pub fn is_forever(&self) -> bool {
        self.attempts == Backoff::FOREVER
    }

    /// The delay after failed attempt number `attempt` (0-based): `initial * 2^attempt`,
    /// capped at `max`, minus up to a quarter of jitter so that clients restarted together
    /// do not reconnect in lockstep.
    pub fn delay(&self, attempt: u32) -> Duration {
        let base = self
            .initial
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        base - base / 4 * (nanos % 1000) / 1000
    }
}

/// How to reach and identify to a router.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The router's address.
    pub addr: SocketAddr,
    /// The adapter.
    pub transport: Transport,
    /// How to trust the router's certificate (TLS and QUIC).
    pub trust: Trust,
    /// TLS server name to ask for; `localhost` by default (what dev certificates carry).
    pub server_name: String,
    /// The client certificate (and key) presented over TLS and QUIC, for a router that
    /// requires one (`[tls] client_ca`, YoMo's `YOMO_TLS_VERIFY_PEER=true`); none by default.
    pub client_identity: Option<Identity>,
    /// Client name (YoMo's app or function name).
    pub name: String,
    /// Credential as `type:payload` (`token:SECRET`); empty: none.
    pub credential: String,
    /// The `yomo-target` value a stream function or sink accepts; empty: none.
    pub wanted_target: String,
    /// Largest frame body sent or accepted.
    pub max_frame_len: usize,
    /// How long to wait for the router's answer to the handshake.
    pub handshake_timeout: Duration,
    /// Reconnection policy.
    pub backoff: Backoff,
    /// Frames queued between the application and the writer task (encoded; at most
    /// [`MAX_QUEUED_BYTES`] of them unless one frame alone is larger).
    pub send_queue: usize,
    /// Content filters of a stream function or sink, as `(observed tag, filter)`
    /// (`spec/filters.md`): the router delivers a frame on the tag only if its payload
    /// matches. A router refuses a filter that does not compile (`bad_filter`).
    pub filters: Vec<(u32, String)>,
    /// The kernel receive buffer (`SO_RCVBUF`) of a TCP connection (plain or TLS), set
    /// before connecting; `None` (the default) leaves the kernel's, which on Linux grows
    /// up to `net.ipv4.tcp_rmem`'s maximum. Linux doubles the value for its bookkeeping.
    /// A small buffer makes a slow reader push back on the router sooner (frames then
    /// wait in the router's queues and send buffer rather than in this host's kernel).
    /// QUIC ignores it.
    pub recv_buffer: Option<usize>,
}

impl ClientOptions {
    /// Plain TCP to `addr`, no token, default limits.
    pub fn new(addr: SocketAddr) -> ClientOptions {
        ClientOptions {
            addr,
            transport: Transport::Tcp,
            trust: Trust::Unset,
            server_name: DEV_SERVER_NAME.to_owned(),
            client_identity: None,
            name: String::new(),
            credential: String::new(),
            wanted_target: String::new(),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            handshake_timeout: Duration::from_secs(5),
            backoff: Backoff::default(),
            send_queue: 1024,
            filters: Vec::new(),
            recv_buffer: None,
        }
    }

    /// Sets the adapter.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// Sets the TLS trust.
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// Presents `identity` as the client certificate over TLS and QUIC.
    pub fn client_identity(mut self, identity: Identity) -> Self {
        self.client_identity = Some(identity);
        self
    }

    /// Takes YoMo's TLS variables as YoMo's clients do, where these options leave a setting
    /// unset: `YOMO_TLS_CERT_FILE`/`YOMO_TLS_KEY_FILE` as the client certificate, and with
    /// `YOMO_TLS_VERIFY_PEER=true`, `YOMO_TLS_CACERT_FILE` as the CA to verify the router
    /// against (a trust already set wins). `env` is usually [`YomoTlsEnv::from_env`].
    ///
    /// # Errors
    /// [`crate::TransportError::Certificate`] for files that cannot be read.
    pub fn yomo_tls_env(mut self, env: &YomoTlsEnv) -> Result<Self, crate::TransportError> {
        if self.client_identity.is_none() {
            self.client_identity = env.client_identity()?;
        }
        if matches!(self.trust, Trust::Unset) {
            if let Some(trust) = env.client_trust()? {
                self.trust = trust;
            }
        }
        Ok(self)
    }

    /// The rustls client configuration of these options: [`ClientOptions::trust`], and the
    /// client certificate if one is set.
    ///
    /// # Errors
    /// As [`Trust::client_config_with`].
    pub fn tls_config(
        &self,
    ) -> Result<std::sync::Arc<rustls::ClientConfig>, crate::TransportError> {
        self.trust.client_config_with(self.client_identity.as_ref())
    }

    /// Sets the client name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Whether the credential would cross the network in clear: a token over plain TCP to
    /// an address beyond loopback (use [`Transport::TcpTls`] or [`Transport::Quic`]).
    pub fn exposes_credential(&self) -> bool {
        !self.credential.is_empty()
            && self.transport == Transport::Tcp
            && !self.addr.ip().is_loopback()
    }

    /// Sets the credential to the token `token` (`token:TOKEN`); an empty token clears it.
    pub fn token(mut self, token: &str) -> Self {
        self.credential = if token.is_empty() {
            String::new()
        } else {
            format!("token:{token}")
        };
        self
    }

    /// Sets the credential in its `type:payload` spelling.
    pub fn credential(mut self, credential: impl Into<String>) -> Self {
        self.credential = credential.into();
        self
    }

    /// Sets the wanted target of a stream function or sink.
    pub fn wanted_target(mut self, target: impl Into<String>) -> Self {
        self.wanted_target = target.into();
        self
    }

    /// Adds a content filter on observed tag `tag`, evaluated by the router
    /// (`spec/filters.md`), e.g. `options.filter(0x10, "0x10/0x11:f32 > 60")`.
    pub fn filter(mut self, tag: u32, filter: impl Into<String>) -> Self {
        self.filters.push((tag, filter.into()));
        self
    }

    /// Sets the TCP receive buffer: [`recv_buffer`](ClientOptions::recv_buffer).
    pub fn recv_buffer(mut self, bytes: usize) -> Self {
        self.recv_buffer = Some(bytes);
        self
    }

    /// Sets the reconnection policy.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            attempts: 5,
        };
        let d0 = b.delay(0);
        assert!(d0 <= Duration::from_millis(100) && d0 >= Duration::from_millis(75));
        let d3 = b.delay(3);
        assert!(d3 <= Duration::from_millis(800) && d3 >= Duration::from_millis(600));
        assert!(b.delay(40) <= Duration::from_secs(1));
    }

    #[test]
    fn yomos_tls_variables_fill_in_what_is_unset() {
        let dir = std::env::temp_dir().join(format!("y3-sdk-yomo-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let id = Identity::self_signed().unwrap();
        let cert = dir.join("c.pem");
        let key = dir.join("c.key");
        id.write_certificate_pem(&cert).unwrap();
        let der = rcgen::KeyPair::generate().unwrap().serialize_pem();
        std::fs::write(&key, der).unwrap();
        let env = YomoTlsEnv {
            verify_peer: Some(true),
            ca_cert_file: Some(cert.clone()),
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            misspelt_ca: false,
        };
        let at = ClientOptions::new("127.0.0.1:9000".parse().unwrap());
        let o = at.clone().yomo_tls_env(&env).unwrap();
        assert!(o.client_identity.is_some());
        assert!(matches!(&o.trust, Trust::Pinned(c) if c == &vec![id.certificate().clone()]));
        // A trust already set wins; without VERIFY_PEER the CA is not used.
        let o = at
            .clone()
            .trust(Trust::Insecure)
            .yomo_tls_env(&env)
            .unwrap();
        assert!(matches!(o.trust, Trust::Insecure));
        let off = YomoTlsEnv {
            verify_peer: Some(false),
            ..env.clone()
        };
        assert!(matches!(
            at.clone().yomo_tls_env(&off).unwrap().trust,
            Trust::Unset
        ));
        // An unreadable file is an error, not a silent fallback.
        let missing = YomoTlsEnv {
            cert_file: Some(dir.join("nope.pem")),
            ..env
        };
        assert_eq!(at.yomo_tls_env(&missing).unwrap_err().kind(), "certificate");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_token_over_plain_tcp_beyond_loopback_is_exposed() {
        let at = |addr: &str| ClientOptions::new(addr.parse().unwrap());
        assert!(at("10.0.0.2:9000").token("t").exposes_credential());
        assert!(!at("10.0.0.2:9000").exposes_credential());
        assert!(!at("127.0.0.1:9000").token("t").exposes_credential());
        assert!(!at("[::1]:9000").token("t").exposes_credential());
        for transport in [Transport::TcpTls, Transport::Quic] {
            let o = at("10.0.0.2:9000").token("t").transport(transport);
            assert!(!o.exposes_credential());
        }
    }
}
