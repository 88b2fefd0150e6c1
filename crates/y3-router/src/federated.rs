//! The router's side of the federation's interface ([`federation::Local`],
//! `federation/local.rs`): routing a frame from NATS, delivering a stored frame to one
//! function's sessions, and acknowledging a stored frame to its sender.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;
use y3_transport::frame::Frame;

use crate::acks::Ticket;
use crate::federation::{Local, Receipt};
use crate::metrics::Drop;
use crate::outbox::Pushed;
use crate::routing::{self, Origin, RouteCache};
use crate::session::Routed;
use crate::shared::Shared;
use crate::table::{accepts, SessionId};

impl Local for Shared {
    type Cache = RouteCache;

    fn cache(&self) -> RouteCache {
        self.routes.cache()
    }

    fn max_hops(&self) -> u32 {
        self.config.limits.max_hops
    }

    fn metadata_limits(&self) -> y3_transport::metadata::MetadataLimits {
        self.config.limits.metadata()
    }

    fn is_draining(&self) -> bool {
        Shared::is_draining(self)
    }

    fn draining(&self) -> impl Future<Output = ()> + Send + '_ {
        self.drain_sources.cancelled()
    }

    fn route(&self, cache: &mut RouteCache, routed: Routed) -> impl Future<Output = ()> + Send {
        routing::route(
            &self.routes,
            cache,
            &self.metrics,
            routed,
            Origin::Federation,
            Instant::now(),
            None,
        )
    }

    async fn deliver(
        &self,
        sessions: &HashSet<SessionId>,
        routed: Routed,
    ) -> Option<Vec<oneshot::Receiver<()>>> {
        let (data, target) = (routed.data(), routed.target());
        let mut cache = self.routes.cache();
        let table = cache.table(&self.routes);
        let routes = table.routes(data.tag)?;
        let outboxes: Vec<_> = routes
            .iter()
            .filter(|r| sessions.contains(&r.session) && accepts(r, target))
            .map(|r| r.target.clone())
            .collect();
        if outboxes.is_empty() {
            return None;
        }
        let at = Instant::now();
        self.metrics.deliveries(outboxes.len() as u64);
        let mut written = Vec::with_capacity(outboxes.len());
        // One shared frame for every queue, charged once.
        let mut shared = data.clone();
        crate::outbox::charge_frame(&self.metrics, &mut shared);
        let shared = Arc::new(Frame::Data(shared));
        for outbox in outboxes {
            let (tx, rx) = oneshot::channel();
            written.push(rx);
            match outbox.push_tracked(shared.clone(), at, Some(tx)).await {
                Pushed::Queued | Pushed::DroppedOldest => {}
                Pushed::Closed => {
                    self.metrics.dropped(Drop::Disconnected, 1);
                    self.metrics.dropped_tag(data.tag, 1);
                }
                Pushed::Evicted => {
                    self.metrics.dropped(Drop::SlowConsumer, 1);
                    self.metrics.dropped_tag(data.tag, 1);
                }
            }
        }
        Some(written)
    }
}

impl Receipt for Ticket {
    fn stored(self: Box<Self>) {
        self.done();
    }

    fn not_stored(self: Box<Self>) {
        self.refused(y3_transport::frame::RefusedReason::NotStored);
    }

    fn too_large(self: Box<Self>) {
        self.refused(y3_transport::frame::RefusedReason::TooLong);
    }
}
