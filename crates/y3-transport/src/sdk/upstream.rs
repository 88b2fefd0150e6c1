//! [`Upstream`]: the client side of a mesh link, as one zipper dials another.

use super::link::{handshake, Hello};
use super::ClientOptions;
use crate::frame::ClientType;
use crate::{Connection, TransportError};

/// A zipper's link to a downstream zipper of its mesh: a client of type
/// [`ClientType::UpstreamZipper`] (`0x5e`), as YoMo's mesh dials it (`spec/frames.md`,
/// "Routing"). The downstream routes what arrives on it to its local stream functions and
/// never forwards it again.
///
/// Unlike [`Source`](super::Source), it hands over the raw [`Connection`] once the
/// downstream acknowledged the handshake: the caller writes data frames as they are (their
/// metadata untouched, batched as it likes), reads the connection only to notice its end
/// (a goaway, a close), and decides itself when and how often to reconnect. The handshake
/// carries [`ClientOptions::name`] (the dialing zipper's own name) and
/// [`ClientOptions::credential`]; its id keeps one YoMo-style base across reconnections,
/// with the connection count as its `-N` suffix.
///
/// # Examples
///
/// ```no_run
/// use futures_util::SinkExt;
/// use y3_transport::frame::{Data, Frame};
/// use y3_transport::sdk::{ClientOptions, Transport, Upstream};
/// use y3_transport::tls::Trust;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let options = ClientOptions::new("127.0.0.1:9000".parse()?)
///     .transport(Transport::Quic)
///     .trust(Trust::Insecure)
///     .name("zipper-a");
/// let mut upstream = Upstream::new();
/// let mut conn = upstream.connect(&options).await?;
/// conn.writer.send(Frame::Data(Data::new(0x33, &b"hello"[..]))).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Upstream {
    hello: Hello,
}

impl Default for Upstream {
    fn default() -> Self {
        Upstream::new()
    }
}

impl Upstream {
    /// A link with a fresh id; nothing is dialed yet.
    pub fn new() -> Upstream {
        Upstream {
            hello: Hello::new(ClientType::UpstreamZipper, &[]),
        }
    }

    /// The id, without its `-N` connection suffix.
    pub fn id(&self) -> &str {
        &self.hello.id
    }

    /// Dials `options.addr` once (no retry: the caller owns the reconnection policy) and
    /// handshakes as an upstream zipper.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] when the downstream refuses the handshake (e.g.
    /// `unauthorized`), [`TransportError::Timeout`] when it does not answer within
    /// [`ClientOptions::handshake_timeout`], and the connect errors.
    pub async fn connect(&mut self, options: &ClientOptions) -> Result<Connection, TransportError> {
        handshake(options, self.hello.next(options)).await
    }
}
