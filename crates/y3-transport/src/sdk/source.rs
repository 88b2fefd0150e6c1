//! [`Source`]: sends data frames.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::link::{Link, LinkTx, Out};
use super::ClientOptions;
use crate::frame::{Data, Frame, GoawayCode, Role};
use crate::TransportError;

/// What the background reader saw: a goaway code, or the connection's end.
#[derive(Debug, Default)]
struct Seen {
    goaway: Option<GoawayCode>,
    closed: bool,
}

struct Active {
    link: LinkTx,
    seen: Arc<Mutex<Seen>>,
    reader: JoinHandle<()>,
}

/// A client that sends data frames: an edge device, a script, a benchmark.
///
/// [`send`](Source::send) queues a frame for the writer task and returns its id; frames are
/// written in batches. A lost connection is re-established (with [`ClientOptions::backoff`])
/// on the next send; a goaway from the router (it is shutting down, or refused the client)
/// is returned once as [`TransportError::Goaway`], and the send after that reconnects.
///
/// Delivery is at most once: frames queued on a connection that breaks are lost.
pub struct Source {
    options: ClientOptions,
    active: Option<Active>,
    next_id: u64,
    session: u64,
}

impl Source {
    /// Connects (with backoff) and handshakes as a source.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] when the router refuses the handshake (e.g.
    /// `unauthorized`), [`TransportError::GaveUp`] when it cannot be reached.
    pub async fn connect(options: ClientOptions) -> Result<Source, TransportError> {
        let mut source = Source {
            options,
            active: None,
            next_id: 1,
            session: 0,
        };
        source.ensure().await?;
        Ok(source)
    }

    /// The router's id for the current connection.
    pub fn session(&self) -> u64 {
        self.session
    }

    async fn ensure(&mut self) -> Result<&Active, TransportError> {
        if self.active.is_none() {
            let Link { mut reader, tx } =
                Link::connect_with_backoff(&self.options, Role::Source, &[]).await?;
            self.session = tx.session;
            let seen = Arc::new(Mutex::new(Seen::default()));
            // The reader only watches for goaway (and keeps TCP from resetting on close).
            let (seen2, stop) = (seen.clone(), tx.stop.clone());
            let reader = tokio::spawn(async move {
                loop {
                    match reader.next().await {
                        Some(Ok(Frame::Goaway(g))) => {
                            tracing::debug!(code = g.code.kind(), "source got goaway");
                            lock(&seen2).goaway = Some(g.code);
                            stop.cancel();
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
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

    /// Drops a broken link, returning the goaway that broke it, if any.
    fn take_broken(&mut self) -> Option<GoawayCode> {
        let active = self.active.take()?;
        active.reader.abort();
        let code = lock(&active.seen).goaway;
        code
    }

    /// Queues `payload` under `tag` and returns the frame's id.
    ///
    /// # Errors
    /// [`TransportError::Goaway`] once after the router sent one; connection errors
    /// when reconnecting gives up or is refused.
    pub async fn send(
        &mut self,
        tag: u32,
        payload: impl Into<Bytes>,
    ) -> Result<u64, TransportError> {
        let id = self.next_id;
        self.send_data(Data::new(tag, id, payload)).await?;
        Ok(id)
    }

    /// Queues a complete data frame (id, hops and metadata as given).
    ///
    /// # Errors
    /// As [`Source::send`].
    pub async fn send_data(&mut self, data: Data) -> Result<(), TransportError> {
        self.next_id = self.next_id.max(data.id.wrapping_add(1));
        let mut frame = Frame::Data(data);
        for _ in 0..2 {
            let active = self.ensure().await?;
            let goaway = lock(&active.seen).goaway;
            if let Some(code) = goaway {
                self.take_broken();
                return Err(TransportError::Goaway { code });
            }
            match active.link.out.send(Out::Frame(frame)).await {
                Ok(()) => return Ok(()),
                Err(failed) => {
                    // The writer is gone: the connection broke. Retry once on a new one.
                    let Out::Frame(f) = failed.0 else {
                        unreachable!("we sent a frame")
                    };
                    frame = f;
                    if let Some(code) = self.take_broken() {
                        return Err(TransportError::Goaway { code });
                    }
                }
            }
        }
        Err(TransportError::Closed)
    }

    /// Waits until every frame queued so far has been written to the socket.
    ///
    /// # Errors
    /// [`TransportError::Closed`] when the connection broke first (those frames may be
    /// lost), or the goaway that closed it.
    pub async fn flush(&mut self) -> Result<(), TransportError> {
        let Some(active) = &self.active else {
            return Ok(());
        };
        if active.link.flush().await.is_err() {
            if let Some(code) = self.take_broken() {
                return Err(TransportError::Goaway { code });
            }
            return Err(TransportError::Closed);
        }
        Ok(())
    }

    /// Flushes, closes the write side and waits for the router to close the connection, so
    /// that every frame sent is read by the router.
    ///
    /// # Errors
    /// The writer's error, if the connection broke.
    pub async fn close(mut self) -> Result<(), TransportError> {
        let Some(active) = self.active.take() else {
            return Ok(());
        };
        let result = active.link.close().await;
        let _ = tokio::time::timeout(super::link::LINGER, active.reader).await;
        result
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    // A poisoned lock only means a reader task panicked; the flags are still meaningful.
    seen.lock().unwrap_or_else(|e| e.into_inner())
}
