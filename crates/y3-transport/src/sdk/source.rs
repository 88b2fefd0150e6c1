//! [`Source`]: sends data frames.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::link::{Hello, Link, LinkTx};
use super::stamp::Stamp;
use super::ClientOptions;
use crate::frame::{ClientType, Data, Frame, Goaway, GoawayCode};
use crate::TransportError;

/// What the background reader saw: a goaway (frame or close), or the connection's end.
#[derive(Debug, Default)]
struct Seen {
    goaway: Option<Goaway>,
    closed: bool,
}

struct Active {
    link: LinkTx,
    seen: Arc<Mutex<Seen>>,
    reader: JoinHandle<()>,
}

/// A client that sends data frames: an edge device, a script, a benchmark.
///
/// [`send`](Source::send) queues a frame for the writer task and returns once it is
/// queued; frames are written in batches. **A frame counts as sent only once it is written
/// to the connection** (the kernel's socket buffer, or the QUIC stream):
/// [`flush`](Source::flush) returns when every frame queued before it has been written, and
/// [`close`](Source::close) when every frame has been written and the router closed the
/// connection without refusing any. Neither says that the router has read or routed a frame
/// (a router may still fail afterwards); a router that refuses one (`forbidden`,
/// `reserved_tag`, a protocol error) stops reading there, and the error is returned by the
/// next `send`, `flush` or `close`. Like YoMo's sources, every frame carries the metadata `yomo-source-id` (this
/// client's id) and a fresh `yomo-tid`. A lost connection is re-established (with
/// [`ClientOptions::backoff`], forever by default) on the next send, which waits for it:
/// a source outlives a router restart. A goaway that invites the client back (the router
/// is shutting down) is logged and the next send reconnects; one that says not to come
/// back (a refusal) is returned as [`TransportError::Goaway`] by every later send.
///
/// Delivery is at most once: frames queued on a connection that breaks are lost.
pub struct Source {
    options: ClientOptions,
    hello: Hello,
    stamp: Stamp,
    active: Option<Active>,
    refused: Option<Goaway>,
}

impl Source {
    /// Connects (with backoff) and handshakes as a source.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] when the router refuses the handshake (e.g.
    /// `unauthorized`), [`TransportError::GaveUp`] when it cannot be reached.
    pub async fn connect(options: ClientOptions) -> Result<Source, TransportError> {
        let hello = Hello::new(ClientType::Source, &[]);
        let mut source = Source {
            options,
            stamp: Stamp::new(&hello.id),
            hello,
            active: None,
            refused: None,
        };
        source.ensure().await?;
        Ok(source)
    }

    /// This client's id (the `yomo-source-id` of its frames).
    pub fn id(&self) -> &str {
        &self.hello.id
    }

    async fn ensure(&mut self) -> Result<&Active, TransportError> {
        if self.active.is_none() {
            let Link { mut reader, tx } =
                Link::connect_with_backoff(&self.options, &mut self.hello).await?;
            let seen = Arc::new(Mutex::new(Seen::default()));
            // The reader only watches for a goaway (and keeps TCP from resetting on close).
            let (seen2, stop) = (seen.clone(), tx.stop.clone());
            let reader = tokio::spawn(async move {
                loop {
                    match reader.next().await {
                        Some(Ok(Frame::Goaway(g) | Frame::Rejected(g))) => {
                            tracing::debug!(code = g.code.kind(), "source got goaway");
                            lock(&seen2).goaway = Some(g);
                            stop.cancel();
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            if let TransportError::Goaway { code, message } = e.into() {
                                let mut seen = lock(&seen2);
                                seen.goaway.get_or_insert(Goaway::new(code, message));
                            }
                            break;
                        }
                        None => break,
                    }
                }
                lock(&seen2).closed = true;
                stop.cancel();
            });
            self.active = Some(Active {
                link: tx,
                seen,
                reader,
            });
        }
        // Set just above.
        Ok(self.active.as_ref().expect("active link"))
    }

    /// Drops the current connection, returning the refusal it ended with, if any; a goaway
    /// that says not to come back is kept and returned by every later send. A goaway that
    /// invites the client back (the router is shutting down or restarting) is logged and
    /// not returned: the next send reconnects.
    fn take_broken(&mut self) -> Option<TransportError> {
        let active = self.active.take()?;
        active.reader.abort();
        let goaway = lock(&active.seen).goaway.take()?;
        if goaway.code.is_retryable() {
            tracing::info!(
                addr = %self.options.addr,
                code = goaway.code.kind(),
                reason = %goaway.reason,
                "the router closed the connection; reconnecting"
            );
            return None;
        }
        self.refused = Some(goaway.clone());
        Some(TransportError::Goaway {
            code: goaway.code,
            message: goaway.reason,
        })
    }

    /// Queues `payload` under `tag`, with a fresh transaction id, for the writer task; `Ok`
    /// means queued, not yet written (see [`Source::flush`]).
    ///
    /// # Errors
    /// [`TransportError::Goaway`] once after the router closed the connection with a
    /// reason, and for good after a refusal; connection errors when reconnecting fails;
    /// [`FrameError::TooLong`](crate::FrameError::TooLong) (kind `too_long`) for a frame
    /// over [`ClientOptions::max_frame_len`], before anything is sent.
    pub async fn send(
        &mut self,
        tag: u32,
        payload: impl Into<Bytes>,
    ) -> Result<(), TransportError> {
        let payload = payload.into();
        self.send_built(|s| Data::new(tag, payload).with_metadata(s.stamp.next()))
            .await
    }

    /// Queues `payload` under `tag` for the stream functions whose wanted target is
    /// `target` (metadata `yomo-target`).
    ///
    /// # Errors
    /// As [`Source::send`].
    pub async fn send_with_target(
        &mut self,
        tag: u32,
        payload: impl Into<Bytes>,
        target: &str,
    ) -> Result<(), TransportError> {
        let metadata = self.stamp.with_target(&self.hello.id, target);
        self.send_data(Data::new(tag, payload).with_metadata(metadata))
            .await
    }

    /// Queues a data frame as it is (its metadata and hops are not touched).
    ///
    /// # Errors
    /// As [`Source::send`].
    pub async fn send_data(&mut self, data: Data) -> Result<(), TransportError> {
        self.send_built(|_| data).await
    }

    /// Queues the data frame `build` makes, built once it is this send's turn: on the
    /// usual path (a connection with room) the frame is made, encoded into the queue and
    /// dropped where it lies, never moved into the send's future (a `memcpy` call per move
    /// of a frame); only a send that must wait holds it, boxed.
    async fn send_built(
        &mut self,
        build: impl FnOnce(&mut Source) -> Data,
    ) -> Result<(), TransportError> {
        if let Some(g) = &self.refused {
            return Err(TransportError::Goaway {
                code: g.code,
                message: g.reason.clone(),
            });
        }
        // Sends that never wait for room still give the runtime's other tasks (the writer,
        // on a current-thread runtime) their turn, as a channel send would.
        tokio::task::coop::consume_budget().await;
        // The frame lives in this block only: held across no `.await` of this future.
        let waiting = {
            let frame = Frame::Data(build(self));
            // Over the limit, the encoding into the queue fails: said here, nothing queued.
            if let Some(done) = self.try_send_now(&frame) {
                return done;
            }
            // Boxed: the (re)connection's future is large, and a send future that held it
            // inline would be copied whole at every call.
            Box::pin(self.send_waiting(frame))
        };
        waiting.await
    }

    /// Queues `frame` on the current connection if it is up and has room: `None` when the
    /// send must wait or reconnect.
    fn try_send_now(&self, frame: &Frame) -> Option<Result<(), TransportError>> {
        let active = self.active.as_ref()?;
        if lock(&active.seen).goaway.is_some() {
            return None;
        }
        match active.link.out.try_send(frame) {
            Ok(true) => Some(Ok(())),
            Ok(false) | Err(TransportError::Closed) => None,
            Err(error) => Some(Err(error)),
        }
    }

    /// [`send_data`](Source::send_data) once the frame must wait for room or for a
    /// connection.
    async fn send_waiting(&mut self, frame: Frame) -> Result<(), TransportError> {
        for _ in 0..2 {
            let active = self.ensure().await?;
            if lock(&active.seen).goaway.is_some() {
                if let Some(error) = self.take_broken() {
                    return Err(error);
                }
            }
            let Some(active) = &self.active else {
                continue;
            };
            match active.link.out.send(&frame).await {
                Ok(()) => return Ok(()),
                Err(TransportError::Closed) => {
                    // The writer is gone: the connection broke. Retry once on a new one.
                    if let Some(error) = self.take_broken() {
                        return Err(error);
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Err(TransportError::Closed)
    }

    /// Waits until every frame queued so far has been written to the connection (the
    /// kernel's socket buffer, or the QUIC stream). That is all it promises: the router may
    /// not have read them yet.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] or [`TransportError::Closed`] when the connection broke
    /// with frames still queued, or when the router has refused a frame (it reads nothing
    /// after it).
    pub async fn flush(&mut self) -> Result<(), TransportError> {
        let Some(active) = &self.active else {
            return Ok(());
        };
        if active.link.flush().await.is_err() {
            return Err(self.take_broken().unwrap_or(TransportError::Closed));
        }
        let refused = lock(&active.seen).goaway.as_ref().is_some_and(is_refusal);
        if refused {
            return Err(self.take_broken().unwrap_or(TransportError::Closed));
        }
        Ok(())
    }

    /// Flushes, closes the connection and waits (a bounded time) for the router to close
    /// its side.
    ///
    /// # Errors
    /// As [`Source::flush`]; also the refusal the router closed the connection with (a
    /// frame it did not accept, and none after it was read), rather than `Ok`.
    pub async fn close(mut self) -> Result<(), TransportError> {
        let Some(active) = self.active.take() else {
            return Ok(());
        };
        let result = active.link.close().await;
        let _ = tokio::time::timeout(super::link::LINGER, active.reader).await;
        let goaway = lock(&active.seen).goaway.take();
        match goaway {
            Some(g) if is_refusal(&g) => Err(TransportError::Goaway {
                code: g.code,
                message: g.reason,
            }),
            _ => result,
        }
    }
}

/// Whether the connection ended with a refusal: a goaway that says not to come back, and
/// not the plain close (code 0, no reason) a router answers a client's own close with.
fn is_refusal(goaway: &Goaway) -> bool {
    let plain_close = goaway.code == GoawayCode::Unspecified && goaway.reason.is_empty();
    !goaway.code.is_retryable() && !plain_close
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    // A poisoned lock only means a reader task panicked; the flags are still meaningful.
    seen.lock().unwrap_or_else(|e| e.into_inner())
}
