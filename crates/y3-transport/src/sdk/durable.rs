//! [`DurableSource`]: a source that keeps what it wrote until the router has stored it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::link::{Hello, Link, LinkTx};
use super::stamp::Stamp;
use super::window::{Refusals, Refused, Window};
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame, GoawayCode};
use crate::TransportError;

/// Frames kept unacknowledged at most; [`DurableSource::send`] waits past it.
const DEFAULT_WINDOW: usize = 16 * 1024;

/// What the connection's reader shares with the source.
#[derive(Debug, Default)]
struct State {
    /// What is kept until stored.
    window: Window,
    /// The connection the window's counts belong to.
    connection: u64,
    /// The connection ended; the next send or wait reconnects.
    broken: bool,
    /// The router refused the client for good.
    refused: Option<TransportError>,
}

struct Active {
    link: LinkTx,
    reader: JoinHandle<()>,
}

/// What [`DurableSource::finish`] found when it closed the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// Frames not acknowledged when the wait ended (0: every frame was handled).
    pub unstored: usize,
    /// Frames the router refused over the source's life (delivered to no one).
    pub refused: u64,
    /// The first [`MAX_REFUSALS_KEPT`](super::MAX_REFUSALS_KEPT) of them.
    pub refusals: Vec<Refused>,
}

impl Closed {
    /// Whether every frame sent was stored: none left unacknowledged, none refused.
    pub fn all_stored(&self) -> bool {
        self.unstored == 0 && self.refused == 0
    }
}

/// A source whose frames survive a lost connection and a restarted router: it asks the
/// router for stored acknowledgements (handshake field `32`, `spec/frames.md`), keeps
/// every frame until the router says it is stored (routed, and for a durable tag of the
/// federation, in JetStream), and sends again, in order, whatever was not acknowledged
/// when a connection ended. Delivery is at least once; a frame sent twice carries the same
/// `yomo-tid`, which the federation's durable tags de-duplicate.
///
/// It has no task that reconnects on its own: after a lost connection, what it keeps is
/// sent again by the next [`send`](DurableSource::send),
/// [`wait_stored`](DurableSource::wait_stored) or [`close`](DurableSource::close). A source
/// that stops sending calls `wait_stored` (or `close`) to have it delivered; until then it
/// waits in the source.
///
/// A frame the router refuses (over its `limits.max_frame_len`, past its hop limit, a
/// loop: `spec/frames.md`) is handled but delivered to no one: it is not sent again, it is
/// counted in [`refused`](DurableSource::refused) with its reason
/// ([`refusals`](DurableSource::refusals)), the first of each reason is logged, and
/// [`close`](DurableSource::close) does not report success.
///
/// A frame nobody took (no subscriber to its tag yet, answered `no_subscriber`) is not
/// stored: the source keeps it and sends it again after a backoff (100 ms, doubled per
/// retry of the frame, at most 2 s: [`RETRY_FIRST`](super::RETRY_FIRST),
/// [`RETRY_MAX`](super::RETRY_MAX)) until a subscriber takes it, counting each retry in
/// [`retried`](DurableSource::retried) and logging the first. It stays in the window
/// meanwhile, so a tag nobody subscribes to eventually fills it and
/// [`send`](DurableSource::send) waits; [`close`](DurableSource::close) reports such
/// frames as not stored when its wait ends.
///
/// Routers that do not know the extension (YoMo's zipper) never acknowledge: use
/// [`Source`](super::Source) with them.
pub struct DurableSource {
    options: ClientOptions,
    hello: Hello,
    stamp: Stamp,
    state: Arc<Mutex<State>>,
    moved: Arc<Notify>,
    active: Option<Active>,
    max_unacked: usize,
}

impl DurableSource {
    /// Connects (with backoff) and handshakes as a source that wants acknowledgements.
    ///
    /// # Errors
    /// As [`Source::connect`](super::Source::connect).
    pub async fn connect(options: ClientOptions) -> Result<DurableSource, TransportError> {
        let mut hello = Hello::new(ClientType::Source, &[]);
        hello.wants_acks = true;
        let mut source = DurableSource {
            options,
            stamp: Stamp::new(&hello.id),
            hello,
            state: Arc::default(),
            moved: Arc::default(),
            active: None,
            max_unacked: DEFAULT_WINDOW,
        };
        source.ensure().await?;
        Ok(source)
    }

    /// This client's id (the `yomo-source-id` of its frames).
    pub fn id(&self) -> &str {
        &self.hello.id
    }

    /// Frames sent again on a new connection so far.
    pub fn resent(&self) -> u64 {
        lock(&self.state).window.resent()
    }

    /// Frames the router refused so far (delivered to no one, not sent again).
    pub fn refused(&self) -> u64 {
        lock(&self.state).window.refusals.count()
    }

    /// Times the router answered a frame `no_subscriber` (nobody took it) so far: each
    /// time the frame was kept and sent again after a backoff.
    pub fn retried(&self) -> u64 {
        lock(&self.state).window.refusals.retried()
    }

    /// The record of refused frames, with each one's reason: a handle that stays current.
    pub fn refusals(&self) -> Refusals {
        lock(&self.state).window.refusals.clone()
    }

    /// Frames written and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        lock(&self.state).window.len()
    }

    /// A connection whose reader is alive, every unacknowledged frame written on it.
    async fn ensure(&mut self) -> Result<(), TransportError> {
        let broken = lock(&self.state).broken;
        if broken {
            if let Some(active) = self.active.take() {
                active.reader.abort();
                let _ = active.link.close().await;
            }
        }
        if let Some(e) = lock(&self.state).refused.take() {
            return Err(e);
        }
        if self.active.is_none() {
            let Link { mut reader, tx } =
                Link::connect_with_backoff(&self.options, &mut self.hello).await?;
            let connection = {
                let mut s = lock(&self.state);
                s.connection += 1;
                s.window.reconnected();
                s.broken = false;
                s.connection
            };
            let (state, moved) = (self.state.clone(), self.moved.clone());
            let reader = tokio::spawn(async move {
                loop {
                    let frame = reader.next().await;
                    let mut w = lock(&state);
                    if w.connection != connection {
                        return;
                    }
                    match frame {
                        Some(Ok(Frame::Stored(s))) => w.window.stored(&s),
                        Some(Ok(Frame::Goaway(g) | Frame::Rejected(g))) => {
                            if !g.code.is_retryable() && g.code != GoawayCode::Unspecified {
                                w.refused = Some(TransportError::Goaway {
                                    code: g.code,
                                    message: g.reason,
                                });
                            }
                            // Keep reading: what the router stored comes before its close.
                            continue;
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(_)) | None => {
                            w.broken = true;
                            drop(w);
                            moved.notify_waiters();
                            return;
                        }
                    }
                    drop(w);
                    moved.notify_waiters();
                }
            });
            self.active = Some(Active { link: tx, reader });
        }
        self.write_pending().await
    }

    /// Writes the unacknowledged frames this connection has not carried yet.
    async fn write_pending(&mut self) -> Result<(), TransportError> {
        let Some(active) = &self.active else {
            return Ok(());
        };
        loop {
            let Some(next) = lock(&self.state).window.next_unwritten() else {
                return Ok(());
            };
            if active.link.out.send(&Frame::Data(next)).await.is_err() {
                lock(&self.state).broken = true;
                return Ok(());
            }
        }
    }

    /// Queues `payload` under `tag`, with this source's id and a fresh transaction id; it
    /// is kept until stored. Waits while [`unacked`](DurableSource::unacked) is at its
    /// bound (16,384 frames).
    ///
    /// # Errors
    /// A refusal by the router ([`TransportError::Goaway`]), or reconnecting gave up;
    /// [`FrameError::TooLong`](crate::FrameError::TooLong) for a frame over
    /// [`ClientOptions::max_frame_len`](super::ClientOptions::max_frame_len).
    pub async fn send(
        &mut self,
        tag: u32,
        payload: impl Into<Bytes>,
    ) -> Result<(), TransportError> {
        let metadata = self.stamp.next();
        self.send_data(Data::new(tag, payload).with_metadata(metadata))
            .await
    }

    /// Queues a data frame as it is; it should carry a `yomo-tid` for de-duplication.
    ///
    /// # Errors
    /// As [`DurableSource::send`].
    pub async fn send_data(&mut self, data: Data) -> Result<(), TransportError> {
        // Over the limit the writer could not encode it, and it would be resent forever.
        data.check_len(self.options.max_frame_len)
            .map_err(TransportError::Frame)?;
        loop {
            let moved = self.moved.clone();
            let notified = moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (full, broken) = {
                let s = lock(&self.state);
                (s.window.len() >= self.max_unacked, s.broken)
            };
            if broken || self.active.is_none() {
                self.ensure().await?;
                continue;
            }
            if !full {
                break;
            }
            // Frames nobody took wait in the window: write those that are due.
            self.write_pending().await?;
            self.flush_link().await;
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
        }
        lock(&self.state).window.keep(data);
        self.write_pending().await
    }

    async fn flush_link(&mut self) {
        if let Some(active) = &self.active {
            if active.link.flush().await.is_err() {
                lock(&self.state).broken = true;
            }
        }
    }

    /// Waits until the router has handled every frame sent so far, reconnecting and sending
    /// again as needed, for at most `timeout`. Returns whether nothing is left
    /// unacknowledged; frames the router refused are not waited for: see
    /// [`refused`](DurableSource::refused).
    ///
    /// # Errors
    /// As [`DurableSource::send`].
    pub async fn wait_stored(&mut self, timeout: Duration) -> Result<bool, TransportError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let moved = self.moved.clone();
            let notified = moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (empty, broken) = {
                let s = lock(&self.state);
                (s.window.is_empty(), s.broken)
            };
            if empty {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            if broken || self.active.is_none() {
                self.ensure().await?;
                continue;
            }
            self.write_pending().await?;
            self.flush_link().await;
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_millis(100)),
                notified,
            )
            .await;
        }
    }

    /// Waits (at most `timeout`) until everything is handled, then closes. Returns whether
    /// every frame sent was stored: `false` when some were left unacknowledged **or the
    /// router refused any** ([`finish`](DurableSource::finish) tells which).
    ///
    /// # Errors
    /// As [`DurableSource::send`].
    pub async fn close(self, timeout: Duration) -> Result<bool, TransportError> {
        Ok(self.finish(timeout).await?.all_stored())
    }

    /// As [`close`](DurableSource::close), returning what was left unacknowledged and
    /// what the router refused.
    ///
    /// # Errors
    /// As [`DurableSource::send`].
    pub async fn finish(mut self, timeout: Duration) -> Result<Closed, TransportError> {
        self.wait_stored(timeout).await?;
        if let Some(active) = self.active.take() {
            let _ = active.link.close().await;
            active.reader.abort();
        }
        let s = lock(&self.state);
        Ok(Closed {
            unstored: s.window.len(),
            refused: s.window.refusals.count(),
            refusals: s.window.refusals.list(),
        })
    }
}

fn lock(w: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}
