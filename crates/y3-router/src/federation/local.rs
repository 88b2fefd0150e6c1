//! The federation's one way into the router it serves. Nothing under `federation/` imports
//! the router's runtime (`Shared`, outboxes, acknowledgement tickets, `routing`); it asks
//! through [`Local`] and [`Receipt`], which the router implements (`federated.rs`).
//!
//! ```text
//!  NATS subscription ──▶ Local::route(cache, frame)         (every local observer)
//!  durable consumer  ──▶ Local::deliver(sessions, frame)    (one function's sessions)
//!  publisher         ──▶ Receipt::stored()                  (the sender's stored ack)
//!  interest task     ──▶ Local::is_draining / Local::draining
//! ```

use std::collections::HashSet;
use std::fmt;
use std::future::Future;

use tokio::sync::oneshot;

use crate::session::Routed;
use crate::table::SessionId;

/// The router, as the federation sees it.
pub(crate) trait Local: Send + Sync + 'static {
    /// A subscription task's view of the routing table, kept between frames.
    type Cache: Send + 'static;

    /// A fresh view of the routing table.
    fn cache(&self) -> Self::Cache;

    /// The hop limit for data frames (`limits.max_hops`): a frame from NATS beyond it is
    /// counted as a loop and dropped.
    fn max_hops(&self) -> u32;

    /// The metadata limits of a direct client's frame (`limits.max_metadata_bytes`,
    /// `max_metadata_entries`): a frame from NATS over them is counted and dropped.
    fn metadata_limits(&self) -> y3_transport::metadata::MetadataLimits;

    /// Whether the router is draining its sources (shutting down).
    fn is_draining(&self) -> bool;

    /// Resolves once the router starts draining its sources.
    fn draining(&self) -> impl Future<Output = ()> + Send + '_;

    /// Routes a frame from another router to every local observer of its tag; it is never
    /// published again.
    fn route(&self, cache: &mut Self::Cache, routed: Routed) -> impl Future<Output = ()> + Send;

    /// Queues a stored frame for the sessions in `sessions` that accept it: one receiver
    /// per session, told when the frame is written to it; `None` when no such session is
    /// here.
    fn deliver(
        &self,
        sessions: &HashSet<SessionId>,
        routed: Routed,
    ) -> impl Future<Output = Option<Vec<oneshot::Receiver<()>>>> + Send;
}

/// A client's wait for its durable frame to be stored: told once JetStream stored it, that
/// it was not (yet), or that it never can be.
pub(crate) trait Receipt: Send + fmt::Debug + 'static {
    /// The frame is stored.
    fn stored(self: Box<Self>);

    /// JetStream did not store the frame in the publisher's attempts: refused as
    /// `not_stored`, so the client sends it again later.
    fn not_stored(self: Box<Self>);

    /// The frame is larger than the NATS server takes (`max_payload`): it is refused as
    /// too long, and the client does not send it again.
    fn too_large(self: Box<Self>);
}
