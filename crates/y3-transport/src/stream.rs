//! [`Connection`]: a framed reader and writer over any byte stream (TCP, TLS, a QUIC
//! stream pair, an in-memory pipe). The one [`FrameCodec`] serves them all.

use std::fmt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::StreamExt;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::codec::{FrameCodec, Skipped};
use crate::frame::FrameError;
use crate::frame::{Frame, Goaway};
use crate::plain_write::PlainWrite;

/// Initial read buffer: one read syscall takes up to this many bytes of frames.
pub const READ_BUFFER: usize = 64 * 1024;

/// Write buffer size at which feeding more frames flushes first.
pub const WRITE_BUFFER: usize = 64 * 1024;

/// A boxed read half.
pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;
/// A boxed write half.
pub type BoxWrite = Pin<Box<dyn WriteHalf>>;

/// A write half of a [`Connection`]: an `AsyncWrite` that says whether a QUIC send stream is
/// under it. A writer holding whole buffers hands them to that stream as they are
/// (`write_chunk`: quinn keeps the buffer) instead of through `poll_write`, which copies
/// every byte into a buffer of quinn's (4% of a QUIC client's CPU at 1 KiB frames).
pub trait WriteHalf: AsyncWrite + Send {
    /// The QUIC send stream this half writes to, when it is one.
    #[cfg(feature = "quic")]
    fn quic_send(self: Pin<&mut Self>) -> Option<&mut quinn::SendStream>;
}
/// The framed read half of a [`Connection`]: a `Stream` of `Result<Frame, FrameError>`.
pub type FrameReader = FramedRead<BoxRead, FrameCodec>;
/// The framed write half of a [`Connection`]: a `Sink<Frame>`; `feed` many, `flush` once.
pub type FrameWriter = FramedWrite<BoxWrite, FrameCodec>;

/// Whether `reader` is inside a frame: some of it buffered, or the body of a frame it
/// skips ([`FrameCodec::skipping`]) still arriving. What a frame-stall timeout watches.
pub fn mid_frame(reader: &FrameReader) -> bool {
    !reader.read_buffer().is_empty() || reader.decoder().skipping()
}

/// What [`next_or_skipped`] saw first.
#[derive(Debug)]
pub enum Next {
    /// The next frame (or error, or the end of the stream), as `reader.next()` gives it.
    Frame(Option<Result<Frame, FrameError>>),
    /// No frame yet, but the codec skipped over-long frames: these (taken from it).
    Skipped(Skipped),
}

/// As `reader.next()`, but also ready as soon as the codec has skipped a frame while no
/// frame is complete, so that a skip is counted when it starts, not when the next frame
/// comes. (A skip followed by a complete frame in the same read is left in the codec for
/// [`FrameCodec::take_skipped`].)
pub async fn next_or_skipped(reader: &mut FrameReader) -> Next {
    std::future::poll_fn(|cx| match reader.poll_next_unpin(cx) {
        Poll::Ready(frame) => Poll::Ready(Next::Frame(frame)),
        Poll::Pending => match reader.decoder_mut().take_skipped() {
            Some(skipped) => Poll::Ready(Next::Skipped(skipped)),
            None => Poll::Pending,
        },
    })
    .await
}

/// The next frame already complete in `reader`'s buffer, decoded where it lies: frames
/// that arrived together are taken without the stream adapters, each of which would move
/// the frame once more (`poll_next`, [`next_or_skipped`], `now_or_never`). `None` when
/// the buffer holds no complete frame (then poll the reader as usual: it reads, skips,
/// and ends the stream as it would have). After an `Err` the reader must not be polled
/// again.
pub fn next_buffered(reader: &mut FrameReader) -> Option<Result<Frame, FrameError>> {
    if reader.read_buffer().is_empty() {
        return None;
    }
    // The codec and the buffer are borrowed one at a time: the buffer is lent to the codec
    // (a move of its handle, no copy of its bytes) and put back.
    let mut buffer = std::mem::take(reader.read_buffer_mut());
    let decoded = tokio_util::codec::Decoder::decode(reader.decoder_mut(), &mut buffer);
    *reader.read_buffer_mut() = buffer;
    decoded.transpose()
}

/// As `writer.feed(frame)`, but encoding `frame` where it lies (a writer's queue slot)
/// instead of moving it into the sink: waits while the write buffer is past its
/// backpressure boundary (flushing), then appends the frame to it as the codec's
/// encoder does (`codec::append`).
///
/// # Errors
/// A failed flush, and [`Frame::encode`]'s errors (nothing is written then).
pub async fn feed_ref(writer: &mut FrameWriter, frame: &Frame) -> Result<(), FrameError> {
    std::future::poll_fn(|cx| futures_util::Sink::<Frame>::poll_ready(Pin::new(&mut *writer), cx))
        .await?;
    let max_len = writer.encoder().max_frame_len();
    crate::codec::append(frame, writer.write_buffer_mut(), max_len)
}

/// Which adapter a connection came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Plain TCP.
    Tcp,
    /// TLS 1.3 over TCP.
    TcpTls,
    /// One bidirectional QUIC stream.
    Quic,
    /// An in-memory pipe (tests, embedded use).
    Memory,
}

impl TransportKind {
    /// The snake_case name used in logs and metric labels.
    pub const fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::TcpTls => "tcp_tls",
            TransportKind::Quic => "quic",
            TransportKind::Memory => "memory",
        }
    }
}

/// Keeps what must outlive the streams (a QUIC connection and endpoint) and knows how to
/// let the last bytes reach the peer before closing.
pub enum Guard {
    /// Nothing to keep.
    None,
    /// A QUIC connection (and, on the client side, its endpoint).
    #[cfg(feature = "quic")]
    Quic(quinn::Connection, Option<quinn::Endpoint>),
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Guard::None => f.write_str("Guard::None"),
            #[cfg(feature = "quic")]
            Guard::Quic(..) => f.write_str("Guard::Quic"),
        }
    }
}

impl Guard {
    /// Closes at once. Use when both directions are done (the peer's end of stream has been
    /// read), so nothing in flight is lost.
    pub fn close(self) {
        match self {
            Guard::None => {}
            #[cfg(feature = "quic")]
            Guard::Quic(conn, _endpoint) => {
                crate::quic::log_stats(&conn);
                conn.close(0u32.into(), b"");
            }
        }
    }

    /// Closes at once with `goaway`: over QUIC, its close code and `<kind>: <reason>`
    /// (what decides whether a YoMo client reconnects); byte streams have no such thing.
    pub fn close_with(self, goaway: &Goaway) {
        match self {
            Guard::None => {}
            #[cfg(feature = "quic")]
            Guard::Quic(conn, _endpoint) => {
                crate::quic::log_stats(&conn);
                let reason = crate::quic::close_reason(goaway);
                conn.close(
                    crate::quic::close_code(goaway.code).into(),
                    reason.as_bytes(),
                );
            }
        }
    }

    /// Waits (at most `linger`) for the peer to close, so that data written before
    /// dropping the connection is not cut off by a QUIC `CONNECTION_CLOSE`, then closes
    /// with `goaway` (or quietly, without one).
    /// A no-op for byte streams, whose kernel buffers outlive the socket.
    pub async fn linger(self, linger: Duration, goaway: Option<&Goaway>) {
        match self {
            Guard::None => {}
            #[cfg(feature = "quic")]
            Guard::Quic(conn, endpoint) => {
                let _ = tokio::time::timeout(linger, conn.closed()).await;
                match goaway {
                    Some(g) => Guard::Quic(conn, None).close_with(g),
                    None => Guard::Quic(conn, None).close(),
                }
                if let Some(endpoint) = endpoint {
                    let _ = tokio::time::timeout(linger, endpoint.wait_idle()).await;
                }
            }
        }
    }
}

/// A framed connection: reader, writer, and who is at the other end.
pub struct Connection {
    /// Frames in.
    pub reader: FrameReader,
    /// Frames out.
    pub writer: FrameWriter,
    /// The peer's address, when there is one.
    pub peer: Option<SocketAddr>,
    /// The adapter.
    pub transport: TransportKind,
    /// See [`Guard`].
    pub guard: Guard,
    /// The TCP socket under it (TCP and TLS over TCP), for reading what the peer
    /// acknowledged (`tcp_acked.rs`); `None` for QUIC and in-memory pipes.
    #[cfg(feature = "tcp")]
    pub acked: Option<crate::tcp_acked::TcpAcked>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.peer)
            .field("transport", &self.transport)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Frames a read half and a write half with `codec`.
    pub fn new(
        read: impl AsyncRead + Send + 'static,
        write: impl AsyncWrite + Send + Unpin + 'static,
        codec: FrameCodec,
        transport: TransportKind,
        peer: Option<SocketAddr>,
    ) -> Connection {
        // Yielding: the owner sees a partial frame every YIELD_EVERY bytes (yielding.rs).
        let read = crate::yielding::Yielding::new(Box::pin(read) as BoxRead);
        let reader = FramedRead::with_capacity(Box::pin(read) as BoxRead, codec, READ_BUFFER);
        // One contiguous buffer: a plain write, not a one-element writev (see PlainWrite).
        let write = PlainWrite::new(write);
        let mut writer = FramedWrite::new(Box::pin(write) as BoxWrite, codec);
        writer.set_backpressure_boundary(WRITE_BUFFER);
        Connection {
            reader,
            writer,
            peer,
            transport,
            guard: Guard::None,
            #[cfg(feature = "tcp")]
            acked: None,
        }
    }

    /// Two connected in-memory connections (client, server) over a `tokio::io::duplex`
    /// pipe of `buffer` bytes each way.
    pub fn pair(codec: FrameCodec, buffer: usize) -> (Connection, Connection) {
        let (a, b) = tokio::io::duplex(buffer);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        (
            Connection::new(ar, aw, codec, TransportKind::Memory, None),
            Connection::new(br, bw, codec, TransportKind::Memory, None),
        )
    }
}

/// Bytes `reader` has buffered of a frame still arriving (0 between frames): what a memory
/// budget charges for it. Its allocation may be ahead of this by at most
/// [`crate::codec::MAX_RESERVE`] (or double what arrived, for a frame larger than a read
/// buffer), and only the bytes written are resident.
pub fn partial_len(reader: &FrameReader) -> usize {
    reader.read_buffer().len()
}

/// As [`next_or_skipped`], telling `meter` the partial frame's buffered length
/// ([`partial_len`]) each time the reader waits for more bytes; `None` as soon as `meter`
/// returns false (the caller cuts the connection).
pub async fn next_metered(
    reader: &mut FrameReader,
    mut meter: impl FnMut(usize) -> bool,
) -> Option<Next> {
    std::future::poll_fn(|cx| match reader.poll_next_unpin(cx) {
        Poll::Ready(frame) => Poll::Ready(Some(Next::Frame(frame))),
        Poll::Pending => match reader.decoder_mut().take_skipped() {
            Some(skipped) => Poll::Ready(Some(Next::Skipped(skipped))),
            None if !meter(partial_len(reader)) => Poll::Ready(None),
            None => Poll::Pending,
        },
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Data;
    use bytes::BytesMut;
    use futures_util::SinkExt;
    use tokio::io::AsyncWriteExt;

    fn wire(frames: &[Frame]) -> Vec<u8> {
        let mut out = BytesMut::new();
        for f in frames {
            f.encode(&mut out, 1 << 20).unwrap();
        }
        out.to_vec()
    }

    #[tokio::test]
    async fn next_buffered_takes_only_frames_complete_in_the_buffer() {
        let (mut tx, rx) = tokio::io::duplex(4096);
        let mut reader = FrameReader::new(Box::pin(rx), FrameCodec::default());
        let frames: Vec<Frame> = (0..3u8)
            .map(|i| Frame::Data(Data::new(0x33, vec![i; 40])))
            .collect();
        // Nothing read yet: nothing buffered.
        assert!(next_buffered(&mut reader).is_none());
        // Two frames and half of a third in one write: the first poll reads them all.
        let bytes = wire(&frames);
        let cut = bytes.len() - 10;
        tx.write_all(&bytes[..cut]).await.unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), frames[0]);
        assert_eq!(next_buffered(&mut reader).unwrap().unwrap(), frames[1]);
        // The third is incomplete: left buffered for the reader, which finishes it.
        assert!(next_buffered(&mut reader).is_none());
        assert!(!reader.read_buffer().is_empty());
        tx.write_all(&bytes[cut..]).await.unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), frames[2]);
        assert!(next_buffered(&mut reader).is_none());
        drop(tx);
        assert!(reader.next().await.is_none());
    }

    #[tokio::test]
    async fn feed_ref_writes_what_feed_writes() {
        let frames = [
            Frame::HandshakeAck,
            Frame::Data(Data::new(0x10, vec![0xab; 300])),
            Frame::Data(Data::new(0x11, &b""[..])),
        ];
        let (tx, mut rx) = tokio::io::duplex(4096);
        let mut writer =
            FrameWriter::new(Box::pin(crate::PlainWrite::new(tx)), FrameCodec::default());
        for f in &frames {
            feed_ref(&mut writer, f).await.unwrap();
        }
        writer.flush().await.unwrap();
        drop(writer);
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut rx, &mut got)
            .await
            .unwrap();
        assert_eq!(got, wire(&frames));
    }
}
