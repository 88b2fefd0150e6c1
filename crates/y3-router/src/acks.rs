//! Stored acknowledgements (`spec/frames.md`, "Stored"): for a y3 client whose handshake
//! asked for them, the router tells it how many of its data frames are stored, so that it
//! can forget them. A frame is stored once routed locally and, for a durable tag of the
//! federation, once JetStream has it; frames complete out of order (durable ones later),
//! the count only moves over a contiguous prefix.
//!
//! ```text
//!  reader: data frame ─▶ Acks::take (index i) ─▶ route ─▶ done now, or by the publisher
//!  ack task: every few ms, when the prefix grew ─▶ outbox ◀─ Frame::Stored(prefix)
//! ```

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::Frame;

use crate::outbox::Outbox;

/// How long the ack task lets completions gather before it writes one frame for them.
const GATHER: Duration = Duration::from_millis(5);

#[derive(Debug, Default)]
struct State {
    /// Data frames read (the next frame's index).
    taken: u32,
    /// The first `stored` frames are stored.
    stored: u32,
    /// Stored frames past the prefix.
    early: BTreeSet<u32>,
}

/// One connection's acknowledgements.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    state: Mutex<State>,
    moved: Notify,
}

/// One data frame to acknowledge once stored.
#[derive(Debug)]
pub(crate) struct Ticket {
    acks: Arc<Acks>,
    index: u32,
}

impl Ticket {
    /// The frame is stored.
    pub fn done(self) {
        self.acks.done(self.index);
    }
}

impl Acks {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ticket of the next data frame read.
    pub fn take(self: &Arc<Self>) -> Ticket {
        let mut s = self.lock();
        let index = s.taken;
        s.taken = s.taken.wrapping_add(1);
        Ticket {
            acks: self.clone(),
            index,
        }
    }

    fn done(&self, index: u32) {
        let mut s = self.lock();
        if index != s.stored {
            s.early.insert(index);
            return;
        }
        s.stored = s.stored.wrapping_add(1);
        loop {
            let next = s.stored;
            if !s.early.remove(&next) {
                break;
            }
            s.stored = next.wrapping_add(1);
        }
        drop(s);
        self.moved.notify_one();
    }

    /// How many frames are stored.
    pub fn stored(&self) -> u32 {
        self.lock().stored
    }

    /// Writes a [`Frame::Stored`] into `outbox` whenever the count moved, until `stop`.
    pub async fn run(self: Arc<Self>, outbox: Arc<Outbox>, stop: CancellationToken) {
        let mut sent = 0u32;
        loop {
            tokio::select! {
                _ = self.moved.notified() => {}
                _ = stop.cancelled() => return,
            }
            tokio::time::sleep(GATHER).await;
            let stored = self.stored();
            if stored != sent {
                sent = stored;
                if !outbox.push_control(Frame::Stored(stored)) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_moves_over_the_contiguous_prefix() {
        let acks = Arc::new(Acks::default());
        let t: Vec<Ticket> = (0..4).map(|_| acks.take()).collect();
        let mut t = t.into_iter();
        let (t0, t1, t2, t3) = (
            t.next().unwrap(),
            t.next().unwrap(),
            t.next().unwrap(),
            t.next().unwrap(),
        );
        t1.done();
        assert_eq!(acks.stored(), 0);
        t0.done();
        assert_eq!(acks.stored(), 2);
        t3.done();
        assert_eq!(acks.stored(), 2);
        t2.done();
        assert_eq!(acks.stored(), 4);
    }
}
