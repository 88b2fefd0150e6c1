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
//! as a stored one does, never to be resent, and is recorded in the window's [`Refusals`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::frame::{Data, RefusedReason, Stored};
use crate::metadata;

/// Refused frames whose details a [`Refusals`] keeps (the first ones); all are counted.
pub const MAX_REFUSALS_KEPT: usize = 1024;

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

    /// Frames refused so far.
    pub fn count(&self) -> u64 {
        self.lock().count
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

/// Frames written and not yet stored, oldest first, with the counts of the current
/// connection.
#[derive(Debug, Default)]
pub(crate) struct Window {
    /// Kept and not yet stored, oldest first.
    unacked: VecDeque<Data>,
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

    /// Frames kept and not yet stored.
    pub fn len(&self) -> usize {
        self.unacked.len()
    }

    /// Whether every frame kept so far is stored.
    pub fn is_empty(&self) -> bool {
        self.unacked.is_empty()
    }

    /// Frames kept that this connection has not carried yet.
    pub fn unwritten(&self) -> usize {
        self.unacked.len() - self.written
    }

    /// Frames written again on a later connection so far.
    pub fn resent(&self) -> u64 {
        self.resent
    }

    /// Keeps `data` until the router stores it, as a copy that pins no read buffer.
    pub fn keep(&mut self, mut data: Data) {
        data.detach();
        self.unacked.push_back(data);
    }

    /// The oldest frame this connection has not carried yet, counted as written.
    pub fn next_unwritten(&mut self) -> Option<Data> {
        let next = self.unacked.get(self.written).cloned()?;
        self.written += 1;
        Some(next)
    }

    /// The router says the first `stored.count` data frames of this connection are handled
    /// (modulo 2^32), those in its refused runs refused: they are recorded in
    /// [`refusals`](Window::refusals). A count past what was written, from a confused
    /// router, forgets no more than was written; a run outside the frames the count newly
    /// covers is ignored.
    pub fn stored(&mut self, stored: &Stored) {
        let n = stored.count;
        let newly = (n.wrapping_sub(self.stored) as usize).min(self.written);
        for run in &stored.refused {
            let from = run.first.wrapping_sub(self.stored) as usize;
            let to = from.saturating_add(run.frames as usize).min(newly);
            for data in self.unacked.range(from.min(to)..to) {
                self.refusals.record(data, run.reason);
            }
        }
        self.unacked.drain(..newly);
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
