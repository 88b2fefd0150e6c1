//! Loops told apart from fan-out: the functions a message (`yomo-tid`) passed through.
//!
//! A stream function may write any number of outputs per input (splitters, batch
//! expanders, a request answered by a stream), and every one is delivered. What is bounded
//! is a *loop*: a message coming back to a function whose own output led to it — a
//! function observing a tag it writes, a ring of functions, three functions that each
//! re-emit what they all observe. YoMo functions carry no hop count, but every output
//! carries its input's `yomo-tid` (YoMo's `ctx.Write` copies the input's metadata, y3's
//! functions too), so the router follows each tid through the functions it reaches:
//!
//! ```text
//!   function S writes tid T; for each local recipient R of the frame:
//!     R == S, or R ∈ ancestors(S)   ─▶ a return (one more turn around a loop):
//!                                        R.returns < max_loop_returns ? deliver, R.returns += 1
//!                                                                     : drop, count `loop`
//!     otherwise                     ─▶ deliver; ancestors(R) ∪= ancestors(S) ∪ {S}
//!   a frame from an upstream zipper or the federation (S outside): R returns if R wrote T
//!
//!   tid ─SipHash─▶ shard (mutex) ─▶ current generation ─miss─▶ previous generation (moved up)
//!   a generation lives one window, or until its journeys hold MEMBER_CAP members
//! ```
//!
//! Ancestry only grows, so once a loop is closed every further turn is a return, and each
//! function takes at most `max_loop_returns` of them per message: an honest loop dies out
//! after a few turns whatever its width. A journey follows at most [`MAX_MEMBERS`]
//! functions (a bit each); a function past them is not followed: its outputs count as
//! returns (a message reaching that many functions is treated as looping).
//!
//! Memory is bounded by members, not messages: `SHARDS × 2 × MEMBER_CAP` members at most,
//! and a tid is kept as its 64-bit keyed hash (a long tid costs nothing). Only frames from
//! stream functions pay the lookup (one shard lock), and frames from upstream zippers and
//! the federation only when a recipient is a function that wrote some message; frames from
//! sources pay nothing. A forgotten journey (two windows idle, or pushed out
//! by a flood of new messages) starts afresh: a loop slower than that gets
//! `max_loop_returns` more turns per window, never an unbounded number.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::table::SessionId;

const SHARDS: usize = 16;
/// Members per shard generation.
const MEMBER_CAP: usize = 8192;
/// Functions one journey follows (one bit each in an ancestor set).
pub(crate) const MAX_MEMBERS: usize = 128;
/// How long a journey is remembered: between one and two of these after its last frame.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

/// Who wrote the frame being routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A local stream function (its session).
    Function(SessionId),
    /// An upstream zipper or another router: what led to the frame is not known here.
    Outside,
}

/// What [`Journeys::pass`] decided for one frame.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Passage {
    /// Positions (in the recipients given) of the deliveries to drop as `loop`, ascending.
    pub dropped: Vec<usize>,
    /// The first drop of this message, to be logged (once per message).
    pub report: Option<Returned>,
}

/// A message's first dropped return: who it came back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Returned {
    /// The function it came back to.
    pub recipient: SessionId,
    /// Returns it had already taken (the limit).
    pub returns: u32,
}

/// One function on a message's way.
#[derive(Debug)]
struct Member {
    session: SessionId,
    /// Members (by index) whose outputs led to this one's inputs.
    ancestors: u128,
    /// Returns delivered to it.
    returns: u32,
    /// Whether it wrote the message.
    wrote: bool,
}

/// The functions one message passed through.
#[derive(Debug, Default)]
struct Journey {
    members: Vec<Member>,
    /// Returns among functions past [`MAX_MEMBERS`] (shared: they are not told apart).
    overflow_returns: u32,
    /// Whether a drop of this message was reported.
    reported: bool,
}

impl Journey {
    fn find(&self, session: SessionId) -> Option<usize> {
        self.members.iter().position(|m| m.session == session)
    }

    /// The member index of `session`, added if there is room (`added` counts additions).
    fn member(&mut self, session: SessionId, added: &mut usize) -> Option<usize> {
        if let Some(i) = self.find(session) {
            return Some(i);
        }
        if self.members.len() >= MAX_MEMBERS {
            return None;
        }
        self.members.push(Member {
            session,
            ancestors: 0,
            returns: 0,
            wrote: false,
        });
        *added += 1;
        Some(self.members.len() - 1)
    }
}

/// The tid's hash is the key already (keyed SipHash): the maps use it as it is.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Map = HashMap<u64, Journey, BuildHasherDefault<Prehashed>>;

#[derive(Debug)]
struct Shard {
    current: Map,
    previous: Map,
    /// Members in `current`.
    members: usize,
    since: Instant,
}

impl Shard {
    /// Starts a new generation when the current one is a window old or full.
    fn rotate(&mut self, now: Instant, window: Duration) {
        let age = now.saturating_duration_since(self.since);
        if age >= window || self.members >= MEMBER_CAP {
            // Rotations are lazy: after two idle windows nothing is left to remember.
            self.previous = std::mem::take(&mut self.current);
            if age >= 2 * window {
                self.previous.clear();
            }
            self.members = 0;
            self.since = now;
        }
    }

    /// The journey of `key`, if either generation has it (left where it is).
    fn known(&mut self, key: u64) -> Option<&mut Journey> {
        match self.current.get_mut(&key) {
            Some(journey) => Some(journey),
            None => self.previous.get_mut(&key),
        }
    }

    /// The journey of `key` in the current generation (moved up from the previous one, or
    /// new).
    fn journey(&mut self, key: u64) -> &mut Journey {
        match self.current.entry(key) {
            Entry::Occupied(journey) => journey.into_mut(),
            Entry::Vacant(slot) => {
                let journey = self.previous.remove(&key).unwrap_or_else(|| Journey {
                    // A writer and one recipient: the common case.
                    members: Vec::with_capacity(2),
                    ..Journey::default()
                });
                self.members += journey.members.len();
                slot.insert(journey)
            }
        }
    }
}

/// The journeys of recent messages, sharded by tid.
#[derive(Debug)]
pub(crate) struct Journeys {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    limit: u32,
    window: Duration,
    /// A bit per session (its id modulo the bits) for the functions that wrote a message:
    /// a frame from outside none of whose recipients has its bit set cannot return to one
    /// and skips the lookup (a mesh delivering to sinks pays a load per recipient).
    writers: [AtomicU64; WRITER_WORDS],
}

/// Words of [`Journeys`]'s writer bits (64 each).
const WRITER_WORDS: usize = 16;

impl Journeys {
    /// Each function may take at most `limit` returns per message, remembered for about
    /// `window`.
    pub fn new(limit: u32, window: Duration) -> Journeys {
        let now = Instant::now();
        Journeys {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        current: Map::default(),
                        previous: Map::default(),
                        members: 0,
                        since: now,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
            limit,
            window,
            writers: Default::default(),
        }
    }

    /// The word and bit of `session` among the writer bits.
    fn writer_bit(session: SessionId) -> (usize, u64) {
        let n = (session % (WRITER_WORDS as u64 * 64)) as usize;
        (n / 64, 1 << (n % 64))
    }

    /// Decides, for a frame of message `tid` written by `writer`, which of its local
    /// `recipients` are returns past their budget (to be dropped as `loop`), and records
    /// the rest of the way.
    pub fn pass(
        &self,
        tid: &[u8],
        writer: Writer,
        recipients: impl Iterator<Item = SessionId> + Clone,
        now: Instant,
    ) -> Passage {
        match writer {
            Writer::Function(session) => {
                let (word, bit) = Self::writer_bit(session);
                if self.writers[word].load(Ordering::Relaxed) & bit == 0 {
                    self.writers[word].fetch_or(bit, Ordering::Relaxed);
                }
            }
            Writer::Outside => {
                let wrote = |session| {
                    let (word, bit) = Self::writer_bit(session);
                    self.writers[word].load(Ordering::Relaxed) & bit != 0
                };
                if !recipients.clone().any(wrote) {
                    return Passage::default();
                }
            }
        }
        let key = self.hasher.hash_one(tid);
        let shard = &self.shards[(key >> 32) as usize % SHARDS];
        let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
        shard.rotate(now, self.window);
        let mut added = 0;
        let journey = match writer {
            Writer::Function(_) => shard.journey(key),
            // A message no local function wrote cannot come back to one: nothing to keep.
            Writer::Outside => match shard.known(key) {
                Some(journey) => journey,
                None => return Passage::default(),
            },
        };
        // What led to this frame: the writer and its ancestors. A function not followed
        // (past MAX_MEMBERS) may have been led to by anyone.
        let led_by = match writer {
            Writer::Function(session) => match journey.member(session, &mut added) {
                Some(i) => {
                    let member = &mut journey.members[i];
                    member.wrote = true;
                    Some(member.ancestors | 1 << i)
                }
                None => Some(u128::MAX),
            },
            Writer::Outside => None,
        };
        let mut passage = Passage::default();
        for (position, recipient) in recipients.enumerate() {
            let index = match led_by {
                Some(_) => journey.member(recipient, &mut added),
                None => journey.find(recipient),
            };
            let returned = match (led_by, index) {
                (Some(led_by), Some(i)) => led_by & 1 << i != 0,
                (None, Some(i)) => journey.members[i].wrote,
                // Not followed: a return only between two functions past the limit.
                (Some(led_by), None) => led_by == u128::MAX,
                (None, None) => false,
            };
            if let (Some(led_by), Some(i)) = (led_by, index) {
                journey.members[i].ancestors |= led_by;
            }
            if !returned {
                continue;
            }
            let returns = match index {
                Some(i) => &mut journey.members[i].returns,
                None => &mut journey.overflow_returns,
            };
            if *returns < self.limit {
                *returns += 1;
                continue;
            }
            if !journey.reported {
                journey.reported = true;
                passage.report = Some(Returned {
                    recipient,
                    returns: *returns,
                });
            }
            passage.dropped.push(position);
        }
        shard.members += added;
        passage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: SessionId = 1;
    const G: SessionId = 2;
    const H: SessionId = 3;

    fn dropped(j: &Journeys, tid: &str, w: Writer, to: &[SessionId], now: Instant) -> Vec<usize> {
        j.pass(tid.as_bytes(), w, to.iter().copied(), now).dropped
    }

    #[test]
    fn fan_out_and_pipelines_are_not_loops() {
        let j = Journeys::new(0, WINDOW);
        let now = Instant::now();
        // F splits one input into 10,000 outputs for G, which maps each for H.
        for _ in 0..10_000 {
            assert!(dropped(&j, "t", Writer::Function(F), &[G], now).is_empty());
            assert!(dropped(&j, "t", Writer::Function(G), &[H], now).is_empty());
        }
        // A join: G also reads F's input, from outside, and writes to F.
        assert!(dropped(&j, "u", Writer::Function(G), &[F], now).is_empty());
        assert!(dropped(&j, "u", Writer::Function(F), &[H], now).is_empty());
    }

    #[test]
    fn a_self_loop_gets_its_returns_then_drops_reported_once() {
        let j = Journeys::new(3, WINDOW);
        let now = Instant::now();
        for _ in 0..3 {
            assert!(dropped(&j, "t", Writer::Function(F), &[F, G], now).is_empty());
        }
        let p = j.pass(b"t", Writer::Function(F), [F, G].into_iter(), now);
        assert_eq!(p.dropped, [0]);
        assert_eq!(
            p.report,
            Some(Returned {
                recipient: F,
                returns: 3
            })
        );
        let p = j.pass(b"t", Writer::Function(F), [F, G].into_iter(), now);
        assert_eq!((p.dropped, p.report), (vec![0], None));
        // Another message has its own budget.
        assert!(dropped(&j, "other", Writer::Function(F), &[F], now).is_empty());
    }

    #[test]
    fn a_ring_is_a_loop() {
        let j = Journeys::new(0, WINDOW);
        let now = Instant::now();
        assert!(dropped(&j, "t", Writer::Function(F), &[G], now).is_empty());
        assert!(dropped(&j, "t", Writer::Function(G), &[H], now).is_empty());
        assert_eq!(dropped(&j, "t", Writer::Function(H), &[F], now), [0]);
        // From outside, a function that wrote the message is returned to.
        assert_eq!(dropped(&j, "t", Writer::Outside, &[G, 9], now), [0]);
    }

    #[test]
    fn frames_from_outside_of_unknown_messages_keep_nothing() {
        let j = Journeys::new(0, WINDOW);
        let now = Instant::now();
        for i in 0..1000 {
            assert!(dropped(&j, &i.to_string(), Writer::Outside, &[F, G], now).is_empty());
        }
        assert!(j
            .shards
            .iter()
            .all(|s| s.lock().unwrap().current.is_empty()));
    }

    #[test]
    fn journeys_are_forgotten_after_two_windows() {
        let j = Journeys::new(0, Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(dropped(&j, "t", Writer::Function(F), &[G], t0).is_empty());
        assert_eq!(dropped(&j, "t", Writer::Function(G), &[F], t0), [0]);
        // One window later it is carried over from the previous generation...
        let t1 = t0 + Duration::from_millis(1500);
        assert_eq!(dropped(&j, "t", Writer::Function(G), &[F], t1), [0]);
        // ...and two idle windows later it is forgotten.
        let t2 = t1 + Duration::from_millis(2500);
        assert!(dropped(&j, "t", Writer::Function(G), &[F], t2).is_empty());
    }

    #[test]
    fn functions_past_the_members_limit_share_one_budget() {
        let j = Journeys::new(2, WINDOW);
        let now = Instant::now();
        let many: Vec<SessionId> = (100..100 + MAX_MEMBERS as u64 + 10).collect();
        assert!(dropped(&j, "t", Writer::Function(F), &many, now).is_empty());
        let past = *many.last().unwrap();
        // An unfollowed writer is taken to be led by everyone: followed recipients return.
        assert_eq!(
            dropped(&j, "t", Writer::Function(past), &[F], now),
            [] as [usize; 0]
        );
        let p = dropped(
            &j,
            "t",
            Writer::Function(past),
            &[F, F, F, past, past, past],
            now,
        );
        assert_eq!(p, [1, 2, 5]);
    }

    #[test]
    fn memory_is_bounded() {
        let j = Journeys::new(1, Duration::from_secs(3600));
        let now = Instant::now();
        for i in 0..(SHARDS * MEMBER_CAP * 4) {
            j.pass(
                i.to_string().as_bytes(),
                Writer::Function(F),
                [G].into_iter(),
                now,
            );
        }
        for shard in &j.shards {
            let s = shard.lock().unwrap();
            let members = |m: &Map| m.values().map(|j| j.members.len()).sum::<usize>();
            assert!(
                members(&s.current) <= MEMBER_CAP + 2,
                "{}",
                members(&s.current)
            );
            assert!(members(&s.previous) <= MEMBER_CAP + 2);
        }
    }
}
