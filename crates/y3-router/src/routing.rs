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
use std::time::Instant;

use y3_transport::frame::Frame;

use y3_transport::metadata;

use crate::acks::Ticket;
use crate::filters::{Evaluators, RouteFilter};
use crate::journeys::Journeys;
use crate::metrics::{Drop, Metrics};
use crate::outbox::{Outbox, Pushed};
use crate::session::Routed;
use crate::table::{accepts, RoutingTable, SessionId};

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
    /// Deliveries per message of stream functions' outputs (loops in width).
    journeys: Option<Journeys>,
    /// `[federation]`: local frames are offered to it (`federation/`).
    federation: Option<Arc<crate::federation::Federation>>,
}

impl Routes {
    /// Routes with the mesh's downstream outboxes and the per-message delivery budget.
    pub fn new(mesh: Vec<Arc<Outbox>>, journeys: Journeys) -> Routes {
        Routes {
            mesh,
            journeys: Some(journeys),
            ..Routes::default()
        }
    }

    /// These routes, offering local frames to `federation` too.
    pub fn with_federation(self, federation: Option<Arc<crate::federation::Federation>>) -> Self {
        Routes { federation, ..self }
    }

    fn update(&self, change: impl FnOnce(&mut Table)) {
        let _writer = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut table = Table::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()));
        change(&mut table);
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
}

impl RouteCache {
    /// The current table: the cached one unless a change was published since.
    pub fn table(&mut self, routes: &Routes) -> &Table {
        let now = routes.generation.load(Ordering::Acquire);
        if now != self.generation {
            let fresh = routes.cache();
            (self.generation, self.table) = (fresh.generation, fresh.table);
        }
        &self.table
    }
}

/// Who sent a frame, as routing sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A source (or any client that does not receive).
    Source,
    /// A stream function: its outputs count against their message's delivery budget.
    Function,
    /// An upstream zipper of a mesh: delivered locally, never forwarded again.
    Mesh,
    /// Another router, through NATS: delivered locally, never forwarded again.
    Federation,
}

/// Delivers `routed` to every subscriber it reaches and, for frames from local clients,
/// to every downstream zipper of the mesh. Each recipient gets a reference-counted clone
/// of the frame; the last gets the frame itself. A function's output goes to as many
/// recipients as its message's delivery budget has left; the rest are dropped as `loop`.
/// A subscriber with a content filter on the tag receives the frame only if the filter
/// matches its payload; each distinct filter is evaluated once per frame, and a frame every
/// subscriber's filter withholds is counted by the filters, not as `no_subscriber`.
pub(crate) async fn route(
    routes: &Routes,
    cache: &mut RouteCache,
    metrics: &Metrics,
    routed: Routed,
    origin: Origin,
    at: Instant,
    ticket: Option<Ticket>,
) {
    let Routed { data, target } = routed;
    let target = target.as_deref();
    let subscribers = cache.table(routes).routes(data.tag);
    let subscribers: &[_] = subscribers.as_deref().unwrap_or(&[]);
    let (downstream, federated): (&[Arc<Outbox>], bool) = match origin {
        Origin::Mesh | Origin::Federation => (&[], false),
        _ => match &routes.federation {
            // The federation's publisher acknowledges durable frames once stored.
            Some(federation) => (&routes.mesh, federation.offer(&data, ticket).await),
            None => {
                if let Some(ticket) = ticket {
                    ticket.done();
                }
                (&routes.mesh, false)
            }
        },
    };
    let filters = &mut cache.filters;
    filters.begin();
    let mut filtered = false;
    let local = subscribers
        .iter()
        .filter(|r| accepts(r, target))
        .filter(|r| {
            filtered |= r.filter.is_some();
            filters.passes(r.filter.as_ref(), &data.payload)
        })
        .count();
    let mut left = local + downstream.len();
    if left == 0 {
        // No delivery is owed for a frame that only filters withheld (their counters
        // account for it), nor for one that went to the federation.
        if !filtered && !federated {
            metrics.deliveries(1);
            metrics.dropped(Drop::NoSubscriber, 1);
        }
        return;
    }
    metrics.deliveries(left as u64);
    if let (Origin::Function, Some(journeys)) = (origin, &routes.journeys) {
        if let Ok(Some(tid)) = data.metadata.get(metadata::TID) {
            let wanted = u32::try_from(left).unwrap_or(u32::MAX);
            let allowed = journeys.charge(tid, wanted, at) as usize;
            if allowed < left {
                metrics.dropped(Drop::Loop, (left - allowed) as u64);
                left = allowed;
                if left == 0 {
                    return;
                }
            }
        }
    }
    let mut data = Some(data);
    let filters = &cache.filters;
    let chosen = subscribers
        .iter()
        .filter(|r| accepts(r, target) && filters.passed(r.filter.as_ref()))
        .map(|r| &r.target);
    for outbox in chosen.chain(downstream).take(left) {
        left -= 1;
        let frame = if left > 0 { data.clone() } else { data.take() };
        let Some(frame) = frame else { break };
        match outbox.push(Frame::Data(frame), at).await {
            Pushed::Queued | Pushed::DroppedOldest => {}
            Pushed::Closed => metrics.dropped(Drop::Disconnected, 1),
            Pushed::Evicted => metrics.dropped(Drop::SlowConsumer, 1),
        }
    }
}
