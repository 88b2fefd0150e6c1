//! The MQTT listener's metrics, registered with the router's (`y3_router_mqtt_*`).
//!
//! Every MQTT client also holds internal links into the router (module docs of
//! [`super`]): its frames count in the router's own metrics as any client's do, under
//! transport `memory`; these count what only MQTT knows.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// MQTT counters (shared handles).
#[derive(Debug, Clone, Default)]
pub struct MqttMetrics {
    /// MQTT connections open now (label `kind="mqtt"`, as /connz lists them).
    connections: Family<KindLabel, Gauge>,
    /// CONNECTs accepted.
    pub accepted: Counter,
    /// CONNECTs refused, by reason (`bad_credentials`, `not_authorized`, ...).
    refused: Family<ReasonLabel, Counter>,
    /// Connections closed by the router, by [`MqttError::kind`](super::MqttError::kind).
    closed: Family<ReasonLabel, Counter>,
    /// PUBLISHes routed into the router.
    pub published: Counter,
    /// PUBLISHes refused (`unmapped_topic`, `not_authorized`, `refused_by_router`).
    publish_refused: Family<ReasonLabel, Counter>,
    /// Messages delivered to MQTT subscribers (QoS 0 written, QoS 1 acknowledged).
    pub delivered: Counter,
    /// QoS 1 messages sent again (after a reconnect).
    pub redelivered: Counter,
    /// Messages dropped, by reason (`session_full`, `no_topic`).
    dropped: Family<ReasonLabel, Counter>,
    /// Persistent sessions kept now.
    pub sessions: Gauge,
    /// Retained messages kept now.
    pub retained: Gauge,
    /// The total of `dropped` (for tests and stats).
    dropped_total: std::sync::Arc<AtomicU64>,
}

impl MqttMetrics {
    /// Registers the families under `mqtt_*`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("mqtt");
        r.register(
            "connections",
            "MQTT connections open now",
            self.connections.clone(),
        );
        r.register("accepted", "MQTT CONNECTs accepted", self.accepted.clone());
        r.register(
            "refused",
            "MQTT CONNECTs refused, by reason",
            self.refused.clone(),
        );
        r.register(
            "closed",
            "MQTT connections closed by the router, by reason",
            self.closed.clone(),
        );
        r.register("published", "MQTT PUBLISHes routed", self.published.clone());
        r.register(
            "publish_refused",
            "MQTT PUBLISHes refused, by reason",
            self.publish_refused.clone(),
        );
        r.register(
            "delivered",
            "Messages delivered to MQTT subscribers",
            self.delivered.clone(),
        );
        r.register(
            "redelivered",
            "QoS 1 messages sent again after a reconnect",
            self.redelivered.clone(),
        );
        r.register(
            "dropped",
            "Messages for MQTT subscribers dropped, by reason",
            self.dropped.clone(),
        );
        r.register(
            "sessions",
            "Persistent MQTT sessions kept",
            self.sessions.clone(),
        );
        r.register(
            "retained",
            "Retained MQTT messages kept",
            self.retained.clone(),
        );
    }

    /// The gauge of open connections.
    pub fn open(&self) -> Gauge {
        self.connections
            .get_or_create(&KindLabel { kind: "mqtt" })
            .clone()
    }

    /// Counts a refused CONNECT.
    pub fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts a connection the router closed.
    pub fn closed(&self, reason: &'static str) {
        self.closed.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Counts a refused PUBLISH.
    pub fn publish_refused(&self, reason: &'static str) {
        self.publish_refused
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    /// Counts `n` dropped messages.
    pub fn dropped(&self, reason: &'static str, n: u64) {
        self.dropped
            .get_or_create(&ReasonLabel { reason })
            .inc_by(n);
        self.dropped_total.fetch_add(n, Ordering::Relaxed);
    }

    /// Messages dropped so far, every reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }
}
