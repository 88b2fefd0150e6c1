//! A client's data frame into the routing table: the one place where a data frame that a
//! client sent is checked by its session's rules, charged to the memory budget, counted and
//! routed, or dropped (counted, logged once per client, refused to an acknowledging
//! client), or closes the client (counted as a protocol error). A socket connection's read
//! loop (`connection.rs`) and an MQTT connection (`mqtt/conn.rs`, its publishes mapped to
//! frames, no encoding in between) both hand their frames here.
//!
//! ```text
//!  read_loop: decoded frame ──────┐
//!                                 ├─▶ Ingress::data ─▶ Session::check_data
//!  MQTT PUBLISH: topic → tag ─────┘      │  (reserved tag, publish permission, hop limit,
//!                                        │   metadata limits, yomo-target / wanted target)
//!          ┌─────────────────────────────┼──────────────────────────────┐
//!          ▼ Route                       ▼ Drop (loop, metadata)        ▼ Close
//!   charge the budget, count, ticket     counted, logged once,          counted protocol
//!   ─▶ routing::route_in_place           ticket refused                 error (the caller
//!                                                                       closes the client)
//! ```
//!
//! A ticket (a stored acknowledgement, `acks.rs`) is taken for each frame routed or dropped
//! when the caller passes its [`Acks`]: for every data frame of a socket client that asked,
//! for the QoS 1 publishes of an MQTT client.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use y3_transport::frame::{ClientType, Data, Goaway, RefusedReason};
use y3_transport::metadata::MetadataTooLarge;

use crate::acks::Acks;
use crate::connection::TagCache;
use crate::metrics::{Direction, Drop};
use crate::outbox::detach_and_charge;
use crate::routing;
use crate::session::{DropReason, Located, Peer, Session, Verdict};
use crate::shared::Shared;
use crate::status::ConnCounters;
use crate::table::SessionId;

/// What became of a data frame handed to [`Ingress::data`].
#[derive(Debug)]
pub(crate) enum Handled {
    /// Routed (its recipients, or nobody: counted by the routing).
    Routed,
    /// Dropped by the session's rules, counted.
    Dropped,
    /// The session closed the client with this goaway (counted as a protocol error).
    Close(Goaway),
    /// The session is not open (no handshake yet): the frame is the session's to judge
    /// ([`Session::handle_frame`]).
    NotOpen,
}

/// One client's way into the routing table, across its frames: where its frames come from,
/// its view of the routes, its counters, and what was logged about it (once per client).
pub(crate) struct Ingress {
    id: SessionId,
    /// The client's name and id, for logs.
    name: String,
    client_id: String,
    origin: routing::Origin,
    routes: routing::RouteCache,
    tags: TagCache,
    /// Whether a hop-limit drop of this client was logged (once per client).
    hops_reported: bool,
    /// Whether a refusal for metadata over its limits was logged (once per client).
    metadata_reported: bool,
}

impl Ingress {
    /// The way in of the client `hello`, session `id`, its frames counted in `conn`.
    pub fn new(shared: &Shared, (id, conn): (SessionId, ConnCounters), hello: &Peer) -> Ingress {
        Ingress {
            id,
            name: hello.name.clone(),
            client_id: hello.id.clone(),
            origin: match hello.client_type {
                ClientType::UpstreamZipper => routing::Origin::Mesh,
                ClientType::StreamFunction => routing::Origin::Function,
                _ => routing::Origin::Source,
            },
            routes: shared.routes.cache_for(id, &hello.name),
            hops_reported: false,
            metadata_reported: false,
            tags: TagCache::new(shared.metrics.clone(), Direction::In, conn),
        }
    }

    /// A data frame of the client, checked by `session` where it lies and routed, dropped
    /// or refused; with `acks`, its ticket is taken when it is routed or dropped.
    #[inline]
    pub async fn data(
        &mut self,
        shared: &Shared,
        session: &mut Session,
        data: &mut Data,
        now: Instant,
        acks: Option<&Arc<Acks>>,
    ) -> Handled {
        match session.check_data(data) {
            Some(Verdict::Route(located)) => {
                self.route(shared, (data, located), now, acks).await;
                Handled::Routed
            }
            Some(Verdict::Drop(reason)) => {
                self.drop_data(shared, data, reason, acks);
                Handled::Dropped
            }
            Some(Verdict::Close(goaway)) => {
                count_close(shared, &goaway);
                Handled::Close(goaway)
            }
            None => Handled::NotOpen,
        }
    }

    /// Routes a data frame the session passed, held by the caller: charged to the memory
    /// budget, counted, then [`routing::route_in_place`] (no layer between).
    pub async fn route(
        &mut self,
        shared: &Shared,
        frame: (&mut Data, Located),
        now: Instant,
        acks: Option<&Arc<Acks>>,
    ) {
        let data = &mut *frame.0;
        // A small frame queued would keep its whole read buffer alive: copied out (see
        // outbox.rs), and charged once, for every queue it is routed to.
        detach_and_charge(&shared.metrics, data);
        self.tags.count(data.tag, data.payload.len());
        shared.metrics.frames_in(1);
        shared.routing.fetch_add(1, Ordering::Relaxed);
        routing::route_in_place(
            &shared.routes,
            &mut self.routes,
            &shared.metrics,
            frame,
            self.origin,
            now,
            acks.map(Acks::take),
        )
        .await;
        shared.routing.fetch_sub(1, Ordering::Relaxed);
    }

    /// Queues this client's frames without waking their writers at once, each writer owed
    /// one wake-up per read instead (`wakes.rs`); the caller calls
    /// [`wake_writers`](Ingress::wake_writers) before it reads its socket again.
    pub fn defer_wakes(&mut self) {
        self.routes.defer_wakes();
    }

    /// Wakes every writer owed a wake-up by this client's frames.
    #[inline]
    pub fn wake_writers(&mut self) {
        self.routes.wake_writers();
    }

    /// Whether the last frame routed had more than one subscriber
    /// ([`routing::RouteCache::fanned_out`]).
    pub fn fanned_out(&self) -> bool {
        self.routes.fanned_out()
    }

    /// A data frame the session dropped: counted and reported as `reason` says.
    pub fn drop_data(
        &mut self,
        shared: &Shared,
        data: &Data,
        reason: DropReason,
        acks: Option<&Arc<Acks>>,
    ) {
        match reason {
            DropReason::Loop => self.drop_looped(shared, data, acks),
            DropReason::MetadataTooLarge(why) => self.refuse_metadata(shared, data, &why, acks),
        }
    }

    /// A frame past `limits.max_hops` (a loop of y3 functions): counted as `loop`, the first
    /// of this client logged, refused to an acknowledging client.
    fn drop_looped(&mut self, shared: &Shared, data: &Data, acks: Option<&Arc<Acks>>) {
        // One delivery owed (it has no recipient), settled as the drop.
        shared.metrics.unrouted(Drop::Loop, data.tag, 1);
        if !self.hops_reported {
            self.hops_reported = true;
            tracing::warn!(
                session = self.id,
                name = %self.name,
                tag = format_args!("{:#x}", data.tag),
                hops = data.hops,
                "loop: a frame past limits.max_hops dropped (a loop of y3 functions); \
                 further ones from this client are counted as loop, not logged"
            );
        }
        // Handled (dropped and counted): sending it again would not help; an
        // acknowledging client learns it was refused.
        if let Some(acks) = acks {
            acks.take().refused(RefusedReason::HopLimit);
        }
    }

    /// A frame whose metadata is over its limits: counted as a skip, the first of this
    /// client logged, refused to an acknowledging client.
    fn refuse_metadata(
        &mut self,
        shared: &Shared,
        data: &Data,
        why: &MetadataTooLarge,
        acks: Option<&Arc<Acks>>,
    ) {
        // Refused unread, as a frame over max_frame_len is skipped: never routed,
        // so no delivery is owed.
        shared.metrics.skip(why.kind(), 1);
        if !self.metadata_reported {
            self.metadata_reported = true;
            tracing::warn!(
                session = self.id,
                name = %self.name,
                id = %self.client_id,
                tag = format_args!("{:#x}", data.tag),
                "refused a data frame: {why} (limits.max_metadata_bytes, \
                 limits.max_metadata_entries); further ones from this client are \
                 counted, not logged"
            );
        }
        if let Some(acks) = acks {
            acks.take().refused(RefusedReason::MetadataTooLarge);
        }
    }
}

/// Counts a client the session closed (a protocol error, by kind: `bad_metadata` for
/// malformed metadata, else the goaway's code).
pub(crate) fn count_close(shared: &Shared, goaway: &Goaway) {
    let kind = if goaway.reason.starts_with("bad_metadata") {
        "bad_metadata"
    } else {
        goaway.code.kind()
    };
    shared.metrics.protocol_error(kind);
}
