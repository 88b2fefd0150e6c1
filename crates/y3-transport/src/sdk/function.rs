//! [`StreamFunction`]: observes tags, computes, and may emit results under other tags.

use std::future::Future;

use bytes::Bytes;
use futures_util::StreamExt;

use super::link::{Hello, Link, LinkTx, Out, LINGER};
use super::window::Window;
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame};
use crate::metadata;
use crate::TransportError;

/// A client that observes tags and answers some frames with a result frame.
///
/// The handler runs once per received frame, in arrival order, and may return an output
/// `(tag, payload)`. As in YoMo, the output keeps the input's metadata (`yomo-tid`,
/// `yomo-source-id`, custom keys) without `yomo-target`, and carries one more hop; the
/// router routes it to the output tag's observers (this function too, if it observes the
/// output tag — the hop limit ends such loops).
///
/// A [`durable`](StreamFunction::durable) function asks the router for stored
/// acknowledgements of its outputs, as [`DurableSource`](super::DurableSource) does for
/// its frames: it keeps every output until the router says it is stored (for a durable tag
/// of the federation, in JetStream) and writes again, in order, what was not stored when a
/// connection ended, with the same metadata (`yomo-tid`, which durable tags de-duplicate).
///
/// # Examples
///
/// ```no_run
/// use y3_transport::sdk::{ClientOptions, StreamFunction};
///
/// # async fn demo() -> Result<(), y3_transport::TransportError> {
/// let options = ClientOptions::new("127.0.0.1:9000".parse().unwrap()).name("doubler");
/// StreamFunction::new(options, &[0x10])
///     .run(|data| async move {
///         let doubled: Vec<u8> = data.payload.iter().map(|b| b.wrapping_mul(2)).collect();
///         Some((0x11, doubled.into()))
///     })
///     .await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct StreamFunction {
    options: ClientOptions,
    observed: Vec<u32>,
    durable: bool,
}

impl StreamFunction {
    /// A function observing `observed`.
    pub fn new(options: ClientOptions, observed: &[u32]) -> StreamFunction {
        StreamFunction {
            options,
            observed: observed.to_vec(),
            durable: false,
        }
    }

    /// Keeps every output until the router has stored it, and writes again after a
    /// reconnect what was not stored (handshake field `32`, `spec/frames.md`). Only for
    /// routers that know the extension (`y3 serve`): YoMo's zipper never acknowledges, and
    /// the outputs would pile up. How many outputs it keeps is bounded by what the router
    /// holds unstored: a router reads an acknowledging client only as fast as it stores.
    pub fn durable(mut self) -> Self {
        self.durable = true;
        self
    }

    /// Connects and runs `handler` on every frame, reconnecting when the connection is
    /// lost. Runs until reconnecting gives up or the router refuses the client.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] for a refused handshake, [`TransportError::GaveUp`].
    pub async fn run<F, Fut>(self, handler: F) -> Result<(), TransportError>
    where
        F: FnMut(Data) -> Fut,
        Fut: Future<Output = Option<(u32, Bytes)>>,
    {
        self.run_until(handler, std::future::pending()).await
    }

    /// As [`run`](StreamFunction::run), until `stop` completes; then the outputs produced
    /// so far are flushed and the connection is closed.
    ///
    /// # Errors
    /// As [`run`](StreamFunction::run).
    pub async fn run_until<F, Fut>(
        self,
        mut handler: F,
        stop: impl Future<Output = ()>,
    ) -> Result<(), TransportError>
    where
        F: FnMut(Data) -> Fut,
        Fut: Future<Output = Option<(u32, Bytes)>>,
    {
        let mut hello = Hello::new(ClientType::StreamFunction, &self.observed);
        hello.wants_acks = self.durable;
        // A durable function's outputs, kept until stored (a plain one's stay empty).
        let mut window = Window::default();
        let mut link = Link::connect_with_backoff(&self.options, &mut hello).await?;
        tokio::pin!(stop);
        loop {
            let frame = tokio::select! {
                frame = super::link::next(&mut link.reader) => frame,
                _ = &mut stop => {
                    if self.durable {
                        linger_until_stored(&mut link, &mut window).await;
                    }
                    return link.tx.close().await;
                }
            };
            let ended: Option<TransportError> = match frame {
                Some(Ok(Frame::Data(data))) => {
                    let (hops, metadata) = (data.hops, data.metadata.clone());
                    match handler(data).await {
                        Some((tag, payload)) => {
                            // A metadata map the router let through is well formed; should
                            // it not be, the output goes without it rather than not at all.
                            let metadata = metadata.without(metadata::TARGET).unwrap_or_default();
                            let mut out = Data::new(tag, payload).with_metadata(metadata);
                            out.hops = hops.saturating_add(1);
                            if self.durable {
                                window.keep(out);
                                write_pending(&link.tx, &mut window).await.err()
                            } else {
                                match link.tx.out.send(Out::Frame(out.into())).await {
                                    Ok(()) => None,
                                    Err(_) => Some(TransportError::Closed),
                                }
                            }
                        }
                        None => None,
                    }
                }
                Some(Ok(Frame::Stored(n))) => {
                    window.stored(n);
                    None
                }
                Some(Ok(Frame::Goaway(g))) => {
                    // Keep reading: the router flushes what it has, then closes.
                    tracing::debug!(code = g.code.kind(), "function got goaway");
                    None
                }
                Some(Ok(_)) => None,
                Some(Err(e)) => Some(e.into()),
                None => Some(TransportError::Closed),
            };
            if let Some(error) = ended {
                tracing::debug!(%error, unstored = window.len(), "function connection ended");
                let _ = link.tx.close().await;
                if !error.is_retryable() {
                    return Err(error);
                }
                link = Link::connect_with_backoff(&self.options, &mut hello).await?;
                window.reconnected();
                if write_pending(&link.tx, &mut window).await.is_err() {
                    // Noticed by the next read; the window keeps the frames.
                    tracing::debug!("function connection ended while resending");
                }
                tracing::debug!(resent = window.resent(), "function reconnected");
            }
        }
    }
}

/// Writes the outputs this connection has not carried yet.
async fn write_pending(link: &LinkTx, window: &mut Window) -> Result<(), TransportError> {
    while let Some(data) = window.next_unwritten() {
        link.out
            .send(Out::Frame(data.into()))
            .await
            .map_err(|_| TransportError::Closed)?;
    }
    Ok(())
}

/// Reads the router's stored counts until every output is stored, the connection ends or
/// [`LINGER`] passed; inputs that arrive meanwhile are not handled.
async fn linger_until_stored(link: &mut Link, window: &mut Window) {
    let deadline = tokio::time::Instant::now() + LINGER;
    if link.tx.flush().await.is_err() {
        return;
    }
    while !window.is_empty() {
        match tokio::time::timeout_at(deadline, link.reader.next()).await {
            Ok(Some(Ok(Frame::Stored(n)))) => window.stored(n),
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    if !window.is_empty() {
        tracing::warn!(
            unstored = window.len(),
            "function stopped with outputs not stored"
        );
    }
}
