//! Loops through fresh ids: cycles in the graph of which function writes what another
//! observes, and a credit that bounds the deliveries going round them.
//!
//! `journeys.rs` follows a message by its `yomo-tid`; a function that mints a fresh tid
//! for each output escapes it (the probe: 19,757× amplification in 5 s and growing). This
//! file does not look at tids. It follows connections:
//!
//! ```text
//!   edge X ──▶ Y   stream function X has written a tag that function Y observes
//!   cycle          a strongly connected set of functions (a self-loop included)
//!
//!   a delivery to a member R of cycle C (k members):
//!     writer outside C (a source, a function not in C, a zipper)
//!                      ─▶ C.credit += (max_loop_returns + 1) × k        (one input's worth)
//!     writer inside C  ─▶ C.credit > 0 ? deliver, C.credit -= 1
//!                                       : drop, counted as `loop` (the writer named once)
//!   a new cycle starts with [`INITIAL_INPUTS`] inputs' worth
//! ```
//!
//! One input's worth is what an honest message may make round the cycle under
//! `journeys.rs` (each member takes it back `max_loop_returns` times, and passes it on
//! once more), so honest loops keep every return they had. What goes round a cycle is
//! bounded by its inputs times that, and dies out when its inputs stop: it cannot starve
//! other tags, whatever tids it writes. YoMo's functions write only in their handler (an
//! output per input, any number of them), so a real app's cycle always has inputs; the
//! initial credit covers the inputs taken before the cycle was seen. Credit is capped
//! at [`CREDIT_CAP`] inputs' worth. Functions that write to functions without closing a
//! cycle (pipelines, fan-out of any width) are not limited.
//!
//! Cost: a connection reports a tag it writes once (its `written` set); the graph is
//! rebuilt (Tarjan, linear in functions and edges) when a function writes a new tag or
//! the table changes, and published as an `Arc` snapshot with a generation, as the table
//! is. Per frame: one atomic load when no cycle exists; otherwise a map lookup per
//! recipient and an atomic add. A function that writes more than [`MAX_WRITTEN_TAGS`]
//! distinct tags is taken to write every observed tag (a bound on memory that can only
//! find more cycles, never fewer).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::table::{RoutingTable, SessionId};

/// Distinct tags followed per writing function; past it, the function writes "everything".
pub(crate) const MAX_WRITTEN_TAGS: usize = 1024;

/// Most credit a cycle holds, in inputs' worth.
pub(crate) const CREDIT_CAP: i64 = 16_384;

/// Credit a new cycle starts with, in inputs' worth: the inputs its members took before
/// their outputs closed the cycle were not counted (a ring forms only once each member
/// wrote, and a source may have sent a burst before that).
pub(crate) const INITIAL_INPUTS: i64 = 1024;

/// One cycle of functions and its credit.
#[derive(Debug)]
pub(crate) struct Cycle {
    /// Its members' sessions (sorted).
    pub members: Vec<SessionId>,
    /// One input's worth of deliveries round it.
    input: i64,
    credit: AtomicI64,
}

/// The published cycles: session → its cycle.
#[derive(Debug, Default)]
pub(crate) struct CycleMap {
    of: HashMap<SessionId, Arc<Cycle>>,
}

impl CycleMap {
    /// Whether no cycle exists (the per-frame fast path).
    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// The cycle `session` is in, if any.
    pub fn cycle(&self, session: SessionId) -> Option<&Arc<Cycle>> {
        self.of.get(&session)
    }
}

/// What a writing function wrote: tags, or everything past [`MAX_WRITTEN_TAGS`].
#[derive(Debug, Default, Clone)]
struct Writes {
    tags: HashSet<u32>,
    everything: bool,
}

/// The graph and its published cycles.
#[derive(Debug)]
pub(crate) struct Cycles {
    /// `limits.max_loop_returns` (one input's worth is this plus one, per member).
    returns: i64,
    writes: Mutex<HashMap<SessionId, Writes>>,
    current: RwLock<Arc<CycleMap>>,
    generation: AtomicU64,
}

impl Cycles {
    /// No cycles yet; each delivery into a cycle grants `per_input` deliveries round it.
    pub fn new(max_loop_returns: u32) -> Cycles {
        Cycles {
            returns: max_loop_returns as i64,
            writes: Mutex::new(HashMap::new()),
            current: RwLock::new(Arc::default()),
            generation: AtomicU64::new(0),
        }
    }

    /// The current snapshot, if it changed since `generation` (which is updated).
    pub fn refresh(&self, generation: &mut u64, map: &mut Arc<CycleMap>) {
        let now = self.generation.load(Ordering::Acquire);
        if now != *generation {
            *map = self
                .current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            *generation = now;
        }
    }

    /// Function `session` wrote `tag` for the first time (as its connection knows):
    /// recorded, and the cycles rebuilt against `table`.
    pub fn wrote<S: Clone>(&self, session: SessionId, tag: u32, table: &RoutingTable<S>) {
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let w = writes.entry(session).or_default();
        if w.everything || w.tags.contains(&tag) {
            return;
        }
        if w.tags.len() >= MAX_WRITTEN_TAGS {
            w.everything = true;
            w.tags = HashSet::new();
        } else {
            w.tags.insert(tag);
        }
        self.rebuild(&writes, table);
    }

    /// `session` left: its writes are forgotten, the cycles rebuilt against `table`.
    pub fn left<S: Clone>(&self, session: SessionId, table: &RoutingTable<S>) {
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        writes.remove(&session);
        self.rebuild(&writes, table);
    }

    /// The table changed (a subscription): the cycles rebuilt against it.
    pub fn table_changed<S: Clone>(&self, table: &RoutingTable<S>) {
        let writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        if !writes.is_empty() {
            self.rebuild(&writes, table);
        }
    }

    fn rebuild<S: Clone>(&self, writes: &HashMap<SessionId, Writes>, table: &RoutingTable<S>) {
        let old = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let map = cycles_of(writes, table, &old, self.returns);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(map);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A delivery to `recipient` (in `cycle`) from a writer outside it: credit.
    pub fn entered(&self, cycle: &Cycle) {
        let cap = cycle.input.saturating_mul(CREDIT_CAP);
        let before = cycle.credit.fetch_add(cycle.input, Ordering::Relaxed);
        if before + cycle.input > cap {
            // Clamp (a racing add may overshoot by one input's worth; harmless).
            cycle.credit.fetch_min(cap, Ordering::Relaxed);
        }
    }

    /// A delivery round `cycle`: true if its credit allows it (then spent).
    pub fn round(&self, cycle: &Cycle) -> bool {
        cycle
            .credit
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (c > 0).then_some(c - 1)
            })
            .is_ok()
    }
}

/// The cycles of the writers' graph: Tarjan's strongly connected components, keeping
/// those with two members or more, or one with an edge to itself. A cycle whose members
/// are unchanged keeps its credit.
fn cycles_of<S: Clone>(
    writes: &HashMap<SessionId, Writes>,
    table: &RoutingTable<S>,
    old: &CycleMap,
    returns: i64,
) -> CycleMap {
    // Nodes: writing functions. Edges: to the writers observing what they write (only a
    // writer can close a cycle).
    let nodes: Vec<SessionId> = writes.keys().copied().collect();
    let index: HashMap<SessionId, usize> = nodes.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    let observers = |tag: u32| -> Vec<usize> {
        table
            .routes(tag)
            .map(|routes| {
                routes
                    .iter()
                    .filter_map(|r| index.get(&r.session).copied())
                    .collect()
            })
            .unwrap_or_default()
    };
    let edges: Vec<Vec<usize>> = nodes
        .iter()
        .map(|s| {
            let w = &writes[s];
            let mut out: Vec<usize> = if w.everything {
                table.tags().flat_map(observers).collect()
            } else {
                w.tags.iter().flat_map(|&t| observers(t)).collect()
            };
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    let mut map = CycleMap::default();
    for component in tarjan(&edges) {
        let closed = component.len() > 1 || edges[component[0]].contains(&component[0]);
        if !closed {
            continue;
        }
        let mut members: Vec<SessionId> = component.iter().map(|&i| nodes[i]).collect();
        members.sort_unstable();
        let cycle = match old.cycle(members[0]) {
            Some(c) if c.members == members => c.clone(),
            _ => {
                let input = (returns + 1) * members.len() as i64;
                // Members of earlier cycles bring what is left of their credit (a cycle
                // that grows or splits is not granted a fresh start); only a cycle of
                // functions in none starts with the initial credit.
                let mut earlier: Vec<&Arc<Cycle>> =
                    members.iter().filter_map(|m| old.cycle(*m)).collect();
                earlier.sort_by_key(|c| Arc::as_ptr(c));
                earlier.dedup_by(|a, b| Arc::ptr_eq(a, b));
                let credit = if earlier.is_empty() {
                    input * INITIAL_INPUTS
                } else {
                    earlier
                        .iter()
                        .map(|c| c.credit.load(Ordering::Relaxed).max(0))
                        .sum::<i64>()
                        .min(input.saturating_mul(CREDIT_CAP))
                };
                Arc::new(Cycle {
                    members: members.clone(),
                    input,
                    credit: AtomicI64::new(credit),
                })
            }
        };
        for m in members {
            map.of.insert(m, cycle.clone());
        }
    }
    map
}

/// Strongly connected components of `edges` (iterative Tarjan).
fn tarjan(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next edge to look at)
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if *e == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*e) {
                *e += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(observing: &[(SessionId, &[u32])]) -> RoutingTable<()> {
        let mut t = RoutingTable::new();
        for (s, tags) in observing {
            t.subscribe(*s, tags, "", ());
        }
        t
    }

    #[test]
    fn components() {
        let mut got = tarjan(&[vec![1], vec![0], vec![2, 3], vec![]]);
        got.iter_mut().for_each(|c| c.sort_unstable());
        got.sort();
        assert_eq!(got, [vec![0, 1], vec![2], vec![3]]);
    }

    #[test]
    fn cycles_self_loops_and_pipelines() {
        // 1 and 2 observe 0xA and write 0xA (a ring of two); 3 observes 0xB and writes 0xC
        // (a pipeline stage: no cycle); 4 observes 0xC and writes 0xC (a self-loop).
        let t = table(&[(1, &[0xa]), (2, &[0xa]), (3, &[0xb]), (4, &[0xc])]);
        let c = Cycles::new(8);
        for (s, tag) in [(1, 0xa), (2, 0xa), (3, 0xc), (4, 0xc)] {
            c.wrote(s, tag, &t);
        }
        let (mut generation, mut map) = (0, Arc::default());
        c.refresh(&mut generation, &mut map);
        assert_eq!(map.cycle(1).unwrap().members, [1, 2]);
        assert!(Arc::ptr_eq(map.cycle(1).unwrap(), map.cycle(2).unwrap()));
        assert!(map.cycle(3).is_none());
        assert_eq!(map.cycle(4).unwrap().members, [4]);
        // Credit: the initial inputs' worth (1 wrote first: its self-loop's, 9 × 1,024,
        // carried into the ring when 2 closed it), then one input's worth (9 per member),
        // spent round the cycle, then refused.
        let ring = map.cycle(1).unwrap().clone();
        assert_eq!((0..100_000).filter(|_| c.round(&ring)).count(), 9 * 1024);
        c.entered(&ring);
        assert_eq!((0..100).filter(|_| c.round(&ring)).count(), 18);
        // Capped at CREDIT_CAP inputs.
        for _ in 0..20_000 {
            c.entered(&ring);
        }
        let n = (0..1_000_000).filter(|_| c.round(&ring)).count();
        assert_eq!(n, 18 * 16_384);
        // A member leaving breaks the ring (1 still writes what it observes: a self-loop of
        // its own, bringing what is left of the ring's credit, none); the rebuilt map keeps
        // the other self-loop's credit.
        let four = map.cycle(4).unwrap().clone();
        while c.round(&four) {}
        c.entered(&four);
        c.left(2, &table(&[(1, &[0xa]), (3, &[0xb]), (4, &[0xc])]));
        c.refresh(&mut generation, &mut map);
        assert_eq!(map.cycle(1).unwrap().members, [1]);
        assert!(!Arc::ptr_eq(map.cycle(1).unwrap(), &ring));
        assert!(!c.round(map.cycle(1).unwrap()));
        assert!(Arc::ptr_eq(map.cycle(4).unwrap(), &four));
        assert_eq!((0..100).filter(|_| c.round(&four)).count(), 9);
    }

    #[test]
    fn a_writer_of_too_many_tags_writes_everything() {
        let t = table(&[(1, &[0xa]), (2, &[0x5000])]);
        let c = Cycles::new(1);
        c.wrote(2, 0xa, &t);
        for tag in 0..MAX_WRITTEN_TAGS as u32 + 1 {
            c.wrote(1, 0x10_000 + tag, &t);
        }
        let (mut generation, mut map) = (0, Arc::default());
        c.refresh(&mut generation, &mut map);
        assert_eq!(map.cycle(1).unwrap().members, [1, 2]);
    }
}
