//! The federation's tasks: the NATS connection, the publisher, the interest exchange, one
//! subscription per locally observed tag and one durable consumer per (function, tag).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream, AckKind};
use async_nats::{Client, ConnectOptions, HeaderMap, Subject};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use y3_transport::frame::Data;

use super::metrics::Lost;
use super::wire::{self, Stamp};
use super::{lock, Federation, Local, Queued, Receipt};
use crate::config::read_secret;
use crate::error::RouterError;
use crate::session::Routed;

/// Frames published per round of the publisher.
const MAX_BATCH: usize = 256;

/// Interest is announced at least this often; a router not heard from for three periods is
/// taken to observe nothing.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(5);

/// How often the publisher marks the plain subjects it sent frames on since their last
/// mark (a receiver counts the lost tail of a burst from it, `spec/federation.md`).
const MARK_EVERY: Duration = Duration::from_millis(250);

/// Every this many marking rounds (and after the NATS client reconnected), every plain
/// subject this router published on is marked again, sent or not since: a mark lost with a
/// connection, the publisher's or a receiver's, is made good.
const MARK_ALL_EVERY: u32 = 20;

/// Bytes a plain message takes besides its batch entries, at most: a packed message's stamp
/// (a 255-byte origin at most) or a batch's headers.
const MESSAGE_ROOM: usize = 1024;

/// Attempts at storing a durable frame before it is counted as lost.
const STORE_ATTEMPTS: u32 = 20;

/// How long JetStream waits before it delivers again a durable frame that was queued for a
/// session and dropped before it was written (the session went, or its queue dropped it).
const REDELIVER_UNWRITTEN: Duration = Duration::from_millis(100);

/// How long one pull request of a durable consumer waits for messages.
const PULL_EXPIRES: Duration = Duration::from_secs(2);

/// How long closing waits for the publisher to empty its queue.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// Connects to NATS (in the background: the router starts without it) and starts the
/// federation's tasks.
///
/// # Errors
/// [`RouterError::Secret`] for an unreadable credential file, [`RouterError::Config`] for
/// an invalid URL.
pub(crate) async fn start<L: Local>(
    fed: &Arc<Federation>,
    local: Arc<L>,
) -> Result<(), RouterError> {
    let config = &fed.config;
    let metrics = fed.metrics.clone();
    let name = fed.name.clone();
    let mut options = ConnectOptions::new()
        .name(format!("y3-router {name}"))
        .no_echo()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .retain_servers_order()
        .event_callback(move |event| {
            let (metrics, name) = (metrics.clone(), name.clone());
            async move {
                match event {
                    async_nats::Event::Connected => {
                        metrics.connected.set(1);
                        tracing::info!(router = %name, "federation: connected to NATS");
                    }
                    async_nats::Event::Disconnected => {
                        metrics.connected.set(0);
                        tracing::warn!(
                            router = %name,
                            "federation: NATS connection lost; routing locally, reconnecting"
                        );
                    }
                    other => tracing::warn!(router = %name, event = %other, "federation: NATS"),
                }
            }
        });
    let token = if config.token_file.as_os_str().is_empty() {
        config.token.clone()
    } else {
        read_secret("federation.token_file", &config.token_file)?
    };
    if !token.is_empty() {
        options = options.token(token);
    }
    if !config.user.is_empty() {
        let password = if config.password_file.as_os_str().is_empty() {
            config.password.clone()
        } else {
            read_secret("federation.password_file", &config.password_file)?
        };
        options = options.user_and_password(config.user.clone(), password);
    }
    if !config.nkey_file.as_os_str().is_empty() {
        options = options.nkey(read_secret("federation.nkey_file", &config.nkey_file)?);
    }
    if !config.credentials_file.as_os_str().is_empty() {
        options = options
            .credentials_file(&config.credentials_file)
            .await
            .map_err(|source| RouterError::Secret {
                field: "federation.credentials_file",
                path: config.credentials_file.clone(),
                source,
            })?;
    }
    if !config.tls_ca.as_os_str().is_empty() {
        options = options
            .add_root_certificates(config.tls_ca.clone())
            .require_tls(true);
    } else if config.tls_required {
        options = options.require_tls(true);
    }
    let mut addrs = Vec::new();
    for url in &config.urls {
        addrs.push(
            url.parse::<async_nats::ServerAddr>()
                .map_err(|_| RouterError::Config {
                    field: "federation.urls",
                    problem: "not a NATS URL",
                })?,
        );
    }
    let client = options
        .connect(addrs)
        .await
        .map_err(|_| RouterError::Config {
            field: "federation.urls",
            problem: "cannot start the NATS client",
        })?;
    // A store that is not acknowledged within this is published again (`store`).
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(client.clone());
    if lock(&fed.queued).is_empty() {
        return Err(RouterError::Config {
            field: "federation",
            problem: "started twice",
        });
    }
    // Before anything is published or subscribed: a second router with this name stops here.
    let claimed = super::claim::claim(fed, &client).await?;
    lock(&fed.tasks).push(claimed);
    let queued: Vec<_> = lock(&fed.queued).drain(..).collect();
    let publishers = queued
        .into_iter()
        .map(|rx| tokio::spawn(publish(fed.clone(), client.clone(), js.clone(), rx)))
        .collect();
    let interest = tokio::spawn(interest(fed.clone(), local, client, js));
    *lock(&fed.publishers) = publishers;
    lock(&fed.tasks).push(interest);
    tracing::info!(router = %fed.name, urls = ?config.urls, "federation starting");
    Ok(())
}

impl Federation {
    /// Stops taking new frames from NATS, lets the publisher empty its queue (bounded), and
    /// stops every task. Called once the router's connections are closed.
    pub async fn close(&self) {
        self.finishing.cancel();
        let publishers: Vec<_> = lock(&self.publishers).drain(..).collect();
        let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
        for mut publisher in publishers {
            if tokio::time::timeout_at(deadline, &mut publisher)
                .await
                .is_err()
            {
                publisher.abort();
            }
        }
        self.abort();
    }

    /// Stops every task at once (a router dropped without a shutdown).
    pub fn abort(&self) {
        self.finishing.cancel();
        for publisher in lock(&self.publishers).drain(..) {
            publisher.abort();
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

/// The publisher: takes frames from the queue, publishes them (durable ones through
/// JetStream, waiting for each batch to be stored), until the router closes.
async fn publish(
    fed: Arc<Federation>,
    client: Client,
    js: jetstream::Context,
    mut queued: tokio::sync::mpsc::Receiver<Queued>,
) {
    let prefix = fed.config.subject_prefix.clone();
    let mut tags: HashMap<u32, Sent> = HashMap::new();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut open: Vec<Open> = Vec::new();
    let mut stream_ready = false;
    let mut marking = Marking::new(&client);
    loop {
        let n = tokio::select! {
            n = queued.recv_many(&mut batch, MAX_BATCH) => n,
            all = marking.due(&client) => {
                mark(&fed, &client, &mut tags, all).await;
                continue;
            }
            _ = fed.finishing.cancelled() => {
                while let Ok(data) = queued.try_recv() {
                    batch.push(data);
                }
                if batch.is_empty() {
                    let _ = client.flush().await;
                    return;
                }
                batch.len()
            }
        };
        if n == 0 {
            return;
        }
        fed.progressed();
        // A tag that a router which does not read batches observes: one frame per message.
        let remote = fed.remote.read().unwrap_or_else(|e| e.into_inner()).clone();
        let max_payload = client.max_payload();
        let mut stored = Vec::new();
        for Queued { data, ticket } in batch.drain(..) {
            let sent = tags.entry(data.tag).or_insert_with(|| Sent {
                seq: 0,
                marked: 0,
                subject: Subject::from(wire::subject(&prefix, data.tag)),
            });
            if fed.config.is_durable(data.tag) {
                sent.seq += 1;
                let (seq, subject) = (sent.seq, sent.subject.clone());
                let headers = wire::durable_headers(&data, &fed.stamp(seq));
                if !stream_ready {
                    stream_ready = ensure_stream(&fed, &js).await;
                }
                let ack = js
                    .publish_with_headers(subject.clone(), headers.clone(), data.payload.clone())
                    .await;
                let ack = match ack {
                    // Never stored, however often it is published again: counted now,
                    // not after the attempts that would hold the other durable frames.
                    Err(e)
                        if e.kind() == jetstream::context::PublishErrorKind::MaxPayloadExceeded =>
                    {
                        too_large(&fed, &client, 1, data.payload.len());
                        if let Some(ticket) = ticket {
                            ticket.too_large();
                        }
                        continue;
                    }
                    ack => ack.ok(),
                };
                stored.push(Pending {
                    subject,
                    headers,
                    payload: data.payload,
                    ack,
                    ticket,
                });
                continue;
            }
            // Plain: joins the frames of its subject waiting in this round, up to the bound.
            let len = wire::entry_len(&data);
            let at = match open.iter().position(|o| o.tag == data.tag) {
                Some(at) if open[at].fits(len, &fed.config, max_payload) => at,
                Some(at) => {
                    let full = open.swap_remove(at);
                    send_plain(&fed, &client, full, sent).await;
                    open.push(Open::new(sent.subject.clone(), &remote, data.tag));
                    open.len() - 1
                }
                None => {
                    open.push(Open::new(sent.subject.clone(), &remote, data.tag));
                    open.len() - 1
                }
            };
            open[at].bytes += len;
            open[at].frames.push(data);
        }
        for o in open.drain(..) {
            if let Some(sent) = tags.get_mut(&o.tag) {
                send_plain(&fed, &client, o, sent).await;
            }
        }
        if !stored.is_empty() {
            store(&fed, &js, stored).await;
        }
    }
}

impl Federation {
    /// This router's stamp on its frame `seq` of a subject.
    fn stamp(&self, seq: u64) -> Stamp {
        Stamp {
            origin: self.name.to_string(),
            epoch: self.epoch,
            seq,
        }
    }
}

/// What the publisher sent on one tag's subject.
struct Sent {
    /// The last sequence number published: on a plain tag, only a message the client
    /// took numbers its frames, so a frame counted at the publisher (`publish_failed`,
    /// `too_large`) is no gap at a receiver.
    seq: u64,
    /// The sequence number the last mark carried.
    marked: u64,
    /// The subject, made once (not a `format!` per message).
    subject: Subject,
}

/// When the publisher marks its subjects: every [`MARK_EVERY`], all of them every
/// [`MARK_ALL_EVERY`] rounds and after a reconnect.
struct Marking {
    every: tokio::time::Interval,
    round: u32,
    connects: u64,
}

impl Marking {
    fn new(client: &Client) -> Marking {
        let mut every = tokio::time::interval(MARK_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Marking {
            every,
            round: 0,
            connects: Self::connects(client),
        }
    }

    fn connects(client: &Client) -> u64 {
        client
            .statistics()
            .connects
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for the next round; whether it marks every subject.
    async fn due(&mut self, client: &Client) -> bool {
        self.every.tick().await;
        self.round = self.round.wrapping_add(1);
        let connects = Self::connects(client);
        let reconnected = std::mem::replace(&mut self.connects, connects) != connects;
        reconnected || self.round.is_multiple_of(MARK_ALL_EVERY)
    }
}

/// Marks the plain subjects that frames went out on since their last mark (`all`: every
/// one), for routers that observe them and read marks. Called between rounds, when every
/// frame numbered so far was handed to the client, so a mark follows its frames.
async fn mark(fed: &Federation, client: &Client, tags: &mut HashMap<u32, Sent>, all: bool) {
    let remote = fed.remote.read().unwrap_or_else(|e| e.into_inner()).clone();
    for (tag, sent) in tags.iter_mut() {
        let wanted = remote.tags.contains(tag) && !remote.unmarked.contains(tag);
        if sent.seq == 0 || fed.config.is_durable(*tag) || !wanted {
            continue;
        }
        if sent.marked == sent.seq && !all {
            continue;
        }
        let headers = wire::mark(&fed.stamp(sent.seq));
        let published = client.publish_with_headers(sent.subject.clone(), headers, Bytes::new());
        if published.await.is_ok() {
            sent.marked = sent.seq;
        }
    }
}

/// Plain frames of one subject gathered for one message.
struct Open {
    tag: u32,
    subject: Subject,
    /// Whether every router observing the tag reads batches: then even a frame alone goes
    /// as a batch (of one), its hops and metadata in the body rather than in headers.
    batched: bool,
    /// Whether every router observing the tag reads packed messages: then the batch goes
    /// without headers, its stamp in the body too.
    packed: bool,
    frames: Vec<Data>,
    /// Their size as batch entries.
    bytes: usize,
}

impl Open {
    fn new(subject: Subject, remote: &super::Remote, tag: u32) -> Open {
        Open {
            tag,
            subject,
            batched: !remote.unbatched.contains(&tag),
            packed: !remote.unbatched.contains(&tag) && !remote.unpacked.contains(&tag),
            frames: Vec::new(),
            bytes: 0,
        }
    }

    /// Whether a frame of `len` bytes (as an entry) joins this message
    /// (`federation.batch_frames`, `federation.batch_bytes`, and the NATS server's
    /// `max_payload` less [`MESSAGE_ROOM`], so that frames a server takes one by one are
    /// never refused together; never for a tag that a router which does not read batches
    /// observes).
    fn fits(&self, len: usize, config: &super::FederationConfig, max_payload: usize) -> bool {
        let bound = config
            .batch_bytes
            .min(max_payload.saturating_sub(MESSAGE_ROOM));
        self.batched && self.frames.len() < config.batch_frames && self.bytes + len <= bound
    }
}

/// Publishes `open`'s frames as one message: packed (no headers), a batch, or a frame of
/// its own, as the routers observing the tag read; numbered after `sent`'s last, which
/// moves on only when the client takes the message.
async fn send_plain(fed: &Federation, client: &Client, open: Open, sent: &mut Sent) {
    let frames = open.frames.len() as u64;
    let first = fed.stamp(sent.seq + 1);
    let packed = match &open.frames[..] {
        [] => return,
        all if open.packed => wire::packed(all, &first),
        _ => None,
    };
    let published = match packed {
        Some(body) => client.publish(open.subject.clone(), body).await,
        None => {
            let (headers, payload) = match &open.frames[..] {
                [one] if !open.batched => (wire::headers(one, &first), one.payload.clone()),
                all => wire::batch(all, &first),
            };
            client
                .publish_with_headers(open.subject.clone(), headers, payload)
                .await
        }
    };
    match published {
        Ok(()) => {
            sent.seq += frames;
            fed.metrics.published.inc_by(frames);
            fed.metrics.published_messages.inc();
        }
        Err(e) if e.kind() == async_nats::client::PublishErrorKind::MaxPayloadExceeded => {
            let largest = open.frames.iter().map(|d| d.payload.len()).max();
            too_large(fed, client, frames, largest.unwrap_or(0));
        }
        Err(_) => fed.metrics.lost(Lost::PublishFailed, frames),
    }
}

/// Counts `frames` refused by the client for the NATS server's `max_payload` (`too_large`),
/// and logs the first such refusal with the sizes.
fn too_large(fed: &Federation, client: &Client, frames: u64, payload: usize) {
    if fed.metrics.lost_total(Lost::TooLarge) == 0 {
        tracing::warn!(
            payload,
            max_payload = client.max_payload(),
            "federation: a frame is larger than the NATS server's max_payload and crosses to \
             no router; further ones are counted (lost_total{{reason=\"too_large\"}}), not \
             logged (raise max_payload in the nats-server configuration, up to 64 MiB)"
        );
    }
    fed.metrics.lost(Lost::TooLarge, frames);
}

/// A durable frame on its way into the stream.
struct Pending {
    subject: Subject,
    headers: HeaderMap,
    payload: Bytes,
    ack: Option<jetstream::context::PublishAckFuture>,
    /// The sending client's acknowledgement, if it wants one.
    ticket: Option<Box<dyn Receipt>>,
}

/// Waits until JetStream stored every frame of `pending`, publishing the ones that failed
/// again, all at once, with a growing pause (the stream's leader moved, or a node is down):
/// the `Nats-Msg-Id` header makes a second copy of a stored frame a duplicate the stream
/// drops. Frames still not stored after [`STORE_ATTEMPTS`] are counted as lost.
async fn store(fed: &Federation, js: &jetstream::Context, mut pending: Vec<Pending>) {
    for attempt in 0..=STORE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt.min(10)))).await;
            for p in &mut pending {
                p.ack = js
                    .publish_with_headers(p.subject.clone(), p.headers.clone(), p.payload.clone())
                    .await
                    .ok();
            }
        }
        // All at once: each acknowledgement's timeout starts when it is awaited.
        let acks = pending.iter_mut().map(|p| {
            let ack = p.ack.take();
            async move {
                match ack {
                    Some(ack) => ack.await.is_ok(),
                    None => false,
                }
            }
        });
        let stored = futures_util::future::join_all(acks).await;
        let mut failed = Vec::new();
        for (mut p, stored) in pending.into_iter().zip(stored) {
            if stored {
                fed.metrics.published.inc();
                if let Some(ticket) = p.ticket.take() {
                    ticket.stored();
                }
            } else {
                failed.push(p);
            }
        }
        if failed.is_empty() {
            return;
        }
        if attempt == 0 {
            tracing::warn!(
                frames = failed.len(),
                "federation: JetStream did not store frames; publishing them again"
            );
        }
        pending = failed;
    }
    tracing::warn!(
        frames = pending.len(),
        "federation: JetStream never stored frames"
    );
    fed.metrics.lost(Lost::PublishFailed, pending.len() as u64);
    // A client waiting for them is told (its stored count would stop here otherwise), and
    // sends them again.
    for ticket in pending.into_iter().filter_map(|p| p.ticket) {
        ticket.not_stored();
    }
}

/// Creates the durable tags' stream if it does not exist. Returns whether it is there.
async fn ensure_stream(fed: &Federation, js: &jetstream::Context) -> bool {
    let c = &fed.config.stream;
    let config = stream::Config {
        name: c.name.clone(),
        subjects: fed
            .config
            .durable_tags
            .iter()
            .map(|&t| wire::subject(&fed.config.subject_prefix, t))
            .collect(),
        max_age: Duration::from_secs(c.max_age_s),
        max_bytes: c.max_bytes,
        num_replicas: c.replicas,
        duplicate_window: Duration::from_secs(c.duplicate_window_s),
        storage: stream::StorageType::File,
        ..Default::default()
    };
    match js.get_or_create_stream(config).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(stream = %c.name, error = %e, "federation: cannot create the stream");
            false
        }
    }
}

/// What a router announces: the tags its functions observe.
fn announcement(tags: &HashSet<u32>) -> Bytes {
    let mut tags: Vec<_> = tags.iter().map(u32::to_string).collect();
    tags.sort();
    Bytes::from(tags.join(","))
}

/// The interest task: keeps one subscription per locally observed (plain) tag and one
/// durable consumer per (function name, durable tag), announces this router's tags, and
/// learns the other routers'.
async fn interest<L: Local>(
    fed: Arc<Federation>,
    local: Arc<L>,
    client: Client,
    js: jetstream::Context,
) {
    let prefix = fed.config.subject_prefix.clone();
    let announce_subject = format!("{prefix}.interest.{}", fed.name);
    let mut heard = match client.subscribe(format!("{prefix}.interest.*")).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "federation: cannot subscribe to interest");
            return;
        }
    };
    let mut remote: HashMap<String, Heard> = HashMap::new();
    let mut plain: HashMap<u32, Task> = HashMap::new();
    let mut durable: HashMap<(Arc<str>, u32), Task> = HashMap::new();
    let mut announced: Option<HashSet<u32>> = None;
    let mut tick = tokio::time::interval(ANNOUNCE_EVERY);
    let mut sync = true;
    loop {
        // Reconcile local interest.
        let observers: Vec<_> = lock(&fed.local).values().cloned().collect();
        let mut want_plain = HashSet::new();
        let mut want_durable = HashSet::new();
        for o in &observers {
            for &tag in &o.tags {
                if fed.config.is_durable(tag) {
                    want_durable.insert((o.name.clone(), tag));
                } else {
                    want_plain.insert(tag);
                }
            }
        }
        plain.retain(|tag, task| want_plain.contains(tag) && !task.0.is_finished());
        durable.retain(|key, task| want_durable.contains(key) && !task.0.is_finished());
        for &tag in &want_plain {
            if let std::collections::hash_map::Entry::Vacant(slot) = plain.entry(tag) {
                match client.subscribe(wire::subject(&prefix, tag)).await {
                    Ok(sub) => {
                        fed.metrics.subscriptions.inc();
                        slot.insert(Task(tokio::spawn(receive(fed.clone(), local.clone(), sub))));
                    }
                    Err(e) => tracing::warn!(tag, error = %e, "federation: cannot subscribe"),
                }
            }
        }
        if !local.is_draining() {
            for key in &want_durable {
                if !durable.contains_key(key) {
                    let task =
                        consume(fed.clone(), local.clone(), js.clone(), key.0.clone(), key.1);
                    durable.insert(key.clone(), Task(tokio::spawn(task)));
                }
            }
        }
        let changed = announced.as_ref() != Some(&want_plain);
        if changed || sync {
            // Subscribed before announcing: whoever starts publishing on our word finds
            // the subscription in place.
            let _ = client.flush().await;
            let mut headers = HeaderMap::new();
            headers.insert(wire::READS_BATCHES, "1");
            headers.insert(wire::READS_PACKED, "1");
            headers.insert(wire::READS_MARKS, "1");
            if sync {
                headers.insert("Y3-Sync", "1");
            }
            if client
                .publish_with_headers(announce_subject.clone(), headers, announcement(&want_plain))
                .await
                .is_ok()
            {
                announced = Some(want_plain);
                sync = false;
            }
        }

        tokio::select! {
            _ = fed.changed.notified() => {}
            _ = local.draining(), if !local.is_draining() => {}
            _ = tick.tick() => {
                announced = None;
                let now = Instant::now();
                remote.retain(|_, h| now.duration_since(h.at) < 3 * ANNOUNCE_EVERY);
                publish_remote(&fed, &remote);
            }
            msg = heard.next() => {
                let Some(msg) = msg else { return };
                let Some(router) = msg.subject.rsplit('.').next() else { continue };
                if router == &*fed.name {
                    // Not our own (`no_echo`): another router announces under our name. Its
                    // interest still counts, so that what it wants is published, and
                    // dropped and counted there (`same_name`), not left unpublished unseen.
                    same_name(&fed, 0);
                }
                let tags: HashSet<u32> = std::str::from_utf8(&msg.payload)
                    .unwrap_or("")
                    .split(',')
                    .filter_map(|t| t.parse().ok())
                    .collect();
                let header = |name: &str| msg.headers.as_ref().is_some_and(|h| h.get(name).is_some());
                if header("Y3-Sync") {
                    // A router (re)started: tell it what we observe.
                    announced = None;
                }
                let heard = Heard {
                    tags,
                    reads_batches: header(wire::READS_BATCHES),
                    reads_packed: header(wire::READS_PACKED),
                    reads_marks: header(wire::READS_MARKS),
                    at: Instant::now(),
                };
                remote.insert(router.to_owned(), heard);
                publish_remote(&fed, &remote);
            }
        }
        if local.is_draining() {
            // Stop taking stored frames: what is not acknowledged is delivered again to the
            // router's successor.
            durable.clear();
        }
    }
}

/// Another router's latest announcement.
struct Heard {
    /// The tags its functions observe.
    tags: HashSet<u32>,
    /// Whether it reads batches (`Y3-Reads-Batches`); a router older than batches does not
    /// say so, and gets one frame per message.
    reads_batches: bool,
    /// Whether it reads packed messages (`Y3-Reads-Packed`); a router older than them gets
    /// batches with headers.
    reads_packed: bool,
    /// Whether it reads marks (`Y3-Reads-Marks`); a router older than them gets none (it
    /// would count them as malformed), and counts a lost tail when a later frame arrives.
    reads_marks: bool,
    /// When it was heard.
    at: Instant,
}

fn publish_remote(fed: &Federation, remote: &HashMap<String, Heard>) {
    let mut interest = super::Remote::default();
    for h in remote.values() {
        interest.tags.extend(h.tags.iter().copied());
        if !h.reads_batches {
            interest.unbatched.extend(h.tags.iter().copied());
        }
        if !h.reads_packed {
            interest.unpacked.extend(h.tags.iter().copied());
        }
        if !h.reads_marks {
            interest.unmarked.extend(h.tags.iter().copied());
        }
    }
    let pairs: usize = remote.values().map(|h| h.tags.len()).sum();
    fed.metrics.remote_interest.set(pairs as i64);
    *fed.remote.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(interest);
}

/// A task aborted when dropped (a subscription or consumer nobody wants any more).
struct Task(JoinHandle<()>);

impl std::ops::Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Counts a subscription or consumer active until dropped (its gauge was raised when it
/// became active).
struct Active(prometheus_client::metrics::gauge::Gauge);

impl std::ops::Drop for Active {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Per-publisher sequence tracking: counts gaps as losses.
#[derive(Default)]
struct Gaps {
    last: HashMap<String, (u64, u64)>,
}

impl Gaps {
    /// Records `stamp`; returns how many messages before it were missed.
    #[cfg(test)]
    fn record(&mut self, stamp: &Stamp) -> u64 {
        self.record_run(stamp, 1)
    }

    /// Records `frames` (at least one) numbered from `first.seq` on, one message's (a
    /// batch's frames follow each other); returns how many frames before them were missed.
    fn record_run(&mut self, first: &Stamp, frames: u64) -> u64 {
        self.reach(first, first.seq, first.seq + frames.max(1) - 1)
    }

    /// Records a mark (`stamp.seq`: the publisher's last frame); returns how many frames
    /// up to it were missed.
    fn mark(&mut self, stamp: &Stamp) -> u64 {
        self.reach(stamp, stamp.seq.saturating_add(1), stamp.seq)
    }

    /// The one rule of both: `stamp`'s publisher (origin, epoch) sent up to `last`, and
    /// what arrived now starts at `from` (`last` + 1 for a mark: nothing); the frames
    /// between the last one heard and `from` were missed. A publisher not heard from before
    /// (or of a new epoch) starts its count here.
    fn reach(&mut self, stamp: &Stamp, from: u64, last: u64) -> u64 {
        // Looked up once; the origin is copied only for a publisher not seen before.
        let Some(entry) = self.last.get_mut(&stamp.origin) else {
            self.last.insert(stamp.origin.clone(), (stamp.epoch, last));
            return 0;
        };
        if entry.0 != stamp.epoch {
            *entry = (stamp.epoch, last);
            return 0;
        }
        let missed = from.saturating_sub(entry.1.saturating_add(1));
        entry.1 = entry.1.max(last);
        missed
    }
}

/// Decodes a message of one frame (durable tags); `None` (counted) when it is not a frame
/// or is our own.
fn frame_of(fed: &Federation, msg: &async_nats::Message) -> Option<(Data, Stamp)> {
    let decoded = wire::decode(
        &fed.config.subject_prefix,
        &msg.subject,
        msg.headers.as_ref(),
        msg.payload.clone(),
    );
    not_ours(fed, msg, decoded, |(_, stamp)| stamp)
}

/// Decodes a plain message: a packed message, a batch, a single frame or a mark; `None`
/// (counted) when it is none of them or carries this router's name.
fn plain_of(fed: &Federation, msg: &async_nats::Message) -> Option<wire::Plain> {
    let decoded = wire::decode_plain(
        &fed.config.subject_prefix,
        &msg.subject,
        msg.headers.as_ref(),
        msg.payload.clone(),
    );
    if let Ok(plain) = &decoded {
        if plain.stamp().origin == *fed.name {
            // The client does not receive its own core NATS messages (`no_echo`): another
            // router publishes under this router's name.
            same_name(fed, plain.frames());
            return None;
        }
    }
    not_ours(fed, msg, decoded, wire::Plain::stamp)
}

/// Counts `n` frames of another router running under this router's name, and logs the
/// conflict once.
fn same_name(fed: &Federation, n: u64) {
    fed.metrics.lost(Lost::SameName, n);
    if fed.metrics.name_conflict.set(1) == 0 {
        tracing::error!(
            router = %fed.name,
            "federation: another router runs under this federation.name; its frames are \
             dropped and counted (same_name), and it drops ours: give it another name"
        );
    }
}

/// What `msg` decoded to, unless it is malformed (counted) or this router published it.
fn not_ours<T>(
    fed: &Federation,
    msg: &async_nats::Message,
    decoded: Result<T, wire::Malformed>,
    stamp: impl Fn(&T) -> &Stamp,
) -> Option<T> {
    match decoded {
        Ok(t) => (stamp(&t).origin != *fed.name).then_some(t),
        Err(e) => {
            tracing::debug!(subject = %msg.subject, error = ?e, "federation: not a frame");
            fed.metrics.lost(Lost::Malformed, 1);
            None
        }
    }
}

/// Whether `data`'s metadata is over the router's limits (`limits.max_metadata_bytes`,
/// `max_metadata_entries`), the same as for a direct client's frame: then it is counted
/// (`lost_total{reason="metadata_too_large"}`), the first one logged with its origin, and
/// it must not be routed.
fn over_metadata_limits<L: Local>(fed: &Federation, local: &L, data: &Data) -> bool {
    let Err(why) = data.metadata.check_size(local.metadata_limits()) else {
        return false;
    };
    if fed.metrics.lost_total(Lost::MetadataTooLarge) == 0 {
        tracing::warn!(
            tag = format_args!("{:#x}", data.tag),
            "federation: refused a frame from another router: {why} (limits.max_metadata_bytes, \
             limits.max_metadata_entries); further ones are counted \
             (lost_total{{reason=\"metadata_too_large\"}}), not logged"
        );
    }
    fed.metrics.lost(Lost::MetadataTooLarge, 1);
    true
}

/// One plain subscription: every frame of another router goes to the local observers.
async fn receive<L: Local>(fed: Arc<Federation>, local: Arc<L>, mut sub: async_nats::Subscriber) {
    let _active = Active(fed.metrics.subscriptions.clone());
    let mut cache = local.cache();
    let mut gaps = Gaps::default();
    while let Some(msg) = sub.next().await {
        let (first, frames) = match plain_of(&fed, &msg) {
            None => continue,
            Some(wire::Plain::Mark(stamp)) => {
                fed.metrics.lost(Lost::Gap, gaps.mark(&stamp));
                continue;
            }
            Some(wire::Plain::Frames(wire::Frames { first, frames })) => (first, frames),
        };
        // Each frame of a batch has its own sequence number, the first's and those after it:
        // frames missed before the batch are counted (within it, none can be).
        fed.metrics
            .lost(Lost::Gap, gaps.record_run(&first, frames.len() as u64));
        for data in frames {
            if data.hops > local.max_hops() {
                fed.metrics.lost(Lost::Loop, 1);
                continue;
            }
            if over_metadata_limits(&fed, &*local, &data) {
                continue;
            }
            fed.metrics.received.inc();
            local.route(&mut cache, Routed::new(data)).await;
        }
    }
}

/// Message ids delivered lately, at most `capacity`.
struct Dedup {
    seen: HashSet<String>,
    order: VecDeque<String>,
    capacity: usize,
}

impl Dedup {
    fn new(capacity: usize) -> Dedup {
        Dedup {
            seen: HashSet::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Whether `id` was delivered before; remembers it.
    fn seen(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return true;
        }
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        false
    }

    /// `id` did not reach its sessions after all: its redelivery is not a duplicate.
    fn forget(&mut self, id: &str) {
        self.seen.remove(id);
    }
}

/// The durable consumer name of (this router, function `name`, `tag`): characters NATS
/// does not allow in names become `_`.
fn durable_name(router: &str, name: &str, tag: u32) -> String {
    format!("{router}_{name}_{tag}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One durable consumer: delivers `tag`'s stored frames to the local sessions of function
/// `name`, each at least once, de-duplicated by `<tag>:<yomo-tid>:<content>`, acknowledged once
/// written to every such session's socket (a frame dropped before that is refused, and
/// delivered again). Retries until it has a consumer.
async fn consume<L: Local>(
    fed: Arc<Federation>,
    local: Arc<L>,
    js: jetstream::Context,
    name: Arc<str>,
    tag: u32,
) {
    let durable = durable_name(&fed.name, &name, tag);
    let c = &fed.config.stream;
    let mut dedup = Dedup::new(fed.config.dedup_window);
    // Ids of messages that were not written after all, from their ack tasks.
    let (unwritten_tx, mut unwritten) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut failures = 0u32;
    loop {
        if failures > 0 {
            tokio::time::sleep(Duration::from_millis(200 * u64::from(failures.min(10)))).await;
        }
        failures += 1;
        if !ensure_stream(&fed, &js).await {
            continue;
        }
        let Ok(stream) = js.get_stream(&c.name).await else {
            continue;
        };
        let config = consumer::pull::Config {
            durable_name: Some(durable.clone()),
            filter_subject: wire::subject(&fed.config.subject_prefix, tag),
            deliver_policy: consumer::DeliverPolicy::New,
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_millis(c.ack_wait_ms),
            inactive_threshold: Duration::from_secs(c.consumer_inactive_s),
            ..Default::default()
        };
        let consumer: consumer::PullConsumer =
            match stream.get_or_create_consumer(&durable, config).await {
                Ok(consumer) => consumer,
                Err(e) => {
                    tracing::warn!(%durable, error = %e, "federation: no durable consumer yet");
                    continue;
                }
            };
        // Short pulls with frequent heartbeats: a consumer whose leader moved (a node died)
        // is noticed in about a second instead of the client's default half a minute.
        let pulled = consumer
            .stream()
            .expires(PULL_EXPIRES)
            .heartbeat(PULL_EXPIRES / 4)
            .messages()
            .await;
        let Ok(mut messages) = pulled else {
            continue;
        };
        tracing::info!(%durable, "federation: durable consumer active");
        fed.metrics.subscriptions.inc();
        let _active = Active(fed.metrics.subscriptions.clone());
        failures = 0;
        while let Some(msg) = messages.next().await {
            let msg = match msg {
                Ok(msg) => msg,
                Err(e) => {
                    tracing::debug!(%durable, error = %e, "federation: consumer");
                    continue;
                }
            };
            let Some((data, _)) = frame_of(&fed, &msg.message) else {
                let _ = msg.ack().await;
                continue;
            };
            while let Ok(id) = unwritten.try_recv() {
                dedup.forget(&id);
            }
            let id = wire::msg_id(&data);
            if id.as_deref().is_some_and(|id| dedup.seen.contains(id)) {
                fed.metrics.duplicates.inc();
                let _ = msg.ack().await;
                continue;
            }
            if let Some(written) = deliver(&fed, &*local, &name, data).await {
                if let Some(id) = &id {
                    dedup.seen(id);
                }
                fed.metrics.received.inc();
                // Acknowledged once written: a router killed with the frame still queued
                // leaves it to JetStream, which delivers it again to its successor.
                let unwritten_tx = unwritten_tx.clone();
                tokio::spawn(async move {
                    let mut all = true;
                    for w in written {
                        all &= w.await.is_ok();
                    }
                    if all {
                        let _ = msg.ack().await;
                    } else {
                        if let Some(id) = id {
                            let _ = unwritten_tx.send(id);
                        }
                        let _ = msg.ack_with(AckKind::Nak(Some(REDELIVER_UNWRITTEN))).await;
                    }
                });
            } else {
                // Nobody of that name here right now: keep it for when one is back.
                let _ = msg
                    .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
    }
}

/// Queues `data` for every local session of function `name` that accepts it: what tells
/// when it is written to each, or `None` when there was no such session.
async fn deliver<L: Local>(
    fed: &Federation,
    local: &L,
    name: &str,
    data: Data,
) -> Option<Vec<oneshot::Receiver<()>>> {
    if data.hops > local.max_hops() {
        fed.metrics.lost(Lost::Loop, 1);
        return Some(Vec::new());
    }
    if over_metadata_limits(fed, local, &data) {
        // Refused for good (acknowledged, never delivered): redelivery would not help.
        return Some(Vec::new());
    }
    let sessions = fed.sessions_of(name);
    local.deliver(&sessions, Routed::new(data)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_counted_per_origin_and_epoch() {
        let mut g = Gaps::default();
        let s = |origin: &str, epoch, seq| Stamp {
            origin: origin.into(),
            epoch,
            seq,
        };
        assert_eq!(g.record(&s("a", 1, 5)), 0); // first seen: the baseline
        assert_eq!(g.record(&s("a", 1, 6)), 0);
        assert_eq!(g.record(&s("a", 1, 9)), 2);
        assert_eq!(g.record(&s("b", 1, 1)), 0);
        assert_eq!(g.record(&s("a", 2, 1)), 0); // restarted publisher
        assert_eq!(g.record(&s("a", 2, 2)), 0);
        // A batch of 4 from 3 on: 3..=6 taken at once; 7 follows, 10 misses 8 and 9.
        assert_eq!(g.record_run(&s("a", 2, 3), 4), 0);
        assert_eq!(g.record(&s("a", 2, 7)), 0);
        assert_eq!(g.record_run(&s("a", 2, 10), 2), 2);
        assert_eq!(g.record(&s("a", 2, 12)), 0);
    }

    #[test]
    fn a_mark_counts_the_lost_tail_once() {
        let mut g = Gaps::default();
        let s = |epoch, seq| Stamp {
            origin: "a".into(),
            epoch,
            seq,
        };
        assert_eq!(g.mark(&s(1, 10)), 0); // first heard: the baseline
        assert_eq!(g.record(&s(1, 11)), 0);
        assert_eq!(g.record(&s(1, 12)), 0);
        // Frames 13..=20 lost, then the mark: counted once, and not again by the next mark
        // or the next frame.
        assert_eq!(g.mark(&s(1, 20)), 8);
        assert_eq!(g.mark(&s(1, 20)), 0);
        assert_eq!(g.record(&s(1, 21)), 0);
        // A mark behind what arrived (it cannot overtake its frames) counts nothing.
        assert_eq!(g.mark(&s(1, 15)), 0);
        assert_eq!(g.record(&s(1, 22)), 0);
        assert_eq!(g.mark(&s(1, 22)), 0);
        // A new epoch starts again.
        assert_eq!(g.mark(&s(2, 4)), 0);
        assert_eq!(g.mark(&s(2, 7)), 3);
    }

    #[test]
    fn dedup_window_is_bounded() {
        let mut d = Dedup::new(2);
        assert!(!d.seen("1"));
        assert!(d.seen("1"));
        assert!(!d.seen("2"));
        assert!(!d.seen("3"));
        assert!(!d.seen("1")); // forgotten
    }

    #[test]
    fn durable_names_are_nats_names() {
        assert_eq!(durable_name("b", "relay fn.v1", 17), "b_relay_fn_v1_17");
    }
}
