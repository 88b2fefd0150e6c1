//! The window of frames a client keeps until the router has stored them (`spec/frames.md`,
//! "Stored acknowledgements"): one implementation for [`DurableSource`](super::DurableSource)
//! and a durable [`StreamFunction`](super::StreamFunction)'s outputs. It does no IO; its
//! owner writes what [`Window::next_unwritten`] hands out and feeds it the router's counts.
//!
//! ```text
//!  unacked: [ stored soon ... | written on this connection ... | not written yet ... ]
//!            ◀── stored(n) drains the front        next_unwritten() ──▶
//!  reconnected(): everything kept is "not written yet" again, in order
//! ```
//!
//! A frame the router refused (listed in a stored frame's refused runs) leaves the window
//! as a stored one does, never to be resent, and is recorded in the window's [`Refusals`];
//! except one refused as `no_subscriber` (not stored: nobody took it), which the window
//! keeps, *deferred*, and hands out again once its backoff has passed ([`RETRY_FIRST`],
//! doubled per retry of that frame up to [`RETRY_MAX`]), ahead of newer frames. Deferred
//! frames count in [`Window::len`], so the owner's bound on kept frames bounds them too.
//!
//! ```text
//!  stored(n, runs: no_subscriber i..j) ─▶ frames i..j ─▶ deferred [(due, frame), ...]
//!  next_unwritten(): a due deferred frame first, else the oldest frame not written
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::frame::{Data, RefusedReason, Stored};
use crate::metadata;

/// Refused frames whose details a [`Refusals`] keeps (the first ones); all are counted.
pub const MAX_REFUSALS_KEPT: usize = 1024;

/// How long a frame the router refused as `no_subscriber` waits before it is written
/// again, the first time; each further retry of the frame doubles it, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(100);

/// The longest wait before a frame refused as `no_subscriber` is written again.
pub const RETRY_MAX: Duration = Duration::from_secs(2);

/// One data frame the router refused (`spec/frames.md`, "Stored acknowledgements"): it was
/// delivered to no one, and the client does not send it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The frame's tag.
    pub tag: u32,
    /// Its `yomo-tid` (empty when it had none).
    pub tid: String,
    /// Why the router refused it.
    pub reason: RefusedReason,
}

#[derive(Debug, Default)]
struct RefusalLog {
    /// Frames the router answered `no_subscriber` or `not_stored`: kept and sent again.
    retried: u64,
    count: u64,
    by_reason: Vec<(RefusedReason, u64)>,
    kept: Vec<Refused>,
}

/// The frames a durable client's router refused: a shared handle (clones see the same
/// record), from [`DurableSource::refusals`](super::DurableSource::refusals) or
/// [`StreamFunction::refusals`](super::StreamFunction::refusals). Every refusal is
/// counted; the details of the first [`MAX_REFUSALS_KEPT`] are kept. The first refusal of
/// each reason is logged as a warning, later ones at debug level.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<RefusalLog>>);

impl Refusals {
    fn lock(&self) -> std::sync::MutexGuard<'_, RefusalLog> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frames refused so far (delivered to no one, not sent again). Frames refused as
    /// `no_subscriber` are not among them: see [`retried`](Refusals::retried).
    pub fn count(&self) -> u64 {
        self.lock().count
    }

    /// Times the router answered a frame `no_subscriber` (nobody took it) or `not_stored`
    /// (JetStream did not store it) so far: each time the frame was kept and sent again
    /// after a backoff ([`RefusedReason::is_retried`]).
    pub fn retried(&self) -> u64 {
        self.lock().retried
    }

    fn record_retry(&self, data: &Data) {
        let mut log = self.lock();
        log.retried += 1;
        let tag = data.tag;
        if log.retried == 1 {
            tracing::warn!(
                tag = format_args!("{tag:#x}"),
                "nobody subscribes to this tag yet: the router did not store the frame; it is \
                 kept and sent again with backoff (up to 2 s) until a subscriber takes it, as \
                 long as the client's window has room; further retries are logged at debug \
                 level"
            );
        } else {
            tracing::debug!(
                tag = format_args!("{tag:#x}"),
                "frame kept: no subscriber yet"
            );
        }
    }

    /// Frames refused so far for `reason`.
    pub fn count_of(&self, reason: RefusedReason) -> u64 {
        let log = self.lock();
        log.by_reason
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    /// The first [`MAX_REFUSALS_KEPT`] refused frames, in the order they were sent.
    pub fn list(&self) -> Vec<Refused> {
        self.lock().kept.clone()
    }

    fn record(&self, data: &Data, reason: RefusedReason) {
        let tid = match data.metadata.get(metadata::TID) {
            Ok(Some(tid)) => tid.to_owned(),
            _ => String::new(),
        };
        let mut log = self.lock();
        log.count += 1;
        let first = match log.by_reason.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                log.by_reason.push((reason, 1));
                true
            }
        };
        let tag = data.tag;
        if first {
            tracing::warn!(
                tag = format_args!("{tag:#x}"),
                tid = %tid,
                reason = reason.kind(),
                "the router refused a frame (delivered to no one, not sent again); further \
                 refusals for this reason are logged at debug level"
            );
        } else {
            tracing::debug!(tag = format_args!("{tag:#x}"), tid = %tid, reason = reason.kind(), "frame refused");
        }
        if log.kept.len() < MAX_REFUSALS_KEPT {
            log.kept.push(Refused { tag, tid, reason });
        }
    }
}

/// One frame kept until stored.
#[derive(Debug)]
struct Kept {
    data: Data,
    /// Times the router answered it `no_subscriber` or `not_stored`.
    retries: u32,
}

/// Frames written and not yet stored, oldest first, with the counts of the current
/// connection.
#[derive(Debug, Default)]
pub(crate) struct Window {
    /// Kept, written on this connection or not yet, and not yet stored: in the order
    /// written, then the order to write.
    unacked: VecDeque<Kept>,
    /// Refused as `no_subscriber`, each with when to write it again, in the order refused.
    deferred: VecDeque<(Instant, Kept)>,
    /// Frames of `unacked` written on this connection (the rest are still to be written).
    written: usize,
    /// The router's last stored count on this connection.
    stored: u32,
    /// Frames written again on a later connection, over the window's life.
    resent: u64,
    /// Frames the router refused, over the window's life.
    pub refusals: Refusals,
}

impl Window {
    /// An empty window whose refusals are recorded in `refusals`.
    pub fn recording_to(refusals: Refusals) -> Window {
        Window {
            refusals,
            ..Window::default()
        }
    }

    /// Frames kept and not yet stored (deferred ones included).
    pub fn len(&self) -> usize {
        self.unacked.len() + self.deferred.len()
    }

    /// Whether every frame kept so far is stored.
    pub fn is_empty(&self) -> bool {
        self.unacked.is_empty() && self.deferred.is_empty()
    }

    /// Frames kept that this connection has not carried yet (deferred ones included).
    pub fn unwritten(&self) -> usize {
        self.unacked.len() - self.written + self.deferred.len()
    }

    /// When the first deferred frame is due to be written again, if any waits.
    pub fn next_due(&self) -> Option<Instant> {
        self.deferred.front().map(|(due, _)| *due)
    }

    /// Frames written again on a later connection so far.
    pub fn resent(&self) -> u64 {
        self.resent
    }

    /// Keeps `data` until the router stores it, as a copy that pins no read buffer.
    pub fn keep(&mut self, mut data: Data) {
        data.detach();
        self.unacked.push_back(Kept { data, retries: 0 });
    }

    /// The next frame to write on this connection, counted as written: a deferred frame
    /// whose time has come, else the oldest frame this connection has not carried yet.
    pub fn next_unwritten(&mut self) -> Option<Data> {
        self.next_unwritten_at(Instant::now())
    }

    /// [`next_unwritten`](Window::next_unwritten) as of `now`.
    fn next_unwritten_at(&mut self, now: Instant) -> Option<Data> {
        if self.deferred.front().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, kept)) = self.deferred.pop_front() {
                let data = kept.data.clone();
                self.unacked.insert(self.written, kept);
                self.written += 1;
                return Some(data);
            }
        }
        let next = self.unacked.get(self.written)?.data.clone();
        self.written += 1;
        Some(next)
    }

    /// Undoes the last [`next_unwritten`](Window::next_unwritten), which returned a frame
    /// nobody took (its write did not happen): it is due again at once.
    pub fn unwrite_deferred(&mut self) {
        let Some(last) = self.written.checked_sub(1) else {
            return;
        };
        if let Some(kept) = self.unacked.remove(last) {
            self.written = last;
            self.deferred.push_front((Instant::now(), kept));
        }
    }

    /// The router says the first `stored.count` data frames of this connection are handled
    /// (modulo 2^32), those in its refused runs refused: they are recorded in
    /// [`refusals`](Window::refusals). A count past what was written, from a confused
    /// router, forgets no more than was written; a run outside the frames the count newly
    /// covers is ignored. Frames refused as `no_subscriber` are deferred, not forgotten.
    pub fn stored(&mut self, stored: &Stored) {
        self.stored_at(stored, Instant::now());
    }

    /// [`stored`](Window::stored) as of `now`.
    fn stored_at(&mut self, stored: &Stored, now: Instant) {
        let n = stored.count;
        let newly = (n.wrapping_sub(self.stored) as usize).min(self.written);
        let mut retry = Vec::new();
        for run in &stored.refused {
            let from = run.first.wrapping_sub(self.stored) as usize;
            let to = from.saturating_add(run.frames as usize).min(newly);
            for i in from.min(to)..to {
                if run.reason.is_retried() {
                    retry.push(i);
                } else {
                    self.refusals.record(&self.unacked[i].data, run.reason);
                }
            }
        }
        retry.sort_unstable();
        retry.dedup();
        let mut retry = retry.into_iter().peekable();
        for (i, mut kept) in self.unacked.drain(..newly).enumerate() {
            if retry.next_if_eq(&i).is_some() {
                self.refusals.record_retry(&kept.data);
                let wait = RETRY_FIRST
                    .saturating_mul(1u32 << kept.retries.min(16))
                    .min(RETRY_MAX);
                kept.retries = kept.retries.saturating_add(1);
                self.deferred.push_back((now + wait, kept));
            }
        }
        self.written -= newly;
        self.stored = n;
    }

    /// A new connection: every frame kept is to be written again, in order, and the
    /// router counts from 0.
    pub fn reconnected(&mut self) {
        self.resent += self.written as u64;
        self.written = 0;
        self.stored = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(n: u32) -> Window {
        let mut w = Window::default();
        for i in 0..n {
            w.keep(Data::new(i, &b"x"[..]));
        }
        w
    }

    fn count(n: u32) -> Stored {
        Stored::count(n)
    }

    fn tags(w: &mut Window) -> Vec<u32> {
        std::iter::from_fn(|| w.next_unwritten().map(|d| d.tag)).collect()
    }

    #[test]
    fn frames_nobody_took_are_kept_and_written_again_after_a_growing_backoff() {
        use crate::frame::RefusedRun;
        let mut w = window(4);
        let t0 = Instant::now();
        assert_eq!(tags(&mut w), [0, 1, 2, 3]);
        let none = |first, frames| Stored {
            count: 4,
            refused: vec![RefusedRun {
                first,
                frames,
                reason: RefusedReason::NoSubscriber,
            }],
        };
        w.stored_at(&none(1, 2), t0);
        // Not refused, not forgotten: deferred.
        assert_eq!(
            (w.len(), w.refusals.count(), w.refusals.retried()),
            (2, 0, 2)
        );
        assert_eq!(w.next_due(), Some(t0 + RETRY_FIRST));
        assert_eq!(w.next_unwritten_at(t0), None);
        w.keep(Data::new(9, &b"x"[..]));
        // Newer frames are not held up; deferred ones go first once due.
        assert_eq!(w.next_unwritten_at(t0).map(|d| d.tag), Some(9));
        let later = t0 + RETRY_FIRST;
        let again: Vec<u32> =
            std::iter::from_fn(|| w.next_unwritten_at(later).map(|d| d.tag)).collect();
        assert_eq!(again, [1, 2]);
        // Written on this connection: 0..4 (handled), then 9, 1, 2 as 4, 5, 6.
        assert_eq!(w.len(), 3);
        w.stored_at(
            &Stored {
                count: 7,
                refused: vec![RefusedRun {
                    first: 5,
                    frames: 1,
                    reason: RefusedReason::NoSubscriber,
                }],
            },
            later,
        );
        // Frame 1 refused a second time: twice the wait.
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_due(), Some(later + RETRY_FIRST * 2));
        // A reconnect keeps it deferred.
        w.reconnected();
        assert_eq!(w.next_unwritten_at(later), None);
        let due = later + RETRY_FIRST * 2;
        assert_eq!(w.next_unwritten_at(due).map(|d| d.tag), Some(1));
        w.stored_at(&count(1), due);
        assert!(w.is_empty());
    }

    #[test]
    fn stored_counts_drain_the_front_and_reconnects_resend_the_rest_in_order() {
        let mut w = window(5);
        assert_eq!(tags(&mut w), [0, 1, 2, 3, 4]);
        w.stored(&count(2));
        assert_eq!(w.len(), 3);
        w.stored(&count(2)); // the same count again moves nothing
        assert_eq!(w.len(), 3);
        w.reconnected();
        assert_eq!((w.resent(), w.unwritten()), (3, 3));
        w.keep(Data::new(5, &b"x"[..]));
        assert_eq!(tags(&mut w), [2, 3, 4, 5]);
        // The new connection counts from 0.
        w.stored(&count(3));
        assert_eq!(tags(&mut w), Vec::<u32>::new());
        assert_eq!(w.len(), 1);
        w.stored(&count(4));
        assert!(w.is_empty());
    }

    #[test]
    fn a_count_past_what_was_written_forgets_only_what_was_written() {
        let mut w = window(4);
        w.next_unwritten();
        w.stored(&count(1000));
        assert_eq!(w.len(), 3);
        assert_eq!(tags(&mut w), [1, 2, 3]);
    }

    #[test]
    fn the_count_wraps() {
        let mut w = window(3);
        w.stored = u32::MAX;
        assert_eq!(tags(&mut w), [0, 1, 2]);
        w.stored(&count(1)); // u32::MAX + 2
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn refused_frames_leave_the_window_and_are_recorded() {
        use crate::frame::RefusedRun;
        let mut w = window(6);
        assert_eq!(tags(&mut w), [0, 1, 2, 3, 4, 5]);
        let run = |first, frames, reason| RefusedRun {
            first,
            frames,
            reason,
        };
        w.stored(&Stored {
            count: 4,
            refused: vec![
                run(1, 1, RefusedReason::TooLong),
                run(3, 5, RefusedReason::HopLimit), // only frame 3 is covered by the count
                run(100, 1, RefusedReason::Loop),   // outside: ignored
            ],
        });
        assert_eq!(w.len(), 2);
        let listed: Vec<(u32, RefusedReason)> = w
            .refusals
            .list()
            .iter()
            .map(|r| (r.tag, r.reason))
            .collect();
        assert_eq!(
            listed,
            [(1, RefusedReason::TooLong), (3, RefusedReason::HopLimit)]
        );
        assert_eq!(w.refusals.count(), 2);
        assert_eq!(w.refusals.count_of(RefusedReason::TooLong), 1);
        assert_eq!(w.refusals.count_of(RefusedReason::Loop), 0);
        // Nothing refused is written again.
        w.reconnected();
        assert_eq!(tags(&mut w), [4, 5]);
    }
}
