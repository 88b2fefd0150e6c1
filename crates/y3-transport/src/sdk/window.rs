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

use std::collections::VecDeque;

use crate::frame::Data;

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
}

impl Window {
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

    /// The router says the first `n` data frames of this connection are stored (modulo
    /// 2^32). A count past what was written, from a confused router, forgets no more than
    /// was written.
    pub fn stored(&mut self, n: u32) {
        let newly = (n.wrapping_sub(self.stored) as usize).min(self.written);
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

    fn tags(w: &mut Window) -> Vec<u32> {
        std::iter::from_fn(|| w.next_unwritten().map(|d| d.tag)).collect()
    }

    #[test]
    fn stored_counts_drain_the_front_and_reconnects_resend_the_rest_in_order() {
        let mut w = window(5);
        assert_eq!(tags(&mut w), [0, 1, 2, 3, 4]);
        w.stored(2);
        assert_eq!(w.len(), 3);
        w.stored(2); // the same count again moves nothing
        assert_eq!(w.len(), 3);
        w.reconnected();
        assert_eq!((w.resent(), w.unwritten()), (3, 3));
        w.keep(Data::new(5, &b"x"[..]));
        assert_eq!(tags(&mut w), [2, 3, 4, 5]);
        // The new connection counts from 0.
        w.stored(3);
        assert_eq!(tags(&mut w), Vec::<u32>::new());
        assert_eq!(w.len(), 1);
        w.stored(4);
        assert!(w.is_empty());
    }

    #[test]
    fn a_count_past_what_was_written_forgets_only_what_was_written() {
        let mut w = window(4);
        w.next_unwritten();
        w.stored(1000);
        assert_eq!(w.len(), 3);
        assert_eq!(tags(&mut w), [1, 2, 3]);
    }

    #[test]
    fn the_count_wraps() {
        let mut w = window(3);
        w.stored = u32::MAX;
        assert_eq!(tags(&mut w), [0, 1, 2]);
        w.stored(1); // u32::MAX + 2
        assert_eq!(w.len(), 1);
    }
}
