//! [`PlainWrite`]: an `AsyncWrite` that never asks for vectored writes.
//!
//! `FramedWrite` keeps every encoded frame in one contiguous buffer, yet tokio-util's
//! `poll_write_buf` calls `writev` whenever the writer says it is vectored (a tokio
//! `TcpStream` does). With one buffer that is a one-element `writev`: the same bytes as a
//! `send`, plus the kernel's iovec import and VFS layer. On a 100-byte echo over loopback
//! that cost 4% of the server's QPS, all of it in the kernel. Wrapping the write half in
//! [`PlainWrite`] makes the flush a plain `write` (`send` on a socket).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

pin_project_lite::pin_project! {
    /// Forwards every write to `W` and reports `is_write_vectored() == false`, so buffered
    /// writers (`FramedWrite`, `BufWriter`) issue one plain write per contiguous chunk.
    ///
    /// ```
    /// use tokio::io::AsyncWrite;
    /// use y3_transport::PlainWrite;
    ///
    /// let (a, _b) = tokio::io::duplex(64);
    /// assert!(!PlainWrite::new(a).is_write_vectored());
    /// ```
    #[derive(Debug)]
    pub struct PlainWrite<W> {
        #[pin]
        inner: W,
    }
}

impl<W> PlainWrite<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> PlainWrite<W> {
        PlainWrite { inner }
    }

    /// The wrapped writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> crate::stream::WriteHalf for PlainWrite<W> {
    #[cfg(feature = "quic")]
    fn quic_send(self: Pin<&mut Self>) -> Option<&mut quinn::SendStream> {
        (&mut self.get_mut().inner as &mut dyn std::any::Any).downcast_mut()
    }
}

impl<W: AsyncWrite> AsyncWrite for PlainWrite<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn forwards_bytes_and_shutdown() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = PlainWrite::new(a);
        w.write_all(b"hello").await.unwrap();
        w.flush().await.unwrap();
        w.shutdown().await.unwrap();
        let mut out = Vec::new();
        b.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"hello");
    }

    #[cfg(feature = "tcp")]
    #[tokio::test]
    async fn a_tcp_write_half_stops_being_vectored() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, _server) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
            listener.accept().await.unwrap()
        });
        let (_r, w) = client.unwrap().into_split();
        assert!(w.is_write_vectored(), "tokio's half would use writev");
        assert!(!PlainWrite::new(w).is_write_vectored());
    }
}
