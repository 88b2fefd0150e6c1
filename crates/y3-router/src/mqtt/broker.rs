//! What every MQTT connection shares: the configuration, the sessions by client id, the
//! retained messages, the metrics, and the downlinks that feed sessions from the router.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::ClientType;
use y3_transport::metadata::{Metadata, SOURCE_ID};
use y3_transport::Data;

use super::config::MqttConfig;
use super::link::{Links, Who, TOPIC_KEY};
use super::metrics::MqttMetrics;
use super::packet::Publish;
use super::retained::Retained;
use super::saved::{Saved, SavedSession};
use super::session::{Offered, Session};
use super::ConnInfo;
use crate::handoff::{Gone, Handoff, Recipient};

/// A session's downlink, as its link's writer hands over frames: each offered to the
/// session (written straight to its client's socket, or queued), and at the end of a
/// batch what was written straight goes out in one write.
struct Downlink {
    broker: Arc<Broker>,
    session: std::sync::Weak<Session>,
    /// Cancelled when the downlink's task ends (replaced, the session ended).
    live: CancellationToken,
}

impl Downlink {
    fn session(&self) -> Result<Arc<Session>, Gone> {
        self.session
            .upgrade()
            .filter(|_| !self.live.is_cancelled())
            .ok_or(Gone)
    }
}

impl Recipient for Downlink {
    fn take(&mut self, data: &Data) -> Result<(), Gone> {
        let session = self.session()?;
        self.broker
            .deliver(&session, data.tag, &data.metadata, &data.payload);
        Ok(())
    }

    fn batch_end(&mut self) {
        let Ok(session) = self.session() else { return };
        let outlet = session.lock().attached.as_ref().map(|a| a.outlet.clone());
        if let Some(outlet) = outlet {
            outlet.try_flush();
        }
    }
}

/// An open connection's entry in [`Broker::connections`], removed on drop.
pub(crate) struct Listed(Arc<Broker>, u64);

impl Drop for Listed {
    fn drop(&mut self) {
        self.0
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}

/// The MQTT side of a router.
#[derive(Debug)]
pub(crate) struct Broker {
    pub config: MqttConfig,
    pub links: Links,
    pub metrics: MqttMetrics,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub retained: Mutex<Retained>,
    /// Open connections, by a number of their own: what `/connz` lists.
    open: Mutex<HashMap<u64, (ConnInfo, Arc<Session>)>>,
    next_conn: std::sync::atomic::AtomicU64,
    /// Where persistent sessions are saved at a graceful stop (`saved.rs`); `None`: nowhere.
    saved: Option<std::path::PathBuf>,
}

impl Broker {
    /// A broker with no session.
    pub fn new(
        config: MqttConfig,
        links: Links,
        metrics: MqttMetrics,
        saved: Option<std::path::PathBuf>,
    ) -> Arc<Broker> {
        Arc::new(Broker {
            saved,
            config,
            links,
            metrics,
            sessions: Mutex::default(),
            retained: Mutex::default(),
            open: Mutex::default(),
            next_conn: Default::default(),
        })
    }

    /// Lists an open connection until the returned guard drops.
    pub fn opened(self: &Arc<Self>, info: ConnInfo, session: Arc<Session>) -> Listed {
        let id = self
            .next_conn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (info, session));
        Listed(self.clone(), id)
    }

    /// The connections open now, with their subscriptions.
    pub fn connections(&self) -> Vec<ConnInfo> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<ConnInfo> = open
            .values()
            .map(|(info, session)| ConnInfo {
                subscriptions: session.lock().subscriptions.clone(),
                ..info.clone()
            })
            .collect();
        out.sort_by(|a, b| a.client_id.cmp(&b.client_id));
        out
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session of `client_id` for a new connection: the kept one unless `clean`
    /// (with whether it was present), or `None` when `max_sessions` are kept already.
    pub fn take_session(&self, client_id: &str, clean: bool) -> Option<(Arc<Session>, bool)> {
        let mut sessions = self.sessions();
        let now = Instant::now();
        sessions.retain(|_, s| {
            let s2 = s.lock();
            let keep = s2.holder.is_some() || s2.expires.is_none_or(|e| e > now);
            drop(s2);
            if !keep {
                self.ended(s, "session_expired");
            }
            keep
        });
        if let Some(old) = sessions.get(client_id).cloned() {
            // A takeover: the old connection closes.
            let mut o = old.lock();
            o.attached = None;
            if let Some(holder) = o.holder.take() {
                holder.cancel();
            }
            drop(o);
            if !clean {
                return Some((old, true));
            }
            self.ended(&old, "session_ended");
            sessions.remove(client_id);
        }
        if sessions.len() >= self.config.max_sessions {
            return None;
        }
        let session = Session::new(client_id.to_owned());
        sessions.insert(client_id.to_owned(), session.clone());
        self.metrics.sessions.set(sessions.len() as i64);
        Some((session, false))
    }

    /// The connection of `generation` that held `session` is gone: the session is kept
    /// (persistent) or ended, unless another connection took it over meanwhile.
    pub fn release(&self, session: &Arc<Session>, generation: u64) {
        let mut s = session.lock();
        if s.generation != generation {
            return;
        }
        s.holder = None;
        s.attached = None;
        let keep = s.persistent;
        drop(s);
        if !keep {
            self.ended(session, "session_ended");
            let mut sessions = self.sessions();
            if sessions
                .get(&session.client_id)
                .is_some_and(|kept| Arc::ptr_eq(kept, session))
            {
                sessions.remove(&session.client_id);
            }
            self.metrics.sessions.set(sessions.len() as i64);
        }
    }

    /// Reads the sessions a graceful stop saved (and removes the file): each kept
    /// persistent, its messages queued (counted as offered), its downlink opened when its
    /// client comes back.
    pub fn restore(&self) {
        let Some(path) = &self.saved else { return };
        let c = &self.config;
        let limit = (c.max_saved_bytes as u64).saturating_mul(2) + (16 << 20);
        let saved = match Saved::take(path, limit) {
            Ok(Some(saved)) => saved,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "mqtt sessions not restored");
                return;
            }
        };
        let (mut sessions_n, mut messages_n) = (0usize, 0u64);
        {
            let mut sessions = self.sessions();
            let now = Instant::now();
            for s in saved.sessions {
                if sessions.len() >= c.max_sessions {
                    self.metrics.refused("sessions_full");
                    continue;
                }
                let session = Session::new(s.client_id.clone());
                {
                    let mut st = session.lock();
                    st.persistent = true;
                    st.expires = s
                        .expiry_secs
                        .map(|e| now + std::time::Duration::from_secs(u64::from(e)));
                    st.subscriptions = s.subscriptions;
                    st.subscriptions.truncate(c.max_subscriptions);
                }
                for m in s.messages {
                    messages_n += 1;
                    self.metrics.offered();
                    let mut st = session.lock();
                    if st.queue.len() >= c.max_session_queue {
                        drop(st);
                        self.metrics.dropped("session_full", 1);
                        continue;
                    }
                    st.queue.push_back(m);
                }
                sessions.insert(s.client_id, session);
                sessions_n += 1;
            }
            self.metrics.sessions.set(sessions.len() as i64);
        }
        let mut retained = self.retained.lock().unwrap_or_else(|e| e.into_inner());
        for (topic, tag, payload) in &saved.retained {
            if !retained.put(
                topic,
                *tag,
                payload.clone(),
                c.max_retained,
                c.max_retained_bytes,
            ) {
                self.metrics.not_retained.inc();
            }
        }
        self.metrics.retained.set(retained.len() as i64);
        tracing::info!(file = %path.display(), sessions = sessions_n, messages = messages_n, retained = retained.len(), "mqtt sessions restored");
    }

    /// Saves the persistent sessions and the retained messages (a graceful stop): waits
    /// at most a second for the downlinks to hand over their last frames, then writes
    /// at most `max_saved_bytes` of payloads; messages past that are dropped, counted
    /// (`not_saved`).
    pub async fn save(&self) {
        let Some(path) = &self.saved else { return };
        let sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        let until = Instant::now() + std::time::Duration::from_secs(1);
        while Instant::now() < until
            && sessions.iter().any(|s| {
                s.lock()
                    .downlink
                    .as_ref()
                    .is_some_and(|(_, task)| !task.is_finished())
            })
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let mut budget = self.config.max_saved_bytes;
        let mut saved = Saved::default();
        let mut not_saved = 0u64;
        let now = Instant::now();
        for session in sessions {
            let s = session.lock();
            if !s.persistent {
                continue;
            }
            let mut messages = Vec::new();
            let inflight = s.inflight.values().map(|m| Publish {
                dup: true,
                ..m.clone()
            });
            for m in inflight.chain(s.queue.iter().cloned()) {
                if m.payload.len() > budget {
                    not_saved += 1;
                    continue;
                }
                budget -= m.payload.len();
                messages.push(m);
            }
            saved.sessions.push(SavedSession {
                client_id: session.client_id.clone(),
                expiry_secs: s.expires.map(|e| {
                    e.saturating_duration_since(now)
                        .as_secs()
                        .min(u64::from(u32::MAX - 1)) as u32
                }),
                subscriptions: s.subscriptions.clone(),
                messages,
            });
        }
        saved.retained = self
            .retained
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(t, tag, p)| (t.to_owned(), tag, p.clone()))
            .collect();
        if not_saved > 0 {
            self.metrics.dropped("not_saved", not_saved);
            tracing::warn!(
                messages = not_saved,
                "mqtt session messages not saved: mqtt.max_saved_bytes reached"
            );
        }
        let n: usize = saved.sessions.iter().map(|s| s.messages.len()).sum();
        match saved.write(path) {
            Ok(()) => {
                tracing::info!(file = %path.display(), sessions = saved.sessions.len(), messages = n, "mqtt sessions saved")
            }
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "mqtt sessions not saved"),
        }
    }

    /// Ends `session`, counting what it held as dropped for `reason`.
    fn ended(&self, session: &Session, reason: &'static str) {
        let n = session.end() as u64;
        self.metrics.dropped(reason, n);
    }

    /// Offers `message` (from a frame with metadata `from`; `None`: a retained one) to
    /// `session`, every outcome counted in the ledger; the session's first drop for
    /// `max_session_queue` is logged with who and why. MQTT cannot tell the publisher: its PUBACK (or y3's stored
    /// acknowledgement) was sent once the router handed the frame to the session's
    /// downlink, and MQTT has no packet that tells a subscriber what it missed.
    pub fn offer(&self, session: &Session, message: Publish, from: Option<&Metadata>) {
        self.metrics.offered();
        let qos = message.qos;
        let offered = session.offer(message, self.config.max_session_queue);
        let dropped = match offered {
            Offered::Written => {
                if qos == 0 {
                    self.metrics.delivered();
                }
                return;
            }
            Offered::Queued => return,
            Offered::DroppedOldest => "the oldest waiting message",
            Offered::DroppedNew => "the new message (every kept one is in flight)",
            Offered::Offline => {
                self.metrics.dropped("offline_qos0", 1);
                return;
            }
            Offered::Ended => {
                self.metrics.dropped("session_ended", 1);
                return;
            }
        };
        self.metrics.dropped("session_full", 1);
        if session.first_full() {
            let away = session.lock().holder.is_none();
            let publisher = match from {
                None => "retained",
                Some(meta) => meta.get(SOURCE_ID).ok().flatten().unwrap_or("?"),
            };
            tracing::warn!(
                client = %session.client_id,
                publisher = %publisher,
                qos,
                dropped,
                limit = self.config.max_session_queue,
                client_away = away,
                "mqtt session queue full (mqtt.max_session_queue): a message dropped; the \
                 first of this session, every one counted as dropped, reason session_full"
            );
        }
    }

    /// Points the session's downlink at the tags its subscriptions need (a new link when
    /// they changed; none when no tag). Returns once the router has admitted the new link,
    /// so that a SUBACK sent after it promises delivery from then on.
    pub async fn refresh_downlink(
        self: &Arc<Self>,
        session: &Arc<Session>,
        who: &Who,
        tags: Vec<u32>,
    ) {
        {
            let mut s = session.lock();
            if s.downlink.as_ref().is_some_and(|(t, _)| *t == tags) {
                return;
            }
            if let Some((_, task)) = s.downlink.take() {
                task.abort();
            }
        }
        if tags.is_empty() {
            return;
        }
        // The link's frames go straight from its outbox into the session, while its task
        // runs: aborted (replaced, the session ended), the writer stops at the next frame
        // (counted `disconnected`, as a closed socket's).
        let live = CancellationToken::new();
        let handoff: Handoff = Box::new(Downlink {
            broker: self.clone(),
            session: Arc::downgrade(session),
            live: live.clone(),
        });
        let mut conn = match self
            .links
            .open(
                who,
                (ClientType::StreamFunction, &tags),
                false,
                Some(handoff),
            )
            .await
        {
            Ok((conn, _)) => conn,
            Err(g) => {
                tracing::warn!(client = %who.client_id, reason = %g.reason, "mqtt downlink refused");
                return;
            }
        };
        let task = tokio::spawn(async move {
            let _live = live.drop_guard();
            // Data comes by the handoff: what the link itself carries now is the goaway
            // at the router's stop, after the last frame was handed over, or its end.
            let _ = conn.reader.next().await;
        });
        if let Some((_, old)) = session.lock().downlink.replace((tags, task)) {
            old.abort();
        }
    }

    /// Offers a frame of `tag` with metadata `meta` to `session` under each topic it maps
    /// to that the session subscribes to (its `mqtt-topic` for a wildcard mapping).
    fn deliver(&self, session: &Session, tag: u32, meta: &Metadata, payload: &bytes::Bytes) {
        // `find`: one walk, by its own loop for the fixmap of fixstrs MQTT publishes carry
        // (`get` takes the general walk). A map that is not valid, or a topic that is not
        // UTF-8, is no topic, as with `get`.
        let origin = meta
            .find([TOPIC_KEY.as_bytes()])
            .ok()
            .and_then(|[topic]| topic)
            .and_then(|topic| std::str::from_utf8(topic).ok());
        let mut any = false;
        for topic in self.config.topics_of(tag, origin) {
            let qos = {
                let s = session.lock();
                s.subscriptions
                    .iter()
                    .filter(|(f, _)| super::config::topic_matches(topic, f))
                    .map(|(_, q)| *q)
                    .max()
            };
            let Some(qos) = qos else { continue };
            any = true;
            let message = Publish {
                topic: topic.to_owned(),
                qos,
                pkid: 0,
                retain: false,
                dup: false,
                payload: payload.clone(),
            };
            self.offer(session, message, Some(meta));
        }
        if !any {
            // The tag's topic (or the frame's mqtt-topic) matches none of the filters.
            self.metrics.offered();
            self.metrics.dropped("no_topic", 1);
        }
    }
}
