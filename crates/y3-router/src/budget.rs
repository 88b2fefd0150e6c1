//! The router's memory budget (`limits.max_queued_bytes`): the bytes the router actually
//! holds for its clients, counted once each, against one limit.
//!
//! ```text
//!  held = Σ unique frame buffers      a routed frame is charged once (a [`Charge`] token it
//!                                     carries), its shared queue entry included (every queue
//!                                     points at one `Arc` of it, outbox.rs), and released
//!                                     when the last queue lets go of it
//!       + Σ queue slots               FRAME_OVERHEAD per queued frame per queue (outbox.rs)
//!       + Σ partial frames            bytes a reader buffered of a frame still arriving
//!                                     ([`Partial`]), before and after the handshake
//!       + Σ MQTT outlets              bytes written to a plain-TCP MQTT client that its
//!                                     socket has not taken yet (`mqtt/outlet.rs`)
//! ```
//!
//! One atomic counter, which is also the `y3_router_queued_bytes` gauge: charging and
//! releasing are an `fetch_add`/`fetch_sub` each, no lock on the per-frame path.
//!
//! When a push finds the budget over its limit, [`Budget::reclaim`] evicts the largest
//! *non-reading* subscribers first (data waiting, no batch taken for their block timeout),
//! all of them in one pass until the budget is back under 7/8 of its limit, so that many
//! stuck subscribers go together and a reading subscriber's frames are never dropped for
//! their backlog. A reading subscriber under `block` that still finds the budget full waits
//! (its publisher is held back) rather than losing a frame. A partial frame that would grow
//! past the budget (after a reclaim) first cuts the largest *stalled* partial frames of
//! other clients (no byte for [`STALLED`], at least [`CUTTABLE`] bytes: their connections
//! are closed, their buffers freed as their readers go, a few ms later); only if that
//! cannot make room is the growing frame cut itself.
//!
//! Unauthenticated connections have a budget of their own ([`Budget::set_unauthenticated`]):
//! a handshake is at most `limits.max_handshake_len` (the codec refuses a longer one from
//! its header) and all partial handshakes together at most
//! `limits.max_unauthenticated_bytes`; a handshake that would grow past it is cut.
//!
//! Every eviction and cut is counted in `y3_router_budget_actions_total{action}`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::outbox::{Eviction, Outbox};

/// What the budget did to free memory (label of `y3_router_budget_actions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// A subscriber that took nothing for its block timeout, evicted while the budget was
    /// over its limit.
    EvictNonReader,
    /// A partial frame of an admitted client that would have grown past the budget: cut.
    CutPartialFrame,
    /// A stalled partial frame (no byte for [`STALLED`]), cut, largest first, to make room
    /// for another that grows while the budget is full.
    CutStalledPartialFrame,
    /// A partial handshake that would have grown past the unauthenticated budget: cut.
    CutPartialHandshake,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 4] = [
        Action::EvictNonReader,
        Action::CutPartialFrame,
        Action::CutStalledPartialFrame,
        Action::CutPartialHandshake,
    ];

    /// The snake_case name.
    pub const fn name(self) -> &'static str {
        match self {
            Action::EvictNonReader => "evict_non_reader",
            Action::CutPartialFrame => "cut_partial_frame",
            Action::CutStalledPartialFrame => "cut_stalled_partial_frame",
            Action::CutPartialHandshake => "cut_partial_handshake",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

/// The router-wide memory budget.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// Bytes held; `y3_router_queued_bytes`. Its atomic is the counter itself.
    held: Gauge,
    /// 0: no budget.
    limit: AtomicUsize,
    /// Bytes of partial handshakes (also in `held`).
    unauthenticated: AtomicUsize,
    /// 0: no separate budget for them.
    unauthenticated_limit: AtomicUsize,
    /// Subscribers' outboxes, to find the non-reading ones. Locked only on registration and
    /// when the budget is over its limit.
    consumers: Mutex<Vec<Weak<Outbox>>>,
    /// Partial frames of at least [`CUTTABLE`] bytes, to cut the largest stalled ones when
    /// another grows into a full budget. Locked when one first reaches that size and when
    /// the budget is full.
    partials: Mutex<Vec<Weak<PartialState>>>,
    /// One reclaim at a time; others go on (and look again).
    reclaiming: AtomicBool,
    /// When the last reclaim scanned the subscribers (ns since [`base`]): at most one scan
    /// per [`RESCAN`], so that pushers waiting on a full budget do not each walk them all.
    scanned_at: AtomicU64,
    /// When the last push that waited (for room in a queue, or for this budget) ended (ns
    /// since [`base`], 0: none yet): see [`Budget::pushed_no_earlier`].
    hold_ended: AtomicU64,
    actions: Family<ActionLabel, Counter>,
}

/// A partial frame that received no byte for this long is stalled: when the budget is
/// full, stalled ones are cut (largest first) before one that is still arriving.
pub(crate) const STALLED: Duration = Duration::from_millis(250);

/// Partial frames smaller than this are never cut for another (nor registered).
pub(crate) const CUTTABLE: usize = 64 << 10;

/// Least time between two scans of the subscribers by [`Budget::reclaim`].
const RESCAN: Duration = Duration::from_millis(1);

/// A fixed instant of this process, to keep instants in an atomic.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// `now` as ns since [`base`] (at least 1).
fn nanos(now: Instant) -> u64 {
    (now.saturating_duration_since(base()).as_nanos() as u64).max(1)
}

/// Bytes a frame's charge itself costs: its `Arc` and the shared header of its buffer.
pub(crate) const CHARGE_OVERHEAD: usize = 64;

/// A frame's bytes, charged to the budget until the last clone of the frame is dropped
/// (attached to it as its [`y3_transport::frame::Token`]).
#[derive(Debug)]
pub(crate) struct Charge {
    bytes: usize,
    held: Gauge,
}

impl std::ops::Drop for Charge {
    fn drop(&mut self) {
        self.held.dec_by(self.bytes as i64);
    }
}

/// Why a partial frame was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    /// Bytes of it buffered.
    pub buffered: usize,
    /// The limit it would have passed.
    pub limit: usize,
    /// Whether it was a handshake (unauthenticated budget).
    pub handshake: bool,
}

impl Budget {
    /// A push that waited has ended (on the runtime's clock): the frames its publisher read
    /// before are queued only from now on.
    pub fn hold_ended(&self) {
        let now = nanos(tokio::time::Instant::now().into_std());
        self.hold_ended.fetch_max(now, Ordering::Relaxed);
    }

    /// A time no later than the push of a frame read at `at` that is being pushed now: the
    /// later of `at` and the end of the last hold (a frame read before a hold is pushed only
    /// after it). A queue the frame finds empty starts its subscriber's clock from it, with
    /// no clock read per frame: from `at` alone, a subscriber that kept up while its
    /// publisher was held elsewhere would count as stalled the moment its queue filled.
    #[inline]
    pub fn pushed_no_earlier(&self, at: Instant) -> Instant {
        match self.hold_ended.load(Ordering::Relaxed) {
            0 => at,
            ended => at.max(base() + Duration::from_nanos(ended)),
        }
    }

    /// The gauge to register as `queued_bytes`.
    pub fn gauge(&self) -> Gauge {
        self.held.clone()
    }

    /// Registers the action counters.
    pub fn register(&self, registry: &mut Registry) {
        for action in Action::ALL {
            drop(self.actions.get_or_create(&ActionLabel {
                action: action.name(),
            }));
        }
        registry.register(
            "budget_actions",
            "What the memory budget did to stay within its limit: non-reading subscribers \
             evicted, partial frames and handshakes cut",
            self.actions.clone(),
        );
    }

    /// Sets the limit in bytes (0: none).
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Sets the budget of all partial handshakes together (0: only the main budget).
    pub fn set_unauthenticated(&self, bytes: usize) {
        self.unauthenticated_limit.store(bytes, Ordering::Relaxed);
    }

    /// The limit (0: none).
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.held.get().max(0) as usize
    }

    /// Bytes of partial handshakes held now.
    #[cfg(test)]
    pub fn unauthenticated(&self) -> usize {
        self.unauthenticated.load(Ordering::Relaxed)
    }

    /// Whether `more` bytes fit.
    pub fn fits(&self, more: usize) -> bool {
        let limit = self.limit();
        limit == 0 || self.used().saturating_add(more) <= limit
    }

    /// Charges `bytes` until the returned charge is dropped.
    pub fn charge(&self, bytes: usize) -> Charge {
        self.held.inc_by(bytes as i64);
        Charge {
            bytes,
            held: self.held.clone(),
        }
    }

    /// Accounts `before` → `after` bytes held outside frames (queue slots).
    pub fn changed(&self, before: usize, after: usize) {
        if after != before {
            self.held.inc_by(after as i64 - before as i64);
        }
    }

    /// How many times `action` was taken.
    #[cfg(test)]
    pub fn actions(&self, action: Action) -> u64 {
        self.actions
            .get_or_create(&ActionLabel {
                action: action.name(),
            })
            .get()
    }

    fn count(&self, action: Action) {
        self.actions
            .get_or_create(&ActionLabel {
                action: action.name(),
            })
            .inc();
    }

    /// Lets [`reclaim`](Budget::reclaim) find `outbox` while it lives.
    pub fn register_consumer(&self, outbox: &Arc<Outbox>) {
        let mut consumers = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
        // Forget the gone ones now and then (amortised: when the list doubled).
        if consumers.len() >= 64 && consumers.len().is_power_of_two() {
            consumers.retain(|w| w.strong_count() > 0);
        }
        consumers.push(Arc::downgrade(outbox));
    }

    /// Cuts stalled partial frames other than `own`, largest first, until `need` bytes are
    /// freed; none when all of them would not free that much. Returns the bytes freed.
    fn cut_stalled(&self, own: &Arc<PartialState>, need: usize, now: Instant) -> usize {
        let at = nanos(now);
        let stalled_for = STALLED.as_nanos() as u64;
        let mut stalled: Vec<(usize, Arc<PartialState>)> = {
            let mut partials = self.partials.lock().unwrap_or_else(|e| e.into_inner());
            partials.retain(|w| w.strong_count() > 0);
            partials
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|p| !Arc::ptr_eq(p, own) && !p.cut.is_cancelled())
                .filter(|p| at.saturating_sub(p.grew_at.load(Ordering::Relaxed)) >= stalled_for)
                .map(|p| (p.held.load(Ordering::Relaxed), p))
                .filter(|(held, _)| *held > 0)
                .collect()
        };
        // Cutting them all would not make room: cut none (the grower is refused instead).
        if stalled.iter().map(|(held, _)| held).sum::<usize>() < need {
            return 0;
        }
        stalled.sort_unstable_by_key(|(held, _)| std::cmp::Reverse(*held));
        let mut freed = 0;
        for (held, p) in stalled {
            if freed >= need {
                break;
            }
            p.cut.cancel();
            self.count(Action::CutStalledPartialFrame);
            freed += held;
        }
        freed
    }

    /// Over the limit: evicts non-reading subscribers, largest backlog first, until the
    /// budget is under 7/8 of its limit (or none is left). Returns how many it evicted.
    pub fn reclaim(&self, now: Instant) -> usize {
        let limit = self.limit();
        let at = now.saturating_duration_since(base()).as_nanos() as u64;
        let last = self.scanned_at.load(Ordering::Relaxed);
        if limit == 0
            || (last != 0 && at.saturating_sub(last) < RESCAN.as_nanos() as u64)
            || self.reclaiming.swap(true, Ordering::Acquire)
        {
            return 0;
        }
        self.scanned_at.store(at.max(1), Ordering::Relaxed);
        let mut stuck: Vec<(usize, Arc<Outbox>)> = {
            let mut consumers = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
            consumers.retain(|w| w.strong_count() > 0);
            consumers
                .iter()
                .filter_map(Weak::upgrade)
                .filter_map(|o| o.non_reading(now).map(|bytes| (bytes, o)))
                .collect()
        };
        stuck.sort_unstable_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        let low = limit - limit / 8;
        let mut evicted = 0;
        for (_, outbox) in stuck {
            if self.used() <= low {
                break;
            }
            outbox.evict(Eviction::Budget);
            self.count(Action::EvictNonReader);
            evicted += 1;
        }
        self.reclaiming.store(false, Ordering::Release);
        evicted
    }
}

/// The bytes of one connection's partial frame, charged to the budget as they grow and
/// released when the frame completes or the connection goes.
#[derive(Debug)]
pub(crate) struct Partial<'a> {
    budget: &'a Budget,
    held: usize,
    /// Before the handshake: charged to the unauthenticated budget too.
    handshake: bool,
    /// What another connection's partial frame reads to cut this one when it stalls.
    state: Arc<PartialState>,
    /// Whether `state` is in the budget's list (once it held [`CUTTABLE`] bytes).
    registered: bool,
}

/// A partial frame as other connections see it (`Budget::cut_stalled`).
#[derive(Debug, Default)]
pub(crate) struct PartialState {
    /// Bytes charged for it.
    held: AtomicUsize,
    /// When it last grew (ns since [`base`]).
    grew_at: AtomicU64,
    /// Cancelled when it is cut for another: its connection closes.
    cut: tokio_util::sync::CancellationToken,
}

impl<'a> Partial<'a> {
    /// A partial frame of a connection not yet admitted (`handshake`) or admitted.
    pub fn new(budget: &'a Budget, handshake: bool) -> Partial<'a> {
        Partial {
            budget,
            held: 0,
            handshake,
            state: Arc::default(),
            registered: false,
        }
    }

    /// Cancelled when this partial frame was cut for another's room (its connection must
    /// close: the frame can never complete).
    pub fn cut_token(&self) -> tokio_util::sync::CancellationToken {
        self.state.cut.clone()
    }

    /// The partial frame now holds `len` bytes.
    ///
    /// # Errors
    /// [`Cut`] (counted) when growing to `len` would pass the unauthenticated budget (a
    /// handshake), or the main budget even after a [`reclaim`](Budget::reclaim): the
    /// connection must be closed. What was charged stays charged until this is dropped.
    pub fn set(&mut self, len: usize) -> Result<(), Cut> {
        if len <= self.held {
            self.release(self.held - len);
            return Ok(());
        }
        let more = len - self.held;
        if self.handshake {
            let limit = self.budget.unauthenticated_limit.load(Ordering::Relaxed);
            let now = self
                .budget
                .unauthenticated
                .fetch_add(more, Ordering::Relaxed);
            if limit != 0 && now + more > limit {
                self.budget
                    .unauthenticated
                    .fetch_sub(more, Ordering::Relaxed);
                self.budget.count(Action::CutPartialHandshake);
                return Err(Cut {
                    buffered: len,
                    limit,
                    handshake: true,
                });
            }
        }
        if !self.budget.fits(more) {
            let now = Instant::now();
            self.budget.reclaim(now);
            // Still full: stalled partial frames of others go before this one, which is
            // arriving (its bytes charged at once; theirs freed as their readers close).
            let limit = self.budget.limit();
            let need = self
                .budget
                .used()
                .saturating_add(more)
                .saturating_sub(limit);
            let fits = self.budget.fits(more)
                || (!self.handshake && self.budget.cut_stalled(&self.state, need, now) >= need);
            if !fits {
                if self.handshake {
                    self.budget
                        .unauthenticated
                        .fetch_sub(more, Ordering::Relaxed);
                }
                self.budget.count(if self.handshake {
                    Action::CutPartialHandshake
                } else {
                    Action::CutPartialFrame
                });
                return Err(Cut {
                    buffered: len,
                    limit: self.budget.limit(),
                    handshake: self.handshake,
                });
            }
        }
        self.budget.held.inc_by(more as i64);
        self.held = len;
        if !self.handshake && len >= CUTTABLE {
            self.state.held.store(len, Ordering::Relaxed);
            self.state
                .grew_at
                .store(nanos(Instant::now()), Ordering::Relaxed);
            if !self.registered {
                self.registered = true;
                let mut partials = self
                    .budget
                    .partials
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                // Forget the gone ones now and then (amortised: when the list doubled).
                if partials.len() >= 64 && partials.len().is_power_of_two() {
                    partials.retain(|w| w.strong_count() > 0);
                }
                partials.push(Arc::downgrade(&self.state));
            }
        }
        Ok(())
    }

    /// The frame completed (its bytes are charged with it now) or none is begun.
    pub fn clear(&mut self) {
        if self.held > 0 {
            self.release(self.held);
        }
    }

    fn release(&mut self, less: usize) {
        if less == 0 {
            return;
        }
        if self.handshake {
            self.budget
                .unauthenticated
                .fetch_sub(less, Ordering::Relaxed);
        }
        self.budget.held.dec_by(less as i64);
        self.held -= less;
        if self.registered {
            self.state.held.store(self.held, Ordering::Relaxed);
        }
    }
}

impl std::ops::Drop for Partial<'_> {
    fn drop(&mut self) {
        self.release(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_and_limits() {
        let b = Budget::default();
        assert!(b.fits(usize::MAX / 2), "no limit by default");
        b.set_limit(100);
        b.changed(0, 60);
        assert!(b.fits(40) && !b.fits(41));
        b.changed(60, 10);
        assert_eq!((b.used(), b.gauge().get()), (10, 10));
        assert!(b.fits(90));
    }

    /// A charge shared by clones is counted once and released with the last clone.
    #[test]
    fn a_shared_charge_counts_once() {
        let b = Budget::default();
        let token: Arc<Charge> = Arc::new(b.charge(1000));
        let clones: Vec<_> = (0..50).map(|_| token.clone()).collect();
        assert_eq!(b.used(), 1000);
        drop(token);
        assert_eq!(b.used(), 1000);
        drop(clones);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn partial_handshakes_have_a_budget_of_their_own() {
        let b = Budget::default();
        b.set_limit(1 << 20);
        b.set_unauthenticated(100);
        let mut one = Partial::new(&b, true);
        let mut two = Partial::new(&b, true);
        one.set(60).unwrap();
        assert_eq!(
            two.set(50),
            Err(Cut {
                buffered: 50,
                limit: 100,
                handshake: true
            })
        );
        two.set(40).unwrap();
        assert_eq!((b.used(), b.unauthenticated()), (100, 100));
        drop(one);
        let mut admitted = Partial::new(&b, false);
        admitted.set(10_000).unwrap();
        assert_eq!((b.used(), b.unauthenticated()), (10_040, 40));
        drop(two);
        drop(admitted);
        assert_eq!(b.used(), 0);
        assert_eq!(b.actions(Action::CutPartialHandshake), 1);
    }

    /// A frame growing into a full budget cuts the largest stalled partial frames of
    /// others first, as many as make room, and none that is still arriving or small.
    #[test]
    fn the_largest_stalled_partial_frames_are_cut_first() {
        const K: usize = 1 << 10;
        let b = Budget::default();
        b.set_limit(1000 * K);
        // Stalled: 400, 300 and 100 KiB; still arriving: 150 KiB (grows again below).
        let mut stalled: Vec<_> = [400, 300, 100]
            .iter()
            .map(|kib| {
                let mut p = Partial::new(&b, false);
                p.set(kib * K).unwrap();
                p
            })
            .collect();
        let mut arriving = Partial::new(&b, false);
        arriving.set(150 * K).unwrap();
        // 950 KiB held. Past STALLED, the arriving one grows once more (not stalled).
        std::thread::sleep(STALLED + Duration::from_millis(20));
        arriving.set(151 * K).unwrap();
        // A new frame needs 300 KiB: 251 KiB over, so the 400 KiB one is cut, nothing else.
        let mut grower = Partial::new(&b, false);
        grower.set(300 * K).unwrap();
        let cut: Vec<bool> = stalled
            .iter()
            .map(|p| p.cut_token().is_cancelled())
            .collect();
        assert_eq!(cut, [true, false, false]);
        assert!(!arriving.cut_token().is_cancelled());
        assert_eq!(b.actions(Action::CutStalledPartialFrame), 1);
        // Its reader closes: the budget is back under its limit with the grower's bytes in.
        drop(stalled.remove(0));
        assert_eq!(b.used(), (300 + 100 + 151 + 300) * K);
        // Needing more than all stalled ones hold (300 + 100 KiB; the grower is fresh):
        // none is cut for nothing, the new frame is refused (counted as cut itself).
        let mut huge = Partial::new(&b, false);
        assert!(huge.set(700 * K).is_err());
        assert_eq!(b.actions(Action::CutPartialFrame), 1);
        assert_eq!(b.actions(Action::CutStalledPartialFrame), 1);
        assert!(stalled.iter().all(|p| !p.cut_token().is_cancelled()));
        drop((stalled, arriving, grower, huge));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn partial_frames_cannot_pass_the_budget() {
        let b = Budget::default();
        b.set_limit(1000);
        let mut frames: Vec<_> = (0..10).map(|_| Partial::new(&b, false)).collect();
        let mut cut = 0;
        for p in &mut frames {
            if p.set(300).is_err() {
                cut += 1;
            }
        }
        assert_eq!((cut, b.used()), (7, 900));
        assert_eq!(b.actions(Action::CutPartialFrame), 7);
        drop(frames);
        assert_eq!(b.used(), 0);
    }
}
