//! Prometheus metrics (prometheus-client) and a tiny hyper HTTP/1.1 server for
//! `GET /metrics`.
//!
//! ```text
//! y3_router_connections{role}                 gauge    open sessions by role
//! y3_router_accepted_connections_total{transport}  counter  accepted connections
//! y3_router_rejected_total{reason}            counter  refused handshakes (goaway kind)
//! y3_router_protocol_errors_total{kind}       counter  malformed input (frame error kind)
//! y3_router_frames_in_total{tag}              counter  data frames read from clients
//! y3_router_bytes_in_total{tag}               counter  payload bytes read
//! y3_router_frames_out_total{tag}             counter  data frames written to subscribers
//! y3_router_bytes_out_total{tag}              counter  payload bytes written
//! y3_router_dropped_total{reason}             counter  frames not delivered (see below)
//! y3_router_queue_depth                       gauge    frames queued over all subscribers
//! y3_router_handler_latency_seconds           histogram  frame read → written to subscriber
//! ```
//!
//! Drop reasons: `queue_full` (drop-oldest policy), `no_subscriber`, `loop` (hop limit),
//! `disconnected` (queued for a subscriber that went away), `slow_consumer` (queued for a
//! subscriber disconnected for not reading under the block policy).
//!
//! Tags are labelled `0x10`-style. Clients choose tags, so the label set is capped at
//! [`MAX_TAG_LABELS`] distinct tags; frames on further tags are counted under `other`.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Most distinct tag label values; see the module docs.
pub const MAX_TAG_LABELS: usize = 1024;

/// Why a frame was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Drop {
    /// Dropped by the drop-oldest policy.
    QueueFull,
    /// No session observes the tag.
    NoSubscriber,
    /// Over the hop limit.
    Loop,
    /// Queued for a subscriber that went away.
    Disconnected,
    /// Queued for a subscriber disconnected as a slow consumer.
    SlowConsumer,
}

impl Drop {
    /// Every reason.
    pub const ALL: [Drop; 5] = [
        Drop::QueueFull,
        Drop::NoSubscriber,
        Drop::Loop,
        Drop::Disconnected,
        Drop::SlowConsumer,
    ];

    /// The label value.
    pub const fn name(self) -> &'static str {
        match self {
            Drop::QueueFull => "queue_full",
            Drop::NoSubscriber => "no_subscriber",
            Drop::Loop => "loop",
            Drop::Disconnected => "disconnected",
            Drop::SlowConsumer => "slow_consumer",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TagLabel {
    tag: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabel {
    transport: &'static str,
}

/// Counters of one direction for one tag.
#[derive(Debug, Clone, Default)]
pub struct TagCounters {
    frames: Counter,
    bytes: Counter,
}

impl TagCounters {
    /// Counts one frame of `bytes` payload bytes.
    pub fn add(&self, bytes: usize) {
        self.frames.inc();
        self.bytes.inc_by(bytes as u64);
    }
}

/// Direction of a tag counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Read from clients.
    In,
    /// Written to subscribers.
    Out,
}

/// All router metrics, plus plain totals for [`Stats`].
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    connections: Family<RoleLabel, Gauge>,
    accepted: Family<TransportLabel, Counter>,
    rejected: Family<ReasonLabel, Counter>,
    protocol_errors: Family<KindLabel, Counter>,
    frames_in: Family<TagLabel, Counter>,
    bytes_in: Family<TagLabel, Counter>,
    frames_out: Family<TagLabel, Counter>,
    bytes_out: Family<TagLabel, Counter>,
    dropped: Family<ReasonLabel, Counter>,
    queue_depth: Gauge,
    latency: Histogram,
    labelled: Mutex<HashSet<u32>>,
    total_in: AtomicU64,
    total_out: AtomicU64,
    depth: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("y3_router");
        let m = Metrics {
            registry: Registry::default(),
            connections: Family::default(),
            accepted: Family::default(),
            rejected: Family::default(),
            protocol_errors: Family::default(),
            frames_in: Family::default(),
            bytes_in: Family::default(),
            frames_out: Family::default(),
            bytes_out: Family::default(),
            dropped: Family::default(),
            queue_depth: Gauge::default(),
            // 10 µs to ~2.6 s.
            latency: Histogram::new(exponential_buckets(1e-5, 2.0, 19)),
            labelled: Mutex::new(HashSet::new()),
            total_in: AtomicU64::new(0),
            total_out: AtomicU64::new(0),
            depth: AtomicI64::new(0),
        };
        registry.register(
            "connections",
            "Open sessions by role",
            m.connections.clone(),
        );
        registry.register(
            "accepted_connections",
            "Accepted connections by transport",
            m.accepted.clone(),
        );
        registry.register(
            "rejected",
            "Refused handshakes by goaway kind",
            m.rejected.clone(),
        );
        registry.register(
            "protocol_errors",
            "Malformed input by frame error kind",
            m.protocol_errors.clone(),
        );
        registry.register(
            "frames_in",
            "Data frames read from clients",
            m.frames_in.clone(),
        );
        registry.register(
            "bytes_in",
            "Payload bytes read from clients",
            m.bytes_in.clone(),
        );
        registry.register(
            "frames_out",
            "Data frames written to subscribers",
            m.frames_out.clone(),
        );
        registry.register(
            "bytes_out",
            "Payload bytes written to subscribers",
            m.bytes_out.clone(),
        );
        registry.register(
            "dropped",
            "Frames not delivered, by reason",
            m.dropped.clone(),
        );
        registry.register(
            "queue_depth",
            "Frames queued over all subscribers",
            m.queue_depth.clone(),
        );
        registry.register(
            "handler_latency_seconds",
            "Time from reading a data frame to writing it to a subscriber",
            m.latency.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The counters for `tag` in `direction` (clone them; they are shared handles).
    pub fn tag_counters(&self, direction: Direction, tag: u32) -> TagCounters {
        let label = {
            let mut labelled = self.labelled.lock().unwrap_or_else(|e| e.into_inner());
            if labelled.contains(&tag) || labelled.len() < MAX_TAG_LABELS {
                labelled.insert(tag);
                format!("0x{tag:02x}")
            } else {
                "other".to_owned()
            }
        };
        let label = TagLabel { tag: label };
        let (frames, bytes) = match direction {
            Direction::In => (&self.frames_in, &self.bytes_in),
            Direction::Out => (&self.frames_out, &self.bytes_out),
        };
        TagCounters {
            frames: frames.get_or_create_owned(&label),
            bytes: bytes.get_or_create_owned(&label),
        }
    }

    pub(crate) fn frames_in(&self, n: u64) {
        self.total_in.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn frames_out(&self, n: u64) {
        self.total_out.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` frames dropped for `reason`.
    pub fn dropped(&self, reason: Drop, n: u64) {
        if n > 0 {
            self.dropped
                .get_or_create(&ReasonLabel {
                    reason: reason.name(),
                })
                .inc_by(n);
        }
    }

    pub(crate) fn rejected(&self, kind: &'static str) {
        self.rejected
            .get_or_create(&ReasonLabel { reason: kind })
            .inc();
    }

    pub(crate) fn protocol_error(&self, kind: &'static str) {
        self.protocol_errors
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    pub(crate) fn accepted(&self, transport: &'static str) {
        self.accepted
            .get_or_create(&TransportLabel { transport })
            .inc();
    }

    pub(crate) fn connection(&self, role: &'static str, delta: i64) {
        self.connections
            .get_or_create(&RoleLabel { role })
            .inc_by(delta);
    }

    pub(crate) fn queued(&self, delta: i64) {
        if delta != 0 {
            self.queue_depth.inc_by(delta);
            self.depth.fetch_add(delta, Ordering::Relaxed);
        }
    }

    pub(crate) fn latency(&self, d: Duration) {
        self.latency.observe(d.as_secs_f64());
    }

    /// A snapshot of the totals.
    pub fn stats(&self) -> Stats {
        let dropped = Drop::ALL
            .iter()
            .map(|&d| {
                let n = self
                    .dropped
                    .get(&ReasonLabel { reason: d.name() })
                    .map_or(0, |c| c.get());
                (d.name(), n)
            })
            .collect();
        let sum = |f: &Family<ReasonLabel, Counter>, names: &[&'static str]| -> HashMap<_, _> {
            names
                .iter()
                .map(|&n| (n, f.get(&ReasonLabel { reason: n }).map_or(0, |c| c.get())))
                .collect()
        };
        let rejected = sum(
            &self.rejected,
            &[
                "unauthorized",
                "bad_handshake",
                "version_mismatch",
                "protocol_error",
                "handshake_timeout",
                "too_many_connections",
            ],
        );
        let connections = ["source", "stream_function", "sink"]
            .iter()
            .map(|&role| {
                self.connections
                    .get(&RoleLabel { role })
                    .map_or(0, |g| g.get())
            })
            .sum::<i64>();
        Stats {
            connections: connections.max(0) as u64,
            frames_in: self.total_in.load(Ordering::Relaxed),
            frames_out: self.total_out.load(Ordering::Relaxed),
            queued: self.depth.load(Ordering::Relaxed).max(0) as u64,
            dropped,
            rejected,
            protocol_errors: PROTOCOL_ERROR_KINDS
                .iter()
                .map(|&kind| {
                    let n = self
                        .protocol_errors
                        .get(&KindLabel { kind })
                        .map_or(0, |c| c.get());
                    (kind, n)
                })
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }
}

/// Frame error kinds reported in [`Stats::protocol_errors`].
const PROTOCOL_ERROR_KINDS: [&str; 22] = [
    "too_long",
    "unknown_frame",
    "missing_field",
    "invalid_field",
    "truncated",
    "io",
    "unexpected_end",
    "negative_length",
    "varint_overflow",
    "varint_unterminated",
    "child_overflow",
    "truncated_header",
    "invalid_tag",
    "invalid_utf8",
    "invalid_length",
    "invalid_bool",
    "wrong_type",
    "wrong_count",
    "trailing_bytes",
    "too_deep",
    "protocol",
    "frame_stalled",
];

/// Router totals, for tests and summaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sessions open now (admitted ones).
    pub connections: u64,
    /// Data frames read from clients.
    pub frames_in: u64,
    /// Data frames written to subscribers.
    pub frames_out: u64,
    /// Frames queued now.
    pub queued: u64,
    /// Drops by reason name (every reason present, zero included).
    pub dropped: HashMap<&'static str, u64>,
    /// Refused handshakes by goaway kind.
    pub rejected: HashMap<&'static str, u64>,
    /// Protocol errors by kind (only kinds seen).
    pub protocol_errors: HashMap<&'static str, u64>,
}

impl Stats {
    /// Drops for one reason.
    pub fn drops(&self, reason: Drop) -> u64 {
        self.dropped.get(reason.name()).copied().unwrap_or(0)
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// Serves `GET /metrics` (and `GET /healthz`) until `stop` is cancelled.
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>, stop: CancellationToken) {
    loop {
        let (stream, _peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let metrics = metrics.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let response = respond(&metrics, &req);
                async move { Ok::<_, Infallible>(response) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = tokio::time::timeout(Duration::from_secs(30), conn) => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}

fn respond(metrics: &Metrics, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (&Method::GET, "/healthz") => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_and_stats() {
        let m = Metrics::new();
        m.tag_counters(Direction::In, 0x10).add(64);
        m.frames_in(1);
        m.dropped(Drop::QueueFull, 3);
        m.connection("sink", 1);
        m.latency(Duration::from_micros(50));
        let text = m.encode();
        for needle in [
            "y3_router_frames_in_total{tag=\"0x10\"} 1",
            "y3_router_bytes_in_total{tag=\"0x10\"} 64",
            "y3_router_dropped_total{reason=\"queue_full\"} 3",
            "y3_router_connections{role=\"sink\"} 1",
            "y3_router_handler_latency_seconds_count 1",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        let stats = m.stats();
        assert_eq!(stats.frames_in, 1);
        assert_eq!(stats.drops(Drop::QueueFull), 3);
        assert_eq!(stats.connections, 1);
    }

    #[test]
    fn tag_labels_are_capped() {
        let m = Metrics::new();
        for tag in 0..(MAX_TAG_LABELS as u32 + 10) {
            m.tag_counters(Direction::In, tag).add(1);
        }
        let text = m.encode();
        assert!(text.contains("y3_router_frames_in_total{tag=\"other\"} 10"));
    }
}
