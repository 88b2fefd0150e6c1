//! [`Spread`]: how a busy connection reader lets an idle worker take half of its work.
//!
//! A reader that routes a frame wakes the writer task of each recipient's connection. On
//! tokio's multi-thread runtime a task woken from a worker goes into that worker's LIFO
//! slot, which other workers cannot steal: with one recipient (one source, one sink),
//! the writer then runs on the reader's thread, after the reader, while the other workers
//! sleep. A busy source's reader rarely gives the thread up at all: frames already in its
//! read buffer are decoded without polling the socket, so it spends no cooperative budget
//! and never yields. Measured under `y3-lab net e2e` (64 B × 1 subscriber, TCP), one worker
//! of `y3 serve` ran 88% of the router's CPU, and that one thread was the busiest of the
//! whole pipeline (source, router, sink).
//!
//! Every [`Spread::EVERY`] frames read without waiting in between (on the socket, or for room
//! in a recipient's queue: a reader that waits gives its thread up anyway, and its wake-up
//! may land on another worker), the reader yields by waking itself while it runs: tokio
//! then requeues it at the back of its worker's queue, where it can be stolen, and wakes an
//! idle worker (if there is one and none is already looking for work). The writer runs
//! here, the reader moves to the other worker, and routing and writing proceed on two
//! cores at once.
//!
//! ```text
//!  before:  worker 1  [read+route ×N][write][read+route ×N][write] ...
//!           worker 2  (parked)
//!  after:   worker 1  [read+route ×EVERY][write][write] ...
//!           worker 2                   [read+route ×EVERY][read+route ...
//! ```
//!
//! (`tokio::task::yield_now` does not do this: it defers the task until its worker has
//! nothing else to run and then resumes it on the same worker, waking nobody.) The cost is
//! one more poll of the reader per [`Spread::EVERY`] frames, plus one wake of an idle
//! worker when there is one; on a current-thread runtime it is a plain yield.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Counts a reader's frames and hands it over every [`Spread::EVERY`].
#[derive(Debug, Default)]
pub(crate) struct Spread {
    /// Frames since the last hand-over or wait.
    frames: u32,
}

impl Spread {
    /// Frames a reader routes between two hand-overs: a yield per this many frames is
    /// noise against their routing (about 1 µs a frame), and at most this many frames'
    /// writes wait behind the reader on its thread.
    pub const EVERY: u32 = 64;

    /// Runs `step` (a wait on the socket, a push into a recipient's queue that may wait
    /// for room); if it waits (is pending once), the task gave its thread up there and the
    /// count starts over.
    ///
    /// A [`Watch`] polls `step` where it lies: the step is built once, in the caller's
    /// future, and not moved again (an `async fn` here moved it into its own pinned slot on
    /// the first poll: a `memcpy` of the whole step, 3 KiB for a routed frame's, per
    /// frame).
    #[inline]
    pub fn watch<F: Future>(&mut self, step: F) -> Watch<'_, F> {
        Watch { spread: self, step }
    }

    /// A frame routed to more than one subscriber: every writer woken for it (with the
    /// rest of its read, `wakes.rs`) but the last goes where an idle worker takes it
    /// (tokio's LIFO slot holds one task), so the work spreads
    /// without a hand-over, and the count starts over. With five subscribers a hand-over
    /// only added wake-ups: router CPU per message +10% at 1 KiB × 5 (`net e2e`, A/B).
    #[inline]
    pub fn fanned_out(&mut self) {
        self.frames = 0;
    }

    /// Whether the next [`frame`](Spread::frame) hands the reader over (whoever it owes a
    /// wake-up is woken first, so that they run meanwhile).
    #[inline]
    pub fn due(&self) -> bool {
        self.frames + 1 >= Spread::EVERY
    }

    /// Counts one frame; every [`Spread::EVERY`]th since the last hand-over or wait, yields
    /// the task as described in the module documentation. Returns whether it yielded (the
    /// task may have waited for a thread: a clock read before it is stale).
    #[inline]
    pub async fn frame(&mut self) -> bool {
        self.frames += 1;
        if self.frames < Spread::EVERY {
            return false;
        }
        self.frames = 0;
        HandOver { yielded: false }.await;
        true
    }
}

pin_project_lite::pin_project! {
    /// [`Spread::watch`]'s future: `step`, polled in place; a pending poll starts the
    /// count over.
    pub(crate) struct Watch<'s, F> {
        spread: &'s mut Spread,
        #[pin]
        step: F,
    }
}

impl<F: Future> Future for Watch<'_, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let polled = this.step.poll(cx);
        if polled.is_pending() {
            this.spread.frames = 0;
        }
        polled
    }
}

/// Pending once, having woken its own task (a yield that the runtime requeues as stealable
/// and announces to idle workers), then ready.
struct HandOver {
    yielded: bool,
}

impl Future for HandOver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn it_yields_once_every_so_many_frames_read_without_a_wait() {
        let mut spread = Spread::default();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut frame = |spread: &mut Spread| {
            let mut frame = std::pin::pin!(spread.frame());
            match frame.as_mut().poll(&mut cx) {
                Poll::Ready(handed) => {
                    assert!(!handed);
                    false
                }
                Poll::Pending => {
                    assert_eq!(frame.as_mut().poll(&mut cx), Poll::Ready(true));
                    true
                }
            }
        };
        for round in 0..3 {
            for n in 1..Spread::EVERY {
                assert!(!frame(&mut spread), "round {round}: frame {n} yielded");
            }
            assert!(frame(&mut spread), "round {round}: no yield");
        }
        // A step that waits starts the count over; one that does not, does not.
        for _ in 1..Spread::EVERY {
            assert!(!frame(&mut spread));
        }
        assert_eq!(watched(&mut spread, std::future::ready(7)), 7);
        assert!(
            frame(&mut spread),
            "a step that did not wait reset the count"
        );
        for _ in 1..Spread::EVERY {
            assert!(!frame(&mut spread));
        }
        assert_eq!(watched(&mut spread, pending_once()), 8);
        for _ in 1..Spread::EVERY {
            assert!(!frame(&mut spread));
        }
        assert!(frame(&mut spread));
    }

    /// Polls `spread.watch(step)` to its end with a no-op waker.
    fn watched<F: Future<Output = u32>>(spread: &mut Spread, step: F) -> u32 {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut watch = std::pin::pin!(spread.watch(step));
        loop {
            if let Poll::Ready(v) = watch.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    /// Pending once, then 8.
    async fn pending_once() -> u32 {
        HandOver { yielded: false }.await;
        8
    }

    /// A reader that never waits on anything still lets a task it woke run: without the
    /// hand-over, the woken task would sit in the reader's LIFO slot, unstealable, until
    /// the reader gave the thread up (here: never, and the test fails at its deadline).
    #[test]
    fn a_busy_task_lets_the_task_it_woke_run() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // Both workers up and idle.
            tokio::spawn(async {}).await.unwrap();
            let ran = Arc::new(AtomicBool::new(false));
            let busy = {
                let ran = ran.clone();
                tokio::spawn(async move {
                    let notify = Arc::new(tokio::sync::Notify::new());
                    let woken = {
                        let (notify, ran) = (notify.clone(), ran.clone());
                        tokio::spawn(async move {
                            notify.notified().await;
                            ran.store(true, Ordering::SeqCst);
                        })
                    };
                    // Let `woken` register, then wake it from this worker (its LIFO slot).
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    notify.notify_one();
                    let mut spread = Spread::default();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                    // Busy: never pending except through the hand-over.
                    while !ran.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                        spread.frame().await;
                    }
                    let saw = ran.load(Ordering::SeqCst);
                    woken.await.unwrap();
                    saw
                })
            };
            assert!(
                busy.await.unwrap(),
                "the woken task did not run while the busy one ran"
            );
        });
    }
}
