//! Throttling of failed handshakes, per address: after `max_failures` handshakes refused
//! for a wrong credential from one address within `window`, that address's connections are
//! refused for `backoff` without a handshake (`rejected{reason="throttled"}`), so that a token cannot be guessed
//! at connection speed. An address is an IPv4 address or an IPv6 /64 (one host commonly
//! holds a whole /64).
//!
//! Sans-IO: time is a parameter. Memory is bounded: the table holds at most its capacity
//! ([`MAX_ADDRESSES`] by default); when it is full, entries whose window or back-off is over
//! go first, then the address seen longest ago that is not throttled, then the throttled
//! one seen longest ago.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Most addresses remembered (about 100 KiB of table).
pub const MAX_ADDRESSES: usize = 4096;

/// What the table remembers of an address.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Failures counted since `since`.
    failures: u32,
    /// Start of the current window.
    since: Instant,
    /// Refused until then, when throttled.
    until: Option<Instant>,
    /// The last failure.
    last: Instant,
}

/// Failed handshakes per address, and who is refused for now.
#[derive(Debug)]
pub struct Throttle {
    max_failures: u32,
    window: Duration,
    backoff: Duration,
    capacity: usize,
    table: HashMap<IpAddr, Entry>,
}

/// The address failures are counted under.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

impl Throttle {
    /// Refuses an address for `backoff` after `max_failures` failures within `window`;
    /// `max_failures == 0` never refuses anyone.
    pub fn new(max_failures: u32, window: Duration, backoff: Duration) -> Throttle {
        Throttle {
            max_failures,
            window,
            backoff,
            capacity: MAX_ADDRESSES,
            table: HashMap::new(),
        }
    }

    /// The same with room for `capacity` addresses (at least 1).
    pub fn with_capacity(mut self, capacity: usize) -> Throttle {
        self.capacity = capacity.max(1);
        self
    }

    fn off(&self) -> bool {
        self.max_failures == 0 || self.backoff.is_zero()
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Whether `ip` may try a handshake at `now`.
    ///
    /// # Errors
    /// How much longer it is refused, while it is throttled.
    pub fn check(&mut self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        if self.off() {
            return Ok(());
        }
        let key = key(ip);
        match self.table.get(&key).and_then(|e| e.until) {
            Some(until) if now < until => Err(until - now),
            Some(_) => {
                // The back-off is over: a fresh start.
                self.table.remove(&key);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts a failed handshake from `ip` at `now`; true when this failure starts its
    /// back-off.
    pub fn failed(&mut self, ip: IpAddr, now: Instant) -> bool {
        if self.off() {
            return false;
        }
        let key = key(ip);
        if !self.table.contains_key(&key) && self.table.len() >= self.capacity {
            self.make_room(now);
        }
        let fresh = Entry {
            failures: 0,
            since: now,
            until: None,
            last: now,
        };
        let entry = self.table.entry(key).or_insert(fresh);
        match entry.until {
            // Refused connections do not reach a handshake; one already under way might.
            Some(until) if now < until => return false,
            Some(_) => *entry = fresh,
            None if now.saturating_duration_since(entry.since) > self.window => *entry = fresh,
            None => {}
        }
        entry.failures += 1;
        entry.last = now;
        if entry.failures >= self.max_failures {
            entry.until = Some(now + self.backoff);
            return true;
        }
        false
    }

    /// Frees at least one slot.
    fn make_room(&mut self, now: Instant) {
        let window = self.window;
        self.table.retain(|_, e| match e.until {
            Some(until) => now < until,
            None => now.saturating_duration_since(e.since) <= window,
        });
        if self.table.len() < self.capacity {
            return;
        }
        let victim = self
            .table
            .iter()
            .min_by_key(|(_, e)| (e.until.is_some(), e.last))
            .map(|(k, _)| *k);
        if let Some(victim) = victim {
            self.table.remove(&victim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const MIN: Duration = Duration::from_secs(60);

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    #[test]
    fn twenty_failures_then_refused_for_the_backoff() {
        let mut t = Throttle::new(20, MIN, Duration::from_secs(30));
        let start = Instant::now();
        for i in 0..19 {
            assert!(!t.failed(v4(1), start + Duration::from_millis(i)));
            assert_eq!(t.check(v4(1), start + Duration::from_millis(i)), Ok(()));
        }
        assert!(t.failed(v4(1), start));
        // The 21st attempt is refused, for the rest of the 30 s.
        let at = start + Duration::from_secs(10);
        assert_eq!(t.check(v4(1), at), Err(Duration::from_secs(20)));
        // Another address is not.
        assert_eq!(t.check(v4(2), at), Ok(()));
        // After the back-off: admitted, and counting starts over.
        let after = start + Duration::from_secs(30);
        assert_eq!(t.check(v4(1), after), Ok(()));
        assert!(!t.failed(v4(1), after));
        assert_eq!(t.check(v4(1), after), Ok(()));
    }

    #[test]
    fn failures_spread_beyond_the_window_are_not_throttled() {
        let mut t = Throttle::new(3, MIN, MIN);
        let start = Instant::now();
        for i in 0..30u64 {
            // Two failures a minute and a bit: never three within one window.
            let at = start + Duration::from_secs(61 * (i / 2)) + Duration::from_millis(i % 2);
            assert!(!t.failed(v4(1), at), "failure {i}");
        }
        assert_eq!(t.check(v4(1), start + Duration::from_secs(61 * 15)), Ok(()));
        let off = &mut Throttle::new(0, MIN, MIN);
        for _ in 0..100 {
            assert!(!off.failed(v4(1), start));
        }
        assert_eq!(off.check(v4(1), start), Ok(()));
        assert!(off.is_empty());
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let mut t = Throttle::new(2, MIN, MIN);
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        t.failed(a, now);
        t.failed(b, now);
        assert!(t.check(a, now).is_err());
        assert_eq!(t.check(other, now), Ok(()));
        let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        t.failed(mapped, now);
        t.failed(v4(7), now);
        assert!(t.check(v4(7), now).is_err());
        assert_eq!(t.check(IpAddr::V6(Ipv6Addr::LOCALHOST), now), Ok(()));
    }

    #[test]
    fn the_table_is_bounded_and_keeps_who_is_throttled() {
        let mut t = Throttle::new(2, MIN, MIN).with_capacity(100);
        let now = Instant::now();
        // One address throttled, then 100 000 others failing once each.
        t.failed(v4(1), now);
        t.failed(v4(1), now);
        for i in 0..100_000u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            t.failed(ip, now + Duration::from_micros(u64::from(i)));
            assert!(t.len() <= 100);
        }
        assert_eq!(t.len(), 100);
        // Unthrottled entries were evicted first: the throttled address is still refused.
        assert!(t.check(v4(1), now + Duration::from_secs(1)).is_err());
        // Once windows are over, expired entries make the room.
        let later = now + Duration::from_secs(120);
        t.failed(v4(200), later);
        assert_eq!(t.len(), 1);
    }
}
