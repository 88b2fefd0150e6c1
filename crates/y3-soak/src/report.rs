//! The soak's ledger: every frame a soak client sent is read by the router or known to be
//! in doubt; every delivery the router owed is written, dropped and counted, or queued (the
//! balance is exactly 0: neither short nor over-counted); a healthy sink receives exactly
//! what the router wrote on its tag; every frame the router read on a healthy tag and did
//! not write is among the drops it counted with a reason; and every kind of chaos the soak
//! claims is counted as having happened.
//!
//! ```text
//!  per healthy tag:  sent ≈ read ── read − written ≤ counted drops ── written = received
//!  per lifetime:     deliveries = written + dropped(reason) + queued + forwarded
//! ```

use std::fmt::Write as _;

use serde::Serialize;

use crate::attacks::AttackCounts;
use crate::chaos::ChaosCounts;
use crate::flows::{Received, Sent};
use crate::pausing::Pauses;
use crate::prom::Totals;

/// One healthy flow's ledger.
#[derive(Debug, Serialize)]
pub struct FlowLedger {
    /// Flow name.
    pub name: String,
    /// Its tag.
    pub tag: u32,
    /// What the source wrote.
    pub sent: Sent,
    /// What the routers read on the tag, over all lifetimes.
    pub router_in: u64,
    /// What the routers wrote on the tag.
    pub router_out: u64,
    /// What the sink received.
    pub received: u64,
    /// Sequence numbers the sink never saw.
    pub missing: u64,
    /// Duplicates or reordering.
    pub disordered: u64,
    /// Latency p50 / p99 / p99.9 / max, µs.
    pub latency_us: [u64; 4],
}

impl FlowLedger {
    /// Builds the ledger of a flow on `tag`.
    pub fn new(name: &str, tag: u32, sent: Sent, seen: &Received, lifetimes: &[Totals]) -> Self {
        let q = |p: f64| seen.latency.value_at_quantile(p);
        FlowLedger {
            name: name.to_owned(),
            tag,
            sent,
            router_in: lifetimes.iter().map(|t| t.tag_in(tag)).sum(),
            router_out: lifetimes.iter().map(|t| t.tag_out(tag)).sum(),
            received: seen.frames,
            missing: seen.missing,
            disordered: seen.disordered,
            latency_us: [q(0.5), q(0.99), q(0.999), seen.latency.max()],
        }
    }

    /// Frames the router read on the tag and did not write (each must be a drop it
    /// counted with a reason).
    pub fn undelivered(&self) -> u64 {
        self.router_in.saturating_sub(self.router_out)
    }

    /// Frames lost without a count: sent (surely) but never read by the router, or
    /// written by the router and never received.
    pub fn unaccounted(&self) -> u64 {
        self.sent.confirmed.saturating_sub(self.router_in)
            + self
                .router_in
                .saturating_sub(self.sent.confirmed + self.sent.ambiguous)
            + self.router_out.abs_diff(self.received)
    }
}

/// The pausing sink's flow (`pausing.rs`): its ledger, its pauses, and what it lost.
#[derive(Debug, Serialize)]
pub struct PausingLedger {
    /// The flow, as a healthy one's.
    pub flow: FlowLedger,
    /// The pauses it took.
    pub pauses: Pauses,
    /// Frames its source flushed that it never received (or the gaps in its sequence
    /// numbers, if more).
    pub lost: u64,
    /// Times the routers evicted it.
    pub evictions: u64,
}

impl PausingLedger {
    /// The ledger of `flow`, which paused `pauses`.
    pub fn new(flow: FlowLedger, pauses: Pauses, lifetimes: &[Totals]) -> Self {
        let name = flow.name.clone();
        PausingLedger {
            lost: flow
                .sent
                .confirmed
                .saturating_sub(flow.received)
                .max(flow.missing),
            evictions: lifetimes
                .iter()
                .map(|t| t.evictions.get(&name).copied().unwrap_or(0))
                .sum(),
            flow,
            pauses,
        }
    }

    /// Why it fails, if it does.
    fn failures(&self, f: &mut Vec<String>) {
        let name = &self.flow.name;
        if self.lost != 0 {
            f.push(format!("{name}: {} frames lost", self.lost));
        }
        if self.flow.unaccounted() != 0 || self.flow.disordered != 0 {
            f.push(format!(
                "{name}: {} unaccounted, {} duplicated or reordered",
                self.flow.unaccounted(),
                self.flow.disordered
            ));
        }
        if self.evictions != 0 {
            f.push(format!("{name}: evicted {} times", self.evictions));
        }
        if self.pauses.count.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            f.push(format!("{name}: never paused"));
        }
        if self.flow.received == 0 {
            f.push(format!("{name}: nothing received"));
        }
    }
}

/// The chaos a run of the soak's length and settings must show (`main.rs` derives it from
/// the command line): each `true` is checked against the counts.
#[derive(Debug, Default, Serialize)]
pub struct Expected {
    /// At least one relay-function kill.
    pub kills: bool,
    /// At least one router restart.
    pub restarts: bool,
    /// At least one slow-consumer eviction (the stalling sink).
    pub evictions: bool,
    /// At least one storm client.
    pub storms: bool,
    /// At least one metadata bomb written.
    pub bombs: bool,
    /// Budget hogs admitted.
    pub hogs: bool,
    /// Partial handshakes written and every one cut.
    pub partial_hellos: bool,
}

/// The most a partial frame may be held before the router cuts it: its 2 s stall
/// timeout, cut within 1.5× as documented, plus 1 s for a loaded machine.
pub const PARTIAL_CAP_MS: u64 = 4000;

/// The one drop reason that may explain a healthy flow's missing frames: frames in
/// flight when the router restarts.
pub const HEALTHY_DROP: &str = "disconnected";

/// The whole run.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The chaos the run must show.
    pub expected: Expected,
    /// What the hostile clients did.
    pub attacks: AttackCounts,
    /// Seconds run.
    pub seconds: f64,
    /// Router lifetimes (restarts + 1).
    pub lifetimes: Vec<Totals>,
    /// Healthy flows.
    pub healthy: Vec<FlowLedger>,
    /// The pausing sink's flow.
    pub pausing: PausingLedger,
    /// The chaos flows' sinks: (name, frames received).
    pub chaos_sinks: Vec<(String, u64)>,
    /// What the chaos did.
    pub chaos: ChaosCounts,
    /// RSS: at the first sample, the highest, the last (MiB), and the last lifetime's
    /// highest.
    pub rss_mib: [f64; 4],
}

impl Report {
    /// Deliveries the routers owed and neither wrote, counted nor queued, plus every
    /// healthy flow's unaccounted frames. Zero for a pass.
    pub fn unaccounted(&self) -> u64 {
        let routers: i64 = self.lifetimes.iter().map(|t| t.unaccounted().abs()).sum();
        routers as u64
            + self
                .healthy
                .iter()
                .map(FlowLedger::unaccounted)
                .sum::<u64>()
            + self.pausing.flow.unaccounted()
    }

    /// Why the run fails, if it does.
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        for (i, t) in self.lifetimes.iter().enumerate() {
            let u = t.unaccounted();
            if u > 0 {
                f.push(format!(
                    "router lifetime {i}: {u} deliveries owed and neither written, counted as dropped nor queued"
                ));
            } else if u < 0 {
                f.push(format!(
                    "router lifetime {i}: the ledger went negative ({u}): more written, dropped or queued than owed"
                ));
            }
        }
        // Every frame the router read on a healthy tag and did not write must be a drop it
        // counted for the one reason a healthy flow may lose frames: `disconnected`, at a
        // restart (drops are counted per reason, not per tag: the healthy flows'
        // undelivered frames together are bounded by those drops). A healthy flow that
        // loses frames to another client's backlog (`memory_budget`, `queue_full`) is
        // harmed, counted or not.
        let undelivered: u64 = self
            .healthy
            .iter()
            .chain([&self.pausing.flow])
            .map(FlowLedger::undelivered)
            .sum();
        let counted: u64 = self
            .lifetimes
            .iter()
            .map(|t| t.dropped.get(HEALTHY_DROP).copied().unwrap_or(0))
            .sum();
        if undelivered > counted {
            f.push(format!(
                "healthy flows: {undelivered} frames read and not written, only {counted} counted as {HEALTHY_DROP}"
            ));
        }
        for h in self.healthy.iter().chain([&self.pausing.flow]) {
            if h.router_out != h.received {
                f.push(format!(
                    "{}: the router wrote {} frames on 0x{:x}, the sink read {}",
                    h.name, h.router_out, h.tag, h.received
                ));
            }
        }
        for h in &self.healthy {
            if h.unaccounted() != 0 {
                f.push(format!(
                    "{}: {} frames unaccounted",
                    h.name,
                    h.unaccounted()
                ));
            }
            if h.disordered != 0 {
                f.push(format!(
                    "{}: {} duplicated or reordered",
                    h.name, h.disordered
                ));
            }
            if h.received == 0 {
                f.push(format!("{}: nothing received", h.name));
            }
        }
        self.pausing.failures(&mut f);
        let c = &self.chaos;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let mut held = c
            .partial_held_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        held.sort_unstable();
        // The soak's router cuts partial frames after 2 s of silence.
        if held.get(held.len() / 2).is_some_and(|&ms| ms > 3000) {
            f.push(format!(
                "partial frames held {} ms (median), past the 2 s stall timeout",
                held[held.len() / 2]
            ));
        }
        if let Some(&worst) = held.last().filter(|&&ms| ms > PARTIAL_CAP_MS) {
            f.push(format!(
                "a partial frame held {worst} ms before the cut (cap {PARTIAL_CAP_MS} ms)"
            ));
        }
        if get(&c.partial_cut) == 0 || held.len() as u64 != get(&c.partial_cut) {
            f.push("partial frames: none cut, or a cut without its time".to_owned());
        }
        if held.is_empty() {
            f.push("no partial frame was cut".to_owned());
        }
        if get(&c.garbage_left_open) != 0 {
            f.push(format!(
                "{} garbage connections left open",
                get(&c.garbage_left_open)
            ));
        }
        if get(&c.garbage_closed) == 0 {
            f.push("no garbage connection was closed by the router".to_owned());
        }
        self.chaos_happened(&mut f);
        f
    }

    /// Fails every kind of chaos the run claims and did not show.
    fn chaos_happened(&self, f: &mut Vec<String>) {
        let e = &self.expected;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let (c, a) = (&self.chaos, &self.attacks);
        let evictions: u64 = self
            .lifetimes
            .iter()
            .map(|t| t.evictions.values().sum::<u64>())
            .sum();
        let mut need = |claimed: bool, count: u64, what: &str| {
            if claimed && count == 0 {
                f.push(format!("chaos that did not happen: {what}"));
            }
        };
        need(e.kills, get(&c.functions_killed), "relay-function kills");
        need(
            e.kills,
            get(&c.relayed),
            "frames relayed by the killed function",
        );
        need(
            e.restarts,
            self.lifetimes.len().saturating_sub(1) as u64,
            "router restarts",
        );
        need(e.evictions, evictions, "slow-consumer evictions");
        need(e.storms, get(&c.storm_clients), "storm clients");
        need(e.bombs, get(&a.bombs_sent), "metadata bombs written");
        need(e.hogs, get(&a.hogs_admitted), "budget hogs admitted");
        need(
            e.partial_hellos,
            get(&a.partial_hellos_sent),
            "partial handshakes written",
        );
        if e.partial_hellos && get(&a.partial_hellos_cut) != get(&a.partial_hellos_sent) {
            f.push(format!(
                "partial handshakes: {} written, only {} cut within 15 s",
                get(&a.partial_hellos_sent),
                get(&a.partial_hellos_cut)
            ));
        }
    }

    /// The Markdown summary.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let sum = |f: fn(&Totals) -> u64| self.lifetimes.iter().map(f).sum::<u64>();
        let _ = writeln!(
            s,
            "Soak of `y3 serve`: {:.0} s, {} router lifetimes ({} restarts, SIGTERM).\n",
            self.seconds,
            self.lifetimes.len(),
            self.lifetimes.len().saturating_sub(1)
        );
        let _ = writeln!(s, "| flow | sent (in doubt) | router read | router wrote | received | missing | disordered | p50 µs | p99 µs | p99.9 µs | max µs | unaccounted |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        for h in self.healthy.iter().chain([&self.pausing.flow]) {
            let [p50, p99, p999, max] = h.latency_us;
            let _ = writeln!(
                s,
                "| {} (0x{:x}) | {} ({}) | {} | {} | {} | {} | {} | {p50} | {p99} | {p999} | {max} | {} |",
                h.name, h.tag, h.sent.confirmed, h.sent.ambiguous, h.router_in, h.router_out,
                h.received, h.missing, h.disordered, h.unaccounted()
            );
        }
        let dropped = self
            .lifetimes
            .iter()
            .fold(std::collections::BTreeMap::new(), |mut m, t| {
                for (k, v) in &t.dropped {
                    *m.entry(k.clone()).or_insert(0u64) += v;
                }
                m
            });
        let drops: Vec<String> = dropped
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            s,
            "\nRouters: {} deliveries owed, {} written, {} dropped and counted ({}), {} unaccounted.",
            sum(|t| t.deliveries),
            sum(|t| t.frames_out.values().sum()),
            sum(|t| t.dropped.values().sum()),
            drops.join(", "),
            self.lifetimes.iter().map(|t| t.unaccounted()).sum::<i64>()
        );
        let evictions = sum(|t| t.evictions.values().sum());
        let errors = sum(|t| t.protocol_errors.values().sum());
        let held_off = sum(|t| t.rejected.get("held_off").copied().unwrap_or(0));
        let c = &self.chaos;
        let mut held = c
            .partial_held_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        held.sort_unstable();
        let held_p50 = held.get(held.len() / 2).copied().unwrap_or(0);
        let held_max = held.last().copied().unwrap_or(0);
        let _ = writeln!(
            s,
            "Chaos: {} relay-function kills ({} frames relayed); {} slow-consumer evictions, {} reconnects held off; \
             {} garbage connections closed ({} left open); {} partial frames cut (held {} ms median, {} ms at most); \
             {} protocol errors counted; {} storm clients ({} failed).",
            get(&c.functions_killed), get(&c.relayed), evictions, held_off,
            get(&c.garbage_closed), get(&c.garbage_left_open), get(&c.partial_cut),
            held_p50,
            held_max, errors, get(&c.storm_clients), get(&c.storm_failures)
        );
        let a = &self.attacks;
        let mut hello_held = a
            .partial_hello_held_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        hello_held.sort_unstable();
        let _ = writeln!(
            s,
            "Attacks: {} metadata bombs of {} keys written ({} of their connections closed by the router); \
             {} budget hogs admitted (never reading); {} partial 1 MiB handshakes written, {} cut \
             ({} ms median, {} ms at most); {} garbage connections failed on the soak's side; \
             {} router restarts.",
            get(&a.bombs_sent),
            get(&a.bomb_keys),
            get(&a.bombs_closed),
            get(&a.hogs_admitted),
            get(&a.partial_hellos_sent),
            get(&a.partial_hellos_cut),
            hello_held.get(hello_held.len() / 2).copied().unwrap_or(0),
            hello_held.last().copied().unwrap_or(0),
            get(&c.garbage_failed),
            self.lifetimes.len().saturating_sub(1)
        );
        let p = &self.pausing;
        let _ = writeln!(
            s,
            "Pausing sink ({}, `block`): {} pauses of 1–5 s ({} ms in all, {} ms the longest); \
             {} frames lost, {} evictions.",
            p.flow.name,
            get(&p.pauses.count),
            get(&p.pauses.total_ms),
            get(&p.pauses.longest_ms),
            p.lost,
            p.evictions
        );
        for (name, n) in &self.chaos_sinks {
            let _ = writeln!(s, "Chaos sink {name}: {n} frames.");
        }
        let [first, peak, last, last_peak] = self.rss_mib;
        let _ = writeln!(
            s,
            "\nRouter RSS: {first:.1} MiB at the first sample, {peak:.1} MiB at the highest, \
             {last:.1} MiB at the last ({last_peak:.1} MiB the last lifetime's highest).\n\n\
             **Unaccounted frames: {}.**",
            self.unaccounted()
        );
        s
    }
}
