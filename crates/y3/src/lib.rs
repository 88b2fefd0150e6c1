//! The Y3 codec: YoMo's tag-length-value wire format, sans-IO.
//!
//! This crate contains no networking code, no async runtime and no clock. It turns bytes
//! into packet views and values into bytes; the transport crates drive it.
//!
//! - [`Packet`]: a zero-copy view of one packet in a complete buffer, with typed accessors.
//! - [`Observer`]: a streaming state machine that pulls subscribed keys (or key paths) out of
//!   packets arriving in chunks of any size, skipping everything else without copying it.
//!   One-shot decoding is the same machine fed everything at once.
//! - [`Item`]: an owned packet tree whose [`encoded_len`](Item::encoded_len) is exact, written
//!   into any [`bytes::BufMut`].
//! - [`Filter`]: a content filter over key paths (`0x10/0x11:f32 > 60`), parsed once and
//!   evaluated with one observer walk per payload (`spec/filters.md`).
//! - [`DecodeError`] / [`EncodeError`]: typed errors with stable snake_case
//!   [`kind`](DecodeError::kind)s shared with the Go and Python implementations.
//!
//! Three [`Dialect`]s are supported: `golang` (byte-exact with
//! `github.com/yomorun/y3-codec-golang` v1.7.3, the default), `nvarint`
//! (`github.com/yomorun/y3` v1.0.5) and the opt-in `draft02` varint tags.
//! The format is specified in `spec/wire-format.md`.
//!
//! ```text
//! +-----------+----------------+---------------------+
//! | tag (1 B) | length PVarInt | value (length bytes)|
//! +-----------+----------------+---------------------+
//!   0x80 node flag, 0x40 array flag, low 6 bits: key
//! ```
//!
//! # Examples
//!
//! ```
//! // NoiseData{Noise: 40.0 (0x11), Time: 1600000000000 (0x12), From: "127.0.0.1" (0x13)} under 0x10.
//! let buf = hex_literal::hex!("9017110242201206aec8bbba800013093132372e302e302e31");
//! let noise = y3::get(&buf, &[0x10, 0x11])?.expect("key present");
//! assert_eq!(noise.f32()?, 40.0);
//! # Ok::<(), y3::DecodeError>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]
// No unsafe code, except in `skip.rs` (the AVX-512 skip run, behind run-time CPU detection,
// tested and fuzzed against its scalar reference), which allows it for itself.
#![deny(unsafe_code)]

extern crate alloc;

mod dialect;
pub mod encode;
mod error;
mod fast;
pub mod filter;
pub mod items;
mod observer;
mod packet;
mod path;
pub mod scalar;
mod skip;
pub mod tag;
pub mod typed;
pub mod varint;
mod walker;

/// The skip runs' scalar and vector forms, for the fuzz harness (`crates/y3-harness`) to
/// hold one against the other. Test-only; not a public API.
#[cfg(feature = "__harness")]
#[doc(hidden)]
pub mod __skip {
    pub use crate::skip::{
        run, run_keys, run_scalar, run_scalar_keys, run_vector, run_vector_keys,
    };
}

pub use dialect::{Config, Dialect, Limits};
pub use encode::{Item, Value};
pub use error::{DecodeError, EncodeError};
pub use filter::{Filter, FilterError, FilterLimits, Verdict};
pub use observer::{Fed, Observed, Observer};
pub use packet::{Children, Packet};
pub use path::{parse_path, PathError, MAX_PATH_DEPTH, MAX_SUBSCRIPTIONS};
pub use tag::Tag;
pub use typed::{marshal, unmarshal, FieldValue, Message};
#[cfg(feature = "derive")]
pub use y3_derive::Message;

/// Reads exactly one packet from `buf` (`golang` dialect) and checks the whole tree.
///
/// See [`decode_with`].
///
/// # Errors
/// As [`decode_with`].
pub fn decode(buf: &[u8]) -> Result<Packet<'_>, DecodeError> {
    decode_with(buf, &Config::DEFAULT)
}

/// Reads exactly one packet from `buf` and validates every header below it (lengths
/// within their nodes, depth within the limit) by walking its children once with a
/// validating [`Observer`], the same state machine that serves streaming input (the
/// packet's own header is read once, by [`Packet::parse_with`]).
///
/// # Errors
/// [`DecodeError::UnexpectedEnd`] when `buf` is short, [`DecodeError::TrailingBytes`]
/// when bytes follow the packet, and any header error met in the tree.
///
/// # Examples
///
/// ```
/// let packet = y3::decode(&[0x11, 0x02, 0x81, 0x00])?;
/// assert_eq!(packet.u32()?, 128);
/// assert_eq!(y3::decode(&[0x11, 0x01, 0x05, 0xff]).unwrap_err().kind(), "trailing_bytes");
/// # Ok::<(), y3::DecodeError>(())
/// ```
pub fn decode_with<'a>(buf: &'a [u8], config: &Config) -> Result<Packet<'a>, DecodeError> {
    let (packet, rest) = Packet::parse_with(buf, config)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes {
            count: rest.len() as u64,
        });
    }
    if !fast::validate_value(config, packet.tag(), packet.value()) {
        Observer::validate_value(*config, packet.tag(), packet.value())?;
    }
    Ok(packet)
}

/// Validates a stream of complete top-level packets: every header, every node length, the
/// depth limit.
///
/// # Errors
/// Any [`DecodeError`] of the walk; [`DecodeError::UnexpectedEnd`] if `buf` stops inside a
/// packet.
pub fn validate_with(buf: &[u8], config: &Config) -> Result<(), DecodeError> {
    // The one walker first: it answers a buffer of whole, valid packets; anything else (an
    // error included) is the machine's to report, from the start.
    if config.dialect.has_node_flag() {
        if let fast::Fast::Done { .. } = fast::validate(config, buf, usize::MAX) {
            return Ok(());
        }
    }
    validate_general(buf, config)
}

/// [`validate_with`] by the general machine, out of line (as [`get`]'s is): what the one
/// walker leaves, an error included, reported from the start. Inlined, its registers and
/// frame cost every call (`scripts/icount` validatewith C03 183 against 182 here).
#[cold]
#[inline(never)]
fn validate_general(buf: &[u8], config: &Config) -> Result<(), DecodeError> {
    let mut observer = Observer::validator(*config);
    observer.feed(buf)?;
    observer.finish()
}

/// The first value at key path `path` in `buf` (`golang` dialect), borrowed from `buf`.
///
/// `path[0]` is the key of a top-level packet, `path[1]` a child of it, and so on. `buf`
/// may hold several top-level packets; the first match wins. Everything before the match
/// is walked header by header and skipped; nothing after it is read.
///
/// # Errors
/// Header errors met on the way; [`DecodeError::UnexpectedEnd`] when `buf` ends inside a
/// packet before a match. An empty `path` matches nothing; one longer than
/// [`MAX_PATH_DEPTH`] is reported as [`DecodeError::TooDeep`].
// Inlined (with `get_with`'s fast path; the general machine stays out of line): the call
// and its frame cost a small message as much as its walk.
#[inline]
pub fn get<'a>(buf: &'a [u8], path: &[u32]) -> Result<Option<Packet<'a>>, DecodeError> {
    get_with(buf, path, &Config::DEFAULT)
}

/// [`get`] with a dialect and limits.
///
/// # Errors
/// As [`get`].
#[inline]
pub fn get_with<'a>(
    buf: &'a [u8],
    path: &[u32],
    config: &Config,
) -> Result<Option<Packet<'a>>, DecodeError> {
    if path.is_empty() {
        return Ok(None);
    }
    if path.len() > MAX_PATH_DEPTH {
        return Err(DecodeError::TooDeep {
            limit: MAX_PATH_DEPTH as u32,
        });
    }
    if config.dialect.has_node_flag() {
        match fast::walk(path, config, buf) {
            fast::Fast::Found {
                tag,
                start,
                len,
                head_len,
                depth,
                ..
            } => {
                let value = &buf[start..start + len];
                return Ok(Some(Packet::from_parts(
                    tag,
                    value,
                    head_len,
                    depth as u32,
                    *config,
                )));
            }
            fast::Fast::Done { .. } => return Ok(None),
            fast::Fast::Bail => {}
        }
    }
    get_general(buf, path, config)
}

/// [`get_with`] by the general machine: one path, built in place (no allocation for paths
/// of up to five keys). Out of line, so that the fast path's frame stays small (the
/// observer is a large value on the stack).
#[inline(never)]
fn get_general<'a>(
    buf: &'a [u8],
    path: &[u32],
    config: &Config,
) -> Result<Option<Packet<'a>>, DecodeError> {
    let mut observer = Observer::one(*config, path);
    let fed = observer.feed(buf)?;
    if let Some(found) = fed.observed {
        // Fed in one piece, the value is borrowed from `buf` and ends where consumption
        // stopped; rebuild the view with `buf`'s lifetime.
        let (end, tag, depth) = (fed.consumed, found.tag(), found.depth());
        let value = &buf[end - found.value().len()..end];
        let head_len = tag::Header::encoded_len(tag, value.len(), config.dialect);
        return Ok(Some(Packet::from_parts(
            tag, value, head_len, depth, *config,
        )));
    }
    observer.finish()?;
    Ok(None)
}
