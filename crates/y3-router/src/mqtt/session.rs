//! One MQTT session: its subscriptions, the messages waiting for its client and those in
//! flight (QoS 1, sent and not acknowledged). A persistent session outlives its
//! connections: its downlink keeps taking frames while the client is away, and what was in
//! flight is sent again, flagged dup, when it comes back.
//!
//! ```text
//!  downlink frames ─▶ offer() ─┬─ connected over plain TCP, queue empty, window open:
//!                              │    written straight to its socket (`outlet.rs`); QoS 1
//!                              │    kept in inflight[pkid]
//!                              └─ else: queue (≤ max_session_queue with inflight; oldest
//!                                  dropped, counted)
//!  connection: next_to_send() ─▶ inflight[pkid] (≤ max_inflight) ─ PUBACK ─▶ acked()
//!  client gone: inflight back to the queue's front (persistent), or the session ends
//! ```
//!
//! Messages are decided, written straight or queued, under the session's lock, and only
//! while the queue is empty are they written straight: so they reach the socket in the
//! order they came.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::outlet::Outlet;
use super::packet::{self, Publish, Version};
use crate::status::ConnCounters;

/// The connection a session's messages are written to straight, while it holds the
/// session (a plain-TCP client: `outlet.rs`).
#[derive(Debug, Clone)]
pub(crate) struct Attached {
    /// Its socket's write side.
    pub outlet: Arc<Outlet>,
    /// The MQTT version its packets are encoded in.
    pub version: Version,
    /// QoS 1 messages in flight to it at most.
    pub max_inflight: usize,
    /// Its `/connz` counters (messages written out).
    pub counters: ConnCounters,
}

/// A session's state, behind its lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Topic filters and their granted QoS.
    pub subscriptions: Vec<(String, u8)>,
    /// Messages waiting to be sent.
    pub queue: VecDeque<Publish>,
    /// QoS 1 messages sent, by packet id.
    pub inflight: BTreeMap<u16, Publish>,
    next_pkid: u16,
    /// The downlink task and the tags it observes.
    pub downlink: Option<(Vec<u32>, JoinHandle<()>)>,
    /// Cancelled to close the connection that holds the session now (a takeover).
    pub holder: Option<CancellationToken>,
    /// The holder's socket when messages may be written to it straight (set once it is
    /// ready, cleared as it goes or is taken over).
    pub attached: Option<Attached>,
    /// Counts the connections that held the session; the holder's is the last.
    pub generation: u64,
    /// Whether the session is kept after its connection.
    pub persistent: bool,
    /// When a kept session with no connection ends (MQTT 5's expiry); `None`: never.
    pub expires: Option<Instant>,
    /// The session ended: it takes no more messages.
    ended: bool,
    /// A message was dropped for `max_session_queue` already (logged once per session).
    full_logged: bool,
}

impl State {
    /// The next message to write, with its packet id set for QoS 1 (then kept in flight),
    /// unless `max_inflight` are already in flight. Called under the session's lock, held
    /// for a batch of writes.
    pub fn next_to_send(&mut self, max_inflight: usize) -> Option<Publish> {
        let s = self;
        let front_qos = s.queue.front()?.qos;
        if front_qos > 0 && s.inflight.len() >= max_inflight {
            return None;
        }
        let mut message = s.queue.pop_front()?;
        if message.qos > 0 {
            message.pkid = free_pkid(&mut s.next_pkid, &s.inflight);
            s.inflight.insert(message.pkid, message.clone());
        }
        Some(message)
    }

    /// Writes `message` straight to the attached connection's socket when nothing waits
    /// before it (the queue is empty) and its QoS 1 window is open; gives it back if not.
    fn write_straight(&mut self, mut message: Publish) -> Result<(), Publish> {
        let State {
            attached,
            queue,
            inflight,
            next_pkid,
            ..
        } = self;
        let Some(to) = attached else {
            return Err(message);
        };
        if !queue.is_empty() || (message.qos > 0 && inflight.len() >= to.max_inflight) {
            return Err(message);
        }
        if message.qos > 0 {
            message.pkid = free_pkid(next_pkid, inflight);
        }
        let version = to.version;
        match to
            .outlet
            .append(|out| packet::write_publish(version, &message, out))
        {
            Ok(true) => {}
            // Past the outlet's bound (the socket is slow), or not encodable (the
            // connection meets the error when it writes it from the queue).
            Ok(false) | Err(_) => {
                message.pkid = 0;
                return Err(message);
            }
        }
        to.counters.count_out(1, message.payload.len() as u64);
        if message.qos > 0 {
            inflight.insert(message.pkid, message);
        }
        Ok(())
    }
}

/// A packet id no message in `inflight` has, the next after `last`.
fn free_pkid(last: &mut u16, inflight: &BTreeMap<u16, Publish>) -> u16 {
    loop {
        *last = last.wrapping_add(1).max(1);
        if !inflight.contains_key(last) {
            return *last;
        }
    }
}

/// A shared session.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// Its client id.
    pub client_id: String,
    /// The state.
    pub state: Mutex<State>,
    /// Woken when a message is queued.
    pub ready: Notify,
}

/// What [`Session::offer`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Written straight to the client's socket (QoS 1: kept in flight).
    Written,
    /// Queued.
    Queued,
    /// Queued, and the oldest waiting message dropped to make room.
    DroppedOldest,
    /// Not queued: everything kept is in flight (`max_session_queue` of them).
    DroppedNew,
    /// Not queued: QoS 0 for a client that is away.
    Offline,
    /// Not queued: the session has ended.
    Ended,
}

impl Session {
    /// A new session.
    pub fn new(client_id: String) -> Arc<Session> {
        Arc::new(Session {
            client_id,
            ..Session::default()
        })
    }

    /// Locks the state.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `message` straight to the client's socket (`Attached`), else queues it,
    /// keeping at most `max` waiting and in flight together.
    pub fn offer(&self, message: Publish, max: usize) -> Offered {
        let mut s = self.lock();
        if s.ended {
            return Offered::Ended;
        }
        if s.holder.is_none() && message.qos == 0 {
            return Offered::Offline;
        }
        let message = match s.write_straight(message) {
            Ok(()) => return Offered::Written,
            Err(message) => message,
        };
        let mut offered = Offered::Queued;
        if s.queue.len() + s.inflight.len() >= max {
            if s.queue.pop_front().is_some() {
                offered = Offered::DroppedOldest;
            } else {
                // Everything kept is in flight: the new one is the one dropped.
                return Offered::DroppedNew;
            }
        }
        s.queue.push_back(message);
        drop(s);
        self.ready.notify_one();
        offered
    }

    /// Whether this is the session's first drop for `max_session_queue` (the one logged);
    /// notes that it happened.
    pub fn first_full(&self) -> bool {
        !std::mem::replace(&mut self.lock().full_logged, true)
    }

    /// The client acknowledged `pkid`; whether it was in flight.
    pub fn acked(&self, pkid: u16) -> bool {
        let acked = self.lock().inflight.remove(&pkid).is_some();
        if acked {
            self.ready.notify_one();
        }
        acked
    }

    /// The client is back: what was in flight goes first, flagged dup; returns how many.
    pub fn resume(&self) -> usize {
        let mut s = self.lock();
        let inflight = std::mem::take(&mut s.inflight);
        let n = inflight.len();
        for (_, mut m) in inflight.into_iter().rev() {
            m.dup = true;
            s.queue.push_front(m);
        }
        n
    }

    /// Ends the session: its downlink stops, and the messages it held (queued and in
    /// flight) are given up; returns how many.
    pub fn end(&self) -> usize {
        let mut s = self.lock();
        s.ended = true;
        s.attached = None;
        if let Some((_, task)) = s.downlink.take() {
            task.abort();
        }
        let n = s.queue.len() + s.inflight.len();
        s.queue.clear();
        s.inflight.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn msg(qos: u8, n: u8) -> Publish {
        Publish {
            topic: "t".into(),
            qos,
            pkid: 0,
            retain: false,
            dup: false,
            payload: Bytes::from(vec![n]),
        }
    }

    #[test]
    fn bounded_in_flight_and_redelivered_after_resume() {
        let s = Session::new("c".into());
        s.lock().holder = Some(CancellationToken::new());
        for n in 0..4 {
            assert_eq!(
                s.offer(msg(1, n), 3),
                if n < 3 {
                    Offered::Queued
                } else {
                    Offered::DroppedOldest
                }
            );
        }
        assert!(s.first_full());
        assert!(!s.first_full(), "once per session");
        let a = s.lock().next_to_send(2).unwrap();
        let b = s.lock().next_to_send(2).unwrap();
        assert_eq!((a.payload[0], b.payload[0]), (1, 2));
        assert!(s.lock().next_to_send(2).is_none(), "two in flight at most");
        assert!(s.acked(a.pkid));
        assert!(!s.acked(a.pkid));
        assert_eq!(s.resume(), 1);
        let again = s.lock().next_to_send(2).unwrap();
        assert!(again.dup);
        assert_eq!(again.payload[0], 2);
        assert_eq!(s.lock().next_to_send(2).unwrap().payload[0], 3);
    }

    #[test]
    fn qos0_is_not_kept_for_an_absent_client() {
        let s = Session::new("c".into());
        assert_eq!(s.offer(msg(0, 1), 3), Offered::Offline);
        assert_eq!(s.offer(msg(1, 1), 3), Offered::Queued);
    }

    /// Connected over plain TCP, messages are written straight while nothing waits before
    /// them; once one waits (its QoS 1 window full), the later ones wait behind it; they
    /// reach the socket in the order offered.
    #[tokio::test]
    async fn written_straight_while_nothing_waits_and_in_order_after() {
        use tokio::io::AsyncReadExt;
        let (outlet, mut client) = crate::mqtt::outlet::test_pair().await;
        let outlet = Arc::new(outlet);
        let registry = Arc::new(crate::status::Connections::default());
        let registered = registry.register(crate::status::Registration {
            id: 1,
            name: "c".into(),
            client_id: "c".into(),
            kind: crate::status::Kind::Mqtt,
            protocol: "mqtt",
            transport: "tcp",
            remote: None,
            observed: Vec::new(),
            filters: Vec::new(),
        });
        let s = Session::new("c".into());
        {
            let mut st = s.lock();
            st.holder = Some(CancellationToken::new());
            st.attached = Some(Attached {
                outlet: outlet.clone(),
                version: Version::V4,
                max_inflight: 1,
                counters: registered.counters(),
            });
        }
        assert_eq!(s.offer(msg(0, 1), 10), Offered::Written);
        assert_eq!(s.offer(msg(1, 2), 10), Offered::Written);
        assert_eq!(s.offer(msg(1, 3), 10), Offered::Queued, "window full");
        assert_eq!(
            s.offer(msg(0, 4), 10),
            Offered::Queued,
            "behind the waiting one"
        );
        let pkid = *s.lock().inflight.keys().next().unwrap();
        assert!(s.acked(pkid));
        // The connection's task writes the queue (under the lock, as `send_queued` does).
        {
            let mut st = s.lock();
            let mut out = bytes::BytesMut::new();
            while let Some(m) = st.next_to_send(1) {
                packet::write_publish(Version::V4, &m, &mut out).unwrap();
            }
            outlet.append_all(&mut out);
        }
        assert_eq!(
            s.offer(msg(0, 5), 10),
            Offered::Written,
            "nothing waits again"
        );
        outlet.try_flush();
        outlet.write_all(&mut bytes::BytesMut::new()).await.unwrap();
        let mut buf = bytes::BytesMut::new();
        let mut got = Vec::new();
        while got.len() < 5 {
            while let Some(p) = packet::read(&mut buf, Some(Version::V4), 1 << 20).unwrap() {
                let packet::Incoming::Publish(p) = p else {
                    panic!("{p:?}")
                };
                got.push((p.payload[0], p.qos));
            }
            if got.len() < 5 {
                assert!(client.read_buf(&mut buf).await.unwrap() > 0);
            }
        }
        assert_eq!(got, [(1, 0), (2, 1), (3, 1), (4, 0), (5, 0)]);
        assert_eq!(s.lock().inflight.len(), 1, "3 in flight");
    }
}
