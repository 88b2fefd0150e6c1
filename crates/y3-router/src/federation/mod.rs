//! Routers federated over NATS (`spec/federation.md`, `docs/federation.md`).
//!
//! ```text
//!  local frame ─▶ routing::route ─┬─▶ local outboxes
//!                                 └─▶ Federation::offer ─▶ bounded queues ─▶ publisher tasks
//!                                       (tag federates, and someone         │ core NATS, or
//!                                        observes it elsewhere or durable)  ▼ JetStream (durable)
//!  NATS <prefix>.tag.<tag> ─▶ subscription task (while a local function observes the tag)
//!                              skip own origin, count sequence gaps ─▶ routing::route(Federation)
//!  JetStream durable consumer per (router, function name, tag) ─▶ that function's sessions,
//!                              de-duplicated by <tag>:<yomo-tid>:<content>, acknowledged once queued
//!  NATS <prefix>.interest.<router> ◀─▶ every router's observed tags (who wants what)
//!  NATS <prefix>.name.<router>     ◀─▶ the claim of the router's name, refused to a second
//!                                      router that starts with it (`claim.rs`)
//! ```
//!
//! A frame that came from NATS is routed locally only: it is never published again, so
//! frames do not loop between routers; a stream function's output is a new local frame (its
//! hops, carried in the headers, still bound function loops across routers).
//!
//! A full publish queue is the federation's slow subscriber, and the `[queue]` policy
//! decides as it does for local ones. Under `block`, the client whose frame does not fit is
//! held back (that client alone) while the publisher makes progress: NATS connected and
//! taking frames; a hold that sees no progress for `block_timeout_ms` drops the frame
//! (counted as `queue_full`) and marks the publisher stalled, and until it takes a frame
//! again every frame that does not fit is dropped at once. Under `drop_oldest`, and whenever
//! NATS is not connected, a frame that does not fit is dropped and counted at once: NATS
//! never holds local routing back. A durable frame of a client that wants stored
//! acknowledgements always waits for room (that client keeps its frames until stored).

mod claim;
mod link;
mod local;
mod metrics;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::Data;

pub use crate::config::federation::{FederationConfig, StreamConfig};
pub use metrics::{FederationMetrics, Lost};

use crate::error::RouterError;
use crate::table::SessionId;

pub(crate) use link::start;
pub(crate) use local::{Local, Receipt};

/// A frame for the publisher, and its acknowledgement when a client waits for it.
#[derive(Debug)]
struct Queued {
    data: Data,
    ticket: Option<Box<dyn Receipt>>,
}

/// The other routers' interest, as last heard.
#[derive(Debug, Default)]
struct Remote {
    /// Tags observed at other routers.
    tags: HashSet<u32>,
    /// Those of them observed by a router that does not read batches.
    unbatched: HashSet<u32>,
    /// Those of them observed by a router that does not read packed messages.
    unpacked: HashSet<u32>,
    /// Those of them observed by a router that does not read marks.
    unmarked: HashSet<u32>,
}

/// A local stream function's interest.
#[derive(Debug, Clone)]
struct Observer {
    name: Arc<str>,
    tags: Vec<u32>,
}

/// The federation's state shared with routing and connections.
#[derive(Debug)]
pub(crate) struct Federation {
    config: FederationConfig,
    /// This router's federation name (`Y3-Origin`).
    name: Arc<str>,
    /// This process's start, ms since the Unix epoch (`Y3-Epoch`).
    epoch: u64,
    metrics: FederationMetrics,
    /// To the publishers: plain tags (core NATS) and durable ones (JetStream), apart, so
    /// that JetStream catching up after a failure does not hold plain frames back.
    queues: [mpsc::Sender<Queued>; 2],
    queued: Mutex<Vec<mpsc::Receiver<Queued>>>,
    /// How long a client may be held back by a full publish queue that makes no progress
    /// (`[queue] block_timeout_ms` under the block policy); `None`: never held.
    hold: Option<Duration>,
    /// Set when a hold timed out; cleared when the publisher takes frames again.
    stalled: AtomicBool,
    /// Local stream functions by session.
    local: Mutex<HashMap<SessionId, Observer>>,
    /// What other routers observe (what is worth publishing on core NATS, and how).
    remote: RwLock<Arc<Remote>>,
    /// Signalled when `local` changes.
    changed: Notify,
    /// Cancelled when the router closes: the publisher empties its queue and stops.
    finishing: CancellationToken,
    publishers: Mutex<Vec<JoinHandle<()>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Federation {
    /// The federation of `config`, or `None` when it is off. `hold` is how long a client may
    /// wait for room in a publish queue that makes no progress (`None`: a frame that does
    /// not fit is dropped at once).
    ///
    /// # Errors
    /// [`RouterError::Config`] for invalid values.
    pub fn new(
        config: &FederationConfig,
        mesh_name: &str,
        hold: Option<Duration>,
        metrics: FederationMetrics,
    ) -> Result<Option<Arc<Federation>>, RouterError> {
        config.validate()?;
        if !config.enabled() {
            return Ok(None);
        }
        let name = if config.name.is_empty() {
            mesh_name
        } else {
            &config.name
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(RouterError::Config {
                field: "federation.name",
                problem: "empty, and mesh.name is not a subject token (letters, digits, '-', '_')",
            });
        }
        if config.name.is_empty() {
            // Routers that share a name skip each other's frames as their own.
            tracing::warn!(
                name,
                "federation.name is not set: using mesh.name; every router needs its own name"
            );
        }
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (plain, plain_rx) = mpsc::channel(config.publish_queue);
        let (durable, durable_rx) = mpsc::channel(config.publish_queue);
        Ok(Some(Arc::new(Federation {
            config: config.clone(),
            name: name.into(),
            epoch,
            metrics,
            queues: [plain, durable],
            queued: Mutex::new(vec![plain_rx, durable_rx]),
            hold,
            stalled: AtomicBool::new(false),
            local: Mutex::new(HashMap::new()),
            remote: RwLock::new(Arc::new(Remote::default())),
            changed: Notify::new(),
            finishing: CancellationToken::new(),
            publishers: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
        })))
    }

    /// Offers a local frame to the federation. Returns whether the frame was meant for it
    /// (queued, or dropped and counted as [`Lost::QueueFull`]). For a durable tag it takes
    /// `ticket`, done by the publisher once JetStream stored the frame; otherwise the
    /// ticket stays with the caller (routing settles it).
    ///
    /// Waits only for room in a full queue: under the block policy while the publisher makes
    /// progress (see the module's notes), and always for a durable frame of a client that
    /// wants acknowledgements (its frames must be stored, and it keeps them until then).
    /// Only the offering client waits; everyone else's frames go on being routed.
    pub async fn offer<R: Receipt>(&self, data: &Data, ticket: &mut Option<R>) -> bool {
        let tag = data.tag;
        let durable = self.config.is_durable(tag);
        let wanted = self.config.federates(tag)
            && (durable
                || self
                    .remote
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .tags
                    .contains(&tag));
        let ticket = if wanted && durable {
            ticket.take().map(|t| Box::new(t) as Box<dyn Receipt>)
        } else {
            None
        };
        if !wanted {
            return false;
        }
        let item = Queued {
            data: data.clone(),
            ticket,
        };
        let queue = &self.queues[usize::from(durable)];
        let queued = if item.ticket.is_some() {
            queue.send(item).await.is_ok()
        } else {
            match queue.try_send(item) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(item)) => self.hold_for_room(queue, item).await,
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        };
        if !queued {
            self.metrics.lost(Lost::QueueFull, 1);
        }
        true
    }

    /// Waits for room for `item` in the full `queue` while the block policy allows it: NATS
    /// connected, the publisher not stalled, and a frame taken within the hold time.
    async fn hold_for_room(&self, queue: &mpsc::Sender<Queued>, item: Queued) -> bool {
        let Some(hold) = self.hold else {
            return false;
        };
        if self.metrics.connected.get() != 1 || self.stalled.load(Ordering::Relaxed) {
            return false;
        }
        self.metrics.held.inc();
        match tokio::time::timeout(hold, queue.send(item)).await {
            Ok(sent) => sent.is_ok(),
            Err(_) => {
                if !self.stalled.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        router = %self.name,
                        "federation: publisher took no frame in {hold:?}; dropping what does \
                         not fit until it does"
                    );
                }
                false
            }
        }
    }

    /// The publisher took frames from its queue: clients may be held back again.
    fn progressed(&self) {
        if self.stalled.load(Ordering::Relaxed) {
            self.stalled.store(false, Ordering::Relaxed);
        }
    }

    /// A local stream function `name` (session `session`) observes `tags`.
    pub fn observe(&self, session: SessionId, name: &str, tags: &[u32]) {
        let tags: Vec<u32> = tags
            .iter()
            .copied()
            .filter(|&t| self.config.federates(t))
            .collect();
        if tags.is_empty() {
            return;
        }
        let observer = Observer {
            name: name.into(),
            tags,
        };
        lock(&self.local).insert(session, observer);
        self.changed.notify_one();
    }

    /// Session `session` left.
    pub fn leave(&self, session: SessionId) {
        if lock(&self.local).remove(&session).is_some() {
            self.changed.notify_one();
        }
    }

    /// The local sessions of function `name`.
    fn sessions_of(&self, name: &str) -> HashSet<SessionId> {
        lock(&self.local)
            .iter()
            .filter(|(_, o)| &*o.name == name)
            .map(|(&s, _)| s)
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
