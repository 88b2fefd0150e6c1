//! A subscriber's outbox: the pure [`Queue`] behind a mutex, with two `Notify`s — one wakes
//! the connection's writer task, the other wakes sources held back by the block policy.
//!
//! ```text
//!   reader tasks ──push──▶ [ Queue ] ──pop_batch──▶ writer task ──feed×N, flush──▶ socket
//!        ▲ waits on `writable`      │ notifies `readable`
//!        └──── notified after every batch taken
//! ```
//!
//! A push that finds the queue full under the block policy waits for room at most the
//! block timeout; then the subscriber is *evicted* (`slow_consumer`): its queue is counted
//! as dropped, every waiting source is released, and the connection task closes it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use y3_transport::frame::Frame;
use y3_transport::READ_BUFFER;

use crate::config::QueueConfig;
use crate::metrics::{Drop, Metrics};
use crate::queue::{Push, Queue, Weighted};

/// A frame waiting in an outbox, with the time it was read (for the latency histogram).
#[derive(Debug)]
pub(crate) struct Queued {
    pub frame: Frame,
    pub at: Instant,
    /// Told once the frame is written to the socket (flushed); dropped unsent when the
    /// frame is dropped instead (a durable consumer acknowledges JetStream on it).
    pub written: Option<oneshot::Sender<()>>,
}

/// Bytes a frame is charged beyond its payload and metadata.
const FRAME_OVERHEAD: usize = 32;

/// Data frames smaller than this are copied out of the read buffer before they are queued
/// (one small copy), so that queued frames never pin read buffers: 6,800 queued 16-byte
/// frames each holding a 64 KiB buffer alive were +435 MB that no queue limit saw.
pub(crate) const COPY_BELOW: usize = 8 * 1024;

/// Payload and metadata bytes of a data frame.
pub(crate) fn frame_bytes(d: &y3_transport::Data) -> usize {
    d.payload.len() + d.metadata.as_bytes().len()
}

impl Weighted for Queued {
    /// A frame's bytes plus overhead; a frame large enough to stay in its read buffer is
    /// charged that whole buffer too, since it keeps it alive.
    fn weight(&self) -> usize {
        match &self.frame {
            Frame::Data(d) => {
                let bytes = frame_bytes(d);
                let pinned = if bytes < COPY_BELOW { 0 } else { READ_BUFFER };
                bytes + pinned + FRAME_OVERHEAD
            }
            _ => FRAME_OVERHEAD,
        }
    }
}

#[derive(Debug)]
enum Phase {
    Open,
    /// Deliver what is queued, then `tail` (a goaway), then stop.
    Finishing(Option<Box<Frame>>),
    /// Stop after the control frames; data was dropped.
    Aborted,
}

#[derive(Debug)]
struct Inner {
    queue: Queue<Queued>,
    phase: Phase,
    /// Pushers waiting for room; the writer wakes them only when there are some.
    waiting: usize,
}

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
    /// A downstream zipper's outbox (mesh.rs): its drops are counted as [`Drop::Mesh`] and
    /// in this per-downstream counter too.
    downstream: Option<prometheus_client::metrics::counter::Counter>,
}

impl Outbox {
    pub fn new(config: &QueueConfig, metrics: Arc<Metrics>) -> Outbox {
        Outbox {
            inner: Mutex::new(Inner {
                queue: Queue::new(config.capacity, config.max_bytes, config.policy),
                phase: Phase::Open,
                waiting: 0,
            }),
            readable: Notify::new(),
            writable: Notify::new(),
            evicted: CancellationToken::new(),
            evicted_flag: AtomicBool::new(false),
            metrics,
            block_timeout: Duration::from_millis(config.block_timeout_ms),
            downstream: None,
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
        Outbox {
            downstream: Some(dropped),
            ..Outbox::new(config, metrics)
        }
    }

    /// Counts `n` data frames of this downstream outbox as written to its zipper.
    pub fn count_forwarded(&self, n: u64) {
        self.metrics.forwarded(n);
    }

    /// Counts `n` frames of this outbox as dropped for `reason` (for a downstream's,
    /// always [`Drop::Mesh`]).
    pub fn count_drops(&self, reason: Drop, n: u64) {
        match &self.downstream {
            Some(counter) => {
                counter.inc_by(n);
                self.metrics.dropped(Drop::Mesh, n);
            }
            None => self.metrics.dropped(reason, n),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The queue stays consistent across a panic in another holder (no partial updates
        // span an unwind point), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a data frame, waiting for room under the block policy.
    pub async fn push(&self, frame: Frame, at: Instant) -> Pushed {
        self.push_tracked(frame, at, None).await
    }

    /// As [`push`](Outbox::push); `written` is told once the frame is flushed to the
    /// socket, and dropped untold if the frame never is.
    pub async fn push_tracked(
        &self,
        frame: Frame,
        at: Instant,
        written: Option<oneshot::Sender<()>>,
    ) -> Pushed {
        let item = Queued { frame, at, written };
        // Fast path: room in the queue, no waiter registration.
        let mut item = match self.try_push(item, false) {
            Ok(pushed) => return pushed,
            Err(item) => item,
        };
        // The subscriber is slow only while it makes no progress: every batch its writer
        // takes (what wakes us) restarts the clock. One that reads, however slowly, holds
        // its publishers back (the block policy's backpressure); one that stopped reading
        // is evicted after `block_timeout`.
        let mut until = tokio::time::Instant::now() + self.block_timeout;
        loop {
            let notified = self.writable.notified();
            tokio::pin!(notified);
            // Register before looking again, so a batch taken in between still wakes us.
            notified.as_mut().enable();
            item = match self.try_push(item, true) {
                Ok(pushed) => return pushed,
                Err(item) => item,
            };
            let woke = tokio::select! {
                _ = notified => {
                    until = tokio::time::Instant::now() + self.block_timeout;
                    None
                }
                _ = self.evicted.cancelled() => Some(Pushed::Evicted),
                _ = tokio::time::sleep_until(until) => {
                    self.evict();
                    Some(Pushed::Evicted)
                }
            };
            self.lock().waiting -= 1;
            if let Some(pushed) = woke {
                return pushed;
            }
        }
    }

    /// One attempt: queued (or dropped-oldest, closed), or the item back when full. With
    /// `wait`, a full queue records one more waiting pusher (the caller waits next).
    // The item comes back by value to be pushed again; boxing it would cost an allocation
    // per routed frame.
    #[allow(clippy::result_large_err)]
    fn try_push(&self, item: Queued, wait: bool) -> Result<Pushed, Queued> {
        let mut inner = self.lock();
        if !matches!(inner.phase, Phase::Open) {
            return Ok(if self.is_evicted() {
                Pushed::Evicted
            } else {
                Pushed::Closed
            });
        }
        if !self.metrics.budget.fits(item.weight()) {
            // Over the router-wide budget: dropped and counted, under either policy.
            drop(inner);
            self.count_drops(Drop::MemoryBudget, 1);
            return Ok(Pushed::DroppedOldest);
        }
        let before = inner.queue.bytes();
        let pushed = inner.queue.push(item);
        self.metrics.budget.changed(before, inner.queue.bytes());
        match pushed {
            Push::Queued => {
                drop(inner);
                self.metrics.queued(1);
                self.readable.notify_one();
                Ok(Pushed::Queued)
            }
            Push::DroppedOldest(n) => {
                drop(inner);
                self.metrics.queued(1 - n as i64);
                self.count_drops(Drop::QueueFull, n as u64);
                self.readable.notify_one();
                Ok(Pushed::DroppedOldest)
            }
            Push::Full(back) => {
                if wait {
                    inner.waiting += 1;
                }
                Err(back)
            }
        }
    }

    /// Queues a control frame ahead of the data (handshake ack, goaway).
    pub fn push_control(&self, frame: Frame) -> bool {
        let pushed = {
            let mut inner = self.lock();
            !matches!(inner.phase, Phase::Aborted)
                && inner.queue.push_control(Queued {
                    frame,
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
                let bytes = inner.queue.bytes();
                let data = inner.queue.pop_batch(out, max);
                self.metrics.budget.changed(bytes, inner.queue.bytes());
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
                                    frame: *frame,
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
                inner.phase = Phase::Finishing(tail.map(Box::new));
            }
        }
        self.readable.notify_one();
        self.writable.notify_waiters();
    }

    /// Drops the queued data (counted under `reason`), queues `goaway` if given, and makes
    /// the writer stop after the control frames.
    pub fn abort(&self, goaway: Option<Frame>, reason: Drop) {
        let dropped = {
            let mut inner = self.lock();
            if let Some(goaway) = goaway {
                inner.queue.push_control(Queued {
                    frame: goaway,
                    at: Instant::now(),
                    written: None,
                });
            }
            inner.phase = Phase::Aborted;
            let bytes = inner.queue.bytes();
            let dropped = inner.queue.clear();
            self.metrics.budget.changed(bytes, inner.queue.bytes());
            dropped
        };
        self.metrics.queued(-(dropped as i64));
        self.count_drops(reason, dropped as u64);
        self.readable.notify_one();
        self.writable.notify_waiters();
    }

    /// Evicts the subscriber as a slow consumer.
    pub fn evict(&self) {
        if self.evicted_flag.swap(true, Ordering::Relaxed) {
            return;
        }
        // The connection logs it, with the client's name and address.
        self.evicted.cancel();
        self.abort(None, Drop::SlowConsumer);
    }

    /// Whether the subscriber has been evicted.
    pub fn is_evicted(&self) -> bool {
        self.evicted_flag.load(Ordering::Relaxed)
    }

    /// Completes when the subscriber has been evicted.
    pub fn evicted(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.evicted.cancelled()
    }

    /// Data frames queued.
    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.lock().queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Policy;
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

    #[tokio::test(start_paused = true)]
    async fn a_stuck_subscriber_is_evicted_and_counted() {
        let metrics = Arc::new(Metrics::new());
        let outbox = Outbox::new(&config(2, Policy::Block, 100), metrics.clone());
        outbox.push(data(1), Instant::now()).await;
        outbox.push(data(2), Instant::now()).await;
        assert_eq!(outbox.push(data(3), Instant::now()).await, Pushed::Evicted);
        assert_eq!(metrics.stats().drops(Drop::SlowConsumer), 2);
        assert_eq!(outbox.push(data(4), Instant::now()).await, Pushed::Evicted);
        let mut out = Vec::new();
        assert!(!outbox.pop_batch(&mut out, 10).await);
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
        let frames: Vec<_> = out.into_iter().map(|q| q.frame).collect();
        assert_eq!(frames, [data(1), Frame::HandshakeAck]);
    }
}
