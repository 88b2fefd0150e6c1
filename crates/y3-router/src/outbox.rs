//! A subscriber's outbox: the pure [`Queue`] behind a mutex, with two `Notify`s — one wakes
//! the connection's writer task, the other wakes sources held back by the block policy.
//!
//! ```text
//!   reader tasks ──push──▶ [ Queue ] ──pop_batch──▶ writer task ──feed×N, flush──▶ socket
//!        ▲ waits on `writable`      │ notifies `readable` (per push; a socket reader
//!        │                          │ once per read: `offer_deferred`, `wakes.rs`)
//!        └──── notified after every batch taken
//! ```
//!
//! Under the block policy a subscriber's frames go through three stages:
//!
//! ```text
//!  backlog  0 ─────────────── max_bytes ─────────────── OVERDRAFT × max_bytes
//!           │ buffered: nobody   │ held: each push waits    │ evicted
//!           │ waits              │ for the writer to take a │ (`backlog`)
//!           │                    │ batch (backpressure)     │
//!           │                    ├─ no batch taken for block_timeout_ms: the subscriber
//!           │                    │  is *stalled*; pushes queue into the overdraft without
//!           │                    │  waiting, until it takes a batch again
//!  and, whatever the backlog: nothing taken for write_deadline_ms → evicted (`deadline`)
//! ```
//!
//! So a subscriber that pauses for a few seconds loses nothing and holds nobody back while
//! its backlog fits `max_bytes`; one that reads, however slowly, holds its publishers back;
//! and one that takes nothing holds each publisher (and that publisher's other tags) at
//! most `block_timeout_ms` per stall. An evicted subscriber's queue is counted as dropped
//! (`slow_consumer`), every waiting source is released, and the connection task closes it.
//! Every window is measured from the frame's read time (`at`) and the last batch taken: a
//! publisher held by a full queue waits until the block timeout after the subscriber's
//! *last batch*, not after the push began, so a publisher meeting fifty subscribers that
//! all stopped at once waits one block timeout, not fifty.
//!
//! A routed frame is queued once for all its subscribers: one [`SharedFrame`] (an `Arc` of
//! the frame) that every recipient's slot points at, so that a slot is a pointer plus what
//! is the subscriber's own (the read time, the `written` notification), 40 bytes, moved
//! from routing into the queue and out to the writer where a clone of the whole frame
//! (~170 bytes) was moved about 11 times per delivery (issue 28):
//!
//! ```text
//!  Queued (40 B, one per queue)              SharedFrame: Arc<Frame>, one per routed frame
//!  ┌─────────────────────────────────┐       ┌──────────────┬────────────────────────────┐
//!  │ frame: pointer ─────────────────┼──────▶│ strong, weak │ Frame (tag, metadata,      │
//!  │ at: Instant (16 B)              │       │ (2 × 8 B)    │ payload, wire, token, …)   │
//!  │ written: Option<Sender> (16 B)  │       └──────────────┴────────────────────────────┘
//!  └─────────────────────────────────┘
//! ```
//!
//! The router-wide memory budget (`budget.rs`) charges a queued frame's bytes once however
//! many queues hold it (its [`Charge`](crate::budget::Charge) token, attached by
//! [`charge_frame`] before routing; the charge includes the shared entry, [`SHARED_FRAME`]),
//! plus [`FRAME_OVERHEAD`] per queue slot. A push that
//! finds the budget over its limit first evicts the non-reading subscribers
//! ([`Budget::reclaim`](crate::budget::Budget::reclaim)); if it is still over, a `block`
//! subscriber's publisher waits (retrying every [`BUDGET_RETRY`]) for up to the write
//! deadline, and only then is the frame dropped as `memory_budget`; a `drop_oldest`
//! subscriber's frame is dropped at once (counted).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use y3_transport::frame::Frame;
use y3_transport::READ_BUFFER;

use crate::config::QueueConfig;
use crate::metrics::{Drop, Metrics};
use crate::queue::{Policy, Push, Queue, Weighted};

/// A routed frame, shared by every queue it is routed to (see the module): cloning it
/// clones a pointer.
pub(crate) type SharedFrame = Arc<Frame>;

/// Bytes of a [`SharedFrame`]'s allocation: the two reference counts and the frame. A data
/// frame's charge includes it once ([`held_bytes`]): one per routed frame, however many
/// queues point at it.
pub(crate) const SHARED_FRAME: usize =
    2 * std::mem::size_of::<usize>() + std::mem::size_of::<Frame>();

/// A frame waiting in an outbox, with the time it was read (for the latency histogram).
#[derive(Debug)]
pub(crate) struct Queued {
    /// The frame, shared with the other queues it was routed to.
    pub frame: SharedFrame,
    /// When it was read.
    pub at: Instant,
    /// Told once the frame is written to the socket (flushed); dropped unsent when the
    /// frame is dropped instead (a durable consumer acknowledges JetStream on it).
    pub written: Option<oneshot::Sender<()>>,
}

/// Bytes a frame is charged beyond its payload and metadata: its slot in the queue and the
/// bookkeeping of its buffer (a frame copied out of its read buffer has an allocation of
/// its own). With the queues holding up to millions of small frames, this is what keeps
/// `max_bytes` and the router's `max_queued_bytes` true of the memory they hold.
pub(crate) const FRAME_OVERHEAD: usize = std::mem::size_of::<Queued>() + 32;

/// How often a `block` push that found the memory budget full looks again.
pub(crate) const BUDGET_RETRY: Duration = Duration::from_millis(5);

/// Data frames smaller than this are copied out of the read buffer before they are queued
/// (one small copy), so that queued frames never pin read buffers: 6,800 queued 16-byte
/// frames each holding a 64 KiB buffer alive were +435 MB that no queue limit saw.
pub(crate) const COPY_BELOW: usize = 8 * 1024;

/// Payload and metadata bytes of a data frame.
pub(crate) fn frame_bytes(d: &y3_transport::Data) -> usize {
    d.payload.len() + d.metadata.as_bytes().len()
}

/// Bytes of memory a data frame's buffer holds: its own allocation (a copied small frame,
/// or a frame larger than a read buffer, which the codec gives one of its own), or the
/// whole read buffer it keeps alive; plus its charge's own overhead and its shared queue
/// entry ([`SHARED_FRAME`]).
pub(crate) fn held_bytes(d: &y3_transport::Data) -> usize {
    let bytes = frame_bytes(d);
    let buffer = if (COPY_BELOW..=READ_BUFFER).contains(&bytes) {
        READ_BUFFER
    } else {
        bytes
    };
    buffer + crate::budget::CHARGE_OVERHEAD + SHARED_FRAME
}

/// Readies a frame read from a client for its queues, charged once for all of them: one
/// under [`COPY_BELOW`] is copied out of its read buffer into one allocation that also holds
/// its charge (the copy's size class plus [`CHARGE_OVERHEAD`](crate::budget::CHARGE_OVERHEAD)
/// and [`SHARED_FRAME`], see `y3_transport::holding`), so that copying and charging it
/// allocate once; a larger
/// one stays in its buffer and is charged with it ([`charge_frame`]).
pub(crate) fn detach_and_charge(metrics: &Metrics, d: &mut y3_transport::Data) {
    if frame_bytes(d) < COPY_BELOW && !d.has_token() {
        let budget = &metrics.budget;
        d.detach_holding(|held| {
            budget.charge(held + crate::budget::CHARGE_OVERHEAD + SHARED_FRAME)
        });
    } else {
        charge_frame(metrics, d);
    }
}

/// Charges `d`'s bytes ([`held_bytes`]) to the router's memory budget once, for every queue
/// it is routed to (they share it, and its charge, as one [`SharedFrame`]), unless it carries
/// one already.
pub(crate) fn charge_frame(metrics: &Metrics, d: &mut y3_transport::Data) {
    if !d.has_token() {
        d.set_token(Arc::new(metrics.budget.charge(held_bytes(d))));
    }
}

impl Weighted for Queued {
    /// A frame's bytes plus its shared entry and its slot; a frame large enough to stay in
    /// its read buffer is charged that whole buffer too, since it keeps it alive. (Every
    /// queue holding a shared frame counts all of it against its own `max_bytes`.)
    fn weight(&self) -> usize {
        match &*self.frame {
            Frame::Data(d) => {
                let bytes = frame_bytes(d);
                let pinned = if bytes < COPY_BELOW { 0 } else { READ_BUFFER };
                bytes + pinned + SHARED_FRAME + FRAME_OVERHEAD
            }
            _ => SHARED_FRAME + FRAME_OVERHEAD,
        }
    }

    fn tag(&self) -> Option<u32> {
        match &*self.frame {
            Frame::Data(d) => Some(d.tag),
            _ => None,
        }
    }
}

#[derive(Debug)]
enum Phase {
    Open,
    /// Deliver what is queued, then `tail` (a goaway), then stop.
    Finishing(Option<SharedFrame>),
    /// Stop after the control frames; data was dropped.
    Aborted,
}

/// Why a subscriber was evicted as a slow consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// It took nothing for the write deadline while frames waited for it.
    Deadline,
    /// It took nothing for the block timeout and fell [`OVERDRAFT`](crate::queue::OVERDRAFT) times its limits
    /// behind.
    Backlog,
    /// It took nothing for the block timeout while the router's memory budget was over its
    /// limit (`budget.rs`): non-readers go first, largest backlog first.
    Budget,
}

impl Eviction {
    /// The snake_case name (logs, goaway reasons).
    pub fn name(self) -> &'static str {
        match self {
            Eviction::Deadline => "deadline",
            Eviction::Backlog => "backlog",
            Eviction::Budget => "memory_budget",
        }
    }
}

#[derive(Debug)]
struct Inner {
    queue: Queue<Queued>,
    phase: Phase,
    /// Pushers waiting for room; the writer wakes them only when there are some.
    waiting: usize,
    /// Since when the subscriber has taken nothing while frames waited for it: the last
    /// batch taken, or the push into an empty queue after it.
    idle_since: Instant,
    /// `idle_since` + the write deadline (`None` past the clock's range): a push compares
    /// its frame's read time with it, where a subtraction per frame cost ~30 instructions.
    overdue: Option<Instant>,
    /// `idle_since` on the runtime's clock (what a held publisher's wait is measured on).
    progress: tokio::time::Instant,
    /// No batch was taken for the block timeout while full: pushes go into the overdraft
    /// without waiting, until the writer takes a batch again.
    stalled: bool,
    /// Set once, when evicted.
    eviction: Option<Eviction>,
}

/// One push attempt's outcome.
enum Attempt {
    /// Done: queued, dropped, or not queued for good.
    Done(Pushed),
    /// The queue is full (`block`): the item back, and since when the subscriber has taken
    /// nothing (on the runtime's clock).
    Full(Queued, tokio::time::Instant),
    /// The memory budget is over its limit and nobody could be evicted (`block`).
    OverBudget(Queued),
}

/// A push [`Outbox::offer`] could not finish without waiting: the frame, for
/// [`Outbox::wait_push`].
pub(crate) struct Held(Attempt);

/// What happened to a pushed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued.
    Queued,
    /// Queued; this many older frames were dropped (drop-oldest).
    DroppedOldest,
    /// The subscriber is going away; the frame was not queued.
    Closed,
    /// The subscriber was evicted as a slow consumer; the frame was not queued.
    Evicted,
}

#[derive(Debug)]
pub(crate) struct Outbox {
    inner: Mutex<Inner>,
    readable: Notify,
    writable: Notify,
    evicted: CancellationToken,
    /// Mirrors `evicted` for a cheap check between frames.
    evicted_flag: AtomicBool,
    metrics: Arc<Metrics>,
    block_timeout: Duration,
    write_deadline: Duration,
    /// A downstream zipper's outbox (mesh.rs): its drops are counted as [`Drop::Mesh`] and
    /// in this per-downstream counter too.
    downstream: Option<prometheus_client::metrics::counter::Counter>,
    /// Frames of this outbox dropped, any reason (`/connz`).
    drops: std::sync::atomic::AtomicU64,
}

impl Outbox {
    pub fn new(config: &QueueConfig, metrics: Arc<Metrics>) -> Outbox {
        let (now, write_deadline) = (
            Instant::now(),
            Duration::from_millis(config.write_deadline_ms),
        );
        Outbox {
            inner: Mutex::new(Inner {
                queue: Queue::new(config.capacity, config.max_bytes, config.policy),
                phase: Phase::Open,
                waiting: 0,
                idle_since: now,
                overdue: now.checked_add(write_deadline),
                progress: tokio::time::Instant::now(),
                stalled: false,
                eviction: None,
            }),
            readable: Notify::new(),
            writable: Notify::new(),
            evicted: CancellationToken::new(),
            evicted_flag: AtomicBool::new(false),
            metrics,
            block_timeout: Duration::from_millis(config.block_timeout_ms),
            write_deadline,
            downstream: None,
            drops: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The outbox of a downstream zipper of the mesh: every drop is counted as
    /// [`Drop::Mesh`] and in `dropped`. Its policy should be drop-oldest, so that a dead
    /// downstream never holds local routing back.
    pub fn downstream(
        config: &QueueConfig,
        metrics: Arc<Metrics>,
        dropped: prometheus_client::metrics::counter::Counter,
    ) -> Outbox {
        let mut outbox = Outbox::new(config, metrics);
        outbox.downstream = Some(dropped);
        outbox
    }

    /// Counts `n` data frames of this downstream outbox as written to its zipper.
    pub fn count_forwarded(&self, n: u64) {
        self.metrics.forwarded(n);
    }

    /// Counts `n` frames of this outbox as dropped for `reason` (for a downstream's,
    /// always [`Drop::Mesh`]).
    pub fn count_drops(&self, reason: Drop, n: u64) {
        self.drops.fetch_add(n, Ordering::Relaxed);
        match &self.downstream {
            Some(counter) => {
                counter.inc_by(n);
                self.metrics.dropped(Drop::Mesh, n);
            }
            None => self.metrics.dropped(reason, n),
        }
    }

    /// Counts one dropped frame per entry of `tags` under its tag (beside the reason's
    /// count, which [`count_drops`](Outbox::count_drops) keeps).
    fn count_tags(&self, tags: &[u32]) {
        for &tag in tags {
            self.metrics.dropped_tag(tag, 1);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The queue stays consistent across a panic in another holder (no partial updates
        // span an unwind point), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a data frame (charged here if it was not: [`charge_frame`]), waiting for room
    /// under the block policy.
    #[cfg(test)]
    pub async fn push(&self, mut frame: Frame, at: Instant) -> Pushed {
        if let Frame::Data(d) = &mut frame {
            charge_frame(&self.metrics, d);
        }
        self.push_tracked(Arc::new(frame), at, None).await
    }

    /// Queues a shared frame, waiting for room under the block policy; `written` is told
    /// once the frame is flushed to the socket, and dropped untold if the frame never is.
    /// A data frame is charged before it is shared ([`charge_frame`]).
    pub async fn push_tracked(
        &self,
        frame: SharedFrame,
        at: Instant,
        written: Option<oneshot::Sender<()>>,
    ) -> Pushed {
        match self.offer(Queued { frame, at, written }) {
            Ok(pushed) => pushed,
            Err(held) => self.wait_push(held).await,
        }
    }

    /// The fast path of a push, without waiting (a data frame is charged already, see
    /// [`charge_frame`]): queues it when there is room (or the policy drops, or the
    /// subscriber is gone). `Err`: the queue is full or the memory budget over its limit
    /// under the block policy; [`wait_push`](Outbox::wait_push) finishes the push. Not
    /// async, so that the frame is not moved into a future on the way to its slot.
    pub fn offer(&self, item: Queued) -> Result<Pushed, Held> {
        self.offer_waking(item, true)
    }

    /// As [`offer`](Outbox::offer), but a frame queued does not wake the writer: the caller
    /// owes it a [`wake`](Outbox::wake) (`wakes.rs`: a reader wakes each writer once per
    /// read) when this returns `Ok(Queued)` or `Ok(DroppedOldest)`. A push that must wait
    /// ([`wait_push`](Outbox::wait_push)) wakes it itself.
    pub fn offer_deferred(&self, item: Queued) -> Result<Pushed, Held> {
        self.offer_waking(item, false)
    }

    #[inline]
    fn offer_waking(&self, item: Queued, wake: bool) -> Result<Pushed, Held> {
        let at = item.at;
        match self.try_push(item, at, false, wake) {
            Attempt::Done(pushed) => Ok(pushed),
            waiting => Err(Held(waiting)),
        }
    }

    /// Wakes the writer to take what is queued (owed after
    /// [`offer_deferred`](Outbox::offer_deferred)).
    #[inline]
    pub fn wake(&self) {
        self.readable.notify_one();
    }

    /// Whether the writer was told to look (and takes that wake-up, as the writer would).
    #[cfg(test)]
    pub fn take_wake(&self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let notified = std::pin::pin!(self.readable.notified());
        std::future::Future::poll(notified, &mut cx).is_ready()
    }

    /// Finishes a push [`offer`](Outbox::offer) could not: waits for room (or the memory
    /// budget) under the block policy, as the block policy says; the end of the wait is the
    /// router's last hold ([`Budget::hold_ended`](crate::budget::Budget::hold_ended)).
    pub async fn wait_push(&self, held: Held) -> Pushed {
        let pushed = self.hold(held).await;
        self.metrics.budget.hold_ended();
        pushed
    }

    /// [`wait_push`](Outbox::wait_push)'s wait.
    async fn hold(&self, held: Held) -> Pushed {
        // The writer takes what is queued before this waits for it (a pusher that deferred
        // its wake-ups, `wakes.rs`, may owe it one).
        self.readable.notify_one();
        let mut item = match held.0 {
            Attempt::Done(pushed) => return pushed,
            Attempt::Full(item, _) => item,
            Attempt::OverBudget(item) => {
                let at = item.at;
                match self.wait_for_budget(item, at).await {
                    Ok(pushed) => return pushed,
                    Err(back) => back,
                }
            }
        };
        let at = item.at;
        // Past the queue's limits: held back while the subscriber makes progress. Every
        // batch its writer takes (what wakes us) restarts the clock; one that took nothing
        // for the block timeout (since its last batch, which may be before this push) is
        // stalled, and this frame (and the next) go into the overdraft.
        loop {
            let notified = self.writable.notified();
            tokio::pin!(notified);
            // Register before looking again, so a batch taken in between still wakes us.
            notified.as_mut().enable();
            let idle_since = match self.try_push(item, at, true, true) {
                Attempt::Done(pushed) => return pushed,
                Attempt::Full(back, since) => {
                    item = back;
                    since
                }
                Attempt::OverBudget(back) => match self.wait_for_budget(back, at).await {
                    Ok(pushed) => return pushed,
                    // The queue is full now: wait for its writer (registered afresh).
                    Err(back) => {
                        item = back;
                        continue;
                    }
                },
            };
            let now = tokio::time::Instant::now();
            let until = (idle_since + self.block_timeout).min(now + self.block_timeout);
            let expired = tokio::select! {
                _ = notified => false,
                _ = self.evicted.cancelled() => {
                    self.lock().waiting -= 1;
                    return Pushed::Evicted;
                }
                _ = tokio::time::sleep_until(until) => true,
            };
            let mut inner = self.lock();
            inner.waiting -= 1;
            if expired && !inner.stalled {
                inner.stalled = true;
                drop(inner);
                // The other waiting pushers go into the overdraft too.
                self.writable.notify_waiters();
            }
        }
    }

    /// A `block` push that found the memory budget full (after evicting the non-readers):
    /// looks again every [`BUDGET_RETRY`] (evicting whoever stopped reading meanwhile),
    /// for up to the write deadline; then the frame is dropped, counted as `memory_budget`.
    /// `Err(item)` when the queue itself is full now (the caller waits for the writer).
    async fn wait_for_budget(&self, mut item: Queued, at: Instant) -> Result<Pushed, Queued> {
        let give_up = tokio::time::Instant::now() + self.write_deadline;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(BUDGET_RETRY) => {}
                _ = self.evicted.cancelled() => return Ok(Pushed::Evicted),
            }
            item = match self.try_push(item, at, false, true) {
                Attempt::Done(pushed) => return Ok(pushed),
                Attempt::Full(item, _) => return Err(item),
                Attempt::OverBudget(item) => item,
            };
            if tokio::time::Instant::now() >= give_up {
                self.count_drops(Drop::MemoryBudget, 1);
                self.count_tags(item.tag().as_slice());
                return Ok(Pushed::DroppedOldest);
            }
        }
    }

    /// Bytes queued, if this subscriber is not reading: data waits for it and it took no
    /// batch for the block timeout (what the memory budget evicts first).
    pub fn non_reading(&self, now: Instant) -> Option<usize> {
        let inner = self.lock();
        (matches!(inner.phase, Phase::Open)
            && !inner.queue.no_data()
            && now.saturating_duration_since(inner.idle_since) >= self.block_timeout)
            .then(|| inner.queue.bytes())
    }

    /// One attempt: queued (or dropped-oldest, closed, evicted), or the item back when
    /// full and the subscriber not stalled. With `wait`, that records one more waiting
    /// pusher (the caller waits next). Without `wake`, a frame queued does not wake the
    /// writer (the caller owes it a [`wake`](Outbox::wake)).
    fn try_push(&self, item: Queued, at: Instant, wait: bool, wake: bool) -> Attempt {
        let mut inner = self.lock();
        if !matches!(inner.phase, Phase::Open) {
            return Attempt::Done(if self.is_evicted() {
                Pushed::Evicted
            } else {
                Pushed::Closed
            });
        }
        let block = inner.queue.policy() == Policy::Block;
        let empty = inner.queue.no_data();
        // `at - idle_since >= write_deadline`, as a comparison.
        let overdue = self.write_deadline.is_zero() || inner.overdue.is_some_and(|d| at >= d);
        if block && !empty && overdue {
            drop(inner);
            self.evict(Eviction::Deadline);
            return Attempt::Done(Pushed::Evicted);
        }
        // The frame's bytes are charged already (once, however many queues take it); this
        // queue adds its slot.
        if !self.metrics.budget.fits(FRAME_OVERHEAD) {
            drop(inner);
            // The non-readers go first; this subscriber may be one of them.
            self.metrics.budget.reclaim(Instant::now());
            if self.is_evicted() {
                return Attempt::Done(Pushed::Evicted);
            }
            if !self.metrics.budget.fits(FRAME_OVERHEAD) {
                if block {
                    return Attempt::OverBudget(item);
                }
                self.count_drops(Drop::MemoryBudget, 1);
                self.count_tags(item.tag().as_slice());
                return Attempt::Done(Pushed::DroppedOldest);
            }
            inner = self.lock();
            if !matches!(inner.phase, Phase::Open) {
                return Attempt::Done(Pushed::Closed);
            }
        }
        if empty {
            // Frames wait for it from this push: no earlier than the frame's read time and
            // the end of the last hold (no clock read per frame).
            let since = self.metrics.budget.pushed_no_earlier(at);
            if since > inner.idle_since {
                inner.idle_since = since;
                inner.overdue = since.checked_add(self.write_deadline);
            }
            inner.progress = inner.progress.max(tokio::time::Instant::from_std(since));
        }
        let before = inner.queue.len();
        let mut tags = Vec::new();
        let mut pushed = inner.queue.push_with(item, |q| tags.extend(q.tag()));
        if inner.stalled {
            if let Push::Full(back) = pushed {
                pushed = match inner.queue.push_overdraft(back) {
                    Push::Full(_) => {
                        drop(inner);
                        self.evict(Eviction::Backlog);
                        return Attempt::Done(Pushed::Evicted);
                    }
                    queued => queued,
                };
            }
        }
        self.metrics
            .budget
            .changed(before * FRAME_OVERHEAD, inner.queue.len() * FRAME_OVERHEAD);
        match pushed {
            Push::Queued => {
                drop(inner);
                self.metrics.queued(1);
                if wake {
                    self.readable.notify_one();
                }
                Attempt::Done(Pushed::Queued)
            }
            Push::DroppedOldest(n) => {
                drop(inner);
                self.metrics.queued(1 - n as i64);
                self.count_drops(Drop::QueueFull, n as u64);
                self.count_tags(&tags);
                if wake {
                    self.readable.notify_one();
                }
                Attempt::Done(Pushed::DroppedOldest)
            }
            Push::Full(back) => {
                if wait {
                    inner.waiting += 1;
                }
                Attempt::Full(back, inner.progress)
            }
        }
    }

    /// Queues a control frame ahead of the data (handshake ack, goaway).
    pub fn push_control(&self, frame: Frame) -> bool {
        let pushed = {
            let mut inner = self.lock();
            !matches!(inner.phase, Phase::Aborted)
                && inner.queue.push_control(Queued {
                    frame: Arc::new(frame),
                    at: Instant::now(),
                    written: None,
                })
        };
        if pushed {
            self.readable.notify_one();
        }
        pushed
    }

    /// Takes up to `max` frames into `out`, waiting while the outbox is open and empty.
    /// Returns false when the writer should stop.
    pub async fn pop_batch(&self, out: &mut Vec<Queued>, max: usize) -> bool {
        loop {
            let notified = self.readable.notified();
            {
                let mut inner = self.lock();
                let before = out.len();
                let data = inner.queue.pop_batch(out, max);
                self.metrics.budget.changed(data * FRAME_OVERHEAD, 0);
                if data > 0 {
                    let now = Instant::now();
                    inner.idle_since = now;
                    inner.overdue = now.checked_add(self.write_deadline);
                    inner.progress = tokio::time::Instant::now();
                    inner.stalled = false;
                }
                if out.len() > before {
                    let waiting = inner.waiting > 0;
                    drop(inner);
                    self.metrics.queued(-(data as i64));
                    if data > 0 && waiting {
                        self.writable.notify_waiters();
                    }
                    return true;
                }
                match &mut inner.phase {
                    Phase::Open => {}
                    Phase::Finishing(tail) => {
                        return match tail.take() {
                            Some(frame) => {
                                out.push(Queued {
                                    frame,
                                    at: Instant::now(),
                                    written: None,
                                });
                                true
                            }
                            None => false,
                        }
                    }
                    Phase::Aborted => return false,
                }
            }
            notified.await;
        }
    }

    /// Stop accepting frames; the writer delivers what is queued, then `tail`, then stops.
    pub fn finish(&self, tail: Option<Frame>) {
        {
            let mut inner = self.lock();
            if matches!(inner.phase, Phase::Open) {
                inner.phase = Phase::Finishing(tail.map(Arc::new));
            }
        }
        self.readable.notify_one();
        self.writable.notify_waiters();
    }

    /// Drops the queued data (counted under `reason`), queues `goaway` if given, and makes
    /// the writer stop after the control frames.
    pub fn abort(&self, goaway: Option<Frame>, reason: Drop) {
        let mut tags = Vec::new();
        let dropped = {
            let mut inner = self.lock();
            if let Some(goaway) = goaway {
                inner.queue.push_control(Queued {
                    frame: Arc::new(goaway),
                    at: Instant::now(),
                    written: None,
                });
            }
            inner.phase = Phase::Aborted;
            let dropped = inner.queue.clear_with(|q| tags.extend(q.tag()));
            self.metrics.budget.changed(dropped * FRAME_OVERHEAD, 0);
            dropped
        };
        self.metrics.queued(-(dropped as i64));
        self.count_drops(reason, dropped as u64);
        self.count_tags(&tags);
        self.readable.notify_one();
        self.writable.notify_waiters();
    }

    /// Evicts the subscriber as a slow consumer, for `why`.
    pub fn evict(&self, why: Eviction) {
        if self.evicted_flag.swap(true, Ordering::Relaxed) {
            return;
        }
        self.lock().eviction = Some(why);
        // The connection logs it, with the client's name and address.
        self.evicted.cancel();
        self.abort(None, Drop::SlowConsumer);
    }

    /// Whether the subscriber has been evicted.
    pub fn is_evicted(&self) -> bool {
        self.evicted_flag.load(Ordering::Relaxed)
    }

    /// Why the subscriber was evicted, once it was.
    pub fn eviction(&self) -> Option<Eviction> {
        self.lock().eviction
    }

    /// Completes when the subscriber has been evicted.
    pub fn evicted(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.evicted.cancelled()
    }

    /// Its queue now, and its drops so far (`/connz`).
    pub fn queue_state(&self) -> crate::status::QueueState {
        let (frames, bytes) = {
            let inner = self.lock();
            (inner.queue.len() as u64, inner.queue.bytes() as u64)
        };
        crate::status::QueueState {
            frames,
            bytes,
            dropped: self.drops.load(Ordering::Relaxed),
        }
    }

    /// Data frames queued.
    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.lock().queue.len()
    }
}

impl std::ops::Drop for Outbox {
    /// Gives back the budget of the slots still queued (their frames' charges go with the
    /// frames themselves).
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        let left = inner.queue.len();
        self.metrics.budget.changed(left * FRAME_OVERHEAD, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use y3_transport::frame::Data;

    fn config(capacity: usize, policy: Policy, block_timeout_ms: u64) -> QueueConfig {
        QueueConfig {
            capacity,
            max_bytes: 1 << 20,
            policy,
            block_timeout_ms,
            ..QueueConfig::default()
        }
    }

    fn data(id: u64) -> Frame {
        Frame::Data(Data::new(0x10, id.to_be_bytes().to_vec()))
    }

    /// Every frame is charged more than 64 bytes, so that the default `max_bytes` (64 MiB)
    /// binds before the default `capacity` (2^20 frames), as config.rs says.
    #[test]
    fn a_frame_is_charged_its_slot() {
        let q = Queued {
            frame: Arc::new(Frame::Data(Data::new(0x10, Vec::new()))),
            at: Instant::now(),
            written: None,
        };
        assert!(q.weight() > std::mem::size_of::<Queued>());
        let d = QueueConfig::default();
        assert!(q.weight() * d.capacity > d.max_bytes);
    }

    #[tokio::test]
    async fn block_waits_for_the_writer() {
        let outbox = Arc::new(Outbox::new(
            &config(2, Policy::Block, 5000),
            Arc::new(Metrics::new()),
        ));
        assert_eq!(outbox.push(data(1), Instant::now()).await, Pushed::Queued);
        assert_eq!(outbox.push(data(2), Instant::now()).await, Pushed::Queued);
        let pusher = {
            let outbox = outbox.clone();
            tokio::spawn(async move { outbox.push(data(3), Instant::now()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!pusher.is_finished(), "held back while full");
        let mut out = Vec::new();
        assert!(outbox.pop_batch(&mut out, 10).await);
        assert_eq!(out.len(), 2);
        assert_eq!(pusher.await.unwrap(), Pushed::Queued);
        assert_eq!(outbox.depth(), 1);
    }

    /// A frame read before a hold elsewhere and pushed after it starts the clock of the
    /// subscriber whose empty queue it lands in at the hold's end: a queue it fills then
    /// holds the publisher for the block timeout, not "since the subscriber's last batch"
    /// (at once), which stalled a reader that kept up and evicted it past the overdraft.
    #[tokio::test(start_paused = true)]
    async fn a_queue_filled_after_a_hold_elsewhere_holds_its_publisher_the_whole_timeout() {
        let metrics = Arc::new(Metrics::new());
        let stuck = Outbox::new(&config(1, Policy::Block, 100), metrics.clone());
        let healthy = Outbox::new(&config(2, Policy::Block, 100), metrics.clone());
        let read = Instant::now();
        assert_eq!(healthy.push(data(1), read).await, Pushed::Queued);
        let mut out = Vec::new();
        assert!(healthy.pop_batch(&mut out, 10).await);
        // The publisher is held by the stuck subscriber for the block timeout.
        assert_eq!(stuck.push(data(1), read).await, Pushed::Queued);
        let hold = tokio::time::Instant::now();
        assert_eq!(stuck.push(data(2), read).await, Pushed::Queued);
        assert_eq!(
            hold.elapsed(),
            Duration::from_millis(100),
            "held by the stuck one"
        );
        // Then frames read before the hold reach the healthy one, and fill its queue.
        assert_eq!(healthy.push(data(2), read).await, Pushed::Queued);
        assert_eq!(healthy.push(data(3), read).await, Pushed::Queued);
        let held = tokio::time::Instant::now();
        assert_eq!(healthy.push(data(4), read).await, Pushed::Queued);
        assert_eq!(
            held.elapsed(),
            Duration::from_millis(100),
            "held for the timeout, not stalled at once"
        );
    }

    /// Past its budget, a subscriber that takes nothing holds a publisher for the block
    /// timeout once; then its frames go into the overdraft without waiting, and past the
    /// overdraft it is evicted (`backlog`), every frame counted.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_subscriber_holds_publishers_once_then_is_evicted_past_the_overdraft() {
        let metrics = Arc::new(Metrics::new());
        let outbox = Outbox::new(&config(2, Policy::Block, 100), metrics.clone());
        let t0 = Instant::now();
        outbox.push(data(1), t0).await;
        outbox.push(data(2), t0).await;
        let held = tokio::time::Instant::now();
        assert_eq!(outbox.push(data(3), t0).await, Pushed::Queued);
        assert_eq!(held.elapsed(), Duration::from_millis(100), "held once");
        let free = tokio::time::Instant::now();
        assert_eq!(outbox.push(data(4), t0).await, Pushed::Queued);
        assert_eq!(free.elapsed(), Duration::ZERO, "stalled: not held again");
        assert_eq!(outbox.depth(), 4);
        assert_eq!(outbox.push(data(5), t0).await, Pushed::Evicted);
        assert_eq!(outbox.eviction(), Some(Eviction::Backlog));
        assert_eq!(metrics.stats().drops(Drop::SlowConsumer), 4);
        assert_eq!(outbox.push(data(6), t0).await, Pushed::Evicted);
        let mut out = Vec::new();
        assert!(!outbox.pop_batch(&mut out, 10).await);
    }

    /// Within its budget a subscriber may take nothing for just under the write deadline
    /// without holding anybody or losing anything; a frame that comes after the deadline
    /// evicts it (`deadline`). The clock starts at the first frame it did not take.
    #[tokio::test]
    async fn a_subscriber_taking_nothing_is_evicted_at_the_write_deadline() {
        let metrics = Arc::new(Metrics::new());
        let outbox = Outbox::new(
            &QueueConfig {
                write_deadline_ms: 1_000,
                ..config(100, Policy::Block, 100)
            },
            metrics.clone(),
        );
        // Long idle with nothing queued does not count.
        let t0 = Instant::now() + Duration::from_secs(60);
        let ms = |n| t0 + Duration::from_millis(n);
        for (i, at) in [0, 500, 999].into_iter().enumerate() {
            assert_eq!(outbox.push(data(i as u64), ms(at)).await, Pushed::Queued);
        }
        assert_eq!(outbox.push(data(3), ms(1_000)).await, Pushed::Evicted);
        assert_eq!(outbox.eviction(), Some(Eviction::Deadline));
        assert_eq!(metrics.stats().drops(Drop::SlowConsumer), 3);
    }

    /// A batch taken restarts the deadline's clock and ends a stall: the publisher is held
    /// back again (backpressure) rather than filling the overdraft.
    #[tokio::test(start_paused = true)]
    async fn a_batch_taken_ends_the_stall() {
        let outbox = Outbox::new(&config(2, Policy::Block, 100), Arc::new(Metrics::new()));
        let t0 = Instant::now();
        for i in 0..3 {
            outbox.push(data(i), t0).await;
        }
        assert_eq!(outbox.depth(), 3, "one in the overdraft");
        let mut out = Vec::new();
        assert!(outbox.pop_batch(&mut out, 2).await);
        outbox.push(data(3), t0).await;
        let held = tokio::time::Instant::now();
        assert_eq!(outbox.push(data(4), t0).await, Pushed::Queued);
        assert_eq!(held.elapsed(), Duration::from_millis(100), "held again");
        assert!(!outbox.is_evicted());
    }

    /// A subscriber that keeps reading, however slowly, is not a slow consumer: pushes wait
    /// far longer than the block timeout in total, and nobody is evicted.
    #[tokio::test(start_paused = true)]
    async fn a_slow_but_reading_subscriber_is_not_evicted() {
        let metrics = Arc::new(Metrics::new());
        let outbox = Arc::new(Outbox::new(&config(1, Policy::Block, 250), metrics.clone()));
        let reader = {
            let outbox = outbox.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                for _ in 0..10 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    out.clear();
                    assert!(outbox.pop_batch(&mut out, 1).await);
                }
            })
        };
        let started = tokio::time::Instant::now();
        for i in 0..10 {
            assert_eq!(
                outbox.push(data(i), Instant::now()).await,
                Pushed::Queued,
                "{i}"
            );
        }
        assert!(started.elapsed() >= Duration::from_millis(1_600));
        reader.await.unwrap();
        assert_eq!(metrics.stats().drops(Drop::SlowConsumer), 0);
        assert!(!outbox.is_evicted());
    }

    fn kib(id: u8) -> Frame {
        Frame::Data(Data::new(0x10, vec![id; 1024]))
    }

    /// A frame pushed to many queues is charged once, plus a slot per queue, and all of it
    /// is given back when the queues go.
    #[tokio::test]
    async fn a_frame_in_many_queues_is_charged_once() {
        let metrics = Arc::new(Metrics::new());
        let outboxes: Vec<_> = (0..10)
            .map(|_| Outbox::new(&config(100, Policy::Block, 100), metrics.clone()))
            .collect();
        let Frame::Data(mut d) = kib(1) else {
            unreachable!()
        };
        charge_frame(&metrics, &mut d);
        let shared = Arc::new(Frame::Data(d));
        for o in &outboxes {
            assert_eq!(
                o.push_tracked(shared.clone(), Instant::now(), None).await,
                Pushed::Queued
            );
        }
        drop(shared);
        let one = 1024 + crate::budget::CHARGE_OVERHEAD + SHARED_FRAME;
        assert_eq!(metrics.budget.used(), one + 10 * FRAME_OVERHEAD);
        let mut out = Vec::new();
        assert!(outboxes[0].pop_batch(&mut out, 10).await);
        drop(out);
        assert_eq!(metrics.budget.used(), one + 9 * FRAME_OVERHEAD);
        drop(outboxes);
        assert_eq!(metrics.budget.used(), 0);
    }

    /// A small frame read from a client is copied out of its read buffer with its charge in
    /// the copy's own allocation: charged once (its size class plus the overhead) however
    /// many queues take it, given back with the last of them, and sharing nothing with the
    /// read buffer.
    #[tokio::test]
    async fn a_copied_frame_holds_its_charge() {
        use tokio_util::codec::{Decoder, Encoder};
        let metrics = Arc::new(Metrics::new());
        let mut codec = y3_transport::FrameCodec::default();
        let mut buf = bytes::BytesMut::new();
        let md = y3_transport::Metadata::from_pairs([("yomo-tid", "t-1")]);
        let sent = Data::new(0x10, vec![7u8; 100]).with_metadata(md);
        codec.encode(Frame::Data(sent.clone()), &mut buf).unwrap();
        let wire_len = buf.len();
        let Some(Frame::Data(mut d)) = codec.decode(&mut buf).unwrap() else {
            unreachable!()
        };
        let read_buffer = d.wire().unwrap().as_ptr() as usize;
        detach_and_charge(&metrics, &mut d);
        assert_eq!(d, sent);
        assert!(d.has_token());
        let copied = d.wire().expect("an unchanged frame keeps its wire bytes");
        assert_ne!(copied.as_ptr() as usize, read_buffer);
        let one = y3_transport::holding::held_for(wire_len)
            + crate::budget::CHARGE_OVERHEAD
            + SHARED_FRAME;
        assert_eq!(metrics.budget.used(), one);
        // Not charged again.
        detach_and_charge(&metrics, &mut d);
        charge_frame(&metrics, &mut d);
        assert_eq!(metrics.budget.used(), one);
        let outboxes: Vec<_> = (0..3)
            .map(|_| Outbox::new(&config(100, Policy::Block, 100), metrics.clone()))
            .collect();
        let shared = Arc::new(Frame::Data(d));
        for o in &outboxes {
            let pushed = o.push_tracked(shared.clone(), Instant::now(), None).await;
            assert_eq!(pushed, Pushed::Queued);
        }
        drop(shared);
        assert_eq!(metrics.budget.used(), one + 3 * FRAME_OVERHEAD);
        drop(outboxes);
        assert_eq!(metrics.budget.used(), 0);
    }

    /// Over the budget, the subscriber that took nothing for its block timeout is evicted
    /// (`memory_budget`), and the reading one's frame is queued, not dropped.
    #[tokio::test]
    async fn over_the_budget_the_non_reader_goes_not_the_readers_frame() {
        let metrics = Arc::new(Metrics::new());
        let cfg = config(1000, Policy::Block, 50);
        let stuck = Arc::new(Outbox::new(&cfg, metrics.clone()));
        let reading = Arc::new(Outbox::new(&cfg, metrics.clone()));
        metrics.budget.register_consumer(&stuck);
        metrics.budget.register_consumer(&reading);
        for i in 0..20 {
            assert_eq!(stuck.push(kib(i), Instant::now()).await, Pushed::Queued);
        }
        metrics.budget.set_limit(metrics.budget.used() + 100);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(reading.push(kib(99), Instant::now()).await, Pushed::Queued);
        assert_eq!(stuck.eviction(), Some(Eviction::Budget));
        let stats = metrics.stats();
        assert_eq!(stats.drops(Drop::MemoryBudget), 0);
        assert_eq!(stats.drops(Drop::SlowConsumer), 20);
        assert!(metrics.budget.fits(0));
    }

    #[tokio::test]
    async fn finish_delivers_then_tail() {
        let outbox = Outbox::new(&config(8, Policy::DropOldest, 0), Arc::new(Metrics::new()));
        outbox.push(data(1), Instant::now()).await;
        outbox.finish(Some(Frame::HandshakeAck));
        assert_eq!(outbox.push(data(2), Instant::now()).await, Pushed::Closed);
        let mut out = Vec::new();
        assert!(outbox.pop_batch(&mut out, 10).await);
        assert!(outbox.pop_batch(&mut out, 10).await);
        assert!(!outbox.pop_batch(&mut out, 10).await);
        let frames: Vec<_> = out.into_iter().map(|q| (*q.frame).clone()).collect();
        assert_eq!(frames, [data(1), Frame::HandshakeAck]);
    }
}
