//! The write side of a plain-TCP MQTT client's socket, shared by its connection's task and
//! its session's downlink, so that a subscriber's messages are written where the router
//! hands them over: no session queue, no wake-up of the connection's task in between.
//!
//! ```text
//!  downlink's writer ─ batch ─▶ Session::offer: connected, queue empty, window open
//!        │                         └─ encode ─▶ pending bytes ─┐ (under the session's lock:
//!        │                                                      │  the order messages are
//!  connection task ─ queued messages, PUBACK, SUBACK, ... ─────┤  decided in is the order
//!                                                               │  they are written in)
//!        end of the batch: try_flush ─ write(2) now, no wait ──┤
//!                                                               ▼
//!  what the socket did not take at once: the connection's task writes it (woken), waiting
//!  for the socket; meanwhile, and past PENDING_MAX, messages wait in the session's queue
//!  (bounded by `max_session_queue`, as for a client that is slow).
//! ```
//!
//! The bytes an outlet holds for its socket (pending, and those its connection's task is
//! writing) are charged to the router's memory budget (`budget.rs`, the
//! `y3_router_queued_bytes` gauge) from the moment they are appended until the socket takes
//! them, or the outlet is dropped with its connection. A subscriber's message that the
//! budget cannot take is not appended: it takes the session's queue instead, under that
//! queue's own policy (`max_session_queue`), as past `PENDING_MAX`. The connection's own
//! packets (acknowledgements, what it writes from the session's queue, at most a batch at a
//! time) are charged as they are appended, never refused.
//!
//! Only plain TCP has one: a TLS stream's writes go through rustls, whose buffered records
//! need a flush by whoever waits for the socket, so a TLS client's messages take the
//! session's queue.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, BytesMut};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

use crate::metrics::Metrics;

/// Bytes waiting for the socket past which a subscriber's messages wait in the session's
/// queue instead (the connection writes them there in turns with its other work).
pub(crate) const PENDING_MAX: usize = 64 * 1024;

/// Bytes for the socket, in the order they were decided.
#[derive(Debug, Default)]
struct Pending {
    bytes: BytesMut,
    /// The connection's task is writing (and waiting for the socket): others only append.
    writing: bool,
}

/// A plain-TCP client's socket, its write side (see the module).
#[derive(Debug)]
pub(crate) struct Outlet {
    half: OwnedWriteHalf,
    pending: Mutex<Pending>,
    /// Woken when bytes wait that the socket did not take at once.
    pub wake: Notify,
    /// The router's metrics: its memory budget is charged with the bytes held here.
    metrics: Arc<Metrics>,
    /// Bytes charged to the budget now: appended and not yet taken by the socket.
    charged: AtomicUsize,
}

impl Outlet {
    /// The write side of a connection's socket, its bytes charged to `metrics`' budget.
    pub fn new(half: OwnedWriteHalf, metrics: Arc<Metrics>) -> Outlet {
        Outlet {
            half,
            pending: Mutex::default(),
            wake: Notify::new(),
            metrics,
            charged: AtomicUsize::new(0),
        }
    }

    /// Charges `n` more bytes held to the budget.
    fn charge(&self, n: usize) {
        self.metrics.budget.changed(0, n);
        self.charged.fetch_add(n, Ordering::Relaxed);
    }

    /// The socket took `n` bytes: their charge comes back.
    fn release(&self, n: usize) {
        self.metrics.budget.changed(n, 0);
        self.charged.fetch_sub(n, Ordering::Relaxed);
    }

    /// Bytes charged to the budget now (appended, not yet taken by the socket).
    #[cfg(test)]
    pub fn charged(&self) -> usize {
        self.charged.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends what `encode` writes into the pending bytes, charged to the budget, unless
    /// `PENDING_MAX` wait already and the socket takes none of them now, or the budget has
    /// no room for them; whether it was appended. `encode`'s error leaves nothing appended.
    pub fn append<E>(
        &self,
        encode: impl FnOnce(&mut BytesMut) -> Result<(), E>,
    ) -> Result<bool, E> {
        let mut p = self.lock();
        if p.bytes.len() >= PENDING_MAX {
            if p.writing {
                return Ok(false);
            }
            self.write_now(&mut p);
            if p.bytes.len() >= PENDING_MAX {
                return Ok(false);
            }
        }
        let at = p.bytes.len();
        encode(&mut p.bytes).inspect_err(|_| p.bytes.truncate(at))?;
        let added = p.bytes.len() - at;
        if !self.metrics.budget.fits(added) {
            p.bytes.truncate(at);
            return Ok(false);
        }
        self.charge(added);
        Ok(true)
    }

    /// Moves `out` (the connection's own packets, encoded) to the end of the pending bytes,
    /// charged to the budget.
    pub fn append_all(&self, out: &mut BytesMut) {
        if !out.is_empty() {
            let mut p = self.lock();
            p.bytes.extend_from_slice(out);
            self.charge(out.len());
            out.clear();
        }
    }

    /// Writes what the socket takes now, without waiting (the downlink's end of a batch);
    /// what remains is the connection's task's to write, woken for it.
    pub fn try_flush(&self) {
        let mut p = self.lock();
        if p.writing || p.bytes.is_empty() {
            return;
        }
        self.write_now(&mut p);
    }

    /// One non-blocking write of the pending bytes; wakes the connection's task for the
    /// rest (or for the error, which its own write meets again).
    fn write_now(&self, p: &mut Pending) {
        while !p.bytes.is_empty() {
            match self.half.try_write(&p.bytes) {
                Ok(n) if n == p.bytes.len() => {
                    self.release(n);
                    p.bytes.clear();
                }
                Ok(n) => {
                    self.release(n);
                    p.bytes.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.wake.notify_one();
                    return;
                }
            }
        }
    }

    /// Writes every pending byte, waiting for the socket as needed (the connection's task;
    /// `spare` is its buffer to swap with, so that neither side allocates).
    pub async fn write_all(&self, spare: &mut BytesMut) -> io::Result<()> {
        loop {
            {
                let mut p = self.lock();
                if p.bytes.is_empty() {
                    p.writing = false;
                    return Ok(());
                }
                p.writing = true;
                spare.clear();
                std::mem::swap(&mut p.bytes, spare);
            }
            let written = self.write_out(spare).await;
            if written.is_err() {
                self.lock().writing = false;
            }
            written?;
        }
    }

    async fn write_out(&self, bytes: &mut BytesMut) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.half.try_write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.release(n);
                    bytes.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.half.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Drop for Outlet {
    /// What the socket never took (the connection went): its charge comes back.
    fn drop(&mut self) {
        let left = *self.charged.get_mut();
        self.metrics.budget.changed(left, 0);
    }
}

/// A connected outlet (charging `metrics`' budget) and the client's end of its socket, for
/// tests.
#[cfg(test)]
pub(crate) async fn test_pair_in(metrics: Arc<Metrics>) -> (Outlet, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
    let (client, accepted) = tokio::join!(client, listener.accept());
    let (_, half) = accepted.unwrap().0.into_split();
    (Outlet::new(half, metrics), client.unwrap())
}

/// A connected outlet with metrics of its own and the client's end of its socket, for tests.
#[cfg(test)]
pub(crate) async fn test_pair() -> (Outlet, tokio::net::TcpStream) {
    test_pair_in(Arc::new(Metrics::new())).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Bytes appended by either side reach the socket in the order appended, whether the
    /// socket took them at once or the connection's task waited for it; past
    /// `PENDING_MAX` unwritten, appends are refused (the caller queues instead).
    #[tokio::test]
    async fn writes_in_order_and_refuses_past_the_bound() {
        let (outlet, mut client) = test_pair().await;
        let chunk = vec![7u8; 16 * 1024];
        let mut sent = 0usize;
        // The client does not read: the socket's buffers fill, then the pending bytes.
        loop {
            let appended = outlet
                .append(|b| {
                    b.extend_from_slice(&chunk);
                    Ok::<_, ()>(())
                })
                .unwrap();
            if !appended {
                break;
            }
            sent += chunk.len();
            outlet.try_flush();
            assert!(sent < 64 << 20, "never refused");
        }
        let mut own = BytesMut::from(&b"end"[..]);
        outlet.append_all(&mut own);
        assert!(own.is_empty());
        let mut spare = BytesMut::new();
        let (written, read) = tokio::join!(outlet.write_all(&mut spare), async {
            let mut got = vec![0u8; sent + 3];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        written.unwrap();
        assert!(read[..sent].iter().all(|b| *b == 7));
        assert_eq!(&read[sent..], b"end");
        assert!(!outlet.lock().writing);
    }

    /// A subscriber that stops reading: what its outlet holds shows in the budget's gauge,
    /// past the budget's limit the next message is refused (it takes the session's queue),
    /// and the charge comes back as the socket takes the bytes, and when the outlet goes
    /// with its connection.
    #[tokio::test]
    async fn held_bytes_are_charged_until_written_or_gone() {
        let metrics = Arc::new(Metrics::new());
        let budget = &metrics.budget;
        let (outlet, mut client) = test_pair_in(metrics.clone()).await;
        let chunk = vec![7u8; 4 * 1024];
        let append = |outlet: &Outlet| {
            outlet
                .append(|b| {
                    b.extend_from_slice(&chunk);
                    Ok::<_, ()>(())
                })
                .unwrap()
        };
        // Nothing read: the socket's buffers fill, then the pending bytes.
        let mut sent = 0usize;
        while outlet.lock().bytes.len() < PENDING_MAX / 2 {
            assert!(append(&outlet));
            sent += chunk.len();
            outlet.try_flush();
            assert!(sent < 64 << 20, "the socket never filled");
        }
        let pending = outlet.lock().bytes.len();
        assert_eq!(outlet.charged(), pending, "what the socket did not take");
        assert_eq!(budget.used(), pending, "in the budget's gauge");
        // A budget with no room for one more message: refused, nothing charged.
        budget.set_limit(pending + chunk.len() / 2);
        assert!(!append(&outlet), "past the budget: the session's queue");
        assert_eq!(budget.used(), pending);
        budget.set_limit(0);
        // The client reads: everything is written, the charge comes back.
        let mut spare = BytesMut::new();
        let (written, read) = tokio::join!(outlet.write_all(&mut spare), async {
            let mut got = vec![0u8; sent];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        written.unwrap();
        assert_eq!(read.len(), sent);
        assert_eq!((outlet.charged(), budget.used()), (0, 0));
        // Stalled again, then the connection goes: the outlet's drop gives the charge back.
        let mut own = BytesMut::from(&vec![1u8; 8 * 1024][..]);
        while outlet.lock().bytes.len() < PENDING_MAX / 2 {
            assert!(append(&outlet));
            outlet.append_all(&mut own);
            outlet.try_flush();
        }
        assert!(budget.used() >= PENDING_MAX / 2);
        assert_eq!(budget.used(), outlet.charged());
        drop(outlet);
        assert_eq!(budget.used(), 0, "released with the connection");
    }
}
