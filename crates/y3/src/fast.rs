//! The complete-buffer fast path for one key path: the common case of a whole packet in one
//! slice, one-byte tags and one- or two-byte lengths, walked in a single tight loop.
//!
//! It never decides anything the [`Observer`](crate::Observer) would decide differently:
//! every check the observer makes on these headers is made here too (tag byte, length
//! limit, depth limit, every value inside its node and inside the input), and anything
//! else — an error, a longer length, a value that runs past the input, the `draft02`
//! dialect — makes it give up ([`Fast::Bail`]) before it has changed any state, so that the
//! general machine walks the same bytes from the same place and reports exactly what it
//! always reports. What it answers is therefore either the observer's answer or nothing;
//! `crates/y3-harness/tests/fast_path.rs`, the split tests and the fuzz harness check that
//! on every input.
//!
//! Why a separate loop: the observer pays a fixed cost per call (state dispatch, a header
//! parser for every dialect, a level per entered node) that dominates small messages (a
//! three-field packet walks in ~3 ns, the machine took ~25 ns). Here the state is a few
//! registers: the wanted key, the current node's end and the stack of enclosing ends.

use crate::path::MAX_PATH_DEPTH;
use crate::skip;
use crate::tag::{byte_is_node, byte_key, keyed_at, short_at, Short};
use crate::walker::{self, Check, Head, Nothing, Step, Trust, Validate, Want};
use crate::{Config, Tag};

/// What the fast walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fast {
    /// The path's value: its tag, where its value starts in the input, its length, its
    /// header length and its depth (1 for a top-level packet). [`walk_loop`]'s
    /// `ends[..depth - 1]` holds the input offsets where the enclosing nodes end,
    /// outermost first ([`first_child`]'s `outer_end` the one end of its two levels).
    Found {
        tag: Tag,
        start: usize,
        len: usize,
        head_len: usize,
        depth: usize,
        /// Top-level packets begun, the one holding the value included.
        packets: u64,
    },
    /// The input is a run of complete top-level packets without the path.
    Done {
        /// Top-level packets walked.
        packets: u64,
    },
    /// Leave it to the observer: something here is not the common case (or is an error).
    Bail,
}

/// Walks `input` (a stream position between top-level packets) for key path `ids`
/// (1..=[`MAX_PATH_DEPTH`] keys) in a one-byte-tag dialect, for a caller that needs no
/// more than the answer (`get`, a filter's parent node): [`first_child`] for two keys,
/// then [`walk_loop`], whose stack of ends is set up only if it runs.
///
/// Only call it where `config.dialect.has_node_flag()`.
#[inline(always)]
pub(crate) fn walk(ids: &[u32], config: &Config, input: &[u8]) -> Fast {
    let limits = &config.limits;
    if limits.max_packet_len >= 63 && ids.len() == 2 {
        let (limit, max_depth) = (limits.max_packet_len, limits.max_depth as usize);
        if let Some(found) = first_child(ids[0], ids[1], limit, max_depth, input, &mut 0) {
            return found;
        }
    }
    walk_loop(ids, config, input, &mut [0; MAX_PATH_DEPTH])
}

/// Validates `input` (a run of whole top-level packets, or one node's children under
/// `depth_left` more levels) by the one walker ([`Nothing`] wanted, [`Validate`]): every
/// header checked and every node entered as the observer's validator would, answering
/// [`Fast::Done`] or [`Fast::Bail`] (anything else, an error included: the observer's).
///
/// Only call it where `config.dialect.has_node_flag()`.
#[inline(always)]
pub(crate) fn validate(config: &Config, input: &[u8], depth_left: usize) -> Fast {
    debug_assert!(config.dialect.has_node_flag());
    let limits = &config.limits;
    walker::walk::<_, Validate, VALIDATE_DEPTH>(
        input,
        0,
        input.len(),
        limits.max_packet_len,
        (limits.max_depth as usize).min(depth_left),
        &mut Nothing,
        &mut [0; VALIDATE_DEPTH],
    )
}

/// Whether the value of a top-level packet with tag `tag`, whose header was read already,
/// is valid below it by [`validate`] (its children under one level less): true answers;
/// false (nothing decided) leaves it to the observer's
/// [`validate_value`](crate::Observer::validate_value), which reports any error. A primitive,
/// and every `draft02` value, is the observer's (nothing below its header to check).
pub(crate) fn validate_value(config: &Config, tag: Tag, value: &[u8]) -> bool {
    let max_depth = config.limits.max_depth as usize;
    tag.is_node()
        && config.dialect.has_node_flag()
        && max_depth > 1
        && matches!(validate(config, value, max_depth - 1), Fast::Done { .. })
}

/// Nesting [`validate`] follows before it leaves the rest to the observer.
const VALIDATE_DEPTH: usize = 16;

/// The walk's loop, one header at a time: what [`walk`] runs where [`first_child`] does
/// not answer, and what the observer runs (it tries `first_child` itself, and keeps the
/// ends of the nodes entered in `ends`).
///
/// The one walker's loop written out for one path (the [`walker`] module's `walk` with a
/// `One` want compiled to the same checks but one instruction more on `get` and, by the
/// register allocation of the observer's chunk loop beside it, on `stream7` C16:
/// `scripts/icount` 109/229/406/706 and 553/832/1337/2120 against 108/228/404/704 and
/// 553/831/1345/2121 here), so it stays the fastest instantiation, by hand.
///
/// Only call it where `config.dialect.has_node_flag()`.
#[inline(always)]
pub(crate) fn walk_loop(
    ids: &[u32],
    config: &Config,
    input: &[u8],
    ends: &mut [usize; MAX_PATH_DEPTH],
) -> Fast {
    debug_assert!(!ids.is_empty() && ids.len() <= MAX_PATH_DEPTH);
    debug_assert!(config.dialect.has_node_flag());
    let limit = config.limits.max_packet_len;
    let max_depth = config.limits.max_depth as usize;
    let last = ids.len() - 1;
    let mut depth = 0usize;
    let mut want = ids[0];
    // The end of the current node's value (the input's end at the top).
    let mut end = input.len();
    let mut off = 0usize;
    let mut packets = 0u64;
    // The skip run accepts one-byte lengths without comparing them with the limit.
    let run = limit >= 63;
    loop {
        if depth > 0 && run {
            // Inside a node: the children simply skipped, at once (see `skip.rs`); the
            // header it stops at is looked at below like any other.
            off = skip::run(&input[..end], off, want);
        }
        if off == end {
            if depth == 0 {
                return Fast::Done { packets };
            }
            // The node ended without the path's value: go on with its next sibling, as the
            // observer does (a later sibling with the same key may hold it).
            depth -= 1;
            want = ids[depth];
            end = if depth == 0 {
                input.len()
            } else {
                ends[depth - 1]
            };
            continue;
        }
        // A short header inside the current node (else the observer reports
        // `truncated_header`, or asks for more input at the top): a set sign bit or a longer
        // field, the array flag without the node flag (`invalid_tag`), a length over the
        // limit (`too_long`), a value past its node (`child_overflow`, or more input
        // needed) are the observer's.
        let Short::Head(Head {
            tag,
            start,
            len,
            head_len,
        }) = short_at::<false>(&input[..end], off, limit)
        else {
            return Fast::Bail;
        };
        let next = start + len;
        if next > end {
            return Fast::Bail;
        }
        if depth == 0 {
            packets += 1;
        }
        if byte_key(tag) == want {
            if depth == last {
                return Fast::Found {
                    tag: Tag::from_byte(tag),
                    start,
                    len,
                    head_len,
                    depth: depth + 1,
                    packets,
                };
            }
            if byte_is_node(tag) {
                // The observer refuses to enter a node at the depth limit.
                if depth + 1 >= max_depth {
                    return Fast::Bail;
                }
                ends[depth] = next;
                depth += 1;
                want = ids[depth];
                end = next;
                off = start;
                continue;
            }
        }
        off = next;
    }
}

/// The usual two-key lookup (a child of the first top-level packet, the small-message case)
/// in straight-line code: the first packet is node `outer`, and a child `inner` with a
/// one-group length lies in it, both headers read as [`walk`]'s loop reads them
/// (`tag::keyed_at`: `short_at` for one key). It makes the checks that loop makes on the
/// same headers and answers what it would (giving up, [`Fast::Bail`], where the loop gives
/// up at that first header); `None` (nothing decided) sends every other input to the loop,
/// which starts over. Only call it where `limit >= 63`. On an answer,
/// `outer_end` is where the first packet ends (the `ends[0]` of [`walk`]).
#[inline(always)]
pub(crate) fn first_child(
    outer: u32,
    inner: u32,
    limit: u64,
    max_depth: usize,
    input: &[u8],
    outer_end: &mut usize,
) -> Option<Fast> {
    // The first packet: node `outer`, its value in the input; entering it must leave room
    // in depth.
    let node = keyed_at::<true, true>(input, 0, outer, limit)?;
    let end = node.next();
    if max_depth <= 1 || end > input.len() {
        // The loop would give up at this header too (no room in depth, or a packet that
        // runs past the input: chunked input, the observer's stream loop).
        return Some(Fast::Bail);
    }
    let off = skip::run(&input[..end], node.start, inner);
    // The child the run stopped at: key `inner`, a one-group length (the run stops at a
    // longer one: the loop's), its value in the node.
    let child = keyed_at::<false, false>(&input[..end], off, inner, limit)?;
    if child.next() > end {
        return None;
    }
    *outer_end = end;
    Some(Fast::Found {
        tag: Tag::from_byte(child.tag),
        start: child.start,
        len: child.len,
        head_len: child.head_len,
        depth: 2,
        packets: 1,
    })
}

/// A value [`scan`] found: tag byte, header length, value offset in the input, value length
/// (12 bytes: the scan's table is zeroed per call).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scanned {
    pub tag: u8,
    pub head_len: u8,
    pub start: u32,
    pub len: u32,
}

/// Scans the children in `input[off..end]` (one node's value, or the top level of a
/// complete buffer) once, for the first child of each key in `keys` (all below 64):
/// `found[i]` gets key `keys[i]`'s first child. Returns the bit set of the keys found
/// (bit `i` for `keys[i]`), stopping as soon as every key is found, or `None` (give up,
/// nothing decided) at any header [`walk`] would leave to the observer: a longer length,
/// the array flag without the node flag, a length over the limit, a value past its node.
/// It never enters a node: the one walker for a set of keys ([`Set`]) over one level.
#[inline]
pub(crate) fn scan(
    input: &[u8],
    off: usize,
    end: usize,
    keys: &[u8],
    limit: u64,
    found: &mut [Scanned],
) -> Option<u64> {
    if input.len() > u32::MAX as usize {
        return None;
    }
    debug_assert!(keys.len() <= 64 && keys.iter().all(|&k| k < 64));
    let mut want = 0u64;
    for &k in keys {
        want |= 1 << k;
    }
    let all = if keys.len() == 64 {
        u64::MAX
    } else {
        (1u64 << keys.len()) - 1
    };
    let region = input.get(..end)?;
    let mut set = Set {
        keys,
        want,
        all,
        got: 0,
        found,
    };
    // One level: nothing is entered, so no depth is needed.
    walker::walk::<_, Trust, 0>(region, off, end, limit, 0, &mut set, &mut [])
}

/// A set of sibling keys: the first child of each, recorded in `found`.
struct Set<'k, 'f> {
    keys: &'k [u8],
    /// The keys still wanted (bit `k` for key `k`).
    want: u64,
    /// Every index of `keys` (bit `i` for `keys[i]`).
    all: u64,
    /// The indexes found.
    got: u64,
    found: &'f mut [Scanned],
}

impl Want for Set<'_, '_> {
    type Out = Option<u64>;

    #[inline(always)]
    fn run<C: Check>(&self, node: &[u8], s: usize, _depth: usize, _heads: &mut u64) -> usize {
        debug_assert!(!C::VALIDATE);
        skip::run_keys(node, s, self.want)
    }

    #[inline(always)]
    fn at(&mut self, h: &Head, _depth: usize, _packets: u64) -> Step<Option<u64>> {
        let key = byte_key(h.tag) as u8;
        if self.want >> key & 1 != 0 {
            // A wanted key: the first time only (`want` forgets it).
            self.want &= !(1 << key);
            if let Some(i) = self.keys.iter().position(|&k| k == key) {
                // Offsets fit: the input is under 4 GiB (checked by `scan`).
                self.found[i] = Scanned {
                    tag: h.tag,
                    head_len: h.head_len as u8,
                    start: h.start as u32,
                    len: h.len as u32,
                };
                self.got |= 1 << i;
                if self.got == self.all {
                    return Step::Return(Some(self.got));
                }
            }
        }
        Step::Skip
    }

    #[inline(always)]
    fn done(&mut self, _packets: u64) -> Option<u64> {
        Some(self.got)
    }

    #[inline(always)]
    fn bail() -> Option<u64> {
        None
    }
}
