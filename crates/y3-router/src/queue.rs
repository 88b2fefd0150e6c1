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
//!
//! The data lane is a deque of blocks of [`BLOCK`] slots (`Blocks`): a backlog grows by
//! one block at a time and never moves the items it holds, and gives its blocks back as
//! it drains (but a few, [`SPARE`]).
//!
//! ```text
//!   blocks:  [ ..▓▓▓▓ ] [ ▓▓▓▓▓▓▓▓ ] [ ▓▓▓▓▓... ]     spare: [ ] [ ]
//!              front: pop_batch       back: push     (emptied, kept for the next push)
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

/// Slots per block of a queue's data lane.
pub const BLOCK: usize = 64;

/// Emptied blocks a queue keeps for its next pushes; the rest go back to the allocator (a
/// block's allocation and release cost a few instructions per frame of its [`BLOCK`]).
pub const SPARE: usize = 1;

/// How many times its limits (frames and bytes) a queue may hold through
/// [`Queue::push_overdraft`]: the first multiple is the budget a subscriber is given, the
/// rest what it may fall further behind while it takes nothing, before it is evicted.
pub const OVERDRAFT: usize = 2;

/// A FIFO in blocks of [`BLOCK`] slots. Growing takes a block (a spare one, or a new
/// allocation) and moves nothing already queued: a deque of single slots doubles and
/// copies every queued item, which for a subscriber falling ten thousand 200-byte
/// slots behind was 340 instructions per routed frame (`scripts/icount-router`).
/// Draining gives each emptied block back, keeping [`SPARE`] of them, so a burst's memory
/// goes back as it drains, and a backlog swinging between a few and thousands of frames
/// allocates one block per [`BLOCK`] frames of swing, never resizes a whole deque. The
/// first block of an empty queue grows as it fills (up to [`BLOCK`] slots), so that a
/// subscriber that never falls behind holds the few slots it uses, not a whole block.
#[derive(Debug)]
struct Blocks<T> {
    /// Each holds at most [`BLOCK`] items (and, but for a queue's first, has room for them:
    /// it never grows); only the front one may be partly popped, only the back one partly
    /// filled.
    blocks: VecDeque<VecDeque<T>>,
    len: usize,
    spare: Vec<VecDeque<T>>,
}

impl<T> Blocks<T> {
    fn new() -> Blocks<T> {
        Blocks {
            blocks: VecDeque::new(),
            len: 0,
            spare: Vec::new(),
        }
    }

    fn push_back(&mut self, item: T) {
        match self.blocks.back_mut() {
            Some(back) if back.len() < BLOCK => back.push_back(item),
            _ => {
                let first = self.blocks.is_empty();
                let mut block = self.spare.pop().unwrap_or_else(|| match first {
                    true => VecDeque::new(),
                    false => VecDeque::with_capacity(BLOCK),
                });
                block.push_back(item);
                self.blocks.push_back(block);
            }
        }
        self.len += 1;
    }

    fn pop_front(&mut self) -> Option<T> {
        let front = self.blocks.front_mut()?;
        let item = front.pop_front()?;
        if front.is_empty() {
            self.retire_front();
        }
        self.len -= 1;
        Some(item)
    }

    /// Moves the first `n` items (at most [`len`](Blocks::len)) into `out`, each shown
    /// to `each` first.
    fn drain_into(&mut self, n: usize, out: &mut Vec<T>, mut each: impl FnMut(&T)) {
        let mut left = n.min(self.len);
        self.len -= left;
        while left > 0 {
            let Some(front) = self.blocks.front_mut() else {
                break;
            };
            let k = left.min(front.len());
            out.extend(front.drain(..k).inspect(&mut each));
            left -= k;
            if front.is_empty() {
                self.retire_front();
            }
        }
    }

    /// Takes the emptied front block off, keeping it as a spare (up to [`SPARE`]); the
    /// deque of blocks gives its own slots back once under a quarter full.
    fn retire_front(&mut self) {
        if let Some(block) = self.blocks.pop_front() {
            if self.spare.len() < SPARE {
                self.spare.push(block);
            }
        }
        let (len, cap) = (self.blocks.len(), self.blocks.capacity());
        if cap > 4 * SPARE && len < cap / 4 {
            self.blocks.shrink_to((2 * len).max(SPARE));
        }
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.blocks.iter().flatten()
    }

    /// Removes every item, each shown to `each` first.
    fn clear_with(&mut self, each: impl FnMut(&T)) {
        self.iter().for_each(each);
        while !self.blocks.is_empty() {
            if let Some(front) = self.blocks.front_mut() {
                front.clear();
            }
            self.retire_front();
        }
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated: the blocks in use and the spare ones.
    #[cfg(test)]
    fn slots(&self) -> usize {
        self.blocks
            .iter()
            .chain(&self.spare)
            .map(VecDeque::capacity)
            .sum()
    }
}

/// A bounded FIFO of data items plus a small priority lane of control items.
#[derive(Debug)]
pub struct Queue<T> {
    data: Blocks<T>,
    control: VecDeque<T>,
    bytes: usize,
    capacity: usize,
    max_bytes: usize,
    policy: Policy,
    dropped: u64,
}

impl<T: Weighted> Queue<T> {
    /// An empty queue of at most `capacity` items (at least 1) and `max_bytes` bytes.
    pub fn new(capacity: usize, max_bytes: usize, policy: Policy) -> Queue<T> {
        Queue {
            data: Blocks::new(),
            control: VecDeque::new(),
            bytes: 0,
            capacity: capacity.max(1),
            max_bytes,
            policy,
            dropped: 0,
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
        let mut bytes = 0;
        self.data.drain_into(n, out, |item| bytes += item.weight());
        self.bytes -= bytes;
        n
    }

    /// Removes every data item, returning how many there were (control items stay).
    pub fn clear(&mut self) -> usize {
        self.clear_with(|_| {})
    }

    /// As [`clear`](Queue::clear), showing `each` every data item removed.
    pub fn clear_with(&mut self, each: impl FnMut(&T)) -> usize {
        let n = self.data.len();
        self.data.clear_with(each);
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
        assert!(q.data.slots() >= 100_000);
        let mut out = Vec::new();
        // Given back block by block as it drains: what is left, and the spares.
        q.pop_batch(&mut out, 99_000);
        let held = q.data.slots();
        assert!(held <= 1_000 + (2 + SPARE) * BLOCK, "{held}");
        q.pop_batch(&mut out, usize::MAX);
        assert!(q.data.slots() <= SPARE * BLOCK, "{}", q.data.slots());
        assert!(
            q.data.blocks.capacity() <= 4 * SPARE,
            "{}",
            q.data.blocks.capacity()
        );
        assert_eq!(out.len(), 100_000);
        assert!(out.iter().enumerate().all(|(i, &(id, _))| i as u32 == id));
    }

    #[test]
    fn a_subscriber_that_keeps_up_holds_a_few_slots() {
        let mut q = Queue::new(1 << 20, usize::MAX, Policy::Block);
        let mut out = Vec::new();
        for id in 0..1_000 {
            q.push((id, 1));
            q.push((id, 1));
            q.pop_batch(&mut out, usize::MAX);
        }
        assert!(q.data.slots() <= 8, "{}", q.data.slots());
        assert_eq!(out.len(), 2_000);
    }

    #[test]
    fn a_swinging_backlog_holds_its_backlog_and_a_few_blocks() {
        // Swings between 10 and 10,000 frames, never drained: the blocks held follow the
        // backlog, order is kept, and the bytes add up.
        let mut q = Queue::new(1 << 20, usize::MAX, Policy::Block);
        let mut out = Vec::new();
        let (mut id, mut next) = (0, 0);
        for _ in 0..20 {
            while q.len() < 10_000 {
                q.push((id, 1));
                id += 1;
                assert!(q.data.slots() <= q.len() + (1 + SPARE) * BLOCK);
            }
            while q.len() > 10 {
                out.clear();
                q.pop_batch(&mut out, 256.min(q.len() - 10));
                for &(got, _) in &out {
                    assert_eq!(got, next);
                    next += 1;
                }
                assert!(q.data.slots() <= q.len() + (2 + SPARE) * BLOCK);
            }
            assert_eq!(q.bytes(), q.len());
        }
    }

    #[test]
    fn drop_oldest_and_clear_across_blocks() {
        let mut q = Queue::new(3 * BLOCK, usize::MAX, Policy::DropOldest);
        for id in 0..(5 * BLOCK) as u32 {
            q.push((id, 1));
        }
        assert_eq!((q.len(), q.dropped()), (3 * BLOCK, 2 * BLOCK as u64));
        let mut out = Vec::new();
        q.pop_batch(&mut out, BLOCK + 1);
        assert_eq!(out.first().map(|o| o.0), Some(2 * BLOCK as u32));
        let mut seen = 0;
        assert_eq!(q.clear_with(|_| seen += 1), 2 * BLOCK - 1);
        assert_eq!((seen, q.len(), q.bytes()), (2 * BLOCK - 1, 0, 0));
        assert!(q.data.slots() <= SPARE * BLOCK);
        q.push((7, 1));
        assert_eq!(ids(&mut q), [7]);
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
