//! Typed errors: [`FrameError`] for bytes that are not frames, [`TransportError`] for
//! connections. Every variant has a stable snake_case [`kind`](FrameError::kind).

use std::io;

use crate::frame::GoawayCode;

/// Why bytes could not be read (or written) as a frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A malformed Y3 packet: a bad header, a field overflowing its frame, bad UTF-8.
    #[error("malformed frame: {0}")]
    Decode(#[from] y3::DecodeError),
    /// A frame larger than the configured `max_frame_len`. Reported from the header alone,
    /// before any of the body is buffered.
    #[error("frame of {declared} bytes exceeds limit {limit}")]
    TooLong {
        /// The length on the wire (or of the frame being written).
        declared: u64,
        /// The limit.
        limit: u64,
    },
    /// A top-level packet that is not a known frame node.
    #[error("unknown frame type 0x{tag:02x}")]
    UnknownFrame {
        /// The packet's key.
        tag: u32,
    },
    /// A required field is absent.
    #[error("{frame} frame lacks field 0x{field:02x}")]
    MissingField {
        /// Frame type name.
        frame: &'static str,
        /// Field key.
        field: u32,
    },
    /// A field holds a value outside its range (a client type that is not one byte).
    #[error("invalid {field} in {frame} frame")]
    InvalidField {
        /// Frame type name.
        frame: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A data frame's metadata is not a msgpack string map.
    #[error(transparent)]
    Metadata(#[from] crate::metadata::MetadataError),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({buffered} bytes buffered)")]
    Truncated {
        /// Bytes of the incomplete frame that had arrived.
        buffered: u64,
    },
    /// The underlying stream failed.
    #[error("io: {0}")]
    Io(#[from] io::Error),
}

impl FrameError {
    /// The stable snake_case name: the codec's kind for [`FrameError::Decode`]
    /// (`invalid_tag`, `child_overflow`, ...), else the variant's name.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameError::Decode(e) => e.kind(),
            FrameError::TooLong { .. } => "too_long",
            FrameError::UnknownFrame { .. } => "unknown_frame",
            FrameError::MissingField { .. } => "missing_field",
            FrameError::InvalidField { .. } => "invalid_field",
            FrameError::Metadata(e) => e.kind(),
            FrameError::Truncated { .. } => "truncated",
            FrameError::Io(_) => "io",
        }
    }
}

impl From<FrameError> for io::Error {
    fn from(err: FrameError) -> io::Error {
        match err {
            FrameError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

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

    /// Whether trying again later may succeed (a lost connection), as opposed to a refusal
    /// that will repeat (a wrong token, a bad configuration).
    pub fn is_retryable(&self) -> bool {
        match self {
            TransportError::Goaway { code, .. } => code.is_retryable(),
            // A TLS failure surfaces as InvalidData from tokio-rustls: it would repeat.
            TransportError::Io(e) => {
                !matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData
                        | io::ErrorKind::InvalidInput
                        | io::ErrorKind::PermissionDenied
                ) && !refused_tls_over_quic(e)
            }
            TransportError::Closed | TransportError::Timeout { .. } => true,
            #[cfg(feature = "quic")]
            TransportError::QuicConnection(e) => match e {
                quinn::ConnectionError::TransportError(_)
                | quinn::ConnectionError::VersionMismatch => false,
                quinn::ConnectionError::ConnectionClosed(close) if is_crypto(close) => false,
                // YoMo's rule: code 0x13, or 0 without a reason, means "do not come back".
                quinn::ConnectionError::ApplicationClosed(close) => {
                    crate::quic::close_is_retryable(close)
                }
                _ => true,
            },
            _ => false,
        }
    }
}

/// Whether the peer closed a QUIC connection with a crypto error: it refused the TLS
/// handshake (a client certificate the router requires, or one it did not accept), which
/// would repeat.
#[cfg(feature = "quic")]
fn is_crypto(close: &quinn::ConnectionClose) -> bool {
    (0x100..0x200).contains(&u64::from(close.error_code))
}

/// [`is_crypto`] for the IO error a QUIC stream's read or write gives.
fn refused_tls_over_quic(error: &io::Error) -> bool {
    #[cfg(feature = "quic")]
    if let Some(inner) = error.get_ref() {
        let lost = crate::tls::quic_connection_lost(inner);
        return matches!(lost, Some(quinn::ConnectionError::ConnectionClosed(c)) if is_crypto(c));
    }
    let _ = error;
    false
}

impl From<FrameError> for TransportError {
    /// A read or write that failed because the router closed a QUIC connection with a
    /// reason becomes that [`TransportError::Goaway`].
    fn from(err: FrameError) -> TransportError {
        match err {
            FrameError::Io(e) => {
                #[cfg(feature = "quic")]
                if let Some(g) = crate::quic::goaway_from_io(&e) {
                    return TransportError::Goaway {
                        code: g.code,
                        message: g.reason,
                    };
                }
                TransportError::Io(e)
            }
            other => TransportError::Frame(other),
        }
    }
}
