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

use alloc::vec::Vec;

use crate::fast::{self, Fast};
use crate::tag::{Header, MAX_HEADER_LEN};
use crate::{Config, DecodeError, Packet, Tag};

/// Longest key path an observer accepts.
pub const MAX_PATH_DEPTH: usize = 16;

/// Most subscriptions one observer holds.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// Why a set of key paths cannot be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// A path has no keys.
    #[error("empty key path")]
    Empty,
    /// A path is longer than [`MAX_PATH_DEPTH`].
    #[error("key path of {len} keys exceeds {max}")]
    TooDeep {
        /// Keys in the path.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// More than [`MAX_SUBSCRIPTIONS`] paths, or none.
    #[error("{count} subscriptions, expected 1..={max}")]
    Count {
        /// Paths given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// One path is a prefix of (or equal to) another.
    #[error("path {shorter} is a prefix of path {longer}")]
    Overlap {
        /// Index of the shorter path.
        shorter: usize,
        /// Index of the longer path.
        longer: usize,
    },
    /// A path string is not `0x10/0x11`-style keys.
    #[error("invalid key in path at byte {at}")]
    Syntax {
        /// Byte offset of the bad key.
        at: usize,
    },
}

impl PathError {
    /// The stable snake_case name of this error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Empty => "empty_path",
            Self::TooDeep { .. } => "path_too_deep",
            Self::Count { .. } => "path_count",
            Self::Overlap { .. } => "path_overlap",
            Self::Syntax { .. } => "path_syntax",
        }
    }
}

/// Parses a key path such as `0x10/0x11` or `16/17` (hex with `0x`, else decimal).
///
/// # Errors
/// [`PathError::Syntax`], [`PathError::Empty`], [`PathError::TooDeep`].
///
/// ```
/// assert_eq!(y3::parse_path("0x10/0x11").unwrap(), [0x10, 0x11]);
/// assert!(y3::parse_path("0x10//1").is_err());
/// ```
pub fn parse_path(text: &str) -> Result<Vec<u32>, PathError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(PathError::Empty);
    }
    let mut keys = Vec::new();
    let mut at = 0;
    for part in text.split('/') {
        let key = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16)
        } else {
            part.parse::<u32>()
        };
        keys.push(key.map_err(|_| PathError::Syntax { at })?);
        at += part.len() + 1;
    }
    if keys.len() > MAX_PATH_DEPTH {
        return Err(PathError::TooDeep {
            len: keys.len(),
            max: MAX_PATH_DEPTH,
        });
    }
    Ok(keys)
}

#[derive(Debug, Clone, Copy)]
struct Path {
    ids: [u32; MAX_PATH_DEPTH],
    len: usize,
}

/// The subscribed paths: the first in place, so that a one-path observer (every
/// [`get`](crate::get)) is built without allocating.
#[derive(Debug, Clone, Default)]
struct Paths {
    first: Option<Path>,
    more: Vec<Path>,
}

impl Paths {
    fn push(&mut self, path: Path) {
        if self.first.is_none() {
            self.first = Some(path);
        } else {
            self.more.push(path);
        }
    }

    /// Path `i`; `i` comes from an `active` bit, so it is below the number of paths.
    #[inline(always)]
    fn get(&self, i: usize) -> &Path {
        match (&self.first, i) {
            (Some(first), 0) => first,
            _ => &self.more[i - 1],
        }
    }
}

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
    stop: [u64; 4],
}

const TOP: Level = Level {
    end: u64::MAX,
    active: 0,
    stop: [0, u64::MAX, 0, 0],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At a header boundary; `hlen` bytes of a split header may wait in `hbuf`.
    Head,
    /// Counting a skipped value down until the stream offset reaches `end`.
    Skip { end: u64 },
    /// Assembling a taken value that straddles chunks, until offset `end`.
    Take { end: u64, sub: usize, tag: Tag },
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
    /// One path in a one-byte-tag dialect, not validating: [`fast::walk`] may answer.
    fast: bool,
    /// A one-byte-tag dialect with a length limit of 63 or more: the skip run may answer.
    run: bool,
    /// The two keys of a two-key path where `fast` and `run` hold: [`fast::first_child`]
    /// may answer first (the small-message case), before [`fast::walk_loop`].
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
    /// stays valid and a one-shot decode does not pay for it): clear the buffer of an
    /// assembled value, open the levels the fast path deferred (`pending`).
    catch_up: bool,
    started: u64,
    /// Where the value the general walk last completed lies (see [`Progress::found`]).
    hit: Hit,
    /// Nodes the fast path entered that are still open and not opened as levels yet (0:
    /// none). Opening them costs more than the walk of a small packet, and a reused
    /// observer is mostly reset before it is fed again: so the next `feed` opens them
    /// ([`Observer::open_pending`], with `catch_up` set) and reading state accounts for
    /// them.
    pending: usize,
    /// Stream offset of the input the fast path walked: `ends` are offsets into it.
    pending_base: u64,
    /// Where the nodes the fast path entered end, outermost first (`ends[..pending]`).
    ends: [usize; MAX_PATH_DEPTH],
    /// The general walk ran since the last `reset` (which then restores what only the walk
    /// changes: the levels, the state, a split header, the assembled value).
    walked: bool,
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

/// What one run of the general walk did: consumed `consumed` bytes and, when `found`,
/// completed the value described by `Observer::hit`.
struct Progress {
    consumed: usize,
    found: bool,
}

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
            catch_up: false,
            started: 0,
            hit: NO_HIT,
            pending: 0,
            pending_base: 0,
            ends: [0; MAX_PATH_DEPTH],
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
        self.fast = on && self.all == 1 && !self.validate && self.config.dialect.has_node_flag();
        self.pair = match &self.paths.first {
            Some(p) if self.fast && self.run && p.len == 2 => Some((p.ids[0], p.ids[1])),
            _ => None,
        };
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
        self.catch_up = false;
        self.started = 0;
        self.pending = 0;
    }

    /// A level ending at `end` whose headers sit at path index `depth`.
    #[inline(always)]
    fn level(&self, end: u64, active: u64, depth: usize) -> Level {
        // Ids of 64 and above never occur in the one-byte dialects the skip run serves.
        let bit = |id: u32| if id < 64 { 1u64 << id } else { 0 };
        let mut interest = 0u64;
        if let (Some(path), 1) = (&self.paths.first, active) {
            // Only the first path (every `get`, most observers): no walk over the set.
            interest = bit(path.ids[depth]);
        } else {
            let mut bits = active;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                interest |= bit(self.paths.get(i).ids[depth]);
            }
        }
        let nodes = if self.validate { u64::MAX } else { interest };
        Level {
            end,
            active,
            stop: [interest, u64::MAX, nodes, nodes],
        }
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

    /// Where the outermost node that the fast path entered and left open ends (`None`:
    /// no such node).
    #[inline(always)]
    fn pending_end(&self) -> Option<u64> {
        (self.pending != 0).then(|| self.pending_base + self.ends[0] as u64)
    }

    /// Opens the levels of the nodes the fast path entered (see `pending`), as
    /// [`enter`](Observer::enter) would have, and closes those that ended with its value.
    #[cold]
    #[inline(never)]
    fn open_pending(&mut self) {
        let (depth, base) = (self.pending, self.pending_base);
        self.pending = 0;
        // One path: each node is active for subscription 0 only.
        for d in 0..depth {
            let level = self.level(base + self.ends[d] as u64, 1, d + 1);
            self.parents.push(self.cur);
            self.cur = level;
        }
        self.after_value(self.pos);
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
        // the caller; everything else (and whatever it gives up on) is the general walk.
        // `parents` before the per-call state: a chunk inside a node (most chunks of chunked
        // input) leaves at once.
        if self.fast
            && self.parents.is_empty()
            && !self.catch_up
            && self.state == State::Head
            && self.hlen == 0
            && first_may_fit(input)
        {
            if let Some(fed) = self.feed_fast(input) {
                return Ok(fed);
            }
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
        if self.catch_up {
            self.assembled.clear();
            self.catch_up = false;
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

    /// The usual chunk of chunked input, in one loop that keeps its place in locals: it
    /// finishes the value skipped across chunks, the header split after its tag byte or the
    /// taken value that straddled chunks that the chunk begins with, then reads headers with
    /// one- and two-byte lengths: it skips what the skip run skips, takes a value to take,
    /// enters a node within the depth limit and closes every node that ends in the chunk (as
    /// `after_value` does), counting top-level packets as `check_bounds` does; it ends inside
    /// a value, at a header or after a tag byte. [`Inside::No`] (nothing changed) leaves any
    /// other chunk to [`skim`](Observer::skim); [`Inside::Walk`] hands the first header it
    /// does not decide (a longer length, an error, anything else) to the walk, the state
    /// committed up to it.
    #[inline(always)]
    fn skim_inside(&mut self, input: &[u8]) -> Inside {
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
            (State::Take { end, sub, tag }, _) => {
                // The rest of a taken value that straddles chunks (`step_take`).
                let left = end - base;
                if left > len as u64 {
                    self.assembled.extend_from_slice(input);
                    return Inside::Done;
                }
                // `left <= len`, a usize.
                let left = left as usize;
                self.complete_take(input, 0, left, end, sub, tag);
                self.pos = end;
                return Inside::Found(left);
            }
            (State::Head, 1) => {
                // The header began one byte before the input: skipped whole, as the skip
                // run would have (`skim_split_header`), when its value lies in the node.
                let tag = self.hbuf[0];
                let Some(&l) = input.first() else {
                    return Inside::No;
                };
                let next = 1 + l as usize;
                if l >= 0x40 || self.stops(tag) || next as u64 > self.cur.end - base {
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
            off = skip_within(&input[..bound], off, node, &self.cur.stop, &mut heads);
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
            let tag = input[off];
            let Some(&l) = input.get(off + 1) else {
                // Cut after the tag byte (`off + 1 == len`): kept, as `read_header` keeps
                // it, when the tag byte is valid and the header can still fit in the node.
                self.state = State::Head;
                if tag & 0xc0 == 0x40 || node <= off + 1 {
                    return Inside::Walk(off);
                }
                self.hbuf[0] = tag;
                self.hlen = 1;
                return Inside::Done;
            };
            if l < 0x40 && !self.stops(tag) {
                // The run leaves such a header only when its value runs past its node: the
                // walk's to report.
                self.state = State::Head;
                return Inside::Walk(off);
            }
            // PVarInt lengths of one group or two (64..=8191, held to the limit); anything
            // else is the walk's.
            let (value, head) = if l < 0x40 {
                (l as usize, 2)
            } else {
                match input.get(off + 2) {
                    Some(&b2) if l & 0xc0 == 0x80 && b2 < 0x80 => {
                        let value = (((l & 0x3f) as usize) << 7) | b2 as usize;
                        if value as u64 > self.config.limits.max_packet_len {
                            self.state = State::Head;
                            return Inside::Walk(off);
                        }
                        (value, 3)
                    }
                    _ => {
                        self.state = State::Head;
                        return Inside::Walk(off);
                    }
                }
            };
            let next = off + head + value;
            // A value past its node (`child_overflow`), or an invalid tag byte (the array
            // flag without the node flag): the walk's to report.
            if next > node || tag & 0xc0 == 0x40 {
                self.state = State::Head;
                return Inside::Walk(off);
            }
            let action = if self.stops(tag) {
                // A header that needs a decision (`step_head`).
                self.decide(&Header {
                    tag: Tag::from_byte(tag),
                    len: value as u64,
                    head_len: head,
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
                Action::Take(sub) => {
                    if self.parents.is_empty() {
                        self.started += 1;
                    }
                    let tag = Tag::from_byte(tag);
                    if next <= len {
                        self.hit = Hit {
                            sub,
                            tag,
                            start: off + head,
                            len: value,
                            head_len: head,
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
                    self.assembled.extend_from_slice(&input[off + head..]);
                    self.state = State::Take {
                        end: base + next as u64,
                        sub,
                        tag,
                    };
                    return Inside::Done;
                }
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
                    off += head;
                }
                Action::Enter(_) => {
                    self.state = State::Head;
                    return Inside::Walk(off);
                }
            }
        }
    }

    /// A header split after its tag byte whose value is to be taken, completed by the first
    /// byte of `input` (a one-byte length) with the whole value in `input`: taken here, as
    /// `step_head` would take it (the usual way a subscribed key's tag byte ends a chunk),
    /// the value described by `hit`. False (nothing changed) leaves anything else to the
    /// walk: another decision, a value past its node or past the input, an invalid tag byte.
    #[inline(never)]
    fn split_take(&mut self, input: &[u8]) -> bool {
        let tag = self.hbuf[0];
        let (true, State::Head, Some(&l)) = (self.run, self.state, input.first()) else {
            return false;
        };
        // The value's end from the input's start: it must lie in the input and the node.
        let next = 1 + l as usize;
        if l >= 0x40
            || tag & 0xc0 == 0x40
            || next > input.len()
            || next as u64 > self.cur.end - self.pos
        {
            return false;
        }
        let header = Header {
            tag: Tag::from_byte(tag),
            len: l as u64,
            head_len: 2,
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
            start: 1,
            len: l as usize,
            head_len: 2,
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
        (self.cur.stop[(tag >> 6) as usize] >> (tag & 0x3f)) & 1 != 0
    }

    /// The common steps of chunked input, taken before the general machine is set up: the
    /// rest of a value skipped across chunks, then the skip run. `None` when that consumed
    /// all of `input` (the stream position is the caller's to advance), else the offset
    /// where [`walk`](Observer::walk) goes on, with the state committed up to it.
    #[inline(always)]
    fn skim(&mut self, input: &[u8]) -> Option<usize> {
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
            State::Take { .. } => return Some(0),
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
        if self.run && off + 1 == input.len() {
            // A header cut after its tag byte: kept as `read_header` keeps it when the
            // tag byte is valid (the array flag needs the node flag) and the header can
            // still fit in the current node; anything else is the walk's to report.
            let tag = input[off];
            if tag & 0xc0 != 0x40 && self.cur.end - (self.pos + off as u64) > 1 {
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
        let (true, 1, Some(&len)) = (self.run, self.hlen, input.first()) else {
            return Some(0);
        };
        let tag = self.hbuf[0];
        if len >= 0x40 || (self.cur.stop[(tag >> 6) as usize] >> (tag & 0x3f)) & 1 != 0 {
            return Some(0);
        }
        // The header began one byte before this input.
        let end = self.pos - 1 + 2 + len as u64;
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

    /// The general state machine from `input[off..]`: one step per state until a value
    /// completes, the input runs out, or an error.
    #[inline(never)]
    fn walk(&mut self, input: &[u8], mut off: usize) -> Result<Progress, DecodeError> {
        loop {
            let step = match self.state {
                State::Head => self.step_head(input, off),
                State::Skip { end } => self.step_skip(input, off, end),
                State::Take { end, sub, tag } => self.step_take(input, off, end, sub, tag),
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
                self.state = State::Take {
                    end: body_end,
                    sub,
                    tag: h.tag,
                };
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
    fn step_take(&mut self, input: &[u8], mut off: usize, end: u64, sub: usize, tag: Tag) -> Step {
        let here = self.pos + off as u64;
        let avail = input.len() - off;
        let left = end - here;
        if left > avail as u64 {
            self.assembled.extend_from_slice(&input[off..]);
            return Step::More(input.len());
        }
        // `left <= avail`, which is a usize.
        let left = left as usize;
        self.complete_take(input, off, left, end, sub, tag);
        off += left;
        self.pos += off as u64;
        Step::Found(off)
    }

    /// Completes a taken value whose last bytes are `input[off..off + left]`, ending at
    /// stream offset `end` (the `Take` state): the value is borrowed from `input` when none
    /// of it arrived before (its header ended with the previous chunk), else the rest is
    /// appended to the assembled bytes.
    #[inline(always)]
    fn complete_take(
        &mut self,
        input: &[u8],
        off: usize,
        left: usize,
        end: u64,
        sub: usize,
        tag: Tag,
    ) {
        let depth = self.parents.len() as u32 + 1;
        let assembled = !self.assembled.is_empty();
        let (start, len) = if assembled {
            self.assembled.extend_from_slice(&input[off..off + left]);
            // The next feed clears the buffer (the value handed out borrows it until then).
            self.catch_up = true;
            (0, self.assembled.len())
        } else {
            (off, left)
        };
        self.hit = Hit {
            sub,
            tag,
            start,
            len,
            head_len: Header::encoded_len(tag, len, self.config.dialect),
            depth,
            assembled,
        };
        self.state = State::Head;
        self.after_value(end);
    }

    /// [`crate::fast::walk`] (its straight-line first step only where `pair` is set) from a
    /// top-level boundary, committing its answer to the state the general walk would have
    /// reached; `None` (nothing changed) when it bails.
    #[inline(always)]
    fn feed_fast<'a>(&mut self, input: &'a [u8]) -> Option<Fed<'a>> {
        let limits = &self.config.limits;
        let first = match self.pair {
            Some((outer, inner)) => fast::first_child(
                outer,
                inner,
                limits.max_packet_len,
                limits.max_depth as usize,
                input,
                &mut self.ends[0],
            ),
            None => None,
        };
        let walked = match first {
            Some(found) => found,
            None => {
                let path = self.paths.first.as_ref()?;
                fast::walk_loop(&path.ids[..path.len], &self.config, input, &mut self.ends)
            }
        };
        match walked {
            Fast::Bail => None,
            Fast::Done { packets } => {
                self.started += packets;
                self.pos += input.len() as u64;
                Some(Fed {
                    consumed: input.len(),
                    observed: None,
                })
            }
            Fast::Found {
                tag,
                start,
                len,
                head_len,
                depth,
                packets,
            } => {
                self.started += packets;
                let end = start + len;
                // The nodes the walk entered (`ends[..depth - 1]`) are opened only if more
                // input arrives (`open_pending`). They nest, and the walk stopped right
                // after the value: all of them closed with it exactly when the outermost
                // did (as `after_value` would find on opening them).
                if depth > 1 && self.ends[0] != end {
                    self.pending = depth - 1;
                    self.pending_base = self.pos;
                    self.catch_up = true;
                }
                self.pos += end as u64;
                let packet = Packet::from_parts(
                    tag,
                    &input[start..end],
                    head_len,
                    depth as u32,
                    self.config,
                );
                Some(Fed {
                    consumed: end,
                    observed: Some(Observed {
                        sub: 0,
                        packet,
                        assembled: false,
                    }),
                })
            }
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
            // Only the fast path's nodes are open (it stops at a header boundary).
            _ if self.pending != 0 => self.pending_base + self.ends[0] as u64,
            (2.., _) => self.parents.get(1).end,
            (1, _) => self.cur.end,
            (_, State::Skip { end } | State::Take { end, .. }) => end,
            (_, State::Head) => self.pos + 1,
        };
        Err(DecodeError::UnexpectedEnd {
            needed: end.saturating_sub(self.pos).max(1),
        })
    }

    /// The hot loop: skips every uninteresting TLV with a one-byte tag and a one-byte
    /// length (0..=63) that lies in the current node, and returns the offset of the first
    /// header it leaves to the general path (a key of interest, a node to validate, a longer
    /// length, an invalid tag, a value that overflows the node). A skippable value that runs
    /// past the end of `input` switches to the `Skip` state and consumes everything. The checks it skips are exactly those these headers cannot
    /// fail: their lengths are non-negative, minimal and below any limit of 63 or more.
    #[inline(always)]
    fn skip_run(&mut self, input: &[u8], mut off: usize) -> usize {
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
        // By reference: a by-value copy of the array is a wide load over narrower stores
        // just made by `enter`/`reset`, which stalls store-to-load forwarding.
        let stop = &self.cur.stop;
        let start = off;
        let mut skipped = 0u64;
        while let Some(&[tag, len]) = bytes.get(off..off + 2) {
            let next = off + 2 + len as usize;
            if len >= 0x40 || (stop[(tag >> 6) as usize] >> (tag & 0x3f)) & 1 != 0 {
                break;
            }
            if next > bytes.len() {
                // A skippable value that runs past the input but not past its node (the
                // usual case for chunked input): count it down from here.
                if bytes.len() == input.len() && next as u64 <= in_level {
                    if self.parents.is_empty() {
                        self.started += skipped + 1;
                    }
                    self.state = State::Skip {
                        end: base + next as u64,
                    };
                    return input.len();
                }
                break;
            }
            off = next;
            skipped += 1;
        }
        if off != start {
            if self.parents.is_empty() {
                self.started += skipped;
            }
            self.after_value(base + off as u64);
        }
        off
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
    /// the streaming walk and [`Packet::children`] agree on every input.
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

    #[inline(always)]
    fn decide(&self, h: &Header) -> Action {
        let depth = self.parents.len();
        let id = h.tag.id();
        let mut take = 0u64;
        let mut enter = 0u64;
        let mut active = self.cur.active;
        if let (Some(path), 1) = (&self.paths.first, active) {
            // Only the first path active (every `get`, most observers): no walk over the set.
            active = 0;
            if path.ids[depth] == id {
                if path.len == depth + 1 {
                    return Action::Take(0);
                }
                enter = 1;
            }
        }
        while active != 0 {
            let i = active.trailing_zeros() as usize;
            active &= active - 1;
            let path = self.paths.get(i);
            // `active` only holds paths longer than `depth`.
            if path.ids[depth] == id {
                if path.len == depth + 1 {
                    take |= 1 << i;
                } else {
                    enter |= 1 << i;
                }
            }
        }
        if take != 0 {
            // Paths never overlap, so at most one path ends here.
            return Action::Take(take.trailing_zeros() as usize);
        }
        let can_enter = !self.config.dialect.has_node_flag() || h.tag.is_node();
        if can_enter && (enter != 0 || (self.validate && h.tag.is_node())) {
            return Action::Enter(enter);
        }
        Action::Skip
    }

    fn enter(&mut self, end: u64, active: u64) -> Result<(), DecodeError> {
        // The entered packet sits at depth `parents.len() + 1`; its children one deeper.
        if self.parents.len() as u64 + 1 >= self.config.limits.max_depth as u64 {
            return Err(DecodeError::TooDeep {
                limit: self.config.limits.max_depth,
            });
        }
        let level = self.level(end, active, self.parents.len() + 1);
        self.parents.push(self.cur);
        self.cur = level;
        Ok(())
    }

    /// Closes every node that ends at stream offset `at`.
    #[inline(always)]
    fn after_value(&mut self, at: u64) {
        while self.cur.end == at {
            match self.parents.pop() {
                Some(parent) => self.cur = parent,
                None => break,
            }
        }
    }
}

/// The skip run of [`Observer::skim_inside`]: from `off`, steps over every header in
/// `bytes` (the input, up to the current node's end where that comes first) that is simply
/// skipped: a tag byte the level's `stop` set does not hold (it holds every invalid one), a
/// one-group length (0..=63, under any limit the run allows) and a value inside the node,
/// which ends at offset `node`. Counts them in `heads` and returns the offset of the first
/// header it leaves, or the end of a value that runs past `bytes` (inside the node: the
/// usual end of a chunk), or `off` where that is past `bytes` already.
#[inline(always)]
fn skip_within(
    bytes: &[u8],
    mut off: usize,
    node: usize,
    stop: &[u64; 4],
    heads: &mut u64,
) -> usize {
    while let Some(&[tag, l]) = bytes.get(off..off + 2) {
        if l >= 0x40 || (stop[(tag >> 6) as usize] >> (tag & 0x3f)) & 1 != 0 {
            break;
        }
        let next = off + 2 + l as usize;
        if next > bytes.len() {
            if next <= node {
                *heads += 1;
                off = next;
            }
            break;
        }
        off = next;
        *heads += 1;
    }
    off
}

/// False when the first packet of `input` (a top-level boundary) certainly runs past its
/// end: [`fast::walk`] would give up on it at once, so chunked input does not pay for
/// setting it up. A lower bound of the packet's size is enough (the walk checks the rest):
/// its header, plus the high group of a two-byte length.
#[inline(always)]
fn first_may_fit(input: &[u8]) -> bool {
    let Some(&b1) = input.get(1) else {
        return input.is_empty();
    };
    let least = if b1 < 0x40 {
        2 + b1 as usize
    } else {
        3 + (((b1 & 0x3f) as usize) << 7)
    };
    least <= input.len()
}

/// What [`Observer::skim_inside`] did with a chunk.
enum Inside {
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

enum Action {
    Skip,
    Enter(u64),
    Take(usize),
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

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn observe_all(
        obs: &mut Observer,
        chunks: &[&[u8]],
    ) -> Result<Vec<(usize, Vec<u8>)>, DecodeError> {
        let mut out = Vec::new();
        for chunk in chunks {
            obs.feed_each(chunk, |v| out.push((v.sub, v.value().to_vec())))?;
        }
        obs.finish()?;
        Ok(out)
    }

    #[test]
    fn nested_path_one_shot_and_split() {
        let buf = hex!("810802017f8303040143");
        for split in 0..=buf.len() {
            let mut obs =
                Observer::new(Config::DEFAULT, &[&[0x01, 0x03, 0x04], &[0x01, 0x02]]).unwrap();
            let got = observe_all(&mut obs, &[&buf[..split], &buf[split..]]).unwrap();
            assert_eq!(
                got,
                [(1, hex!("7f").to_vec()), (0, b"C".to_vec())],
                "split {split}"
            );
        }
    }

    #[test]
    fn many_packets_in_a_row() {
        let one = hex!("9006110101120161");
        let stream: Vec<u8> = one.iter().chain(&one).chain(&one).copied().collect();
        let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x12]]).unwrap();
        let got = observe_all(&mut obs, &[&stream]).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(obs.packets(), 3);
    }

    #[test]
    fn packets_in_a_header_split_at_the_top_level() {
        // The packet whose header is split is not counted yet: none before it, one before
        // the second.
        let one = hex!("9006110101120161");
        let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x13]]).unwrap();
        assert_eq!(obs.feed(&one[..1]).unwrap().consumed, 1);
        assert_eq!(obs.packets(), 0);
        obs.feed_each(&one[1..], |_| {}).unwrap();
        obs.feed_each(&one[..1], |_| {}).unwrap();
        assert_eq!(obs.packets(), 1);
        obs.feed_each(&one[1..4], |_| {}).unwrap();
        assert_eq!(obs.packets(), 1);
        obs.feed_each(&one[4..], |_| {}).unwrap();
        assert_eq!((obs.packets(), obs.finish()), (2, Ok(())));
    }

    #[test]
    fn does_not_match_tag_bytes_inside_values() {
        // The reference's Subscribe(0x10) finds `10 01 07` inside the value of 0x02.
        let buf = hex!("81 08 02 03 10 01 07 10 01 05");
        let mut obs = Observer::new(Config::DEFAULT, &[&[0x01, 0x10]]).unwrap();
        let got = observe_all(&mut obs, &[&buf]).unwrap();
        assert_eq!(got, [(0, vec![0x05])]);
    }

    #[test]
    fn truncation_is_an_error_only_at_finish() {
        let buf = hex!("9006110101120161");
        let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x12]]).unwrap();
        let fed = obs.feed(&buf[..5]).unwrap();
        assert_eq!((fed.consumed, fed.observed.is_none()), (5, true));
        assert_eq!(obs.finish(), Err(DecodeError::UnexpectedEnd { needed: 3 }));
    }

    #[test]
    fn child_overflow_and_truncated_header() {
        let mut obs = Observer::validator(Config::DEFAULT);
        assert_eq!(
            obs.feed(&hex!("8103110501")).unwrap_err(),
            DecodeError::ChildOverflow {
                declared: 5,
                available: 1
            }
        );
        let mut obs = Observer::validator(Config::DEFAULT);
        assert_eq!(
            obs.feed(&hex!("810111")).unwrap_err(),
            DecodeError::TruncatedHeader { available: 1 }
        );
        let mut obs = Observer::validator(Config::DEFAULT);
        assert_eq!(obs.feed(&hex!("8101")).unwrap().consumed, 2);
        assert_eq!(
            obs.feed(&hex!("11")).unwrap_err(),
            DecodeError::TruncatedHeader { available: 1 }
        );
    }

    #[test]
    fn depth_limit_holds_in_every_chunking() {
        // Node 0x01 { node 0x02 { 0x03 = "x" } } under a depth limit of 2: the inner node
        // may not be entered, whole or in chunks of any size.
        let buf = hex!("81058203030178");
        let config = Config::DEFAULT.with_limits(crate::Limits {
            max_packet_len: 1 << 10,
            max_depth: 2,
        });
        for size in 1..=buf.len() {
            let mut obs = Observer::new(config, &[&[0x01, 0x02, 0x03]]).unwrap();
            let got = buf
                .chunks(size)
                .try_for_each(|chunk| obs.feed_each(chunk, |_| panic!("no value")));
            assert_eq!(
                got,
                Err(DecodeError::TooDeep { limit: 2 }),
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn overlapping_paths_are_refused() {
        let err = Observer::new(Config::DEFAULT, &[&[0x10], &[0x10, 0x11]]).unwrap_err();
        assert_eq!(
            err,
            PathError::Overlap {
                shorter: 0,
                longer: 1
            }
        );
        assert_eq!(
            Observer::new(Config::DEFAULT, &[&[1], &[1]])
                .unwrap_err()
                .kind(),
            "path_overlap"
        );
    }
}
