//! The MQTT listener's metrics, registered with the router's (`y3_router_mqtt_*`).
//!
//! Every MQTT client also holds internal links into the router (module docs of
//! [`super`]): its frames count in the router's own metrics as any client's do, under
//! transport `memory`; these count what only MQTT knows.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

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
    /// PUBLISHes read from clients (and wills published for them).
    received: Counter,
    /// PUBLISHes routed into the router.
    published: Counter,
    /// PUBLISHes refused before routing, by reason (`unmapped_topic`, `not_authorized`,
    /// `shutting_down`, `qos_not_supported`, ...).
    publish_refused: Family<ReasonLabel, Counter>,
    /// QoS 1 PUBLISHes acknowledged, by outcome (`stored`: PUBACK 0 after the router
    /// routed or stored it; `refused_by_router`: PUBACK 0x80; `abandoned`: the connection
    /// ended first, no PUBACK).
    pubacked: Family<ReasonLabel, Counter>,
    /// Messages delivered to MQTT subscribers (QoS 0 written, QoS 1 acknowledged).
    delivered: Counter,
    /// Retained messages not kept (`mqtt.max_retained(_bytes)`); still routed.
    pub not_retained: Counter,
    /// QoS 1 messages sent again (after a reconnect).
    pub redelivered: Counter,
    /// Messages dropped, by reason (`session_full`, `no_topic`).
    dropped: Family<ReasonLabel, Counter>,
    /// Persistent sessions kept now.
    pub sessions: Gauge,
    /// Retained messages kept now.
    pub retained: Gauge,
    /// The ledger's terms.
    ledger: Arc<Terms>,
}

/// The ledger's terms, as atomics (the families above are for Prometheus).
#[derive(Debug, Default)]
struct Terms {
    received: AtomicU64,
    routed: AtomicU64,
    refused: AtomicU64,
    qos1_routed: AtomicU64,
    acked: AtomicU64,
    awaiting: AtomicI64,
    offered: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    held: AtomicI64,
}

/// The MQTT ledger: every PUBLISH a client sent, and every message for a subscriber, ends
/// somewhere counted.
///
/// ```text
/// received      = routed + refused                       (PUBLISHes from clients)
/// qos1_routed   = acked + awaiting                        (acked: stored, refused_by_router,
///                                                         or abandoned by a closed connection)
/// offered       = delivered + dropped + held             (messages for MQTT subscribers:
///                                                         one per topic a frame reaches a
///                                                         session under, one per frame that
///                                                         reaches none: a no_topic drop)
/// ```
///
/// `awaiting` (QoS 1 publishes the router has not answered yet) and `held` (messages in
/// sessions' queues and in flight) are gauges; an idle router with no connection has
/// `awaiting` 0 and `held` what persistent sessions keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MqttLedger {
    /// PUBLISHes read from clients, wills included.
    pub received: u64,
    /// Routed into the router (then counted in the router's own ledger).
    pub routed: u64,
    /// Refused before routing (every reason).
    pub refused: u64,
    /// Routed QoS 1 publishes.
    pub qos1_routed: u64,
    /// Of those, answered: PUBACKed (stored or refused by the router) or abandoned.
    pub acked: u64,
    /// Of those, awaiting the router's answer now.
    pub awaiting: i64,
    /// Messages offered to MQTT sessions.
    pub offered: u64,
    /// Delivered (QoS 0 written, QoS 1 acknowledged by the subscriber).
    pub delivered: u64,
    /// Dropped, every reason.
    pub dropped: u64,
    /// Held by sessions now (queued or in flight).
    pub held: i64,
}

impl MqttLedger {
    /// Checks the three balances (read when no MQTT message is moving).
    ///
    /// # Errors
    /// [`crate::metrics::LedgerError::Unaccounted`] with the first unbalanced difference, or
    /// [`crate::metrics::LedgerError::Negative`] for a gauge below zero.
    pub fn check(&self) -> Result<(), crate::metrics::LedgerError> {
        for (term, value) in [("mqtt.awaiting", self.awaiting), ("mqtt.held", self.held)] {
            if value < 0 {
                return Err(crate::metrics::LedgerError::Negative { term, value });
            }
        }
        let balances = [
            (
                "mqtt.received",
                self.received as i64 - (self.routed + self.refused) as i64,
            ),
            (
                "mqtt.qos1_routed",
                self.qos1_routed as i64 - self.acked as i64 - self.awaiting,
            ),
            (
                "mqtt.offered",
                self.offered as i64 - (self.delivered + self.dropped) as i64 - self.held,
            ),
        ];
        for (term, n) in balances {
            match n {
                0 => {}
                n if n < 0 => return Err(crate::metrics::LedgerError::Negative { term, value: n }),
                n => return Err(crate::metrics::LedgerError::Unaccounted { deliveries: n }),
            }
        }
        Ok(())
    }
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
        r.register(
            "received",
            "MQTT PUBLISHes read from clients (wills included)",
            self.received.clone(),
        );
        r.register("published", "MQTT PUBLISHes routed", self.published.clone());
        r.register(
            "pubacked",
            "MQTT QoS 1 PUBLISHes answered, by outcome",
            self.pubacked.clone(),
        );
        r.register(
            "not_retained",
            "Retained MQTT messages not kept (mqtt.max_retained reached)",
            self.not_retained.clone(),
        );
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

    /// Counts a PUBLISH read from a client (each then ends [`routed`] or
    /// [`publish_refused`]).
    ///
    /// [`routed`]: MqttMetrics::routed
    /// [`publish_refused`]: MqttMetrics::publish_refused
    pub fn received(&self) {
        self.received.inc();
        self.ledger.received.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a PUBLISH routed into the router (QoS 1: awaiting its answer).
    pub fn routed(&self, qos1: bool) {
        self.published.inc();
        self.ledger.routed.fetch_add(1, Ordering::Relaxed);
        if qos1 {
            self.ledger.qos1_routed.fetch_add(1, Ordering::Relaxed);
            self.ledger.awaiting.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a PUBLISH refused before routing.
    pub fn publish_refused(&self, reason: &'static str) {
        self.publish_refused
            .get_or_create(&ReasonLabel { reason })
            .inc();
        self.ledger.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` routed QoS 1 publishes answered with `outcome` (`stored`,
    /// `no_subscriber`, `refused_by_router`: `puback.rs`; `abandoned`).
    pub fn pubacked(&self, outcome: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        self.pubacked
            .get_or_create(&ReasonLabel { reason: outcome })
            .inc_by(n);
        // Out of `awaiting` before into `acked`: a reader in between sees the balance
        // owed (above zero), never below.
        self.ledger.awaiting.fetch_sub(n as i64, Ordering::Relaxed);
        self.ledger.acked.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a message offered to a session, held until it is delivered or dropped
    /// (counted before the session has it, so that `held` never reads below zero).
    pub fn offered(&self) {
        self.ledger.offered.fetch_add(1, Ordering::Relaxed);
        self.held(1);
    }

    /// `n` messages joined (`n` > 0) or left (`n` < 0) sessions' queues.
    fn held(&self, n: i64) {
        self.ledger.held.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a message delivered to a subscriber (it left its session).
    pub fn delivered(&self) {
        self.held(-1);
        self.delivered.inc();
        self.ledger.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` dropped messages, each of them offered (and so held) before.
    pub fn dropped(&self, reason: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        self.held(-(n as i64));
        self.dropped
            .get_or_create(&ReasonLabel { reason })
            .inc_by(n);
        self.ledger.dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// The ledger now.
    pub fn ledger(&self) -> MqttLedger {
        let l = &self.ledger;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MqttLedger {
            received: get(&l.received),
            routed: get(&l.routed),
            refused: get(&l.refused),
            qos1_routed: get(&l.qos1_routed),
            acked: get(&l.acked),
            awaiting: l.awaiting.load(Ordering::Relaxed),
            offered: get(&l.offered),
            delivered: get(&l.delivered),
            dropped: get(&l.dropped),
            held: l.held.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_balances_and_names_what_does_not() {
        let m = MqttMetrics::default();
        m.received();
        m.routed(true);
        m.received();
        m.publish_refused("unmapped_topic");
        m.offered();
        m.offered();
        m.offered();
        m.delivered();
        m.dropped("session_full", 1);
        // One QoS 1 publish awaits the router; one message is held.
        let l = m.ledger();
        assert_eq!((l.awaiting, l.held), (1, 1));
        assert_eq!(l.check(), Ok(()));
        m.pubacked("stored", 1);
        assert_eq!(m.ledger().check(), Ok(()));
        // A publish read and never settled is unaccounted.
        m.received();
        assert_eq!(
            m.ledger().check(),
            Err(crate::metrics::LedgerError::Unaccounted { deliveries: 1 })
        );
        // A message delivered twice drives `held` below zero.
        let m = MqttMetrics::default();
        m.delivered();
        assert!(matches!(
            m.ledger().check(),
            Err(crate::metrics::LedgerError::Negative {
                term: "mqtt.held",
                ..
            })
        ));
    }
}
