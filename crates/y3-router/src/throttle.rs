//! The tarpit for wrong credentials, per address: failing handshakes are slowed down, never
//! the address. A handshake whose credential is right is admitted at once, whatever its
//! address did before; one whose credential is wrong is refused (for good: YoMo's rejected
//! frame and close code 0x13) after a delay that grows with its address's recent failures:
//!
//! ```text
//!  failures of the address within the window (this one included)
//!    1 ..= free_failures          refused at once
//!    free_failures + k  (k ≥ 1)   refused after min(initial · 2^(k-1), max)
//!  a failure more than `window` after the address's last one starts the count again
//! ```
//!
//! A refusal being delayed holds one of its address's `max_in_flight` slots until it is
//! sent. While every slot of an address is held, its next handshakes are turned away
//! *before their credential is looked at*, with a code that makes clients retry
//! (`too_many_connections`, QUIC close 0x01; counted as `rejected{reason="throttled"}`): a
//! handshake that was checked tells its sender the answer by the ack's absence alone, so
//! only a check that does not happen keeps a guess from being learnt. An attacker at one
//! address therefore learns at most `max_in_flight` guesses per `max` delay, however many
//! connections it opens, and what it holds stays bounded; a correct client of that address
//! is admitted at once whenever fewer than `max_in_flight` of its neighbours' refusals are
//! pending, and is only ever told to come back, never to stop, otherwise.
//!
//! An address is an IPv4 address or an IPv6 /64 (one host commonly holds a whole /64).
//! A handshake takes a slot while it is checked ([`Tarpit::enter`]) and gives it back when
//! it passes or its refusal is sent ([`Tarpit::leave`]).
//!
//! Sans-IO: time is a parameter. Memory is bounded: the table holds at most its capacity
//! ([`MAX_ADDRESSES`] by default); an address without failures or slots is forgotten, and
//! when the table is full, addresses whose window is over go first, then the one seen
//! longest ago that holds no slot, then the one seen longest ago.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Most addresses remembered (about 150 KiB of table).
pub const MAX_ADDRESSES: usize = 4096;

pub use crate::config::TarpitConfig;

/// What the table remembers of an address.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Failures counted since the count last started.
    failures: u32,
    /// The last failure (or the last slot taken, for an address without failures).
    last: Instant,
    /// Slots held: handshakes being checked, and refusals waiting for their delay.
    in_flight: u32,
    /// Whether the address was reported full since it last had a free slot.
    reported: bool,
}

/// Every slot of an address is held: its handshake is not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Whether this is the first handshake turned away since the address had a free slot
    /// (the one to log).
    pub first: bool,
}

/// Failing handshakes per address, and the slots of those being held.
#[derive(Debug)]
pub struct Tarpit {
    config: TarpitConfig,
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

impl Tarpit {
    /// A tarpit with room for [`MAX_ADDRESSES`] addresses.
    pub fn new(config: TarpitConfig) -> Tarpit {
        Tarpit {
            config,
            capacity: MAX_ADDRESSES,
            table: HashMap::new(),
        }
    }

    /// The same with room for `capacity` addresses (at least 1).
    pub fn with_capacity(mut self, capacity: usize) -> Tarpit {
        self.capacity = capacity.max(1);
        self
    }

    /// Whether the tarpit is off: refusals are sent at once and no slot is counted.
    pub fn is_off(&self) -> bool {
        self.config.max.is_zero()
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Takes a slot of `ip` for a handshake about to be checked. The slot must be given
    /// back with [`Tarpit::leave`] (at once when the handshake passes, after the delay
    /// [`Tarpit::failed`] returns when it does not).
    ///
    /// # Errors
    /// [`Full`] while every slot of the address is held: the handshake must not be checked.
    pub fn enter(&mut self, ip: IpAddr, now: Instant) -> Result<(), Full> {
        if self.is_off() {
            return Ok(());
        }
        let (window, max_in_flight) = (self.config.window, self.config.max_in_flight);
        let entry = self.entry(ip, now);
        if entry.in_flight >= max_in_flight {
            let first = !entry.reported;
            entry.reported = true;
            return Err(Full { first });
        }
        if entry.failures > 0 && now.saturating_duration_since(entry.last) > window {
            entry.failures = 0;
        }
        if entry.failures == 0 {
            entry.last = now;
        }
        entry.in_flight += 1;
        Ok(())
    }

    /// The entry of `ip`'s address, made (room made first, in a full table) when missing.
    fn entry(&mut self, ip: IpAddr, now: Instant) -> &mut Entry {
        let key = key(ip);
        if !self.table.contains_key(&key) && self.table.len() >= self.capacity {
            self.make_room(now);
        }
        self.table.entry(key).or_insert(Entry {
            failures: 0,
            last: now,
            in_flight: 0,
            reported: false,
        })
    }

    /// Gives back a slot of `ip` taken with [`Tarpit::enter`].
    pub fn leave(&mut self, ip: IpAddr) {
        let key = key(ip);
        let Some(entry) = self.table.get_mut(&key) else {
            // Evicted while the slot was held (a full table): nothing to give back.
            return;
        };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        if entry.in_flight < self.config.max_in_flight {
            entry.reported = false;
        }
        if entry.in_flight == 0 && entry.failures == 0 {
            self.table.remove(&key);
        }
    }

    /// Counts a wrong credential from `ip` (whose handshake holds a slot) at `now`, and
    /// returns how long its refusal waits; the slot stays held until then.
    pub fn failed(&mut self, ip: IpAddr, now: Instant) -> Duration {
        if self.is_off() {
            return Duration::ZERO;
        }
        let window = self.config.window;
        let entry = self.entry(ip, now);
        if now.saturating_duration_since(entry.last) > window {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last = now;
        let failures = entry.failures;
        self.config.delay(failures)
    }

    /// Frees at least one slot of the table.
    fn make_room(&mut self, now: Instant) {
        let window = self.config.window;
        self.table
            .retain(|_, e| e.in_flight > 0 || now.saturating_duration_since(e.last) <= window);
        if self.table.len() < self.capacity {
            return;
        }
        let victim = self
            .table
            .iter()
            .min_by_key(|(_, e)| (e.in_flight > 0, e.last))
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

    const MS: Duration = Duration::from_millis(1);

    fn config() -> TarpitConfig {
        TarpitConfig {
            free_failures: 5,
            window: Duration::from_secs(60),
            initial: 250 * MS,
            max: 3000 * MS,
            max_in_flight: 4,
        }
    }

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
    }

    /// One failing handshake: enter, fail, and the delay it gets (its slot still held).
    fn fail(t: &mut Tarpit, ip: IpAddr, now: Instant) -> Duration {
        t.enter(ip, now).expect("a free slot");
        t.failed(ip, now)
    }

    #[test]
    fn the_delay_grows_from_the_free_failures_and_is_capped() {
        let c = config();
        let delays: Vec<u128> = (1..=12).map(|n| c.delay(n).as_millis()).collect();
        assert_eq!(
            delays,
            [0, 0, 0, 0, 0, 250, 500, 1000, 2000, 3000, 3000, 3000]
        );
        assert_eq!(c.delay(u32::MAX), 3000 * MS);
        let none_free = TarpitConfig {
            free_failures: 0,
            ..c
        };
        assert_eq!(none_free.delay(1), 250 * MS);
    }

    #[test]
    fn failures_are_slowed_and_a_right_credential_is_never_held() {
        let mut t = Tarpit::new(config());
        let t0 = Instant::now();
        let mut delays = Vec::new();
        for i in 0..8u64 {
            let at = t0 + Duration::from_secs(i);
            delays.push(fail(&mut t, v4(1), at).as_millis());
            t.leave(v4(1));
        }
        assert_eq!(delays, [0, 0, 0, 0, 0, 250, 500, 1000]);
        // The right credential, from the same address, right after: a slot, at once,
        // given back at once; the failures stay counted.
        let at = t0 + Duration::from_secs(9);
        assert_eq!(t.enter(v4(1), at), Ok(()));
        t.leave(v4(1));
        assert_eq!(fail(&mut t, v4(1), at), 2000 * MS);
        t.leave(v4(1));
        // Another address starts from nothing.
        assert_eq!(fail(&mut t, v4(2), at), Duration::ZERO);
        t.leave(v4(2));
        // A quiet window forgets the failures.
        let later = at + Duration::from_secs(61);
        assert_eq!(fail(&mut t, v4(1), later), Duration::ZERO);
    }

    #[test]
    fn held_slots_are_bounded_and_a_full_address_is_not_checked() {
        let mut t = Tarpit::new(config());
        let t0 = Instant::now();
        for _ in 0..5 {
            fail(&mut t, v4(1), t0);
            t.leave(v4(1));
        }
        // Four refusals held (their delays running): the address is full.
        for _ in 0..4 {
            assert!(fail(&mut t, v4(1), t0) > Duration::ZERO);
        }
        assert_eq!(t.enter(v4(1), t0), Err(Full { first: true }));
        assert_eq!(t.enter(v4(1), t0), Err(Full { first: false }));
        // Not its neighbours.
        assert_eq!(t.enter(v4(2), t0), Ok(()));
        t.leave(v4(2));
        // One refusal sent: one handshake may be checked again, and a new full spell is
        // reported again.
        t.leave(v4(1));
        assert_eq!(t.enter(v4(1), t0), Ok(()));
        assert_eq!(t.enter(v4(1), t0), Err(Full { first: true }));
        // An attacker learns at most max_in_flight guesses per max delay: over 60 s of
        // trying every millisecond, each refusal sent when its delay is over.
        let mut t = Tarpit::new(config());
        let mut pending: Vec<Instant> = Vec::new();
        let mut checked = 0u32;
        for ms in 0..60_000u64 {
            let now = t0 + Duration::from_millis(ms);
            pending.retain(|&until| {
                let over = until <= now;
                if over {
                    t.leave(v4(9));
                }
                !over
            });
            if t.enter(v4(9), now).is_ok() {
                checked += 1;
                pending.push(now + t.failed(v4(9), now));
            }
        }
        // 5 free, the ramp (about 4 s), then 4 per 3 s.
        assert!((80..=90).contains(&checked), "{checked} guesses checked");
    }

    #[test]
    fn off_counts_nothing() {
        let mut t = Tarpit::new(TarpitConfig {
            max: Duration::ZERO,
            ..config()
        });
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(fail(&mut t, v4(1), now), Duration::ZERO);
        }
        assert!(t.is_off());
        assert!(t.is_empty());
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let mut t = Tarpit::new(TarpitConfig {
            free_failures: 1,
            ..config()
        });
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(fail(&mut t, a, now), Duration::ZERO);
        assert_eq!(fail(&mut t, b, now), 250 * MS);
        assert_eq!(fail(&mut t, other, now), Duration::ZERO);
        let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 7).to_ipv6_mapped());
        assert_eq!(fail(&mut t, mapped, now), Duration::ZERO);
        assert_eq!(fail(&mut t, v4(7), now), 250 * MS);
        assert_eq!(t.enter(IpAddr::V6(Ipv6Addr::LOCALHOST), now), Ok(()));
    }

    #[test]
    fn passing_handshakes_leave_nothing_behind() {
        let mut t = Tarpit::new(config());
        let now = Instant::now();
        for i in 0..10_000u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            t.enter(ip, now).unwrap();
            t.leave(ip);
        }
        assert!(t.is_empty());
    }

    #[test]
    fn the_table_is_bounded_and_keeps_held_slots() {
        let mut t = Tarpit::new(TarpitConfig {
            free_failures: 0,
            ..config()
        })
        .with_capacity(100);
        let now = Instant::now();
        // One address with a refusal held, then 100 000 others failing once each.
        assert!(fail(&mut t, v4(1), now) > Duration::ZERO);
        for i in 0..100_000u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            fail(&mut t, ip, now + Duration::from_micros(u64::from(i)));
            t.leave(ip);
            assert!(t.len() <= 100);
        }
        assert_eq!(t.len(), 100);
        // Addresses holding no slot were evicted first: the held one is still counted.
        assert_eq!(fail(&mut t, v4(1), now), 500 * MS);
        // Once windows are over, they make the room.
        let later = now + Duration::from_secs(120);
        fail(&mut t, v4(200), later);
        assert_eq!(t.len(), 2);
        // A slot given back for an evicted address is no error.
        t.leave(v4(123));
    }
}
