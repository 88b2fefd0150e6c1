//! Content filters at the router (`spec/filters.md`): a subscriber's filter per observed
//! tag, counted per distinct filter, and evaluated at most once per frame per distinct
//! filter on the reading connection.
//!
//! ```text
//!   handshake field 31 ─┐                          per frame, per reading connection:
//!   [[filters.attach]] ─┴▶ compile (Admission) ─▶    subscriber has a filter?
//!                          RouteFilter in the table    ─▶ verdict memo (this frame)?
//!                                                      ─▶ else evaluate its own clone
//! ```
//!
//! Each connection evaluates with its own clones of the filters (no lock, no shared
//! observer state); identical filters on a tag share one id, so one verdict serves every
//! subscriber that declared it.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use y3::{Filter, Verdict};

/// A compiled filter as a route holds it.
#[derive(Debug)]
pub struct RouteFilter {
    /// Same id for the same text on the same tag: one evaluation per frame serves all.
    pub(crate) id: u64,
    pub(crate) filter: Filter,
    pub(crate) counters: FilterCounters,
}

impl RouteFilter {
    /// A route filter with its counters.
    pub(crate) fn new(id: u64, filter: Filter, counters: FilterCounters) -> RouteFilter {
        RouteFilter {
            id,
            filter,
            counters,
        }
    }

    /// The filter's text.
    pub fn text(&self) -> &str {
        self.filter.as_str()
    }
}

/// The counters of one distinct filter (shared handles).
#[derive(Debug, Clone, Default)]
pub(crate) struct FilterCounters {
    pub matched: Counter,
    pub withheld: Counter,
    pub malformed: Counter,
}

impl FilterCounters {
    fn count(&self, verdict: Verdict) {
        match verdict {
            Verdict::Match => self.matched.inc(),
            Verdict::NoMatch => self.withheld.inc(),
            Verdict::Malformed => {
                self.withheld.inc();
                self.malformed.inc()
            }
        };
    }
}

/// One connection's evaluators and the current frame's verdicts.
#[derive(Debug, Default)]
pub(crate) struct Evaluators {
    /// This connection's clone of each filter it has met, by id.
    clones: Vec<(u64, Filter)>,
    /// The current frame's verdicts, by filter id.
    memo: Vec<(u64, bool)>,
}

/// Past this many clones, the cache starts over (filters of gone subscribers).
const MAX_CLONES: usize = 256;

impl Evaluators {
    /// Starts a new frame.
    pub fn begin(&mut self) {
        self.memo.clear();
    }

    /// Whether a subscriber with `filter` receives `payload`: evaluated (and counted) the
    /// first time this frame meets the filter, remembered after.
    pub fn passes(&mut self, filter: Option<&Arc<RouteFilter>>, payload: &[u8]) -> bool {
        let Some(rf) = filter else { return true };
        if let Some(&(_, pass)) = self.memo.iter().find(|(id, _)| *id == rf.id) {
            return pass;
        }
        let verdict = match self.clones.iter_mut().find(|(id, _)| *id == rf.id) {
            Some((_, f)) => f.evaluate(payload),
            None => {
                if self.clones.len() >= MAX_CLONES {
                    self.clones.clear();
                }
                let mut f = rf.filter.clone();
                let verdict = f.evaluate(payload);
                self.clones.push((rf.id, f));
                verdict
            }
        };
        rf.counters.count(verdict);
        self.memo.push((rf.id, verdict.matches()));
        verdict.matches()
    }

    /// The verdict this frame already reached for `filter` (true without one).
    pub fn passed(&self, filter: Option<&Arc<RouteFilter>>) -> bool {
        filter.is_none_or(|rf| {
            self.memo
                .iter()
                .find(|(id, _)| *id == rf.id)
                .is_some_and(|&(_, pass)| pass)
        })
    }
}
