//! A subscriber's bounded queue and its full-queue [`Policy`]. Pure: no locks, no clock.
//!
//! ```text
//!            control (handshake ack, goaway): small, never dropped, sent first
//!  push ──▶ [ data frames ......................... ] ──▶ pop_batch ──▶ writer
//!            bounded by `capacity` frames and `max_bytes` bytes
//!            full + Block      → Full(item): the caller waits (the source is held back)
//!            full + DropOldest → the oldest frames are dropped and counted
//!  push_overdraft ──▶ past the limits, up to OVERDRAFT × them (a subscriber that took
//!                     nothing for a while: its publishers are no longer held back)
//! ```

use std::collections::VecDeque;

pub use crate::config::Policy;

/// Something with a size in bytes.
pub trait Weighted {
    /// Bytes this item accounts for in a queue.
    fn weight(&self) -> usize;
    /// The data tag this item carries, if any (what per-tag drop counts name).
    fn tag(&self) -> Option<u32> {
        None
    }
}

/// What [`Queue::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Push<T> {
    /// Queued.
    Queued,
    /// Queued after dropping this many of the oldest frames ([`Policy::DropOldest`]).
    DroppedOldest(usize),
    /// Not queued: the queue is full ([`Policy::Block`]). The item is handed back.
    Full(T),
}

/// Most control frames held at once; more are refused (a peer flooding pings).
pub const MAX_CONTROL: usize = 16;

/// Slots a queue keeps however empty it gets (see [`Queue::pop_batch`]).
const SHRINK_ABOVE: usize = 1024;

/// A queue that is not drained gives its slots back once this many times its capacity
/// went through it at under a quarter full since its last resize (see [`Queue::shrink`]).
const SHRINK_AFTER: usize = 2;

/// How many times its limits (frames and bytes) a queue may hold through
/// [`Queue::push_overdraft`]: the first multiple is the budget a subscriber is given, the
/// rest what it may fall further behind while it takes nothing, before it is evicted.
pub const OVERDRAFT: usize = 2;

/// A bounded FIFO of data items plus a small priority lane of control items.
#[derive(Debug)]
pub struct Queue<T> {
    data: VecDeque<T>,
    control: VecDeque<T>,
    bytes: usize,
    capacity: usize,
    max_bytes: usize,
    policy: Policy,
    dropped: u64,
    /// The data deque's capacity when [`popped`](Queue::popped) was last reset.
    sized: usize,
    /// Data items popped, leaving the deque under a quarter full, since its capacity last
    /// changed.
    popped: usize,
}

impl<T: Weighted> Queue<T> {
    /// An empty queue of at most `capacity` items (at least 1) and `max_bytes` bytes.
    pub fn new(capacity: usize, max_bytes: usize, policy: Policy) -> Queue<T> {
        Queue {
            data: VecDeque::new(),
            control: VecDeque::new(),
            bytes: 0,
            capacity: capacity.max(1),
            max_bytes,
            policy,
            dropped: 0,
            sized: 0,
            popped: 0,
        }
    }

    /// Whether `weight` more bytes fit. An empty queue takes any one item, so a frame
    /// larger than `max_bytes` (but within the frame limit) is not stuck forever.
    fn fits(&self, weight: usize) -> bool {
        self.fits_times(weight, 1)
    }

    /// Whether `weight` more bytes fit within `times` the limits.
    fn fits_times(&self, weight: usize, times: usize) -> bool {
        self.data.is_empty()
            || (self.data.len() < self.capacity.saturating_mul(times)
                && self.bytes + weight <= self.max_bytes.saturating_mul(times))
    }

    /// Queues a data item, applying the policy when full.
    pub fn push(&mut self, item: T) -> Push<T> {
        self.push_with(item, |_| {})
    }

    /// As [`push`](Queue::push), showing `dropped` each item the policy drops.
    pub fn push_with(&mut self, item: T, mut dropped_item: impl FnMut(&T)) -> Push<T> {
        let weight = item.weight();
        if self.fits(weight) {
            self.bytes += weight;
            self.data.push_back(item);
            return Push::Queued;
        }
        match self.policy {
            Policy::Block => Push::Full(item),
            Policy::DropOldest => {
                let mut dropped = 0;
                while !self.fits(weight) {
                    // `fits` is true for an empty queue, so there is a front item here.
                    let Some(old) = self.data.pop_front() else {
                        break;
                    };
                    self.bytes -= old.weight();
                    dropped_item(&old);
                    dropped += 1;
                }
                self.dropped += dropped as u64;
                self.bytes += weight;
                self.data.push_back(item);
                Push::DroppedOldest(dropped)
            }
        }
    }

    /// Queues a data item past the limits, up to [`OVERDRAFT`] times them, whatever the
    /// policy; `Full(item)` beyond that.
    pub fn push_overdraft(&mut self, item: T) -> Push<T> {
        let weight = item.weight();
        if !self.fits_times(weight, OVERDRAFT) {
            return Push::Full(item);
        }
        self.bytes += weight;
        self.data.push_back(item);
        Push::Queued
    }

    /// Queues a control item ahead of the data. Returns false (and drops it) when
    /// [`MAX_CONTROL`] are already waiting.
    pub fn push_control(&mut self, item: T) -> bool {
        if self.control.len() >= MAX_CONTROL {
            return false;
        }
        self.control.push_back(item);
        true
    }

    /// Moves up to `max` items into `out`, control items first. Returns how many data items
    /// were taken.
    pub fn pop_batch(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        let mut room = max;
        while room > 0 {
            let Some(item) = self.control.pop_front() else {
                break;
            };
            out.push(item);
            room -= 1;
        }
        let n = room.min(self.data.len());
        for item in self.data.drain(..n) {
            self.bytes -= item.weight();
            out.push(item);
        }
        self.shrink(n);
        n
    }

    /// Gives back the memory of a burst: a deque keeps its largest capacity otherwise, and a
    /// subscriber that once fell a million frames behind would hold their slots for good.
    /// It shrinks (to twice what is left, at least [`SHRINK_ABOVE`]) once drained, or once
    /// under a quarter full after [`SHRINK_AFTER`] times its capacity was popped since its
    /// last resize; not each time it dips under a quarter. A subscriber whose backlog
    /// swings between a few and thousands of frames would otherwise shrink and regrow its
    /// deque every swing, copying every slot each time: 480 instructions of each routed
    /// 64 B frame (`scripts/icount-router`), for memory it needs again at the next swing.
    fn shrink(&mut self, popped: usize) {
        let (len, cap) = (self.data.len(), self.data.capacity());
        if cap != self.sized {
            // Grown since (pushes): the count starts again.
            (self.sized, self.popped) = (cap, 0);
        }
        if len < cap / 4 {
            self.popped += popped;
        }
        let due = len == 0 || (len < cap / 4 && self.popped >= SHRINK_AFTER * cap);
        if cap > SHRINK_ABOVE && due {
            self.data.shrink_to((2 * len).max(SHRINK_ABOVE));
            (self.sized, self.popped) = (self.data.capacity(), 0);
        }
    }

    /// Removes every data item, returning how many there were (control items stay).
    pub fn clear(&mut self) -> usize {
        self.clear_with(|_| {})
    }

    /// As [`clear`](Queue::clear), showing `each` every data item removed.
    pub fn clear_with(&mut self, each: impl FnMut(&T)) -> usize {
        let n = self.data.len();
        self.data.iter().for_each(each);
        self.data.clear();
        self.bytes = 0;
        n
    }

    /// Data items queued.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether no data items are queued (control items may be).
    pub fn no_data(&self) -> bool {
        self.data.is_empty()
    }

    /// Whether neither data nor control items are queued.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.control.is_empty()
    }

    /// Bytes of the queued data items.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether a data item of `weight` bytes would be queued without waiting or dropping.
    pub fn has_room(&self, weight: usize) -> bool {
        self.fits(weight)
    }

    /// Items dropped by [`Policy::DropOldest`] so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weighted for (u32, usize) {
        fn weight(&self) -> usize {
            self.1
        }
    }

    fn ids(q: &mut Queue<(u32, usize)>) -> Vec<u32> {
        let mut out = Vec::new();
        q.pop_batch(&mut out, usize::MAX);
        out.into_iter().map(|(id, _)| id).collect()
    }

    #[test]
    fn block_hands_the_item_back() {
        let mut q = Queue::new(2, 1000, Policy::Block);
        assert_eq!(q.push((1, 10)), Push::Queued);
        assert_eq!(q.push((2, 10)), Push::Queued);
        assert_eq!(q.push((3, 10)), Push::Full((3, 10)));
        assert_eq!(q.len(), 2);
        assert_eq!(q.bytes(), 20);
        assert_eq!(ids(&mut q), [1, 2]);
        assert_eq!(q.bytes(), 0);
        assert_eq!(q.push((3, 10)), Push::Queued);
        assert_eq!(q.dropped(), 0);
    }

    #[test]
    fn drop_oldest_counts_every_drop() {
        let mut q = Queue::new(3, 1000, Policy::DropOldest);
        for id in 0..3 {
            assert_eq!(q.push((id, 1)), Push::Queued);
        }
        assert_eq!(q.push((3, 1)), Push::DroppedOldest(1));
        assert_eq!(q.push((4, 1)), Push::DroppedOldest(1));
        assert_eq!(q.dropped(), 2);
        assert_eq!(ids(&mut q), [2, 3, 4]);
    }

    #[test]
    fn byte_bound_applies_too() {
        let mut q = Queue::new(100, 25, Policy::DropOldest);
        q.push((1, 10));
        q.push((2, 10));
        // 20 + 10 > 25: drop one to fit.
        assert_eq!(q.push((3, 10)), Push::DroppedOldest(1));
        // A big item empties the queue, then goes in alone.
        assert_eq!(q.push((4, 100)), Push::DroppedOldest(2));
        assert_eq!(ids(&mut q), [4]);
        let mut q = Queue::new(100, 25, Policy::Block);
        assert_eq!(
            q.push((1, 100)),
            Push::Queued,
            "an empty queue takes any item"
        );
        assert!(!q.has_room(1));
    }

    #[test]
    fn overdraft_goes_past_the_limits_up_to_twice_them() {
        let mut q = Queue::new(100, 20, Policy::Block);
        assert_eq!(q.push((1, 10)), Push::Queued);
        assert_eq!(q.push((2, 10)), Push::Queued);
        assert_eq!(q.push((3, 10)), Push::Full((3, 10)));
        assert_eq!(q.push_overdraft((3, 10)), Push::Queued);
        assert_eq!(q.push_overdraft((4, 10)), Push::Queued);
        assert_eq!(q.push_overdraft((5, 1)), Push::Full((5, 1)));
        assert_eq!(q.bytes(), 40);
        // Frames bound it too.
        let mut q = Queue::new(2, 1000, Policy::Block);
        for id in 0..4 {
            assert_eq!(q.push_overdraft((id, 1)), Push::Queued);
        }
        assert_eq!(q.push_overdraft((4, 1)), Push::Full((4, 1)));
        assert_eq!(ids(&mut q), [0, 1, 2, 3]);
    }

    #[test]
    fn a_drained_burst_gives_its_memory_back() {
        let mut q = Queue::new(1 << 20, usize::MAX, Policy::Block);
        for id in 0..100_000 {
            q.push((id, 1));
        }
        assert!(q.data.capacity() >= 100_000);
        let mut out = Vec::new();
        // Not yet drained: a backlog that may swing back keeps its slots.
        q.pop_batch(&mut out, 99_000);
        assert!(q.data.capacity() >= 100_000, "{}", q.data.capacity());
        q.pop_batch(&mut out, usize::MAX);
        assert!(
            q.data.capacity() <= 2 * SHRINK_ABOVE,
            "{}",
            q.data.capacity()
        );
        assert_eq!(out.len(), 100_000);
    }

    #[test]
    fn a_burst_never_drained_gives_its_memory_back_once_it_stays_small() {
        let mut q = Queue::new(1 << 20, usize::MAX, Policy::Block);
        for id in 0..100_000 {
            q.push((id, 1));
        }
        let cap = q.data.capacity();
        let mut out = Vec::new();
        q.pop_batch(&mut out, 99_000);
        // A thousand frames stay queued while frames flow through: the slots go back once
        // SHRINK_AFTER times the capacity went through.
        let mut id = 100_000;
        while q.data.capacity() == cap {
            assert!(id < 100_000 + 3 * cap as u32, "never shrank");
            for _ in 0..500 {
                q.push((id, 1));
                id += 1;
            }
            out.clear();
            q.pop_batch(&mut out, 500);
        }
        assert!(q.data.capacity() <= 4 * 1_000, "{}", q.data.capacity());
        assert_eq!(q.len(), 1_000);
    }

    #[test]
    fn a_swinging_backlog_keeps_its_slots() {
        // (Shrinking whenever under a quarter full: 169 resizes.)
        let mut q = Queue::new(1 << 20, usize::MAX, Policy::Block);
        let mut out = Vec::new();
        let mut id = 0;
        // Swings between 10 and 10,000 frames, never drained: sized once, then shrunk
        // (and grown again) at most once per SHRINK_AFTER capacities popped under a
        // quarter full (about 4,000 per swing), not every swing.
        let mut resized = 0;
        let mut last = 0;
        let mut seen = |q: &Queue<(u32, usize)>| {
            if q.data.capacity() != last {
                resized += 1;
                last = q.data.capacity();
            }
        };
        for _ in 0..20 {
            while q.len() < 10_000 {
                q.push((id, 1));
                id += 1;
                seen(&q);
            }
            while q.len() > 10 {
                out.clear();
                q.pop_batch(&mut out, 256.min(q.len() - 10));
                seen(&q);
            }
        }
        // Grown from nothing to 16,384 slots (13 doublings from 4), then at most three
        // shrinks of a few steps (to twice what was left, at least 1,024) and their
        // regrowths; shrinking every swing would resize 20 x 8 times.
        assert!(resized <= 13 + 3 * 6, "{resized} resizes");
    }

    #[test]
    fn control_goes_first_and_is_bounded() {
        let mut q = Queue::new(4, 1000, Policy::Block);
        q.push((1, 1));
        assert!(q.push_control((100, 0)));
        let mut out = Vec::new();
        assert_eq!(q.pop_batch(&mut out, 1), 0);
        assert_eq!(out, [(100, 0)]);
        for i in 0..MAX_CONTROL {
            assert!(q.push_control((i as u32, 0)));
        }
        assert!(!q.push_control((999, 0)));
        assert_eq!(q.clear(), 1);
        assert!(!q.is_empty(), "control items survive clear");
    }
}
