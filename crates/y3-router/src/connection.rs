//! One connection's tasks: the reader (handshake, then routing every data frame) and the
//! writer (draining the outbox in batches). The protocol decisions are the [`Session`]'s;
//! this file only moves frames between it, the sockets and the outboxes.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio_util::sync::WaitForCancellationFuture;
use y3_transport::frame::{ClientType, Frame, Goaway, GoawayCode, RefusedReason};
use y3_transport::{
    mid_frame, next_buffered, next_metered, next_or_skipped, partial_len, Connection, FrameError,
    FrameReader, FrameWriter, Guard, Next, Skipped, TransportKind,
};

use crate::acks::Acks;
use crate::budget::Partial;
use crate::filters::RouteFilter;
use crate::handoff::Handoff;
use crate::histogram::LocalLatency;
use crate::ingress::{count_close, Handled, Ingress};
use crate::metrics::{Direction, Drop, Metrics, TagCounters};
use crate::outbox::{Eviction, Outbox, Queued};
use crate::queue::OVERDRAFT;
use crate::session::{Event, Peer, Session};
use crate::shared::Shared;
use crate::spread::Spread;
use crate::status::{ConnCounters, Kind, Registered, Registration};
use crate::table::SessionId;
use crate::tcp_acked::StoredAt;

/// Most frames written per flush.
const MAX_BATCH: usize = 256;

/// How long the router waits for a closing peer (to read our goaway, to take its queue).
const LINGER: Duration = Duration::from_secs(1);

/// Per-connection cache of tag counter handles, so that counting a frame is a hash lookup
/// and two atomic adds rather than a lock on the metric family.
/// It counts the connection's own totals (`/connz`) too.
///
/// The map hashes its `u32` keys with foldhash (a few multiplications; std's SipHash took
/// ~340 instructions of each routed frame). The tags are the client's choice, so the hasher
/// is seeded per process ([`foldhash::fast::RandomState`]): a client cannot pick tags that
/// collide without knowing the seed. Even if it did, the map holds at most
/// [`TAG_CACHE_MAX`] tags and belongs to that client's own connection: the worst a
/// collision could cost is a probe of that many keys per frame of that client.
///
/// The tag of the last frame counted is looked at first (`last`): a client's frames mostly
/// come in runs of one tag, and the comparison costs a few instructions where the lookup
/// took ~50 per frame.
pub(crate) struct TagCache {
    metrics: Arc<Metrics>,
    direction: Direction,
    /// Where each tag's counters are in `counters`.
    map: HashMap<u32, usize, foldhash::fast::RandomState>,
    counters: Vec<(u32, TagCounters)>,
    /// The entry of `counters` used last.
    last: usize,
    conn: ConnCounters,
}

/// Most tags a [`TagCache`] holds; a client cycling through more clears it.
const TAG_CACHE_MAX: usize = 1024;

impl TagCache {
    pub fn new(metrics: Arc<Metrics>, direction: Direction, conn: ConnCounters) -> TagCache {
        TagCache {
            metrics,
            direction,
            map: HashMap::default(),
            counters: Vec::new(),
            last: 0,
            conn,
        }
    }

    pub fn count(&mut self, tag: u32, bytes: usize) {
        if self.direction == Direction::In {
            self.conn.count_in(bytes);
        }
        self.counters(tag, 1, bytes as u64);
    }

    /// Counts `frames` written frames of `tag` carrying `bytes` payload bytes in all (a
    /// writer's batch, one run of a tag at a time: one lookup and four atomic adds per
    /// run, not per frame).
    pub fn count_written(&mut self, tag: u32, frames: u64, bytes: u64) {
        debug_assert_eq!(self.direction, Direction::Out);
        self.counters(tag, frames, bytes);
    }

    /// The tag's counters (and, written, the connection's) for `frames` frames of `bytes`.
    fn counters(&mut self, tag: u32, frames: u64, bytes: u64) {
        let (metrics, direction, conn) = (&self.metrics, self.direction, &self.conn);
        if direction == Direction::Out {
            conn.count_out(frames, bytes);
        }
        if let Some((t, counters)) = self.counters.get(self.last) {
            if *t == tag {
                counters.add_many(frames, bytes);
                return;
            }
        }
        if self.map.len() >= TAG_CACHE_MAX && !self.map.contains_key(&tag) {
            // A client cycling through tags: keep the cache bounded.
            self.map.clear();
            self.counters.clear();
        }
        let counters = &mut self.counters;
        let at = *self.map.entry(tag).or_insert_with(|| {
            if direction == Direction::In {
                conn.published(tag);
            }
            counters.push((tag, metrics.tag_counters(direction, tag)));
            counters.len() - 1
        });
        self.last = at;
        self.counters[at].1.add_many(frames, bytes);
    }
}

/// Why the read side ended.
enum End {
    /// The client closed its side.
    Eof,
    /// The router is shutting down.
    Shutdown,
    /// The client sent something invalid; the goaway says what.
    ProtocolError(Goaway),
    /// The socket failed.
    ReadError,
    /// Disconnected as a slow consumer.
    Evicted,
    /// A partial frame cut for the memory budget (`budget.rs`): closed at once, nothing
    /// more read.
    Cut(Goaway),
}

/// Aborts a task when dropped (the writer must not outlive its connection).
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), FrameError>>);

impl std::ops::Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs a connection from handshake to close, phase by phase:
///
/// ```text
///   handshake ──admitted──▶ attach (register, subscribe, writer and acks tasks)
///       │                      │
///       └─ refused: closed     ▼
///                          read_loop ──End──▶ leave (unsubscribe) ──▶ closing plan ──▶ close
/// ```
///
/// `handoff`: where its data frames go instead of its writer (an in-process recipient,
/// `handoff.rs`); `None` for a client's socket.
pub(crate) async fn run(shared: Arc<Shared>, conn: Connection, handoff: Option<Handoff>) {
    let Connection {
        mut reader,
        mut writer,
        peer,
        transport,
        guard,
        acked,
    } = conn;
    let id = shared.next_session();
    let mut session = Session::new(
        id,
        Instant::now() + shared.config.handshake_timeout(),
        shared.admission(),
    );
    let accepted = handshake(
        &shared,
        &mut session,
        (&mut reader, &mut writer),
        guard,
        (id, peer, transport),
    )
    .await;
    let Some((hello, wants_acks, guard)) = accepted else {
        return;
    };
    let client_type = hello.client_type;
    // y3 sources understand goaway: the shutdown tells them to stop and reads them to
    // their end. YoMo's would give up for good on a goaway; they are closed to reconnect.
    let y3 = hello.extension >= 1;
    let drained = y3 && !client_type.receives();
    tracing::debug!(
        session = id,
        client_type = client_type.name(),
        name = %hello.name,
        id = %hello.id,
        observed = ?hello.observed,
        wanted_target = %hello.wanted_target,
        y3,
        transport = transport.name(),
        ?peer,
        "client admitted"
    );
    let _live = shared.admitted(client_type, drained);
    let attached = attach(
        &shared,
        &hello,
        (id, peer, transport),
        (writer, acked, handoff),
        wants_acks,
    );
    let end = read_loop(
        &shared,
        &mut session,
        &mut reader,
        &attached.outbox,
        (id, attached.registered.counters()),
        &hello,
        attached.acks.as_ref(),
    )
    .await;
    leave(&shared, id, client_type);
    let plan = closing(&shared, &attached.outbox, end, (id, peer), &hello);
    close(plan, attached, &mut reader, guard, (id, client_type)).await;
}

/// The handshake phase: reads the first frame under the handshake's own limits and budget,
/// checks it (the tarpit, held-off slow consumers) and, when admitted, restores the full
/// frame limit. A refused client is answered and closed here (`None`); an admitted one's
/// peer, whether it wants stored acknowledgements, and the guard come back.
async fn handshake(
    shared: &Arc<Shared>,
    session: &mut Session,
    (reader, writer): (&mut FrameReader, &mut FrameWriter),
    guard: Guard,
    (id, peer, transport): (SessionId, Option<std::net::SocketAddr>, TransportKind),
) -> Option<(Peer, bool, Guard)> {
    if shared.over_connection_limit() {
        let goaway = Goaway::new(GoawayCode::TooManyConnections, "connection limit reached");
        shared.metrics.rejected(goaway.code.kind());
        refuse(reader, writer, guard, transport, goaway, true).await;
        return None;
    }
    // `level`: the extension level of a decoded handshake (0: a YoMo client).
    let mut level = None;
    let mut wants_acks = false;
    // The tarpit slot the handshake holds while it is checked, and while its refusal for
    // a wrong credential waits (`throttle.rs`).
    let mut slot = None;
    let deadline = session.poll_timeout().unwrap_or_else(Instant::now);
    // The handshake is read under its own small limit (a longer one is refused from its
    // header) and its bytes are charged to the unauthenticated budget as they arrive.
    let full_limit = reader.decoder().max_frame_len();
    let handshake_limit = shared.config.limits.max_handshake_len.min(full_limit);
    reader.decoder_mut().set_limit(handshake_limit, true);
    let mut partial = Partial::new(&shared.metrics.budget, true);
    let first = tokio::select! {
        next = next_metered(reader, |len| partial.set(len).is_ok()) => match next {
            Some(Next::Frame(frame)) => Some(frame),
            _ => {
                tracing::info!(session = id, ?peer, "partial handshake cut: limits.max_unauthenticated_bytes reached");
                shared.metrics.rejected("memory_budget");
                guard.close_with(&Goaway::new(
                    GoawayCode::TooManyConnections,
                    "partial handshake cut: the router's budget for handshakes is full; try again shortly",
                ));
                return None;
            }
        },
        _ = tokio::time::sleep_until(deadline.into()) => None,
        _ = shared.close_all.cancelled() => return None,
    };
    drop(partial);
    let event = match first {
        None => session.handle_timeout(Instant::now()),
        Some(frame) => match frame {
            None => return None,
            Some(Err(e)) => {
                shared.metrics.protocol_error(e.kind());
                session.handle_error(&e)
            }
            Some(Ok(frame)) => {
                if let Frame::Handshake(hello) = &frame {
                    level = Some(hello.extension);
                    wants_acks = hello.wants_acks && hello.extension >= 1;
                }
                match shared.tarpit_enter(peer) {
                    Ok(taken) => slot = taken,
                    Err(full) => {
                        // Not checked: a checked guess would tell its answer by the ack's
                        // absence. Told to come back, never to stop.
                        if full.first {
                            tracing::warn!(
                                session = id,
                                ?peer,
                                max_in_flight = shared.config.auth.tarpit_max_in_flight,
                                "tarpit full for this address: its handshakes are turned away unchecked until a delayed refusal is sent"
                            );
                        } else {
                            tracing::debug!(session = id, ?peer, "throttled: tarpit full");
                        }
                        shared.metrics.rejected("throttled");
                        let goaway = Goaway::new(
                            GoawayCode::TooManyConnections,
                            "throttled: too many wrong credentials from this address are being answered; try again shortly",
                        );
                        let coded = level != Some(0);
                        refuse(reader, writer, guard, transport, goaway, coded).await;
                        return None;
                    }
                }
                session.handle_frame(Instant::now(), frame)
            }
        },
    };
    let hello = match event {
        Event::Admitted(hello) => {
            // A right credential never waits on the tarpit.
            drop(slot);
            hello
        }
        Event::Close(goaway) => {
            let delay = shared.handshake_failed(peer, goaway.code);
            tracing::info!(
                session = id,
                ?peer,
                code = goaway.code.kind(),
                reason = %goaway.reason,
                delay_ms = delay.as_millis() as u64,
                "handshake refused"
            );
            shared.metrics.rejected(goaway.code.kind());
            if !delay.is_zero() {
                // The tarpit: a wrong credential's answer waits, holding its slot.
                shared.metrics.tarpitted();
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shared.close_all.cancelled() => {}
                }
            }
            drop(slot);
            // A YoMo client gets what YoMo's zipper sends, the message alone; the QUIC
            // close reason still starts with the kind.
            let coded = level != Some(0);
            refuse(reader, writer, guard, transport, goaway, coded).await;
            return None;
        }
        // The session answers a first frame only with Admitted or Close.
        _ => return None,
    };
    if let Some(left) = shared.held_off(peer, &hello.name) {
        let goaway = Goaway::new(
            GoawayCode::SlowConsumer,
            format!(
                "evicted as a slow consumer; held off for {} ms more",
                left.as_millis()
            ),
        );
        tracing::info!(session = id, name = %hello.name, ?peer, "slow consumer held off");
        shared.metrics.rejected("held_off");
        let coded = hello.extension >= 1;
        refuse(reader, writer, guard, transport, goaway, coded).await;
        return None;
    }
    reader.decoder_mut().set_limit(full_limit, false);
    Some((hello, wants_acks, guard))
}

/// An admitted connection's parts that live until it closes: its outbox, its entry in
/// `/connz`, its writer task, and the acknowledgements task of a client that wants them.
struct Attached {
    outbox: Arc<Outbox>,
    registered: Registered,
    writer_task: AbortOnDrop,
    acks: Option<Arc<Acks>>,
    /// Stops the acknowledgements task when the connection goes.
    _acks_stop: tokio_util::sync::DropGuard,
}

/// The attach phase: registers the connection (`/connz`), queues the handshake ack,
/// subscribes a receiving client (routes, the federation), and starts the writer and,
/// for a y3 client that asked, the stored acknowledgements (never a YoMo client: an
/// unknown frame type makes it reconnect).
fn attach(
    shared: &Arc<Shared>,
    hello: &Peer,
    (id, peer, transport): (SessionId, Option<std::net::SocketAddr>, TransportKind),
    (writer, acked, handoff): (
        FrameWriter,
        Option<y3_transport::tcp_acked::TcpAcked>,
        Option<Handoff>,
    ),
    wants_acks: bool,
) -> Attached {
    let client_type = hello.client_type;
    let y3 = hello.extension >= 1;
    let outbox = Arc::new(Outbox::new(&shared.config.queue, shared.metrics.clone()));
    let registered = shared.connections.register(Registration {
        id,
        name: hello.name.clone(),
        client_id: hello.id.clone(),
        kind: Kind::of(client_type),
        protocol: if y3 { "y3" } else { "yomo" },
        transport: transport.name(),
        remote: peer,
        observed: if client_type.receives() {
            hello.observed.clone()
        } else {
            Vec::new()
        },
        filters: hello
            .filters
            .iter()
            .map(|(tag, f)| (*tag, f.as_str().to_owned()))
            .collect(),
    });
    let probe = Arc::downgrade(&outbox);
    registered.set_queue(Box::new(move || {
        probe.upgrade().map(|o| o.queue_state()).unwrap_or_default()
    }));
    outbox.push_control(Frame::HandshakeAck);
    if client_type.receives() {
        shared.metrics.budget.register_consumer(&outbox);
        let filters: Vec<_> = hello
            .filters
            .iter()
            .map(|(tag, filter)| {
                let (fid, counters) = shared.metrics.filter(*tag, filter.as_str());
                let route_filter = RouteFilter::new(fid, filter.clone(), counters);
                (*tag, Arc::new(route_filter))
            })
            .collect();
        shared.routes.subscribe(
            id,
            &hello.observed,
            &hello.wanted_target,
            outbox.clone(),
            &filters,
        );
        if let Some(federation) = &shared.federation {
            federation.observe(id, &hello.name, &hello.observed);
        }
    }
    let writer_task = AbortOnDrop(tokio::spawn(write_loop(
        (writer, handoff),
        StoredAt::new(acked),
        outbox.clone(),
        shared.metrics.clone(),
        registered.counters(),
    )));

    // Stored acknowledgements, for a y3 client that asked (never a YoMo client: an unknown
    // frame type makes it reconnect).
    let acks = wants_acks.then(|| Arc::new(Acks::for_transport(transport)));
    let acks_stop = tokio_util::sync::CancellationToken::new();
    if let Some(acks) = &acks {
        tokio::spawn(acks.clone().run(outbox.clone(), acks_stop.clone()));
    }
    Attached {
        outbox,
        registered,
        writer_task,
        acks,
        _acks_stop: acks_stop.drop_guard(),
    }
}

/// The leave phase: a receiving client's routes (and federation interest) go as soon as
/// its reads end, before its queue is drained.
fn leave(shared: &Shared, id: SessionId, client_type: ClientType) {
    if client_type.receives() {
        shared.routes.unsubscribe(id);
        if let Some(federation) = &shared.federation {
            federation.leave(id);
        }
    }
}

/// How a connection closes once its reads ended: how long its writer may take to deliver
/// what is queued, whether to read on until the peer closes, and the goaway it is told.
struct Closing {
    /// Whether the client is a y3 one (it reads goaway frames).
    y3: bool,
    wait: Duration,
    drain_reads: bool,
    goaway: Option<Goaway>,
}

/// The end-of-read policy: what each [`End`] does to the queue (finished or aborted, with
/// a goaway frame for y3 clients) and how the connection then closes.
fn closing(
    shared: &Shared,
    outbox: &Outbox,
    end: End,
    (id, peer): (SessionId, Option<std::net::SocketAddr>),
    hello: &Peer,
) -> Closing {
    let y3 = hello.extension >= 1;
    // What the client is told: a goaway frame (y3 clients) before the stream ends, and
    // the same reason in the QUIC close.
    let tail = |goaway: &Goaway| y3.then(|| Frame::Goaway(goaway.clone()));
    let (wait, drain_reads, goaway) = match end {
        End::Eof => {
            outbox.finish(None);
            (LINGER, false, None)
        }
        End::Shutdown => {
            let goaway = Goaway::new(GoawayCode::ShuttingDown, "router shutting down");
            outbox.finish(tail(&goaway));
            (shared.drain_left(), true, Some(goaway))
        }
        End::ProtocolError(goaway) => {
            tracing::warn!(session = id, reason = %goaway.reason, "closing on protocol error");
            outbox.abort(tail(&goaway), Drop::Disconnected);
            (LINGER, true, Some(goaway))
        }
        End::ReadError => {
            outbox.abort(None, Drop::Disconnected);
            (Duration::ZERO, false, None)
        }
        End::Cut(goaway) => {
            tracing::warn!(
                session = id,
                name = %hello.name,
                ?peer,
                reason = %goaway.reason,
                "partial frame cut"
            );
            outbox.abort(tail(&goaway), Drop::Disconnected);
            (Duration::ZERO, false, Some(goaway))
        }
        End::Evicted => {
            let queue = &shared.config.queue;
            let why = outbox.eviction().unwrap_or(Eviction::Deadline);
            let reason = match why {
                Eviction::Deadline => format!(
                    "took nothing for {} ms (write deadline)",
                    queue.write_deadline_ms
                ),
                Eviction::Backlog => format!(
                    "took nothing for {} ms and fell {} bytes or {} frames behind",
                    queue.block_timeout_ms,
                    queue.max_bytes.saturating_mul(OVERDRAFT),
                    queue.capacity.saturating_mul(OVERDRAFT)
                ),
                Eviction::Budget => format!(
                    "took nothing for {} ms while the router's memory budget \
                     (limits.max_queued_bytes) was full",
                    queue.block_timeout_ms
                ),
            };
            tracing::warn!(
                session = id,
                name = %hello.name,
                id = %hello.id,
                ?peer,
                why = why.name(),
                "slow consumer evicted: {reason}"
            );
            shared.evicted(peer, &hello.name);
            let goaway = Goaway::new(GoawayCode::SlowConsumer, reason);
            (Duration::ZERO, false, Some(goaway))
        }
    };
    Closing {
        y3,
        wait,
        drain_reads,
        goaway,
    }
}

/// The close phase: lets the writer deliver what is queued (within the plan's wait),
/// reads on until the peer closes when the plan says so, then closes the transport with
/// the plan's goaway.
async fn close(
    plan: Closing,
    attached: Attached,
    reader: &mut FrameReader,
    guard: Guard,
    (id, client_type): (SessionId, ClientType),
) {
    let Closing {
        y3,
        wait,
        drain_reads,
        goaway,
    } = plan;
    let closed = || {
        tracing::debug!(
            session = id,
            client_type = client_type.name(),
            "client closed"
        )
    };
    let Attached {
        outbox,
        mut writer_task,
        ..
    } = attached;
    if let (Some(goaway), false) = (&goaway, y3) {
        if !goaway.code.is_retryable() {
            // A YoMo client reads the end of the stream as a lost connection and comes
            // back at once: the close with code 0x13 must reach it first.
            drop(writer_task);
            guard.close_with(goaway);
            closed();
            return;
        }
    }
    if tokio::time::timeout(wait, &mut writer_task.0)
        .await
        .is_err()
    {
        // The peer does not take its frames: give up on them.
        outbox.abort(None, Drop::Disconnected);
    }
    drop(writer_task);
    if drain_reads {
        // Read (and discard) until the peer closes, so that it sees our last frames
        // rather than a reset.
        let _ = tokio::time::timeout(LINGER, async {
            while let Some(Ok(_)) = reader.next().await {}
        })
        .await;
    }
    match goaway {
        // Over QUIC the close would cut off the last frames still in flight: wait (a
        // little) for the client to close first, as it does on a goaway.
        Some(goaway) if drain_reads => guard.linger(LINGER, Some(&goaway)).await,
        Some(goaway) => guard.close_with(&goaway),
        None => guard.close(),
    }
    closed();
}

/// Refuses a client: a rejected frame where the refusal is final (YoMo's clients give up
/// for good on one), with the y3 code when `coded`, then the close with the goaway's code,
/// after the client had a moment to read the frame and close by itself. A refusal worth retrying (the router is full)
/// reaches a QUIC client as the close alone, so that YoMo's clients come back.
async fn refuse(
    reader: &mut FrameReader,
    writer: &mut FrameWriter,
    guard: Guard,
    transport: TransportKind,
    goaway: Goaway,
    coded: bool,
) {
    let quic = transport == TransportKind::Quic;
    if !(quic && goaway.code.is_retryable()) {
        let frame = if coded {
            goaway.clone()
        } else {
            Goaway::new(GoawayCode::Unspecified, goaway.reason.clone())
        };
        let _ = tokio::time::timeout(LINGER, async {
            writer.send(Frame::Rejected(frame)).await?;
            writer.close().await
        })
        .await;
        let _ = tokio::time::timeout(LINGER, async {
            while let Some(Ok(_)) = reader.next().await {}
        })
        .await;
        // The reader ends at once after a decode error: over QUIC, wait for the client's
        // own close too, or ours would overtake the rejected frame.
        guard.linger(LINGER, Some(&goaway)).await;
        return;
    }
    guard.close_with(&goaway);
}

/// The read phase: takes the client's frames as they come and routes them (or drops them,
/// counted) until the read side ends, step by step:
///
/// ```text
///   between frames: shutdown, drain, eviction, skips  (Reading::between_frames)
///     ─▶ the next frame: complete in the buffer, or waited for  (wait_for_frame)
///     ─▶ end of stream, read or protocol error?
///     ─▶ the session's decision: route (routing::route), drop (counted), close
/// ```
async fn read_loop(
    shared: &Shared,
    session: &mut Session,
    reader: &mut FrameReader,
    outbox: &Outbox,
    (id, conn): (SessionId, ConnCounters),
    hello: &Peer,
    acks: Option<&Arc<Acks>>,
) -> End {
    let mut reading = Reading::new(shared, (id, conn), hello, acks);
    // Frames decoded from one read arrived together: one clock read serves them all
    // (refreshed at least every 64 frames).
    let mut now = Instant::now();
    let mut same_read = 0u32;
    // Pinned once: a fresh `cancelled()` per frame would register and unregister with
    // the tokens' notifiers on every frame.
    let close_all = shared.close_all.cancelled();
    let drain_sources = shared.drain_sources.cancelled();
    let evicted = outbox.evicted();
    let stall = shared.config.frame_stall_timeout();
    let timer = tokio::time::sleep(stall);
    // The bytes of the frame being read, charged to the memory budget as they arrive.
    let partial = Partial::new(&shared.metrics.budget, false);
    // Cancelled when its stalled partial frame is cut to make room for another's.
    let cut_token = partial.cut_token();
    let cut = cut_token.cancelled();
    tokio::pin!(close_all, drain_sources, evicted, timer, cut);
    let mut pending = Pending {
        partial,
        since: None,
        stall,
        timer,
    };
    let mut wakeups = Wakeups {
        close_all,
        drain_sources,
        evicted,
        cut,
    };
    // Yields every so many frames so that an idle worker takes this reader or the writers
    // it woke (`spread.rs`).
    let mut spread = Spread::default();
    // Writers are woken once per read, not per frame (`wakes.rs`): before the socket is
    // read again, before any wait, and before a hand-over.
    reading.ingress.defer_wakes();
    loop {
        if spread.due() {
            reading.ingress.wake_writers();
        }
        if spread.frame().await {
            // It may have waited for a thread: the next frame reads the clock again.
            same_read = u32::MAX / 2;
        }
        if let Some(end) = reading.between_frames(reader, outbox) {
            return end;
        }
        let buffered = !reader.read_buffer().is_empty();
        // A frame that is already complete in the buffer (or on the socket) is taken without
        // touching the timer; only a wait re-arms it (`wait_for_frame`). One complete in
        // the buffer is decoded where it lies (`next_buffered`: no stream adapters).
        let buffered_frame = next_buffered(reader);
        if buffered_frame.is_none() {
            // The frames of the last read are routed: their writers take them now.
            reading.ingress.wake_writers();
        }
        let mut frame = match buffered_frame {
            Some(frame) => Some(frame),
            None => match next_or_skipped(reader).now_or_never() {
                Some(Next::Frame(frame)) => frame,
                Some(Next::Skipped(skipped)) => {
                    reading.skipped(skipped);
                    continue;
                }
                None => {
                    let wait = wait_for_frame(&mut reading, reader, &mut pending, &mut wakeups);
                    match spread.watch(wait).await {
                        Waited::Frame(frame) => frame,
                        Waited::Again => continue,
                        Waited::End(end) => return end,
                    }
                }
            },
        };
        // A frame completed: what is buffered now (if anything) is the next frame's start;
        // the frame's own bytes are charged with it (`detach_and_charge`).
        pending.since = None;
        pending.partial.clear();
        // Frames the codec skipped on its way to this one came before it: handled first, so
        // that a client's stored count numbers its frames in the order it wrote them.
        if let Some(skipped) = reader.decoder_mut().take_skipped() {
            reading.skipped(skipped);
        }
        // The end of the stream, a failed read, or a protocol error (counted; the session's
        // goaway when it has one) ends the read side.
        // Matched where it lies: the frame is moved only into its last recipient's queue.
        let frame = match &mut frame {
            None => return End::Eof,
            Some(Err(FrameError::Io(e))) => {
                tracing::debug!(session = id, error = %e, "read failed");
                return End::ReadError;
            }
            Some(Err(e)) => {
                shared.metrics.protocol_error(e.kind());
                return match session.handle_error(e) {
                    Event::Close(goaway) => End::ProtocolError(goaway),
                    _ => End::ReadError,
                };
            }
            Some(Ok(frame)) => frame,
        };
        same_read += 1;
        if !buffered || same_read >= 64 {
            now = Instant::now();
            same_read = 0;
        }
        // The session's decision: routed (`routing::route_in_place`, the hot path), dropped
        // (counted) or closed. A data frame of an open session is checked where it lies
        // (`check_data`) by `Ingress::data`, the arms the MQTT listener's publishes share.
        if let Frame::Data(data) = frame {
            let (ingress, acks) = (&mut reading.ingress, reading.acks);
            match spread
                .watch(ingress.data(shared, session, data, now, acks))
                .await
            {
                Handled::Routed => {
                    if reading.ingress.fanned_out() {
                        spread.fanned_out();
                    }
                    continue;
                }
                Handled::Dropped => continue,
                Handled::Close(goaway) => return End::ProtocolError(goaway),
                Handled::NotOpen => {}
            }
        }
        // Any other frame (or a data frame before the handshake): the session's event.
        let frame = std::mem::replace(frame, Frame::HandshakeAck);
        if let Some(end) = reading.event(session, frame, now).await {
            return end;
        }
    }
}

/// One connection's reading, across its frames: who the client is, its view of the
/// routes, and what it was told and what was logged about it (once per connection).
struct Reading<'a> {
    shared: &'a Shared,
    id: SessionId,
    hello: &'a Peer,
    acks: Option<&'a Arc<Acks>>,
    /// A client that does not receive (a source): drained on a shutdown.
    sender_only: bool,
    /// A y3 source: told to stop (a goaway) on a drain rather than closed at once.
    y3_source: bool,
    /// Its data frames' way into the routing table.
    ingress: Ingress,
    /// Whether the drain's goaway was queued for it.
    told_to_stop: bool,
    /// Frames skipped on this connection so far (the first skip is logged as a warning).
    skips: u64,
}

impl<'a> Reading<'a> {
    fn new(
        shared: &'a Shared,
        (id, conn): (SessionId, ConnCounters),
        hello: &'a Peer,
        acks: Option<&'a Arc<Acks>>,
    ) -> Reading<'a> {
        let sender_only = !hello.client_type.receives();
        Reading {
            shared,
            id,
            hello,
            acks,
            sender_only,
            y3_source: hello.extension >= 1 && sender_only,
            ingress: Ingress::new(shared, (id, conn), hello),
            told_to_stop: false,
            skips: 0,
        }
    }

    /// The checks between frames, with plain loads: the router closing, a drain (a y3
    /// source is told to stop once, a YoMo source is closed to reconnect), an eviction,
    /// and skips the codec made. The wait polls the reader first and returns as soon as it
    /// has a frame, so a client that keeps the reader always ready would otherwise never
    /// let these be seen.
    #[inline]
    fn between_frames(&mut self, reader: &mut FrameReader, outbox: &Outbox) -> Option<End> {
        if self.shared.is_closing() {
            return Some(End::Shutdown);
        }
        if self.sender_only && !self.told_to_stop && self.shared.is_draining() {
            if !self.y3_source {
                // YoMo's sources are closed right away and reconnect (to the router's
                // successor); stream functions stay until everything queued reached them.
                return Some(End::Shutdown);
            }
            self.told_to_stop = true;
            let goaway = Goaway::new(GoawayCode::ShuttingDown, "router shutting down");
            outbox.push_control(Frame::Goaway(goaway));
        }
        if outbox.is_evicted() {
            return Some(End::Evicted);
        }
        if let Some(skipped) = reader.decoder_mut().take_skipped() {
            self.skipped(skipped);
        }
        None
    }

    /// Frames the codec skipped (over `limits.max_frame_len`): see [`skipped_too_long`].
    fn skipped(&mut self, skipped: Skipped) {
        let (shared, id, hello, acks) = (self.shared, self.id, self.hello, self.acks);
        skipped_too_long(shared, skipped, id, hello, acks, &mut self.skips);
    }

    /// The end of a connection the session closed (a protocol error, counted by kind).
    /// A frame that is not an open session's data frame: the session's event for it
    /// (routed, dropped, or the connection closed: its end).
    async fn event(&mut self, session: &mut Session, frame: Frame, now: Instant) -> Option<End> {
        let (shared, acks) = (self.shared, self.acks);
        match session.handle_frame(now, frame) {
            Event::Route(routed) => {
                let (mut data, located) = routed.into_parts();
                self.ingress
                    .route(shared, (&mut data, located), now, acks)
                    .await;
            }
            Event::Drop(data, reason) => self.ingress.drop_data(shared, &data, reason, acks),
            Event::Close(goaway) => return Some(self.protocol_close(goaway)),
            Event::Admitted(..) | Event::Nothing => {}
        }
        None
    }

    fn protocol_close(&self, goaway: Goaway) -> End {
        count_close(self.shared, &goaway);
        End::ProtocolError(goaway)
    }
}

/// The frame being read: its bytes charged to the memory budget, when a wait first saw it
/// begun, and the stall timer.
struct Pending<'a, 'p> {
    partial: Partial<'a>,
    /// When a wait first saw the frame begun (`None`: nothing buffered yet).
    since: Option<Instant>,
    /// `limits.frame_stall_timeout_ms`.
    stall: Duration,
    timer: Pin<&'p mut tokio::time::Sleep>,
}

/// What ends a wait for a frame besides the socket, pinned once per connection.
struct Wakeups<'a, 'p> {
    /// The router closes.
    close_all: Pin<&'p mut WaitForCancellationFuture<'a>>,
    /// The router drains its sources.
    drain_sources: Pin<&'p mut WaitForCancellationFuture<'a>>,
    /// This client is evicted as a slow consumer.
    evicted: Pin<&'p mut WaitForCancellationFuture<'a>>,
    /// Its stalled partial frame is cut to make room for another's.
    cut: Pin<&'p mut WaitForCancellationFuture<'a>>,
}

/// What [`wait_for_frame`] saw.
enum Waited {
    /// A frame (or error, or the end of the stream), as `reader.next()` gives it.
    Frame(Option<Result<Frame, FrameError>>),
    /// Back to the checks between frames (skips counted, a drain, the timer re-armed).
    Again,
    /// The read side ends.
    End(End),
}

/// Waits for the next frame with the stall timer re-armed: for the frame begun in the
/// buffer, the stall timeout from when the wait first saw it; with nothing buffered, half
/// of it, to look again. A partial frame is therefore cut between one and one and a half
/// stall timeouts after its first bytes, however slowly the rest trickles in. The wait also
/// ends on the router closing or draining (a source not yet told), an eviction, and the
/// memory budget refusing or cutting the partial frame.
async fn wait_for_frame(
    reading: &mut Reading<'_>,
    reader: &mut FrameReader,
    pending: &mut Pending<'_, '_>,
    wakeups: &mut Wakeups<'_, '_>,
) -> Waited {
    let waiting = Instant::now();
    let deadline = if !mid_frame(reader) {
        pending.since = None;
        waiting + pending.stall / 2
    } else {
        *pending.since.get_or_insert(waiting) + pending.stall
    };
    pending.timer.as_mut().reset(deadline.into());
    let partial = &mut pending.partial;
    let drain = reading.sender_only && !reading.told_to_stop;
    tokio::select! {
        biased;
        next = next_metered(reader, |len| partial.set(len).is_ok()) => match next {
            Some(Next::Frame(frame)) => Waited::Frame(frame),
            Some(Next::Skipped(skipped)) => {
                reading.skipped(skipped);
                Waited::Again
            }
            None => Waited::End(budget_cut(reader, "partial frame")),
        },
        _ = wakeups.close_all.as_mut() => Waited::End(End::Shutdown),
        _ = wakeups.drain_sources.as_mut(), if drain => Waited::Again,
        _ = wakeups.evicted.as_mut() => Waited::End(End::Evicted),
        _ = wakeups.cut.as_mut() => Waited::End(budget_cut(reader, "stalled partial frame")),
        _ = pending.timer.as_mut() => stalled(reading.shared, reader, &mut pending.since, pending.stall),
    }
}

/// The end of a connection whose partial frame (`what`) the memory budget cut.
fn budget_cut(reader: &FrameReader, what: &str) -> End {
    let reason = format!(
        "memory_budget: {what} of {} bytes cut, the router's memory budget \
         (limits.max_queued_bytes) is full",
        partial_len(reader)
    );
    End::Cut(Goaway::new(GoawayCode::TooManyConnections, reason))
}

/// The stall timer fired: the frame begun in the buffer `since` has stalled once it is
/// older than `stall` (a protocol error, counted as `frame_stalled`); otherwise the wait
/// looks again (and starts the clock of a frame it had not seen begun).
fn stalled(
    shared: &Shared,
    reader: &FrameReader,
    since: &mut Option<Instant>,
    stall: Duration,
) -> Waited {
    let since = match *since {
        _ if !mid_frame(reader) => return Waited::Again,
        Some(since) => since,
        None => {
            *since = Some(Instant::now());
            return Waited::Again;
        }
    };
    if since.elapsed() < stall {
        return Waited::Again;
    }
    shared.metrics.protocol_error("frame_stalled");
    let reason = format!(
        "frame stalled: {} bytes buffered{} for {} ms",
        reader.read_buffer().len(),
        if reader.decoder().skipping() {
            " (skipping an over-long frame)"
        } else {
            ""
        },
        since.elapsed().as_millis()
    );
    Waited::End(End::ProtocolError(Goaway::new(
        GoawayCode::ProtocolError,
        reason,
    )))
}

/// Counts and logs frames the codec skipped for being over `limits.max_frame_len` (the
/// connection stays up): the first skip of a connection as a warning with who sent it, later
/// ones at debug level with the connection's running total (`skips`). For a client that wants
/// stored acknowledgements, each skipped data frame is handled (dropped and counted) and
/// reported to it as refused (`too_long`), so the count stays in step and the client does
/// not take it for stored.
fn skipped_too_long(
    shared: &Shared,
    skipped: Skipped,
    id: SessionId,
    hello: &Peer,
    acks: Option<&Arc<Acks>>,
    skips: &mut u64,
) {
    shared.metrics.skip("too_long", skipped.frames);
    let first = *skips == 0;
    *skips += skipped.frames;
    let last_frame = y3_transport::frame::kind::name(skipped.last_kind);
    let limit = shared.config.limits.max_frame_len;
    if first {
        tracing::warn!(
            session = id,
            name = %hello.name,
            id = %hello.id,
            client_type = hello.client_type.name(),
            frames = skipped.frames,
            last_frame,
            last_len = skipped.last_len,
            limit,
            "skipped a frame over limits.max_frame_len (further ones on this connection are \
             logged at debug level)"
        );
    } else {
        tracing::debug!(
            session = id,
            frames = skipped.frames,
            total = *skips,
            last_len = skipped.last_len,
            limit,
            "skipped frames over limits.max_frame_len"
        );
    }
    if let Some(acks) = acks {
        for _ in 0..skipped.data {
            acks.take().refused(RefusedReason::TooLong);
        }
    }
}

/// The data frames of the batch being written: (tag, payload length, read at). They are
/// counted as written once flushed; any still here when the writer stops (an error, or
/// the connection's task cancelled mid-write) are counted as dropped (`disconnected`).
struct InFlight {
    frames: Vec<(u32, usize, Instant)>,
    metrics: Arc<Metrics>,
}

impl std::ops::Drop for InFlight {
    fn drop(&mut self) {
        let n = self.frames.len();
        self.metrics.writing(-(n as i64));
        self.metrics.dropped(Drop::Disconnected, n as u64);
        for &(tag, _, _) in &self.frames {
            self.metrics.dropped_tag(tag, 1);
        }
    }
}

/// Drains the outbox into the socket: feed a batch, flush once. With a `handoff`, its data
/// frames go there instead of the socket (`handoff.rs`), under the same rules.
async fn write_loop(
    (mut writer, mut handoff): (FrameWriter, Option<Handoff>),
    mut stored_at: StoredAt,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
    conn: ConnCounters,
) -> Result<(), FrameError> {
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    let mut written = InFlight {
        frames: Vec::with_capacity(MAX_BATCH),
        metrics: metrics.clone(),
    };
    let mut latencies = LocalLatency::default();
    let mut tags = TagCache::new(metrics.clone(), Direction::Out, conn);
    // Those who wait for frames of the batch to be flushed (durable consumers).
    let mut told = Vec::new();
    let result = async {
        while outbox.pop_batch(&mut batch, MAX_BATCH).await {
            written
                .frames
                .extend(batch.iter().filter_map(|q| match &*q.frame {
                    Frame::Data(d) => Some((d.tag, d.payload.len(), q.at)),
                    _ => None,
                }));
            // In the ledger, between the queue and the socket.
            metrics.writing(written.frames.len() as i64);
            // Data frames the handoff took: theirs reached the recipient even when a later
            // one of the batch finds it gone.
            let mut handed = 0;
            let sent = async {
                for queued in batch.drain(..) {
                    match (&*queued.frame, &mut handoff) {
                        (Frame::Data(d), Some(handoff)) => {
                            handoff.take(d)?;
                            handed += 1;
                        }
                        // Encoded where it lies in the batch (by reference: no move of the
                        // frame into the sink).
                        (frame, _) => y3_transport::feed_ref(&mut writer, frame).await?,
                    }
                    told.extend(queued.written);
                }
                if let Some(handoff) = &mut handoff {
                    handoff.batch_end();
                }
                writer.flush().await
            }
            .await;
            // On an error the batch left the queue but not (surely) the socket: `written`
            // counts it as dropped when it goes, as it does when this task is cancelled;
            // but what a handoff took before it found its recipient gone was written.
            if let Err(e) = sent {
                count_written(
                    &metrics,
                    &mut written.frames,
                    handed,
                    (&mut tags, &mut latencies),
                );
                return Err(e);
            }
            stored_at.flushed(&mut told);
            let all = written.frames.len();
            count_written(
                &metrics,
                &mut written.frames,
                all,
                (&mut tags, &mut latencies),
            );
        }
        writer.close().await
    }
    .await;
    if result.is_err() {
        outbox.abort(None, Drop::Disconnected);
    }
    result
}

/// Counts the first `n` frames of a batch as written (out of the ledger's `writing`, into
/// `frames_out`, the tags' counters and the latency histogram) and takes them out of it.
fn count_written(
    metrics: &Metrics,
    frames: &mut Vec<(u32, usize, Instant)>,
    n: usize,
    (tags, latencies): (&mut TagCache, &mut LocalLatency),
) {
    // Out of `writing` before counted written: a reader never sees one twice.
    metrics.writing(-(n as i64));
    metrics.frames_out(n as u64);
    let now = Instant::now();
    // Counted by runs of one tag (a batch is mostly one run).
    let mut run: Option<(u32, u64, u64)> = None;
    for (tag, len, at) in frames.drain(..n) {
        latencies.observe(now.saturating_duration_since(at));
        match &mut run {
            Some((t, frames, bytes)) if *t == tag => {
                *frames += 1;
                *bytes += len as u64;
            }
            _ => {
                if let Some((t, frames, bytes)) = run.replace((tag, 1, len as u64)) {
                    tags.count_written(t, frames, bytes);
                }
            }
        }
    }
    if let Some((t, frames, bytes)) = run {
        tags.count_written(t, frames, bytes);
    }
    metrics.latencies(latencies);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QueueConfig;
    use crate::handoff::Gone;
    use crate::status::Connections;
    use y3_transport::frame::Data;
    use y3_transport::FrameCodec;

    /// A writer over an in-memory link handing its data frames to `handoff`; its
    /// outbox holds a handshake ack and the frames of tags 1, 2, 3, then finishes with a
    /// goaway. Returns the writer's result, the client's side of the link and the metrics.
    async fn write_with(
        handoff: Handoff,
    ) -> (Result<(), FrameError>, Connection, Arc<Metrics>, Registered) {
        let metrics = Arc::new(Metrics::new());
        let (client, server) = Connection::pair(FrameCodec::new(1 << 20), 64 * 1024);
        let outbox = Arc::new(Outbox::new(&QueueConfig::default(), metrics.clone()));
        let registered = Arc::new(Connections::default()).register(Registration {
            id: 1,
            name: "sink".into(),
            client_id: "sink".into(),
            kind: Kind::of(ClientType::StreamFunction),
            protocol: "y3",
            transport: "memory",
            remote: None,
            observed: vec![1, 2, 3],
            filters: Vec::new(),
        });
        outbox.push_control(Frame::HandshakeAck);
        for tag in 1..=3 {
            let frame = Frame::Data(Data::new(tag, vec![tag as u8; 10]));
            outbox.push(frame, Instant::now()).await;
        }
        let goaway = Goaway::new(GoawayCode::ShuttingDown, "bye");
        outbox.finish(Some(Frame::Goaway(goaway)));
        let result = write_loop(
            (server.writer, Some(handoff)),
            StoredAt::new(None),
            outbox,
            metrics.clone(),
            registered.counters(),
        )
        .await;
        (result, client, metrics, registered)
    }

    /// Data frames go to the handoff, in order, counted written as a socket's are; the
    /// control frames around them still cross the link.
    #[tokio::test]
    async fn a_handoff_takes_the_data_frames_and_the_link_the_control_frames() {
        let taken = Arc::new(std::sync::Mutex::new(Vec::new()));
        let handoff: Handoff = {
            let taken = taken.clone();
            Box::new(move |d: &Data| {
                taken.lock().unwrap().push((d.tag, d.payload.len()));
                Ok(())
            })
        };
        let (result, mut client, metrics, _registered) = write_with(handoff).await;
        result.expect("written");
        assert_eq!(*taken.lock().unwrap(), [(1, 10), (2, 10), (3, 10)]);
        assert!(matches!(
            client.reader.next().await,
            Some(Ok(Frame::HandshakeAck))
        ));
        assert!(matches!(
            client.reader.next().await,
            Some(Ok(Frame::Goaway(_)))
        ));
        assert!(
            client.reader.next().await.is_none(),
            "no data frame crossed"
        );
        let stats = metrics.stats();
        assert_eq!((stats.frames_out, stats.writing), (3, 0));
        assert_eq!(stats.drops(Drop::Disconnected), 0);
    }

    /// A recipient gone stops the writer: the frame it refused and the rest of its batch
    /// are counted dropped (`disconnected`), as a failed socket's; the one it took before
    /// is counted written, once.
    #[tokio::test]
    async fn a_gone_handoff_stops_the_writer_every_frame_counted() {
        let mut calls = 0;
        let handoff: Handoff = Box::new(move |_: &Data| {
            calls += 1;
            if calls == 2 {
                Err(Gone)
            } else {
                Ok(())
            }
        });
        let (result, _client, metrics, _registered) = write_with(handoff).await;
        assert!(result.is_err());
        let stats = metrics.stats();
        // The batch held all three: the first handed over, the second refused.
        assert_eq!((stats.frames_out, stats.writing), (1, 0));
        assert_eq!(stats.drops(Drop::Disconnected), 2);
    }
}
