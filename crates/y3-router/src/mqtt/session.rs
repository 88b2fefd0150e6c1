//! One MQTT session: its subscriptions, the messages waiting for its client and those in
//! flight (QoS 1, sent and not acknowledged). A persistent session outlives its
//! connections: its downlink keeps taking frames while the client is away, and what was in
//! flight is sent again, flagged dup, when it comes back.
//!
//! ```text
//!  downlink frames ─▶ offer() ─▶ queue (≤ max_session_queue with inflight; oldest dropped,
//!                                  counted)
//!  connection: next_to_send() ─▶ inflight[pkid] (≤ max_inflight) ─ PUBACK ─▶ acked()
//!  client gone: inflight back to the queue's front (persistent), or the session ends
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::packet::Publish;

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
            let pkid = loop {
                s.next_pkid = s.next_pkid.wrapping_add(1).max(1);
                if !s.inflight.contains_key(&s.next_pkid) {
                    break s.next_pkid;
                }
            };
            message.pkid = pkid;
            s.inflight.insert(pkid, message.clone());
        }
        Some(message)
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

    /// Queues `message`, keeping at most `max` waiting and in flight together.
    pub fn offer(&self, message: Publish, max: usize) -> Offered {
        let mut s = self.lock();
        if s.ended {
            return Offered::Ended;
        }
        if s.holder.is_none() && message.qos == 0 {
            return Offered::Offline;
        }
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
}
