//! [`Yielding`]: a read half that hands control back to its task after [`YIELD_EVERY`]
//! bytes, even while the socket has more.
//!
//! `FramedRead` reads until the socket has nothing more, growing its buffer as a frame
//! needs; a peer whose bytes are all there already (a 1 MiB frame in the kernel's buffers)
//! would be read whole in one poll, before the reader's owner could look at what its
//! buffer holds. After [`YIELD_EVERY`] bytes this read half returns `Pending` once (waking
//! its task at once), so the owner sees the partial frame at least every
//! [`YIELD_EVERY`] bytes (a router charges it to its memory budget, `next_metered`).
//!
//! ```text
//!  socket ──▶ Yielding ──▶ FramedRead buffer ──▶ decode
//!             └ every 128 KiB read: Pending (task woken), the owner meters the buffer
//! ```

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// Most bytes read between two chances for the reader's owner to look at its buffer: two
/// read buffers ([`crate::READ_BUFFER`]). A yield costs a task wake-up, about a
/// microsecond per 128 KiB.
pub const YIELD_EVERY: usize = 2 * crate::READ_BUFFER;

/// A read half that returns `Pending` (and wakes its task) after [`YIELD_EVERY`] bytes
/// read without one.
pub struct Yielding<R> {
    inner: R,
    since: usize,
}

impl<R> Yielding<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Yielding<R> {
        Yielding { inner, since: 0 }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Yielding<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.since >= YIELD_EVERY {
            this.since = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.since += buf.filled().len() - before;
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                this.since = 0;
                Poll::Pending
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn yields_after_the_limit_and_reads_everything() {
        let data = vec![7u8; 3 * YIELD_EVERY + 5];
        let mut r = Yielding::new(&data[..]);
        let mut out = Vec::new();
        let mut yields = 0;
        loop {
            let mut chunk = vec![0u8; 16 * 1024];
            let n = futures_util::future::poll_fn(|cx| {
                let mut buf = ReadBuf::new(&mut chunk);
                match Pin::new(&mut r).poll_read(cx, &mut buf) {
                    Poll::Pending => Poll::Ready(None),
                    Poll::Ready(res) => Poll::Ready(Some(res.map(|()| buf.filled().len()))),
                }
            })
            .await;
            match n {
                None => yields += 1,
                Some(Ok(0)) => break,
                Some(Ok(n)) => out.extend_from_slice(&chunk[..n]),
                Some(Err(e)) => panic!("{e}"),
            }
        }
        assert_eq!(out, data);
        assert_eq!(yields, 3);
        let mut again = Yielding::new(&data[..]);
        let mut all = Vec::new();
        again.read_to_end(&mut all).await.unwrap();
        assert_eq!(all.len(), data.len());
    }
}
