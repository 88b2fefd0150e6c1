//! [`Sink`]: receives data frames on observed tags.

use super::link::{Hello, Link};
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame};
use crate::TransportError;

/// A client that receives data frames on the tags it observes: to the router, a stream
/// function that never writes (YoMo has no sink type).
///
/// [`recv`](Sink::recv) reads the connection itself, on the caller's task: a frame is
/// decoded from the read buffer (its payload a slice of it, not a copy) and handed over
/// with no task or channel in between. While the application is not receiving, nothing is
/// read: the socket fills, and the router applies its queue policy to this subscriber.
/// A lost connection is re-established (with [`ClientOptions::backoff`]) by the next
/// `recv`; frames routed while it is down are not delivered to it. When reconnecting gives
/// up, or the router refuses the client, `recv` returns that error once and then `None`.
///
/// `recv` is cancel safe (it may be a `tokio::select!` branch): a frame is either returned
/// or left for the next call; a reconnection cut short starts over.
pub struct Sink {
    options: ClientOptions,
    hello: Hello,
    /// The connection; `None` while it is to be re-established.
    link: Option<Link>,
    /// A final error was returned: `recv` gives `None` from now on.
    ended: bool,
}

impl Sink {
    /// Connects (with backoff) and handshakes as a sink observing `observed`.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] when the router refuses the handshake,
    /// [`TransportError::GaveUp`] when it cannot be reached.
    pub async fn connect(options: ClientOptions, observed: &[u32]) -> Result<Sink, TransportError> {
        let mut hello = Hello::new(ClientType::StreamFunction, observed);
        let link = Link::connect_with_backoff(&options, &mut hello).await?;
        Ok(Sink {
            options,
            hello,
            link: Some(link),
            ended: false,
        })
    }

    /// This client's id (without the reconnect suffix).
    pub fn id(&self) -> &str {
        &self.hello.id
    }

    /// The next data frame; `None` after a final error was returned.
    pub async fn recv(&mut self) -> Option<Result<Data, TransportError>> {
        loop {
            if self.ended {
                return None;
            }
            let Some(link) = &mut self.link else {
                // Boxed: inline, the connection's large future would make every `recv`
                // future as large, copied whole at each call.
                let connect = Box::pin(Link::connect_with_backoff(&self.options, &mut self.hello));
                match connect.await {
                    Ok(link) => self.link = Some(link),
                    Err(e) => {
                        self.ended = true;
                        return Some(Err(e));
                    }
                }
                continue;
            };
            let error = match super::link::next(&mut link.reader).await {
                Some(Ok(Frame::Data(data))) => return Some(Ok(data)),
                Some(Ok(Frame::Goaway(g))) => {
                    // Keep reading: the router flushes what it has, then closes.
                    tracing::debug!(code = g.code.kind(), "sink got goaway");
                    continue;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => TransportError::from(e),
                None => TransportError::Closed,
            };
            tracing::debug!(%error, "sink connection ended");
            // Dropped, not closed: the peer is gone, there is nothing to linger for.
            self.link = None;
            if !error.is_retryable() {
                self.ended = true;
                return Some(Err(error));
            }
        }
    }

    /// Stops receiving and closes the connection.
    pub async fn close(mut self) {
        if let Some(link) = self.link.take() {
            let _ = tokio::time::timeout(super::link::LINGER * 2, link.tx.close()).await;
        }
    }
}
