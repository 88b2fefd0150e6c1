//! Routing a data frame: the published table snapshot, and the fan-out into outboxes.
//!
//! ```text
//!   writers (a client subscribes or leaves):     readers (every connection, per frame):
//!     lock ─▶ clone table ─▶ change ─▶ publish      generation == cached? ─▶ cached table
//!     Arc<RoutingTable>, generation += 1            else: take the new Arc (read lock)
//! ```
//!
//! A connection reads the table through its own [`RouteCache`]: one atomic load per frame,
//! and a lock only in the rare frame after a change.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use y3_transport::frame::{Frame, RefusedReason};
use y3_transport::Data;

use crate::acks::Ticket;
use crate::cycles::{CycleMap, Cycles, MAX_WRITTEN_TAGS};
use crate::filters::{Evaluators, RouteFilter};
use crate::journeys::{Journeys, Passage, Writer};
use crate::metrics::{Drop, Metrics};
use crate::outbox::{Outbox, Pushed, Queued};
use crate::session::{Located, Routed};
use crate::table::{accepts, Route, RoutingTable, SessionId};
use crate::wakes::Wakes;

/// The table of outboxes, as connections route into it.
pub(crate) type Table = RoutingTable<Arc<Outbox>>;

/// The published routing state: the current table and the mesh's downstream outboxes.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    /// Serializes writers; readers never take it.
    write: Mutex<()>,
    current: RwLock<Arc<Table>>,
    generation: AtomicU64,
    /// Downstream zippers of the mesh (fixed at start).
    mesh: Vec<Arc<Outbox>>,
    /// The functions each recent message passed through (loops, told from fan-out).
    journeys: Option<Journeys>,
    /// Cycles of functions writing what they (or each other) observe, whatever their tids.
    cycles: Option<Cycles>,
    /// `[federation]`: local frames are offered to it (`federation/`).
    federation: Option<Arc<crate::federation::Federation>>,
}

impl Routes {
    /// Routes with the mesh's downstream outboxes and the loop detection: by message
    /// (`journeys`) and by connection (`cycles`).
    pub fn new(mesh: Vec<Arc<Outbox>>, journeys: Journeys, cycles: Cycles) -> Routes {
        Routes {
            mesh,
            journeys: Some(journeys),
            cycles: Some(cycles),
            ..Routes::default()
        }
    }

    /// The current table (a read lock; the rare path).
    fn current(&self) -> Arc<Table> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// These routes, offering local frames to `federation` too.
    pub fn with_federation(self, federation: Option<Arc<crate::federation::Federation>>) -> Self {
        Routes { federation, ..self }
    }

    fn update(&self, change: impl FnOnce(&mut Table)) {
        let _writer = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut table = Table::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()));
        change(&mut table);
        if let Some(cycles) = &self.cycles {
            cycles.table_changed(&table);
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Subscribes `session` to `tags`, wanting `wanted_target` (empty: none), with a
    /// content filter on some tags.
    pub fn subscribe(
        &self,
        session: SessionId,
        tags: &[u32],
        wanted_target: &str,
        outbox: Arc<Outbox>,
        filters: &[(u32, Arc<RouteFilter>)],
    ) {
        self.update(|t| t.subscribe_filtered(session, tags, wanted_target, outbox, filters));
    }

    /// Removes every route of `session`.
    pub fn unsubscribe(&self, session: SessionId) {
        self.update(|t| {
            t.unsubscribe(session);
        });
        if let Some(cycles) = &self.cycles {
            cycles.left(session, &self.current());
        }
    }

    /// A cache holding the current table.
    pub fn cache(&self) -> RouteCache {
        RouteCache {
            generation: self.generation.load(Ordering::Acquire),
            table: self
                .current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            filters: Evaluators::default(),
            sender: None,
            loops: LoopLog::default(),
            written: Default::default(),
            cycle_generation: 0,
            cycle_map: Arc::default(),
            fan_out: 0,
            defer: false,
            wakes: Wakes::default(),
        }
    }

    /// A cache for the connection of session `id`, named `name` (in loop reports).
    pub fn cache_for(&self, id: SessionId, name: &str) -> RouteCache {
        RouteCache {
            sender: Some((id, name.into())),
            ..self.cache()
        }
    }
}

/// One connection's view of the table, refreshed when a change is published.
#[derive(Debug)]
pub(crate) struct RouteCache {
    generation: u64,
    table: Arc<Table>,
    /// This connection's filter evaluators (kept across table changes).
    filters: Evaluators,
    /// The connection's session and name (`None`: the federation's link).
    sender: Option<(SessionId, Box<str>)>,
    /// What this connection's loop reports have said.
    loops: LoopLog,
    /// Tags this connection (a function) was seen writing, as told to [`Cycles`]
    /// (at most [`MAX_WRITTEN_TAGS`] + 1).
    written: std::collections::HashSet<u32>,
    cycle_generation: u64,
    cycle_map: Arc<CycleMap>,
    /// Subscribers of the last frame routed (before filters and targets).
    fan_out: usize,
    /// Whether frames are queued without waking their writers, who are owed a wake-up in
    /// `wakes` instead (a socket reader's, see `wakes.rs`).
    defer: bool,
    wakes: Wakes,
}

/// Loop reports of one sending connection: its self-loop once, dropped returns at most
/// once per message and once per [`LOOP_LOG_EVERY`].
#[derive(Debug, Default)]
struct LoopLog {
    self_loop: bool,
    /// Whether this connection's deliveries round a cycle were throttled (logged once).
    cycle: bool,
    last: Option<Instant>,
    /// Messages whose first drop was not logged since the last line.
    quiet: u64,
}

/// Least time between two loop-drop lines of one connection.
const LOOP_LOG_EVERY: Duration = Duration::from_secs(1);

impl RouteCache {
    /// Routes the frames of this cache without waking their writers at once: each writer
    /// is owed one wake-up, given by [`wake_writers`](RouteCache::wake_writers), before the
    /// router waits for anything, after [`WAKE_EVERY`](crate::wakes::WAKE_EVERY) frames, or
    /// when the cache is dropped (`wakes.rs`).
    pub fn defer_wakes(&mut self) {
        self.defer = true;
    }

    /// Wakes every writer owed a wake-up (a reader about to read its socket again).
    #[inline]
    pub fn wake_writers(&mut self) {
        self.wakes.wake_all();
    }

    /// Whether the last frame routed had more than one subscriber: their writers were
    /// woken where an idle worker can take them (`spread.rs`).
    pub fn fanned_out(&self) -> bool {
        self.fan_out > 1
    }

    /// The current table: the cached one unless a change was published since.
    pub fn table(&mut self, routes: &Routes) -> &Table {
        let now = routes.generation.load(Ordering::Acquire);
        if now != self.generation {
            let fresh = routes.cache();
            (self.generation, self.table) = (fresh.generation, fresh.table);
        }
        &self.table
    }

    /// Tells the cycles that this connection (a function) writes `tag`: once per tag, for
    /// at most [`MAX_WRITTEN_TAGS`] + 1 tags.
    #[inline]
    fn note_written(&mut self, routes: &Routes, origin: Origin, tag: u32) {
        if let (Origin::Function, Some((id, _)), Some(cycles)) =
            (origin, &self.sender, &routes.cycles)
        {
            if self.written.len() <= MAX_WRITTEN_TAGS && self.written.insert(tag) {
                cycles.wrote(*id, tag, &routes.current());
            }
        }
    }

    /// Who writes this connection's frames from `origin`, as a message's way records it
    /// (`None`: a source, or the federation's link taking a function's place).
    #[inline]
    fn writer(&self, origin: Origin) -> Option<Writer> {
        match (origin, &self.sender) {
            (Origin::Source, _) => None,
            (Origin::Function, Some((id, _))) => Some(Writer::Function(*id)),
            (Origin::Function, None) => None,
            (Origin::Mesh | Origin::Federation, _) => Some(Writer::Outside),
        }
    }
}

/// Who sent a frame, as routing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A source (or any client that does not receive).
    Source,
    /// A stream function: its outputs are followed along their message's way (loops).
    Function,
    /// An upstream zipper of a mesh: delivered locally, never forwarded again.
    Mesh,
    /// Another router, through NATS: delivered locally, never forwarded again.
    Federation,
}

/// Delivers `routed` to every subscriber it reaches and, for frames from local clients,
/// to every downstream zipper of the mesh. Each recipient gets a reference-counted clone
/// of the frame; the last gets the frame itself. A frame from a function, an upstream zipper
/// or the federation that comes back to a function its message already passed, past
/// `limits.max_loop_returns` turns, is dropped for that function as `loop` (`journeys.rs`);
/// fan-out is never limited. A subscriber with a content filter on the tag receives the
/// frame only if the filter matches its payload; each distinct filter is evaluated once per
/// frame, and a frame every subscriber's filter withholds is counted by the filters, not
/// as `no_subscriber`.
///
/// `ticket` (a client that wants stored acknowledgements) is settled here unless the
/// federation's publisher took it (a durable tag). "Stored" means stored: it is done only
/// once a recipient's writer flushed the frame to its socket (a subscriber or a downstream
/// zipper), when it went to the federation, or when every subscriber's content filter
/// withheld it (the subscribers chose not to see it: sending it again would not change
/// that). It is refused as `no_subscriber` when nobody takes the frame (no recipient, or
/// every recipient dropped it: gone, evicted, its queue full; the durable client keeps it
/// and sends it again later), and as `loop` when every recipient dropped it as a loop.
///
/// The phases, in order: the tag's subscribers, the mesh and the federation; the content
/// filters ([`count_local`]); nobody takes it ([`Trip::unrouted`]); the self-loop report
/// ([`Trip::note_self_loop`]); the message's way ([`Trip::follow`]); the cycles' credit
/// ([`Trip::throttle_cycles`]); the fan-out, here (no async layer on the hot path).
pub(crate) async fn route(
    routes: &Routes,
    cache: &mut RouteCache,
    metrics: &Metrics,
    routed: Routed,
    origin: Origin,
    at: Instant,
    ticket: Option<Ticket>,
) {
    let (mut data, located) = routed.into_parts();
    let frame = (&mut data, located);
    route_in_place(routes, cache, metrics, frame, origin, at, ticket).await;
}

/// As [`route`], for a frame the caller holds (a connection's read loop): it is read where
/// it lies, and taken out of `data` (a [`Data::new`] left behind) once its recipients are
/// known, moved once, into the one [`SharedFrame`](crate::outbox::SharedFrame) that every
/// recipient's queue slot points at.
pub(crate) async fn route_in_place(
    routes: &Routes,
    cache: &mut RouteCache,
    metrics: &Metrics,
    (data, located): (&mut Data, Located),
    origin: Origin,
    at: Instant,
    ticket: Option<Ticket>,
) {
    // The target is read from the frame's metadata, which goes into the shared frame:
    // a frame with a target keeps a handle on those bytes (no copy) while it is routed.
    let target_map = located.has_target().then(|| data.metadata.clone());
    let target = target_map.as_ref().and_then(|m| located.target(m));
    let mut ticket = ticket;
    cache.note_written(routes, origin, data.tag);
    // Borrowed from the cached table (its own field, apart from those mutated below).
    cache.table(routes);
    let subscribers = cache.table.routes_of(data.tag);
    cache.fan_out = subscribers.len();
    let (downstream, federated): (&[Arc<Outbox>], bool) = match origin {
        Origin::Mesh | Origin::Federation => (&[], false),
        _ => match &routes.federation {
            // The federation's publisher acknowledges durable frames once stored.
            Some(federation) => {
                let offer = federation.offer(data, &mut ticket);
                (&routes.mesh, cache.wakes.around(offer).await)
            }
            None => (&routes.mesh, false),
        },
    };
    let (local, filtered) = count_local(&mut cache.filters, subscribers, target, &data.payload);
    let trip = Trip {
        routes,
        metrics,
        tag: data.tag,
        writer: cache.writer(origin),
        sender: cache.sender.as_ref().map(|(id, name)| (*id, &**name)),
        federated,
        at,
    };
    let mut left = local + downstream.len();
    if left == 0 {
        return trip.unrouted(ticket, filtered, || located.tid(&data.metadata));
    }
    metrics.deliveries(left as u64);
    let chosen = Chosen {
        subscribers,
        target,
        filters: &cache.filters,
    };
    let loops = &mut cache.loops;
    trip.note_self_loop(loops, &chosen);
    let passage = trip.follow(loops, &chosen, local, || located.tid(&data.metadata));
    left -= passage.dropped.len();
    if left == 0 {
        return every_recipient_looped(ticket, federated);
    }
    // Deliveries round a cycle of functions, within its credit (`cycles.rs`).
    let mut dropped_at = passage.dropped;
    let cycle_state = (&mut cache.cycle_generation, &mut cache.cycle_map);
    let throttled = trip.throttle_cycles(cycle_state, loops, &chosen, &dropped_at);
    if !throttled.is_empty() {
        left -= throttled.len();
        dropped_at.extend(throttled);
        dropped_at.sort_unstable();
        if left == 0 {
            return every_recipient_looped(ticket, federated);
        }
    }
    // The fan-out: one shared frame (charged once, its shared entry included), a pointer
    // to it in every recipient's queue slot.
    let tag = trip.tag;
    crate::outbox::charge_frame(metrics, data);
    let frame = Arc::new(Frame::Data(std::mem::replace(
        data,
        Data::new(0, Bytes::new()),
    )));
    let mut dropped = dropped_at.iter().copied().peekable();
    let chosen = chosen.iter().enumerate().filter_map(|(i, r)| {
        if dropped.next_if_eq(&i).is_some() {
            return None;
        }
        Some(&r.target)
    });
    // A ticket handed to the federation is done; otherwise it waits for a recipient's
    // writer to flush the frame to its socket (a frame still queued when the router dies
    // is not stored).
    let mut ticket = match (ticket, federated) {
        (Some(ticket), true) => {
            ticket.done();
            None
        }
        (ticket, _) => ticket.map(|t| (t, Vec::with_capacity(left))),
    };
    for outbox in chosen.chain(downstream).take(left) {
        let written = ticket.as_mut().map(|(_, waits)| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            waits.push(rx);
            tx
        });
        // Queued without an await when there is room; only a push that must wait builds
        // the waiting future.
        let item = Queued {
            frame: frame.clone(),
            at,
            written,
        };
        let offered = match cache.defer {
            true => outbox.offer_deferred(item),
            false => outbox.offer(item),
        };
        let pushed = match offered {
            Ok(pushed @ (Pushed::Queued | Pushed::DroppedOldest)) if cache.defer => {
                cache.wakes.owe(outbox);
                pushed
            }
            Ok(pushed) => pushed,
            // A push that waits for room: every writer owed is woken first (its own among
            // them: a queue whose writer was not told of its frames would never drain).
            // Not `Wakes::around`: that would make this rare await's state part of every
            // routed frame's future, moved per frame.
            Err(held) => {
                cache.wakes.wake_all();
                outbox.wait_push(held).await
            }
        };
        match pushed {
            Pushed::Queued | Pushed::DroppedOldest => {}
            Pushed::Closed => {
                metrics.dropped(Drop::Disconnected, 1);
                metrics.dropped_tag(tag, 1);
            }
            Pushed::Evicted => {
                metrics.dropped(Drop::SlowConsumer, 1);
                metrics.dropped_tag(tag, 1);
            }
        }
    }
    if cache.defer {
        cache.wakes.routed();
    }
    if let Some((ticket, waits)) = ticket {
        ticket.done_when_written(waits);
    }
}

/// Starts `filters` on a new frame and counts the `subscribers` that take it: those
/// accepting its `target` whose content filter (if any) passes `payload`, each distinct
/// filter evaluated once. Also says whether any of those accepting it had a filter.
#[inline]
fn count_local(
    filters: &mut Evaluators,
    subscribers: &[Route<Arc<Outbox>>],
    target: Option<&[u8]>,
    payload: &[u8],
) -> (usize, bool) {
    filters.begin();
    let mut filtered = false;
    let local = subscribers
        .iter()
        .filter(|r| accepts(r, target))
        .filter(|r| {
            filtered |= r.filter.is_some();
            filters.passes(r.filter.as_ref(), payload)
        })
        .count();
    (local, filtered)
}

/// The subscribers a frame goes to, as [`count_local`] chose them: accepting its target,
/// passed by their content filter.
struct Chosen<'a> {
    subscribers: &'a [Route<Arc<Outbox>>],
    target: Option<&'a [u8]>,
    filters: &'a Evaluators,
}

impl<'a> Chosen<'a> {
    /// The chosen subscribers, in table order (the positions [`Passage::dropped`] counts).
    #[inline]
    fn iter(&self) -> impl Iterator<Item = &'a Route<Arc<Outbox>>> + Clone + 'a {
        let (target, filters) = (self.target, self.filters);
        self.subscribers
            .iter()
            .filter(move |r| accepts(r, target) && filters.passed(r.filter.as_ref()))
    }
}

/// What the phases of [`route`] share about the frame being routed.
struct Trip<'a> {
    routes: &'a Routes,
    metrics: &'a Metrics,
    tag: u32,
    /// Who wrote it, as its message's way records (`None`: a source).
    writer: Option<Writer>,
    /// The sending connection's session and name (`None`: the federation's link).
    sender: Option<(SessionId, &'a str)>,
    /// Whether it went to the federation (which then settled or holds its ticket).
    federated: bool,
    at: Instant,
}

impl Trip<'_> {
    /// Nobody takes the frame: settles the ticket and counts the drop (`no_subscriber`),
    /// unless filters withheld it or it went to the federation; a function's frame that
    /// went to the federation still puts the function on its message's way (`tid`).
    #[inline]
    fn unrouted<'m>(
        &self,
        ticket: Option<Ticket>,
        filtered: bool,
        tid: impl FnOnce() -> Option<&'m [u8]>,
    ) {
        if let Some(ticket) = ticket {
            if filtered || self.federated {
                ticket.done();
            } else {
                ticket.refused(RefusedReason::NoSubscriber);
            }
        }
        // No delivery is owed for a frame that only filters withheld (their counters
        // account for it), nor for one that went to the federation.
        if !filtered && !self.federated {
            self.metrics.unrouted(Drop::NoSubscriber, self.tag, 1);
        }
        // What went to the federation may come back through another router's functions:
        // the writer is on its message's way.
        if let (true, Some(writer @ Writer::Function(_)), Some(journeys)) =
            (self.federated, self.writer, &self.routes.journeys)
        {
            if let Some(tid) = tid() {
                journeys.pass(tid, writer, std::iter::empty(), self.at);
            }
        }
    }

    /// Reports (once per connection) a function that is among its own frame's recipients.
    #[inline]
    fn note_self_loop(&self, loops: &mut LoopLog, chosen: &Chosen<'_>) {
        let (Some(Writer::Function(id)), false) = (self.writer, loops.self_loop) else {
            return;
        };
        if chosen.iter().any(|r| r.session == id) {
            loops.self_loop = true;
            self.metrics.self_loop();
            let name = self.sender.map_or("", |(_, name)| name);
            tracing::warn!(
                function = name,
                session = id,
                tag = format_args!("{:#x}", self.tag),
                "a stream function writes a tag it observes (a self-loop): its outputs come \
                 back to it; each message may come back limits.max_loop_returns times, \
                 further returns are dropped and counted as loop"
            );
        }
    }

    /// Follows the frame's message (`tid`) along its way (`journeys.rs`): the deliveries
    /// to drop as `loop`, counted and reported here.
    #[inline]
    fn follow<'m>(
        &self,
        loops: &mut LoopLog,
        chosen: &Chosen<'_>,
        local: usize,
        tid: impl FnOnce() -> Option<&'m [u8]>,
    ) -> Passage {
        let (Some(writer), Some(journeys)) = (self.writer, &self.routes.journeys) else {
            return Passage::default();
        };
        // A function's frame for the mesh only still puts the function on the way: the
        // message may come back through a downstream's functions.
        if local == 0 && !matches!(writer, Writer::Function(_)) {
            return Passage::default();
        }
        let Some(tid) = tid() else {
            return Passage::default();
        };
        let passage = journeys.pass(tid, writer, chosen.iter().map(|r| r.session), self.at);
        if !passage.dropped.is_empty() {
            let dropped = passage.dropped.len() as u64;
            self.metrics.dropped(Drop::Loop, dropped);
            self.metrics.dropped_tag(self.tag, dropped);
            if let Some(report) = passage.report {
                loops.report(self.sender, tid, self.tag, report, self.at);
            }
        }
        passage
    }

    /// The deliveries (positions among `chosen`, none of `dropped_at`) round a cycle of
    /// functions past its credit (`cycles.rs`), counted as `loop` and reported (once per
    /// connection) here. `cycle_state` is the connection's cached cycle map.
    #[inline]
    fn throttle_cycles(
        &self,
        (generation, map): (&mut u64, &mut Arc<CycleMap>),
        loops: &mut LoopLog,
        chosen: &Chosen<'_>,
        dropped_at: &[usize],
    ) -> Vec<usize> {
        let mut throttled = Vec::new();
        let Some(cycles) = &self.routes.cycles else {
            return throttled;
        };
        cycles.refresh(generation, map);
        if map.is_empty() {
            return throttled;
        }
        let own = match self.writer {
            Some(Writer::Function(id)) => map.cycle(id),
            _ => None,
        };
        for (i, r) in chosen.iter().enumerate() {
            let Some(cycle) = map.cycle(r.session) else {
                continue;
            };
            if dropped_at.contains(&i) {
                continue;
            }
            match own {
                Some(own) if Arc::ptr_eq(own, cycle) => {
                    if !cycles.round(cycle) {
                        throttled.push(i);
                    }
                }
                _ => cycles.entered(cycle),
            }
        }
        if throttled.is_empty() {
            return throttled;
        }
        self.metrics.dropped(Drop::Loop, throttled.len() as u64);
        self.metrics.dropped_tag(self.tag, throttled.len() as u64);
        if !loops.cycle {
            loops.cycle = true;
            self.metrics.cycle_throttled();
            let (session, name) = self.sender.map_or((None, ""), |(id, n)| (Some(id), n));
            tracing::warn!(
                function = name,
                session,
                tag = format_args!("{:#x}", self.tag),
                cycle = ?own.map(|c| &c.members),
                "loop: this function's outputs go round a cycle of functions faster \
                 than inputs enter it (whatever their yomo-tid); deliveries round it \
                 past limits.max_loop_returns per input are dropped, counted as loop \
                 (logged once per connection)"
            );
        }
        throttled
    }
}

/// Settles the ticket of a frame every recipient dropped as a loop: stored when the
/// federation took it, else refused as `loop`.
fn every_recipient_looped(ticket: Option<Ticket>, federated: bool) {
    if let Some(ticket) = ticket {
        if federated {
            ticket.done();
        } else {
            ticket.refused(RefusedReason::Loop);
        }
    }
}

impl LoopLog {
    /// Logs a message's first dropped return, unless this connection logged one within
    /// [`LOOP_LOG_EVERY`] (then the next line counts it).
    fn report(
        &mut self,
        sender: Option<(SessionId, &str)>,
        tid: &[u8],
        tag: u32,
        returned: crate::journeys::Returned,
        now: Instant,
    ) {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < LOOP_LOG_EVERY)
        {
            self.quiet += 1;
            return;
        }
        self.last = Some(now);
        let quiet = std::mem::take(&mut self.quiet);
        let (session, name) = sender.map_or((None, "(federation)"), |(id, n)| (Some(id), n));
        tracing::warn!(
            from = name,
            from_session = session,
            to_session = returned.recipient,
            tid = %shown(tid),
            tag = format_args!("{tag:#x}"),
            returns = returned.returns,
            messages_not_logged = quiet,
            "loop: a message came back to a stream function its own output led to, more \
             than limits.max_loop_returns times; further returns of it are dropped, counted \
             as loop"
        );
    }
}

/// A client-chosen tid as logged: its first 64 bytes, read as UTF-8 (anything else shown
/// as U+FFFD).
fn shown(tid: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&tid[..tid.len().min(64)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QueueConfig;
    use crate::outbox::{held_bytes, FRAME_OVERHEAD};

    /// A frame routed to three subscribers is one shared frame: every queue's slot points
    /// at the same allocation, charged once (its shared entry included) plus a slot per
    /// queue, and all of it is given back when the queues let go.
    #[tokio::test]
    async fn a_frame_routed_to_many_queues_is_shared_and_charged_once() {
        let metrics = Arc::new(Metrics::new());
        let routes = Routes::new(
            Vec::new(),
            Journeys::new(1, crate::journeys::WINDOW),
            Cycles::new(1),
        );
        let outboxes: Vec<_> = (0..3)
            .map(|_| Arc::new(Outbox::new(&QueueConfig::default(), metrics.clone())))
            .collect();
        for (id, outbox) in outboxes.iter().enumerate() {
            routes.subscribe(id as SessionId, &[0x33], "", outbox.clone(), &[]);
        }
        let data = Data::new(0x33, vec![7u8; 100]);
        let charged = held_bytes(&data);
        let mut cache = routes.cache_for(9, "source");
        let routed = Routed::new(data);
        let now = Instant::now();
        route(
            &routes,
            &mut cache,
            &metrics,
            routed,
            Origin::Source,
            now,
            None,
        )
        .await;
        assert_eq!(metrics.budget.used(), charged + 3 * FRAME_OVERHEAD);
        let mut taken = Vec::new();
        for outbox in &outboxes {
            let mut batch = Vec::new();
            assert!(outbox.pop_batch(&mut batch, 10).await);
            assert_eq!(batch.len(), 1);
            taken.push(batch.pop().unwrap().frame);
        }
        assert!(Arc::ptr_eq(&taken[0], &taken[1]) && Arc::ptr_eq(&taken[1], &taken[2]));
        assert!(matches!(&*taken[0], Frame::Data(d) if d.payload[..] == [7u8; 100][..]));
        assert_eq!(metrics.budget.used(), charged);
        drop(taken);
        assert_eq!(metrics.budget.used(), 0);
    }
}
