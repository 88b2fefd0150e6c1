//! Stored acknowledgements (`spec/frames.md`, "Stored"): for a y3 client whose handshake
//! asked for them, the router tells it how many of its data frames are stored, so that it
//! can forget them. A frame is stored once queued to at least one recipient (a local
//! subscriber, a downstream zipper) and flushed to its socket by its writer, or handed to
//! the federation, and, for a durable tag of the federation, once JetStream has it
//! (`routing::route` decides); frames complete out of order (durable ones later), the
//! count only moves over a contiguous prefix. A frame the router drops is
//! *refused*, never stored: listed with its reason in the stored frame whose count first
//! covers it, so that no client is told "stored" for a frame that reached no one. Refused
//! by the router's rules (over `limits.max_frame_len`, past the hop limit, a loop), the
//! client must not resend it; refused as `no_subscriber` (nobody took it), a durable
//! client keeps it and sends it again later (`RefusedReason::is_retried`).
//!
//! ```text
//!  reader: data frame ─▶ Acks::take (index i) ─▶ route ─▶ done now, or by the publisher
//!                                                      └▶ refused(reason): noted as a run
//!  ack task: every few ms, when the prefix grew ─▶ outbox ◀─ Frame::Stored(prefix, runs)
//! ```
//!
//! Runs are noted under the same lock that moves the prefix, and the task takes both under
//! one lock, so a count never passes a refusal it does not carry. Consecutive refusals of
//! one reason are one run. At most [`MAX_RUNS`] runs wait; a refusal past them leaves its
//! frame unacknowledged (the client resends it later), never counted as stored.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use y3_transport::frame::{Frame, RefusedReason, RefusedRun, Stored};

use crate::outbox::Outbox;

/// How long the ack task lets completions gather before it writes one frame for them.
const GATHER: Duration = Duration::from_millis(5);

/// Refused runs waiting to be sent, at most (a client that does not read its stored
/// frames cannot make them grow without bound); also the most one stored frame carries
/// (9 bytes each).
pub(crate) const MAX_RUNS: usize = 1024;

#[derive(Debug, Default)]
struct State {
    /// Data frames read (the next frame's index).
    taken: u32,
    /// The first `stored` frames are stored.
    stored: u32,
    /// Stored frames past the prefix.
    early: BTreeSet<u32>,
    /// Refused frames not yet sent, in index order of refusal.
    refused: Vec<RefusedRun>,
}

impl State {
    /// Notes `index` as refused; false when [`MAX_RUNS`] runs already wait.
    fn note_refused(&mut self, index: u32, reason: RefusedReason) -> bool {
        if let Some(last) = self.refused.last_mut() {
            if last.reason == reason && last.first.wrapping_add(last.frames) == index {
                last.frames += 1;
                return true;
            }
        }
        if self.refused.len() >= MAX_RUNS {
            return false;
        }
        self.refused.push(RefusedRun {
            first: index,
            frames: 1,
            reason,
        });
        true
    }
}

/// One connection's acknowledgements.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    state: Mutex<State>,
    moved: Notify,
    /// Writes as soon as the count moves (after a yield, not [`GATHER`]).
    immediate: bool,
}

/// One data frame to acknowledge once stored.
#[derive(Debug)]
pub(crate) struct Ticket {
    acks: Arc<Acks>,
    index: u32,
}

impl Ticket {
    /// The frame is stored.
    pub fn done(self) {
        self.acks.done(self.index);
    }

    /// The frame was dropped (by the router's rules, or nobody took it): reported as
    /// refused with `reason`, never as stored.
    pub fn refused(self, reason: RefusedReason) {
        self.acks.refused(self.index, reason);
    }

    /// The frame was queued to recipients, each with the receiver of its writer's "flushed
    /// to the socket" signal (`Outbox::push_tracked`): done once the first is told,
    /// refused as `no_subscriber` when every one was dropped untold (the frame left every
    /// queue unwritten: the client sends it again). Settled by a task of its own, so the
    /// reader never waits for a subscriber.
    pub fn done_when_written(self, waits: Vec<oneshot::Receiver<()>>) {
        if waits.is_empty() {
            return self.refused(RefusedReason::NoSubscriber);
        }
        tokio::spawn(async move {
            match futures_util::future::select_ok(waits).await {
                Ok(_) => self.done(),
                Err(_) => self.refused(RefusedReason::NoSubscriber),
            }
        });
    }
}

impl Acks {
    /// The acknowledgements of a connection over `transport`: an in-memory link is told
    /// at once, since a stored frame there costs no socket write; a socket's completions
    /// gather for [`GATHER`] into one frame. (The MQTT listener reads its publishes'
    /// acknowledgements in-process, [`Acks::moved_past`].)
    pub fn for_transport(transport: y3_transport::TransportKind) -> Acks {
        Acks {
            immediate: transport == y3_transport::TransportKind::Memory,
            ..Acks::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ticket of the next data frame read.
    pub fn take(self: &Arc<Self>) -> Ticket {
        let mut s = self.lock();
        let index = s.taken;
        s.taken = s.taken.wrapping_add(1);
        Ticket {
            acks: self.clone(),
            index,
        }
    }

    fn refused(&self, index: u32, reason: RefusedReason) {
        let mut s = self.lock();
        if !s.note_refused(index, reason) {
            // Left unacknowledged: the prefix stops before it, nothing is said wrongly.
            tracing::debug!(index, "refused runs full: frame left unacknowledged");
            return;
        }
        self.done_locked(s, index);
    }

    fn done(&self, index: u32) {
        let s = self.lock();
        self.done_locked(s, index);
    }

    fn done_locked(&self, mut s: std::sync::MutexGuard<'_, State>, index: u32) {
        if index != s.stored {
            s.early.insert(index);
            return;
        }
        s.stored = s.stored.wrapping_add(1);
        loop {
            let next = s.stored;
            if !s.early.remove(&next) {
                break;
            }
            s.stored = next.wrapping_add(1);
        }
        drop(s);
        self.moved.notify_one();
    }

    /// How many frames are handled (stored or refused).
    #[cfg(test)]
    fn stored(&self) -> u32 {
        self.lock().stored
    }

    /// The stored frame to send now, if the count moved since `sent`: the count and every
    /// refused run waiting, taken under one lock. The runs leave the state; the caller
    /// puts them back ([`Acks::unsend`]) if the frame could not be queued.
    fn take_frame(&self, sent: u32) -> Option<Stored> {
        let mut s = self.lock();
        if s.stored == sent {
            return None;
        }
        // Waiting runs lie at or past `sent` (a frame is handled once); the prefix passes a
        // run whole (its frames are all handled), so a run starting before the count is in.
        let newly = s.stored.wrapping_sub(sent);
        let covered = s
            .refused
            .iter()
            .take_while(|r| r.first.wrapping_sub(sent) < newly)
            .count();
        Some(Stored {
            count: s.stored,
            refused: s.refused.drain(..covered).collect(),
        })
    }

    /// Puts back the runs of a stored frame that was not queued, ahead of newer ones.
    fn unsend(&self, mut runs: Vec<RefusedRun>) {
        let mut s = self.lock();
        runs.append(&mut s.refused);
        s.refused = runs;
    }

    /// The count and refused runs once the count moved past `sent`: for a client served
    /// in-process (the MQTT listener, `mqtt/conn.rs`), which reads them without a frame.
    /// Cancel-safe: nothing leaves the state until it is returned.
    pub async fn moved_past(&self, sent: u32) -> Stored {
        loop {
            if let Some(stored) = self.take_frame(sent) {
                return stored;
            }
            self.moved.notified().await;
        }
    }

    /// Writes a [`Frame::Stored`] into `outbox` whenever the count moved, until `stop`.
    /// While the outbox's control queue is full (the client does not read), it tries
    /// again every few milliseconds: no count or refusal is lost.
    pub async fn run(self: Arc<Self>, outbox: Arc<Outbox>, stop: CancellationToken) {
        let mut sent = 0u32;
        let mut retry = false;
        loop {
            if !retry {
                tokio::select! {
                    _ = self.moved.notified() => {}
                    _ = stop.cancelled() => return,
                }
            } else if stop.is_cancelled() {
                return;
            }
            if self.immediate && !retry {
                // Completions of the same moment still share one frame.
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(GATHER).await;
            }
            retry = false;
            let Some(frame) = self.take_frame(sent) else {
                continue;
            };
            let count = frame.count;
            if outbox.push_control(Frame::Stored(frame.clone())) {
                sent = count;
            } else {
                self.unsend(frame.refused);
                retry = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_moves_over_the_contiguous_prefix() {
        let acks = Arc::new(Acks::default());
        let t: Vec<Ticket> = (0..4).map(|_| acks.take()).collect();
        let mut t = t.into_iter();
        let (t0, t1, t2, t3) = (
            t.next().unwrap(),
            t.next().unwrap(),
            t.next().unwrap(),
            t.next().unwrap(),
        );
        t1.done();
        assert_eq!(acks.stored(), 0);
        t0.done();
        assert_eq!(acks.stored(), 2);
        t3.done();
        assert_eq!(acks.stored(), 2);
        t2.done();
        assert_eq!(acks.stored(), 4);
    }

    #[test]
    fn refusals_are_runs_carried_with_the_count_that_covers_them() {
        let acks = Arc::new(Acks::default());
        let t: Vec<Ticket> = (0..4).map(|_| acks.take()).collect();
        let mut t = t.into_iter();
        t.next().unwrap().done();
        t.next().unwrap().refused(RefusedReason::TooLong);
        t.next().unwrap().refused(RefusedReason::TooLong);
        t.next().unwrap().refused(RefusedReason::HopLimit);
        let frame = acks.take_frame(0).unwrap();
        assert_eq!(frame.count, 4);
        let runs: Vec<(u32, u32, RefusedReason)> = frame
            .refused
            .iter()
            .map(|r| (r.first, r.frames, r.reason))
            .collect();
        assert_eq!(
            runs,
            [
                (1, 2, RefusedReason::TooLong),
                (3, 1, RefusedReason::HopLimit)
            ]
        );
        // Not queued: put back, and sent again with the count.
        acks.unsend(frame.refused.clone());
        assert_eq!(acks.take_frame(0), Some(frame));
        assert_eq!(acks.take_frame(4), None);
        // A refusal past the prefix waits for the count that covers it.
        let (t4, t5) = (acks.take(), acks.take());
        t5.refused(RefusedReason::Loop);
        assert_eq!(acks.take_frame(4), None);
        t4.done();
        let later = acks.take_frame(4).unwrap();
        assert_eq!((later.count, later.refused.len()), (6, 1));
        assert_eq!(later.refused[0].first, 5);
    }

    #[test]
    fn refusals_past_the_bound_stay_unacknowledged() {
        let acks = Arc::new(Acks::default());
        for i in 0..MAX_RUNS as u32 * 2 {
            // Alternating reasons: one run each.
            let reason = if i % 2 == 0 {
                RefusedReason::Loop
            } else {
                RefusedReason::HopLimit
            };
            acks.take().refused(reason);
        }
        assert_eq!(acks.stored(), MAX_RUNS as u32);
        let frame = acks.take_frame(0).unwrap();
        assert_eq!(frame.refused.len(), MAX_RUNS);
    }
}
