//! The chunk loop: the usual chunk of chunked input (the rest of a value skipped or taken
//! across chunks, a header split after its tag byte, runs of short headers) in one loop that
//! keeps its place in locals, before the general walk is set up. It reads no tag or length
//! byte itself: the one walker's leaves do (the skip run `skip::run_by`, the short header
//! `tag::short_at`, the header split after its tag byte `tag::split_short`), as they do for
//! the whole-buffer walks (`walker.rs`, `fast.rs`): `short_at::<true>` is the chunk's
//! instantiation of the reading `walker::walk` does with `short_at::<false>`. What is left
//! here is the state that crosses a chunk boundary (the levels, the value skipped or taken,
//! the split header) and the decisions on it.
//!
//! ```text
//!   skim_inside   resume: the rest of a skipped value, of a taken one (done), a split
//!                 header completed (`split_short`)
//!                 loop:   skip run (`run_by`) up to the node's end or the input's
//!                         at the end: close the nodes that end here, or keep the place
//!                         at a header (`short_at::<true>`): cut (`keep_cut`), skip, take
//!                         (`chunk_take`), enter; anything else the walk's
//! ```

use super::levels::Action;
use super::{Hit, Observer, State, Taking};
use crate::skip;
use crate::tag::{byte_is_invalid, short_at, split_short, Head, Header, Short, Tag};

impl Observer {
    /// The usual chunk of chunked input, in one loop that keeps its place in locals: it
    /// finishes the value skipped across chunks, the header split after its tag byte or the
    /// taken value that straddled chunks that the chunk begins with, then reads headers with
    /// one- and two-byte lengths (through `tag::short_at`): it skips what the skip run skips, takes a value to take,
    /// enters a node within the depth limit and closes every node that ends in the chunk (as
    /// `after_value` does), counting top-level packets as `check_bounds` does; it ends inside
    /// a value, at a header or after a tag byte. [`Inside::No`] (nothing changed) leaves any
    /// other chunk to [`skim`](Observer::skim); [`Inside::Walk`] hands the first header it
    /// does not decide (a longer length, an error, anything else) to the walk, the state
    /// committed up to it.
    #[inline(always)]
    pub(super) fn skim_inside(&mut self, input: &[u8]) -> Inside {
        if !self.run {
            return Inside::No;
        }
        let base = self.pos;
        let len = input.len();
        let mut off = match (self.state, self.hlen) {
            (State::Head, 0) => 0,
            (State::Skip { end }, _) => {
                let left = end - base;
                if left > len as u64 {
                    // Still inside the value (so inside its node too).
                    return Inside::Done;
                }
                // `left <= len`, a usize; the loop closes the nodes that end with the value.
                left as usize
            }
            (State::Take(taking), _) => {
                // The rest of a taken value that straddles chunks (`step_take`).
                let left = taking.end - base;
                if left > len as u64 {
                    self.assembled.extend_from_slice(input);
                    return Inside::Done;
                }
                // `left <= len`, a usize.
                let left = left as usize;
                self.complete_take(input, 0, left, &taking);
                self.pos = taking.end;
                return Inside::Found(left);
            }
            (State::Head, 1) => {
                // The header began one byte before the input: skipped whole, as the skip
                // run would have (`skim_split_header`), when its value lies in the node.
                let Some(h) = split_short(self.hbuf[0], input) else {
                    return Inside::No;
                };
                let next = h.next();
                if self.stops(h.tag) || next as u64 > self.cur.end - base {
                    return Inside::No;
                }
                self.hlen = 0;
                if self.parents.is_empty() {
                    self.started += 1;
                }
                next
            }
            _ => return Inside::No,
        };
        // At the top level every header read begins a packet (counted as `check_bounds`
        // counts it): `heads` counts the headers the run skipped, added to `started` (at
        // the top level) before the levels change and on the way out.
        let mut heads = 0u64;
        // The current node's end from the input's start (a node longer than memory is as
        // good as endless here), and where the loop must look up from its headers: the
        // node's end or the input's, whichever comes first.
        let mut node = usize::try_from(self.cur.end - base).unwrap_or(usize::MAX);
        let mut bound = node.min(len);
        loop {
            off = skip::run_by::<_, true>(&input[..bound], off, node, &self.cur.stop, &mut heads);
            if off >= bound {
                if self.parents.is_empty() {
                    self.started += heads;
                }
                heads = 0;
                // `off <= node` holds: every value read lies inside its node.
                if off == node && off <= len {
                    // The node ends here (with every enclosing one that ends with it).
                    self.after_value(base + off as u64);
                    node = usize::try_from(self.cur.end - base).unwrap_or(usize::MAX);
                    bound = node.min(len);
                    if off < len {
                        continue;
                    }
                }
                // At the input's end, or inside a value that runs past it.
                self.state = if off == len {
                    State::Head
                } else {
                    State::Skip {
                        end: base + off as u64,
                    }
                };
                return Inside::Done;
            }
            // A header the run left here: one that needs a decision, one cut by the
            // input's end, one whose value runs past its node.
            if self.parents.is_empty() {
                self.started += heads;
            }
            heads = 0;
            // A short header (a length of one group or two, held to the limit); anything
            // else is the walk's.
            let h = match short_at::<true>(input, off, self.config.limits.max_packet_len) {
                Short::Head(h) => h,
                Short::Cut(tag) => return self.keep_cut(tag, off, node),
                Short::Other => {
                    self.state = State::Head;
                    return Inside::Walk(off);
                }
            };
            let (tag, next) = (h.tag, h.next());
            // A value past its node (`child_overflow`; the run leaves a header it would skip
            // only then): the walk's to report.
            if next > node {
                self.state = State::Head;
                return Inside::Walk(off);
            }
            let action = if self.stops(tag) {
                // A header that needs a decision (`step_head`).
                self.decide(&Header {
                    tag: Tag::from_byte(tag),
                    len: h.len as u64,
                    head_len: h.head_len,
                })
            } else {
                // A two-group length the skip run leaves to the walk: skipped here.
                Action::Skip
            };
            match action {
                Action::Skip => {
                    if self.parents.is_empty() {
                        self.started += 1;
                    }
                    off = next;
                }
                Action::Take(sub) => return self.chunk_take(input, base, &h, sub),
                // A node within the depth limit: entered, and the loop goes on in it (an
                // empty one closes at the loop's head).
                Action::Enter(active)
                    if (self.parents.len() as u64 + 1) < self.config.limits.max_depth as u64 =>
                {
                    if self.parents.is_empty() {
                        self.started += 1;
                    }
                    let level = self.level(base + next as u64, active, self.parents.len() + 1);
                    self.parents.push(self.cur);
                    self.cur = level;
                    node = next;
                    bound = node.min(len);
                    off = h.start;
                }
                Action::Enter(_) => {
                    self.state = State::Head;
                    return Inside::Walk(off);
                }
            }
        }
    }

    /// The chunk loop at a header cut after its tag byte `tag` (at `off`, the input's last
    /// byte, in a node ending at `node`): kept, as `read_header` keeps it, when the tag byte
    /// is valid and the header can still fit in the node; else the walk's to report. Either
    /// way the chunk's feed ends.
    #[inline(always)]
    fn keep_cut(&mut self, tag: u8, off: usize, node: usize) -> Inside {
        self.state = State::Head;
        if byte_is_invalid(tag) || node <= off + 1 {
            return Inside::Walk(off);
        }
        self.hbuf[0] = tag;
        self.hlen = 1;
        Inside::Done
    }

    /// The chunk loop takes the value of header `h` for subscription `sub`: handed out
    /// when it lies in `input` (stream offset `base`), else what arrived is kept and the
    /// rest awaited (the `Take` state). Either way the chunk's feed ends.
    #[inline(always)]
    fn chunk_take(&mut self, input: &[u8], base: u64, h: &Head, sub: usize) -> Inside {
        if self.parents.is_empty() {
            self.started += 1;
        }
        let tag = Tag::from_byte(h.tag);
        let next = h.next();
        if next <= input.len() {
            self.hit = Hit {
                sub,
                tag,
                start: h.start,
                len: h.len,
                head_len: h.head_len,
                depth: self.parents.len() as u32 + 1,
                assembled: false,
            };
            self.state = State::Head;
            self.after_value(base + next as u64);
            self.pos = base + next as u64;
            return Inside::Found(next);
        }
        // Straddles chunks: keep what arrived (never reserving from the length).
        self.assembled.clear();
        self.assembled.extend_from_slice(&input[h.start..]);
        self.state = State::Take(Taking {
            end: base + next as u64,
            sub,
            tag,
            head_len: h.head_len as u8,
        });
        Inside::Done
    }

    /// A header split after its tag byte whose value is to be taken, completed by the first
    /// byte of `input` (a one-byte length) with the whole value in `input`: taken here, as
    /// `step_head` would take it (the usual way a subscribed key's tag byte ends a chunk),
    /// the value described by `hit`. False (nothing changed) leaves anything else to the
    /// walk: another decision, a value past its node or past the input, an invalid tag byte.
    #[inline(never)]
    pub(super) fn split_take(&mut self, input: &[u8]) -> bool {
        let (true, State::Head, Some(h)) = (self.run, self.state, split_short(self.hbuf[0], input))
        else {
            return false;
        };
        // The value's end from the input's start: it must lie in the input and the node.
        let next = h.next();
        if byte_is_invalid(h.tag) || next > input.len() || next as u64 > self.cur.end - self.pos {
            return false;
        }
        let header = Header {
            tag: Tag::from_byte(h.tag),
            len: h.len as u64,
            head_len: h.head_len,
        };
        let Action::Take(sub) = self.decide(&header) else {
            return false;
        };
        self.hlen = 0;
        if self.parents.is_empty() {
            self.started += 1;
        }
        self.hit = Hit {
            sub,
            tag: header.tag,
            start: h.start,
            len: h.len,
            head_len: h.head_len,
            depth: self.parents.len() as u32 + 1,
            assembled: false,
        };
        self.pos += next as u64;
        self.after_value(self.pos);
        true
    }

    /// Whether the skip run stops at tag byte `tag` in the current node.
    #[inline(always)]
    fn stops(&self, tag: u8) -> bool {
        self.cur.stop.stops(tag)
    }

    /// The common steps of chunked input, taken before the general machine is set up: the
    /// rest of a value skipped across chunks, then the skip run. `None` when that consumed
    /// all of `input` (the stream position is the caller's to advance), else the offset
    /// where [`walk`](Observer::walk) goes on, with the state committed up to it.
    #[inline(always)]
    pub(super) fn skim(&mut self, input: &[u8]) -> Option<usize> {
        let mut off = 0;
        match self.state {
            State::Head => {}
            State::Skip { end } => {
                let left = end - self.pos;
                if left > input.len() as u64 {
                    return None;
                }
                // `left <= input.len()`, a usize.
                off = left as usize;
                self.state = State::Head;
                self.after_value(end);
            }
            State::Take(_) => return Some(0),
        }
        if self.hlen != 0 {
            off = self.skim_split_header(input)?;
            if self.hlen != 0 {
                return Some(0);
            }
        }
        off = self.skip_run(input, off);
        if self.state != State::Head || off == input.len() {
            return None;
        }
        if !self.run {
            return Some(off);
        }
        // A header cut after its tag byte: kept as `read_header` keeps it when the tag byte
        // is valid (the array flag needs the node flag) and the header can still fit in the
        // current node; anything else is the walk's to report.
        if let Short::Cut(tag) = short_at::<true>(input, off, self.config.limits.max_packet_len) {
            if !byte_is_invalid(tag) && self.cur.end - (self.pos + off as u64) > 1 {
                self.hbuf[0] = tag;
                self.hlen = 1;
                return None;
            }
        }
        Some(off)
    }

    /// A header split after its tag byte (the usual split of chunked input), completed by
    /// the first byte of `input` when the skip run would have skipped it whole: a tag it
    /// does not stop at, a one-byte length, a value inside the current node (the checks
    /// `complete_header`, `check_bounds` and `decide` make, and these headers pass). As
    /// [`skim`](Observer::skim): `None` when the value runs past `input`, else where the
    /// walk goes on; `Some(0)` leaves the header to the general machine.
    #[inline(always)]
    fn skim_split_header(&mut self, input: &[u8]) -> Option<usize> {
        let (true, 1) = (self.run, self.hlen) else {
            return Some(0);
        };
        let Some(h) = split_short(self.hbuf[0], input) else {
            return Some(0);
        };
        if self.stops(h.tag) {
            return Some(0);
        }
        // The header began one byte before this input.
        let end = self.pos + h.next() as u64;
        if end > self.cur.end {
            return Some(0);
        }
        self.hlen = 0;
        if self.parents.is_empty() {
            self.started += 1;
        }
        let left = end - self.pos;
        if left > input.len() as u64 {
            self.state = State::Skip { end };
            return None;
        }
        self.after_value(end);
        // `left <= input.len()`, a usize.
        Some(left as usize)
    }

    /// The hot loop: skips every uninteresting TLV with a one-byte tag and a one-byte
    /// length (0..=63) that lies in the current node, and returns the offset of the first
    /// header it leaves to the general path (a key of interest, a node to validate, a longer
    /// length, an invalid tag, a value that overflows the node). A skippable value that runs
    /// past the end of `input` switches to the `Skip` state and consumes everything. The checks
    /// it skips are exactly those these headers cannot fail: their lengths are non-negative,
    /// minimal and below any limit of 63 or more.
    #[inline(always)]
    pub(super) fn skip_run(&mut self, input: &[u8], mut off: usize) -> usize {
        if !self.run {
            return off;
        }
        let base = self.pos;
        // Only the bytes of `input` inside the current node: a value ending past them is
        // left to the general path (it straddles the input, or overflows the node).
        let in_level = self.cur.end.saturating_sub(base);
        let bytes = if in_level < input.len() as u64 {
            // `in_level < input.len()`, a usize.
            &input[..in_level as usize]
        } else {
            input
        };
        // The node's end from the input's start (a node longer than memory is as good as
        // endless here). By reference: a by-value copy of the stop set is a wide load over
        // narrower stores just made by `enter`/`reset`, which stalls store-to-load
        // forwarding.
        let node = usize::try_from(in_level).unwrap_or(usize::MAX);
        let start = off;
        let mut skipped = 0u64;
        off = skip::run_by::<_, false>(bytes, off, node, &self.cur.stop, &mut skipped);
        if off > bytes.len() {
            // A skippable value that runs past the input but not past its node (the usual
            // case for chunked input): count it down from here.
            if self.parents.is_empty() {
                self.started += skipped;
            }
            self.state = State::Skip {
                end: base + off as u64,
            };
            return input.len();
        }
        if off != start {
            if self.parents.is_empty() {
                self.started += skipped;
            }
            self.after_value(base + off as u64);
        }
        off
    }
}

/// What [`Observer::skim_inside`] did with a chunk.
pub(super) enum Inside {
    /// Not its kind of chunk; nothing changed.
    No,
    /// Consumed the whole chunk (the stream position is the caller's to advance).
    Done,
    /// Stopped at the header at this offset, which the walk reads next.
    Walk(usize),
    /// Completed a value (`Observer::hit`) having consumed this many bytes (the stream
    /// position already advanced).
    Found(usize),
}
