//! State every task of the router shares: configuration, metrics, the routing state, the
//! counters and tokens of the shutdown. Connection tasks (`connection.rs`) and the server
//! (`server.rs`) both use it; it uses neither, so the router's files import each other
//! without cycles.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use y3_transport::frame::{ClientType, GoawayCode};

use crate::config::RouterConfig;
use crate::metrics::Metrics;
use crate::penalty::Penalties;
use crate::routing::Routes;
use crate::session::Admission;
use crate::table::SessionId;
use crate::throttle::{Full, Tarpit};

/// State shared by every connection task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: RouterConfig,
    /// Who may connect and what they may do: swapped whole by a reload (`reload.rs`); a
    /// connection keeps the one it was admitted under.
    pub admission: RwLock<Arc<Admission>>,
    /// The configuration last loaded (at start, or by a reload): what the next reload is
    /// compared with.
    pub loaded: Mutex<RouterConfig>,
    pub metrics: Arc<Metrics>,
    pub routes: Routes,
    pub next_session: AtomicU64,
    /// Connection tasks alive (admitted or not).
    pub open: AtomicUsize,
    /// Admitted sources alive.
    pub sources: AtomicUsize,
    /// Frames inside `route` right now.
    pub routing: AtomicUsize,
    /// When the drain started and must end.
    pub drain_deadline: RwLock<Option<Instant>>,
    pub stop_accepting: CancellationToken,
    pub drain_sources: CancellationToken,
    pub close_all: CancellationToken,
    /// Mirror `drain_sources` and `close_all` for cheap checks between frames.
    pub draining: AtomicBool,
    pub closing: AtomicBool,
    pub kill: CancellationToken,
    pub tracker: TaskTracker,
    /// Wrong credentials per address, and the refusals being delayed (`throttle.rs`).
    pub tarpit: Mutex<Tarpit>,
    /// Slow consumers held off after their eviction (`penalty.rs`).
    pub penalties: Mutex<Penalties>,
    /// `[federation]`, when on.
    pub federation: Option<Arc<crate::federation::Federation>>,
    /// Every admitted connection, for `/connz` and `/tagz` (`status/registry.rs`).
    pub connections: Arc<crate::status::Connections>,
}

/// A handshake's slot in the tarpit (`throttle.rs`), given back when dropped.
pub(crate) struct TarpitSlot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl std::ops::Drop for TarpitSlot {
    fn drop(&mut self) {
        let mut tarpit = self.shared.tarpit.lock().unwrap_or_else(|e| e.into_inner());
        tarpit.leave(self.ip);
    }
}

/// Decrements a counter when dropped.
pub(crate) struct Live {
    pub shared: Arc<Shared>,
    pub client_type: ClientType,
    /// Whether the shutdown waits for this client to stop sending (a y3 source).
    pub drained: bool,
}

impl std::ops::Drop for Live {
    fn drop(&mut self) {
        self.shared.metrics.connection(self.client_type.name(), -1);
        if self.drained {
            self.shared.sources.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

pub(crate) struct Open(pub Arc<Shared>);

impl std::ops::Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The first session id of this router process: its start time in seconds shifted up by 20
/// bits, so ids do not repeat across restarts (a client can tell it reached a new router)
/// while one process hands out up to 2^20 ids per second of uptime before it could reach a
/// later start's range. Ids stay below 2^53, exact in JSON numbers.
pub(crate) fn first_session_id() -> SessionId {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ((secs & ((1 << 33) - 1)) << 20) | 1
}

impl Shared {
    pub fn next_session(&self) -> SessionId {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    pub fn over_connection_limit(&self) -> bool {
        self.open.load(Ordering::Relaxed) > self.config.limits.max_connections
    }

    /// Counts an admitted session until the guard drops.
    /// Counts an admitted client; `drained`: the shutdown tells it to stop sending and
    /// waits for its end (y3 sources, which understand goaway frames).
    pub fn admitted(self: &Arc<Self>, client_type: ClientType, drained: bool) -> Live {
        self.metrics.connection(client_type.name(), 1);
        if drained {
            self.sources.fetch_add(1, Ordering::Relaxed);
        }
        Live {
            shared: self.clone(),
            client_type,
            drained,
        }
    }

    /// Takes a tarpit slot of `peer`'s address for checking its handshake (none without an
    /// address, or with the tarpit off); hold it until the refusal is sent.
    ///
    /// # Errors
    /// [`Full`] while every slot of the address is held: the handshake must not be checked.
    pub fn tarpit_enter(
        self: &Arc<Self>,
        peer: Option<SocketAddr>,
    ) -> Result<Option<TarpitSlot>, Full> {
        let Some(peer) = peer else { return Ok(None) };
        let mut tarpit = self.tarpit.lock().unwrap_or_else(|e| e.into_inner());
        if tarpit.is_off() {
            return Ok(None);
        }
        tarpit.enter(peer.ip(), Instant::now())?;
        Ok(Some(TarpitSlot {
            shared: self.clone(),
            ip: peer.ip(),
        }))
    }

    /// Counts a refused handshake of `peer` and returns how long its refusal waits. Only a
    /// wrong credential counts and waits: the tarpit is there so that a token cannot be
    /// guessed at connection speed. Garbage, a bad handshake or a forbidden tag is refused
    /// and counted as such at once: on an edge host every local client shares 127.0.0.1.
    pub fn handshake_failed(&self, peer: Option<SocketAddr>, code: GoawayCode) -> Duration {
        let Some(peer) = peer else {
            return Duration::ZERO;
        };
        if code != GoawayCode::Unauthorized {
            return Duration::ZERO;
        }
        let mut tarpit = self.tarpit.lock().unwrap_or_else(|e| e.into_inner());
        tarpit.failed(peer.ip(), Instant::now())
    }

    /// Counts a client evicted as a slow consumer (under its name) and holds it off for
    /// `queue.evicted_backoff_ms` (0: not at all).
    pub fn evicted(&self, peer: Option<SocketAddr>, name: &str) {
        self.metrics.evicted(name);
        let Some(peer) = peer else { return };
        if self.config.queue.evicted_backoff_ms == 0 {
            return;
        }
        let now = Instant::now();
        let until = now + Duration::from_millis(self.config.queue.evicted_backoff_ms);
        let mut penalties = self.penalties.lock().unwrap_or_else(|e| e.into_inner());
        penalties.hold_off(peer.ip(), name, until, now);
    }

    /// How much longer a client of `name` at `peer` is held off after an eviction.
    pub fn held_off(&self, peer: Option<SocketAddr>, name: &str) -> Option<Duration> {
        let peer = peer?;
        let mut penalties = self.penalties.lock().unwrap_or_else(|e| e.into_inner());
        penalties.remaining(peer.ip(), name, Instant::now())
    }

    pub fn drain_left(&self) -> Duration {
        let deadline = *self
            .drain_deadline
            .read()
            .unwrap_or_else(|e| e.into_inner());
        deadline.map_or(Duration::from_secs(1), |d| {
            d.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100))
        })
    }
}
