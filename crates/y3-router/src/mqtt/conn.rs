//! One MQTT connection: CONNECT and its verdict, then one loop over the socket, the
//! stored acknowledgements of its QoS 1 publishes and the session's queue.
//!
//! ```text
//!  socket ─▶ packet::read ─▶ PUBLISH ─▶ map topic → tag, check permission
//!     ─▶ the router's data frame ─▶ Ingress::data (the read loop's routing, in this task)
//!                                                QoS 1: (ticket index, pkid) pending
//!  Acks ◀─ stored count (a ticket per QoS 1 publish) ─▶ PUBACK for each pending index
//!                                                       below the count (after routing)
//!  session queue ─▶ PUBLISH to the client (QoS 1 kept in flight until its PUBACK)
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::{ClientType, GoawayCode, RefusedReason, Stored};
use y3_transport::{Connection, Data, Frame};

use super::broker::Broker;
use super::error::MqttError;
use super::link::{Direct, Who};
use super::outlet::Outlet;
use super::packet::{self, ConnCode, Connect, Incoming, Outgoing, Publish, Version};
use super::puback::PubAckCode;
use super::session::{Attached, Session};
use super::stamp::Stamp;
use super::ConnInfo;
use crate::ingress::Handled;
use crate::session::Permissions;
use crate::status::{ConnCounters, Kind, MqttState, QueueState, Registration};

/// The router's shutdown, as an MQTT connection follows it: at `drain` it takes no more
/// publishes (QoS 1 ones go unacknowledged, for the client to send again to the router's
/// successor; QoS 0 ones are counted as dropped) but goes on delivering; at `close` it
/// writes what its session holds and says goodbye (MQTT 5: DISCONNECT 0x8B).
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    /// Sources stop.
    pub drain: CancellationToken,
    /// Everyone closes.
    pub close: CancellationToken,
}

/// A client's socket, plain or TLS, split into its two halves.
pub(crate) struct Io {
    rd: Box<dyn AsyncRead + Send + Sync + Unpin>,
    wr: Wr,
    transport: &'static str,
}

/// A socket's write side.
enum Wr {
    /// Plain TCP: shared with the session's downlink, which writes messages straight.
    Tcp(Arc<Outlet>),
    /// TLS: the connection's task alone writes.
    Tls(Box<dyn AsyncWrite + Send + Sync + Unpin>),
}

impl Io {
    /// A plain TCP client (`listen`), what its socket holds to write charged to the memory
    /// budget of `metrics`.
    pub fn plain(stream: TcpStream, metrics: Arc<crate::metrics::Metrics>) -> Io {
        let (rd, wr) = stream.into_split();
        Io {
            rd: Box::new(rd),
            wr: Wr::Tcp(Arc::new(Outlet::new(wr, metrics))),
            transport: "tcp",
        }
    }

    /// A TLS client (`tls_listen`), its handshake done.
    pub fn tls(stream: tokio_rustls::server::TlsStream<TcpStream>) -> Io {
        let (rd, wr) = tokio::io::split(stream);
        Io {
            rd: Box::new(rd),
            wr: Wr::Tls(Box::new(wr)),
            transport: "tls",
        }
    }
}

/// Bytes of PUBLISHes written to a client at once before the connection's loop takes
/// turns with its other events (its publishes, acknowledgements).
const BATCH_BYTES: usize = 64 * 1024;

/// Serves one MQTT client until it leaves, breaks a rule, or the router stops.
pub(crate) async fn run(broker: Arc<Broker>, io: Io, peer: SocketAddr, stop: Stop) {
    let open = broker.metrics.open();
    open.inc();
    let Io { rd, wr, transport } = io;
    let mut conn = Conn {
        broker: broker.clone(),
        rd,
        wr,
        buf: BytesMut::with_capacity(8 * 1024),
        out: BytesMut::with_capacity(8 * 1024),
        spare: BytesMut::new(),
        version: Version::V4,
        peer,
        transport,
        max_inflight: broker.config.max_inflight,
    };
    if let Err(e) = conn.serve(stop).await {
        broker.metrics.closed(e.kind());
        match &e {
            MqttError::Io(_) => tracing::debug!(%peer, error = %e, "mqtt connection lost"),
            _ => tracing::warn!(%peer, reason = e.kind(), error = %e, "mqtt connection closed"),
        }
        if let (Version::V5, Some(code)) = (conn.version, e.reason_code()) {
            let _ = conn.send(&Outgoing::Disconnect(code)).await;
        }
    }
    match &mut conn.wr {
        // What the downlink wrote last, if the socket takes it (the socket's write side
        // shuts down as the last holder of the outlet lets it go).
        Wr::Tcp(outlet) => outlet.try_flush(),
        Wr::Tls(wr) => {
            let _ = wr.shutdown().await;
        }
    }
    open.dec();
}

struct Conn {
    broker: Arc<Broker>,
    rd: Box<dyn AsyncRead + Send + Sync + Unpin>,
    wr: Wr,
    buf: BytesMut,
    /// The connection's own packets, encoded, before they go to the socket.
    out: BytesMut,
    /// The buffer the outlet's pending bytes are swapped into to be written.
    spare: BytesMut,
    version: Version,
    peer: SocketAddr,
    /// `tcp` or `tls` (`/connz`).
    transport: &'static str,
    /// QoS 1 messages in flight to the client at most: `mqtt.max_inflight`, or its MQTT 5
    /// Receive Maximum when smaller.
    max_inflight: usize,
}

/// A connection's ways to the router: the internal source link it was admitted through
/// (the drain's goaway comes that way), the direct way its publishes take, and its QoS 1
/// publishes awaiting their stored acknowledgement.
struct Uplink {
    conn: Connection,
    direct: Direct,
    /// QoS 1 publishes handed in so far (the next one's ticket index): only they take a
    /// ticket, so that a client publishing QoS 0 costs the router no acknowledgement.
    next_index: u32,
    /// The stored count last read from the acknowledgements.
    answered: u32,
    /// (ticket index, packet id) of QoS 1 publishes not yet acknowledged.
    pending: std::collections::VecDeque<(u32, u16)>,
    /// The router closed the link (it is shutting down).
    gone: bool,
}

impl Uplink {
    /// The ways in of a connection just admitted: nothing handed in, nothing pending.
    fn new(conn: Connection, direct: Direct) -> Uplink {
        Uplink {
            conn,
            direct,
            next_index: 0,
            answered: 0,
            pending: Default::default(),
            gone: false,
        }
    }
}

impl Conn {
    fn queue(&mut self, packet: &Outgoing) -> Result<(), MqttError> {
        packet::write(self.version, packet, &mut self.out)
    }

    async fn flush_out(&mut self) -> Result<(), MqttError> {
        match &mut self.wr {
            Wr::Tcp(outlet) => {
                outlet.append_all(&mut self.out);
                outlet.write_all(&mut self.spare).await?;
            }
            Wr::Tls(wr) => {
                if !self.out.is_empty() {
                    wr.write_all(&self.out).await?;
                    self.out.clear();
                }
            }
        }
        Ok(())
    }

    async fn send(&mut self, packet: &Outgoing) -> Result<(), MqttError> {
        self.queue(packet)?;
        self.flush_out().await
    }

    /// The next packet, reading more as needed; `None` at the end of the stream.
    async fn next_packet(
        &mut self,
        version: Option<Version>,
    ) -> Result<Option<Incoming>, MqttError> {
        loop {
            if let Some(p) =
                packet::read(&mut self.buf, version, self.broker.config.max_packet_bytes)?
            {
                return Ok(Some(p));
            }
            if self.rd.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }

    async fn serve(&mut self, stop: Stop) -> Result<(), MqttError> {
        let handshake = self.broker.links.shared.config.handshake_timeout();
        let first = tokio::time::timeout(handshake, self.next_packet(None))
            .await
            .map_err(|_| MqttError::Protocol("no CONNECT in time"))??;
        let Some(Incoming::Connect(connect)) = first else {
            return Err(MqttError::Protocol("the first packet must be CONNECT"));
        };
        self.version = connect.version;
        if let Some(n) = connect.receive_max {
            self.max_inflight = self.max_inflight.min(usize::from(n));
        }
        let Some((who, link, permissions, session, generation)) = self.accept(&connect).await?
        else {
            return Ok(());
        };
        let broker = self.broker.clone();
        let info = ConnInfo {
            name: who.name.clone(),
            client_id: who.client_id.clone(),
            remote: self.peer,
            version: self.version.name(),
            subscriptions: Vec::new(),
        };
        let _listed = broker.opened(info.clone(), session.clone());
        let shared = broker.links.shared.clone();
        shared.metrics.connection("mqtt", 1);
        let _counted = scopeguard_connection(&shared);
        let id = shared.next_session();
        let registered = shared.connections.register(Registration {
            id,
            name: who.name.clone(),
            client_id: who.client_id.clone(),
            kind: Kind::Mqtt,
            protocol: "mqtt",
            transport: self.transport,
            remote: Some(self.peer),
            observed: Vec::new(),
            filters: Vec::new(),
        });
        // The same handshake the link was admitted with: it cannot be refused now but
        // by a token reloaded away in between.
        let direct = broker
            .links
            .direct(&who, id, registered.counters())
            .map_err(|g| MqttError::Router(g.reason))?;
        let mut uplink = Uplink::new(link, direct);
        let awaiting = Arc::new(AtomicU64::new(0));
        {
            let (weak, awaiting) = (Arc::downgrade(&session), awaiting.clone());
            let version = self.version.name();
            let username = connect
                .login
                .as_ref()
                .map(|(user, _)| user.clone())
                .filter(|u| !u.is_empty());
            registered.set_mqtt(Box::new(move || {
                let (subscriptions, inflight) = weak.upgrade().map_or_else(Default::default, |s| {
                    let s = s.lock();
                    (s.subscriptions.clone(), s.inflight.len() as u64)
                });
                MqttState {
                    version,
                    username: username.clone(),
                    subscriptions,
                    inflight,
                    awaiting_puback: awaiting.load(Ordering::Relaxed),
                }
            }));
            let session = Arc::downgrade(&session);
            registered.set_queue(Box::new(move || QueueState {
                frames: session.upgrade().map_or(0, |s| s.lock().queue.len() as u64),
                ..QueueState::default()
            }));
        }
        tracing::info!(client = %info.client_id, name = %info.name, peer = %info.remote, version = info.version, "mqtt client connected");
        let mut state = Loop {
            counters: registered.counters(),
            awaiting,
            who,
            permissions,
            session: session.clone(),
            generation,
            // Its own copy of the payload: kept for the connection's life, it must not pin
            // the read buffer CONNECT came in.
            will: connect.will.clone().map(|w| packet::Will {
                payload: bytes::Bytes::copy_from_slice(&w.payload),
                ..w
            }),
            keep_alive: connect.keep_alive,
            refusals_logged: false,
            draining: false,
            tids: y3_transport::sdk::Tids::new(),
            stamp: Stamp::default(),
            // No publish has an empty topic (refused before it is mapped).
            last_tag: (String::new(), None),
        };
        // From now on the downlink writes messages straight to a plain-TCP client's socket
        // (after the CONNACK, written already).
        if let Wr::Tcp(outlet) = &self.wr {
            let mut s = session.lock();
            if s.generation == generation {
                s.attached = Some(Attached {
                    outlet: outlet.clone(),
                    version: self.version,
                    max_inflight: self.max_inflight,
                    counters: registered.counters(),
                });
            }
        }
        // A session restored from the state directory gets its downlink now that its
        // client's credentials are here.
        if !state.session.lock().subscriptions.is_empty() {
            self.refresh(&state).await;
        }
        let result = self.run_loop(&mut state, &mut uplink, &stop).await;
        detach(&session, generation);
        let clean_exit = matches!(result, Ok(true));
        if !clean_exit {
            if let Some(will) = state.will.take() {
                let will = Publish {
                    topic: will.topic,
                    qos: will.qos.min(1),
                    pkid: 0,
                    retain: will.retain,
                    dup: false,
                    payload: will.payload,
                };
                if let Err(e) = self.publish(&mut state, &mut uplink, will).await {
                    tracing::warn!(client = %state.who.client_id, error = %e, "mqtt will not published");
                }
            }
        }
        let _ = uplink.conn.writer.close().await;
        // QoS 1 publishes the router had not answered: no PUBACK, the client sends them
        // again (counted, for the ledger).
        broker
            .metrics
            .pubacked("abandoned", uplink.pending.len() as u64);
        uplink.pending.clear();
        if let Some(expiry) = connect.session_expiry {
            let mut s = session.lock();
            s.expires = (expiry != u32::MAX)
                .then(|| Instant::now() + Duration::from_secs(u64::from(expiry)));
        }
        broker.release(&session, generation);
        tracing::info!(client = %info.client_id, "mqtt client left");
        result.map(|_| ())
    }

    /// CONNECT's verdict; `None` when refused (CONNACK sent, counted).
    #[allow(clippy::type_complexity)]
    async fn accept(
        &mut self,
        connect: &Connect,
    ) -> Result<Option<(Who, Connection, Arc<Permissions>, Arc<Session>, u64)>, MqttError> {
        let broker = self.broker.clone();
        let mut client_id = connect.client_id.clone();
        if client_id.is_empty() {
            if !connect.clean {
                broker.metrics.refused("bad_client_id");
                self.send(&Outgoing::ConnAck(
                    ConnCode::BadClientId,
                    false,
                    broker.config.receive_maximum,
                ))
                .await?;
                return Ok(None);
            }
            client_id = format!("auto-{}", y3_transport::sdk::new_id());
        }
        let (name, credential) = match &connect.login {
            Some((user, password)) => (
                if user.is_empty() {
                    client_id.clone()
                } else {
                    user.clone()
                },
                if password.is_empty() {
                    String::new()
                } else {
                    format!("token:{password}")
                },
            ),
            None => (client_id.clone(), String::new()),
        };
        let who = Who {
            peer: self.peer,
            name,
            client_id: client_id.clone(),
            credential,
        };
        let (conn, permissions) = match broker
            .links
            .open(&who, (ClientType::Source, &[]), false, None)
            .await
        {
            Ok(link) => link,
            Err(g) => {
                let (code, reason) = match g.code {
                    GoawayCode::Unauthorized => (ConnCode::BadCredentials, "bad_credentials"),
                    GoawayCode::Forbidden => (ConnCode::NotAuthorized, "not_authorized"),
                    _ => (ConnCode::Busy, "router_refused"),
                };
                broker.metrics.refused(reason);
                tracing::warn!(peer = %self.peer, client = %client_id, reason, detail = %g.reason, "mqtt connect refused");
                self.send(&Outgoing::ConnAck(
                    code,
                    false,
                    broker.config.receive_maximum,
                ))
                .await?;
                return Ok(None);
            }
        };
        let Some((session, present)) = broker.take_session(&client_id, connect.clean) else {
            broker.metrics.refused("sessions_full");
            tracing::warn!(peer = %self.peer, client = %client_id, "mqtt connect refused: mqtt.max_sessions kept");
            self.send(&Outgoing::ConnAck(
                ConnCode::Busy,
                false,
                broker.config.receive_maximum,
            ))
            .await?;
            return Ok(None);
        };
        let generation = {
            let mut s = session.lock();
            s.generation += 1;
            s.holder = Some(CancellationToken::new());
            // Attached again once the connection is ready (`serve`).
            s.attached = None;
            s.persistent = match connect.session_expiry {
                Some(expiry) => expiry > 0,
                None => !connect.clean,
            };
            s.expires = None;
            s.generation
        };
        let again = session.resume();
        broker.metrics.redelivered.inc_by(again as u64);
        broker.metrics.accepted.inc();
        self.send(&Outgoing::ConnAck(
            ConnCode::Accepted,
            present,
            broker.config.receive_maximum,
        ))
        .await?;
        Ok(Some((who, conn, permissions, session, generation)))
    }

    /// The connection's loop: the packets read, the session's messages, the stored
    /// acknowledgements, the router's goaway, keep-alive, take-over and shutdown;
    /// `Ok(true)` after the client's DISCONNECT (no will).
    ///
    /// A paced client wakes it once per packet, so what each turn sets up is the cost of
    /// a message. The rare events (take-over, drain, close, keep-alive, the session's and
    /// the outlet's wake-ups) wait in one [`FuturesUnordered`], registered once and polled
    /// only when woken, instead of each being made, registered (a lock each), polled and
    /// dropped at every turn; one that fired is put back, if it can fire again. The
    /// keep-alive timer is not moved at each read: a read notes its time, and the timer,
    /// when it fires, sleeps again until 1.5 keep-alives after the last read, or closes.
    async fn run_loop(
        &mut self,
        state: &mut Loop,
        uplink: &mut Uplink,
        stop: &Stop,
    ) -> Result<bool, MqttError> {
        let holder = state.session.lock().holder.clone().unwrap_or_default();
        let keep_alive = (state.keep_alive > 0)
            .then(|| Duration::from_millis(u64::from(state.keep_alive) * 1500));
        let mut last_read = tokio::time::Instant::now();
        let max_packet = self.broker.config.max_packet_bytes;
        let receive_max = usize::from(self.broker.config.receive_maximum);
        let session = state.session.clone();
        let outlet = match &self.wr {
            Wr::Tcp(outlet) => Some(outlet.clone()),
            Wr::Tls(_) => None,
        };
        let rare = Rare {
            holder: &holder,
            stop,
            session: &session,
            outlet: outlet.as_deref(),
        };
        let mut events: FuturesUnordered<RareFuture<'_>> = [
            Event::TakenOver,
            Event::Drain,
            Event::Close,
            Event::Ready,
            Event::Woken,
        ]
        .into_iter()
        .map(|e| rare.wait(e))
        .collect();
        if let Some(k) = keep_alive {
            events.push(rare.expire(last_read + k));
        }
        loop {
            // Every whole packet read so far (CONNECT's read may have taken more); an MQTT
            // 3.1.1 client with `receive_maximum` publishes awaiting their PUBACK waits
            // (MQTT 5 was told the bound: one past it closes the connection).
            while uplink.pending.len() < receive_max || self.version == Version::V5 {
                let Some(p) = packet::read(&mut self.buf, Some(self.version), max_packet)? else {
                    break;
                };
                if self.handle(state, uplink, p).await? {
                    return Ok(true);
                }
            }
            let reading = uplink.pending.len() < receive_max || self.version == Version::V5;
            let waiting = !uplink.pending.is_empty();
            self.send_queued(state)?;
            self.flush_out().await?;
            tokio::select! {
                Some(event) = events.next() => match event {
                    Event::TakenOver => return Err(MqttError::TakenOver),
                    Event::Drain => state.draining = true,
                    Event::Close => {
                        // The session's last messages, then goodbye (no will: the client
                        // did nothing wrong); nothing written straight after it.
                        detach(&state.session, state.generation);
                        self.send_queued(state)?;
                        if self.version == Version::V5 {
                            self.queue(&Outgoing::Disconnect(0x8B))?;
                        }
                        self.flush_out().await?;
                        state.will = None;
                        return Ok(true);
                    }
                    Event::Ready | Event::Woken => events.push(rare.wait(event)),
                    Event::Expired => match keep_alive.map(|k| last_read + k) {
                        Some(due) if due > tokio::time::Instant::now() => events.push(rare.expire(due)),
                        _ => return Err(MqttError::KeepAlive),
                    },
                },
                stored = uplink.direct.acks.moved_past(uplink.answered), if waiting => {
                    uplink.answered = stored.count;
                    if let Some(unacknowledged) = self.stored(state, uplink, &stored)? {
                        // The PUBACKs before it go out; no will (the client did nothing
                        // wrong). The publish stays unacknowledged (see `stored`).
                        self.flush_out().await?;
                        state.will = None;
                        return Err(unacknowledged);
                    }
                }
                frame = uplink.conn.reader.next(), if !uplink.gone => match frame {
                    Some(Ok(Frame::Goaway(g))) if g.code == GoawayCode::ShuttingDown => {
                        // The router drains: delivery goes on until it closes.
                        state.draining = true;
                        uplink.gone = true;
                    }
                    Some(Ok(Frame::Goaway(g) | Frame::Rejected(g))) => return Err(MqttError::Router(g.reason)),
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(MqttError::Router(e.to_string())),
                    None => return Err(MqttError::Router("the router closed the link".into())),
                },
                n = self.rd.read_buf(&mut self.buf), if reading => {
                    if n? == 0 {
                        return Err(MqttError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                    }
                    if keep_alive.is_some() {
                        last_read = tokio::time::Instant::now();
                    }
                }
            }
        }
    }

    /// Writes what the session has for the client (QoS 1 up to `max_inflight`): a batch
    /// of up to [`BATCH_BYTES`] encoded under one hold of the session's lock.
    /// Plain TCP: the batch joins the outlet's pending bytes under the lock, after what
    /// the downlink wrote straight before and before what it writes next.
    fn send_queued(&mut self, state: &Loop) -> Result<(), MqttError> {
        let session = &state.session;
        let mut s = session.lock();
        let mut more = false;
        while let Some(m) = s.next_to_send(self.max_inflight) {
            if m.qos == 0 {
                self.broker.metrics.delivered();
            }
            if !m.dup {
                state.counters.count_out(1, m.payload.len() as u64);
            }
            packet::write_publish(self.version, &m, &mut self.out)?;
            if self.out.len() > BATCH_BYTES {
                // The rest after this write, taking turns with the other events.
                more = true;
                break;
            }
        }
        if let Wr::Tcp(outlet) = &self.wr {
            outlet.append_all(&mut self.out);
        }
        drop(s);
        if more {
            session.ready.notify_one();
        }
        Ok(())
    }

    /// The router handled frames up to `stored.count`: PUBACK their QoS 1 publishes. An MQTT
    /// 3.1.1 publish refused as `not_stored` stops there: its PUBACK could only say
    /// "received", so the connection is to be closed with it unacknowledged (the error
    /// returned), for a client with a persistent session to send it again (`docs/mqtt.md`).
    fn stored(
        &mut self,
        state: &mut Loop,
        uplink: &mut Uplink,
        stored: &Stored,
    ) -> Result<Option<MqttError>, MqttError> {
        while let Some(&(index, pkid)) = uplink.pending.front() {
            // index < count, modulo 2^32.
            if stored.count.wrapping_sub(index).wrapping_sub(1) >= 1 << 31 {
                break;
            }
            let refused = stored.refused.iter().find(|r| r.contains(index));
            if let (Version::V4, Some(RefusedReason::NotStored)) =
                (self.version, refused.map(|r| r.reason))
            {
                return Ok(Some(MqttError::Router(
                    "a QoS 1 publish was not stored (the federation's JetStream): closing \
                     with it unacknowledged"
                        .into(),
                )));
            }
            uplink.pending.pop_front();
            let code = PubAckCode::of_verdict(refused.map(|r| r.reason));
            self.broker.metrics.pubacked(code.outcome(), 1);
            if let Some(run) = refused.filter(|_| !state.refusals_logged) {
                state.refusals_logged = true;
                tracing::warn!(client = %state.who.client_id, reason = %run.reason, puback = format_args!("{:#04x}", code.byte()), "the router refused an mqtt publish (first of this connection; each counted)");
            }
            self.queue(&Outgoing::PubAck(pkid, code))?;
        }
        state
            .awaiting
            .store(uplink.pending.len() as u64, Ordering::Relaxed);
        Ok(None)
    }

    /// Acts on one packet; `true` after DISCONNECT without a will.
    async fn handle(
        &mut self,
        state: &mut Loop,
        uplink: &mut Uplink,
        p: Incoming,
    ) -> Result<bool, MqttError> {
        match p {
            Incoming::Publish(p) => self.publish(state, uplink, p).await?,
            Incoming::PubAck(pkid) => {
                if state.session.acked(pkid) {
                    self.broker.metrics.delivered();
                }
            }
            Incoming::Subscribe(pkid, filters) => self.subscribe(state, pkid, filters).await?,
            Incoming::Unsubscribe(pkid, filters) => {
                let n = filters.len();
                state
                    .session
                    .lock()
                    .subscriptions
                    .retain(|(f, _)| !filters.contains(f));
                self.refresh(state).await;
                self.queue(&Outgoing::UnsubAck(pkid, n))?;
            }
            Incoming::PingReq => self.queue(&Outgoing::PingResp)?,
            Incoming::Disconnect(with_will) => {
                if !with_will {
                    state.will = None;
                }
                return Ok(!with_will);
            }
            Incoming::Connect(_) => return Err(MqttError::Protocol("a second CONNECT")),
            Incoming::Unexpected(name) => return Err(MqttError::Protocol(name)),
        }
        Ok(false)
    }

    /// A publish from the client: mapped, checked, and fed to the uplink.
    async fn publish(
        &mut self,
        state: &mut Loop,
        uplink: &mut Uplink,
        p: Publish,
    ) -> Result<(), MqttError> {
        let metrics = &self.broker.metrics;
        metrics.received();
        if p.qos > 1 {
            metrics.publish_refused(MqttError::QosNotSupported.kind());
            return Err(MqttError::QosNotSupported);
        }
        let receive_max = self.broker.config.receive_maximum;
        if p.qos == 1 && uplink.pending.len() >= usize::from(receive_max) {
            // Only an MQTT 5 client gets here (3.1.1 ones are not read meanwhile).
            let e = MqttError::ReceiveMaximum(receive_max);
            metrics.publish_refused(e.kind());
            return Err(e);
        }
        if state.draining {
            // QoS 1: no PUBACK, so the client sends it again to the router's successor;
            // QoS 0: lost, counted here.
            self.broker.metrics.publish_refused("shutting_down");
            return Ok(());
        }
        if p.topic.is_empty() || !rumqttc::mqttbytes::valid_topic(&p.topic) {
            self.broker.metrics.publish_refused("malformed_topic");
            return Err(MqttError::Malformed(format!(
                "topic {:?} is not a topic name",
                p.topic
            )));
        }
        let mapped = if state.last_tag.0 == p.topic {
            state.last_tag.1
        } else {
            let mapped = self.broker.config.tag_of(&p.topic);
            state.last_tag = (p.topic.clone(), mapped);
            mapped
        };
        let (tag, refusal) = match mapped {
            None => (0, Some(MqttError::Unmapped(p.topic.clone()))),
            Some(tag) if !state.permissions.may_publish(tag) => {
                (tag, Some(MqttError::NotAuthorized(p.topic.clone())))
            }
            Some(tag) => (tag, None),
        };
        if let Some(error) = refusal {
            self.broker.metrics.publish_refused(error.kind());
            let code = PubAckCode::of_refusal(&error);
            if let Some(code) = code.filter(|_| self.version == Version::V5 && p.qos == 1) {
                // Refused with its reason; the connection goes on.
                if !state.refusals_logged {
                    state.refusals_logged = true;
                    tracing::warn!(client = %state.who.client_id, error = %error, "mqtt publish refused (first of this connection)");
                }
                self.queue(&Outgoing::PubAck(p.pkid, code))?;
                return Ok(());
            }
            // MQTT 3.1.1 (and QoS 0) have no negative acknowledgement: the close tells.
            return Err(error);
        }
        if p.retain {
            let mut retained = self
                .broker
                .retained
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let c = &self.broker.config;
            // Its own copy: kept for long, it must not pin the read buffer it came in.
            if !retained.put(
                &p.topic,
                tag,
                bytes::Bytes::copy_from_slice(&p.payload),
                c.max_retained,
                c.max_retained_bytes,
            ) {
                self.broker.metrics.not_retained.inc();
                tracing::warn!(client = %state.who.client_id, topic = %p.topic, "retained message not kept: mqtt.max_retained(_bytes) reached");
            }
            self.broker.metrics.retained.set(retained.len() as i64);
        }
        let tid = state.tids.next_bytes();
        let meta = state.stamp.metadata(&state.who.client_id, tid, &p.topic);
        let mut data = Data::new(tag, p.payload).with_metadata(meta);
        // The read loop's own routing, here: the frame is routed (QoS 1: its ticket
        // answered once stored) or dropped by the router's rules (counted; QoS 1: refused,
        // its PUBACK's code by `puback.rs`) before the next packet is read, so publishes keep their order.
        let Direct {
            session,
            ingress,
            acks,
        } = &mut uplink.direct;
        let acks = (p.qos == 1).then_some(&*acks);
        let shared = &self.broker.links.shared;
        match ingress
            .data(shared, session, &mut data, Instant::now(), acks)
            .await
        {
            Handled::Routed | Handled::Dropped => {}
            Handled::Close(g) => {
                self.broker.metrics.publish_refused("router_refused");
                return Err(MqttError::Router(g.reason));
            }
            Handled::NotOpen => {
                self.broker.metrics.publish_refused("router_refused");
                return Err(MqttError::Router("the router's session is closed".into()));
            }
        }
        if p.qos == 1 {
            uplink.pending.push_back((uplink.next_index, p.pkid));
            uplink.next_index = uplink.next_index.wrapping_add(1);
            state
                .awaiting
                .store(uplink.pending.len() as u64, Ordering::Relaxed);
        }
        self.broker.metrics.routed(p.qos == 1);
        Ok(())
    }

    async fn subscribe(
        &mut self,
        state: &mut Loop,
        pkid: u16,
        filters: Vec<(String, u8)>,
    ) -> Result<(), MqttError> {
        let broker = self.broker.clone();
        let config = &broker.config;
        let mut granted = Vec::with_capacity(filters.len());
        let mut new = Vec::new();
        for (filter, qos) in filters {
            let qos = qos.min(1);
            let tags = config.tags_for_filter(&filter);
            let mut s = state.session.lock();
            let known = s.subscriptions.iter().any(|(f, _)| *f == filter);
            let ok = rumqttc::mqttbytes::valid_filter(&filter)
                && (known || s.subscriptions.len() < config.max_subscriptions)
                && (tags.is_empty() || tags.iter().any(|t| state.permissions.may_observe(*t)));
            if !ok {
                granted.push(None);
                continue;
            }
            s.subscriptions.retain(|(f, _)| *f != filter);
            s.subscriptions.push((filter.clone(), qos));
            granted.push(Some(qos));
            new.push((filter, qos));
        }
        self.refresh(state).await;
        self.queue(&Outgoing::SubAck(pkid, granted))?;
        // Ahead of the retained messages, written straight (MQTT lets live ones come
        // before it).
        if let Wr::Tcp(outlet) = &self.wr {
            outlet.append_all(&mut self.out);
        }
        // Retained messages the new filters match, as subscribers see them.
        let retained = broker.retained.lock().unwrap_or_else(|e| e.into_inner());
        for (origin, tag, payload) in retained.iter() {
            if !state.permissions.may_observe(tag) {
                continue;
            }
            for topic in config.topics_of(tag, Some(origin)) {
                let Some(qos) = new
                    .iter()
                    .filter(|(f, _)| super::config::topic_matches(topic, f))
                    .map(|(_, q)| *q)
                    .max()
                else {
                    continue;
                };
                broker.offer(
                    &state.session,
                    Publish {
                        topic: topic.to_owned(),
                        qos,
                        pkid: 0,
                        retain: true,
                        dup: false,
                        payload: payload.clone(),
                    },
                    None,
                );
            }
        }
        Ok(())
    }

    /// Points the downlink at the tags the subscriptions need and the token allows.
    async fn refresh(&self, state: &Loop) {
        let mut tags: Vec<u32> = state
            .session
            .lock()
            .subscriptions
            .iter()
            .flat_map(|(f, _)| self.broker.config.tags_for_filter(f))
            .filter(|t| state.permissions.may_observe(*t))
            .collect();
        tags.sort_unstable();
        tags.dedup();
        self.broker
            .refresh_downlink(&state.session, &state.who, tags)
            .await;
    }
}

/// Counts the connection in `y3_router_connections{client_type="mqtt"}` until dropped.
fn scopeguard_connection(shared: &Arc<crate::shared::Shared>) -> impl Drop {
    struct Counted(Arc<crate::shared::Shared>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.metrics.connection("mqtt", -1);
        }
    }
    Counted(shared.clone())
}

/// What the loop keeps about the client.
struct Loop {
    /// Its `/connz` counters.
    counters: ConnCounters,
    /// Its QoS 1 publishes awaiting the router's answer (`/connz`).
    awaiting: Arc<AtomicU64>,
    who: Who,
    permissions: Arc<Permissions>,
    session: Arc<Session>,
    /// The connection's generation of the session (`State::generation`).
    generation: u64,
    will: Option<packet::Will>,
    keep_alive: u16,
    /// The first refused publish of the connection was logged.
    refusals_logged: bool,
    /// The router is shutting down: publishes are no longer taken.
    draining: bool,
    /// The transaction ids of its publishes (`yomo-tid`).
    tids: y3_transport::sdk::Tids,
    /// Its publishes' metadata, encoded once per topic.
    stamp: Stamp,
    /// The topic it last published on and its tag by `MqttConfig::tag_of` (the broker's
    /// mappings are fixed for its life): a client that keeps to one topic is mapped once
    /// (`tag_of` was ~190 router instructions per publish, `scripts/icount-mqtt`).
    last_tag: (String, Option<u32>),
}

/// The connection of `generation` goes: the downlink writes no more straight to it (unless
/// another connection took the session over meanwhile, with its own).
fn detach(session: &Session, generation: u64) {
    let mut s = session.lock();
    if s.generation == generation {
        s.attached = None;
    }
}

/// The rare events of a connection's loop ([`Conn::run_loop`]).
#[derive(Debug, Clone, Copy)]
enum Event {
    /// Another connection took the session over.
    TakenOver,
    /// The router drains ([`Stop::drain`]).
    Drain,
    /// The router closes ([`Stop::close`]).
    Close,
    /// The session has messages queued for the client.
    Ready,
    /// The downlink left bytes the socket did not take at once (plain TCP).
    Woken,
    /// The keep-alive timer ran out (the loop looks whether a read came since).
    Expired,
}

/// One rare event's wait, borrowing what it waits on.
type RareFuture<'a> = Pin<Box<dyn Future<Output = Event> + Send + 'a>>;

/// What a connection's rare events wait on.
#[derive(Clone, Copy)]
struct Rare<'a> {
    holder: &'a CancellationToken,
    stop: &'a Stop,
    session: &'a Session,
    /// A plain-TCP client's outlet (a TLS client has none, and never gets [`Event::Woken`]).
    outlet: Option<&'a Outlet>,
}

impl<'a> Rare<'a> {
    /// Waits for `event` (any but [`Event::Expired`], which [`Rare::expire`] waits for).
    fn wait(self, event: Event) -> RareFuture<'a> {
        Box::pin(async move {
            match event {
                Event::TakenOver => self.holder.cancelled().await,
                Event::Drain => self.stop.drain.cancelled().await,
                Event::Close => self.stop.close.cancelled().await,
                Event::Ready => self.session.ready.notified().await,
                Event::Woken => match self.outlet {
                    Some(outlet) => outlet.wake.notified().await,
                    None => std::future::pending().await,
                },
                // The keep-alive timer is `expire`'s: this wait never ends.
                Event::Expired => std::future::pending().await,
            }
            event
        })
    }

    /// [`Event::Expired`] at `deadline`.
    fn expire(self, deadline: tokio::time::Instant) -> RareFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep_until(deadline).await;
            Event::Expired
        })
    }
}
