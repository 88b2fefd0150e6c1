//! When a frame written to a subscriber counts as stored (`spec/frames.md`, "Stored"):
//! over TCP (and TLS over TCP), once the subscriber's kernel acknowledged its bytes, so
//! that a frame acknowledged as stored to a durable source is no longer only in the
//! router's own send buffers, which a SIGKILL throws away: a SIGKILL of the router after
//! that does not lose the frame (its subscriber's kernel hands every acknowledged byte to
//! a client that reads on; `crates/y3-cli/tests/durable_kill.rs`). Over QUIC and in-memory
//! pipes, once flushed (quinn 0.11 does not say which stream bytes the peer acknowledged),
//! so a SIGKILL can still lose a frame stored there but not yet sent.
//!
//! ```text
//!  write_loop: batch flushed ─▶ StoredAt::flushed(waiters)
//!                                ├ QUIC / memory: told now
//!                                └ TCP: mark = bytes in the send buffer + bytes acked
//!                                       ─▶ poller task: every POLL while any waits,
//!                                          tcpi_bytes_acked ≥ mark ─▶ told
//! ```
//!
//! Only frames of durable sources have waiters; a batch without them costs one branch.
//! The poller exists only on connections that carried such frames (it holds a duplicate
//! of the socket's descriptor, dropped with the writer). A socket that cannot be read
//! (closed, out of descriptors) tells nobody: those frames are refused as
//! `no_subscriber` and the source sends them again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use y3_transport::tcp_acked::{AckProbe, TcpAcked};

/// How often a connection with waiters reads its socket's acknowledged bytes.
const POLL: Duration = Duration::from_millis(2);

/// Waiters of one flush and the mark its bytes are acknowledged at.
type Flush = (u64, Vec<oneshot::Sender<()>>);

/// One connection's rule for telling writers' waiters their frames are stored.
#[derive(Debug)]
pub(crate) enum StoredAt {
    /// Flushed is stored (QUIC, in-memory pipes).
    Flushed,
    /// Acknowledged by the peer's TCP.
    Tcp {
        /// The socket.
        socket: TcpAcked,
        /// The probe and its poller, from the first flush with waiters on.
        poller: Option<Poller>,
    },
}

/// The task that tells waiters once their marks are acknowledged (aborted on drop).
#[derive(Debug)]
pub(crate) struct Poller {
    probe: Arc<AckProbe>,
    flushes: mpsc::UnboundedSender<Flush>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StoredAt {
    /// The rule for a connection with this TCP socket (`None`: not TCP).
    pub fn new(socket: Option<TcpAcked>) -> StoredAt {
        match socket {
            Some(socket) => StoredAt::Tcp {
                socket,
                poller: None,
            },
            None => StoredAt::Flushed,
        }
    }

    /// The waiters of a batch just flushed (taken from `told`): told now, or once the
    /// peer's TCP acknowledged every byte written so far. Call right after the flush,
    /// from the writer (the socket is open).
    pub fn flushed(&mut self, told: &mut Vec<oneshot::Sender<()>>) {
        if told.is_empty() {
            return;
        }
        let (socket, poller) = match self {
            StoredAt::Flushed => {
                for waiter in told.drain(..) {
                    let _ = waiter.send(());
                }
                return;
            }
            StoredAt::Tcp { socket, poller } => (socket, poller),
        };
        if poller.is_none() {
            match socket.probe() {
                Ok(probe) => {
                    let probe = Arc::new(probe);
                    let (tx, rx) = mpsc::unbounded_channel();
                    let task = tokio::spawn(poll(probe.clone(), rx));
                    *poller = Some(Poller {
                        probe,
                        flushes: tx,
                        task,
                    });
                }
                Err(e) => {
                    // Untold: refused as no_subscriber, sent again by the source.
                    tracing::warn!(error = %e, "cannot read tcp acknowledgements");
                    told.clear();
                    return;
                }
            }
        }
        let Some(p) = poller else { return };
        match p.probe.mark() {
            Ok(mark) => {
                let _ = p.flushes.send((mark, std::mem::take(told)));
            }
            Err(e) => {
                tracing::debug!(error = %e, "tcp acknowledgements unreadable");
                told.clear();
            }
        }
    }
}

/// Tells each flush's waiters once the socket's acknowledged bytes reach its mark; reads
/// the socket every [`POLL`] while any wait, sleeps on the channel otherwise.
async fn poll(probe: Arc<AckProbe>, mut flushes: mpsc::UnboundedReceiver<Flush>) {
    let mut pending: VecDeque<Flush> = VecDeque::new();
    loop {
        if pending.is_empty() {
            match flushes.recv().await {
                Some(f) => pending.push_back(f),
                None => return,
            }
        }
        while let Ok(f) = flushes.try_recv() {
            pending.push_back(f);
        }
        while let Some((mark, _)) = pending.front() {
            match probe.reached(*mark) {
                Ok(true) => {
                    for waiter in pending.pop_front().map(|f| f.1).unwrap_or_default() {
                        let _ = waiter.send(());
                    }
                }
                Ok(false) => break,
                // The socket is gone: the waiters go untold (refused, sent again).
                Err(_) => return,
            }
        }
        if !pending.is_empty() {
            tokio::time::sleep(POLL).await;
        }
    }
}
