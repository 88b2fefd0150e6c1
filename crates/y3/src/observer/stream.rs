//! The chunk loop of a two-key path inside its node, before any level is opened: chunked
//! input for the usual subscription (`outer/inner`: a child of a top-level packet) walks the
//! children of node `outer` with the state the general machine keeps across chunks (the
//! value skipped or taken, a header cut after its tag byte) and the node itself left
//! pending, as the complete-buffer fast path leaves the nodes it enters (`fast_feed.rs`).
//!
//! ```text
//!   chunk 1:  | 80 0b | 01 01 61 | 02 02 |      stream_start: node 0x00 entered, pending
//!             ^ outer   skipped    ^ inner        (its end in `ends[0]`); stream_children
//!   chunk 2:  | ff 3f | 03 02 81 00 |            feed_stream: the value taken, borrowed
//!                                                 (it lies in one chunk)
//! ```
//!
//! It reads no tag or length byte itself: the skip run (`skip::run_by` with the path's key),
//! the short header (`tag::short_at::<true>`) and the header cut after its tag byte
//! (`tag::split_short`) do, as they do for the chunk loop of `chunk.rs`. A header it does not
//! decide (an invalid tag byte, a length of two groups or more, a value past its node) opens
//! the pending node as the general machine would have opened it and goes to the walk, state
//! committed; where the node ends inside a chunk, the rest of the chunk is the walk's, at the
//! top level. So it answers what the general machine answers, or leaves the bytes to it
//! (`crates/y3-harness`'s split tests check that on every split of every input).
//!
//! What it found is returned by value ([`Streamed::Found`]), not through `Observer::hit`:
//! a chunk of 7 bytes costs about as much as the stores and loads of that record.

use super::{CatchUp, Fed, Observed, Observer, State, Taking};
use crate::skip;
use crate::tag::{
    byte_is_invalid, byte_key, keyed_at, short_at, split_short, Head, Short, StopKey,
};
use crate::{DecodeError, Packet, Tag};

/// What the stream loop did with a chunk.
pub(super) enum Streamed {
    /// Consumed the whole chunk (the stream position is the caller's to advance).
    Done,
    /// Left the header at this offset to the general walk, the node opened, or the rest of
    /// the chunk after the node's end (the stream position not advanced).
    Walk(usize),
    /// Took a value, having consumed this many bytes (the stream position advanced): the
    /// value is `input[start..start + len]`, or the observer's buffer when `assembled`.
    Found {
        consumed: usize,
        tag: Tag,
        start: usize,
        len: usize,
        head_len: u8,
        assembled: bool,
    },
}

impl Observer {
    /// At a top-level boundary, for a two-key path (`pair`), when the first packet runs past
    /// `input`: reads its header, and where it is node `outer` (a short header within the
    /// limit, room in depth) enters it pending and answers where its children begin in
    /// `input`, for [`stream_children`](Observer::stream_children); else nothing changes and
    /// the input is the general machine's.
    #[inline(always)]
    pub(super) fn stream_start(&mut self, input: &[u8], outer: u32) -> Option<usize> {
        let limits = &self.config.limits;
        let node = keyed_at::<true, true>(input, 0, outer, limits.max_packet_len)?;
        // A whole packet is the fast path's (and what it gives up on, the walk's).
        if limits.max_depth <= 1 || node.next() <= input.len() {
            return None;
        }
        self.started += 1;
        self.pending = 1;
        self.pending_base = self.pos;
        self.ends[0] = node.next();
        self.catch_up = CatchUp::Stream;
        // The state changes from here on (`reset` restores it).
        self.walked = true;
        Some(node.start)
    }

    /// The next chunk inside the pending node: the value skipped or taken across chunks, or
    /// the header cut after its tag byte, that it begins with, then the children.
    #[inline(always)]
    pub(super) fn feed_stream(&mut self, input: &[u8], inner: u32) -> Streamed {
        let base = self.pos;
        let len = input.len();
        let off = match self.state {
            State::Head if self.hlen == 0 => 0,
            State::Skip { end } => {
                let left = end - base;
                if left > len as u64 {
                    return Streamed::Done;
                }
                self.state = State::Head;
                // `left <= len`, a usize.
                left as usize
            }
            State::Take(Taking {
                end, tag, head_len, ..
            }) => {
                let left = end - base;
                if left > len as u64 {
                    self.assembled.extend_from_slice(input);
                    return Streamed::Done;
                }
                // `left <= len`, a usize.
                let left = left as usize;
                self.state = State::Head;
                self.pos = end;
                self.stream_taken(end);
                if self.assembled.is_empty() {
                    return Streamed::Found {
                        consumed: left,
                        tag,
                        start: 0,
                        len: left,
                        head_len,
                        assembled: false,
                    };
                }
                // The next take clears the buffer (the value handed out borrows it).
                self.assembled.extend_from_slice(&input[..left]);
                return Streamed::Found {
                    consumed: left,
                    tag,
                    start: 0,
                    len: self.assembled.len(),
                    head_len,
                    assembled: true,
                };
            }
            State::Head => {
                // A header cut after its tag byte (valid, kept below), completed by a
                // one-group length: taken or skipped here; anything else the walk's.
                let Some(h) = split_short(self.hbuf[0], input) else {
                    return self.stream_bail(0);
                };
                let next = h.next();
                if next as u64 > self.stream_node(base) {
                    return self.stream_bail(0);
                }
                self.hlen = 0;
                if byte_key(h.tag) == inner {
                    return self.stream_take(input, base, &h);
                }
                next
            }
        };
        self.stream_children(input, base, off, inner)
    }

    /// The pending node's end from stream offset `base` (the position never passes it in
    /// this mode).
    #[inline(always)]
    fn stream_node(&self, base: u64) -> u64 {
        self.outer_pending_end() - base
    }

    /// The children of the pending node from `input[off..]` (a header, or past the input
    /// inside a value): skipped by the run, taken, or left to the walk.
    #[inline(always)]
    pub(super) fn stream_children(
        &mut self,
        input: &[u8],
        base: u64,
        mut off: usize,
        inner: u32,
    ) -> Streamed {
        let len = input.len();
        if off > len {
            self.state = State::Skip {
                end: base + off as u64,
            };
            return Streamed::Done;
        }
        // A node longer than memory is as good as endless here.
        let node = usize::try_from(self.stream_node(base)).unwrap_or(usize::MAX);
        let bound = node.min(len);
        off = skip::run_by::<_, true>(&input[..bound], off, node, &StopKey(inner), &mut 0);
        if off >= bound {
            if off == node && off <= len {
                // The node ends here: back at the top level (the rest of the chunk, if any,
                // is the general machine's).
                self.stream_leave();
                if off < len {
                    return Streamed::Walk(off);
                }
            } else if off > len {
                self.state = State::Skip {
                    end: base + off as u64,
                };
            }
            return Streamed::Done;
        }
        // A header the run left: key `inner`, an invalid tag byte, a two-group length, a
        // value past the node, or cut by the chunk's end.
        let h = match short_at::<true>(input, off, self.config.limits.max_packet_len) {
            Short::Head(h) => h,
            Short::Cut(tag) => {
                // Kept as the chunk loop keeps it (`keep_cut`) when it is valid and can
                // still fit in the node.
                if byte_is_invalid(tag) || node <= off + 1 {
                    return self.stream_bail(off);
                }
                self.hbuf[0] = tag;
                self.hlen = 1;
                return Streamed::Done;
            }
            Short::Other => return self.stream_bail(off),
        };
        // Another key with a two-group length (a value of 64 bytes or more) is the general
        // machine's, with the rest of the packet: skipping it here in a loop cost the
        // usual chunk more (`scripts/icount` stream7 +3/+19/+42/+88).
        if h.next() > node || byte_key(h.tag) != inner {
            return self.stream_bail(off);
        }
        self.stream_take(input, base, &h)
    }

    /// Takes the value of header `h` (read, inside the node): handed out when it lies in
    /// `input`, else what arrived is kept (the `Take` state).
    #[inline(always)]
    fn stream_take(&mut self, input: &[u8], base: u64, h: &Head) -> Streamed {
        let (tag, next) = (Tag::from_byte(h.tag), h.next());
        let head_len = h.head_len as u8;
        if next > input.len() {
            self.assembled.clear();
            // A header that ends the chunk (the usual split) leaves nothing to keep yet.
            if h.start < input.len() {
                self.assembled.extend_from_slice(&input[h.start..]);
            }
            self.state = State::Take(Taking {
                end: base + next as u64,
                sub: 0,
                tag,
                head_len,
            });
            return Streamed::Done;
        }
        self.pos = base + next as u64;
        self.stream_taken(self.pos);
        Streamed::Found {
            consumed: next,
            tag,
            start: h.start,
            len: h.len,
            head_len,
            assembled: false,
        }
    }

    /// A value that ends at stream offset `end` was taken: where it ends the node, back at
    /// the top level.
    #[inline(always)]
    fn stream_taken(&mut self, end: u64) {
        if end == self.outer_pending_end() {
            self.stream_leave();
        }
    }

    /// The pending node ended: back at the top level, as the general machine would be.
    #[inline(always)]
    fn stream_leave(&mut self) {
        // The next feed may take the fast path or this loop again (a value handed out from
        // the buffer stays there until the next take clears it).
        self.catch_up = CatchUp::No;
        self.pending = 0;
    }

    /// Hands the header at `off` (the state committed up to it, at a header) to the
    /// general walk, the pending node opened as a level.
    #[cold]
    #[inline(never)]
    fn stream_bail(&mut self, off: usize) -> Streamed {
        self.assembled.clear();
        self.stream_to_general();
        Streamed::Walk(off)
    }

    /// Leaves the stream loop for the general machine wherever it is: the pending node
    /// opened as a level, the value or header in progress kept.
    pub(super) fn stream_to_general(&mut self) {
        self.catch_up = CatchUp::No;
        self.open_pending();
    }

    /// The [`Fed`] of what the stream loop did with `input`.
    #[inline(always)]
    pub(super) fn streamed<'a>(
        &'a mut self,
        input: &'a [u8],
        streamed: Streamed,
    ) -> Result<Fed<'a>, DecodeError> {
        match streamed {
            Streamed::Done => Ok(self.consumed_all(input)),
            Streamed::Walk(off) => self.walk_fed(input, off),
            Streamed::Found {
                consumed,
                tag,
                start,
                len,
                head_len,
                assembled,
            } => {
                let value = if assembled {
                    &self.assembled[..]
                } else {
                    &input[start..start + len]
                };
                Ok(Fed {
                    consumed,
                    observed: Some(Observed {
                        sub: 0,
                        packet: Packet::from_parts(tag, value, head_len as usize, 2, self.config),
                        assembled,
                    }),
                })
            }
        }
    }
}
