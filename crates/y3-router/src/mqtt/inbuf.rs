//! A connection's read buffer, sized to how its client sends: a client that publishes flat
//! out is read up to [`READ_BUFFER`] bytes (dozens of 1 KiB publishes) per read, as y3's
//! own connections are, so that each read, wake-up and hand-over to the router carries
//! many messages; a client that sends little holds a small buffer.
//!
//! ```text
//!  room before a read:  size (READ_MIN ─ a read that fills it: ×2 ─▶ … ─▶ READ_BUFFER)
//!  a read under size / 8 with nothing left unparsed: size back to READ_MIN, and the large
//!  buffer let go (a new one of READ_MIN bytes; the old is freed with the last payload of it)
//! ```
//!
//! Publishes are parsed as slices of this buffer; the router copies those under its
//! `COPY_BELOW` out before it queues them (`outbox.rs`), so a queued small message never
//! pins a read buffer, and charges a larger one with the whole buffer it keeps alive
//! ([`READ_BUFFER`], `outbox::held_bytes`).

use bytes::BytesMut;
use y3_transport::READ_BUFFER;

/// The room a connection's first read gets, and what a quiet one goes back to.
pub(crate) const READ_MIN: usize = 8 * 1024;

/// The read buffer and the room its next read gets.
#[derive(Debug)]
pub(crate) struct InBuf {
    /// Bytes read and not yet parsed.
    pub buf: BytesMut,
    /// Room the next read gets (READ_MIN..=READ_BUFFER).
    size: usize,
}

impl Default for InBuf {
    fn default() -> InBuf {
        InBuf {
            buf: BytesMut::with_capacity(READ_MIN),
            size: READ_MIN,
        }
    }
}

impl InBuf {
    /// Makes room for the next read (at least the current size).
    pub fn prepare(&mut self) {
        self.buf.reserve(self.size);
    }

    /// A read of `n` bytes just happened (call it before parsing them): one that filled
    /// the room doubles it (up to [`READ_BUFFER`]); a small one into an otherwise empty
    /// buffer shrinks it back to [`READ_MIN`].
    pub fn read(&mut self, n: usize) {
        if n >= self.size {
            self.size = (self.size * 2).min(READ_BUFFER);
        } else if self.size > READ_MIN && n < self.size / 8 && self.buf.len() == n {
            // Only what this read brought is buffered (nothing of a packet left before it):
            // a new small buffer takes it, the large one goes with its last payload.
            let mut small = BytesMut::with_capacity(READ_MIN.max(n));
            small.extend_from_slice(&self.buf);
            self.buf = small;
            self.size = READ_MIN;
        }
    }

    /// The room the next read gets.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads that fill the room grow it to `READ_BUFFER`; a small read after them gives
    /// the large buffer up.
    #[test]
    fn grows_while_filled_and_shrinks_when_quiet() {
        let mut b = InBuf::default();
        let mut sizes = Vec::new();
        for _ in 0..6 {
            b.prepare();
            let n = b.size();
            assert!(b.buf.capacity() - b.buf.len() >= n);
            b.buf.extend_from_slice(&vec![0u8; n]);
            b.read(n);
            b.buf.clear();
            sizes.push(b.size());
        }
        assert_eq!(
            sizes,
            [
                16 << 10,
                32 << 10,
                READ_BUFFER,
                READ_BUFFER,
                READ_BUFFER,
                READ_BUFFER
            ]
        );
        b.prepare();
        b.buf.extend_from_slice(b"12345");
        b.read(5);
        assert_eq!(b.size(), READ_MIN);
        assert_eq!(&b.buf[..], b"12345");
        assert!(b.buf.capacity() < 2 * READ_MIN);
    }
}
