//! Slow consumers that come straight back: with `queue.evicted_backoff_ms` set (it is 0, off,
//! by default), a client evicted for not reading (`slow_consumer`) that reconnects at once is
//! held off for a while, so one stuck subscriber does not hold up its publishers for a block
//! timeout, reconnect, and do it again. Off by default: a stall holds each publisher at
//! most once and eviction waits for the write deadline, so a client that comes straight back
//! costs little, and holding it off locked out apps that had only been paused.
//!
//! Keyed by address and client name (several clients of one host are not punished for one
//! of them). Sans-IO: time is a parameter. Memory is bounded by [`CAPACITY`] entries; when
//! full, expired entries go first, then the one that ends soonest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Most clients remembered.
pub const CAPACITY: usize = 4096;

/// Evicted clients and when they may come back.
#[derive(Debug, Default)]
pub struct Penalties {
    until: HashMap<(IpAddr, Box<str>), Instant>,
}

impl Penalties {
    /// Holds `name` at `ip` off until `until`.
    pub fn hold_off(&mut self, ip: IpAddr, name: &str, until: Instant, now: Instant) {
        if self.until.len() >= CAPACITY {
            self.until.retain(|_, end| *end > now);
        }
        if self.until.len() >= CAPACITY {
            let soonest = self
                .until
                .iter()
                .min_by_key(|(_, end)| **end)
                .map(|(key, _)| key.clone());
            if let Some(key) = soonest {
                self.until.remove(&key);
            }
        }
        self.until.insert((ip, name.into()), until);
    }

    /// How much longer `name` at `ip` is held off, if it is.
    pub fn remaining(&mut self, ip: IpAddr, name: &str, now: Instant) -> Option<Duration> {
        let key = (ip, Box::<str>::from(name));
        let end = *self.until.get(&key)?;
        if end <= now {
            self.until.remove(&key);
            return None;
        }
        Some(end - now)
    }

    /// Clients remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.until.len()
    }

    /// Whether no client is remembered.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_off_until_the_end_per_address_and_name() {
        let mut p = Penalties::default();
        let (a, b) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        p.hold_off(a, "sink", t0 + Duration::from_secs(3), t0);
        assert_eq!(
            p.remaining(a, "sink", t0 + Duration::from_secs(1)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(p.remaining(a, "other", t0), None);
        assert_eq!(p.remaining(b, "sink", t0), None);
        assert_eq!(p.remaining(a, "sink", t0 + Duration::from_secs(3)), None);
        assert!(p.is_empty());
    }

    #[test]
    fn memory_is_bounded() {
        let mut p = Penalties::default();
        let ip = "127.0.0.1".parse().unwrap();
        let t0 = Instant::now();
        for i in 0..(CAPACITY * 3) {
            let end = t0 + Duration::from_secs(10 + (i % 7) as u64);
            p.hold_off(ip, &i.to_string(), end, t0);
        }
        assert!(p.len() <= CAPACITY);
        // The newest is always kept.
        assert!(p
            .remaining(ip, &(CAPACITY * 3 - 1).to_string(), t0)
            .is_some());
    }
}
