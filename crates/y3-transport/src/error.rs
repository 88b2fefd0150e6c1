//! [`TransportError`]: why a connection could not be made or kept, the adapters' error
//! (tcp, tls, quic, the SDK). Every variant has a stable snake_case
//! [`kind`](TransportError::kind). What a failure means for trying again, and how a lost
//! QUIC connection reads, is `retry.rs`'s.

use std::io;

use crate::frame::{FrameError, GoawayCode};

/// Why a connection could not be made or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Socket-level failure (connection refused, reset, ...).
    #[error("io: {0}")]
    Io(#[from] io::Error),
    /// The peer sent something that is not a frame.
    #[error(transparent)]
    Frame(FrameError),
    /// TLS setup or handshake failure.
    #[error("tls: {0}")]
    Tls(#[from] rustls::Error),
    /// A certificate or key could not be generated or loaded.
    #[error("certificate: {0}")]
    Certificate(&'static str),
    /// A QUIC connection could not be started.
    #[cfg(feature = "quic")]
    #[error("quic connect: {0}")]
    QuicConnect(#[from] quinn::ConnectError),
    /// A QUIC connection failed or was closed.
    #[cfg(feature = "quic")]
    #[error("quic: {0}")]
    QuicConnection(#[from] quinn::ConnectionError),
    /// The router refused the handshake (rejected frame) or closed the connection (goaway
    /// frame, or a QUIC close whose reason names a kind).
    #[error("{}: {message}", .code.kind())]
    Goaway {
        /// The reason code ([`GoawayCode::Unspecified`] from a router that sends none).
        code: GoawayCode,
        /// The router's message.
        message: String,
    },
    /// The router sent the client to another address (a connect-to frame).
    #[error("redirected to {endpoint}")]
    Redirected {
        /// The `host:port` to connect to instead.
        endpoint: String,
    },
    /// The peer sent a frame that does not belong at this point.
    #[error("unexpected {found} frame, expected {expected}")]
    UnexpectedFrame {
        /// What was expected.
        expected: &'static str,
        /// What arrived.
        found: &'static str,
    },
    /// The connection closed cleanly where more frames were expected.
    #[error("connection closed")]
    Closed,
    /// Something did not happen in time.
    #[error("timed out waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
    },
    /// Connecting gave up after the configured attempts
    /// ([`Backoff::attempts`](crate::sdk::Backoff::attempts); by default a client never
    /// gives up). The message names the address, the transport and the last failure (once:
    /// `last` is not also a `source`), and says what to try.
    #[error(
        "cannot reach the router at {addr} over {transport} after {attempts} attempts: \
         {last} (is the router running there, on that port and transport? a client \
         retries forever unless its backoff sets attempts)"
    )]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The address tried.
        addr: std::net::SocketAddr,
        /// The transport tried (`tcp`, `tcp+tls`, `quic`).
        transport: &'static str,
        /// Why the last attempt failed (connection refused, a timeout, a TLS failure, ...).
        last: Box<TransportError>,
    },
    /// An option combination that cannot work (TLS without a trust setting, ...).
    #[error("invalid configuration: {0}")]
    Config(&'static str),
}

impl TransportError {
    /// The stable snake_case name.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportError::Io(_) => "io",
            TransportError::Frame(e) => e.kind(),
            TransportError::Tls(_) => "tls",
            TransportError::Certificate(_) => "certificate",
            #[cfg(feature = "quic")]
            TransportError::QuicConnect(_) => "quic_connect",
            #[cfg(feature = "quic")]
            TransportError::QuicConnection(_) => "quic_connection",
            TransportError::Goaway { code, .. } => code.kind(),
            TransportError::Redirected { .. } => "redirected",
            TransportError::UnexpectedFrame { .. } => "unexpected_frame",
            TransportError::Closed => "closed",
            TransportError::Timeout { .. } => "timeout",
            TransportError::GaveUp { .. } => "gave_up",
            TransportError::Config(_) => "config",
        }
    }
}
