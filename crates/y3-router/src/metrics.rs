//! Prometheus metrics (prometheus-client) and a tiny hyper HTTP/1.1 server for
//! `GET /metrics`, the JSON status endpoints and the dashboard (`status/`, `dashboard/`).
//! The process metrics and `y3_build_info` are listed in `status/process.rs`.
//!
//! ```text
//! y3_router_connections{client_type}          gauge    open sessions by client type
//! y3_router_accepted_connections_total{transport}  counter  accepted connections
//! y3_router_rejected_total{reason}            counter  refused handshakes (goaway kind)
//! y3_router_tarpitted_total                   counter  of those, wrong credentials refused
//!                                                      after a tarpit delay (`throttle.rs`)
//! y3_router_protocol_errors_total{kind}       counter  malformed input (frame error kind)
//! y3_router_skipped_frames_total{reason}      counter  frames read past, not routed (`too_long`,
//!                                                      `metadata_too_large`)
//! y3_router_frames_in_total{tag}              counter  data frames read from clients
//! y3_router_bytes_in_total{tag}               counter  payload bytes read
//! y3_router_frames_out_total{tag}             counter  data frames written to subscribers
//! y3_router_bytes_out_total{tag}              counter  payload bytes written
//! y3_router_dropped_total{reason}             counter  frames not delivered (see below)
//! y3_router_tag_dropped_total{tag}            counter  the same drops, by the frame's tag
//! y3_router_deliveries_total                  counter  deliveries owed by routing (below)
//! y3_router_unaccounted                       gauge    the ledger's balance (below), when read
//! y3_router_writing                           gauge    data frames between a queue and a socket
//! y3_router_evictions_total{client}           counter  slow consumers disconnected, by name
//! y3_router_self_loops_total                  counter  functions seen writing a tag they observe
//! y3_router_cycle_throttled_total             counter  functions whose outputs round a cycle of
//!                                                      functions outran its inputs (`cycles.rs`)
//! y3_router_queue_depth                       gauge    frames queued over all subscribers
//! y3_router_queued_bytes                      gauge    bytes held (queued frames once, slots,
//!                                                      partial frames), against limits.max_queued_bytes
//! y3_router_budget_actions_total{action}      counter  non-readers evicted, partial frames cut
//!                                                      for the memory budget (`budget.rs`)
//! y3_router_handler_latency_seconds           histogram  frame read → written to subscriber
//! y3_router_mesh_connected{downstream}        gauge    1 while the link to a downstream is up
//! y3_router_mesh_connects_total{downstream}   counter  links established (reconnections)
//! y3_router_mesh_frames_total{downstream}     counter  data frames written to a downstream
//! y3_router_mesh_dropped_total{downstream}    counter  data frames for it dropped (`mesh`)
//! y3_router_filter_matched_total{tag,filter}  counter  frames a content filter delivered
//! y3_router_filter_withheld_total{tag,filter} counter  frames it kept off the wire
//! y3_router_filter_malformed_total{tag,filter} counter ...of which not Y3 (subset of withheld)
//! ```
//!
//! Filters count once per frame per distinct filter (tag and text), however many
//! subscribers share it; a frame every filter withholds is not a `no_subscriber` drop. Filter
//! texts are client-chosen: [`MAX_FILTER_LABELS`] distinct ones are labelled (at most 128
//! bytes each), further ones count under `filter="other"`.
//!
//! Drop reasons: `queue_full` (drop-oldest policy), `no_subscriber`, `loop` (hop limit, or a
//! message coming back to a function its own output led to more than
//! `limits.max_loop_returns` times: `journeys.rs`),
//! `disconnected` (queued for a subscriber that went away), `slow_consumer` (queued for a
//! subscriber disconnected for not reading under the block policy), `mesh` (for a downstream
//! zipper that was down or too slow, see `mesh.rs`), `memory_budget` (did not fit the
//! router-wide budget of queued bytes, see `budget.rs`).
//!
//! Every drop is counted: for each routed frame the router owes one delivery per recipient
//! (one when it has none, none when content filters withheld it from every subscriber), and each ends written (`frames_out`, or `mesh_frames` for a
//! downstream), dropped under a reason, or still queued. [`Stats::unaccounted`] is that
//! balance; the soak (`crates/y3-soak`) checks it is zero after every router lifetime.
//!
//! Tags are labelled `0x10`-style. Clients choose tags, so the label set is capped at
//! [`MAX_TAG_LABELS`] distinct tags; frames on further tags are counted under `other`. The
//! same holds for client names in evictions ([`MAX_CLIENT_LABELS`], at most 64 bytes each).

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
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::filters::FilterCounters;
use crate::histogram::{LatencyHistogram, LocalLatency};

/// Most distinct tag label values; see the module docs.
pub const MAX_TAG_LABELS: usize = 1024;

/// Most distinct client names labelled in `y3_router_evictions_total`.
pub const MAX_CLIENT_LABELS: usize = 256;

/// Most distinct filters labelled in the `y3_router_filter_*` families.
pub const MAX_FILTER_LABELS: usize = 256;

/// Why a frame was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Drop {
    /// Dropped by the drop-oldest policy.
    QueueFull,
    /// No session observes the tag.
    NoSubscriber,
    /// Over the hop limit, or a message's return to a function past its loop budget.
    Loop,
    /// Queued for a subscriber that went away.
    Disconnected,
    /// Queued for a subscriber disconnected as a slow consumer.
    SlowConsumer,
    /// For a downstream zipper of the mesh that was down or did not keep up.
    Mesh,
    /// Did not fit the router's memory budget (`limits.max_queued_bytes`).
    MemoryBudget,
}

impl Drop {
    /// Every reason.
    pub const ALL: [Drop; 7] = [
        Drop::QueueFull,
        Drop::NoSubscriber,
        Drop::Loop,
        Drop::Disconnected,
        Drop::SlowConsumer,
        Drop::Mesh,
        Drop::MemoryBudget,
    ];

    /// The label value.
    pub const fn name(self) -> &'static str {
        match self {
            Drop::QueueFull => "queue_full",
            Drop::NoSubscriber => "no_subscriber",
            Drop::Loop => "loop",
            Drop::Disconnected => "disconnected",
            Drop::SlowConsumer => "slow_consumer",
            Drop::Mesh => "mesh",
            Drop::MemoryBudget => "memory_budget",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TagLabel {
    tag: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FilterLabel {
    tag: String,
    filter: String,
}

/// The `y3_router_filter_*` families and the distinct filters seen.
#[derive(Debug, Default)]
struct FilterFamilies {
    matched: Family<FilterLabel, Counter>,
    withheld: Family<FilterLabel, Counter>,
    malformed: Family<FilterLabel, Counter>,
    /// (tag, text) → id, for the first [`MAX_FILTER_LABELS`] distinct filters.
    ids: Mutex<HashMap<(u32, String), u64>>,
    next_id: AtomicU64,
}

/// One filter's totals, for tests and summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterStats {
    /// Frames delivered.
    pub matched: u64,
    /// Frames withheld (not matching, or not Y3).
    pub withheld: u64,
    /// Of the withheld, those whose payload was not Y3.
    pub malformed: u64,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabel {
    client: String,
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
struct ClientTypeLabel {
    client_type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabel {
    transport: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DownstreamLabel {
    downstream: String,
}

/// The per-downstream families of the mesh.
#[derive(Debug, Default)]
struct MeshFamilies {
    connected: Family<DownstreamLabel, Gauge>,
    connects: Family<DownstreamLabel, Counter>,
    frames: Family<DownstreamLabel, Counter>,
    dropped: Family<DownstreamLabel, Counter>,
}

/// One downstream zipper's metric handles (shared; clone freely).
#[derive(Debug, Clone, Default)]
pub(crate) struct DownstreamMetrics {
    /// 1 while the link is up.
    pub connected: Gauge,
    /// Links established.
    pub connects: Counter,
    /// Data frames written.
    pub frames: Counter,
    /// Data frames dropped.
    pub dropped: Counter,
}

/// One downstream zipper's totals, for tests and summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DownstreamStats {
    /// Whether the link is up now.
    pub connected: bool,
    /// Links established so far (1 + reconnections).
    pub connects: u64,
    /// Data frames written to it.
    pub frames: u64,
    /// Data frames for it that were dropped (also counted under [`Drop::Mesh`]).
    pub dropped: u64,
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
        self.add_many(1, bytes as u64);
    }

    /// Counts `frames` frames of `bytes` payload bytes in all.
    pub fn add_many(&self, frames: u64, bytes: u64) {
        self.frames.inc_by(frames);
        self.bytes.inc_by(bytes);
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
    connections: Family<ClientTypeLabel, Gauge>,
    accepted: Family<TransportLabel, Counter>,
    rejected: Family<ReasonLabel, Counter>,
    protocol_errors: Family<KindLabel, Counter>,
    skipped: Family<ReasonLabel, Counter>,
    frames_in: Family<TagLabel, Counter>,
    /// Data frames dropped, by tag (every reason).
    dropped_by_tag: Family<TagLabel, Counter>,
    bytes_in: Family<TagLabel, Counter>,
    frames_out: Family<TagLabel, Counter>,
    bytes_out: Family<TagLabel, Counter>,
    dropped: Family<ReasonLabel, Counter>,
    deliveries: Counter,
    /// The ledger's balance ([`Stats::unaccounted`]), set when the text is encoded.
    unaccounted: Gauge,
    /// [`Stats::writing`], set when the text is encoded.
    writing_gauge: Gauge,
    tarpitted: Counter,
    evictions: Family<ClientLabel, Counter>,
    self_loops: Counter,
    cycles_throttled: Counter,
    evicted_names: Mutex<HashSet<String>>,
    queue_depth: Gauge,
    /// Queued bytes against the router's memory budget.
    pub(crate) budget: Budget,
    latency: LatencyHistogram,
    mesh: MeshFamilies,
    filters: FilterFamilies,
    /// `[federation]`'s counters (`federation/metrics.rs`).
    pub(crate) federation: crate::federation::FederationMetrics,
    /// `[mqtt]`'s counters (`mqtt/metrics.rs`).
    pub(crate) mqtt: crate::mqtt::MqttMetrics,
    labelled: Mutex<HashSet<u32>>,
    total_in: AtomicU64,
    total_out: AtomicU64,
    total_forwarded: AtomicU64,
    depth: AtomicI64,
    /// Data frames taken from the queues by writers and not yet written or dropped.
    writing: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        // The router's families under `y3_router_`; the process metrics and the build info
        // (`status/process.rs`) at the top level, under the names Prometheus's clients use.
        let mut root = Registry::default();
        root.register_collector(Box::new(crate::status::ProcessCollector));
        let registry = root.sub_registry_with_prefix("y3_router");
        let m = Metrics {
            registry: Registry::default(),
            connections: Family::default(),
            accepted: Family::default(),
            rejected: Family::default(),
            protocol_errors: Family::default(),
            skipped: Family::default(),
            frames_in: Family::default(),
            dropped_by_tag: Family::default(),
            bytes_in: Family::default(),
            frames_out: Family::default(),
            bytes_out: Family::default(),
            dropped: Family::default(),
            deliveries: Counter::default(),
            unaccounted: Gauge::default(),
            writing_gauge: Gauge::default(),
            tarpitted: Counter::default(),
            evictions: Family::default(),
            self_loops: Counter::default(),
            cycles_throttled: Counter::default(),
            evicted_names: Mutex::new(HashSet::new()),
            queue_depth: Gauge::default(),
            budget: Budget::default(),
            // 10 µs to ~2.6 s.
            latency: LatencyHistogram::default(),
            mesh: MeshFamilies::default(),
            filters: FilterFamilies::default(),
            federation: Default::default(),
            mqtt: Default::default(),
            labelled: Mutex::new(HashSet::new()),
            total_in: AtomicU64::new(0),
            total_out: AtomicU64::new(0),
            total_forwarded: AtomicU64::new(0),
            depth: AtomicI64::new(0),
            writing: AtomicI64::new(0),
        };
        m.register_clients(registry);
        m.register_frames(registry);
        m.register_policies(registry);
        m.register_links(registry);
        Metrics {
            registry: root,
            ..m
        }
    }

    /// Connections and handshakes: who came, who was refused, what was malformed.
    fn register_clients(&self, registry: &mut Registry) {
        registry.register(
            "connections",
            "Open sessions by client type",
            self.connections.clone(),
        );
        registry.register(
            "accepted_connections",
            "Accepted connections by transport",
            self.accepted.clone(),
        );
        registry.register(
            "rejected",
            "Refused handshakes by goaway kind",
            self.rejected.clone(),
        );
        registry.register(
            "protocol_errors",
            "Malformed input by frame error kind",
            self.protocol_errors.clone(),
        );
        registry.register(
            "skipped_frames",
            "Frames read past without routing them, by reason (too_long: over limits.max_frame_len; \
             metadata_too_large: over limits.max_metadata_bytes or max_metadata_entries)",
            self.skipped.clone(),
        );
    }

    /// Data frames in and out, and every delivery owed until it is written or dropped.
    fn register_frames(&self, registry: &mut Registry) {
        registry.register(
            "frames_in",
            "Data frames read from clients",
            self.frames_in.clone(),
        );
        registry.register(
            "tag_dropped",
            "Data frames dropped, by tag (every reason; by reason in y3_router_dropped_total)",
            self.dropped_by_tag.clone(),
        );
        registry.register(
            "bytes_in",
            "Payload bytes read from clients",
            self.bytes_in.clone(),
        );
        registry.register(
            "frames_out",
            "Data frames written to subscribers",
            self.frames_out.clone(),
        );
        registry.register(
            "bytes_out",
            "Payload bytes written to subscribers",
            self.bytes_out.clone(),
        );
        registry.register(
            "dropped",
            "Frames not delivered, by reason",
            self.dropped.clone(),
        );
        registry.register(
            "deliveries",
            "Deliveries owed: one per recipient of each routed frame, one per frame with none; \
             each ends written (frames_out), dropped (dropped) or still queued",
            self.deliveries.clone(),
        );
        registry.register(
            "unaccounted",
            "Deliveries owed that are neither written, forwarded, dropped and counted, nor \
             queued (zero once idle; never negative)",
            self.unaccounted.clone(),
        );
        registry.register(
            "writing",
            "Data frames writers took from the queues and have not yet written or dropped",
            self.writing_gauge.clone(),
        );
    }

    /// What the limits did: the tarpit, evictions, loops, queues, the memory budget, latency.
    fn register_policies(&self, registry: &mut Registry) {
        registry.register(
            "tarpitted",
            "Wrong credentials refused after a tarpit delay (also counted in rejected)",
            self.tarpitted.clone(),
        );
        registry.register(
            "evictions",
            "Slow consumers disconnected, by client name",
            self.evictions.clone(),
        );
        registry.register(
            "self_loops",
            "Stream functions seen writing a tag they observe (once per connection)",
            self.self_loops.clone(),
        );
        registry.register(
            "cycle_throttled",
            "Stream functions whose outputs round a cycle of functions outran its inputs \
             (once per connection; the deliveries dropped count as loop)",
            self.cycles_throttled.clone(),
        );
        registry.register(
            "queue_depth",
            "Frames queued over all subscribers",
            self.queue_depth.clone(),
        );
        registry.register(
            "queued_bytes",
            "Bytes the router holds for its clients against limits.max_queued_bytes: queued \
             frames (a frame shared by many queues once), queue slots, partial frames",
            self.budget.gauge(),
        );
        self.budget.register(registry);
        registry.register(
            "handler_latency_seconds",
            "Time from reading a data frame to writing it to a subscriber",
            self.latency.clone(),
        );
    }

    /// Downstream zippers, content filters, the federation and MQTT.
    fn register_links(&self, registry: &mut Registry) {
        registry.register(
            "mesh_connected",
            "1 while the link to a downstream zipper is up",
            self.mesh.connected.clone(),
        );
        registry.register(
            "mesh_connects",
            "Links to a downstream zipper established",
            self.mesh.connects.clone(),
        );
        registry.register(
            "mesh_frames",
            "Data frames written to a downstream zipper",
            self.mesh.frames.clone(),
        );
        registry.register(
            "mesh_dropped",
            "Data frames for a downstream zipper that were dropped",
            self.mesh.dropped.clone(),
        );
        registry.register(
            "filter_matched",
            "Frames a content filter delivered, by tag and filter",
            self.filters.matched.clone(),
        );
        registry.register(
            "filter_withheld",
            "Frames a content filter kept off the wire, by tag and filter",
            self.filters.withheld.clone(),
        );
        registry.register(
            "filter_malformed",
            "Withheld frames whose payload was not Y3, by tag and filter",
            self.filters.malformed.clone(),
        );
        self.federation.register(registry);
        self.mqtt.register(registry);
    }

    fn filter_label(tag: u32, text: &str) -> FilterLabel {
        let mut filter = text.to_owned();
        if filter.len() > 128 {
            let mut end = 128;
            while !filter.is_char_boundary(end) {
                end -= 1;
            }
            filter.truncate(end);
        }
        FilterLabel {
            tag: format!("0x{tag:02x}"),
            filter,
        }
    }

    /// The id and counters of filter `text` on `tag`: the same for the same filter, so
    /// that one evaluation per frame serves every subscriber declaring it.
    pub(crate) fn filter(&self, tag: u32, text: &str) -> (u64, FilterCounters) {
        let fresh = || self.filters.next_id.fetch_add(1, Ordering::Relaxed);
        let (id, label) = {
            let mut ids = self.filters.ids.lock().unwrap_or_else(|e| e.into_inner());
            let key = (tag, text.to_owned());
            match ids.get(&key) {
                Some(&id) => (id, Metrics::filter_label(tag, text)),
                None if ids.len() < MAX_FILTER_LABELS => {
                    let id = fresh();
                    ids.insert(key, id);
                    (id, Metrics::filter_label(tag, text))
                }
                None => (fresh(), Metrics::filter_label(tag, "other")),
            }
        };
        let f = &self.filters;
        let counters = FilterCounters {
            matched: f.matched.get_or_create_owned(&label),
            withheld: f.withheld.get_or_create_owned(&label),
            malformed: f.malformed.get_or_create_owned(&label),
        };
        (id, counters)
    }

    /// The totals of filter `text` on `tag` (`None`: never declared).
    pub fn filter_stats(&self, tag: u32, text: &str) -> Option<FilterStats> {
        let label = Metrics::filter_label(tag, text);
        let f = &self.filters;
        let matched = f.matched.get(&label)?.get();
        let count = |c: &Family<FilterLabel, Counter>| c.get(&label).map_or(0, |c| c.get());
        Some(FilterStats {
            matched,
            withheld: count(&f.withheld),
            malformed: count(&f.malformed),
        })
    }

    /// The metric handles of the downstream zipper `name`.
    pub(crate) fn downstream(&self, name: &str) -> DownstreamMetrics {
        let label = DownstreamLabel {
            downstream: name.to_owned(),
        };
        DownstreamMetrics {
            connected: self.mesh.connected.get_or_create_owned(&label),
            connects: self.mesh.connects.get_or_create_owned(&label),
            frames: self.mesh.frames.get_or_create_owned(&label),
            dropped: self.mesh.dropped.get_or_create_owned(&label),
        }
    }

    /// The totals of the downstream zipper `name` of the mesh (`None`: no such downstream).
    pub fn downstream_stats(&self, name: &str) -> Option<DownstreamStats> {
        let label = DownstreamLabel {
            downstream: name.to_owned(),
        };
        let connects = self.mesh.connects.get(&label)?.get();
        let count = |f: &Family<DownstreamLabel, Counter>| f.get(&label).map_or(0, |c| c.get());
        Some(DownstreamStats {
            connected: self.mesh.connected.get(&label).is_some_and(|g| g.get() > 0),
            connects,
            frames: count(&self.mesh.frames),
            dropped: count(&self.mesh.dropped),
        })
    }

    /// Counts a slow consumer evicted, under its (client-chosen, so capped) name.
    pub(crate) fn evicted(&self, name: &str) {
        let mut name: String = name.chars().take(64).collect();
        {
            let mut names = self.evicted_names.lock().unwrap_or_else(|e| e.into_inner());
            if !names.contains(&name) {
                if names.len() < MAX_CLIENT_LABELS {
                    names.insert(name.clone());
                } else {
                    name = "other".to_owned();
                }
            }
        }
        self.evictions
            .get_or_create(&ClientLabel { client: name })
            .inc();
    }

    /// Every tag label counted so far (`0x10`-style, and `other`), with its totals:
    /// `(label, frames in, bytes in, frames out, bytes out, frames dropped)` (`/tagz`,
    /// `/varz`).
    pub fn tag_totals(&self) -> Vec<(String, [u64; 5])> {
        let mut tags: Vec<u32> = self
            .labelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        tags.sort_unstable();
        let mut labels: Vec<String> = tags.iter().map(|t| format!("0x{t:02x}")).collect();
        labels.push("other".to_owned());
        let get =
            |f: &Family<TagLabel, Counter>, label: &TagLabel| f.get(label).map_or(0, |c| c.get());
        labels
            .into_iter()
            .filter_map(|tag| {
                let label = TagLabel { tag };
                let totals = [
                    get(&self.frames_in, &label),
                    get(&self.bytes_in, &label),
                    get(&self.frames_out, &label),
                    get(&self.bytes_out, &label),
                    get(&self.dropped_by_tag, &label),
                ];
                (label.tag != "other" || totals.iter().any(|&n| n > 0))
                    .then_some((label.tag, totals))
            })
            .collect()
    }

    /// Slow consumers evicted, by (capped) client name (`/varz`).
    pub fn evictions(&self) -> Vec<(String, u64)> {
        let names: Vec<String> = self
            .evicted_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .chain(std::iter::once("other".to_owned()))
            .collect();
        let mut out: Vec<(String, u64)> = names
            .into_iter()
            .filter_map(|client| {
                let n = self
                    .evictions
                    .get(&ClientLabel {
                        client: client.clone(),
                    })?
                    .get();
                Some((client, n))
            })
            .collect();
        out.sort();
        out
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let stats = self.stats();
        self.unaccounted.set(stats.unaccounted());
        self.writing_gauge.set(stats.writing);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// `tag`'s label: `0x10`-style while fewer than [`MAX_TAG_LABELS`] tags are labelled,
    /// `other` past them.
    fn tag_label(&self, tag: u32) -> TagLabel {
        let mut labelled = self.labelled.lock().unwrap_or_else(|e| e.into_inner());
        let tag = if labelled.contains(&tag) || labelled.len() < MAX_TAG_LABELS {
            labelled.insert(tag);
            format!("0x{tag:02x}")
        } else {
            "other".to_owned()
        };
        TagLabel { tag }
    }

    /// Counts `n` data frames of `tag` as dropped (beside their reason's count, which
    /// [`dropped`](Metrics::dropped) keeps): `y3_router_tag_dropped_total`, `/tagz`.
    pub(crate) fn dropped_tag(&self, tag: u32, n: u64) {
        if n > 0 {
            self.dropped_by_tag
                .get_or_create(&self.tag_label(tag))
                .inc_by(n);
        }
    }

    /// The counters for `tag` in `direction` (clone them; they are shared handles).
    pub fn tag_counters(&self, direction: Direction, tag: u32) -> TagCounters {
        let label = self.tag_label(tag);
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

    /// `delta` data frames more (or fewer) taken by writers and not yet settled: a
    /// writer's batch between its queue and the socket.
    pub(crate) fn writing(&self, delta: i64) {
        self.writing.fetch_add(delta, Ordering::Relaxed);
    }

    /// Counts `n` data frames written to downstream zippers of the mesh.
    pub(crate) fn forwarded(&self, n: u64) {
        self.total_forwarded.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` deliveries owed by the routing of one frame (see [`Stats::deliveries`]).
    pub(crate) fn deliveries(&self, n: u64) {
        self.deliveries.inc_by(n);
    }

    /// Counts `n` frames dropped for `reason` before routing chose any recipient: each
    /// owes one delivery (for "no recipient") and settles it as the drop, in one call, so
    /// that no drop is ever counted against a delivery that was not owed.
    pub(crate) fn unrouted(&self, reason: Drop, tag: u32, n: u64) {
        self.deliveries(n);
        self.dropped(reason, n);
        self.dropped_tag(tag, n);
    }

    /// Counts a function whose deliveries round a cycle were throttled (once per
    /// connection, `cycles.rs`).
    pub(crate) fn cycle_throttled(&self) {
        self.cycles_throttled.inc();
    }

    /// Counts a stream function seen writing a tag it observes (once per connection).
    pub(crate) fn self_loop(&self) {
        self.self_loops.inc();
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

    /// Counts a wrong credential whose refusal the tarpit delays.
    pub(crate) fn tarpitted(&self) {
        self.tarpitted.inc();
    }

    pub(crate) fn protocol_error(&self, kind: &'static str) {
        self.protocol_errors
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    pub(crate) fn skip(&self, reason: &'static str, frames: u64) {
        self.skipped
            .get_or_create(&ReasonLabel { reason })
            .inc_by(frames);
    }

    /// Frames read past without routing them for `reason` (`too_long`: over
    /// `limits.max_frame_len`, skipped as they streamed in; the connection stays up).
    pub fn skipped(&self, reason: &'static str) -> u64 {
        self.skipped
            .get(&ReasonLabel { reason })
            .map_or(0, |c| c.get())
    }

    pub(crate) fn accepted(&self, transport: &'static str) {
        self.accepted
            .get_or_create(&TransportLabel { transport })
            .inc();
    }

    pub(crate) fn connection(&self, client_type: &'static str, delta: i64) {
        self.connections
            .get_or_create(&ClientTypeLabel { client_type })
            .inc_by(delta);
    }

    pub(crate) fn queued(&self, delta: i64) {
        if delta != 0 {
            self.queue_depth.inc_by(delta);
            self.depth.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// Adds a writer's latencies (one merge per written batch, no lock).
    pub(crate) fn latencies(&self, local: &mut LocalLatency) {
        self.latency.merge(local);
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
                "forbidden",
                "throttled",
                "held_off",
                "no_client_certificate",
                "bad_client_certificate",
            ],
        );
        let connections = ["source", "stream_function", "upstream_zipper", "other"]
            .iter()
            .map(|&client_type| {
                self.connections
                    .get(&ClientTypeLabel { client_type })
                    .map_or(0, |g| g.get())
            })
            .sum::<i64>();
        Stats {
            connections: connections.max(0) as u64,
            frames_in: self.total_in.load(Ordering::Relaxed),
            frames_out: self.total_out.load(Ordering::Relaxed),
            forwarded: self.total_forwarded.load(Ordering::Relaxed),
            deliveries: self.deliveries.get(),
            self_loops: self.self_loops.get(),
            queued: self.depth.load(Ordering::Relaxed).max(0) as u64,
            queue_depth: self.depth.load(Ordering::Relaxed),
            writing: self.writing.load(Ordering::Relaxed),
            queued_bytes: self.budget.used() as u64,
            dropped,
            rejected,
            protocol_errors: protocol_error_kinds()
                .map(|kind| {
                    let n = self
                        .protocol_errors
                        .get(&KindLabel { kind })
                        .map_or(0, |c| c.get());
                    (kind, n)
                })
                .filter(|&(_, n)| n > 0)
                .collect(),
            mqtt: self.mqtt.ledger(),
        }
    }
}

/// The router's own protocol-error kinds (a frame that stalled, bad metadata, a reserved or
/// forbidden tag, a failed TLS or QUIC setup, ...); with the frame errors' kinds
/// ([`FrameError::KINDS`](y3_transport::FrameError::KINDS)) and the codec's
/// ([`y3::DecodeError::KINDS`]), those [`Stats::protocol_errors`] reports.
const ROUTER_PROTOCOL_ERROR_KINDS: [&str; 7] = [
    "protocol",
    "frame_stalled",
    "bad_metadata",
    "reserved_tag",
    "protocol_error",
    "transport_setup",
    "forbidden",
];

/// Every protocol-error kind [`Stats::protocol_errors`] reports, each once.
fn protocol_error_kinds() -> impl Iterator<Item = &'static str> {
    let frame = y3_transport::FrameError::KINDS.into_iter();
    let codec = y3::DecodeError::KINDS
        .into_iter()
        .filter(|k| !y3_transport::FrameError::KINDS.contains(k));
    frame.chain(codec).chain(ROUTER_PROTOCOL_ERROR_KINDS)
}

/// Router totals, for tests and summaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sessions open now (admitted ones).
    pub connections: u64,
    /// Data frames read from clients.
    pub frames_in: u64,
    /// Data frames written to subscribers.
    pub frames_out: u64,
    /// Data frames written to downstream zippers of the mesh.
    pub forwarded: u64,
    /// Deliveries owed by routing: for every routed data frame, one per recipient (one when
    /// it had none). Each ends written ([`frames_out`](Stats::frames_out)), dropped and
    /// counted ([`dropped`](Stats::dropped)), forwarded to the mesh, or still queued, so
    /// [`unaccounted`](Stats::unaccounted) is zero once the router is idle.
    pub deliveries: u64,
    /// Stream functions seen writing a tag they observe (a self-loop), one per connection.
    pub self_loops: u64,
    /// Frames queued now.
    pub queued: u64,
    /// The queue depth as counted, signed: below zero only if more frames left the queues
    /// than entered them (a ledger fault [`Stats::ledger`] reports).
    pub queue_depth: i64,
    /// Data frames writers took from the queues and have not yet written (or dropped):
    /// a batch on its way to a socket (signed, as `queue_depth`).
    pub writing: i64,
    /// Bytes queued now, over all subscribers (see `limits.max_queued_bytes`).
    pub queued_bytes: u64,
    /// Drops by reason name (every reason present, zero included).
    pub dropped: HashMap<&'static str, u64>,
    /// Refused handshakes by goaway kind.
    pub rejected: HashMap<&'static str, u64>,
    /// Protocol errors by kind (only kinds seen).
    pub protocol_errors: HashMap<&'static str, u64>,
    /// The MQTT listener's ledger (`mqtt/metrics.rs`).
    pub mqtt: crate::mqtt::MqttLedger,
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

    /// Deliveries owed that are neither written, dropped and counted, nor queued: zero for
    /// a router that loses nothing silently (read when no frame is being routed).
    pub fn unaccounted(&self) -> i64 {
        self.ledger().unaccounted()
    }

    /// The delivery ledger's terms.
    pub fn ledger(&self) -> Ledger {
        Ledger {
            deliveries: self.deliveries,
            written: self.frames_out,
            forwarded: self.forwarded,
            dropped: self.total_drops(),
            queued: self.queue_depth,
            writing: self.writing,
            mqtt: self.mqtt,
        }
    }
}

/// The delivery ledger: what routing owed, and where each delivery ended.
///
/// ```text
/// deliveries = written + forwarded + dropped + queued + writing + unaccounted
///   owed before any drop is counted against it: one per recipient chosen, one for
///   "no recipient" (no_subscriber, the hop limit), none for a frame refused unread
///   (skipped: too_long, metadata_too_large) or withheld by every content filter
/// ```
///
/// While frames are routed `unaccounted` may be above zero (owed, not yet settled);
/// it is never below zero, and zero once the router is idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Deliveries owed by routing.
    pub deliveries: u64,
    /// Data frames written to subscribers.
    pub written: u64,
    /// Data frames written to downstream zippers of the mesh.
    pub forwarded: u64,
    /// Drops counted, every reason.
    pub dropped: u64,
    /// Frames queued now (signed: see [`Stats::queue_depth`]).
    pub queued: i64,
    /// Frames taken by writers, not yet written or dropped (see [`Stats::writing`]).
    pub writing: i64,
    /// The MQTT listener's own balances, checked with these.
    pub mqtt: crate::mqtt::MqttLedger,
}

impl Ledger {
    /// Deliveries owed that are neither settled nor queued.
    pub fn unaccounted(&self) -> i64 {
        let settled =
            (self.written + self.forwarded + self.dropped) as i64 + self.queued + self.writing;
        self.deliveries as i64 - settled
    }

    /// Checks an idle router's ledger: no term below zero, nothing unaccounted.
    ///
    /// # Errors
    /// [`LedgerError`] naming the first fault.
    pub fn check(&self) -> Result<(), LedgerError> {
        for (term, value) in [("queued", self.queued), ("writing", self.writing)] {
            if value < 0 {
                return Err(LedgerError::Negative { term, value });
            }
        }
        match self.unaccounted() {
            0 => Ok(()),
            n if n < 0 => Err(LedgerError::Negative {
                term: "unaccounted",
                value: n,
            }),
            n => Err(LedgerError::Unaccounted { deliveries: n }),
        }?;
        self.mqtt.check()
    }
}

/// A fault in the delivery [`Ledger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// A term below zero: more settled than owed (a drop counted against no delivery).
    #[error("ledger term {term} is negative: {value}")]
    Negative {
        /// The term's name.
        term: &'static str,
        /// Its value.
        value: i64,
    },
    /// Deliveries owed that ended nowhere (lost silently), on an idle router.
    #[error("{deliveries} deliveries unaccounted")]
    Unaccounted {
        /// How many.
        deliveries: i64,
    },
}

impl LedgerError {
    /// The stable snake_case kind.
    pub const fn kind(&self) -> &'static str {
        match self {
            LedgerError::Negative { .. } => "ledger_negative",
            LedgerError::Unaccounted { .. } => "ledger_unaccounted",
        }
    }
}

/// Serves `GET /metrics`, the JSON status endpoints (`/varz`, `/connz`, `/tagz`:
/// `status/`), the dashboard (`/`, `/dashboard`) and `GET /healthz` until `stop` is
/// cancelled. With a `token`, `/metrics` and the JSON endpoints answer `401` unless the
/// request carries `Authorization: Bearer <token>` (`/healthz` and the dashboard's static
/// page stay open: they tell nothing).
pub(crate) async fn serve(
    listener: TcpListener,
    status: Arc<crate::status::Status>,
    stop: CancellationToken,
    token: Option<Arc<str>>,
) {
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
        let status = status.clone();
        let stop = stop.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let response = match &token {
                    Some(token) if !open(req.uri().path()) && !bearer(&req, token) => {
                        unauthorized()
                    }
                    _ => respond(&status, &req),
                };
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

/// Paths served without the metrics token: they tell nothing about the router (the
/// dashboard's page asks for the token and sends it with its requests).
fn open(path: &str) -> bool {
    matches!(path, "/healthz" | "/" | "/dashboard")
}

/// Whether `req` carries `Authorization: Bearer <token>` (compared in constant time).
fn bearer(req: &Request<Incoming>, token: &str) -> bool {
    let offered = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    offered.len() == token.len()
        && offered
            .iter()
            .zip(token.as_bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn unauthorized() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"unauthorized\n")));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    response
}

fn respond(state: &crate::status::Status, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let json = (req.method() == Method::GET)
        .then(|| state.respond(path, req.uri().query()))
        .flatten();
    let (status, content_type, body) = match (req.method(), path) {
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            state.metrics.encode(),
        ),
        (&Method::GET, "/" | "/dashboard") => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            crate::dashboard::INDEX.to_owned(),
        ),
        (&Method::GET, _) if json.is_some() => {
            (StatusCode::OK, "application/json", json.unwrap_or_default())
        }
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
    fn drops_are_counted_by_tag_too() {
        let m = Metrics::new();
        m.dropped_tag(0x10, 2);
        m.unrouted(Drop::NoSubscriber, 0x10, 1);
        m.unrouted(Drop::Loop, 0x11, 4);
        let totals: std::collections::HashMap<_, _> = m.tag_totals().into_iter().collect();
        assert_eq!(totals["0x10"][4], 3);
        assert_eq!(totals["0x11"][4], 4);
        assert!(m
            .encode()
            .contains("y3_router_tag_dropped_total{tag=\"0x10\"} 3"));
        assert_eq!(m.stats().unaccounted(), 0);
    }

    #[test]
    fn text_format_and_stats() {
        let m = Metrics::new();
        m.tag_counters(Direction::In, 0x10).add(64);
        m.frames_in(1);
        m.dropped(Drop::QueueFull, 3);
        m.connection("stream_function", 1);
        let mut local = LocalLatency::default();
        local.observe(Duration::from_micros(50));
        m.latencies(&mut local);
        let text = m.encode();
        for needle in [
            "y3_router_frames_in_total{tag=\"0x10\"} 1",
            "y3_router_bytes_in_total{tag=\"0x10\"} 64",
            "y3_router_dropped_total{reason=\"queue_full\"} 3",
            "y3_router_connections{client_type=\"stream_function\"} 1",
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
