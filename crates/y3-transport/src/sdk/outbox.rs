//! [`Outbox`]: the frames a client's senders queued and its writer task has not written.
//!
//! A sender encodes its frame straight into the outbox's buffer, on its own task, under a
//! short lock: no frame is moved through a channel, and no per-frame wake-up happens. The
//! writer task is woken when the buffer turns non-empty; it swaps the whole buffer for its
//! own (empty) one and writes it with one call, while the senders fill the other. So a fast
//! sender gets large writes and a slow one gets one write per frame, at once.
//!
//! ```text
//!  send ─encode─▶ [ buf: frame frame frame ]      writer: swap ─▶ [ spare ] ─write─▶ socket
//!  send ─encode─▶                                  (empty, reused)      counted as written
//! ```
//!
//! Bounds: a send waits while its `max_frames` frames or [`MAX_QUEUED_BYTES`] are
//! queued (a single larger frame is queued when the buffer is empty). A frame is *written*
//! once the writer's `write` and `flush` of the buffer holding it returned
//! ([`Outbox::flush`] waits for that).
//!
//! Over QUIC the batch goes to quinn whole (`write_batch`): quinn keeps the buffer until
//! the peer acknowledges it, instead of copying it into one of its own, and the senders
//! encode into the rest of the buffer's allocation or a fresh one.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::frame::Frame;
use crate::stream::BoxWrite;
use crate::TransportError;

/// Writes all of `batch` to `io` and flushes. `batch` is left empty, with the capacity it
/// can keep: all of it when its bytes were copied out, the unused rest when the buffer
/// itself went to a QUIC stream (whole: quinn holds on to the bytes until they are
/// acknowledged, where its `poll_write` would copy them; its flush does nothing).
async fn write_batch(io: &mut BoxWrite, batch: &mut BytesMut) -> std::io::Result<()> {
    #[cfg(feature = "quic")]
    if let Some(send) = io.as_mut().quic_send() {
        send.write_chunk(batch.split().freeze()).await?;
        return Ok(());
    }
    io.write_all(batch).await?;
    io.flush().await?;
    batch.clear();
    Ok(())
}

/// Most encoded bytes queued before a send waits for the writer.
pub const MAX_QUEUED_BYTES: usize = 1 << 20;

/// A buffer the writer keeps between batches; a larger one (a big frame went through) is
/// given back to the allocator after its write.
const KEEP_CAPACITY: usize = 2 * MAX_QUEUED_BYTES;

/// The sending side of one connection, shared by its senders (cheap to clone).
#[derive(Clone)]
pub(crate) struct Outbox {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("Outbox")
            .field("frames", &st.frames)
            .field("bytes", &st.buf.len())
            .field("accepting", &st.accepting)
            .finish()
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer: the buffer turned non-empty (a stored permit when it is busy).
    queued: Notify,
    /// Wakes senders waiting for room and flushes waiting for their frames.
    progress: Notify,
    max_frames: usize,
    max_frame_len: usize,
}

struct State {
    /// Encoded frames the writer has not taken yet.
    buf: BytesMut,
    /// Frames in `buf`.
    frames: usize,
    /// Frames queued since the start.
    pushed: u64,
    /// Of them, frames written.
    written: u64,
    /// Whether sends are taken (false once the link stops or its writer ended).
    accepting: bool,
    /// Whether the writer ended: nothing queued will be written any more.
    done: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The lock guards plain counters and a buffer; a panic elsewhere leaves them usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Outbox {
    /// An outbox of at most `max_frames` queued frames, each encoded against
    /// `max_frame_len`; it takes frames until [`close`](Outbox::close)d or its writer ends.
    pub fn new(max_frames: usize, max_frame_len: usize) -> Outbox {
        Outbox {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    buf: BytesMut::new(),
                    frames: 0,
                    pushed: 0,
                    written: 0,
                    accepting: true,
                    done: false,
                }),
                queued: Notify::new(),
                progress: Notify::new(),
                max_frames: max_frames.max(1),
                max_frame_len,
            }),
        }
    }

    /// Encodes `frame` into the queue, waiting while it is full.
    ///
    /// # Errors
    /// [`TransportError::Closed`] when the outbox no longer takes frames (nothing is
    /// queued); [`TransportError::Frame`] (`too_long`) for a frame over the limit.
    pub async fn send(&self, frame: &Frame) -> Result<(), TransportError> {
        loop {
            // Fast path: room, no waiter registered.
            if self.try_send(frame)? {
                return Ok(());
            }
            let notified = self.shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.try_send(frame)? {
                return Ok(());
            }
            notified.await;
        }
    }

    /// Queues `frame` if there is room: `Ok(false)` when full.
    ///
    /// # Errors
    /// As [`send`](Outbox::send).
    pub fn try_send(&self, frame: &Frame) -> Result<bool, TransportError> {
        let mut st = self.shared.lock();
        if !st.accepting {
            return Err(TransportError::Closed);
        }
        let room = st.frames == 0
            || (st.frames < self.shared.max_frames && st.buf.len() < MAX_QUEUED_BYTES);
        if !room {
            return Ok(false);
        }
        let was_empty = st.buf.is_empty();
        frame
            .encode(&mut st.buf, self.shared.max_frame_len)
            .map_err(TransportError::Frame)?;
        st.frames += 1;
        st.pushed += 1;
        drop(st);
        if was_empty {
            self.shared.queued.notify_one();
        }
        Ok(true)
    }

    /// Waits until every frame queued before the call is written.
    ///
    /// # Errors
    /// [`TransportError::Closed`] when the writer ended before writing them.
    pub async fn flush(&self) -> Result<(), TransportError> {
        let target = self.shared.lock().pushed;
        loop {
            let notified = self.shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.shared.lock();
                if st.written >= target {
                    return Ok(());
                }
                if st.done {
                    return Err(TransportError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Whether sends are refused (the link stopped or its writer ended).
    pub fn is_closed(&self) -> bool {
        !self.shared.lock().accepting
    }

    /// Takes no more frames; what is queued is still written.
    pub fn close(&self) {
        self.shared.lock().accepting = false;
        self.shared.queued.notify_one();
        self.shared.progress.notify_waiters();
    }

    /// The writer ended: nothing more is taken or written.
    fn finish(&self) {
        let mut st = self.shared.lock();
        st.accepting = false;
        st.done = true;
        drop(st);
        self.shared.progress.notify_waiters();
    }

    /// Takes the queued frames (swapped with `spare`, which must be empty): `None` when
    /// nothing is queued. Returns the count of frames pushed up to the last one taken.
    fn take(&self, spare: &mut BytesMut) -> Option<u64> {
        let mut st = self.shared.lock();
        if st.buf.is_empty() {
            return None;
        }
        std::mem::swap(&mut st.buf, spare);
        st.frames = 0;
        let upto = st.pushed;
        drop(st);
        self.shared.progress.notify_waiters();
        Some(upto)
    }

    /// Counts the frames up to `upto` as written.
    fn written(&self, upto: u64) {
        self.shared.lock().written = upto;
        self.shared.progress.notify_waiters();
    }

    /// Writes what is queued to `io` until `stop` is cancelled (or [`close`](Outbox::close)
    /// is called) and the queue is drained, then shuts `io` down. Every batch is one write
    /// and one flush. However it ends, the outbox takes no more frames after it.
    ///
    /// # Errors
    /// The first write error; frames still queued are not written.
    pub async fn write_to(
        &self,
        io: &mut BoxWrite,
        stop: &CancellationToken,
    ) -> Result<(), TransportError> {
        struct Finish<'a>(&'a Outbox);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                self.0.finish();
            }
        }
        let _finish = Finish(self);
        let mut spare = BytesMut::new();
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        loop {
            if stop.is_cancelled() {
                self.shared.lock().accepting = false;
            }
            match self.take(&mut spare) {
                Some(upto) => {
                    write_batch(io, &mut spare).await?;
                    if spare.capacity() > KEEP_CAPACITY {
                        spare = BytesMut::new();
                    }
                    self.written(upto);
                }
                None if !self.shared.lock().accepting => break,
                None => {
                    tokio::select! {
                        biased;
                        _ = self.shared.queued.notified() => {}
                        _ = &mut stopped => {}
                    }
                }
            }
        }
        io.shutdown().await?;
        Ok(())
    }

    /// Decodes and removes every queued frame, as the writer would have written them; for
    /// tests of what senders queue.
    #[cfg(test)]
    pub fn take_frames(&self) -> Vec<Frame> {
        use tokio_util::codec::Decoder;
        let mut spare = BytesMut::new();
        let mut out = Vec::new();
        if let Some(upto) = self.take(&mut spare) {
            let mut codec = crate::FrameCodec::new(self.shared.max_frame_len);
            while let Ok(Some(frame)) = codec.decode(&mut spare) {
                out.push(frame);
            }
            self.written(upto);
        }
        out
    }

    /// Ends the outbox as a gone writer does; for tests.
    #[cfg(test)]
    pub fn end(&self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Data;
    use std::time::Duration;

    fn boxed(io: tokio::io::DuplexStream) -> BoxWrite {
        Box::pin(crate::PlainWrite::new(io))
    }

    fn data(n: u8) -> Frame {
        Frame::Data(Data::new(0x33, vec![n; 3]))
    }

    #[tokio::test]
    async fn frames_queue_in_order_and_a_full_queue_waits() {
        let outbox = Outbox::new(2, 1 << 20);
        outbox.send(&data(1)).await.unwrap();
        outbox.send(&data(2)).await.unwrap();
        let frame = data(3);
        let third = outbox.send(&frame);
        tokio::pin!(third);
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut third).await;
        assert!(waited.is_err(), "a send went past a full queue");
        assert_eq!(outbox.take_frames(), vec![data(1), data(2)]);
        third.await.unwrap();
        assert_eq!(outbox.take_frames(), vec![data(3)]);
    }

    #[tokio::test]
    async fn a_frame_over_the_limit_is_refused_and_nothing_is_queued() {
        let outbox = Outbox::new(4, 8);
        let long = Frame::Data(Data::new(0x33, vec![0; 64]));
        let err = outbox.send(&long).await.unwrap_err();
        assert_eq!(err.kind(), "too_long");
        assert!(outbox.take_frames().is_empty());
    }

    #[tokio::test]
    async fn the_writer_writes_batches_flush_waits_for_them_and_close_drains() {
        let outbox = Outbox::new(1024, 1 << 20);
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let mut client = boxed(client);
        let stop = CancellationToken::new();
        let writer = {
            let (outbox, stop) = (outbox.clone(), stop.clone());
            tokio::spawn(async move { outbox.write_to(&mut client, &stop).await })
        };
        for n in 0..100 {
            outbox.send(&data(n)).await.unwrap();
        }
        outbox.flush().await.unwrap();
        outbox.send(&data(100)).await.unwrap();
        stop.cancel();
        writer.await.unwrap().unwrap();
        assert!(outbox.is_closed());
        assert_eq!(
            outbox.send(&data(0)).await.unwrap_err().kind(),
            "closed",
            "a send after the stop is refused"
        );
        outbox.flush().await.unwrap();
        let mut wire = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut server, &mut wire)
            .await
            .unwrap();
        let mut buf = BytesMut::from(&wire[..]);
        let mut codec = crate::FrameCodec::default();
        let mut got = Vec::new();
        while let Some(f) = tokio_util::codec::Decoder::decode(&mut codec, &mut buf).unwrap() {
            got.push(f);
        }
        assert_eq!(got, (0..=100).map(data).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_broken_writer_fails_the_flush_and_later_sends() {
        let outbox = Outbox::new(16, 1 << 20);
        let (client, server) = tokio::io::duplex(64);
        let mut client = boxed(client);
        drop(server);
        outbox.send(&data(1)).await.unwrap();
        let stop = CancellationToken::new();
        let flush = outbox.flush();
        let (written, flushed) = tokio::join!(outbox.write_to(&mut client, &stop), flush);
        assert!(written.is_err());
        assert_eq!(flushed.unwrap_err().kind(), "closed");
        assert_eq!(outbox.send(&data(2)).await.unwrap_err().kind(), "closed");
    }
}
