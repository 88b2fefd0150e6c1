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
    /// A field holds a value outside its range (an unknown role).
    #[error("invalid {field} in {frame} frame")]
    InvalidField {
        /// Frame type name.
        frame: &'static str,
        /// Field name.
        field: &'static str,
    },
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
    /// The router refused the handshake or closed the connection with a goaway.
    #[error("goaway: {}", .code.kind())]
    Goaway {
        /// The reason code.
        code: GoawayCode,
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
    /// Reconnecting gave up after the configured attempts.
    #[error("gave up after {attempts} connection attempts")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
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
            TransportError::Goaway { code } => code.kind(),
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
            TransportError::Goaway { code } => matches!(
                code,
                GoawayCode::ShuttingDown
                    | GoawayCode::SlowConsumer
                    | GoawayCode::TooManyConnections
                    | GoawayCode::Normal
            ),
            // A TLS failure surfaces as InvalidData from tokio-rustls: it would repeat.
            TransportError::Io(e) => !matches!(
                e.kind(),
                io::ErrorKind::InvalidData
                    | io::ErrorKind::InvalidInput
                    | io::ErrorKind::PermissionDenied
            ),
            TransportError::Closed | TransportError::Timeout { .. } => true,
            #[cfg(feature = "quic")]
            TransportError::QuicConnection(e) => !matches!(
                e,
                quinn::ConnectionError::TransportError(_) | quinn::ConnectionError::VersionMismatch
            ),
            _ => false,
        }
    }
}

impl From<FrameError> for TransportError {
    fn from(err: FrameError) -> TransportError {
        match err {
            FrameError::Io(e) => TransportError::Io(e),
            other => TransportError::Frame(other),
        }
    }
}
