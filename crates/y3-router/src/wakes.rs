//! [`Wakes`]: a connection reader's writer wake-ups, coalesced per read.
//!
//! A frame routed to five subscribers used to wake five writer tasks, and a reader with a
//! read buffer full of frames woke them again for every frame: each writer then took one
//! frame, wrote it (one `write(2)`), and went back to sleep, only to be woken for the next.
//! Measured at 64 B × 5 subscribers (TCP, `scripts/syscalls-router`, `scripts/icount-router`
//! with `SINKS=5`) that was a wake-up, a poll and a `write` per delivery.
//!
//! A reader that defers its wake-ups pushes its frames into their outboxes quietly
//! ([`Outbox::offer_deferred`]) and notes each outbox it owes a wake-up here, once however
//! many frames it queued there; it wakes them all when it is about to go back to its socket
//! (the frames of one read are routed), before anything it waits for, and at least every
//! [`WAKE_EVERY`] frames. Each writer then takes the read's frames as one batch: one
//! wake-up and one `write` per subscriber per read, as a read loop that appends to every
//! recipient's out-buffer and flushes each once per read would.
//!
//! ```text
//!  read ─▶ frame 1 ─route─▶ outbox A, B, C (quiet)   owed: [A, B, C]
//!          frame 2 ─route─▶ outbox A, B, C (quiet)   owed: [A, B, C]   (no change)
//!          ...
//!  buffer exhausted / a wait / WAKE_EVERY frames / the reader ends
//!          ─▶ wake A, B, C (each once) ─▶ owed: []
//! ```
//!
//! Order per subscriber is the queue's (wakes only say "look"); nothing is held back but
//! the wake-up itself, for at most [`WAKE_EVERY`] frames of the reader's own work. An
//! outbox past [`MAX_OWED`] distinct ones in a round is woken at once, as before (a frame
//! to hundreds of subscribers pays no scan per delivery). Dropped (the reader ends, or is
//! cancelled), it wakes whoever it still owes.

use std::future::Future;
use std::sync::Arc;

use crate::outbox::Outbox;

/// Most frames a reader routes between two rounds of wake-ups: their writers wait at most
/// this many frames of routing (about 1 µs each, 5 µs at five subscribers) for the first.
/// The same as [`Spread::EVERY`](crate::spread::Spread::EVERY), whose hand-over wakes them
/// too.
pub(crate) const WAKE_EVERY: u32 = 64;

/// Most distinct outboxes owed a wake-up at once; one more is woken at once (a linear scan
/// finds an outbox already owed: cheap for a few, not for hundreds).
pub(crate) const MAX_OWED: usize = 16;

/// The writers a reader owes a wake-up (see the module).
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    owed: Vec<Arc<Outbox>>,
    /// Where in `owed` the next outbox is looked for first: a reader's frames go to the
    /// same recipients in the same order, frame after frame, so the one owed after the last
    /// one found is usually the next one pushed to (one comparison, not a scan).
    next: usize,
    /// Frames routed since the last round.
    frames: u32,
}

impl Wakes {
    /// Notes that `outbox` was pushed to quietly: its writer is woken with the next round.
    #[inline]
    pub fn owe(&mut self, outbox: &Arc<Outbox>) {
        if let Some(o) = self.owed.get(self.next) {
            if Arc::ptr_eq(o, outbox) {
                self.next = (self.next + 1) % self.owed.len();
                return;
            }
        }
        if let Some(at) = self.owed.iter().position(|o| Arc::ptr_eq(o, outbox)) {
            self.next = (at + 1) % self.owed.len();
            return;
        }
        if self.owed.len() < MAX_OWED {
            self.next = 0;
            self.owed.push(outbox.clone());
        } else {
            outbox.wake();
        }
    }

    /// Counts a routed frame; the [`WAKE_EVERY`]th since the last round wakes every writer
    /// owed.
    #[inline]
    pub fn routed(&mut self) {
        self.frames += 1;
        if self.frames >= WAKE_EVERY {
            self.wake_all();
        }
    }

    /// Wakes every writer owed, each once.
    #[inline]
    pub fn wake_all(&mut self) {
        self.frames = 0;
        self.next = 0;
        for outbox in self.owed.drain(..) {
            outbox.wake();
        }
    }

    /// Whether no wake-up is owed.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// Runs `step`, waking every writer owed first if it waits (is pending once): a reader
    /// never sleeps on writers it has not woken (a push waiting for room in a queue whose
    /// writer was never told of the frames already in it would wait for nothing).
    pub async fn around<F: Future>(&mut self, step: F) -> F::Output {
        let mut step = std::pin::pin!(step);
        std::future::poll_fn(|cx| {
            let polled = step.as_mut().poll(cx);
            if polled.is_pending() {
                self.wake_all();
            }
            polled
        })
        .await
    }
}

impl Drop for Wakes {
    fn drop(&mut self) {
        self.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QueueConfig;
    use crate::metrics::Metrics;
    use crate::outbox::{Pushed, Queued};
    use std::task::Context;
    use std::time::Instant;
    use y3_transport::frame::{Data, Frame};

    fn outbox() -> Arc<Outbox> {
        Arc::new(Outbox::new(
            &QueueConfig::default(),
            Arc::new(Metrics::new()),
        ))
    }

    fn quiet_push(o: &Outbox, id: u8) {
        let item = Queued {
            frame: Arc::new(Frame::Data(Data::new(0x10, vec![id]))),
            at: Instant::now(),
            written: None,
        };
        assert!(matches!(o.offer_deferred(item), Ok(Pushed::Queued)));
    }

    /// Whether the writer of `o` would be woken now: a pop that finds the queue empty
    /// waits; one told to look returns at once.
    /// (Takes the wake-up, as the writer would.)
    fn woken(o: &Outbox) -> bool {
        o.take_wake()
    }

    /// A writer is told once per round, not per frame, and every writer owed is told when
    /// the round ends: by the frame count, by a wait, or by the reader going away.
    #[test]
    fn each_writer_is_woken_once_per_round() {
        let (a, b) = (outbox(), outbox());
        let mut wakes = Wakes::default();
        for i in 0..3 {
            quiet_push(&a, i);
            wakes.owe(&a);
            quiet_push(&b, i);
            wakes.owe(&b);
            wakes.routed();
        }
        assert_eq!(wakes.owed.len(), 2, "each outbox owed once");
        assert!(!woken(&a) && !woken(&b), "nobody woken mid-round");
        for _ in 3..WAKE_EVERY {
            wakes.routed();
        }
        assert!(wakes.is_empty());
        assert!(woken(&a) && woken(&b));
        // A wait ends the round too.
        quiet_push(&a, 9);
        wakes.owe(&a);
        {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let mut step = std::pin::pin!(wakes.around(std::future::pending::<()>()));
            assert!(step.as_mut().poll(&mut cx).is_pending());
        }
        assert!(wakes.is_empty() && woken(&a));
        // And the reader going away.
        quiet_push(&b, 9);
        wakes.owe(&b);
        drop(wakes);
        assert!(woken(&b));
    }

    /// Past `MAX_OWED` distinct outboxes in a round, the next is woken at once.
    #[test]
    fn past_the_cap_an_outbox_is_woken_at_once() {
        let boxes: Vec<_> = (0..=MAX_OWED).map(|_| outbox()).collect();
        let mut wakes = Wakes::default();
        for o in &boxes {
            quiet_push(o, 1);
            wakes.owe(o);
        }
        assert_eq!(wakes.owed.len(), MAX_OWED);
        assert!(woken(&boxes[MAX_OWED]));
        assert!(!woken(&boxes[0]));
        wakes.wake_all();
        assert!(boxes[..MAX_OWED].iter().all(|o| woken(o)));
    }
}
