//! [`Sink`]: receives data frames on observed tags.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::link::{Hello, Link};
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame};
use crate::TransportError;

/// Frames buffered between the connection task and [`Sink::recv`]. When the application
/// stops receiving, the task stops reading, the socket fills, and the router applies its
/// queue policy to this subscriber.
const BUFFER: usize = 1024;

/// A client that receives data frames on the tags it observes: to the router, a stream
/// function that never writes (YoMo has no sink type).
///
/// A background task reads the connection and reconnects (with
/// [`ClientOptions::backoff`]) when it is lost; frames routed while it is down are not
/// delivered to it. When reconnecting gives up, or the router refuses the client,
/// [`recv`](Sink::recv) returns that error once and then `None`.
pub struct Sink {
    rx: mpsc::Receiver<Result<Data, TransportError>>,
    task: JoinHandle<()>,
    id: String,
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
        let id = hello.id.clone();
        let (tx, rx) = mpsc::channel(BUFFER);
        let task = tokio::spawn(async move {
            let mut link = link;
            loop {
                let error = match pump(&mut link, &tx).await {
                    Pumped::ReceiverGone => break,
                    Pumped::Ended(error) => error,
                };
                tracing::debug!(%error, "sink connection ended");
                let _ = link.tx.close().await;
                if !error.is_retryable() {
                    let _ = tx.send(Err(error)).await;
                    return;
                }
                link = match Link::connect_with_backoff(&options, &mut hello).await {
                    Ok(new) => new,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
            }
            let _ = link.tx.close().await;
        });
        Ok(Sink { rx, task, id })
    }

    /// This client's id (without the reconnect suffix).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The next data frame; `None` after a final error was returned.
    pub async fn recv(&mut self) -> Option<Result<Data, TransportError>> {
        self.rx.recv().await
    }

    /// Stops receiving and closes the connection.
    pub async fn close(mut self) {
        self.rx.close();
        let _ = tokio::time::timeout(super::link::LINGER * 2, &mut self.task).await;
        self.task.abort();
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Pumped {
    ReceiverGone,
    Ended(TransportError),
}

/// Forwards data frames until the connection ends or the receiver is dropped.
async fn pump(link: &mut Link, tx: &mpsc::Sender<Result<Data, TransportError>>) -> Pumped {
    // Pinned once, not re-registered with the channel's notifier per frame.
    let closed = tx.closed();
    tokio::pin!(closed);
    loop {
        let frame = tokio::select! {
            frame = super::link::next(&mut link.reader) => frame,
            _ = &mut closed => return Pumped::ReceiverGone,
        };
        match frame {
            Some(Ok(Frame::Data(data))) => {
                if tx.send(Ok(data)).await.is_err() {
                    return Pumped::ReceiverGone;
                }
            }
            Some(Ok(Frame::Goaway(g))) => {
                tracing::debug!(code = g.code.kind(), "sink got goaway");
                // Keep reading: the router flushes what it has, then closes.
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Pumped::Ended(e.into()),
            None => return Pumped::Ended(TransportError::Closed),
        }
    }
}
