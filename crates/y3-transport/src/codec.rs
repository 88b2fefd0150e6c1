//! [`FrameCodec`]: the tokio-util `Decoder`/`Encoder` for frames, a few lines over `y3`.
//!
//! `FramedRead` reads as much as the socket has into one buffer and calls
//! [`Decoder::decode`] until it returns `Ok(None)`, so every complete frame in a read is
//! decoded without another syscall; there is no read-header-then-read-body pair.
//! `FramedWrite` (or `Framed`) encodes frames into one buffer and writes it in as few calls
//! as the socket allows; feeding many frames before one flush batches them.
//!
//! A frame longer than the codec's limit is not an error: its header is read, its body is
//! discarded as it streams past (never buffered), and the frame is noted in [`Skipped`]
//! for the connection's owner to count and log ([`FrameCodec::take_skipped`]). The next
//! frame is read normally.
//!
//! ```text
//!  bytes in:  | frame ≤ limit | hdr ─ body > limit ─────────── | frame ≤ limit |
//!  decoded:   |   Frame       | skipped: discarded as it comes |   Frame       |
//! ```
//!
//! Memory: an accepted frame is buffered whole, so one connection holds at most one
//! partial frame of up to `max_frame_len` bytes (grown as bytes arrive, at most
//! [`MAX_RESERVE`] or double what arrived ahead of them). A frame larger than a read
//! buffer ([`crate::READ_BUFFER`]) gets an allocation of its own, exactly its size once
//! complete, so a queued big frame keeps only its own bytes alive and the reads after it
//! go to a fresh read buffer.

use bytes::{Buf, BytesMut};
use tokio_util::codec::{Decoder, Encoder};
use y3::tag::Header;
use y3::{Config, DecodeError};

use crate::frame::{self, kind, Frame, FrameError};

/// Default largest frame body: a 16 MiB payload plus 64 KiB for its tag, metadata and
/// field headers. YoMo has no limit; 16 MiB covers the payloads real apps send (images,
/// model outputs) while one partial frame per connection stays bounded.
pub const DEFAULT_MAX_FRAME_LEN: usize = (16 << 20) + (64 << 10);

/// Most bytes reserved at once while waiting for the rest of a frame. A peer that declares a
/// large frame and then trickles it in makes the buffer grow with what actually arrives,
/// never ahead of it by more than this.
pub const MAX_RESERVE: usize = 64 * 1024;

/// Frames a codec skipped for being longer than its limit, since they were last taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// How many frames.
    pub frames: u64,
    /// How many of them were data frames.
    pub data: u64,
    /// Their declared body lengths, summed.
    pub bytes: u64,
    /// The last one's frame type key ([`kind`]).
    pub last_kind: u32,
    /// The last one's declared body length.
    pub last_len: u64,
}

/// Decodes and encodes [`Frame`]s: one top-level Y3 packet each.
///
/// The declared length of every frame is checked against `max_frame_len` as soon as its
/// header (at most 6 bytes) has arrived, before any of the body is buffered; a longer
/// frame (up to 2 GiB) is skipped as its bytes arrive and noted in [`Skipped`]. Encoding a
/// frame over the limit fails with [`FrameError::TooLong`].
///
/// Each connection's reader holds its own codec (it is `Copy`; a copy starts where the
/// original was, so copy only a fresh one).
///
/// # Examples
///
/// ```
/// use bytes::BytesMut;
/// use tokio_util::codec::{Decoder, Encoder};
/// use y3_transport::{frame::{Data, Frame}, FrameCodec};
///
/// let mut codec = FrameCodec::default();
/// let mut buf = BytesMut::new();
/// codec.encode(Frame::HandshakeAck, &mut buf)?;
/// codec.encode(Frame::Data(Data::new(0x33, &b"hi"[..])), &mut buf)?;
/// buf.extend_from_slice(&[0xbf]); // the first byte of a third frame
/// assert_eq!(codec.decode(&mut buf)?, Some(Frame::HandshakeAck));
/// assert_eq!(codec.decode(&mut buf)?, Some(Frame::Data(Data::new(0x33, &b"hi"[..]))));
/// assert_eq!(codec.decode(&mut buf)?, None); // incomplete: feed more
/// # Ok::<(), y3_transport::FrameError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    config: Config,
    /// `config` without a length limit: headers are parsed with it, and the length
    /// compared with `max_frame_len` here, so that an over-long frame can be skipped.
    scan: Config,
    max_frame_len: usize,
    /// Whether a frame over `max_frame_len` is an error ([`FrameError::TooLong`]) rather
    /// than skipped: for a handshake, which must be small and cannot be done without.
    refuse_too_long: bool,
    /// Body bytes of a skipped frame still to discard.
    skip_left: u64,
    skipped: Skipped,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl FrameCodec {
    /// A codec skipping (decoding) and refusing (encoding) frames whose body exceeds
    /// `max_frame_len` bytes (capped at `i32::MAX`, the largest Y3 length).
    pub fn new(max_frame_len: usize) -> FrameCodec {
        let max_frame_len = max_frame_len.min(i32::MAX as usize);
        FrameCodec {
            config: frame::config(max_frame_len),
            scan: frame::config(i32::MAX as usize),
            max_frame_len,
            refuse_too_long: false,
            skip_left: 0,
            skipped: Skipped::default(),
        }
    }

    /// The frame body limit.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Changes the frame body limit (capped at `i32::MAX`) for the frames decoded from now
    /// on; with `refuse`, a longer frame is a [`FrameError::TooLong`] error from its header
    /// (nothing of it buffered) instead of being skipped. A router reads a handshake with a
    /// small limit, refused, then the data frames with its full one.
    pub fn set_limit(&mut self, max_frame_len: usize, refuse: bool) {
        let max_frame_len = max_frame_len.min(i32::MAX as usize);
        self.config = frame::config(max_frame_len);
        self.max_frame_len = max_frame_len;
        self.refuse_too_long = refuse;
    }

    /// Whether the decoder is inside a frame it skips (its body is still arriving): the
    /// reader is mid-frame although its buffer may be empty.
    pub fn skipping(&self) -> bool {
        self.skip_left > 0
    }

    /// The frames skipped since the last call, if any.
    pub fn take_skipped(&mut self) -> Option<Skipped> {
        (self.skipped.frames > 0).then(|| std::mem::take(&mut self.skipped))
    }

    /// Makes room for the rest of a `total`-byte frame of which `src` holds the start.
    fn reserve(src: &mut BytesMut, total: usize) {
        let want = (total - src.len()).min(MAX_RESERVE);
        if src.capacity() - src.len() >= want {
            return;
        }
        if total <= crate::READ_BUFFER {
            src.reserve(want);
            return;
        }
        // A frame larger than a read buffer gets its own allocation, grown geometrically
        // (amortised copies) but never beyond the frame: once complete it owns exactly its
        // bytes, and a queued frame pins nothing else.
        let cap = total.min((src.len() * 2).max(src.len() + MAX_RESERVE));
        let mut grown = BytesMut::with_capacity(cap);
        grown.extend_from_slice(src);
        *src = grown;
    }
}

/// Moves an empty read buffer's position back to its start when no decoded frame still
/// points into it (the last frame was dropped), so that the next read lands in the same,
/// cache-warm bytes. Without it every read lands after the previous one and each
/// connection's reads walk its whole buffer ([`crate::READ_BUFFER`], 64 KiB) before
/// `reserve` wraps around: 250 echo connections of 1 KiB messages then keep 16 MiB of
/// buffers cycling through the cache where a plain read loop touches 250 KiB. With a
/// frame still alive (queued for a subscriber) this is a no-op and the buffer walks on.
/// [`FrameCodec`] calls it whenever it is asked to decode from an empty buffer or to
/// encode into one (`FramedWrite`'s buffer walks the same way as it is written out).
///
/// ```text
///   before:  [ consumed ....................... | free ]   reads go here ^
///   after:   [ free ................................... ]   ^ reads go here
/// ```
pub fn rewind(src: &mut BytesMut) {
    debug_assert!(src.is_empty());
    // Asking for one byte more than the room ahead makes `bytes` move the position back to
    // the start when the allocation is unique and the position is not already there; it
    // never allocates.
    let _ = src.try_reclaim(src.capacity() + 1);
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    /// Splits the first complete frame off `src` and decodes it.
    ///
    /// A frame longer than `max_frame_len` is skipped: its body is discarded as it
    /// arrives, it is noted for [`take_skipped`](FrameCodec::take_skipped), and decoding
    /// goes on with the next frame.
    ///
    /// # Errors
    /// [`FrameError::UnknownFrame`] from the first byte, and the errors of
    /// [`Frame::decode`] once the frame is complete.
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        loop {
            if self.skip_left > 0 {
                let n = (src.len() as u64).min(self.skip_left);
                src.advance(n as usize);
                self.skip_left -= n;
                if self.skip_left > 0 {
                    rewind(src);
                    return Ok(None);
                }
            }
            // Refuse garbage on its first byte rather than buffering its "body": a frame's
            // tag byte is the node flag plus a known frame type.
            let Some(&first) = src.first() else {
                rewind(src);
                return Ok(None);
            };
            if first & 0xc0 == 0x40 {
                return Err(DecodeError::InvalidTag { tag: first as u32 }.into());
            }
            if first & 0xc0 != 0x80 || !kind::is_known((first & 0x3f) as u32) {
                return Err(FrameError::UnknownFrame {
                    tag: (first & 0x3f) as u32,
                });
            }
            let head = match Header::parse(src, &self.scan) {
                Ok(Some(head)) => head,
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            if head.len > self.max_frame_len as u64 {
                if self.refuse_too_long {
                    return Err(FrameError::TooLong {
                        declared: head.len,
                        limit: self.max_frame_len as u64,
                    });
                }
                self.skipped.frames += 1;
                self.skipped.data += u64::from(head.tag.id() == kind::DATA);
                self.skipped.bytes += head.len;
                self.skipped.last_kind = head.tag.id();
                self.skipped.last_len = head.len;
                src.advance(head.head_len);
                self.skip_left = head.len;
                continue;
            }
            // `head.len` is at most `max_frame_len`, at most `i32::MAX`.
            let total = head.head_len + head.len as usize;
            if src.len() < total {
                Self::reserve(src, total);
                return Ok(None);
            }
            let frame = src.split_to(total).freeze();
            if total > crate::READ_BUFFER && src.capacity() < crate::READ_BUFFER {
                // The frame took its own allocation along: the reads after it get a new
                // read buffer rather than growing from nothing.
                src.reserve(crate::READ_BUFFER);
            }
            // The header is not parsed again: the frame decoder starts at the fields.
            return Frame::decode_parsed(frame, head.tag, head.head_len, &self.config).map(Some);
        }
    }

    /// As [`decode`](Self::decode); bytes left over at the end of the stream (or a
    /// skipped frame's body still missing) are a [`FrameError::Truncated`] frame.
    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() && self.skip_left == 0 => Ok(None),
            None => Err(FrameError::Truncated {
                buffered: src.len() as u64,
            }),
        }
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = FrameError;

    /// Appends `frame` to `dst`; an empty `dst` (everything before was written out) is
    /// first [rewound](rewind), so encoding reuses the same warm bytes.
    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        append(&frame, dst, self.max_frame_len)
    }
}

/// What the encoder does with a frame, for a caller holding it by reference
/// ([`crate::stream::feed_ref`]): appends `frame` to `dst`, an empty `dst` [rewound](rewind)
/// first.
pub(crate) fn append(
    frame: &Frame,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<(), FrameError> {
    if dst.is_empty() {
        rewind(dst);
    }
    frame.encode(dst, max_frame_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Data, Goaway, GoawayCode};
    use hex_literal::hex;

    fn frames() -> Vec<Frame> {
        vec![
            Frame::HandshakeAck,
            Frame::Data(Data::new(0x10, vec![0xab; 300])),
            Frame::Goaway(Goaway::new(GoawayCode::ShuttingDown, "bye")),
            Frame::Data(Data::new(0x11, &b""[..])),
        ]
    }

    #[test]
    fn every_split_point_gives_the_same_frames() {
        let mut codec = FrameCodec::default();
        let mut wire = BytesMut::new();
        for f in frames() {
            codec.encode(f, &mut wire).unwrap();
        }
        for split in 0..=wire.len() {
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            for chunk in [&wire[..split], &wire[split..]] {
                buf.extend_from_slice(chunk);
                while let Some(f) = codec.decode(&mut buf).unwrap() {
                    out.push(f);
                }
            }
            assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
            assert_eq!(out, frames(), "split at {split}");
        }
        // One byte at a time.
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in wire.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out, frames());
    }

    #[test]
    fn an_empty_buffer_rewinds_once_its_frames_are_dropped() {
        let mut codec = FrameCodec::default();
        let mut wire = BytesMut::new();
        codec.encode(frames()[1].clone(), &mut wire).unwrap();
        let mut buf = BytesMut::with_capacity(4096);
        let start = buf.as_ptr();
        buf.extend_from_slice(&wire);
        let frame = codec.decode(&mut buf).unwrap().unwrap();
        // The frame still points into the buffer: nothing moves.
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert_ne!(buf.as_ptr(), start);
        assert_eq!(frame, frames()[1]);
        drop(frame);
        // Unique again: the next (empty) decode moves the read position back.
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert_eq!(buf.as_ptr(), start);
        assert_eq!(buf.capacity(), 4096);
        // And again after another frame, with no allocation on the way.
        buf.extend_from_slice(&wire);
        drop(codec.decode(&mut buf).unwrap().unwrap());
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert_eq!((buf.as_ptr(), buf.capacity()), (start, 4096));
    }

    #[test]
    fn an_empty_write_buffer_rewinds() {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::with_capacity(1024);
        let start = buf.as_ptr();
        codec.encode(Frame::HandshakeAck, &mut buf).unwrap();
        let n = buf.len();
        // Written out, as FramedWrite's flush does.
        bytes::Buf::advance(&mut buf, n);
        assert_ne!(buf.as_ptr(), start);
        codec.encode(Frame::HandshakeAck, &mut buf).unwrap();
        assert_eq!(buf.as_ptr(), start);
        assert_eq!(buf.len(), n);
    }

    #[test]
    fn huge_declared_length_is_skipped_from_the_header() {
        let mut codec = FrameCodec::new(1024);
        // Data frame declaring 2^31-1 bytes: bf, then PVarInt 7fffffff = 87 ff ff ff 7f.
        let mut buf = BytesMut::from(&hex!("bf 87ffffff7f 0101")[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.is_empty() && codec.skipping());
        assert!(buf.capacity() <= 64, "{}", buf.capacity());
        assert_eq!(
            codec.take_skipped(),
            Some(Skipped {
                frames: 1,
                data: 1,
                bytes: 2147483647,
                last_kind: kind::DATA,
                last_len: 2147483647
            })
        );
        assert_eq!(codec.take_skipped(), None);
        let err = codec.decode_eof(&mut buf).unwrap_err();
        assert_eq!(err.kind(), "truncated");
        // Just under the limit: accepted, waiting for the body, with a bounded reservation.
        let mut codec = FrameCodec::new(16 << 20);
        let mut buf = BytesMut::from(&hex!("bf 84808000")[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() <= MAX_RESERVE + 64, "{}", buf.capacity());
    }

    #[test]
    fn a_refusing_limit_fails_from_the_header() {
        let mut codec = FrameCodec::default();
        codec.set_limit(64 << 10, true);
        // A handshake (0x31, node: 0xb1) declaring megabytes.
        let mut buf = BytesMut::from(&hex!("b1 84808000 01")[..]);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(
            matches!(err, FrameError::TooLong { declared, limit: 65536 } if declared > 1 << 20),
            "{err:?}"
        );
        // Back to the full limit, skipping.
        codec.set_limit(DEFAULT_MAX_FRAME_LEN, false);
        let mut buf = BytesMut::from(&hex!("bf 84808000")[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(!codec.skipping(), "waits for the body");
    }

    #[test]
    fn garbage_fails_on_the_first_bytes() {
        let mut codec = FrameCodec::default();
        for (bytes, kind) in [
            (&b"GET / HTTP/1.1\r\n"[..], "invalid_tag"),
            (&hex!("1001")[..], "unknown_frame"),
            (&hex!("a0ff")[..], "unknown_frame"),
            (&hex!("bf7f")[..], "negative_length"),
        ] {
            let err = codec.decode(&mut BytesMut::from(bytes)).unwrap_err();
            assert_eq!(err.kind(), kind, "{bytes:02x?}");
        }
    }

    #[test]
    fn truncated_at_eof() {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&hex!("bf0a 010110")[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        let err = codec.decode_eof(&mut buf).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { buffered: 5 }));
    }
}
