//! [`DurableSource`]: a source that keeps what it wrote until the router has stored it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::link::{Hello, Link, LinkTx};
use super::outbox::Outbox;
use super::stamp::Stamp;
use super::window::{Refusals, Refused, Window};
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame, GoawayCode};
use crate::TransportError;

/// Frames kept unacknowledged at most; [`DurableSource::send`] waits past it.
const DEFAULT_WINDOW: usize = 16 * 1024;

/// What the connection's reader and the source's keeper share with the source.
#[derive(Default)]
struct State {
    /// What is kept until stored.
    window: Window,
    /// The connection the window's counts belong to.
    connection: u64,
    /// The connection ended; the keeper reconnects.
    broken: bool,
    /// The router refused the client for good.
    refused: Option<TransportError>,
    /// Reconnecting gave up; the source's next call returns it.
    failed: Option<TransportError>,
    /// The last connection whose reader saw it end.
    ended: u64,
    /// The source asks for a connection (it has something to write).
    wanted: bool,
    /// A connection the keeper opened (the window's frames written on it), not yet taken
    /// by the source.
    handover: Option<Active>,
    /// The current connection's outbox, for the keeper's retries.
    out: Option<(u64, Outbox)>,
}

struct Active {
    link: LinkTx,
    reader: JoinHandle<()>,
    /// Its number in [`State::connection`].
    connection: u64,
}

impl Active {
    async fn close(self) {
        self.reader.abort();
        let _ = self.link.close().await;
    }
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
/// It sends again by itself: a task it owns (its keeper, stopped by
/// [`close`](DurableSource::close), [`finish`](DurableSource::finish) or drop) reconnects
/// with the options' [`Backoff`](super::Backoff) when a connection ends with frames not yet
/// stored, writes them again in order on the new connection, and writes the frames nobody
/// took when their retry is due, so a source that sends rarely (or has stopped) needs no
/// further call for what it sent to be delivered. Its calls wait for the keeper's new
/// connection meanwhile; when reconnecting gives up, the next call returns the error.
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
    id: String,
    stamp: Stamp,
    state: Arc<Mutex<State>>,
    moved: Arc<Notify>,
    /// Wakes the keeper (a permit is kept when it is busy).
    wake: Arc<Notify>,
    busy: Arc<AtomicBool>,
    active: Option<Active>,
    keeper: Option<JoinHandle<()>>,
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
        let shared = Shared::default();
        let link = Link::connect_with_backoff(&options, &mut hello).await?;
        let active = shared.start(link);
        let id = hello.id.clone();
        let keeper = tokio::spawn(shared.clone().keep(options.clone(), hello));
        Ok(DurableSource {
            options,
            stamp: Stamp::new(&id),
            id,
            state: shared.state,
            moved: shared.moved,
            wake: shared.wake,
            busy: shared.busy,
            active: Some(active),
            keeper: Some(keeper),
            max_unacked: DEFAULT_WINDOW,
        })
    }

    /// This client's id (the `yomo-source-id` of its frames).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Frames sent again on a new connection so far.
    pub fn resent(&self) -> u64 {
        lock(&self.state).window.resent()
    }

    /// Frames the router refused so far (delivered to no one, not sent again).
    pub fn refused(&self) -> u64 {
        lock(&self.state).window.refusals.count()
    }

    /// Times the router answered a frame `no_subscriber` (nobody took it) or `not_stored`
    /// (JetStream did not store it) so far: each time the frame was kept and sent again
    /// after a backoff.
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

    /// Whether the source's connection is not the current one (ended, or replaced by one
    /// the keeper opened). Called under the state's lock.
    fn stale(&self, s: &State) -> bool {
        s.broken || s.handover.is_some() || self.active.is_none()
    }

    /// A connection whose reader is alive, every unacknowledged frame written on it: the
    /// one the keeper opened, waited for when the current one ended.
    async fn ensure(&mut self) -> Result<(), TransportError> {
        loop {
            let moved = self.moved.clone();
            let notified = moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let fresh = {
                let mut s = lock(&self.state);
                if let Some(e) = s.refused.take() {
                    return Err(e);
                }
                if let Some(e) = s.failed.take() {
                    return Err(e);
                }
                let fresh = s.handover.take();
                if fresh.is_none() && !s.broken && self.active.is_some() {
                    break;
                }
                s.wanted = fresh.is_none();
                fresh
            };
            match fresh {
                Some(fresh) => {
                    if let Some(old) = self.active.replace(fresh) {
                        old.close().await;
                    }
                }
                None => {
                    self.wake.notify_one();
                    notified.await;
                }
            }
        }
        self.write_pending().await
    }

    /// Writes the unacknowledged frames this connection has not carried yet.
    async fn write_pending(&mut self) -> Result<(), TransportError> {
        let Some(active) = &self.active else {
            return Ok(());
        };
        loop {
            let next = {
                let mut s = lock(&self.state);
                // A frame taken for a connection the keeper replaced would be counted on
                // the new one.
                if s.connection != active.connection {
                    return Ok(());
                }
                s.window.next_unwritten()
            };
            let Some(next) = next else {
                return Ok(());
            };
            if active.link.out.send(&Frame::Data(next)).await.is_err() {
                lock(&self.state).broken = true;
                self.wake.notify_one();
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
        let _busy = Busy::enter(&self.busy);
        loop {
            let moved = self.moved.clone();
            let notified = moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (full, stale) = {
                let s = lock(&self.state);
                (s.window.len() >= self.max_unacked, self.stale(&s))
            };
            if stale {
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
                self.wake.notify_one();
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
        let _busy = Busy::enter(&self.busy);
        loop {
            let moved = self.moved.clone();
            let notified = moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (empty, stale) = {
                let s = lock(&self.state);
                (s.window.is_empty(), self.stale(&s))
            };
            if empty {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            if stale {
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
        if let Some(keeper) = self.keeper.take() {
            keeper.abort();
        }
        let handover = lock(&self.state).handover.take();
        for active in [self.active.take(), handover].into_iter().flatten() {
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

impl Drop for DurableSource {
    /// Stops the keeper; the connections close (their writers write what is queued).
    fn drop(&mut self) {
        if let Some(keeper) = self.keeper.take() {
            keeper.abort();
        }
        let handover = lock(&self.state).handover.take();
        for active in [self.active.take(), handover].into_iter().flatten() {
            active.reader.abort();
        }
    }
}

/// What the source, its connections' readers and its keeper hold in common.
#[derive(Clone, Default)]
struct Shared {
    state: Arc<Mutex<State>>,
    /// Wakes whoever waits for the window or the connection to move.
    moved: Arc<Notify>,
    /// Wakes the keeper.
    wake: Arc<Notify>,
    /// The source is in a call that writes (the keeper's retries wait).
    busy: Arc<AtomicBool>,
}

/// Marks the source as writing until dropped.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn enter(flag: &Arc<AtomicBool>) -> Busy {
        flag.store(true, Ordering::SeqCst);
        Busy(flag.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Shared {
    /// Makes `link` the current connection (every kept frame to be written on it again)
    /// and starts its reader, which applies the router's acknowledgements.
    fn start(&self, link: Link) -> Active {
        let Link { mut reader, tx } = link;
        let connection = {
            let mut s = lock(&self.state);
            s.connection += 1;
            s.window.reconnected();
            s.out = Some((s.connection, tx.out.clone()));
            s.connection
        };
        let shared = self.clone();
        let reader = tokio::spawn(async move {
            loop {
                let frame = reader.next().await;
                let mut w = lock(&shared.state);
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
                        w.ended = connection;
                        drop(w);
                        shared.moved.notify_waiters();
                        shared.wake.notify_one();
                        return;
                    }
                }
                drop(w);
                shared.moved.notify_waiters();
                // Frames nobody took are due later: the keeper rereads when.
                shared.wake.notify_one();
            }
        });
        Active {
            link: tx,
            reader,
            connection,
        }
    }

    /// The source's keeper: when the connection ends with frames kept (or the source asks
    /// for one), it reconnects with the source's backoff and writes every kept frame again,
    /// in order, before handing the connection to the source; while connected, it writes
    /// the frames nobody took when their retry is due. So a source that makes no call
    /// after a lost connection still has its frames delivered.
    async fn keep(self, options: ClientOptions, mut hello: Hello) {
        /// How long the keeper sleeps at most between looks (it is woken when needed).
        const LOOK: Duration = Duration::from_millis(500);
        loop {
            let wake = self.wake.notified();
            let todo = {
                let s = lock(&self.state);
                if s.refused.is_some() || s.failed.is_some() {
                    Todo::Wait(LOOK)
                } else if s.broken && (s.wanted || !s.window.is_empty()) {
                    Todo::Reconnect
                } else if s.broken {
                    Todo::Wait(LOOK)
                } else {
                    let now = std::time::Instant::now();
                    match (s.window.next_due(), &s.out) {
                        // The source writes them itself meanwhile.
                        (Some(_), _) if self.busy.load(Ordering::SeqCst) => Todo::Wait(LOOK / 10),
                        (Some(due), Some((c, out))) if due <= now => Todo::Retry(*c, out.clone()),
                        (Some(due), _) => Todo::Wait((due - now).min(LOOK)),
                        (None, _) => Todo::Wait(LOOK),
                    }
                }
            };
            match todo {
                Todo::Wait(d) => {
                    let _ = tokio::time::timeout(d, wake).await;
                }
                Todo::Retry(connection, out) => self.retry(connection, &out, true).await,
                Todo::Reconnect => {
                    let stale = lock(&self.state).handover.take();
                    if let Some(stale) = stale {
                        stale.close().await;
                    }
                    match Link::connect_with_backoff(&options, &mut hello).await {
                        Ok(link) => {
                            let active = self.start(link);
                            // The source waits meanwhile (the connection is still broken
                            // for it): nothing is written out of order.
                            self.retry(active.connection, &active.link.out, false).await;
                            let mut s = lock(&self.state);
                            s.broken = s.ended == active.connection;
                            s.wanted = false;
                            s.handover = Some(active);
                        }
                        Err(e) => lock(&self.state).failed = Some(e),
                    }
                    self.moved.notify_waiters();
                }
            }
        }
    }

    /// Writes on `connection`'s outbox the frames it has not carried: with `only_due`,
    /// only the frames nobody took whose retry is due (the source writes the others).
    async fn retry(&self, connection: u64, out: &Outbox, only_due: bool) {
        loop {
            let step = if only_due {
                self.retry_due(connection, out)
            } else {
                let mut s = lock(&self.state);
                if s.connection != connection {
                    return;
                }
                match s.window.next_unwritten() {
                    Some(next) => Step::Send(next),
                    None => Step::Done,
                }
            };
            let written = match step {
                Step::Done => return,
                Step::Full => out.flush().await,
                Step::Send(next) => out.send(&Frame::Data(next)).await,
            };
            if written.is_err() {
                lock(&self.state).broken = true;
                return;
            }
        }
    }

    /// Queues the frames nobody took whose retry is due: taken and queued under the lock,
    /// and only while the source writes nothing, so the outbox gets frames in the window's
    /// order.
    fn retry_due(&self, connection: u64, out: &Outbox) -> Step {
        let mut s = lock(&self.state);
        loop {
            let now = std::time::Instant::now();
            let due = s.window.next_due().is_some_and(|due| due <= now);
            if s.connection != connection || !due || self.busy.load(Ordering::SeqCst) {
                return Step::Done;
            }
            let Some(next) = s.window.next_unwritten() else {
                return Step::Done;
            };
            match out.try_send(&Frame::Data(next)) {
                Ok(true) => {}
                Ok(false) => {
                    // Full: wait until the writer has written what is queued.
                    s.window.unwrite_deferred();
                    return Step::Full;
                }
                Err(_) => {
                    s.window.unwrite_deferred();
                    s.broken = true;
                    return Step::Done;
                }
            }
        }
    }
}

/// The keeper's next write.
enum Step {
    Done,
    Full,
    Send(Data),
}

/// What the keeper does next.
enum Todo {
    Wait(Duration),
    Retry(u64, Outbox),
    Reconnect,
}

fn lock(w: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}
