//! The skip run of the complete-buffer fast path: inside a node, step over every child that
//! is simply skipped (a valid one-byte tag whose key is not the wanted one, a one-byte
//! length, a value inside the node) and stop at the first header that needs a decision.
//!
//! The walk is a chain of dependent loads: each next offset needs the length byte just
//! read (about 2 ns a packet). A complete buffer allows what a stream does not: on x86-64
//! with AVX-512 VBMI, [`run`] takes 64 bytes at a time, computes every byte's would-be
//! successor (`i + 2 + len`) in one vector add, and finds the real chain from the window's
//! first header by pointer jumping: six rounds of a byte permute double the reach of both
//! the successor table and the "first header needing a decision" table (2^6 = 64 steps, more
//! than a 64-byte window can hold). Measured on the report's C63-K32 (an AMD EPYC, 114
//! bytes of children before the key): 51 ns scalar, 15 ns here. Everywhere else, and for the
//! last 64 bytes of a node, [`run_scalar`] is used; it is also the reference the vector path
//! is tested against (`crates/y3-harness/tests/skip.rs`, the fuzz harness) on every input.
//!
//! This module is the only `unsafe` code in the crate: the intrinsics (`unsafe` because they
//! need the CPU feature, checked at run time before the call) and two unaligned 64-byte
//! loads that lie inside the slice (checked by the loop condition).
//!
//! No byte here is read as a tag or a length but by the header grammar (`tag.rs`): the
//! scalar run is one loop, [`run_by`] (or [`run_once`], its floor-shaped twin), over
//! `tag::skippable`, and the vector path loads 64
//! headers at once and decides them by `tag::lanes`, the same rules lane by lane; what is
//! left here is the chain through a window (and the loads).

use crate::tag::{skippable, StopKey, StopKeys, Stops};

/// The offset of the first header at or after `s` in `node` (the children of one node, up
/// to its end) that the run does not skip: a key equal to `want`, the array flag without
/// the node flag, a length of two or more bytes, a value running past `node`'s end; or
/// `node.len()` when it skips to the end. `want` above 63 matches no one-byte tag.
#[inline]
pub fn run(node: &[u8], s: usize, want: u32) -> usize {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if node.len() >= s + 65 && std::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: the features `run_avx512` is compiled for are present (checked just
            // above); its memory accesses are in bounds on any slice (see there).
            #[allow(unsafe_code)]
            return unsafe { avx512::run(node, s, want) };
        }
    }
    run_scalar(node, s, want)
}

/// [`run`], one header at a time.
#[inline(always)]
pub fn run_scalar(node: &[u8], s: usize, want: u32) -> usize {
    run_by::<_, false>(node, s, node.len(), &StopKey(want), &mut 0)
}

/// The one scalar skip run every walker uses (the observer's chunk loop and walk with the
/// level's [`StopSet`](crate::tag::StopSet), [`run_scalar`] with one key, [`run_scalar_keys`]
/// with a set of keys; specialised at compile time by `S`; [`run_once`] is the same run in
/// the floor's shape, for whole-packet validation): from `s`, steps over every
/// header in `bytes` whose tag byte `stops` passes, whose length is one group
/// ([`is_one_group`](crate::tag::is_one_group)) and whose value ends inside `node` (an offset from
/// `bytes`' start, `bytes.len()` or beyond it), counting them in `heads`. Returns the offset
/// of the first header it leaves, or the end of a value that runs past `bytes` but not past `node` (then
/// above `bytes.len()`: a chunk's end inside the node), or `s` where that is past `bytes`
/// already.
#[inline(always)]
pub(crate) fn run_by<S: Stops, const REST: bool>(
    bytes: &[u8],
    mut s: usize,
    node: usize,
    stops: &S,
    heads: &mut u64,
) -> usize {
    // The next header, read by the header grammar (`tag::skippable`), until one it stops at.
    // `loop` + `let else`, not `while let`: the same loop, one instruction fewer per run at
    // C32/C63 (`scripts/icount` validate 838/1396 against 837/1395 here).
    #[allow(clippy::while_let_loop)]
    loop {
        let Some(next) = skippable::<S, REST>(bytes, s, stops) else {
            break;
        };
        if next > bytes.len() {
            if next <= node {
                *heads += 1;
                s = next;
            }
            break;
        }
        s = next;
        *heads += 1;
    }
    s
}

/// [`run_by`] in the floor's shape, the same answer: nothing but the step in the loop, and
/// the one value that may end past the bytes (the last one stepped over) checked against
/// `node` once, after it. Whole-packet validation (`walker.rs`) takes it: `scripts/icount`
/// validatewith / decodewith C63 971 / 1033 -> 913 / 971. The other walkers keep
/// [`run_by`]: inlined into `Observer::feed`, this shape cost them more (stream7 C63 +21,
/// validate +4, oneshot -60, in the same run).
#[inline(always)]
pub(crate) fn run_once<S: Stops>(
    bytes: &[u8],
    mut s: usize,
    node: usize,
    stops: &S,
    heads: &mut u64,
) -> usize {
    let mut at = s;
    while let Some(next) = skippable::<S, false>(bytes, s, stops) {
        at = s;
        s = next;
        *heads += 1;
    }
    if s > node {
        // The last value runs past its node: its header is left (`child_overflow`), where
        // the run stepped at all.
        *heads -= u64::from(at != s);
        return at;
    }
    s
}

/// [`run`] for a set of keys (a content filter's sibling paths): stops at a key whose bit
/// is set in `keys` (bit `k` for key `k`) instead of at one key.
#[inline]
pub fn run_keys(node: &[u8], s: usize, keys: u64) -> usize {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if node.len() >= s + 65 && std::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: as in `run`.
            #[allow(unsafe_code)]
            return unsafe { avx512::run_keys(node, s, keys) };
        }
    }
    run_scalar_keys(node, s, keys)
}

/// [`run_keys`], one header at a time.
#[inline]
pub fn run_scalar_keys(node: &[u8], s: usize, keys: u64) -> usize {
    run_by::<_, false>(node, s, node.len(), &StopKeys(keys), &mut 0)
}

/// [`run_keys`]'s vector path, for the harness (`None` where the CPU lacks the features).
#[cfg(feature = "__harness")]
pub fn run_vector_keys(node: &[u8], s: usize, keys: u64) -> Option<usize> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if std::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: as in `run`.
            #[allow(unsafe_code)]
            return Some(unsafe { avx512::run_keys(node, s, keys) });
        }
    }
    let _ = (node, s, keys);
    None
}

/// The vector path, exposed to the harness so that it can be compared with
/// [`run_scalar`] directly (`None` where the CPU lacks the features).
#[cfg(feature = "__harness")]
pub fn run_vector(node: &[u8], s: usize, want: u32) -> Option<usize> {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        if std::is_x86_feature_detected!("avx512vbmi") {
            // SAFETY: as in `run`.
            #[allow(unsafe_code)]
            return Some(unsafe { avx512::run(node, s, want) });
        }
    }
    let _ = (node, s, want);
    None
}

#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[allow(unsafe_code)]
mod avx512 {
    use core::arch::x86_64::*;

    use crate::tag::{lanes, skippable, StopKey, StopKeys};

    /// Pointer jumping over 64-byte windows; the tail (under 65 bytes) is scalar.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW and VBMI. Memory: the two 64-byte loads start at
    /// `s` and `s + 1` and are made only while `s + 65 <= node.len()`; every other access is
    /// a checked slice index.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn run(node: &[u8], s: usize, want: u32) -> usize {
        // SAFETY: the same features; see `run_impl`.
        unsafe { run_impl::<false>(node, s, want, 0) }
    }

    /// [`run`] stopping at any key of the bit set `keys`.
    ///
    /// # Safety
    /// As [`run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn run_keys(node: &[u8], s: usize, keys: u64) -> usize {
        // SAFETY: the same features; see `run_impl`.
        unsafe { run_impl::<true>(node, s, 0, keys) }
    }

    /// The walk, stopping at key `want` (`KEYS` false) or at any key of `keys` (true).
    ///
    /// # Safety
    /// As [`run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn run_impl<const KEYS: bool>(node: &[u8], mut s: usize, want: u32, keys: u64) -> usize {
        let idx = _mm512_set_epi8(
            63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42,
            41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
            19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
        );
        let x40u = _mm512_set1_epi8(64);
        let none = _mm512_set1_epi8(-1);
        let table = lanes::key_table(keys);
        while s + 65 <= node.len() {
            // SAFETY: `s + 65 <= node.len()`: bytes `s..s + 64` and `s + 1..s + 65` are in
            // the slice.
            let p = unsafe { node.as_ptr().add(s) };
            let tags = unsafe { _mm512_loadu_si512(p.cast()) };
            let lens = unsafe { _mm512_loadu_si512(p.add(1).cast()) };
            // Lane i: the header that would start at s + i, decided by the header grammar
            // (`tag::lanes`): its successor, and whether it needs a decision.
            let succ = lanes::next(idx, lens);
            let key = if KEYS {
                lanes::key_in(tags, table)
            } else {
                lanes::key_is(tags, want)
            };
            let stop = key | lanes::stops(tags, lens);
            // j: the successor inside the window, or the header itself (the chain's last in
            // this window loops on itself). f: the first stop on the chain from lane i within
            // 2^k steps, 0xff for none.
            let inside = _mm512_cmplt_epu8_mask(succ, x40u);
            let mut j = _mm512_mask_blend_epi8(inside, idx, succ);
            let mut f = _mm512_mask_blend_epi8(stop, none, idx);
            for _ in 0..6 {
                let fj = _mm512_permutexvar_epi8(j, f);
                let unset = _mm512_cmpeq_epi8_mask(f, none);
                f = _mm512_mask_blend_epi8(unset, f, fj);
                j = _mm512_permutexvar_epi8(j, j);
            }
            let first = _mm_extract_epi8::<0>(_mm512_castsi512_si128(f)) as u8;
            if first != 0xff {
                return s + first as usize;
            }
            // No stop on the chain in this window: from its last header, one scalar step.
            // (The header there needs no decision: `skippable` steps over it.)
            let last = s + _mm_extract_epi8::<0>(_mm512_castsi512_si128(j)) as u8 as usize;
            let next = if KEYS {
                skippable::<_, false>(node, last, &StopKeys(keys))
            } else {
                skippable::<_, false>(node, last, &StopKey(want))
            };
            match next {
                Some(next) if next <= node.len() => s = next,
                _ => return last,
            }
        }
        if KEYS {
            super::run_scalar_keys(node, s, keys)
        } else {
            super::run_scalar(node, s, want)
        }
    }
}
