//! The mesh: every data frame of a local client is also forwarded to each downstream zipper
//! of `[mesh]`, as YoMo's `mesh` configuration does (`spec/frames.md`, "Routing", item 4).
//!
//! ```text
//!  local client ─data─▶ routing::route ─┬─▶ outboxes of the observing stream functions
//!                                       └─▶ one outbox per downstream (drop-oldest, bounded)
//!                                             │ one task per downstream (this file)
//!                                             ▼
//!          dial as UpstreamZipper 0x5e (name = [mesh].name) ─▶ batch ─▶ flush ─▶ downstream
//!          lost or refused: wait 100 ms, doubling to 2 s, and dial again, until shutdown
//! ```
//!
//! A frame that arrived from an upstream zipper is delivered locally only (`routing.rs`),
//! so two routers that list each other as downstream do not loop.
//!
//! A downstream never holds local routing back: its outbox drops the oldest frames when full
//! (`queue.capacity`, `queue.max_bytes`) whatever `queue.policy` says, and keeps at most that
//! much while the link is down, to deliver once it is back. Every frame lost on the way is
//! counted under the drop reason `mesh` and in `y3_router_mesh_dropped_total{downstream}`:
//! pushed out of a full queue, in a batch being written when the link broke (some of it
//! may have arrived), or still queued when the router stopped with the link down.
//!
//! QUIC links do not verify the downstream's certificate (`Trust::Insecure`): YoMo's zippers
//! serve a self-signed certificate no client can verify (YoMo's own mesh links skip the
//! check too). The link is encrypted; the downstream is not authenticated. A router with a
//! certificate (`tls.cert`) presents it on its links as its client certificate, as YoMo's
//! zipper presents `YOMO_TLS_CERT_FILE`, so that a downstream requiring client certificates
//! (mutual TLS) admits it when the certificate is issued for client authentication too.
//!
//! Shutdown: while the router drains, a connected link goes on writing (the drain waits for
//! every queue, these included, to empty); a link that is down gives up its queue at once,
//! counted, so that an unreachable downstream does not hold the shutdown for its whole
//! timeout. Once connections close, the link writes what is left, closes its side and
//! waits a moment for the downstream to close.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_util::sync::CancellationToken;
use y3_transport::frame::Frame;
use y3_transport::sdk::{Backoff, ClientOptions, Transport, Upstream};
use y3_transport::tls::{Identity, Trust, DEV_SERVER_NAME};
use y3_transport::{Connection, FrameError, FrameWriter, Goaway, TransportError};

use crate::config::{DownstreamConfig, MeshTransport, RouterConfig};
use crate::error::RouterError;
use crate::metrics::{DownstreamMetrics, Drop, Metrics};
use crate::outbox::{Outbox, Queued};
use crate::queue::Policy;
use crate::tcp_acked::StoredAt;

/// Most frames written per flush.
const MAX_BATCH: usize = 256;

/// Delay between connection attempts: 100 ms after the first failure, doubling to 2 s.
/// `attempts` is unused: a mesh link tries forever.
const BACKOFF: Backoff = Backoff {
    initial: Duration::from_millis(100),
    max: Duration::from_secs(2),
    attempts: u32::MAX,
};

/// Bound on reaching a downstream (the QUIC or TCP connection; the handshake's answer has
/// `limits.handshake_timeout_ms` more). QUIC resends lost first packets after about 1 s,
/// then 2 s later: a dial started while the downstream was down still reaches it when it
/// comes up. A dial given up halfway would leave the downstream a half-open connection
/// until its idle timeout.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a closing link waits for its last frames to be taken and the downstream to
/// close.
const LINGER: Duration = Duration::from_secs(1);

/// One downstream zipper: where it is, how to dial it, and the outbox routing fills.
#[derive(Debug)]
pub(crate) struct Link {
    /// `[[mesh.downstream]].name`.
    name: String,
    host: String,
    port: u16,
    /// Everything but the address, resolved at every attempt.
    options: ClientOptions,
    outbox: Arc<Outbox>,
    counters: DownstreamMetrics,
}

impl Link {
    /// The links of `config`'s mesh, each with its outbox (for `routing::Routes::new`).
    ///
    /// # Errors
    /// [`RouterError::Config`] for an invalid downstream address.
    pub fn from_config(
        config: &RouterConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<Vec<Link>, RouterError> {
        config
            .mesh
            .downstream
            .iter()
            .map(|downstream| Link::new(config, downstream, metrics))
            .collect()
    }

    fn new(
        config: &RouterConfig,
        downstream: &DownstreamConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<Link, RouterError> {
        let (host, port) = downstream.host_port()?;
        let transport = match downstream.transport {
            MeshTransport::Quic => Transport::Quic,
            MeshTransport::Tcp => Transport::Tcp,
        };
        // The certificate is not verified (see the module docs); the name only goes into
        // the TLS client hello.
        let server_name = if host.parse::<IpAddr>().is_ok() {
            DEV_SERVER_NAME.to_owned()
        } else {
            host.to_owned()
        };
        let mut options = ClientOptions::new(SocketAddr::from(([0, 0, 0, 0], port)))
            .transport(transport)
            .trust(Trust::Insecure)
            .name(config.mesh.name.clone())
            .credential(downstream.credential.clone());
        if !config.tls.cert.as_os_str().is_empty() {
            options = options
                .client_identity(Identity::from_pem_files(&config.tls.cert, &config.tls.key)?);
        }
        options.server_name = server_name;
        options.max_frame_len = config.limits.max_frame_len;
        options.handshake_timeout = config.handshake_timeout();
        let counters = metrics.downstream(&downstream.name);
        let mut queue = config.queue.clone();
        queue.policy = Policy::DropOldest;
        let outbox = Arc::new(Outbox::downstream(
            &queue,
            metrics.clone(),
            counters.dropped.clone(),
        ));
        Ok(Link {
            name: downstream.name.clone(),
            host: host.to_owned(),
            port,
            options,
            outbox,
            counters,
        })
    }

    /// The outbox routing pushes this downstream's frames into.
    pub fn outbox(&self) -> Arc<Outbox> {
        self.outbox.clone()
    }

    /// Resolves the address (a host name may move) and dials once, bounded (a QUIC dial to
    /// a dead port would otherwise wait for its idle timeout).
    async fn connect(&self, upstream: &mut Upstream) -> Result<Connection, TransportError> {
        let mut options = self.options.clone();
        options.addr = match self.host.parse::<IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, self.port),
            Err(_) => tokio::net::lookup_host((self.host.as_str(), self.port))
                .await?
                .next()
                .ok_or(TransportError::Config(
                    "the downstream's host name has no address",
                ))?,
        };
        let bound = DIAL_TIMEOUT + self.options.handshake_timeout;
        tokio::time::timeout(bound, upstream.connect(&options))
            .await
            .map_err(|_| TransportError::Timeout {
                what: "the downstream zipper",
            })?
    }

    /// Writes one batch: feed every frame, flush once. A batch that fails is counted as
    /// dropped.
    async fn write(
        &self,
        writer: &mut FrameWriter,
        batch: &mut Vec<Queued>,
        stored_at: &mut StoredAt,
    ) -> Result<(), FrameError> {
        let n = batch.len() as u64;
        // Durable sources' frames wait to be stored (tcp_acked.rs).
        let mut told = Vec::new();
        let result = async {
            for queued in batch.drain(..) {
                told.extend(queued.written);
                y3_transport::feed_ref(writer, &queued.frame).await?;
            }
            writer.flush().await
        }
        .await;
        batch.clear();
        match &result {
            Ok(()) => {
                stored_at.flushed(&mut told);
                self.counters.frames.inc_by(n);
                self.outbox.count_forwarded(n);
            }
            Err(_) => self.outbox.count_drops(Drop::Mesh, n),
        }
        result
    }

    /// Serves one connection until it ends (`Lost`) or the router closes (`Finished`).
    async fn serve(&self, conn: Connection, closing: &CancellationToken) -> Served {
        let Connection {
            mut reader,
            mut writer,
            guard,
            acked,
            ..
        } = conn;
        let mut stored_at = StoredAt::new(acked);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        let mut finishing = false;
        let closed = closing.cancelled();
        tokio::pin!(closed);
        let served = loop {
            tokio::select! {
                biased;
                frame = reader.next() => match frame {
                    // A y3 downstream shutting down: it waits for this side to stop.
                    Some(Ok(Frame::Goaway(goaway) | Frame::Rejected(goaway))) => {
                        break Served::GoingAway(goaway);
                    }
                    // Nothing else is sent to an upstream zipper.
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break Served::Lost(TransportError::from(e).to_string()),
                    None => break Served::Lost("closed by the downstream".into()),
                },
                _ = &mut closed, if !finishing => {
                    // Deliver what is queued, then stop.
                    finishing = true;
                    self.outbox.finish(None);
                }
                more = self.outbox.pop_batch(&mut batch, MAX_BATCH) => {
                    if !more {
                        break Served::Finished;
                    }
                    if let Err(e) = self.write(&mut writer, &mut batch, &mut stored_at).await {
                        break Served::Lost(TransportError::from(e).to_string());
                    }
                }
            }
        };
        if let Served::Lost(_) = served {
            guard.close();
        } else {
            // Close our side so the downstream reads to its end (a y3 downstream that said
            // goaway waits for exactly that), then give it a moment to close.
            let _ = tokio::time::timeout(LINGER, writer.close()).await;
            guard.linger(LINGER, None).await;
        }
        served
    }
}

/// How a connection ended.
enum Served {
    /// The downstream said goaway (a y3 router shutting down): dial again.
    GoingAway(Goaway),
    /// The connection broke, for this reason: dial again.
    Lost(String),
    /// The router is closing and everything queued was written.
    Finished,
}

/// Keeps one downstream link up until the router closes: dial, write every frame routing
/// queues for it, dial again when the link is lost. `draining` and `closing` are the
/// router's shutdown phases (see the module docs).
pub(crate) async fn run(link: Link, draining: CancellationToken, closing: CancellationToken) {
    let mut upstream = Upstream::new();
    let mut failures = 0u32;
    loop {
        if draining.is_cancelled() {
            // Down while the router stops: what is queued cannot be delivered.
            link.outbox.abort(None, Drop::Mesh);
            return;
        }
        let attempt = tokio::select! {
            biased;
            _ = draining.cancelled() => continue,
            attempt = link.connect(&mut upstream) => attempt,
        };
        let conn = match attempt {
            Ok(conn) => conn,
            Err(e) => {
                let delay = BACKOFF.delay(failures);
                if failures == 0 {
                    tracing::warn!(
                        downstream = %link.name,
                        host = %link.host,
                        port = link.port,
                        error = %e,
                        "cannot reach the downstream zipper; retrying until it is back"
                    );
                } else {
                    tracing::debug!(downstream = %link.name, error = %e, ?delay, "mesh dial failed");
                }
                failures = failures.saturating_add(1);
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = draining.cancelled() => {}
                }
                continue;
            }
        };
        failures = 0;
        tracing::info!(
            downstream = %link.name,
            addr = ?conn.peer,
            transport = conn.transport.name(),
            id = %upstream.id(),
            "mesh link up"
        );
        link.counters.connects.inc();
        link.counters.connected.set(1);
        let served = link.serve(conn, &closing).await;
        link.counters.connected.set(0);
        match served {
            Served::Finished => return,
            Served::GoingAway(goaway) => {
                tracing::info!(
                    downstream = %link.name,
                    code = goaway.code.kind(),
                    reason = %goaway.reason,
                    "the downstream zipper said goaway; dialing again"
                );
                // A short pause: a downstream that just said goaway is restarting.
                tokio::select! {
                    _ = tokio::time::sleep(BACKOFF.initial) => {}
                    _ = draining.cancelled() => {}
                }
            }
            Served::Lost(error) => {
                tracing::warn!(downstream = %link.name, %error, "mesh link lost; dialing again");
                // A short pause, so that a link lost right after every dial does not spin.
                tokio::select! {
                    _ = tokio::time::sleep(BACKOFF.initial) => {}
                    _ = draining.cancelled() => {}
                }
            }
        }
    }
}
