//! Tags and packet headers: the one header decision of this crate, and the only code that
//! reads tag and length bytes. Every reader (the observer's walk and its chunk loop, the fast
//! paths, the skip runs scalar and AVX-512, [`Packet::children`](crate::Packet::children))
//! goes through this module: [`Header::parse`] for any header of any dialect, and the leaf
//! rules below it for the short headers of the one-byte dialects that the hot loops inline:
//!
//! ```text
//!   short_at::<CHUNK>   a short header, whole buffer or chunk (a compile-time choice)
//!   keyed_at            short_at for one key, the key tested first (fast::first_child)
//!   short_head          a short header at a buffer's start (Packet::children' usual child)
//!   split_short         a header split after its tag byte (the chunk loop)
//!   skippable           one step of a skip run (skip::run_by), by a Stops set
//!   lanes               the skip run's rules on 64 headers at once (AVX-512)
//!   below them          short_header, is_one_group, byte_is_invalid, byte_key, StopSet
//! ```
//!
//! It is also the only code that writes them: every encoder of this crate (the item tree of
//! `encode.rs`, `write_header`, the typed encoders) writes a header through the writers
//! below, the short headers of the one-byte dialects (drawn below, one fixed-size store each)
//! first and the rest through [`Header::write`]:
//!
//! ```text
//!   put_header          any header of any dialect, checked: short_encoded, else Header::write
//!   put_one_group       the shortest header (a tag byte, a length of 0..=63)
//!   Header::write       any header into an array: short_encoded, else tag byte(s) and the
//!                       length's groups
//!   Header::checked_len the bytes a header takes, after Header::write's checks
//!   short_encoded       the short header of the one-byte dialects (0..=8191): the one rule
//!                       put_header, Header::write and Header::checked_len use
//! ```
//!
//! ```text
//! golang / nvarint tag, one byte:          draft02 tag, 1..=4 bytes:
//!
//!   7   6   5 4 3 2 1 0                      7   6 5 4 3 2 1 0
//! +---+---+-------------+                  +---+-------------+
//! | N | A |   seq id    |                  | C |  id bits    | ...
//! +---+---+-------------+                  +---+-------------+
//!   N = 0x80 node, A = 0x40 array            C = continuation, big-endian groups
//!
//! header = tag, then the value length as signed PVarInt32 (1..=5 bytes)
//!
//! the short headers of the one-byte dialects (every hot loop's common case):
//!
//!   tag       length                    value length   header
//! +--------+ +----------+               0..=63         2 bytes
//! | N A id | | 00xxxxxx |
//! +--------+ +----------+----------+
//! | N A id | | 10xxxxxx | 0yyyyyyy |    64..=8191      3 bytes (x << 7 | y)
//! +--------+ +----------+----------+
//!   N A = 0 1 (array flag alone) is refused: `invalid_tag`
//! ```
//!
//! See `spec/wire-format.md` sections "Tag" and "Length".

use bytes::BufMut;

use crate::{varint, Config, DecodeError, Dialect, EncodeError};

/// Largest number of bytes a PVarInt32 length may take (35 bits hold any i32).
const MAX_LEN_BYTES: usize = 5;

/// Largest id a draft-02 tag carries: four 7-bit groups.
pub const DRAFT02_MAX_ID: u32 = (1 << 28) - 1;

/// Bytes a draft-02 tag may take.
const DRAFT02_TAG_BYTES: usize = 4;

/// Longest header any dialect produces: a 4-byte tag and a 5-byte length.
pub const MAX_HEADER_LEN: usize = DRAFT02_TAG_BYTES + MAX_LEN_BYTES;

const NODE: u8 = 0x80;
const ARRAY: u8 = 0x40;

/// Values of this many bytes or more take a length of more than two groups (`1 << 13`):
/// the end of the short headers.
const SHORT_LEN_END: usize = 1 << 13;

/// Largest value length any header carries (a signed 32-bit length).
const MAX_VALUE_LEN: usize = i32::MAX as usize;

/// Whether a one-byte-dialect tag byte is refused: the array flag without the node flag
/// (`0x40..=0x7f`, `invalid_tag`). The reference reads 0x51 as key 0x11 and loses the bit.
#[inline(always)]
pub(crate) const fn byte_is_invalid(b: u8) -> bool {
    b & (NODE | ARRAY) == ARRAY
}

/// The key of a one-byte-dialect tag byte.
#[inline(always)]
pub(crate) const fn byte_key(b: u8) -> u32 {
    (b & 0x3f) as u32
}

/// Whether a one-byte-dialect tag byte marks a node.
#[inline(always)]
pub(crate) const fn byte_is_node(b: u8) -> bool {
    b & NODE != 0
}

/// Whether a one-byte-dialect tag byte marks a node (or an array node) with key `key`, in
/// one comparison: a key of 64 or more matches no tag byte.
#[inline(always)]
pub(crate) const fn byte_is_node_key(b: u8, key: u32) -> bool {
    (b & (NODE | 0x3f)) as u64 == NODE as u64 + key as u64
}

/// Whether a length byte is a whole length of one group (`00xx_xxxx`, 0..=63): non-negative,
/// minimal and below any limit of 63 or more, so that a run may skip its value unchecked.
#[inline(always)]
pub(crate) const fn is_one_group(l: u8) -> bool {
    l < 0x40
}

/// The value length and header length of a short header of the one-byte dialects whose
/// first length byte is `l` (the byte after the tag byte): one group (0..=63, a 2-byte
/// header) or two (64..=8191, 3 bytes), the second group read from `buf[at]` only then.
/// `None` for anything else (a longer length, a negative one, `buf` ending first): the
/// caller leaves that header to [`Header::parse`]. The limit is the caller's to check on a
/// two-group length.
#[inline(always)]
pub(crate) fn short_header(l: u8, buf: &[u8], at: usize) -> Option<(usize, usize)> {
    if is_one_group(l) {
        return Some((l as usize, 2));
    }
    match buf.get(at) {
        Some(&b2) if l & 0xc0 == 0x80 && b2 < 0x80 => {
            Some(((((l & 0x3f) as usize) << 7) | b2 as usize, 3))
        }
        _ => None,
    }
}

/// Where the value of the header at `s` in `bytes` ends (`s + 2 + len`) when a skip run
/// steps over it: its tag byte and first length byte lie in `bytes`, `stops` passes the tag
/// byte and the length is one group ([`Stops::stops_at`]). `None` where the run stops. The
/// two bytes are read in one of two shapes that decide the same (`REST`: the fewer
/// instructions depend on the caller's registers). Whether the value ends inside the node
/// is the run's to check.
#[inline(always)]
pub(crate) fn skippable<S: Stops, const REST: bool>(
    bytes: &[u8],
    s: usize,
    stops: &S,
) -> Option<usize> {
    let pair = if REST {
        bytes.get(s..).and_then(|rest| rest.get(..2))
    } else {
        bytes.get(s..s + 2)
    };
    let Some(&[t, l]) = pair else {
        return None;
    };
    if stops.stops_at(t, l) {
        return None;
    }
    Some(s + 2 + l as usize)
}

/// A lower bound of the size of a packet of a one-byte dialect whose first length byte is
/// `l`: its header plus its value, the high group of a longer length counted alone.
#[inline(always)]
const fn packet_len_at_least(l: u8) -> usize {
    if is_one_group(l) {
        2 + l as usize
    } else {
        3 + (((l & 0x3f) as usize) << 7)
    }
}

/// A short header of the one-byte dialects read where it lies: tag byte `tag`, value
/// `bytes[start..start + len]` after a `head_len`-byte header (`start` may lie past the
/// bytes read: the value is the caller's to bound).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub(crate) tag: u8,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) head_len: usize,
}

impl Head {
    /// Where the value ends (an offset from the same start as `start`).
    #[inline(always)]
    pub(crate) const fn next(&self) -> usize {
        self.start + self.len
    }
}

/// What [`short_at`] found at a header.
pub(crate) enum Short {
    /// A short header with a valid tag byte and a length within the limit.
    Head(Head),
    /// Only the header's tag byte lies in the bytes (the usual cut of chunked input; only
    /// where `CHUNK`).
    Cut(u8),
    /// Anything else, [`Header::parse`]'s to read or report: a longer or negative length,
    /// a length over the limit, the array flag without the node flag, a two-group length
    /// cut after its first byte, no header at all.
    Other,
}

/// The one reading of a short header of the one-byte dialects (every walker's common
/// case): the header at `off` in `bytes`, its tag byte valid, its length one group or two
/// ([`short_header`]) and at most `limit`. `CHUNK` chooses the walk at compile time: a
/// whole buffer (`false`: a header cut short is [`Short::Other`], the input is all there
/// is) or a chunk of a stream (`true`: a header cut after its tag byte is [`Short::Cut`],
/// to be completed by the next chunk; the chunk loop runs only under a limit of 63 or more,
/// so a one-group length is not compared with it).
///
/// ```text
///   bytes[off]  bytes[off + 1]  (bytes[off + 2])    -> Short
///   tag         00xxxxxx        -                   Head { tag, start: off + 2, len: x }
///   tag         10xxxxxx        0yyyyyyy            Head { start: off + 3, len: x << 7 | y }
///   tag         (the bytes end)                     Cut(tag) in a chunk, else Other
///   invalid tag, a longer length, len > limit      Other
/// ```
#[inline(always)]
pub(crate) fn short_at<const CHUNK: bool>(bytes: &[u8], off: usize, limit: u64) -> Short {
    debug_assert!(!CHUNK || limit >= 63);
    let (tag, l) = if CHUNK {
        let Some(&tag) = bytes.get(off) else {
            return Short::Other;
        };
        let Some(&l) = bytes.get(off + 1) else {
            return Short::Cut(tag);
        };
        (tag, l)
    } else {
        let Some(&[tag, l]) = bytes.get(off..off + 2) else {
            return Short::Other;
        };
        (tag, l)
    };
    let (len, head_len) = if CHUNK {
        // The chunk loop's order: a one-group length as it is, a two-group one held to
        // the limit, then the tag byte.
        let short = if is_one_group(l) {
            (l as usize, 2)
        } else {
            match short_header(l, bytes, off + 2) {
                Some((len, head_len)) if len as u64 <= limit => (len, head_len),
                _ => return Short::Other,
            }
        };
        if byte_is_invalid(tag) {
            return Short::Other;
        }
        short
    } else {
        let Some((len, head_len)) = short_header(l, bytes, off + 2) else {
            return Short::Other;
        };
        if byte_is_invalid(tag) || len as u64 > limit {
            return Short::Other;
        }
        (len, head_len)
    };
    Short::Head(Head {
        tag,
        start: off + head_len,
        len,
        head_len,
    })
}

/// [`short_at::<false>`](short_at) for a header that must carry key `key` (and, where
/// `NODE`, the node flag), the key tested first: the header at `off` in `bytes` when its tag
/// byte is valid with that key and its length is one group, or (where `TWO`) two groups
/// within `limit`; `None` for anything else (another key, anything `short_at` leaves, a
/// two-group length unless `TWO`). Only where `limit >= 63` (a one-group length is not
/// compared with it): the straight-line lookups of `fast.rs`.
#[inline(always)]
pub(crate) fn keyed_at<const NODE: bool, const TWO: bool>(
    bytes: &[u8],
    off: usize,
    key: u32,
    limit: u64,
) -> Option<Head> {
    debug_assert!(limit >= 63);
    let &[tag, l] = bytes.get(off..off + 2)? else {
        return None;
    };
    // A node key implies the node flag, so a valid tag byte.
    let keyed = if NODE {
        byte_is_node_key(tag, key)
    } else {
        byte_key(tag) == key && !byte_is_invalid(tag)
    };
    if !keyed {
        return None;
    }
    let (len, head_len) = if is_one_group(l) {
        (l as usize, 2)
    } else if TWO {
        match short_header(l, bytes, off + 2) {
            Some((len, head_len)) if len as u64 <= limit => (len, head_len),
            _ => return None,
        }
    } else {
        return None;
    };
    Some(Head {
        tag,
        start: off + head_len,
        len,
        head_len,
    })
}

/// The header at the start of `bytes` when it is a short one ([`short_header`]): a valid
/// tag byte and a length of one group (0..=63) or two (64..=8191). Its tag byte, its value
/// length, its header length and the bytes after it (the value is the caller's to bound,
/// and the limit to check); `None` for anything else, [`short_at`]'s or
/// [`Header::parse`]'s. The usual child of [`Packet::children`](crate::Packet::children)
/// (a data frame's 64-byte payload has a two-group length), in the fewest instructions.
#[inline(always)]
pub(crate) fn short_head(bytes: &[u8]) -> Option<(u8, usize, usize, &[u8])> {
    match bytes {
        &[tag, l, ..] if !byte_is_invalid(tag) => {
            let (len, head_len) = short_header(l, bytes, 2)?;
            Some((tag, len, head_len, bytes.get(head_len..)?))
        }
        _ => None,
    }
}

/// A short header split after its tag byte `tag` (kept from the previous chunk), completed
/// by the first byte of `rest` when that is a length of one group: the value is
/// `rest[1..1 + len]` (past `rest` when it straddles chunks). `None` leaves any other
/// completion to [`Header::parse`]. The tag byte is the caller's to check.
#[inline(always)]
pub(crate) fn split_short(tag: u8, rest: &[u8]) -> Option<Head> {
    match rest.first() {
        Some(&l) if is_one_group(l) => Some(Head {
            tag,
            start: 1,
            len: l as usize,
            head_len: 2,
        }),
        _ => None,
    }
}

/// False when the first packet of `input` (a top-level boundary) certainly runs past its
/// end: a whole-buffer walk would give up on it at once, so chunked input does not pay for
/// setting one up. A lower bound of the packet's size is enough (the walk checks the rest):
/// its header, plus the high group of a two-byte length.
#[inline(always)]
pub(crate) fn first_may_fit(input: &[u8]) -> bool {
    let Some(&l) = input.get(1) else {
        return input.is_empty();
    };
    packet_len_at_least(l) <= input.len()
}

/// The tag bytes a skip run stops at (the header needs a decision), one bit per byte value
/// in four words by the two flag bits:
///
/// ```text
///   word 0: primitives 0x00..=0x3f   keys on an active path
///   word 1: 0x40..=0x7f              all (invalid: the array flag alone)
///   word 2: nodes 0x80..=0xbf        keys on an active path, or all when validating
///   word 3: arrays 0xc0..=0xff       as word 2
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StopSet(pub(crate) [u64; 4]);

impl StopSet {
    /// Stops at the keys `keys` (bit `k` for key `k`) of primitives, at the node keys
    /// `nodes`, and at every invalid tag byte.
    #[inline(always)]
    pub(crate) const fn new(keys: u64, nodes: u64) -> StopSet {
        StopSet([keys, u64::MAX, nodes, nodes])
    }

    /// Whether tag byte `tag` needs a decision.
    #[inline(always)]
    pub(crate) fn stops(&self, tag: u8) -> bool {
        (self.0[(tag >> 6) as usize] >> (tag & 0x3f)) & 1 != 0
    }
}

/// What a skip run stops at, decided from the tag byte alone: a [`StopSet`], one key
/// ([`StopKey`]) or a set of keys ([`StopKeys`]), each stopping at every invalid tag byte
/// too. The length rule ([`is_one_group`]) is the run's.
pub(crate) trait Stops {
    /// Whether tag byte `tag` needs a decision.
    fn stops(&self, tag: u8) -> bool;

    /// Whether a run stops at the header of tag byte `tag` and first length byte `l`: the
    /// tag needs a decision or the length is not one group. (The order of the two tests is
    /// each set's: the cheaper or likelier first.)
    #[inline(always)]
    fn stops_at(&self, tag: u8, l: u8) -> bool {
        !is_one_group(l) || self.stops(tag)
    }
}

impl Stops for StopSet {
    #[inline(always)]
    fn stops(&self, tag: u8) -> bool {
        StopSet::stops(self, tag)
    }
}

/// Stops at key `.0` (above 63: at no key) and at invalid tag bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopKey(pub(crate) u32);

impl Stops for StopKey {
    #[inline(always)]
    fn stops(&self, tag: u8) -> bool {
        byte_key(tag) == self.0 || byte_is_invalid(tag)
    }

    #[inline(always)]
    fn stops_at(&self, tag: u8, l: u8) -> bool {
        self.stops(tag) || !is_one_group(l)
    }
}

/// Stops at the keys of bit set `.0` (bit `k` for key `k`) and at invalid tag bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopKeys(pub(crate) u64);

impl Stops for StopKeys {
    #[inline(always)]
    fn stops(&self, tag: u8) -> bool {
        self.0 >> (tag & 0x3f) & 1 != 0 || byte_is_invalid(tag)
    }

    #[inline(always)]
    fn stops_at(&self, tag: u8, l: u8) -> bool {
        self.stops(tag) || !is_one_group(l)
    }
}

/// Stops at every node and every invalid tag byte (a validating walk with nothing to look
/// for): a tag byte of `0x40` or more, tested with the length byte in one comparison.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopNodes;

impl Stops for StopNodes {
    #[inline(always)]
    fn stops(&self, tag: u8) -> bool {
        tag >= ARRAY
    }

    #[inline(always)]
    fn stops_at(&self, tag: u8, l: u8) -> bool {
        // Primitives are `0x00..=0x3f` and one-group lengths `0x00..=0x3f`.
        (tag | l) >= ARRAY
    }
}

/// The short-header rules of the skip run on 64 headers at once (the AVX-512 path of
/// `skip.rs`): lane `i` holds the header that would start at byte `i` of a 64-byte window,
/// its tag byte in `tags` and its first length byte in `lens` (the window's bytes from `i +
/// 1`). The same decisions as [`skippable`] with [`StopKey`] or [`StopKeys`], lane by lane;
/// the loads, and the chain through the window, are the run's.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub(crate) mod lanes {
    use core::arch::x86_64::*;

    /// Where each lane's value would end (`i + 2 + len`, modulo 256), `idx` holding each
    /// lane's index: meaningful where the length is one group, else the lane stops.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) fn next(idx: __m512i, lens: __m512i) -> __m512i {
        _mm512_add_epi8(_mm512_add_epi8(idx, _mm512_set1_epi8(2)), lens)
    }

    /// The lanes a run stops at whatever the key: a length not of one group
    /// ([`is_one_group`](super::is_one_group)), or a tag byte with the array flag alone
    /// ([`byte_is_invalid`](super::byte_is_invalid)).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) fn stops(tags: __m512i, lens: __m512i) -> __mmask64 {
        let flags = _mm512_set1_epi8((super::NODE | super::ARRAY) as i8);
        let array = _mm512_set1_epi8(super::ARRAY as i8);
        _mm512_cmpge_epu8_mask(lens, array)
            | _mm512_cmpeq_epi8_mask(_mm512_and_si512(tags, flags), array)
    }

    /// The lanes whose tag byte has key `want` ([`StopKey`](super::StopKey); a key above
    /// 63 matches none: 0xff never equals a six-bit key).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) fn key_is(tags: __m512i, want: u32) -> __mmask64 {
        let w = _mm512_set1_epi8(if want < 64 { want as i8 } else { -1 });
        _mm512_cmpeq_epi8_mask(_mm512_and_si512(tags, _mm512_set1_epi8(0x3f)), w)
    }

    /// The lanes whose tag byte's key is in bit set `keys` ([`StopKeys`](super::StopKeys)):
    /// a byte permute by the tag bytes (whose low six bits index it) of the table whose byte
    /// `k` is 0xff where key `k` is in the set.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(crate) fn key_in(tags: __m512i, keys: __m512i) -> __mmask64 {
        let hit = _mm512_permutexvar_epi8(tags, keys);
        _mm512_test_epi8_mask(hit, hit)
    }

    /// [`key_in`]'s table of bit set `keys`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) fn key_table(keys: u64) -> __m512i {
        _mm512_movm_epi8(keys)
    }
}

/// A packet's key and kind.
///
/// In the one-byte dialects the kind travels in the tag byte (node flag `0x80`, array flag
/// `0x40`). In `draft02` nothing on the wire says whether a value is a node; a [`Tag`] read
/// from draft-02 bytes is always primitive, and the schema (a key path, a typed struct)
/// decides whether to descend.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    id: u32,
    flags: u8,
}

impl Tag {
    /// The tag of a one-byte-dialect tag byte already checked not to carry the array flag
    /// alone.
    #[inline(always)]
    pub(crate) const fn from_byte(b: u8) -> Tag {
        Tag {
            id: byte_key(b),
            flags: b & (NODE | ARRAY),
        }
    }

    /// A primitive (leaf) tag with key `id`.
    #[inline]
    pub const fn primitive(id: u32) -> Tag {
        Tag { id, flags: 0 }
    }

    /// A node tag with key `id`: its value is a sequence of packets.
    #[inline]
    pub const fn node(id: u32) -> Tag {
        Tag { id, flags: NODE }
    }

    /// An array tag with key `id`: a node whose children are elements with key 0.
    #[inline]
    pub const fn array(id: u32) -> Tag {
        Tag {
            id,
            flags: NODE | ARRAY,
        }
    }

    /// The key (seq id).
    #[inline]
    pub const fn id(self) -> u32 {
        self.id
    }

    /// Whether the value is a sequence of packets.
    #[inline]
    pub const fn is_node(self) -> bool {
        self.flags & NODE != 0
    }

    /// Whether the node is an array (slice) node.
    #[inline]
    pub const fn is_array(self) -> bool {
        self.flags & ARRAY != 0
    }

    /// The tag byte of the one-byte dialects (`flags | id`); `None` when the id exceeds 0x3f.
    #[inline]
    pub const fn byte(self) -> Option<u8> {
        if self.id <= 0x3f {
            Some(self.flags | self.id as u8)
        } else {
            None
        }
    }

    /// Bytes the tag takes in `dialect`.
    #[inline]
    pub const fn encoded_len(self, dialect: Dialect) -> usize {
        match dialect {
            Dialect::Golang | Dialect::NVarInt => 1,
            Dialect::Draft02 => varint::uvarint_len(self.id),
        }
    }

    /// Checks that `dialect` can carry this tag.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`] for ids above [`Dialect::max_tag`].
    pub const fn check(self, dialect: Dialect) -> Result<(), EncodeError> {
        let max = dialect.max_tag();
        if self.id > max {
            return Err(EncodeError::InvalidTag { tag: self.id, max });
        }
        Ok(())
    }
}

impl core::fmt::Debug for Tag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kind = match (self.is_node(), self.is_array()) {
            (true, true) => "array",
            (true, false) => "node",
            _ => "primitive",
        };
        write!(f, "Tag({kind} 0x{:02x})", self.id)
    }
}

/// A parsed packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The tag.
    pub tag: Tag,
    /// Declared value length, already checked against the limit.
    pub len: u64,
    /// Bytes the tag and length took.
    pub head_len: usize,
}

impl Header {
    /// Parses a header from the start of `buf`.
    ///
    /// Returns `Ok(None)` when `buf` ends inside the header: that is not an error, the
    /// caller feeds more bytes. The declared length is checked against
    /// `config.limits.max_packet_len` here, before any caller can act on it.
    ///
    /// # Errors
    /// [`DecodeError::InvalidTag`] for a one-byte primitive tag with the array flag,
    /// [`DecodeError::NegativeLength`], [`DecodeError::VarintOverflow`],
    /// [`DecodeError::TooLong`].
    #[inline(always)]
    pub fn parse(buf: &[u8], config: &Config) -> Result<Option<Header>, DecodeError> {
        let (tag, tag_len) = match config.dialect {
            Dialect::Golang | Dialect::NVarInt => {
                let Some(&b) = buf.first() else {
                    return Ok(None);
                };
                if byte_is_invalid(b) {
                    return Err(DecodeError::InvalidTag { tag: b as u32 });
                }
                (Tag::from_byte(b), 1)
            }
            Dialect::Draft02 => match varint::uvarint_read(buf, DRAFT02_TAG_BYTES)? {
                Some((id, n)) => (Tag::primitive(id), n),
                None => return Ok(None),
            },
        };
        let Some((len, len_len)) = length_read(&buf[tag_len..])? else {
            return Ok(None);
        };
        if len > config.limits.max_packet_len {
            return Err(DecodeError::TooLong {
                declared: len,
                limit: config.limits.max_packet_len,
            });
        }
        Ok(Some(Header {
            tag,
            len,
            head_len: tag_len + len_len,
        }))
    }

    /// Writes the header for `tag` and a value of `len` bytes in `dialect` into `out`,
    /// returning the bytes used: the tag (one byte, or the draft-02 tag's 1..=4 groups), then
    /// the length as PVarInt32 (1..=5 groups), as drawn in the module doc. Encoders write
    /// through `tag::put_header` (crate-private), which takes the short headers without it.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`] when the dialect cannot carry the tag,
    /// [`EncodeError::TooLong`] when `len` exceeds `i32::MAX`.
    pub fn write(
        tag: Tag,
        len: usize,
        dialect: Dialect,
        out: &mut [u8; MAX_HEADER_LEN + 1],
    ) -> Result<usize, EncodeError> {
        // The usual header first; its checks pass (`short_encoded`).
        if let Some((bytes, n)) = short_encoded(tag, len, dialect) {
            out[..3].copy_from_slice(&bytes);
            return Ok(n);
        }
        tag.check(dialect)?;
        check_value_len(len)?;
        let tag_len = match dialect {
            Dialect::Golang | Dialect::NVarInt => {
                out[0] = tag.flags | tag.id as u8;
                1
            }
            Dialect::Draft02 => varint::uvarint_write(tag.id, out),
        };
        let n = varint::pvarint_write(len as i64, &mut out[tag_len..]);
        Ok(tag_len + n)
    }

    /// Bytes the header for `tag` and a `len`-byte value takes in `dialect`.
    #[inline]
    pub const fn encoded_len(tag: Tag, len: usize, dialect: Dialect) -> usize {
        tag.encoded_len(dialect) + varint::pvarint_len(len as i64)
    }

    /// [`Header::encoded_len`] after the checks of [`Header::write`]: the bytes the header
    /// will take, or the error writing it would report.
    ///
    /// # Errors
    /// As [`Header::write`].
    #[inline(always)]
    pub(crate) fn checked_len(
        tag: Tag,
        len: usize,
        dialect: Dialect,
    ) -> Result<usize, EncodeError> {
        if let Some((_, n)) = short_encoded(tag, len, dialect) {
            return Ok(n);
        }
        tag.check(dialect)?;
        check_value_len(len)?;
        Ok(Header::encoded_len(tag, len, dialect))
    }
}

/// Refuses a value length no header carries (above `i32::MAX`): `too_long`.
///
/// # Errors
/// [`EncodeError::TooLong`].
#[inline(always)]
pub(crate) fn check_value_len(len: usize) -> Result<(), EncodeError> {
    if len > MAX_VALUE_LEN {
        return Err(EncodeError::TooLong {
            len: len as u64,
            limit: MAX_VALUE_LEN as u64,
        });
    }
    Ok(())
}

/// Writes the shortest header of the one-byte dialects: tag byte `t` and a length of one
/// group `len` (0..=63), one fixed-size store (a variable-length copy is a `memcpy` call).
#[inline(always)]
pub(crate) fn put_one_group(t: u8, len: u8, buf: &mut impl BufMut) {
    debug_assert!(is_one_group(len));
    buf.put_slice(&[t, len]);
}

/// The short header (drawn in the module doc) for `tag` and a `len`-byte value in `dialect`,
/// and how many of its three bytes it takes: in a one-byte dialect, for a key it carries as
/// a tag byte, one length group for 0..=63 (2), two for 64..=8191 (3); `None` otherwise.
/// Its checks pass (the key fits the dialect, the length is in range). The one rule that
/// [`put_header`], [`Header::write`] and [`Header::checked_len`] use.
#[inline(always)]
const fn short_encoded(tag: Tag, len: usize, dialect: Dialect) -> Option<([u8; 3], usize)> {
    let (true, Some(t)) = (dialect.has_node_flag(), tag.byte()) else {
        return None;
    };
    if len < 0x40 {
        Some(([t, len as u8, 0], 2))
    } else if len < SHORT_LEN_END {
        // `10xx_xxxx 0yyy_yyyy`: the sign bit (bit 6 of the first group) clear.
        Some(([t, 0x80 | (len >> 7) as u8, (len & 0x7f) as u8], 3))
    } else {
        None
    }
}

/// The one writer of a header into `buf`: tag `tag` and a `len`-byte value in `dialect`.
/// The short header of the one-byte dialects ([`short_encoded`], one fixed-size store) is
/// the usual one; the rest goes through [`Header::write`], which also reports the errors.
/// Nothing is written on error.
///
/// # Errors
/// As [`Header::write`].
#[inline(always)]
pub(crate) fn put_header(
    tag: Tag,
    len: usize,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    match short_encoded(tag, len, dialect) {
        // Two constant lengths, not `bytes[..n]`: a variable-length copy is a `memcpy` call.
        Some(([t, l, _], 2)) => put_one_group(t, l, buf),
        Some((bytes, _)) => buf.put_slice(&bytes),
        None => {
            let mut head = [0u8; MAX_HEADER_LEN + 1];
            let n = Header::write(tag, len, dialect, &mut head)?;
            buf.put_slice(&head[..n]);
        }
    }
    Ok(())
}

/// Reads a PVarInt32 length field from the start of `buf`.
///
/// Returns `Ok(None)` when `buf` ends before the terminating group, else the length and the
/// bytes it took.
///
/// # Errors
/// [`DecodeError::NegativeLength`] when the sign bit is set, [`DecodeError::VarintOverflow`]
/// when the field runs past five bytes or past `i32::MAX`.
#[inline(always)]
pub fn length_read(buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
    match buf.first() {
        // The short forms (one group 0..=63, two groups 64..=8191: the usual size of a
        // message), as every hot loop reads them.
        Some(&b) => match short_header(b, buf, 1) {
            Some((len, head_len)) => Ok(Some((len as u64, head_len - 1))),
            None => length_read_slow(buf),
        },
        None => Ok(None),
    }
}

#[cold]
fn length_read_slow(buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
    let first = buf[0];
    let mut v = (((first & 0x7f) as i64) << 57) >> 57;
    let mut i = 1;
    let mut more = first & 0x80 != 0;
    while more {
        if i == MAX_LEN_BYTES {
            return Err(DecodeError::VarintOverflow {
                len: i as u32 + 1,
                bits: 32,
            });
        }
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        v = (v << 7) | (b & 0x7f) as i64;
        more = b & 0x80 != 0;
        i += 1;
    }
    if v < 0 {
        return Err(DecodeError::NegativeLength { declared: v });
    }
    if v > i32::MAX as i64 {
        return Err(DecodeError::VarintOverflow {
            len: i as u32,
            bits: 32,
        });
    }
    Ok(Some((v as u64, i)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    #[test]
    fn one_byte_tags() {
        let c = Config::DEFAULT;
        let h = Header::parse(&hex!("9006"), &c).unwrap().unwrap();
        assert_eq!((h.tag, h.len, h.head_len), (Tag::node(0x10), 6, 2));
        let h = Header::parse(&hex!("d000"), &c).unwrap().unwrap();
        assert_eq!(h.tag, Tag::array(0x10));
        assert_eq!(
            Header::parse(&hex!("5101"), &c),
            Err(DecodeError::InvalidTag { tag: 0x51 })
        );
        assert_eq!(Header::parse(&hex!("11"), &c), Ok(None));
        assert_eq!(Header::parse(&hex!("1180"), &c), Ok(None));
    }

    #[test]
    fn limit_is_checked_on_the_header() {
        let c = Config::DEFAULT.with_limits(crate::Limits {
            max_packet_len: 100,
            max_depth: 4,
        });
        assert_eq!(
            Header::parse(&hex!("118100"), &c),
            Err(DecodeError::TooLong {
                declared: 128,
                limit: 100
            })
        );
    }

    #[test]
    fn draft02_tags() {
        let c = Config::new(Dialect::Draft02);
        let mut out = [0; MAX_HEADER_LEN + 1];
        let n = Header::write(Tag::primitive(300), 64, Dialect::Draft02, &mut out).unwrap();
        assert_eq!(&out[..n], hex!("822c8040"));
        let h = Header::parse(&out[..n], &c).unwrap().unwrap();
        assert_eq!((h.tag.id(), h.len, h.head_len), (300, 64, 4));
        assert_eq!(
            Header::encoded_len(Tag::primitive(300), 64, Dialect::Draft02),
            4
        );
    }

    #[test]
    fn writers_agree_with_header_write_and_read_back() {
        let tags = [
            Tag::primitive(0x11),
            Tag::node(0x3f),
            Tag::array(0x10),
            Tag::primitive(0x40),
            Tag::primitive(300),
        ];
        let lens = [
            0,
            1,
            63,
            64,
            127,
            128,
            8191,
            8192,
            1 << 20,
            i32::MAX as usize,
        ];
        let dialects = [Dialect::Golang, Dialect::NVarInt, Dialect::Draft02];
        for dialect in dialects {
            // Any length reads back: the limit is the decoder's policy, not the layout's.
            let config = Config {
                dialect,
                limits: crate::Limits {
                    max_packet_len: u64::MAX,
                    ..crate::Limits::DEFAULT
                },
            };
            for tag in tags {
                for len in lens.into_iter().chain([i32::MAX as usize + 1]) {
                    let mut head = [0; MAX_HEADER_LEN + 1];
                    let written = Header::write(tag, len, dialect, &mut head);
                    let mut out = alloc::vec::Vec::new();
                    let put = put_header(tag, len, dialect, &mut out);
                    let at = (tag, len, dialect);
                    assert_eq!(put, written.map(|_| ()), "{at:?}");
                    assert_eq!(Header::checked_len(tag, len, dialect), written, "{at:?}");
                    let Ok(n) = written else {
                        assert!(out.is_empty(), "nothing written on error: {at:?}");
                        continue;
                    };
                    assert_eq!(out, head[..n], "{at:?}");
                    assert_eq!(n, Header::encoded_len(tag, len, dialect), "{at:?}");
                    let read = Header::parse(&out, &config).unwrap().unwrap();
                    assert_eq!((read.len, read.head_len), (len as u64, n), "{at:?}");
                }
            }
        }
    }

    #[test]
    fn write_refuses_wide_tags_in_one_byte_dialects() {
        let mut out = [0; MAX_HEADER_LEN + 1];
        let err = Header::write(Tag::primitive(0x40), 1, Dialect::Golang, &mut out).unwrap_err();
        assert_eq!(
            err,
            EncodeError::InvalidTag {
                tag: 0x40,
                max: 0x3f
            }
        );
    }

    #[test]
    fn length_fast_paths_agree_with_the_general_reader() {
        for b in 0..=255u8 {
            assert_eq!(length_read(&[b]), length_read_slow(&[b]), "{b:02x}");
            for c in 0..=255u8 {
                for tail in [&[][..], &[0x01], &[0x81, 0x01]] {
                    let buf = [&[b, c][..], tail].concat();
                    assert_eq!(length_read(&buf), length_read_slow(&buf), "{buf:02x?}");
                }
            }
        }
    }

    #[test]
    fn one_comparison_rules_agree_with_the_flag_rules() {
        for b in 0..=255u8 {
            for key in (0..=300).chain([u32::MAX - 0x80, u32::MAX]) {
                assert_eq!(
                    byte_is_node_key(b, key),
                    byte_key(b) == key && byte_is_node(b),
                    "{b:02x} {key}"
                );
            }
            for l in 0..=255u8 {
                let node_or_invalid = byte_is_node(b) || byte_is_invalid(b);
                assert_eq!(
                    StopNodes.stops_at(b, l),
                    node_or_invalid || !is_one_group(l),
                    "{b:02x} {l:02x}"
                );
                assert_eq!(StopNodes.stops(b), node_or_invalid);
            }
        }
    }

    #[test]
    fn keyed_at_is_short_at_of_that_key() {
        for t in 0..=255u8 {
            for l in 0..=255u8 {
                for tail in [&[][..], &[0x01], &[0x81]] {
                    let buf = [&[t, l][..], tail].concat();
                    for key in [0, 1, 0x11, 0x3f, 0x40] {
                        for limit in [63, 200, 1 << 20] {
                            let short = match short_at::<false>(&buf, 0, limit) {
                                Short::Head(h) => Some((h.tag, h.start, h.len, h.head_len)),
                                _ => None,
                            };
                            let get =
                                |h: Option<Head>| h.map(|h| (h.tag, h.start, h.len, h.head_len));
                            let any = short.filter(|h| byte_key(h.0) == key);
                            assert_eq!(get(keyed_at::<false, true>(&buf, 0, key, limit)), any);
                            let node = any.filter(|h| byte_is_node(h.0));
                            assert_eq!(get(keyed_at::<true, true>(&buf, 0, key, limit)), node);
                            let one = any.filter(|h| h.3 == 2);
                            assert_eq!(get(keyed_at::<false, false>(&buf, 0, key, limit)), one);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lengths() {
        assert_eq!(length_read(&hex!("3f")), Ok(Some((63, 1))));
        assert_eq!(length_read(&hex!("8040")), Ok(Some((64, 2))));
        assert_eq!(length_read(&hex!("80")), Ok(None));
        assert_eq!(length_read(&[]), Ok(None));
        assert_eq!(
            length_read(&hex!("7f")),
            Err(DecodeError::NegativeLength { declared: -1 })
        );
        assert_eq!(
            length_read(&hex!("40")),
            Err(DecodeError::NegativeLength { declared: -64 })
        );
        assert_eq!(length_read(&hex!("8001")), Ok(Some((1, 2))));
        assert_eq!(
            length_read(&hex!("87ffffff7f")),
            Ok(Some((i32::MAX as u64, 5)))
        );
        assert_eq!(
            length_read(&hex!("8880808000")).unwrap_err().kind(),
            "varint_overflow"
        );
        assert_eq!(
            length_read(&hex!("808080808001")).unwrap_err().kind(),
            "varint_overflow"
        );
    }
}
