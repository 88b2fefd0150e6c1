//! What a failed connection means for trying again ([`TransportError::is_retryable`]),
//! and how a read that failed because the router closed a QUIC connection becomes the
//! router's reason. The adapters' knowledge (QUIC close codes, TLS refusals) lives here,
//! beside them, so that `error.rs` stays a list of errors and the frame module's
//! [`FrameError`] names no adapter.

use std::io;

use crate::error::TransportError;
use crate::frame::FrameError;

impl TransportError {
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
            // The stream ended inside a frame: the router's process died (or its host
            // went away) partway through a write, and its kernel sent what it had, then
            // closed. A lost connection like any other, as YoMo's clients treat every read
            // error but a refusal; a malformed frame (a bug that would repeat) is not.
            TransportError::Frame(FrameError::Truncated { .. }) => true,
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
