//! [`StreamFunction`]: observes tags, computes, and may emit results under other tags.

use std::future::Future;

use bytes::Bytes;
use futures_util::StreamExt;

use super::link::{Link, Out};
use super::ClientOptions;
use crate::frame::{Data, Frame, Role};
use crate::TransportError;

/// A client that observes tags and answers some frames with a result frame.
///
/// The handler runs once per received frame, in arrival order, and may return an output
/// `(tag, payload)`. The output keeps the input's id and metadata, with one more hop; the
/// router routes it onward to the output tag's observers (never back to this function).
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
}

impl StreamFunction {
    /// A function observing `observed`.
    pub fn new(options: ClientOptions, observed: &[u32]) -> StreamFunction {
        StreamFunction {
            options,
            observed: observed.to_vec(),
        }
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
        let role = Role::StreamFunction;
        let mut link = Link::connect_with_backoff(&self.options, role, &self.observed).await?;
        tokio::pin!(stop);
        loop {
            let frame = tokio::select! {
                frame = link.reader.next() => frame,
                _ = &mut stop => {
                    return link.tx.close().await;
                }
            };
            let broken = match frame {
                Some(Ok(Frame::Data(data))) => {
                    let (id, hops, metadata) = (data.id, data.hops, data.metadata.clone());
                    match handler(data).await {
                        Some((tag, payload)) => {
                            let out = Data {
                                tag,
                                id,
                                hops: hops.saturating_add(1),
                                metadata,
                                payload,
                            };
                            link.tx.out.send(Out::Frame(out.into())).await.is_err()
                        }
                        None => false,
                    }
                }
                Some(Ok(Frame::Ping(nonce))) => {
                    let _ = link.tx.out.try_send(Out::Frame(Frame::Pong(nonce)));
                    false
                }
                Some(Ok(Frame::Goaway(g))) => {
                    tracing::debug!(code = g.code.kind(), "function got goaway");
                    false
                }
                Some(Ok(_)) => false,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "function connection failed");
                    true
                }
                None => true,
            };
            if broken {
                let _ = link.tx.close().await;
                link = Link::connect_with_backoff(&self.options, role, &self.observed).await?;
            }
        }
    }
}
