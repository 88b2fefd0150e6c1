//! The general walk: one header at a time through [`Header::parse`] (any dialect, any
//! length, a header split anywhere), the state machine's reference behaviour; the chunk
//! loop and the fast path answer only where they would answer the same.

use super::levels::Action;
use super::{CatchUp, Hit, Observer, State, Taking};
use crate::tag::{Header, MAX_HEADER_LEN};
use crate::DecodeError;

/// What one run of the general walk did: consumed `consumed` bytes and, when `found`,
/// completed the value described by `Observer::hit`.
pub(super) struct Progress {
    pub(super) consumed: usize,
    pub(super) found: bool,
}

impl Observer {
    /// The general state machine from `input[off..]`: one step per state until a value
    /// completes, the input runs out, or an error.
    #[inline(never)]
    pub(super) fn walk(&mut self, input: &[u8], mut off: usize) -> Result<Progress, DecodeError> {
        loop {
            let step = match self.state {
                State::Head => self.step_head(input, off),
                State::Skip { end } => self.step_skip(input, off, end),
                State::Take(taking) => self.step_take(input, off, &taking),
            };
            match step {
                Step::Next(at) => off = at,
                Step::More(consumed) => {
                    self.pos += consumed as u64;
                    return Ok(Progress {
                        consumed,
                        found: false,
                    });
                }
                Step::Found(consumed) => {
                    return Ok(Progress {
                        consumed,
                        found: true,
                    })
                }
                Step::Fail(e) => return Err(e),
            }
        }
    }

    /// `State::Head`: read the next header, then skip, enter or take its value.
    #[inline(always)]
    fn step_head(&mut self, input: &[u8], mut off: usize) -> Step {
        let (h, start) = match self.read_header(input, &mut off) {
            Ok(header) => header,
            Err(Stop::More(consumed)) => return Step::More(consumed),
            Err(Stop::Fail(e)) => return Step::Fail(e),
        };
        // `off` now points at the value; `start` is the header's stream offset.
        let body_end = match self.check_bounds(start, &h) {
            Ok(end) => end,
            Err(e) => return Step::Fail(e),
        };
        match self.decide(&h) {
            Action::Skip => {
                let avail = (input.len() - off) as u64;
                if h.len <= avail {
                    // `h.len <= avail`, which is a usize.
                    off += h.len as usize;
                    self.after_value(self.pos + off as u64);
                } else {
                    // The value runs past the input: count the rest down in the next chunk.
                    self.state = State::Skip { end: body_end };
                    return Step::More(input.len());
                }
                Step::Next(off)
            }
            Action::Enter(active) => {
                if let Err(e) = self.enter(body_end, active) {
                    return Step::Fail(e);
                }
                self.after_value(self.pos + off as u64);
                Step::Next(off)
            }
            Action::Take(sub) => {
                let avail = input.len() - off;
                // `h.len` is at most `i32::MAX`, so it fits in usize.
                let len = h.len as usize;
                if len <= avail {
                    self.hit = Hit {
                        sub,
                        tag: h.tag,
                        start: off,
                        len,
                        head_len: h.head_len,
                        depth: self.parents.len() as u32 + 1,
                        assembled: false,
                    };
                    off += len;
                    self.after_value(self.pos + off as u64);
                    self.pos += off as u64;
                    return Step::Found(off);
                }
                // Straddles chunks: keep what arrived, never reserving from the wire length
                // (it is already bounded by `max_packet_len`, but the bytes may never come).
                self.assembled.clear();
                self.assembled.extend_from_slice(&input[off..]);
                self.state = State::Take(Taking {
                    end: body_end,
                    sub,
                    tag: h.tag,
                    head_len: h.head_len as u8,
                });
                // The rest of the value is still to come: nothing more to do here.
                Step::More(input.len())
            }
        }
    }

    /// The next header and its stream offset, from `input` at `off` (moved past it) or
    /// completing one begun in an earlier chunk; `Err` ends the feed.
    #[inline(always)]
    fn read_header(&mut self, input: &[u8], off: &mut usize) -> Result<(Header, u64), Stop> {
        if self.hlen > 0 {
            return self.complete_header(input, off);
        }
        *off = self.skip_run(input, *off);
        if self.state != State::Head {
            return Err(Stop::More(input.len()));
        }
        let rest = &input[*off..];
        if rest.is_empty() {
            return Err(Stop::More(*off));
        }
        let start = self.pos + *off as u64;
        match Header::parse(rest, &self.config) {
            Ok(Some(h)) => {
                *off += h.head_len;
                Ok((h, start))
            }
            Ok(None) => {
                if let Err(e) = self.check_partial_header(start, rest.len()) {
                    return Err(Stop::Fail(e));
                }
                self.hbuf[..rest.len()].copy_from_slice(rest);
                self.hlen = rest.len();
                Err(Stop::More(input.len()))
            }
            Err(e) => Err(Stop::Fail(self.canonical_error(start, rest, e))),
        }
    }

    /// A header split across chunks: its first `hlen` bytes are in `hbuf`.
    #[inline]
    fn complete_header(&mut self, input: &[u8], off: &mut usize) -> Result<(Header, u64), Stop> {
        let start = self.pos + *off as u64 - self.hlen as u64;
        let n = (MAX_HEADER_LEN - self.hlen).min(input.len() - *off);
        self.hbuf[self.hlen..self.hlen + n].copy_from_slice(&input[*off..*off + n]);
        let buf = &self.hbuf[..self.hlen + n];
        match Header::parse(buf, &self.config) {
            Ok(Some(h)) => {
                *off += h.head_len - self.hlen;
                self.hlen = 0;
                Ok((h, start))
            }
            Ok(None) => {
                if let Err(e) = self.check_partial_header(start, buf.len()) {
                    return Err(Stop::Fail(e));
                }
                self.hlen += n;
                *off += n;
                Err(Stop::More(*off))
            }
            Err(e) => {
                let buf = self.hbuf;
                Err(Stop::Fail(self.canonical_error(
                    start,
                    &buf[..self.hlen + n],
                    e,
                )))
            }
        }
    }

    /// `State::Skip`: pass over the rest of a value that straddles chunks.
    #[inline(always)]
    fn step_skip(&mut self, input: &[u8], off: usize, end: u64) -> Step {
        let here = self.pos + off as u64;
        let avail = (input.len() - off) as u64;
        let left = end - here;
        if left <= avail {
            self.state = State::Head;
            self.after_value(end);
            // `left <= avail`, which is a usize.
            Step::Next(off + left as usize)
        } else {
            Step::More(input.len())
        }
    }

    /// `State::Take`: gather the rest of an observed value that straddles chunks; the
    /// value is whole once its last byte arrives.
    #[inline(always)]
    fn step_take(&mut self, input: &[u8], mut off: usize, taking: &Taking) -> Step {
        let here = self.pos + off as u64;
        let avail = input.len() - off;
        let left = taking.end - here;
        if left > avail as u64 {
            self.assembled.extend_from_slice(&input[off..]);
            return Step::More(input.len());
        }
        // `left <= avail`, which is a usize.
        let left = left as usize;
        self.complete_take(input, off, left, taking);
        off += left;
        self.pos += off as u64;
        Step::Found(off)
    }

    /// Completes a taken value whose last bytes are `input[off..off + left]`, ending at
    /// stream offset `end` (the `Take` state): the value is borrowed from `input` when none
    /// of it arrived before (its header ended with the previous chunk), else the rest is
    /// appended to the assembled bytes.
    #[inline(always)]
    pub(super) fn complete_take(&mut self, input: &[u8], off: usize, left: usize, taking: &Taking) {
        let depth = self.parents.len() as u32 + 1;
        let assembled = !self.assembled.is_empty();
        let (start, len) = if assembled {
            self.assembled.extend_from_slice(&input[off..off + left]);
            // The next feed clears the buffer (the value handed out borrows it until then).
            self.catch_up = CatchUp::Open;
            (0, self.assembled.len())
        } else {
            (off, left)
        };
        self.hit = Hit {
            sub: taking.sub,
            tag: taking.tag,
            start,
            len,
            head_len: taking.head_len as usize,
            depth,
            assembled,
        };
        self.state = State::Head;
        self.after_value(taking.end);
    }

    /// Checks a header that starts at stream offset `start` against the current node and
    /// returns the stream offset where its value ends.
    #[inline(always)]
    fn check_bounds(&mut self, start: u64, h: &Header) -> Result<u64, DecodeError> {
        if self.parents.is_empty() {
            self.started += 1;
            return Ok(start + h.head_len as u64 + h.len);
        }
        let available = self.cur.end - start;
        let head = h.head_len as u64;
        if head > available {
            return Err(DecodeError::TruncatedHeader { available });
        }
        if h.len > available - head {
            return Err(DecodeError::ChildOverflow {
                declared: h.len,
                available: available - head,
            });
        }
        Ok(start + head + h.len)
    }

    /// A header split across chunks must still fit in the current node.
    fn check_partial_header(&self, start: u64, have: usize) -> Result<(), DecodeError> {
        let available = self.cur.end - start;
        if have as u64 >= available {
            return Err(DecodeError::TruncatedHeader { available });
        }
        Ok(())
    }

    /// Inside a node, a header error is reported as the node-bounded parse sees it, so that
    /// the streaming walk and [`Packet::children`](crate::Packet::children) agree on every input.
    #[cold]
    fn canonical_error(&self, start: u64, buf: &[u8], err: DecodeError) -> DecodeError {
        let available = self.cur.end - start;
        if available >= buf.len() as u64 {
            return err;
        }
        // `available < buf.len()`, a usize.
        match Header::parse(&buf[..available as usize], &self.config) {
            Ok(_) => DecodeError::TruncatedHeader { available },
            Err(e) => e,
        }
    }
}

/// Why no header could be read: more input is needed (`input[..consumed]` was used), or
/// the input is malformed.
enum Stop {
    More(usize),
    Fail(DecodeError),
}

/// What one step of the state machine did: moved on to `input[at..]`, or ended the feed
/// having consumed so many bytes: asking for more, having completed a value (`hit`), or
/// with an error.
enum Step {
    Next(usize),
    More(usize),
    Found(usize),
    Fail(DecodeError),
}
