//! The thin async server: listeners, one task per connection, routing into outboxes, and a
//! graceful shutdown.
//!
//! ```text
//!  TCP / TLS / QUIC: accept.rs ──▶ connection task (connection.rs)
//!                                      reader: Session decides ──▶ routing::route
//!                                                                   table snapshot (no lock)
//!                                                                   push into each outbox
//!                                      writer: outbox ──batch──▶ socket
//!  mesh links (mesh.rs) ◀── their outboxes, filled by routing::route
//! ```
//!
//! Shutdown ([`RouterHandle::shutdown`]) drains in order: stop accepting; tell y3 sources
//! to stop (goaway `shutting_down`) and read them to their end, close YoMo sources with
//! code 0x01 (they reconnect to the router's successor); wait until no frame has
//! moved for `shutdown.quiet_ms` with every queue empty, so that functions' outputs reach
//! sinks; then give every remaining client its queued frames and a goaway, and close.
//! The whole sequence is bounded by `shutdown.drain_timeout_ms`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use y3_transport::frame::{Goaway, GoawayCode};
use y3_transport::quic::QuicServer;
use y3_transport::tcp::TcpServer;
use y3_transport::tls::{client_cert_refusal, ClientCa, Identity, Trust};
use y3_transport::{Connection, FrameCodec, TransportError};

use crate::accept::accept_loop;
use crate::config::{Listen, RouterConfig};
use crate::connection;
use crate::error::RouterError;
use crate::federation::{self, Federation};
use crate::handoff::Handoff;
use crate::journeys::{self, Journeys};
use crate::mesh;
use crate::metrics::{self, Metrics, Stats};
use crate::penalty::Penalties;
use crate::routing::Routes;
use crate::shared::{first_session_id, Open, Shared};
use crate::status::Status;
use crate::throttle::Tarpit;

impl Shared {
    /// Runs a downstream link of the mesh until the shutdown closes connections (it
    /// writes what is queued first) or kills what is left.
    fn spawn_mesh(self: &Arc<Self>, link: mesh::Link) {
        let (draining, closing, kill) = (
            self.drain_sources.clone(),
            self.close_all.clone(),
            self.kill.clone(),
        );
        self.tracker.spawn(async move {
            tokio::select! {
                _ = mesh::run(link, draining, closing) => {}
                _ = kill.cancelled() => {}
            }
        });
    }

    /// Serves a connection from `peer` once `establish` (its TLS or QUIC handshake) is done.
    pub(crate) fn spawn_connection<F>(self: &Arc<Self>, peer: Option<SocketAddr>, establish: F)
    where
        F: std::future::Future<Output = Result<Connection, TransportError>> + Send + 'static,
    {
        self.spawn_connection_with(peer, establish, None);
    }

    /// [`spawn_connection`](Self::spawn_connection), its data frames handed to `handoff`
    /// rather than written (an in-process recipient, `handoff.rs`).
    pub(crate) fn spawn_connection_with<F>(
        self: &Arc<Self>,
        peer: Option<SocketAddr>,
        establish: F,
        handoff: Option<Handoff>,
    ) where
        F: std::future::Future<Output = Result<Connection, TransportError>> + Send + 'static,
    {
        // Connections still in their TLS or QUIC handshake are not admitted yet; past a
        // hard cap, refuse new ones before spending a task on them.
        let hard_cap = self.config.limits.max_connections.saturating_mul(2).max(64);
        if self.open.load(Ordering::Relaxed) >= hard_cap {
            self.metrics.rejected("too_many_connections");
            return;
        }
        let shared = self.clone();
        self.open.fetch_add(1, Ordering::Relaxed);
        self.tracker.spawn(async move {
            let _open = Open(shared.clone());
            let kill = shared.kill.clone();
            let handshake = shared.config.handshake_timeout();
            let task = async move {
                let conn = match tokio::time::timeout(handshake, establish).await {
                    Ok(Ok(conn)) => conn,
                    Ok(Err(e)) => {
                        if let Some(refusal) = client_cert_refusal(&e) {
                            // Mutual TLS (`tls.client_ca`): refused at the TLS layer.
                            tracing::warn!(?peer, reason = refusal.kind(), error = %e, "client certificate refused");
                            shared.metrics.rejected(refusal.kind());
                            return;
                        }
                        tracing::debug!(?peer, error = %e, "connection setup failed");
                        shared.metrics.protocol_error("transport_setup");
                        return;
                    }
                    Err(_) => {
                        shared.metrics.rejected("handshake_timeout");
                        return;
                    }
                };
                shared.metrics.accepted(conn.transport.name());
                connection::run(shared.clone(), conn, handoff).await;
            };
            tokio::select! {
                _ = task => {}
                _ = kill.cancelled() => {}
            }
        });
    }
}

/// Starts routers.
#[derive(Debug, Clone, Copy)]
pub struct Router;

impl Router {
    /// Binds the configured listeners and starts serving.
    ///
    /// Without a configured certificate a self-signed development certificate is
    /// generated for QUIC (and TLS over TCP), and kept in the state directory for the next
    /// start on the same address (`state.rs`); [`RouterHandle::trust`] pins it for
    /// in-process clients, and `tls.dev_cert_out` writes it for others once every listener
    /// is bound (a router that cannot start never replaces the certificate of one that
    /// runs), mode 0600, never through a symbolic link
    /// ([`Identity::write_certificate_pem`]).
    ///
    /// # Errors
    /// [`RouterError::Config`] for invalid values (a listener beyond loopback without a
    /// token among them), [`RouterError::Secret`] for an unreadable token file,
    /// [`RouterError::Bind`] when a port is taken, certificate errors.
    pub async fn start(config: RouterConfig) -> Result<RouterHandle, RouterError> {
        let listen: Listen = config.validate()?;
        let (token, grants) = config.tokens()?;
        let metrics_token = config.metrics_token()?;
        for warning in config.warnings(&listen) {
            tracing::warn!("{warning}");
        }
        let identity = if config.tls.cert.as_os_str().is_empty() {
            crate::state::dev_identity(&config.state, listen.quic.or(listen.tcp))?
        } else {
            Identity::from_pem_files(&config.tls.cert, &config.tls.key)?
        };
        let client_ca = config.tls.client_ca()?;
        let codec = FrameCodec::new(config.limits.max_frame_len);
        let metrics = Arc::new(Metrics::new());
        metrics.budget.set_limit(config.limits.max_queued_bytes);
        metrics
            .budget
            .set_unauthenticated(config.limits.max_unauthenticated_bytes);
        let mesh = mesh::Link::from_config(&config, &metrics)?;
        // The federation's publish queue follows the local queues' policy.
        let hold = (config.queue.policy == crate::queue::Policy::Block)
            .then(|| std::time::Duration::from_millis(config.queue.block_timeout_ms));
        let federation = Federation::new(
            &config.federation,
            &config.mesh.name,
            hold,
            metrics.federation.clone(),
        )?;
        let shared = new_shared(&config, token, grants, &metrics, &mesh, &federation);
        let mut handle = RouterHandle {
            shared: shared.clone(),
            codec,
            tcp: None,
            quic: None,
            metrics: None,
            mqtt: None,
            mqtt_tls: None,
            mqtt_side: None,
            identity: identity.clone(),
            quic_server: None,
            background: Vec::new(),
        };

        if let Some(addr) = listen.tcp {
            let tls = config.listen.tcp_tls;
            handle
                .listen_tcp(addr, tls, client_ca.as_ref(), codec)
                .await?;
        }
        if let Some(addr) = listen.quic {
            handle.listen_quic(&config, addr, client_ca.as_ref(), codec)?;
        }
        if let Some(addr) = listen.metrics {
            handle
                .serve_status(addr, &config, metrics, metrics_token)
                .await?;
        }
        let (mqtt_plain, mqtt_tls) = (config.mqtt.validate()?, config.mqtt.tls_addr()?);
        if mqtt_plain.is_some() || mqtt_tls.is_some() {
            handle
                .serve_mqtt(mqtt_plain, mqtt_tls, client_ca.as_ref())
                .await?;
        }
        // Only now that every listener is bound: a second router that fails to bind must
        // not replace the certificate the clients of a running one trust.
        if identity.is_self_signed() && !config.tls.dev_cert_out.as_os_str().is_empty() {
            identity
                .write_certificate_pem(&config.tls.dev_cert_out)
                .map_err(|source| RouterError::Write {
                    what: "the dev certificate",
                    source,
                })?;
        }
        if let Some(federation) = &federation {
            federation::start(federation, shared.clone()).await?;
        }
        // Last, once nothing above can fail: a link task must not outlive a failed start.
        let downstreams = mesh.len();
        for link in mesh {
            shared.spawn_mesh(link);
        }
        tracing::info!(
            tcp = ?handle.tcp,
            quic = ?handle.quic,
            metrics = ?handle.metrics,
            policy = config.queue.policy.name(),
            auth = shared.admission().requires_token(),
            tokens = shared.admission().grants.len(),
            cert_sha256 = %y3_transport::tls::fingerprint_hex(&identity.fingerprint()),
            downstreams,
            "router listening"
        );
        Ok(handle)
    }
}

/// The router's shared state, before any listener is bound.
fn new_shared(
    config: &RouterConfig,
    token: String,
    grants: Vec<crate::session::Grant>,
    metrics: &Arc<Metrics>,
    mesh: &[mesh::Link],
    federation: &Option<Arc<Federation>>,
) -> Arc<Shared> {
    let admission = Arc::new(crate::reload::admission(config, token, grants));
    Arc::new(Shared {
        config: config.clone(),
        admission: RwLock::new(admission),
        loaded: Mutex::new(config.clone()),
        metrics: metrics.clone(),
        routes: Routes::new(
            mesh.iter().map(mesh::Link::outbox).collect(),
            Journeys::new(config.limits.max_loop_returns, journeys::WINDOW),
            crate::cycles::Cycles::new(config.limits.max_loop_returns),
        )
        .with_federation(federation.clone()),
        next_session: AtomicU64::new(first_session_id()),
        open: AtomicUsize::new(0),
        sources: AtomicUsize::new(0),
        routing: AtomicUsize::new(0),
        drain_deadline: RwLock::new(None),
        stop_accepting: CancellationToken::new(),
        drain_sources: CancellationToken::new(),
        close_all: CancellationToken::new(),
        draining: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        kill: CancellationToken::new(),
        tracker: TaskTracker::new(),
        tarpit: Mutex::new(Tarpit::new(config.auth.tarpit())),
        penalties: Mutex::new(Penalties::default()),
        federation: federation.clone(),
        connections: Arc::default(),
    })
}

/// A listener's bind failure, named by what it was for.
fn bind_error(what: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> RouterError {
    move |source| RouterError::Bind { what, addr, source }
}

/// The phases of [`Router::start`] that bind a listener and start serving it.
impl RouterHandle {
    /// Binds the TCP listener (with `tls`, TLS requiring certificates of `client_ca` when
    /// there is one) and starts its accept loop.
    async fn listen_tcp(
        &mut self,
        addr: SocketAddr,
        tls: bool,
        client_ca: Option<&ClientCa>,
        codec: FrameCodec,
    ) -> Result<(), RouterError> {
        let tls = if tls {
            Some(self.identity.server_config_with(client_ca)?)
        } else {
            None
        };
        let server = TcpServer::bind(addr, tls, codec)
            .await
            .map_err(bind_error("tcp", addr))?;
        self.tcp = Some(server.local_addr().map_err(bind_error("tcp", addr))?);
        let shared = self.shared.clone();
        self.background
            .push(tokio::spawn(accept_loop(shared, server)));
        Ok(())
    }

    /// Binds the QUIC listener (with the state directory's stateless-reset key) and starts
    /// its accept loop.
    fn listen_quic(
        &mut self,
        config: &RouterConfig,
        addr: SocketAddr,
        client_ca: Option<&ClientCa>,
        codec: FrameCodec,
    ) -> Result<(), RouterError> {
        let tls = self.identity.server_config_with(client_ca)?;
        // Kept across restarts: a restarted router resets its predecessor's connections at
        // once (state.rs).
        let recovery = crate::state::recovery(&config.state)?;
        let server =
            QuicServer::bind_recovering(addr, tls, codec, &recovery).map_err(|e| match e {
                TransportError::Io(source) => bind_error("quic", addr)(source),
                other => RouterError::Transport(other),
            })?;
        self.quic = Some(server.local_addr().map_err(bind_error("quic", addr))?);
        let server = Arc::new(server);
        self.quic_server = Some(server.clone());
        let shared = self.shared.clone();
        self.background
            .push(tokio::spawn(accept_loop(shared, server)));
        Ok(())
    }

    /// Binds the metrics listener and serves `/metrics`, the status pages and the dashboard
    /// (after the router's own listeners, whose addresses `/varz` shows).
    async fn serve_status(
        &mut self,
        addr: SocketAddr,
        config: &RouterConfig,
        metrics: Arc<Metrics>,
        metrics_token: Option<String>,
    ) -> Result<(), RouterError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(bind_error("metrics", addr))?;
        self.metrics = listener.local_addr().ok();
        let status = Arc::new(Status {
            metrics,
            connections: self.shared.connections.clone(),
            config: config.clone(),
            addrs: [self.tcp, self.quic, self.metrics],
            started: std::time::SystemTime::now(),
            started_at: Instant::now(),
            rates: std::sync::Mutex::new(crate::status::rates::Sampler::new(Instant::now())),
        });
        self.background.push(tokio::spawn(metrics::serve(
            listener,
            status,
            self.shared.kill.clone(),
            metrics_token.map(Arc::from),
        )));
        Ok(())
    }

    /// Binds the MQTT listener and serves it (`mqtt/`).
    async fn serve_mqtt(
        &mut self,
        plain: Option<SocketAddr>,
        tls: Option<SocketAddr>,
        client_ca: Option<&ClientCa>,
    ) -> Result<(), RouterError> {
        let mqtt = crate::mqtt::Mqtt::new(&self.shared);
        self.mqtt_side = Some(mqtt.clone());
        for (addr, with_tls) in [(plain, false), (tls, true)] {
            let Some(addr) = addr else { continue };
            let what = if with_tls { "mqtt tls" } else { "mqtt" };
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(bind_error(what, addr))?;
            let acceptor = if with_tls {
                self.mqtt_tls = listener.local_addr().ok();
                Some(crate::mqtt::tls_acceptor(
                    &self.identity.server_config_with(client_ca)?,
                ))
            } else {
                self.mqtt = listener.local_addr().ok();
                None
            };
            self.background.push(tokio::spawn(crate::mqtt::serve(
                listener,
                self.shared.clone(),
                mqtt.clone(),
                acceptor,
            )));
        }
        Ok(())
    }
}

/// A running router: its addresses, its statistics, and the way to stop it.
///
/// Dropping the handle without [`shutdown`](RouterHandle::shutdown) stops it abruptly.
#[derive(Debug)]
pub struct RouterHandle {
    shared: Arc<Shared>,
    codec: FrameCodec,
    tcp: Option<std::net::SocketAddr>,
    quic: Option<std::net::SocketAddr>,
    metrics: Option<std::net::SocketAddr>,
    mqtt: Option<std::net::SocketAddr>,
    mqtt_tls: Option<std::net::SocketAddr>,
    mqtt_side: Option<crate::mqtt::Mqtt>,
    identity: Identity,
    quic_server: Option<Arc<QuicServer>>,
    background: Vec<JoinHandle<()>>,
}

impl RouterHandle {
    /// The TCP listener's address, if on.
    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.tcp
    }

    /// The QUIC listener's address, if on.
    pub fn quic_addr(&self) -> Option<std::net::SocketAddr> {
        self.quic
    }

    /// The MQTT listener's address (`[mqtt] listen`), if on.
    pub fn mqtt_addr(&self) -> Option<std::net::SocketAddr> {
        self.mqtt
    }

    /// The MQTT over TLS listener's address (`[mqtt] tls_listen`), if on.
    pub fn mqtt_tls_addr(&self) -> Option<std::net::SocketAddr> {
        self.mqtt_tls
    }

    /// The MQTT connections open now (name, client id, address, subscriptions): what
    /// `/connz` lists for them. Empty without `[mqtt] listen`.
    pub fn mqtt_connections(&self) -> Vec<crate::mqtt::ConnInfo> {
        self.mqtt_side
            .as_ref()
            .map(crate::mqtt::Mqtt::connections)
            .unwrap_or_default()
    }

    /// The metrics listener's address, if on.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics
    }

    /// The server certificate and key in use.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// A client trust setting that pins this router's certificate (for the generated
    /// development certificate; a CA-issued one is verified through its CA instead).
    pub fn trust(&self) -> Trust {
        Trust::Pinned(vec![self.identity.certificate().clone()])
    }

    /// Applies what of `config` a running router can take (SIGHUP): tokens, their
    /// permissions and the content filters, for connections made from now on (the open
    /// ones keep theirs and are not dropped). Returns the sections that changed and need a
    /// restart (`listen`, `tls`, ...), which are not applied.
    ///
    /// # Errors
    /// [`RouterError::Config`] for invalid values, [`RouterError::Secret`] for an
    /// unreadable token file: nothing is applied then.
    pub fn reload(&self, config: &RouterConfig) -> Result<crate::Reloaded, RouterError> {
        crate::reload::reload(&self.shared, config)
    }

    /// Current totals.
    pub fn stats(&self) -> Stats {
        self.shared.metrics.stats()
    }

    /// The metrics registry (its text form is what `GET /metrics` serves).
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// Every admitted connection: what `/connz` lists. A listener of another protocol
    /// registers its connections here ([`Connections::register`](crate::status::Connections::register)).
    pub fn connections(&self) -> &Arc<crate::status::Connections> {
        &self.shared.connections
    }

    /// The metrics registry, shared: it outlives the router (for a final report after
    /// [`shutdown`](RouterHandle::shutdown)).
    pub fn metrics_handle(&self) -> Arc<Metrics> {
        self.shared.metrics.clone()
    }

    /// Serves an already framed connection (any transport) as if it had been accepted.
    pub fn serve(&self, conn: Connection) {
        self.shared
            .spawn_connection(conn.peer, async move { Ok(conn) });
    }

    /// A client connection over an in-memory pipe to this router: the quinn `Pair` idea,
    /// used by tests to exercise the real server without sockets.
    pub fn connect_in_memory(&self) -> Connection {
        let (client, server) = Connection::pair(self.codec, 256 * 1024);
        self.serve(server);
        client
    }

    /// Stops gracefully, draining in-flight frames (see the module docs), and returns the
    /// final totals.
    pub async fn shutdown(mut self) -> Stats {
        let shared = self.shared.clone();
        let drain = Duration::from_millis(shared.config.shutdown.drain_timeout_ms);
        let quiet = Duration::from_millis(shared.config.shutdown.quiet_ms.max(1));
        let deadline = Instant::now() + drain;
        *shared
            .drain_deadline
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(deadline);
        tracing::info!(?drain, "shutting down: draining");

        shared.stop_accepting.cancel();
        if let Some(quic) = &self.quic_server {
            quic.refuse_new();
        }
        shared.draining.store(true, Ordering::Relaxed);
        shared.drain_sources.cancel();
        // Sources stop and close; everything they sent gets read.
        while shared.sources.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Functions finish what is queued for them and their outputs reach sinks.
        let snapshot = |s: &Shared| {
            let stats = s.metrics.stats();
            (stats.frames_in, stats.frames_out, stats.queued)
        };
        let mut last = snapshot(&shared);
        while Instant::now() < deadline {
            tokio::time::sleep(quiet.min(deadline.saturating_duration_since(Instant::now()))).await;
            let now = snapshot(&shared);
            if now == last && now.2 == 0 && shared.routing.load(Ordering::Relaxed) == 0 {
                break;
            }
            last = now;
        }
        // Everyone gets their queue, a goaway, and a close.
        shared.closing.store(true, Ordering::Relaxed);
        shared.close_all.cancel();
        shared.tracker.close();
        let grace = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
        if tokio::time::timeout(grace, shared.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("drain timed out; closing the remaining connections");
        }
        if let Some(mqtt) = &self.mqtt_side {
            // Persistent MQTT sessions outlive the restart (`mqtt/saved.rs`).
            mqtt.save().await;
        }
        if let Some(federation) = &shared.federation {
            // What functions wrote last is published before the process goes.
            federation.close().await;
        }
        shared.kill.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), shared.tracker.wait()).await;
        if let Some(quic) = self.quic_server.take() {
            let goaway = Goaway::new(GoawayCode::ShuttingDown, "router shutting down");
            quic.close(&goaway, Duration::from_millis(200)).await;
        }
        for task in self.background.drain(..) {
            task.abort();
        }
        let stats = shared.metrics.stats();
        tracing::info!(
            frames_in = stats.frames_in,
            frames_out = stats.frames_out,
            dropped = stats.total_drops(),
            unaccounted = stats.unaccounted(),
            "router stopped"
        );
        if stats.unaccounted() != 0 {
            tracing::warn!(
                unaccounted = stats.unaccounted(),
                "deliveries neither written nor counted as dropped"
            );
        }
        stats
    }
}

impl std::ops::Drop for RouterHandle {
    fn drop(&mut self) {
        self.shared.stop_accepting.cancel();
        self.shared.kill.cancel();
        if let Some(federation) = &self.shared.federation {
            federation.abort();
        }
        for task in &self.background {
            task.abort();
        }
    }
}
