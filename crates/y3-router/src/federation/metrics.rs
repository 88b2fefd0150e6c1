//! The federation's metrics, registered with the router's (`y3_router_federation_*`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Why a frame did not make it through the federation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The publisher's queue was full (NATS slow or unreachable).
    QueueFull,
    /// NATS refused or failed the publish (or JetStream never acknowledged it).
    PublishFailed,
    /// Larger than the NATS server's `max_payload` (its `INFO`; nats-server's default is
    /// 1 MiB, a y3 frame may be 16 MiB): refused by the client, never published.
    TooLarge,
    /// A gap in a publisher's sequence seen by a receiving router: lost on the way.
    Gap,
    /// A message that is not a frame (`spec/federation.md`).
    Malformed,
    /// Past the hop limit.
    Loop,
    /// Published by another router under this router's own `federation.name`
    /// (`claim.rs`): this router cannot tell them from its own, so they cross to no router.
    SameName,
    /// Metadata over `limits.max_metadata_bytes` or `max_metadata_entries`: refused as a
    /// direct client's frame is (`metadata_too_large`).
    MetadataTooLarge,
}

impl Lost {
    fn name(self) -> &'static str {
        match self {
            Lost::QueueFull => "queue_full",
            Lost::PublishFailed => "publish_failed",
            Lost::TooLarge => "too_large",
            Lost::Gap => "gap",
            Lost::Malformed => "malformed",
            Lost::Loop => "loop",
            Lost::SameName => "same_name",
            Lost::MetadataTooLarge => "metadata_too_large",
        }
    }
}

/// Federation counters (shared handles).
#[derive(Debug, Clone, Default)]
pub struct FederationMetrics {
    /// 1 while connected to a NATS server.
    pub connected: Gauge,
    /// Frames published (core NATS, or stored by JetStream).
    pub published: Counter,
    /// NATS messages published for plain frames (a batch is one).
    pub published_messages: Counter,
    /// Times a client was held back by a full publish queue (the block policy).
    pub held: Counter,
    /// Frames received from other routers and routed locally.
    pub received: Counter,
    /// Durable messages already delivered to the same consumer, skipped.
    pub duplicates: Counter,
    /// Frames lost or not federated, by reason.
    lost: Family<ReasonLabel, Counter>,
    /// Subscriptions and durable consumers active now.
    pub subscriptions: Gauge,
    /// (router, tag) pairs of remote interest known now.
    pub remote_interest: Gauge,
    /// Other routers' attempts to start with this router's `federation.name`, refused.
    pub name_claims_refused: Counter,
    /// 1 once another router was found running under this router's `federation.name`.
    pub name_conflict: Gauge,
}

impl FederationMetrics {
    /// Registers the families under `federation_*`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("federation");
        r.register(
            "connected",
            "1 while connected to NATS",
            self.connected.clone(),
        );
        r.register(
            "published",
            "Frames published to NATS (stored, for durable tags)",
            self.published.clone(),
        );
        r.register(
            "published_messages",
            "NATS messages published for plain frames (a batch of frames is one)",
            self.published_messages.clone(),
        );
        r.register(
            "held",
            "Times a client was held back by a full publish queue (queue policy block)",
            self.held.clone(),
        );
        r.register(
            "received",
            "Frames from other routers routed locally",
            self.received.clone(),
        );
        r.register(
            "duplicates",
            "Durable messages delivered before, skipped",
            self.duplicates.clone(),
        );
        r.register(
            "lost",
            "Frames not federated or lost on the way, by reason",
            self.lost.clone(),
        );
        r.register(
            "subscriptions",
            "NATS subscriptions and durable consumers active",
            self.subscriptions.clone(),
        );
        r.register(
            "remote_interest",
            "Tags observed at other routers, counted per router",
            self.remote_interest.clone(),
        );
        r.register(
            "name_claims_refused",
            "Other routers' attempts to start with this router's federation.name, refused",
            self.name_claims_refused.clone(),
        );
        r.register(
            "name_conflict",
            "1 once another router was found running under this router's federation.name",
            self.name_conflict.clone(),
        );
    }

    /// Counts `n` frames lost for `reason`.
    pub fn lost(&self, reason: Lost, n: u64) {
        if n > 0 {
            self.lost
                .get_or_create(&ReasonLabel {
                    reason: reason.name(),
                })
                .inc_by(n);
        }
    }

    /// Frames lost for `reason` so far.
    pub fn lost_total(&self, reason: Lost) -> u64 {
        self.lost
            .get(&ReasonLabel {
                reason: reason.name(),
            })
            .map_or(0, |c| c.get())
    }
}
