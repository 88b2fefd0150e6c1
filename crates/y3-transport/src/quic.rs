//! The QUIC adapter: one bidirectional quinn stream per connection, framed with the same
//! [`FrameCodec`] as TCP (quinn's `RecvStream`/`SendStream` are tokio `AsyncRead`/
//! `AsyncWrite`). TLS 1.3 always; see [`crate::tls`] for certificates.
//!
//! The client opens the stream and writes its handshake at once, which is what makes the
//! stream visible to the server's `accept_bi`. Parameters and close codes follow YoMo's
//! zipper (see `spec/frames.md`): ALPN `yomo`, application code 0x13 for "do not come
//! back" and [`CLOSE_RETRY`] for "come back"; YoMo's idle timeout ([`IDLE_TIMEOUT`]).
//!
//! Crash recovery: a server endpoint derives its stateless-reset key and its connection-ID
//! key from a [`ResetSecret`] and its bound address. A router that keeps the secret across
//! restarts answers the first packet of each client of its crashed predecessor with a
//! stateless reset (the client knows the token, so it believes it), and the client
//! reconnects at once instead of waiting out its idle timeout:
//!
//! ```text
//!  router killed ─ restarted (same secret, same address)
//!  old client ── packet, old connection ID ──▶ new endpoint: CID valid (same key), unknown
//!  old client ◀── stateless reset (token = HMAC(reset key, CID)) ── ⇒ reconnects now
//! ```
//!
//! A client that sends nothing is reset too, before the successor serves: with a peers
//! directory ([`Recovery`]) the listener keeps who addressed which connection ID
//! (`quic_peers.rs`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, EndpointConfig, TransportConfig};

use crate::codec::FrameCodec;
use crate::error::TransportError;
use crate::frame::{Goaway, GoawayCode};
use crate::stream::{Connection, Guard, TransportKind};

/// Keep-alive interval of both sides: a packet at least this often, so that a connection
/// is never idle for [`IDLE_TIMEOUT`] while its peer lives (five chances per timeout), and
/// a y3 client of a router restarted after a crash sends a packet (and draws its stateless
/// reset, see the module docs) within this long.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// Idle timeout: a peer silent this long (keep-alives unanswered) is gone. YoMo's zipper
/// advertises 5 s, and less would not help YoMo's clients: quic-go raises a peer's idle
/// timeout below 5 s to 5 s and sends its keep-alive after half of it, so a YoMo client
/// whose router crashed sends its next packet (and is reset by the restarted router) at
/// most 2.5 s after the last packet it received.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// UDP socket buffers asked of the kernel (it grants up to `net.core.rmem_max` /
/// `wmem_max`). At the default ~208 KiB a burst of YoMo's one-packet-per-message writes
/// overflowed the router's receive buffer: each lost datagram left a gap in the stream,
/// and past 1,024 gaps quinn closes the connection (`too many gaps in stream buffer`).
/// Linux grants twice the request up to `net.core.rmem_max` / `wmem_max` (4 MiB on the lab
/// machine: 8 MiB each). With y3's own clients, 1 KiB frames paced at 10,000 msg/s through
/// `y3 serve` (sink and relay), neither the kernel (`Udp` `RcvbufErrors`) nor quinn
/// (`lost_packets`, no transmit blocked by congestion control or pacing) counted a loss:
/// their p99 over QUIC is the scheduling of a router that wakes 0.46 times per message
/// there (0.07 over TCP; `perf stat`, context switches of `y3 serve`), not recovery.
const SOCKET_BUFFER: usize = 4 << 20;

/// Stream and connection receive windows: 256 KiB (YoMo's are 2 MiB). quinn closes a
/// connection whose stream buffer holds more than 1,024 separate chunks ("too many gaps in
/// stream buffer"); YoMo's clients send every message as its own ~100-byte packet, so with
/// 2 MiB in flight a burst of datagrams lost at a busy router left thousands of gaps, and
/// the YoMo source reconnected, losing 0.1-2% of 64 B messages. 256 KiB bounds the gaps to
/// a few hundred; it still carries 250 MB/s at a 1 ms round trip.
const RECEIVE_WINDOW: u32 = 256 * 1024;

/// Largest UDP payload y3 sends and accepts on a loopback path: the upper bound of MTU
/// discovery and the first packets' size there, and what an endpoint accepts. QUIC's floor
/// is 1,200 bytes and quinn's discovery stops at 1,452 (an Ethernet frame), but loopback
/// carries 64 KiB datagrams: at 1,452 a 1 KiB frame costs a packet of its own (sealed, sent,
/// acknowledged, opened, reassembled), at 6 KiB a packet carries five or six. Not more:
/// quinn hands the socket up to 10 datagrams per `sendmsg` (GSO, its private
/// `MAX_TRANSMIT_SEGMENTS`), and the kernel refuses a batch over 64 KiB with `EMSGSIZE`,
/// which quinn-udp takes for a lost MTU probe: at 16 KiB every batch vanished and the
/// connection stalled. Other paths keep quinn's defaults; a peer that accepts less (YoMo's
/// quic-go: 1,452) is never sent more.
pub const LOOPBACK_UDP_PAYLOAD: u16 = 6 * 1024;

/// Congestion window a connection to a peer on this host starts with: its receive window
/// (`RECEIVE_WINDOW`, 256 KiB), so that on loopback flow control, not congestion control, bounds
/// what is in flight (as with TCP there, whose ten-segment initial window at loopback's
/// 64 KiB segments is 640 KiB).
///
/// quinn starts at 12,000 bytes and lets a datagram go only while the bytes in flight plus
/// a whole datagram of the path's size (two for the second of a batch) stay under the
/// window: at [`LOOPBACK_UDP_PAYLOAD`] (6 KiB) that is one datagram per flight, and the
/// next waited for an ACK, which a peer asked for one ACK per 8 packets sends only after
/// its 2 ms timer (3 ms with tokio's millisecond ticks). Measured with quinn's traces in
/// `y3 serve`, 10,000 msg/s paced through the router to a sink: 11 transmits blocked by
/// congestion control per 5,000 64 B frames and 12-14 per 3,000 1 KiB frames at 12,000;
/// 2 at 61,440 (ten datagrams); 0 at 256 KiB.
pub const LOOPBACK_INITIAL_WINDOW: u64 = RECEIVE_WINDOW as u64;

/// The UDP payload quinn's MTU discovery stops at by default, and what an Ethernet path
/// carries (1,500 less IPv6 and UDP headers).
pub const ETHERNET_UDP_PAYLOAD: u16 = 1452;

/// Application close code that tells a YoMo client not to come back (`YomoCloseErrorCode`):
/// used after a rejection, a protocol error or a reserved tag.
pub const CLOSE_TERMINAL: u32 = 0x13;

/// Application close code for "come back": a YoMo client reconnects at once (to a
/// restarted router), then every 2 s. Used when shutting down or shedding load.
pub const CLOSE_RETRY: u32 = 0x01;

/// The QUIC knobs y3 sets beyond quinn's defaults, in one place: the router and every y3
/// client use [`Tuning::default`]; the lab compares others (`y3-lab net quic`).
///
/// Receive windows stay at 256 KiB on both sides (the gaps YoMo's one-packet-per-message
/// clients leave in a bigger one; see `RECEIVE_WINDOW`).
///
/// quinn's send window (10 MB written and not yet acknowledged) stays too. A YoMo sink
/// grants megabytes and, starved of CPU, drops what passes its 256 unprocessed packets:
/// at 1 KiB flat out it lost 2.4% of the router's datagrams. A 256 KiB send window on
/// loopback ended those losses, but the router then waited on the sink's ACKs (quic-go
/// sends about one per 20 packets): msg/s fell in 5 of 6 runs at 1 KiB, medians 23.4k to
/// 19.9k (sink) and 15.3k to 11.2k (relay), router CPU per frame not lower
/// (`scripts/perframe-yomo.py`, interleaved runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Largest UDP payload on a loopback path (see [`LOOPBACK_UDP_PAYLOAD`]); 1,452 is what
    /// quinn reaches on any path by itself.
    pub loopback_udp_payload: u16,
    /// ACKs asked of a quinn peer (the ACK-frequency extension; quic-go ignores it): one
    /// per this many ack-eliciting packets, or after [`Tuning::max_ack_delay`]. `None`: one
    /// every second packet (RFC 9000's default).
    pub ack_eliciting_threshold: Option<u32>,
    /// The longest a quinn peer holds an ACK back when asked for fewer ACKs.
    pub max_ack_delay: Duration,
    /// Initial congestion window in bytes on a loopback path (see
    /// [`LOOPBACK_INITIAL_WINDOW`]); `None`: quinn's (12,000), as on every other path.
    pub loopback_initial_window: Option<u64>,
}

impl Tuning {
    /// What y3 ran before this tuning: quinn's defaults for these knobs.
    pub const QUINN_DEFAULTS: Tuning = Tuning {
        loopback_udp_payload: ETHERNET_UDP_PAYLOAD,
        ack_eliciting_threshold: None,
        max_ack_delay: Duration::from_millis(25),
        loopback_initial_window: None,
    };
}

impl Default for Tuning {
    /// [`LOOPBACK_UDP_PAYLOAD`]; an ACK per 8 packets or 2 ms; [`LOOPBACK_INITIAL_WINDOW`].
    fn default() -> Tuning {
        Tuning {
            loopback_udp_payload: LOOPBACK_UDP_PAYLOAD,
            ack_eliciting_threshold: Some(8),
            max_ack_delay: Duration::from_millis(2),
            loopback_initial_window: Some(LOOPBACK_INITIAL_WINDOW),
        }
    }
}

/// The QUIC close code for a goaway: retryable codes let YoMo clients reconnect.
pub const fn close_code(code: GoawayCode) -> u32 {
    if code.is_retryable() {
        CLOSE_RETRY
    } else {
        CLOSE_TERMINAL
    }
}

/// The close reason a router sends: `<kind>: <detail>`, so clients recover the code.
pub fn close_reason(goaway: &Goaway) -> String {
    if goaway.reason.is_empty() {
        goaway.code.kind().to_owned()
    } else {
        format!("{}: {}", goaway.code.kind(), goaway.reason)
    }
}

/// Whether a YoMo client would reconnect after this close: anything but code 0x13, or
/// code 0 with an empty reason.
pub fn close_is_retryable(close: &quinn::ApplicationClose) -> bool {
    let code = close.error_code.into_inner();
    !(code == CLOSE_TERMINAL as u64 || (code == 0 && close.reason.is_empty()))
}

/// The goaway a close stands for: the kind its reason starts with, else `unspecified`
/// (retryable or not as [`close_is_retryable`] says, through `normal`).
pub fn close_goaway(close: &quinn::ApplicationClose) -> Goaway {
    let reason = String::from_utf8_lossy(&close.reason).into_owned();
    let kind = reason.split(':').next().unwrap_or_default();
    let code = GoawayCode::from_kind(kind).unwrap_or(if close_is_retryable(close) {
        GoawayCode::Normal
    } else {
        GoawayCode::Unspecified
    });
    Goaway { code, reason }
}

/// The goaway behind an IO error of a QUIC stream, when the connection was closed by
/// the peer with an application code (how a router's close reaches a client's reader).
pub fn goaway_from_io(error: &std::io::Error) -> Option<Goaway> {
    let inner = error.get_ref()?;
    let lost = if let Some(quinn::ReadError::ConnectionLost(e)) = inner.downcast_ref() {
        e
    } else if let Some(quinn::WriteError::ConnectionLost(e)) = inner.downcast_ref() {
        e
    } else {
        inner.downcast_ref::<quinn::ConnectionError>()?
    };
    match lost {
        quinn::ConnectionError::ApplicationClosed(close) => Some(close_goaway(close)),
        _ => None,
    }
}

/// The secret a server endpoint's stateless-reset and connection-ID keys are derived from
/// (with its bound address, so that listeners sharing a secret never share keys). Keep it
/// across restarts to reset a crashed predecessor's connections at once (module docs);
/// it must stay private: whoever has it can reset this listener's connections.
#[derive(Clone)]
pub struct ResetSecret([u8; ResetSecret::LEN]);

impl fmt::Debug for ResetSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResetSecret(..)")
    }
}

impl ResetSecret {
    /// Bytes of a secret.
    pub const LEN: usize = 32;

    /// A fresh random secret (what a listener without a kept one uses).
    ///
    /// # Errors
    /// [`TransportError::Config`] when the system random source fails.
    pub fn random() -> Result<ResetSecret, TransportError> {
        let mut bytes = [0u8; Self::LEN];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .map_err(|_| TransportError::Config("the system random source failed"))?;
        Ok(ResetSecret(bytes))
    }

    /// A secret from its bytes (as kept by the caller).
    pub fn from_bytes(bytes: [u8; Self::LEN]) -> ResetSecret {
        ResetSecret(bytes)
    }

    /// The secret's bytes, to keep.
    pub fn as_bytes(&self) -> &[u8; Self::LEN] {
        &self.0
    }

    /// HMAC-SHA256 of `label` and the address: one key per purpose and listener.
    fn derive(&self, label: &str, local: SocketAddr) -> ring::hmac::Tag {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0);
        let mut ctx = ring::hmac::Context::with_key(&key);
        ctx.update(label.as_bytes());
        ctx.update(b"\0");
        ctx.update(local.to_string().as_bytes());
        ctx.sign()
    }

    /// The stateless-reset key of a server bound to `local`.
    fn reset_key(&self, local: SocketAddr) -> ring::hmac::Key {
        let reset = self.derive("y3 quic stateless reset", local);
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, reset.as_ref())
    }

    /// The endpoint configuration of a server bound to `local`: its stateless-reset key,
    /// and a connection-ID generator whose IDs a successor with the same secret recognises
    /// as its own (quinn answers a packet for an unknown connection with a reset only when
    /// the ID validates).
    fn endpoint_config(&self, local: SocketAddr) -> EndpointConfig {
        let mut config = EndpointConfig::new(Arc::new(self.reset_key(local)));
        // Every old client's packet is answered, not one per 20 ms (quinn's default): after
        // a restart, clients' packets arrive together, and one left unanswered backs off
        // for seconds before it sends again. A reset is always smaller than the packet that
        // drew it, so answering each one amplifies nothing.
        config.min_reset_interval(Duration::ZERO);
        let cid = self.derive("y3 quic connection id", local);
        let mut key = [0u8; 8];
        key.copy_from_slice(&cid.as_ref()[..8]);
        let key = u64::from_le_bytes(key);
        config.cid_generator(move || {
            Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(key))
        });
        config
    }
}

/// What a server keeps across restarts so that a successor on the same address resets its
/// connections at once (module docs).
#[derive(Debug, Clone)]
pub struct Recovery {
    /// The secret its keys derive from.
    pub secret: ResetSecret,
    /// Where to keep the clients it serves (`quic-peers-<address>` in it), so that a
    /// successor resets even those that send nothing (`quic_peers.rs`); `None`: only
    /// clients that send are reset, when they do.
    pub peers_dir: Option<std::path::PathBuf>,
}

/// The peers file of a listener on `local` in `dir`.
fn peers_file(dir: &std::path::Path, local: SocketAddr) -> std::path::PathBuf {
    let name: String = local
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("quic-peers-{name}"))
}

/// A bound server endpoint and the task keeping its peers file.
struct Bound {
    endpoint: Endpoint,
    peers: Option<(tokio::task::JoinHandle<()>, std::path::PathBuf)>,
}

/// A UDP endpoint on `addr` with [`SOCKET_BUFFER`]-sized socket buffers (as large as the
/// kernel allows; smaller is not an error); a server's keys come from its [`Recovery`], and
/// before it serves it resets the clients its predecessor kept.
fn endpoint(
    addr: SocketAddr,
    server: Option<(quinn::ServerConfig, &Recovery)>,
    tuning: &Tuning,
) -> std::io::Result<Bound> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into())?;
    let socket: std::net::UdpSocket = socket.into();
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("QUIC needs a tokio runtime"))?;
    // What this endpoint accepts: a client only talks to its router (loopback or not, its
    // peer's MTU discovery decides what comes), a router to anyone.
    let accept = tuning.loopback_udp_payload.max(ETHERNET_UDP_PAYLOAD);
    let Some((server, recovery)) = server else {
        let mut config = EndpointConfig::default();
        if addr.ip().is_loopback() {
            let _ = config.max_udp_payload_size(accept);
        }
        let endpoint = Endpoint::new(config, None, socket, runtime)?;
        return Ok(Bound {
            endpoint,
            peers: None,
        });
    };
    let local = socket.local_addr()?;
    let mut config = recovery.secret.endpoint_config(local);
    let _ = config.max_udp_payload_size(accept);
    let Some(dir) = &recovery.peers_dir else {
        let endpoint = Endpoint::new(config, Some(server), socket, runtime)?;
        return Ok(Bound {
            endpoint,
            peers: None,
        });
    };
    let file = peers_file(dir, local);
    let old = crate::quic_peers::take(&file);
    if !old.is_empty() {
        crate::quic_peers::reset_all(&socket, &recovery.secret.reset_key(local), &old);
        tracing::info!(
            clients = old.len(),
            "reset the QUIC clients of the previous run"
        );
    }
    let log = Arc::new(crate::quic_peers::PeerLog::new(file.clone()));
    let watched = crate::quic_peers::Watched {
        inner: runtime.wrap_udp_socket(socket)?,
        log: log.clone(),
    };
    let endpoint =
        Endpoint::new_with_abstract_socket(config, Some(server), Arc::new(watched), runtime)?;
    let writer = log.spawn_writer();
    Ok(Bound {
        endpoint,
        peers: Some((writer, file)),
    })
}

/// The transport parameters of a connection; `loopback`: its peer is on this host.
fn transport_config(tuning: &Tuning, loopback: bool) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    if loopback && tuning.loopback_udp_payload > ETHERNET_UDP_PAYLOAD {
        // Discovery on loopback takes microseconds; start there too. Black-hole detection
        // brings a loopback with a smaller MTU (rare) back to 1,200.
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(tuning.loopback_udp_payload);
        config.mtu_discovery_config(Some(mtu));
        config.initial_mtu(tuning.loopback_udp_payload);
    }
    if let (true, Some(window)) = (loopback, tuning.loopback_initial_window) {
        let mut cubic = quinn::congestion::CubicConfig::default();
        cubic.initial_window(window);
        config.congestion_controller_factory(Arc::new(cubic));
    }
    if let Some(threshold) = tuning.ack_eliciting_threshold {
        let mut ack = quinn::AckFrequencyConfig::default();
        ack.ack_eliciting_threshold(threshold.into())
            .max_ack_delay(Some(tuning.max_ack_delay));
        config.ack_frequency_config(Some(ack));
    }
    // One stream per connection, opened by the client: none for the router to accept
    // beyond it, and none at all for a client.
    config.max_concurrent_uni_streams(0u32.into());
    config.max_concurrent_bidi_streams(1u32.into());
    config.keep_alive_interval(Some(KEEP_ALIVE));
    config.max_idle_timeout(IDLE_TIMEOUT.try_into().ok());
    config.stream_receive_window(RECEIVE_WINDOW.into());
    config.receive_window(RECEIVE_WINDOW.into());
    Arc::new(config)
}

/// A QUIC endpoint that accepts framed connections.
#[derive(Debug)]
pub struct QuicServer {
    endpoint: Endpoint,
    codec: FrameCodec,
    /// The server config for clients on this host ([`Tuning::loopback_udp_payload`]); the
    /// endpoint's own serves the others. `None` once new connections are refused.
    loopback: std::sync::Mutex<Option<Arc<quinn::ServerConfig>>>,
    /// The task keeping the peers file, and the file.
    peers: Option<(tokio::task::JoinHandle<()>, std::path::PathBuf)>,
}

impl Drop for QuicServer {
    fn drop(&mut self) {
        if let Some((writer, _)) = &self.peers {
            writer.abort();
        }
    }
}

impl QuicServer {
    /// Binds a UDP socket on `addr` and serves `tls` (which must allow TLS 1.3), with a
    /// fresh random [`ResetSecret`] and no peers file.
    ///
    /// # Errors
    /// As [`QuicServer::bind_recovering`].
    pub fn bind(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        codec: FrameCodec,
    ) -> Result<QuicServer, TransportError> {
        let recovery = Recovery {
            secret: ResetSecret::random()?,
            peers_dir: None,
        };
        QuicServer::bind_recovering(addr, tls, codec, &recovery)
    }

    /// Binds a UDP socket on `addr` and serves `tls` (which must allow TLS 1.3), its
    /// stateless resets and connection IDs keyed by `recovery`'s secret; with a peers
    /// directory, it first resets the clients its predecessor kept there, and keeps its own
    /// (see the module docs).
    ///
    /// # Errors
    /// [`TransportError::Config`] for a TLS config QUIC cannot use, [`TransportError::Io`]
    /// for the bind.
    pub fn bind_recovering(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        codec: FrameCodec,
        recovery: &Recovery,
    ) -> Result<QuicServer, TransportError> {
        QuicServer::bind_tuned(addr, tls, codec, recovery, &Tuning::default())
    }

    /// As [`QuicServer::bind_recovering`], with these QUIC knobs (the lab's comparisons;
    /// everything else uses [`Tuning::default`]).
    ///
    /// # Errors
    /// As [`QuicServer::bind_recovering`].
    pub fn bind_tuned(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        codec: FrameCodec,
        recovery: &Recovery,
        tuning: &Tuning,
    ) -> Result<QuicServer, TransportError> {
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|_| TransportError::Config("the TLS config offers no QUIC cipher suite"))?;
        let crypto: Arc<QuicServerConfig> = Arc::new(crypto);
        let mut config = quinn::ServerConfig::with_crypto(crypto.clone());
        config.transport_config(transport_config(tuning, false));
        let mut loopback = config.clone();
        loopback.transport_config(transport_config(tuning, true));
        let bound = endpoint(addr, Some((config, recovery)), tuning)?;
        Ok(QuicServer {
            endpoint: bound.endpoint,
            codec,
            loopback: std::sync::Mutex::new(Some(Arc::new(loopback))),
            peers: bound.peers,
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// As [`Endpoint::local_addr`].
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Waits for the next connection attempt; `None` once the endpoint is closed.
    pub async fn accept(&self) -> Option<QuicIncoming> {
        let incoming = self.endpoint.accept().await?;
        let loopback = match incoming.remote_address().ip().is_loopback() {
            true => self
                .loopback
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            false => None,
        };
        Some(QuicIncoming {
            incoming,
            codec: self.codec,
            loopback,
        })
    }

    /// Refuses new connections from now on; established ones continue.
    pub fn refuse_new(&self) {
        *self.loopback.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.endpoint.set_server_config(None);
    }

    /// Closes every connection with `goaway` and waits (at most `linger`) for the peers to
    /// acknowledge. The peers file goes: the clients were told, none needs a reset.
    pub async fn close(&self, goaway: &Goaway, linger: Duration) {
        let reason = close_reason(goaway);
        self.endpoint
            .close(close_code(goaway.code).into(), reason.as_bytes());
        if let Some((writer, file)) = &self.peers {
            writer.abort();
            let _ = std::fs::remove_file(file);
        }
        let _ = tokio::time::timeout(linger, self.endpoint.wait_idle()).await;
    }
}

/// A QUIC connection attempt, before its handshake and stream.
#[derive(Debug)]
pub struct QuicIncoming {
    incoming: quinn::Incoming,
    codec: FrameCodec,
    /// The config for a client on this host, unless new connections are refused.
    loopback: Option<Arc<quinn::ServerConfig>>,
}

impl QuicIncoming {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.incoming.remote_address()
    }

    /// Completes the QUIC handshake and accepts the client's stream.
    ///
    /// # Errors
    /// [`TransportError::QuicConnection`] when the handshake fails or the client goes
    /// away before opening its stream.
    pub async fn establish(self) -> Result<Connection, TransportError> {
        let peer = self.incoming.remote_address();
        let conn = match self.loopback {
            Some(config) => self.incoming.accept_with(config)?.await?,
            None => self.incoming.await?,
        };
        let (send, recv) = conn.accept_bi().await?;
        let mut framed = Connection::new(recv, send, self.codec, TransportKind::Quic, Some(peer));
        framed.guard = Guard::Quic(conn, None);
        Ok(framed)
    }
}

/// The log target of [`log_stats`]' line (`RUST_LOG=info,y3_transport::quic::stats=debug`).
pub const STATS_TARGET: &str = "y3_transport::quic::stats";

/// Logs a connection's packet and frame counts so far, at debug level on [`STATS_TARGET`]
/// (`Guard` calls it as it closes a connection): what each side sent (datagrams, system
/// calls, ACKs, credit updates), which is what QUIC costs beyond the frames themselves,
/// and tells a client's packets from the router's on a shared loopback.
///
/// It also says what held data back, without quinn's trace logs: `tx_data_blocked` /
/// `tx_stream_data_blocked` count the times this side waited for the peer's flow-control
/// credit (the connection's and the stream's `RECEIVE_WINDOW`), `rx_…_blocked` the times
/// the peer waited for this side's;
/// `congestion_events` the congestion window's cuts and `cwnd` the window at the end;
/// `tx_pings` / `tx_immediate_acks` the probes sent: a PING every [`KEEP_ALIVE`] on an idle
/// connection and with each MTU probe; an IMMEDIATE_ACK to a quinn peer with each MTU
/// probe and each probe timeout (PTO), which on loopback, with nothing lost, means the
/// peer did not run (or answer) for longer than the timeout. In `net e2e`'s paced runs
/// (1 KiB × 5 sinks, 64 B × 1) quinn's traces of `y3 serve` showed no transmit blocked by
/// credit, congestion or pacing: the p99 tail there is the scheduling of the router and
/// of the clients' process (the router's log falls silent for milliseconds with work
/// waiting, and its PTOs fire after the clients' process went silent).
pub fn log_stats(conn: &quinn::Connection) {
    if !tracing::enabled!(target: STATS_TARGET, tracing::Level::DEBUG) {
        return;
    }
    let s = conn.stats();
    tracing::debug!(
        target: STATS_TARGET,
        peer = %conn.remote_address(),
        tx_datagrams = s.udp_tx.datagrams,
        tx_ios = s.udp_tx.ios,
        tx_bytes = s.udp_tx.bytes,
        rx_datagrams = s.udp_rx.datagrams,
        rx_ios = s.udp_rx.ios,
        rx_bytes = s.udp_rx.bytes,
        tx_acks = s.frame_tx.acks,
        tx_stream = s.frame_tx.stream,
        tx_max_data = s.frame_tx.max_data,
        tx_max_stream_data = s.frame_tx.max_stream_data,
        rx_acks = s.frame_rx.acks,
        rx_stream = s.frame_rx.stream,
        rx_max_data = s.frame_rx.max_data,
        rx_max_stream_data = s.frame_rx.max_stream_data,
        tx_data_blocked = s.frame_tx.data_blocked,
        tx_stream_data_blocked = s.frame_tx.stream_data_blocked,
        rx_data_blocked = s.frame_rx.data_blocked,
        rx_stream_data_blocked = s.frame_rx.stream_data_blocked,
        tx_pings = s.frame_tx.ping,
        tx_immediate_acks = s.frame_tx.immediate_ack,
        congestion_events = s.path.congestion_events,
        cwnd = s.path.cwnd,
        rtt_us = u64::try_from(s.path.rtt.as_micros()).unwrap_or(u64::MAX),
        lost_packets = s.path.lost_packets,
        "quic connection stats"
    );
}

/// Connects to a router at `addr` presenting `server_name`, and opens the stream.
///
/// The client endpoint binds the loopback address for a loopback router, else the
/// unspecified address of the same family.
///
/// # Errors
/// [`TransportError::Config`] for a TLS config QUIC cannot use, and the connect errors.
pub async fn connect(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    server_name: &str,
    codec: FrameCodec,
) -> Result<Connection, TransportError> {
    connect_tuned(addr, tls, server_name, codec, &Tuning::default()).await
}

/// As [`connect`], with these QUIC knobs (the lab's comparisons).
///
/// # Errors
/// As [`connect`].
pub async fn connect_tuned(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    server_name: &str,
    codec: FrameCodec,
    tuning: &Tuning,
) -> Result<Connection, TransportError> {
    let crypto = QuicClientConfig::try_from(tls)
        .map_err(|_| TransportError::Config("the TLS config offers no QUIC cipher suite"))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport_config(tuning, addr.ip().is_loopback()));
    let bind = match (addr.ip().is_loopback(), addr.is_ipv4()) {
        (true, true) => SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        (true, false) => SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        (false, true) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        (false, false) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let endpoint = endpoint(bind, None, tuning)?.endpoint;
    let conn = endpoint.connect_with(config, addr, server_name)?.await?;
    let (send, recv) = conn.open_bi().await?;
    let mut framed = Connection::new(recv, send, codec, TransportKind::Quic, Some(addr));
    framed.guard = Guard::Quic(conn, Some(endpoint));
    Ok(framed)
}
