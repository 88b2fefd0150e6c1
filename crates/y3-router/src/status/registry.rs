//! The connection registry: every connection a listener admitted, with its counters, for
//! `/connz`, `/tagz` and the dashboard. Any listener adds to it the same way: a listener for
//! another protocol (MQTT, say) calls [`Connections::register`] with a [`Registration`] once
//! it admits a client, counts through the returned [`Registered`], and drops it when the
//! connection ends.
//!
//! ```text
//!  listener admits a client ──register(Registration)──▶ Connections { id → Entry }
//!  reader/writer count frames ──Registered::count_in/out──▶ Entry's atomics
//!  /connz, /tagz read a snapshot ◀──────────────────────── Connections::snapshot
//!  connection ends: Registered dropped ───────────────────▶ removed
//! ```
//!
//! Counting is two relaxed atomic adds on the connection's own entry; the registry's lock is
//! taken only to add, remove or snapshot an entry, and to note a tag a connection publishes
//! for the first time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// What a connection does, as `/connz` shows it (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Writes data, never receives.
    Source,
    /// Observes tags and may write: shown as `function` once it wrote a frame, as `sink`
    /// while it has written none (YoMo has no sink type: a sink is a function that never
    /// writes).
    Function,
    /// A zipper of a mesh forwarding its local clients' frames here.
    UpstreamZipper,
    /// An MQTT client of the `[mqtt]` listener (publishes and subscribes by topic; its
    /// internal links into the routing table are listed too, as `memory` connections).
    Mqtt,
}

impl Kind {
    /// The kind of a YoMo client type.
    pub fn of(client_type: y3_transport::frame::ClientType) -> Kind {
        use y3_transport::frame::ClientType;
        match client_type {
            ClientType::StreamFunction => Kind::Function,
            ClientType::UpstreamZipper => Kind::UpstreamZipper,
            ClientType::Source | ClientType::Other(_) => Kind::Source,
        }
    }

    /// The name shown, given whether the connection has written any frame.
    pub fn name(self, wrote: bool) -> &'static str {
        match self {
            Kind::Source => "source",
            Kind::Function if wrote => "function",
            Kind::Function => "sink",
            Kind::UpstreamZipper => "upstream_zipper",
            Kind::Mqtt => "mqtt",
        }
    }
}

/// What a listener knows of a connection when it admits it.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The router's session id (unique in the process).
    pub id: u64,
    /// The client's name (client-chosen; shown as sent).
    pub name: String,
    /// The client's id (client-chosen).
    pub client_id: String,
    /// What it does.
    pub kind: Kind,
    /// The protocol it speaks: `yomo` (a YoMo client), `y3` (a y3 client), `mqtt`, ...
    pub protocol: &'static str,
    /// The transport: `tcp`, `tls`, `quic`, `memory`, ...
    pub transport: &'static str,
    /// The remote address, when there is one.
    pub remote: Option<SocketAddr>,
    /// The tags it observes (empty for a source).
    pub observed: Vec<u32>,
    /// The content filters it receives through, by tag (its own and attached ones).
    pub filters: Vec<(u32, String)>,
}

/// A probe of a connection's queue, read at each snapshot.
pub type QueueProbe = Box<dyn Fn() -> QueueState + Send + Sync>;

/// A probe of an MQTT connection's session, read at each snapshot.
pub type MqttProbe = Box<dyn Fn() -> MqttState + Send + Sync>;

/// An MQTT connection's session at one moment (`/connz`'s `mqtt` object).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MqttState {
    /// `3.1.1` or `5`.
    pub version: &'static str,
    /// Its MQTT user name, if it gave one.
    pub username: Option<String>,
    /// Its topic filters and their granted QoS.
    pub subscriptions: Vec<(String, u8)>,
    /// QoS 1 messages sent to it and not yet acknowledged.
    pub inflight: u64,
    /// Its QoS 1 publishes the router has not answered yet.
    pub awaiting_puback: u64,
}

/// A connection's queue at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueState {
    /// Data frames queued for it.
    pub frames: u64,
    /// Bytes queued for it.
    pub bytes: u64,
    /// Frames meant for it that were dropped (any reason), since it connected.
    pub dropped: u64,
}

/// One connection's entry.
struct Entry {
    info: Registration,
    since: SystemTime,
    frames_in: AtomicU64,
    bytes_in: AtomicU64,
    frames_out: AtomicU64,
    bytes_out: AtomicU64,
    /// Tags it published, first [`MAX_PUBLISHED_TAGS`] distinct ones.
    published: Mutex<BTreeSet<u32>>,
    queue: Mutex<Option<QueueProbe>>,
    mqtt: Mutex<Option<MqttProbe>>,
}

/// Most distinct published tags remembered per connection (clients choose tags).
pub const MAX_PUBLISHED_TAGS: usize = 256;

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("info", &self.info).finish()
    }
}

/// Every connection admitted and not yet closed, by session id; plus how many were ever
/// registered and how many slow consumers were evicted.
#[derive(Debug, Default)]
pub struct Connections {
    entries: Mutex<BTreeMap<u64, Arc<Entry>>>,
    total: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a single insert or remove: a poisoned lock still holds a
    // consistent map.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connections {
    /// Adds an admitted connection; it stays listed until the returned handle is dropped.
    pub fn register(self: &Arc<Self>, info: Registration) -> Registered {
        let id = info.id;
        let entry = Arc::new(Entry {
            info,
            since: SystemTime::now(),
            frames_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            frames_out: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            published: Mutex::new(BTreeSet::new()),
            queue: Mutex::new(None),
            mqtt: Mutex::new(None),
        });
        lock(&self.entries).insert(id, entry.clone());
        self.total.fetch_add(1, Ordering::Relaxed);
        Registered {
            registry: self.clone(),
            counters: ConnCounters(entry),
        }
    }

    /// Connections registered since the router started (closed ones included).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Connections listed now.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// Whether none is listed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of every listed connection, by id.
    pub fn snapshot(&self) -> Vec<ConnectionSnapshot> {
        let entries: Vec<Arc<Entry>> = lock(&self.entries).values().cloned().collect();
        entries.iter().map(|e| e.snapshot()).collect()
    }
}

impl Entry {
    fn snapshot(&self) -> ConnectionSnapshot {
        let queue = lock(&self.queue).as_ref().map(|probe| probe());
        let frames_in = self.frames_in.load(Ordering::Relaxed);
        ConnectionSnapshot {
            id: self.info.id,
            name: self.info.name.clone(),
            client_id: self.info.client_id.clone(),
            kind: self.info.kind.name(frames_in > 0),
            protocol: self.info.protocol,
            transport: self.info.transport,
            remote: self.info.remote,
            observed: self.info.observed.clone(),
            filters: self.info.filters.clone(),
            published: lock(&self.published).iter().copied().collect(),
            since: self.since,
            frames_in,
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            frames_out: self.frames_out.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            queue: queue.unwrap_or_default(),
            mqtt: lock(&self.mqtt).as_ref().map(|probe| probe()),
        }
    }
}

/// A listed connection at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSnapshot {
    /// Session id.
    pub id: u64,
    /// Client name.
    pub name: String,
    /// Client id.
    pub client_id: String,
    /// `source`, `function`, `sink`, `upstream_zipper` or `mqtt` ([`Kind::name`]).
    pub kind: &'static str,
    /// Protocol ([`Registration::protocol`]).
    pub protocol: &'static str,
    /// Transport ([`Registration::transport`]).
    pub transport: &'static str,
    /// Remote address.
    pub remote: Option<SocketAddr>,
    /// Tags it observes.
    pub observed: Vec<u32>,
    /// Its content filters, by tag.
    pub filters: Vec<(u32, String)>,
    /// Tags it published (the first [`MAX_PUBLISHED_TAGS`]).
    pub published: Vec<u32>,
    /// When it was admitted.
    pub since: SystemTime,
    /// Data frames read from it.
    pub frames_in: u64,
    /// Payload bytes read from it.
    pub bytes_in: u64,
    /// Data frames written to it.
    pub frames_out: u64,
    /// Payload bytes written to it.
    pub bytes_out: u64,
    /// Its queue now (zeros without a queue).
    pub queue: QueueState,
    /// An MQTT connection's session (kind `mqtt` only).
    pub mqtt: Option<MqttState>,
}

/// A registered connection; dropping it removes the entry. Count its frames through
/// [`counters`](Registered::counters) (shared handles for the reader and the writer).
#[derive(Debug)]
pub struct Registered {
    registry: Arc<Connections>,
    counters: ConnCounters,
}

impl Registered {
    /// The connection's counters (clone freely; counting after the entry is removed is
    /// harmless).
    pub fn counters(&self) -> ConnCounters {
        self.counters.clone()
    }

    /// Sets how `/connz` reads the connection's queue.
    pub fn set_queue(&self, probe: QueueProbe) {
        *lock(&self.counters.0.queue) = Some(probe);
    }

    /// Sets how `/connz` reads an MQTT connection's session.
    pub fn set_mqtt(&self, probe: MqttProbe) {
        *lock(&self.counters.0.mqtt) = Some(probe);
    }
}

impl std::ops::Drop for Registered {
    fn drop(&mut self) {
        let id = self.counters.0.info.id;
        let mut entries = lock(&self.registry.entries);
        if entries
            .get(&id)
            .is_some_and(|e| Arc::ptr_eq(e, &self.counters.0))
        {
            entries.remove(&id);
        }
    }
}

/// One connection's counters (a shared handle).
#[derive(Debug, Clone)]
pub struct ConnCounters(Arc<Entry>);

impl ConnCounters {
    /// Counts a data frame of `bytes` payload bytes read from the client.
    pub fn count_in(&self, bytes: usize) {
        self.0.frames_in.fetch_add(1, Ordering::Relaxed);
        self.0.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Notes that the client published on `tag` (call once per new tag: the reader's tag
    /// cache does).
    pub fn published(&self, tag: u32) {
        let mut published = lock(&self.0.published);
        if published.len() < MAX_PUBLISHED_TAGS {
            published.insert(tag);
        }
    }

    /// Counts `frames` data frames of `bytes` payload bytes written to the client.
    pub fn count_out(&self, frames: u64, bytes: u64) {
        self.0.frames_out.fetch_add(frames, Ordering::Relaxed);
        self.0.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(id: u64, kind: Kind) -> Registration {
        Registration {
            id,
            name: format!("c{id}"),
            client_id: String::new(),
            kind,
            protocol: "mqtt",
            transport: "tcp",
            remote: None,
            observed: vec![0x10],
            filters: Vec::new(),
        }
    }

    #[test]
    fn listed_while_registered_and_counted() {
        let registry = Arc::new(Connections::default());
        let a = registry.register(registration(1, Kind::Function));
        let b = registry.register(registration(2, Kind::Source));
        b.counters().count_in(10);
        b.counters().published(0x11);
        a.counters().count_out(3, 30);
        a.set_queue(Box::new(|| QueueState {
            frames: 4,
            bytes: 40,
            dropped: 1,
        }));
        let snap = registry.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(
            (snap[0].kind, snap[0].frames_out, snap[0].bytes_out),
            ("sink", 3, 30)
        );
        assert_eq!(snap[0].queue.dropped, 1);
        assert_eq!(
            (snap[1].kind, snap[1].frames_in, snap[1].bytes_in),
            ("source", 1, 10)
        );
        assert_eq!(snap[1].published, vec![0x11]);
        // A function that wrote is shown as one.
        a.counters().count_in(1);
        assert_eq!(registry.snapshot()[0].kind, "function");
        let counters = b.counters();
        drop(b);
        counters.count_in(1); // harmless after removal
        assert_eq!(registry.len(), 1);
        assert_eq!(registry.total(), 2);
        drop(a);
        assert!(registry.is_empty());
    }

    #[test]
    fn published_tags_are_bounded() {
        let registry = Arc::new(Connections::default());
        let a = registry.register(registration(1, Kind::Source));
        for tag in 0..(MAX_PUBLISHED_TAGS as u32 + 100) {
            a.counters().published(tag);
        }
        assert_eq!(registry.snapshot()[0].published.len(), MAX_PUBLISHED_TAGS);
    }
}
