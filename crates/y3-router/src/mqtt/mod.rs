//! `[mqtt]`: devices speak MQTT (3.1.1 and 5, QoS 0 and 1) straight into the routing table
//! that YoMo sources and stream functions use (`docs/mqtt.md`).
//!
//! ```text
//!  sensor ─PUBLISH sensors/a/noise─▶ listener ─ [[mqtt.publish]] topic → tag ─▶ Ingress ─▶ routing
//!                                      metadata: yomo-source-id, yomo-tid, mqtt-topic
//!  QoS 1: PUBACK once the router says the frame is routed (stored acknowledgement, a
//!         ticket for each QoS 1 publish)
//!  routing ─ tag ─▶ downlink ─ [[mqtt.subscribe]] tag → topic ─▶ session ─PUBLISH─▶ subscriber
//! ```
//!
//! Each MQTT client is admitted through an internal in-memory link (`link.rs`) that the
//! router serves as any client's connection, and receives through another; its publishes
//! become the router's data frames and go straight to the routing code a socket
//! connection's read loop uses (`crate::ingress`), with no encoding in between. The
//! client's password is checked as a y3
//! token (`[[auth.tokens]]`, with the MQTT client's own address in the tarpit), the token's
//! `publish`/`observe` tags bound what it may publish and subscribe to, and its frames go
//! through the same queues, memory budget, filters, ledger and federation. The codec is
//! rumqttc's (`packet.rs`); the session logic is here: `conn.rs` (one connection),
//! `outlet.rs` (a plain-TCP socket's write side, shared with the session's downlink),
//! `session.rs` (subscriptions, queued and in-flight messages), `stamp.rs` (a publish's
//! metadata, encoded once per topic), `broker.rs` (sessions by
//! client id, retained messages, downlinks), `puback.rs` (what a QoS 1 publish is
//! answered), `retained.rs`, `metrics.rs`; its configuration is `config/mqtt.rs`.
//!
//! Not supported, refused with MQTT's reason: QoS 2 publishes (`0x9B`; subscriptions are
//! granted QoS 1 at most), topic aliases, shared subscriptions, MQTT 3.1 (level 3).
//! Persistent sessions and retained messages outlive a graceful restart (`saved.rs`).

mod broker;
mod conn;
mod error;
mod link;
mod metrics;
mod outlet;
pub mod packet;
pub mod puback;
mod retained;
mod saved;
mod session;
mod stamp;

use std::net::SocketAddr;
use std::sync::Arc;

pub use crate::config::mqtt as config;
pub use config::{MqttConfig, PublishMap, SubscribeMap};
pub use error::MqttError;
pub use link::TOPIC_KEY;
pub use metrics::{MqttLedger, MqttMetrics};

use crate::shared::Shared;

/// What `/connz` lists for an MQTT connection ([`RouterHandle::mqtt_connections`]).
///
/// [`RouterHandle::mqtt_connections`]: crate::RouterHandle::mqtt_connections
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnInfo {
    /// The client's name (its MQTT user name, else its client id).
    pub name: String,
    /// Its MQTT client id.
    pub client_id: String,
    /// Its address.
    pub remote: SocketAddr,
    /// `3.1.1` or `5`.
    pub version: &'static str,
    /// Its topic filters and their granted QoS.
    pub subscriptions: Vec<(String, u8)>,
}

/// The MQTT side of a running router: its listener's task and what `/connz` reads.
#[derive(Debug, Clone)]
pub(crate) struct Mqtt(Arc<broker::Broker>);

impl Mqtt {
    /// The MQTT side of `shared`'s router.
    pub fn new(shared: &Arc<Shared>) -> Mqtt {
        let config = &shared.config;
        let listen = if config.mqtt.listen.is_empty() {
            &config.mqtt.tls_listen
        } else {
            &config.mqtt.listen
        };
        let saved = config
            .state
            .persist
            .then(|| crate::state::dir(&config.state))
            .flatten()
            .map(|dir| saved::path(&dir, listen));
        let broker = broker::Broker::new(
            config.mqtt.clone(),
            link::Links {
                shared: shared.clone(),
            },
            shared.metrics.mqtt.clone(),
            saved,
        );
        broker.restore();
        Mqtt(broker)
    }

    /// Writes the persistent sessions into the state directory (a graceful stop, once
    /// every MQTT connection has closed).
    pub async fn save(&self) {
        self.0.save().await;
    }

    /// The MQTT connections open now.
    pub fn connections(&self) -> Vec<ConnInfo> {
        self.0.connections()
    }
}

/// The TLS acceptor of `tls_listen`: the router's server configuration (certificate,
/// TLS 1.3, client CA policy) without y3's ALPN, which MQTT clients do not offer.
pub(crate) fn tls_acceptor(config: &Arc<rustls_config::ServerConfig>) -> tokio_rustls::TlsAcceptor {
    let mut config = (**config).clone();
    config.alpn_protocols.clear();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

use tokio_rustls::rustls as rustls_config;

/// Serves MQTT clients on `listener` (over TLS with `tls`) until the router stops
/// accepting.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mqtt: Mqtt,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let broker = mqtt.0;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shared.stop_accepting.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let stop = conn::Stop {
                    drain: shared.drain_sources.clone(),
                    close: shared.close_all.clone(),
                };
                let (broker, kill) = (broker.clone(), shared.kill.clone());
                let metrics = shared.metrics.clone();
                let (tls, handshake) = (tls.clone(), shared.config.handshake_timeout());
                shared.tracker.spawn(async move {
                    let _ = stream.set_nodelay(true);
                    let serve = async {
                        let io = match tls {
                            None => conn::Io::plain(stream, metrics),
                            Some(tls) => {
                                let accepted = tokio::time::timeout(handshake, tls.accept(stream)).await;
                                match accepted {
                                    Ok(Ok(stream)) => conn::Io::tls(stream),
                                    Ok(Err(e)) => {
                                        broker.metrics.refused("tls_handshake");
                                        tracing::warn!(%peer, error = %e, "mqtt tls handshake failed");
                                        return;
                                    }
                                    Err(_) => {
                                        broker.metrics.refused("tls_handshake");
                                        tracing::warn!(%peer, "mqtt tls handshake timed out");
                                        return;
                                    }
                                }
                            }
                        };
                        conn::run(broker.clone(), io, peer, stop).await;
                    };
                    tokio::select! {
                        _ = serve => {}
                        _ = kill.cancelled() => {}
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "mqtt accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
