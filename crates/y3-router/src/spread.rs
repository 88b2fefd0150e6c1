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
//! Every [`Spread::EVERY`] frames read without waiting on the socket in between (a reader
//! that waits gives its thread up anyway, and the next read's wake-up may land on another
//! worker), the reader yields by waking itself while it runs: tokio
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
    /// Frames since the last hand-over or wait on the socket.
    frames: u32,
}

impl Spread {
    /// Frames a reader routes between two hand-overs: a yield per this many frames is
    /// noise against their routing (about 1 µs a frame), and at most this many frames'
    /// writes wait behind the reader on its thread.
    pub const EVERY: u32 = 64;

    /// The reader is about to wait on its socket: it gives its thread up there, so the
    /// count starts over.
    #[inline]
    pub fn waiting(&mut self) {
        self.frames = 0;
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
        // A wait on the socket starts the count over.
        for _ in 1..Spread::EVERY {
            assert!(!frame(&mut spread));
        }
        spread.waiting();
        for _ in 1..Spread::EVERY {
            assert!(!frame(&mut spread));
        }
        assert!(frame(&mut spread));
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
