//! [`StreamFunction`]: observes tags, computes, and may emit results under other tags.

use std::future::Future;

use bytes::Bytes;
use futures_util::StreamExt;

use std::sync::Arc;

use tokio::sync::Mutex;

use super::link::{Hello, Link, LINGER};
use super::window::{Refusals, Window};
use super::writer::{Durable, Outputs, Writer};
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame};
use crate::TransportError;

/// A client that observes tags and answers some frames with a result frame.
///
/// The handler runs once per received frame, in arrival order. With
/// [`run`](StreamFunction::run) it may return one output `(tag, payload)`; with
/// [`run_with_writer`](StreamFunction::run_with_writer) it gets a [`Writer`] and may write
/// any number of outputs, to any tag, optionally to a target, as YoMo's `ctx.Write` and
/// `ctx.WriteWithTarget` do. As in YoMo, every output keeps the input's metadata
/// (`yomo-tid`, `yomo-source-id`, custom keys) without `yomo-target`, and carries one more
/// hop; the router routes it to the output tag's observers (this function too, if it
/// observes the output tag — the hop limit ends such loops).
///
/// A [`durable`](StreamFunction::durable) function asks the router for stored
/// acknowledgements of its outputs, as [`DurableSource`](super::DurableSource) does for
/// its frames: it keeps every output until the router says it is stored (for a durable tag
/// of the federation, in JetStream) and writes again, in order, what was not stored when a
/// connection ended, with the same metadata (`yomo-tid`, which durable tags de-duplicate).
/// An output the router refuses (too long, past the hop limit, a loop) is not written
/// again; it is counted with its reason in [`refusals`](StreamFunction::refusals), and the
/// first of each reason is logged.
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
    refusals: Refusals,
}

impl StreamFunction {
    /// A function observing `observed`.
    pub fn new(options: ClientOptions, observed: &[u32]) -> StreamFunction {
        StreamFunction {
            options,
            observed: observed.to_vec(),
            durable: false,
            refusals: Refusals::default(),
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

    /// The record of a durable function's outputs that the router refused, with each
    /// one's reason: a handle that stays current while the function runs (take it before
    /// [`run`](StreamFunction::run)). Always empty for a function that is not durable.
    pub fn refusals(&self) -> Refusals {
        self.refusals.clone()
    }

    /// Connects and runs `handler` on every frame, reconnecting when the connection is
    /// lost: the handler's output, if any, is written with the input's metadata (as
    /// [`Writer::write`] does). Runs until reconnecting gives up or the router refuses the
    /// client. For more than one output per input, or a targeted one, see
    /// [`run_with_writer`](StreamFunction::run_with_writer).
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
        let one_output = move |data: Data, writer: Writer| {
            let output = handler(data);
            async move {
                if let Some((tag, payload)) = output.await {
                    if let Err(error) = writer.write(tag, payload).await {
                        // The run loop reconnects when it reads the end.
                        tracing::debug!(%error, "function output not written");
                    }
                }
            }
        };
        self.run_with_writer_until(one_output, stop).await
    }

    /// Connects and runs `handler` on every frame with a [`Writer`] for its outputs, as
    /// YoMo's handlers get a context: it may write any number of outputs
    /// ([`Writer::write`]) and address them to a target ([`Writer::write_with_target`]).
    /// Handlers run one at a time, in arrival order; each write waits for room in the send
    /// queue. Reconnects when the connection is lost; runs until reconnecting gives up or
    /// the router refuses the client.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use y3_transport::sdk::{ClientOptions, StreamFunction, Writer};
    /// use y3_transport::Data;
    ///
    /// # async fn demo() -> Result<(), y3_transport::TransportError> {
    /// let options = ClientOptions::new("127.0.0.1:9000".parse().unwrap()).name("splitter");
    /// StreamFunction::new(options, &[0x10])
    ///     .run_with_writer(|data: Data, out: Writer| async move {
    ///         // One output per line, and the whole input to the function wanting "audit".
    ///         for line in data.payload.split(|b| *b == b'\n') {
    ///             if out.write(0x11, line.to_vec()).await.is_err() {
    ///                 return; // the connection is gone
    ///             }
    ///         }
    ///         let _ = out.write_with_target(0x12, data.payload, "audit").await;
    ///     })
    ///     .await
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`run`](StreamFunction::run).
    pub async fn run_with_writer<F, Fut>(self, handler: F) -> Result<(), TransportError>
    where
        F: FnMut(Data, Writer) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.run_with_writer_until(handler, std::future::pending())
            .await
    }

    /// As [`run_with_writer`](StreamFunction::run_with_writer), until `stop` completes;
    /// then the outputs written so far are flushed (a durable function waits, for as long
    /// as a closing client lingers, for them to be stored) and the connection is closed.
    /// Writes after that are errors.
    ///
    /// # Errors
    /// As [`run`](StreamFunction::run).
    pub async fn run_with_writer_until<F, Fut>(
        self,
        mut handler: F,
        stop: impl Future<Output = ()>,
    ) -> Result<(), TransportError>
    where
        F: FnMut(Data, Writer) -> Fut,
        Fut: Future<Output = ()>,
    {
        let durable = self.durable.then(|| {
            Arc::new(Mutex::new(Durable {
                window: Window::recording_to(self.refusals.clone()),
                tx: None,
                max_unwritten: self.options.send_queue.max(1),
            }))
        });
        let result = self.serve(&mut handler, stop, durable.as_ref()).await;
        if let Some(durable) = durable {
            // Writers that outlive the function are refused from now on.
            durable.lock().await.tx = None;
        }
        result
    }

    /// The connection loop of [`run_with_writer_until`](StreamFunction::run_with_writer_until).
    async fn serve<F, Fut>(
        &self,
        handler: &mut F,
        stop: impl Future<Output = ()>,
        durable: Option<&Arc<Mutex<Durable>>>,
    ) -> Result<(), TransportError>
    where
        F: FnMut(Data, Writer) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut hello = Hello::new(ClientType::StreamFunction, &self.observed);
        hello.wants_acks = durable.is_some();
        let mut link = Link::connect_with_backoff(&self.options, &mut hello).await?;
        if let Some(durable) = durable {
            durable.lock().await.tx = Some(link.tx.out.clone());
        }
        tokio::pin!(stop);
        loop {
            // Outputs nobody took (`no_subscriber`) wait in the window until due.
            let due = match durable {
                Some(durable) => durable.lock().await.window.next_due(),
                None => None,
            };
            let frame = tokio::select! {
                frame = super::link::next(&mut link.reader) => frame,
                _ = sleep_until_due(due) => {
                    if let Some(durable) = durable {
                        let mut durable = durable.lock().await;
                        if let Some(tx) = durable.tx.clone() {
                            durable.write_pending(&tx).await;
                        }
                    }
                    continue;
                }
                _ = &mut stop => {
                    if let Some(durable) = durable {
                        // Writes from now on are refused, not kept for a connection to come.
                        durable.lock().await.tx = None;
                        linger_until_stored(&mut link, durable).await;
                    }
                    return link.tx.close().await;
                }
            };
            let ended: Option<TransportError> = match frame {
                Some(Ok(Frame::Data(data))) => {
                    let to = match durable {
                        Some(durable) => Outputs::Durable(durable.clone()),
                        None => Outputs::Plain(link.tx.out.clone()),
                    };
                    let writer = Writer::new(&data, to);
                    handler(data, writer).await;
                    None
                }
                Some(Ok(Frame::Stored(s))) => {
                    if let Some(durable) = durable {
                        durable.lock().await.window.stored(&s);
                    }
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
                tracing::debug!(%error, "function connection ended");
                let _ = link.tx.close().await;
                if !error.is_retryable() {
                    return Err(error);
                }
                link = Link::connect_with_backoff(&self.options, &mut hello).await?;
                if let Some(durable) = durable {
                    let mut durable = durable.lock().await;
                    durable.window.reconnected();
                    let tx = link.tx.out.clone();
                    durable.tx = Some(tx.clone());
                    // Should this connection end too, the next read notices; the window
                    // keeps the outputs.
                    durable.write_pending(&tx).await;
                    tracing::debug!(resent = durable.window.resent(), "function reconnected");
                }
            }
        }
    }
}

/// Sleeps until `due`, forever when `None`.
async fn sleep_until_due(due: Option<std::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

/// Reads the router's stored counts until every output is stored, the connection ends or
/// [`LINGER`] passed; inputs that arrive meanwhile are not handled.
async fn linger_until_stored(link: &mut Link, durable: &Mutex<Durable>) {
    let deadline = tokio::time::Instant::now() + LINGER;
    if link.tx.flush().await.is_err() {
        return;
    }
    while !durable.lock().await.window.is_empty() {
        match tokio::time::timeout_at(deadline, link.reader.next()).await {
            Ok(Some(Ok(Frame::Stored(s)))) => durable.lock().await.window.stored(&s),
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    let unstored = durable.lock().await.window.len();
    if unstored > 0 {
        tracing::warn!(unstored, "function stopped with outputs not stored");
    }
}
