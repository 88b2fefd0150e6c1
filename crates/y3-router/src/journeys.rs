//! Deliveries per message: loops bounded in width as well as depth.
//!
//! Stream functions that re-emit what they observe multiply a message at every pass (three
//! such functions turned 200 frames into 306,600 deliveries); the hop limit only bounds how
//! many passes. Every output of a function carries its input's `yomo-tid` (YoMo's functions
//! copy the metadata, y3's too), so the router counts the deliveries each transaction id's
//! function outputs cause and drops (counting) the ones past the budget.
//!
//! ```text
//!  tid ─hash─▶ shard (mutex) ─▶ current generation ─miss─▶ previous generation
//!  a generation lives one window (or until it holds CAP entries), then becomes the previous
//! ```
//!
//! Memory is bounded by `SHARDS × 2 × CAP` entries; only frames from stream functions pay
//! the lookup.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SHARDS: usize = 16;
/// Entries per shard generation.
const CAP: usize = 4096;

#[derive(Debug)]
struct Shard {
    current: HashMap<Box<str>, u32>,
    previous: HashMap<Box<str>, u32>,
    since: Instant,
}

/// Delivery counts per transaction id, over a sliding window.
#[derive(Debug)]
pub(crate) struct Journeys {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    limit: u32,
    window: Duration,
}

impl Journeys {
    /// At most `limit` deliveries per transaction id within about `window`.
    pub fn new(limit: u32, window: Duration) -> Journeys {
        let now = Instant::now();
        Journeys {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        current: HashMap::new(),
                        previous: HashMap::new(),
                        since: now,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
            limit,
            window,
        }
    }

    /// Charges `wanted` deliveries to `tid` at `now`; returns how many of them fit its
    /// budget (the rest are to be dropped).
    pub fn charge(&self, tid: &str, wanted: u32, now: Instant) -> u32 {
        let shard = &self.shards[self.hasher.hash_one(tid) as usize % SHARDS];
        let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
        let age = now.saturating_duration_since(shard.since);
        if age >= self.window || shard.current.len() >= CAP {
            // Rotations are lazy: after two idle windows nothing is left to remember.
            shard.previous = std::mem::take(&mut shard.current);
            if age >= 2 * self.window {
                shard.previous.clear();
            }
            shard.since = now;
        }
        let used = match shard.current.get_mut(tid) {
            Some(used) => used,
            None => {
                let carried = shard.previous.get(tid).copied().unwrap_or(0);
                shard.current.entry(tid.into()).or_insert(carried)
            }
        };
        let allowed = wanted.min(self.limit.saturating_sub(*used));
        *used += allowed;
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_per_tid_across_generations() {
        let j = Journeys::new(10, Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(j.charge("a", 4, t0), 4);
        assert_eq!(j.charge("a", 4, t0), 4);
        assert_eq!(j.charge("a", 4, t0), 2);
        assert_eq!(j.charge("a", 1, t0), 0);
        assert_eq!(j.charge("b", 3, t0), 3);
        // One window later the count is carried over from the previous generation...
        let t1 = t0 + Duration::from_millis(1500);
        assert_eq!(j.charge("a", 1, t1), 0);
        // ...and two windows later it is forgotten.
        let t2 = t1 + Duration::from_millis(1500);
        assert_eq!(j.charge("b", 1, t2), 1);
        let t3 = t2 + Duration::from_millis(1500);
        assert_eq!(j.charge("a", 5, t3), 5);
    }

    #[test]
    fn memory_is_bounded() {
        let j = Journeys::new(1, Duration::from_secs(3600));
        let now = Instant::now();
        for i in 0..(SHARDS * CAP * 4) {
            j.charge(&i.to_string(), 1, now);
        }
        for shard in &j.shards {
            let s = shard.lock().unwrap();
            assert!(s.current.len() <= CAP && s.previous.len() <= CAP);
        }
    }
}
