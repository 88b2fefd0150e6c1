//! The one walker of complete buffers over the header grammar of `tag.rs`, specialised at
//! compile time: what it looks for is a [`Want`] (a set of sibling keys, or nothing), whether
//! it enters every node is a [`Check`] (trusting the nodes, or validating them). Each
//! instantiation compiles to one tight loop:
//!
//! ```text
//!   walk::<Set, Trust>         the sibling scan         (`fast::scan`: a content filter's keys)
//!   walk::<Nothing, Validate>  whole-buffer validation  (`fast::validate`: `validate_with`,
//!                                                         `decode_with`)
//!
//!   per header:   skip run (leaf: `skip.rs`) over what needs no decision
//!                 short header (`tag::short_header`), invalid tag, limit, inside its node
//!                 Want::at: skip or answer;  Check::VALIDATE: into every node (depth limit)
//!   per node end: back to the enclosing node (its end kept in `ends`)
//! ```
//!
//! One path (`get`, the observer's fast feed) is `fast::walk_loop`: this loop written out
//! for one path, kept by hand because the instantiation measured one instruction more (see
//! there). The observer's chunk loops (`observer/chunk.rs`, and `observer/stream.rs` for a
//! two-key path inside the node it leaves pending) walk over the same leaves: the skip run
//! (`skip::run_by`) and the header reading (`tag::short_at::<true>`, a chunk, where this
//! walk takes `short_at::<false>`, a whole buffer); its levels and the value in progress
//! are state that crosses chunk boundaries, kept in the observer.
//!
//! The walk never decides anything the [`Observer`](crate::Observer) would decide
//! differently: every check the observer makes on these headers is made here too (tag byte,
//! length limit, depth limit, every value inside its node and inside the input), and
//! anything else (an error, a longer length, a value past the input, the `draft02` dialect)
//! makes it give up ([`Want::bail`]) before its caller has changed any state, so that the
//! general machine walks the same bytes from the same place and reports exactly what it
//! always reports. `crates/y3-harness/tests/fast_path.rs`, the split tests and the fuzz
//! harness check that on every input.
//!
//! Only call it where the dialect marks nodes in the tag byte (`has_node_flag`).

use crate::skip;
use crate::tag::{byte_is_node, short_at, Short, StopKeys, StopNodes};

/// A short header the walk read, inside its node (the header decision's, `tag.rs`).
pub(crate) use crate::tag::Head;

/// What a [`Want`] decides at a header.
pub(crate) enum Step<O> {
    /// Go on with the next sibling (or, under [`Validate`], into a node's children).
    Skip,
    /// The walk's answer.
    Return(O),
}

/// Whether the walk enters the nodes no [`Want`] needs, checking every header in them.
pub(crate) trait Check {
    /// Enter every node.
    const VALIDATE: bool;
}

/// Enters only the nodes the [`Want`] needs; skips the others whole.
pub(crate) struct Trust;

impl Check for Trust {
    const VALIDATE: bool = false;
}

/// Enters every node, so that every header of the buffer is checked.
pub(crate) struct Validate;

impl Check for Validate {
    const VALIDATE: bool = true;
}

/// What a walk looks for: its skip run's stops, its decision at a header, its answers.
pub(crate) trait Want {
    /// The walk's answer.
    type Out;

    /// The skip run over `node` (the current node's children, up to its end) from `s` at
    /// nesting `depth` (0: the top level), counting the headers it steps over in `heads`;
    /// `C` says whether it must stop at nodes. Only called where the length limit is 63 or
    /// more (the run takes one-group lengths unchecked).
    fn run<C: Check>(&self, node: &[u8], s: usize, depth: usize, heads: &mut u64) -> usize;

    /// The decision at header `h` at nesting `depth`; `packets` top-level packets begun.
    fn at(&mut self, h: &Head, depth: usize, packets: u64) -> Step<Self::Out>;

    /// The top level ended after `packets` top-level packets.
    fn done(&mut self, packets: u64) -> Self::Out;

    /// Leave it to the general machine.
    fn bail() -> Self::Out;
}

/// Walks `input[off..top]` (a run of whole siblings: top-level packets, or one node's
/// children) for `want`, entering nodes as `want` and `C` decide up to `max_depth` levels
/// (and `N`, the size of `ends`), with the length limit `limit`. `ends[..depth]` holds the
/// ends of the nodes entered, outermost first (a caller that finds a value inside them reads
/// them there).
#[inline(always)]
pub(crate) fn walk<W: Want, C: Check, const N: usize>(
    input: &[u8],
    mut off: usize,
    top: usize,
    limit: u64,
    max_depth: usize,
    want: &mut W,
    ends: &mut [usize; N],
) -> W::Out {
    let mut depth = 0usize;
    // The end of the current node's value (`top` at the top).
    let mut end = top;
    let mut packets = 0u64;
    // The skip run accepts one-byte lengths without comparing them with the limit.
    let run = limit >= 63;
    loop {
        if run {
            // What needs no decision, at once (see `skip.rs`); the header it stops at is
            // looked at below like any other.
            let mut heads = 0;
            off = want.run::<C>(&input[..end], off, depth, &mut heads);
            if depth == 0 {
                packets += heads;
            }
        }
        if off == end {
            if depth == 0 {
                return want.done(packets);
            }
            // The node ended: go on with its next sibling, as the observer does (a later
            // sibling with the same key may hold a path's value).
            depth -= 1;
            end = if depth == 0 { top } else { ends[depth - 1] };
            continue;
        }
        // A short header inside the current node (else the observer reports
        // `truncated_header`, or asks for more input at the top): a set sign bit or a longer
        // field, the array flag without the node flag (`invalid_tag`), a length over the
        // limit (`too_long`), a value past its node (`child_overflow`, or more input
        // needed) are the observer's.
        let Short::Head(h) = short_at::<false>(&input[..end], off, limit) else {
            return W::bail();
        };
        let next = h.next();
        if next > end {
            return W::bail();
        }
        if depth == 0 {
            packets += 1;
        }
        if let Step::Return(out) = want.at(&h, depth, packets) {
            return out;
        }
        if C::VALIDATE && byte_is_node(h.tag) {
            // The observer refuses to enter a node at the depth limit.
            if depth >= N || depth + 1 >= max_depth {
                return W::bail();
            }
            ends[depth] = next;
            depth += 1;
            end = next;
            off = h.start;
            continue;
        }
        off = next;
    }
}

/// Nothing to look for: with [`Validate`], every header of the buffer checked, answering
/// the top-level packets walked ([`Fast::Done`](crate::fast::Fast::Done)) or
/// [`Fast::Bail`](crate::fast::Fast::Bail).
pub(crate) struct Nothing;

impl Want for Nothing {
    type Out = crate::fast::Fast;

    #[inline(always)]
    fn run<C: Check>(&self, node: &[u8], s: usize, _depth: usize, heads: &mut u64) -> usize {
        if C::VALIDATE {
            skip::run_once(node, s, node.len(), &StopNodes, heads)
        } else {
            skip::run_by::<_, false>(node, s, node.len(), &StopKeys(0), heads)
        }
    }

    #[inline(always)]
    fn at(&mut self, _h: &Head, _depth: usize, _packets: u64) -> Step<Self::Out> {
        Step::Skip
    }

    #[inline(always)]
    fn done(&mut self, packets: u64) -> Self::Out {
        crate::fast::Fast::Done { packets }
    }

    #[inline(always)]
    fn bail() -> Self::Out {
        crate::fast::Fast::Bail
    }
}
