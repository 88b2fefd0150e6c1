//! Seeing the router: the JSON endpoints of the metrics listener, after NATS's monitoring
//! endpoints, and the connection registry they read.
//!
//! ```text
//! GET /varz    the server: version, git commit, uptime, process RSS/CPU/fds, listeners,
//!              totals (connections, frames and bytes in/out, drops by reason, rejections),
//!              the delivery ledger, mesh and federation links
//! GET /connz   every connection: id, name, kind, protocol, transport, remote address,
//!              observed and published tags, counts and rates, queue depth and bytes, drops;
//!              an MQTT client (kind `mqtt`) adds `mqtt`: version, username,
//!              subscriptions, inflight, awaiting_puback;
//!              ?limit=N&offset=N&sort=id|name|frames_in|frames_out|bytes_in|bytes_out|
//!              rate_in|rate_out|queued|drops|since (largest first but id, name, since)
//! GET /tagz    every tag: publishers, subscribers, counts and rates, filters
//! ```
//!
//! Rates are per second over the last sampling window: a request at least
//! `rates::WINDOW` (1 s) after the last sample takes a new one, so any number of pollers
//! share one window; the first window starts with the router. `/varz` says how long the
//! window was (`rates.window_seconds`). The same bearer token as `/metrics` guards them (`listen.metrics_token`).

mod connz;
mod process;
pub(crate) mod rates;
mod registry;
mod tagz;
mod varz;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

pub(crate) use process::ProcessCollector;
pub use process::{git_commit, set_git_commit, ProcessStats, UNKNOWN_GIT, VERSION};
pub use registry::{
    ConnCounters, ConnectionSnapshot, Connections, Kind, MqttProbe, MqttState, QueueProbe,
    QueueState, Registered, Registration, MAX_PUBLISHED_TAGS,
};

use crate::config::RouterConfig;
use crate::metrics::Metrics;

/// What the status endpoints read: the router's metrics, connections and configuration.
#[derive(Debug)]
pub(crate) struct Status {
    pub metrics: Arc<Metrics>,
    pub connections: Arc<Connections>,
    pub config: RouterConfig,
    /// Bound addresses: tcp, quic, metrics.
    pub addrs: [Option<SocketAddr>; 3],
    pub started: SystemTime,
    pub started_at: Instant,
    pub rates: Mutex<rates::Sampler>,
}

impl Status {
    /// The JSON body for `path` (`/varz`, `/connz`, `/tagz`), `None` for another path.
    pub fn respond(&self, path: &str, query: Option<&str>) -> Option<String> {
        let value = match path {
            "/varz" => varz::varz(self),
            "/connz" => connz::connz(self, &connz::Query::parse(query.unwrap_or(""))),
            "/tagz" => tagz::tagz(self),
            _ => return None,
        };
        Some(serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned()))
    }

    /// A fresh sample of every counter the rates are kept for, and the rates.
    pub fn sample(&self) -> rates::Rates {
        let mut counters = Vec::new();
        for (tag, [fi, bi, fo, bo, _]) in self.metrics.tag_totals() {
            counters.push((format!("tag {tag} fi"), fi));
            counters.push((format!("tag {tag} bi"), bi));
            counters.push((format!("tag {tag} fo"), fo));
            counters.push((format!("tag {tag} bo"), bo));
        }
        for c in self.connections.snapshot() {
            counters.push((format!("conn {} fi", c.id), c.frames_in));
            counters.push((format!("conn {} bi", c.id), c.bytes_in));
            counters.push((format!("conn {} fo", c.id), c.frames_out));
            counters.push((format!("conn {} bo", c.id), c.bytes_out));
        }
        let stats = self.metrics.stats();
        counters.push(("frames_in".to_owned(), stats.frames_in));
        counters.push(("frames_out".to_owned(), stats.frames_out));
        counters.push(("drops".to_owned(), stats.total_drops()));
        self.rates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sample(Instant::now(), counters)
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
