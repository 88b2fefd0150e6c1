//! The streaming key observer: one state machine for one-shot and chunked input.
//!
//! The observer walks TLV headers as bytes arrive. For every packet it decides, from the
//! header alone, to *skip* it (count its length down, never copy), *enter* it (its key is a
//! prefix of a subscribed path) or *take* it (its key ends a subscribed path). A taken value
//! is handed out as soon as its last byte has arrived: borrowed from the input when it lies
//! in one chunk, assembled in an internal buffer only when it straddles chunks.
//!
//! ```text
//!   input chunks:  | 80 81 61 01 01 | 61 02 02 ff 3f ... | 20 02 ff 3f 21 ...
//!                    ^  ^  ^-skip-^   ^-skip-^              ^ take 0x20
//!                    |  length 225
//!                    node 0x00: enter (path 0x00/0x20)
//! ```
//!
//! State survives chunk boundaries: a header split across chunks is kept in a 9-byte
//! scratch buffer (the longest header), a skipped value is a counter, and a taken value is
//! either borrowed or assembled. "Need more bytes" is not an error; truncation is reported
//! only by [`Observer::finish`].
//!
//! The machine is split by job: this file holds the state that crosses a chunk boundary
//! (the levels, the state of the value in progress, a split header, the subscriptions) and
//! the entry points; [`levels`] what a header decides and the nodes it opens and closes;
//! [`chunk`] the chunk loop that serves most of chunked input; [`stream`] the same loop for
//! a two-key path inside the node it leaves pending (the usual subscription, chunked);
//! [`walk`] the general walk, one header at a time through
//! [`Header::parse`](crate::tag::Header::parse); [`fast_feed`] the complete-buffer fast
//! path's answer committed to this state. Every tag and length byte is read by the header
//! grammar of `tag.rs`.

use alloc::vec::Vec;

use crate::path::{Path, PathError, Paths, MAX_PATH_DEPTH, MAX_SUBSCRIPTIONS};
use crate::tag::{first_may_fit, StopSet, MAX_HEADER_LEN};
use crate::{Config, DecodeError, Packet, Tag};

mod chunk;
mod fast_feed;
mod levels;
mod stream;
#[cfg(test)]
mod tests;
mod walk;

use chunk::Inside;

/// Levels kept in place before the stack spills to the heap: an observer nests no deeper
/// than its longest path, so paths of up to `INLINE + 1` keys never allocate (deeper paths
/// and whole-packet validation allocate once and keep the capacity across resets).
const INLINE: usize = 4;

/// The stack of enclosing levels.
#[derive(Debug, Clone)]
struct Parents {
    inline: [Level; INLINE],
    len: usize,
    spill: Vec<Level>,
}

impl Parents {
    const fn new() -> Parents {
        Parents {
            inline: [TOP; INLINE],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    /// Level `i` from the outermost; `i < len`.
    fn get(&self, i: usize) -> &Level {
        if i < INLINE {
            &self.inline[i]
        } else {
            &self.spill[i - INLINE]
        }
    }

    #[inline(always)]
    fn push(&mut self, level: Level) {
        if self.len < INLINE {
            self.inline[self.len] = level;
        } else {
            self.spill.push(level);
        }
        self.len += 1;
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Level> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        if self.len < INLINE {
            Some(self.inline[self.len])
        } else {
            self.spill.pop()
        }
    }
}

/// One open node along the walk.
#[derive(Debug, Clone, Copy)]
struct Level {
    /// Absolute stream offset where the node's value ends (`u64::MAX` at the top).
    end: u64,
    /// Subscriptions whose keys matched every enclosing node so far.
    active: u64,
    /// Tag bytes the skip run must stop at, one bit per byte value in four 64-bit words
    /// (primitive, invalid 0x40.., node, array node): keys on an active path, the invalid
    /// array-flagged primitives, and every node when validating.
    stop: StopSet,
}

const TOP: Level = Level {
    end: u64::MAX,
    active: 0,
    stop: StopSet::new(0, 0),
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At a header boundary; `hlen` bytes of a split header may wait in `hbuf`.
    Head,
    /// Counting a skipped value down until the stream offset reaches `end`.
    Skip { end: u64 },
    /// Assembling a taken value that straddles chunks.
    Take(Taking),
}

/// A taken value that straddles chunks: its subscription, its tag and header length, and
/// the stream offset where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Taking {
    end: u64,
    sub: usize,
    tag: Tag,
    head_len: u8,
}

/// What one call to [`Observer::feed`] did.
#[derive(Debug)]
#[repr(C)]
pub struct Fed<'a> {
    /// Bytes of the input consumed. Feed the rest (`&input[consumed..]`) next.
    pub consumed: usize,
    /// The value that completed, if any. `None` with all input consumed means "feed more".
    pub observed: Option<Observed<'a>>,
}

/// A value taken for a subscription.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Observed<'a> {
    /// Index of the subscribed path (in the order given to [`Observer::new`]).
    pub sub: usize,
    /// The packet: tag, value bytes and the typed accessors of [`Packet`].
    pub packet: Packet<'a>,
    /// Whether the value straddled chunks and was copied into the observer's buffer.
    pub assembled: bool,
}

impl<'a> core::ops::Deref for Observed<'a> {
    type Target = Packet<'a>;

    fn deref(&self) -> &Packet<'a> {
        &self.packet
    }
}

/// Incremental decoder that pulls subscribed keys out of a stream of packets.
///
/// One observer serves a whole byte stream: any number of top-level packets in a row, fed
/// in chunks of any size. A one-shot decode is the same machine fed everything at once and
/// then [`finish`](Observer::finish)ed.
///
/// # Examples
///
/// ```
/// use y3::{Config, Observer};
///
/// // Node 0x10 { float32 0x11 = 1.5, int64 0x12 = -1 }, arriving in two chunks.
/// let packet = [0x90, 0x07, 0x11, 0x02, 0x3f, 0xc0, 0x12, 0x01, 0x7f];
/// let mut observer = Observer::new(Config::DEFAULT, &[&[0x10, 0x11]]).unwrap();
/// let mut seen = Vec::new();
/// for chunk in packet.chunks(4) {
///     observer.feed_each(chunk, |v| seen.push(v.f32().unwrap()))?;
/// }
/// observer.finish()?;
/// assert_eq!(seen, [1.5]);
/// # Ok::<(), y3::DecodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Observer {
    config: Config,
    paths: Paths,
    all: u64,
    validate: bool,
    /// One path in a one-byte-tag dialect, not validating: [`fast::walk`](crate::fast::walk) may
    /// answer.
    fast: bool,
    /// A one-byte-tag dialect with a length limit of 63 or more: the skip run may answer.
    run: bool,
    /// The two keys of a two-key path where `fast` and `run` hold:
    /// [`fast::first_child`](crate::fast::first_child) may answer first (the small-message case),
    /// before [`fast::walk_loop`](crate::fast::walk_loop); chunked input takes the stream loop.
    pair: Option<(u32, u32)>,
    /// The current level; `parents` holds the enclosing ones.
    cur: Level,
    /// The level of the stream itself, computed once.
    top: Level,
    parents: Parents,
    state: State,
    /// Stream offset of the first byte of the next `feed` input.
    pos: u64,
    hbuf: [u8; MAX_HEADER_LEN],
    hlen: usize,
    assembled: Vec<u8>,
    /// Work left for the next `feed` before it walks (so that the value just handed out
    /// stays valid and a one-shot decode does not pay for it), or the stream loop's turn.
    catch_up: CatchUp,
    started: u64,
    /// Where the value the general walk last completed lies (see
    /// [`Progress::found`](walk::Progress::found)).
    hit: Hit,
    /// Nodes the fast path (or the stream loop) entered that are still open and not opened
    /// as levels yet (0: none). Opening them costs more than the walk of a small packet,
    /// and a reused observer is mostly reset before it is fed again: so the next `feed`
    /// opens them ([`Observer::open_pending`], with `catch_up` `Open`), or the stream loop
    /// goes on in its node (`catch_up` `Stream`, opening it only if it hands a header to
    /// the walk), and reading state accounts for them.
    pending: usize,
    /// Stream offset of the input the pending nodes were entered in: `ends` are offsets
    /// into it.
    pending_base: u64,
    /// Where the pending nodes end, outermost first (`ends[..pending]`).
    ends: [usize; MAX_PATH_DEPTH],
    /// The second key of a two-key path where `pair` is set: the key the stream loop
    /// (`stream.rs`) looks for.
    stream_key: u32,
    /// The general walk (or the stream loop) ran since the last `reset` (which then
    /// restores what only they change: the levels, the state, a split header, the
    /// assembled value).
    walked: bool,
}

/// What the next `feed` does before it walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CatchUp {
    /// Nothing: it may take the fast path.
    No,
    /// Clear the buffer of an assembled value, open the levels the fast path deferred
    /// (`pending`).
    Open,
    /// Go on with the stream loop (`stream.rs`) in the node it left pending (`pending` 1):
    /// `state`, `hlen` and `assembled` are the value or header in progress inside it.
    Stream,
}

/// A value completed by the general walk, described by where it lies: `feed` (inlined
/// into its caller) builds the [`Observed`] from it, so that the walk itself returns two
/// words instead of a whole [`Fed`] on every call.
#[derive(Debug, Clone, Copy)]
struct Hit {
    sub: usize,
    tag: Tag,
    /// The value is `input[start..start + len]`, or the observer's buffer when `assembled`.
    start: usize,
    len: usize,
    head_len: usize,
    depth: u32,
    assembled: bool,
}

const NO_HIT: Hit = Hit {
    sub: 0,
    tag: Tag::from_byte(0),
    start: 0,
    len: 0,
    head_len: 0,
    depth: 0,
    assembled: false,
};

impl Observer {
    /// An observer of the given key paths (`&[&[0x10, 0x11]]`: child 0x11 of each top-level
    /// packet 0x10).
    ///
    /// # Errors
    /// [`PathError`] for empty, overlong, overlapping or too many paths.
    pub fn new(config: Config, paths: &[&[u32]]) -> Result<Observer, PathError> {
        if paths.is_empty() || paths.len() > MAX_SUBSCRIPTIONS {
            return Err(PathError::Count {
                count: paths.len(),
                max: MAX_SUBSCRIPTIONS,
            });
        }
        let mut stored = Paths::default();
        for (i, path) in paths.iter().enumerate() {
            if path.is_empty() {
                return Err(PathError::Empty);
            }
            if path.len() > MAX_PATH_DEPTH {
                return Err(PathError::TooDeep {
                    len: path.len(),
                    max: MAX_PATH_DEPTH,
                });
            }
            for (j, other) in paths[..i].iter().enumerate() {
                let (shorter, longer) = if other.len() <= path.len() {
                    (j, i)
                } else {
                    (i, j)
                };
                if paths[longer].starts_with(paths[shorter]) {
                    return Err(PathError::Overlap { shorter, longer });
                }
            }
            let mut ids = [0; MAX_PATH_DEPTH];
            ids[..path.len()].copy_from_slice(path);
            stored.push(Path {
                ids,
                len: path.len(),
            });
        }
        let all = if paths.len() == 64 {
            u64::MAX
        } else {
            (1u64 << paths.len()) - 1
        };
        Ok(Observer::build(config, stored, all, false))
    }

    /// An observer with no subscriptions that only checks well-formedness (see
    /// [`Observer::validating`]).
    pub fn validator(config: Config) -> Observer {
        Observer::build(config, Paths::default(), 0, true)
    }

    /// An observer of one path of 1..=[`MAX_PATH_DEPTH`] keys, built in place without
    /// allocating (the one-shot [`get`](crate::get)).
    #[inline(always)]
    pub(crate) fn one(config: Config, path: &[u32]) -> Observer {
        debug_assert!(!path.is_empty() && path.len() <= MAX_PATH_DEPTH);
        let mut ids = [0; MAX_PATH_DEPTH];
        ids[..path.len()].copy_from_slice(path);
        let paths = Paths {
            first: Some(Path {
                ids,
                len: path.len(),
            }),
            more: Vec::new(),
        };
        Observer::build(config, paths, 1, false)
    }

    #[inline(always)]
    fn build(config: Config, paths: Paths, all: u64, validate: bool) -> Observer {
        let mut observer = Observer {
            config,
            paths,
            all,
            validate,
            fast: false,
            run: config.dialect.has_node_flag() && config.limits.max_packet_len >= 63,
            pair: None,
            cur: TOP,
            top: TOP,
            parents: Parents::new(),
            state: State::Head,
            pos: 0,
            hbuf: [0; MAX_HEADER_LEN],
            hlen: 0,
            assembled: Vec::new(),
            catch_up: CatchUp::No,
            started: 0,
            hit: NO_HIT,
            pending: 0,
            pending_base: 0,
            ends: [0; MAX_PATH_DEPTH],
            stream_key: u32::MAX,
            walked: true,
        };
        observer.top = observer.level(u64::MAX, all, 0);
        observer.set_fast(true);
        observer.reset();
        observer
    }

    /// Whole-packet validation: also enter every node that no path needs, so that every
    /// header in the stream is checked against its node and the depth limit. Slower than
    /// observing (every TLV is visited), and only possible where the wire marks nodes (not
    /// in `draft02`).
    pub fn validating(mut self, validate: bool) -> Observer {
        self.validate = validate;
        self.top = self.level(u64::MAX, self.all, 0);
        self.set_fast(true);
        self.walked = true;
        self.reset();
        self
    }

    /// The same observer with the complete-buffer fast path off: the general machine alone,
    /// the reference the harness compares the fast path against.
    #[cfg(feature = "__harness")]
    #[doc(hidden)]
    pub fn without_fast_path(mut self) -> Observer {
        self.set_fast(false);
        self
    }

    /// The same observer with every skip run off as well (the fast path, the chunk loop of
    /// `skim_inside`, the skip run of the walk): each header read by the general machine's
    /// header parser, the reference the harness compares chunked input against.
    #[cfg(feature = "__harness")]
    #[doc(hidden)]
    pub fn without_skip_runs(mut self) -> Observer {
        self.run = false;
        self.set_fast(false);
        self
    }

    /// Turns the fast path on where it serves this observer (one path, not validating, a
    /// one-byte-tag dialect), or off.
    fn set_fast(&mut self, on: bool) {
        // In the stream loop's node: the general machine goes on from here.
        if self.catch_up == CatchUp::Stream {
            self.stream_to_general();
        }
        self.fast = on && self.all == 1 && !self.validate && self.config.dialect.has_node_flag();
        self.pair = match &self.paths.first {
            Some(p) if self.fast && self.run && p.len == 2 => Some((p.ids[0], p.ids[1])),
            _ => None,
        };
        self.stream_key = self.pair.map_or(u32::MAX, |(_, inner)| inner);
    }

    /// Forgets all stream state, keeping the subscriptions and buffers, so that one observer
    /// can serve many independent one-shot decodes without allocating.
    #[inline]
    pub fn reset(&mut self) {
        // What only the general walk changes, only after it ran.
        if self.walked {
            self.walked = false;
            self.cur = self.top;
            self.parents.clear();
            self.state = State::Head;
            self.hlen = 0;
            self.assembled.clear();
        }
        self.pos = 0;
        self.catch_up = CatchUp::No;
        self.started = 0;
        self.pending = 0;
    }

    /// The dialect and limits in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Bytes consumed since creation or the last [`reset`](Observer::reset).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Top-level packets completed so far.
    pub fn packets(&self) -> u64 {
        // A top-level packet is counted once its header is read: inside it (not in a
        // header split at the top level), the last one counted is not complete.
        let inside =
            !self.parents.is_empty() || self.state != State::Head || self.pending_end().is_some();
        self.started - u64::from(inside)
    }

    fn at_boundary(&self) -> bool {
        self.state == State::Head
            && self.hlen == 0
            && self.parents.is_empty()
            && self.pending_end().is_none()
    }

    /// Where the outermost node that the fast path or the stream loop left pending ends (`None`:
    /// no such node).
    #[inline(always)]
    fn pending_end(&self) -> Option<u64> {
        (self.pending != 0).then(|| self.outer_pending_end())
    }

    /// Where the outermost pending node ends, as a stream offset; only where `pending` is
    /// not 0.
    #[inline(always)]
    fn outer_pending_end(&self) -> u64 {
        self.pending_base + self.ends[0] as u64
    }

    /// Consumes input until a subscribed value completes or the input runs out.
    ///
    /// Returns how many bytes were consumed and the completed value, if any. Call again with
    /// the unconsumed rest; an empty `observed` with everything consumed means "feed more".
    /// The value borrows the input when it lay in one chunk, else the observer's buffer.
    ///
    /// # Errors
    /// Any header error ([`DecodeError::NegativeLength`], [`DecodeError::TooLong`],
    /// [`DecodeError::ChildOverflow`], ...). After an error the observer's state is
    /// unspecified; [`reset`](Observer::reset) it before reuse.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut obs = y3::Observer::new(y3::Config::DEFAULT, &[&[0x11]]).unwrap();
    /// // Two top-level packets: 0x12 = 5 (skipped), 0x11 = "hi" (taken).
    /// let input = [0x12, 0x01, 0x05, 0x11, 0x02, b'h', b'i'];
    /// let fed = obs.feed(&input)?;
    /// assert_eq!(fed.consumed, 7);
    /// let value = fed.observed.unwrap();
    /// assert_eq!(value.str()?, "hi");
    /// assert!(!value.assembled);
    /// # Ok::<(), y3::DecodeError>(())
    /// ```
    #[inline(always)]
    pub fn feed<'a>(&'a mut self, input: &'a [u8]) -> Result<Fed<'a>, DecodeError> {
        // Whole packets for one path from a top-level boundary: the fast path, inlined into
        // the caller; a two-key path's packet that runs past the input: the stream loop
        // (`stream.rs`), which the chunks inside its node go on with; everything else (and
        // whatever they give up on) is the general walk. `catch_up` first: the stream loop's
        // chunks leave at once.
        if self.catch_up == CatchUp::No
            && self.fast
            && self.parents.is_empty()
            && self.state == State::Head
            && self.hlen == 0
        {
            if first_may_fit(input) {
                if let Some(fed) = self.feed_fast(input) {
                    return Ok(fed);
                }
            }
            if let Some((outer, inner)) = self.pair {
                // Where the first packet runs past the input, its node's children are the
                // stream loop's (`stream.rs`).
                if let Some(off) = self.stream_start(input, outer) {
                    let streamed = self.stream_children(input, self.pos, off, inner);
                    return self.streamed(input, streamed);
                }
            }
        } else if self.catch_up == CatchUp::Stream {
            let streamed = self.feed_stream(input, self.stream_key);
            return self.streamed(input, streamed);
        }
        self.feed_general(input)
    }

    /// The value the general walk just completed (`self.hit`).
    #[inline(always)]
    fn observed<'a>(&'a self, input: &'a [u8]) -> Observed<'a> {
        let hit = self.hit;
        let value = if hit.assembled {
            &self.assembled[..]
        } else {
            &input[hit.start..hit.start + hit.len]
        };
        Observed {
            sub: hit.sub,
            packet: Packet::from_parts(hit.tag, value, hit.head_len, hit.depth, self.config),
            assembled: hit.assembled,
        }
    }

    /// [`Observer::feed`] by the general state machine: one step per state until a value
    /// completes, the input runs out, or an error.
    ///
    /// Chunked input mostly lands in the middle of skipped values and short skipped TLVs:
    /// [`skim`](Observer::skim) handles those here, inlined into the caller of `feed` (a
    /// chunk that only skims makes no call), and only a header that needs a decision (or a
    /// split one) goes on to the whole machine in [`walk`](Observer::walk).
    #[inline(always)]
    fn feed_general<'a>(&'a mut self, input: &'a [u8]) -> Result<Fed<'a>, DecodeError> {
        self.walked = true;
        if self.catch_up != CatchUp::No {
            self.assembled.clear();
            self.catch_up = CatchUp::No;
            if self.pending != 0 {
                self.open_pending();
            }
        }
        // Each way out builds its `Fed` where it is, so that the usual one (the whole chunk
        // consumed, nothing found) stays a straight line.
        let off = match self.skim_inside(input) {
            Inside::Walk(off) => off,
            Inside::Found(consumed) => {
                return Ok(Fed {
                    consumed,
                    observed: Some(self.observed(input)),
                })
            }
            Inside::Done => return Ok(self.consumed_all(input)),
            Inside::No if self.hlen == 1 && self.split_take(input) => {
                return Ok(Fed {
                    consumed: self.hit.start + self.hit.len,
                    observed: Some(self.observed(input)),
                })
            }
            Inside::No => match self.skim(input) {
                Some(off) => off,
                None => return Ok(self.consumed_all(input)),
            },
        };
        self.walk_fed(input, off)
    }

    /// The general walk from `input[off..]` (the state committed up to it), and its [`Fed`].
    #[inline(always)]
    fn walk_fed<'a>(&'a mut self, input: &'a [u8], off: usize) -> Result<Fed<'a>, DecodeError> {
        let progress = self.walk(input, off)?;
        let observed = if progress.found {
            Some(self.observed(input))
        } else {
            None
        };
        Ok(Fed {
            consumed: progress.consumed,
            observed,
        })
    }

    /// All of `input` consumed, no value completed.
    #[inline(always)]
    fn consumed_all<'a>(&mut self, input: &[u8]) -> Fed<'a> {
        self.pos += input.len() as u64;
        Fed {
            consumed: input.len(),
            observed: None,
        }
    }

    /// Feeds all of `input`, calling `on_value` for every value that completes.
    ///
    /// # Errors
    /// As [`Observer::feed`].
    // Inlined: chunked input calls it once per chunk, and its own frame (the fast path's
    // is inside) cost more than the walk of a 7-byte chunk.
    #[inline(always)]
    pub fn feed_each(
        &mut self,
        mut input: &[u8],
        mut on_value: impl FnMut(Observed<'_>),
    ) -> Result<(), DecodeError> {
        loop {
            let fed = self.feed(input)?;
            let consumed = fed.consumed;
            match fed.observed {
                Some(v) => on_value(v),
                None => return Ok(()),
            }
            input = &input[consumed..];
        }
    }

    /// Declares the end of the stream.
    ///
    /// # Errors
    /// [`DecodeError::UnexpectedEnd`] when the stream stopped inside a packet (a header, a
    /// value or a node). A stream that ends between top-level packets is complete.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.at_boundary() {
            return Ok(());
        }
        // The outermost open packet ends last; everything inside it ends no later.
        let end = match (self.parents.len(), self.state) {
            // Only pending nodes are open (left by the fast path at a header boundary, or by
            // the stream loop anywhere inside its node): the outermost ends last.
            _ if self.pending != 0 => self.outer_pending_end(),
            (2.., _) => self.parents.get(1).end,
            (1, _) => self.cur.end,
            (_, State::Skip { end } | State::Take(Taking { end, .. })) => end,
            (_, State::Head) => self.pos + 1,
        };
        Err(DecodeError::UnexpectedEnd {
            needed: end.saturating_sub(self.pos).max(1),
        })
    }
}
