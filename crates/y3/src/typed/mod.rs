//! Typed values and structs: `#[derive(y3::Message)]`, [`marshal`] and [`unmarshal`],
//! byte-exact with `NewCodec(key).Marshal(v)` / `ToObject` of `y3-codec-golang` v1.7.3.
//!
//! [`FieldValue`] says how one Rust type sits on the wire; [`Message`] is a struct whose
//! fields are packets in a node (prost's `Message` is the model). The derive writes both for
//! a struct with named fields; by hand, `Message` is three methods (see its docs).
//!
//! ```text
//! marshal(0x10, &NoiseData { noise: 40.0, time: 1600000000000, from: "127.0.0.1".into() })
//!
//! 81 19                              root: node flag | 0x01, 25 bytes
//!    90 17                           the value under key 0x10: a node, 23 bytes
//!       11 02 42 20                  field 0x11 noise: f32 40.0 (VarFloat, zeros dropped)
//!       12 06 ae c8 bb ba 80 00      field 0x12 time:  i64 1600000000000 (PVarInt)
//!       13 09 31 32 37 2e 30 2e ...  field 0x13 from:  "127.0.0.1"
//! ```
//!
//! How each type is written, with `k` the field's (or the marshal key's) tag:
//!
//! ```text
//! Rust type                      struct field k          array element        marshal(k, v)
//! i32 i64 u32 u64 f32 f64 bool   k len value             00 len value         k len value
//! String Vec<u8> Bytes           k len bytes,            00 len bytes         k len bytes,
//!                                omitted when empty      (kept when empty)    omitted when empty
//! Option<T>                      as T; None omitted      (not an element)     as T; None omitted
//! Box<T>                         as T                    as T                 as T
//! message (derived)              80|k len fields         80 len fields        80|k len fields
//! Vec<T>, [T; N] (T: Element)    c0|k len elements       c0 len elements      c0|k len elements;
//!                                (empty: c0|k 00)                             80|k when T is
//!                                                                             a message
//! ```
//!
//! - Numbers and bools are always written, zero as the one byte `00`; empty strings and
//!   byte strings are left out of structs (the reference skips zero-length primitives), but
//!   not out of arrays. An omitted field decodes as its `Default`.
//! - Integers and floats use the dialect's value encodings ([`crate::scalar`]); unsigned
//!   integers are written as the signed integer with the same bits, as the reference does.
//! - A top-level `Vec` of messages is a *plain* node `80|k` in the reference, while the same
//!   `Vec` as a struct field is an array node `c0|k`; decoding accepts either.
//! - [`marshal`] wraps the packet in the root node `81` and refuses the keys the reference
//!   panics on: `0x00..=0x0f` ([`EncodeError::ReservedTag`](crate::EncodeError::ReservedTag)) and `0x40..`
//!   ([`EncodeError::InvalidTag`](crate::EncodeError::InvalidTag)). A bare `[T; N]` at the top level, which the reference
//!   panics on, is written like a `Vec`.
//! - Derived field tags are `0x00..=0x3f`, checked at compile time, so a derived message
//!   encodes in every dialect.
//! - A value that a struct would omit (an empty string, `None`) is omitted under the root
//!   too: `marshal(0x10, &String::new())` is `81 00`, and [`unmarshal`] gives `Ok(None)` back.
//!   No reference vector covers this corner.
//!
//! See `spec/wire-format.md` and `testdata/vectors/y3-codec-golang-v1.7.3.json`
//! (`marshal_*`).
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "derive")] {
//! #[derive(Debug, Default, PartialEq, y3::Message)]
//! struct NoiseData {
//!     #[y3(tag = 0x11)]
//!     noise: f32,
//!     #[y3(tag = 0x12)]
//!     time: i64,
//!     #[y3(tag = 0x13)]
//!     from: String,
//!     #[y3(skip)]
//!     seen: bool,
//! }
//!
//! let from = "127.0.0.1".into();
//! let data = NoiseData { noise: 40.0, time: 1600000000000, from, seen: true };
//! let bytes = y3::marshal(0x10, &data)?;
//! let want = "8119 9017 11024220 1206aec8bbba8000 1309 3132372e302e302e31";
//! assert_eq!(bytes, hex::decode(want.replace(' ', ""))?);
//! let back: NoiseData = y3::unmarshal(&bytes, 0x10)?.expect("key 0x10");
//! assert_eq!(back, NoiseData { seen: false, ..data });
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The module in files: `traits.rs` ([`Shape`], [`FieldValue`], [`Element`], [`Message`]),
//! `wire.rs` (headers and fields: [`field_len`], [`encode_field`], [`decode_field`]),
//! `marshal.rs` (the root-node API: [`marshal`], [`unmarshal`], [`to_packet`] and friends)
//! and `impls.rs` (the [`FieldValue`] impls for numbers, strings, bytes, options, boxes,
//! vectors and arrays).

mod impls;
mod marshal;
mod traits;
mod wire;

pub use marshal::{
    from_packet, marshal, marshal_into, marshal_with, marshaled_len, to_packet, unmarshal,
    unmarshal_with,
};
pub use traits::{Element, FieldValue, Message, Shape};
pub use wire::{decode_field, encode_field, field_len};

use crate::Tag;

/// The root node [`marshal`] wraps every value in: key `0x01` with the node flag, `81`.
pub const ROOT: Tag = Tag::node(0x01);

/// Keys below this are reserved by the reference `Marshal` (`0x00`, and `0x01..=0x0f` for
/// signals); [`marshal`] refuses them with [`EncodeError::ReservedTag`](crate::EncodeError::ReservedTag).
pub const FIRST_USER_KEY: u32 = 0x10;

/// The derive's compile errors, checked as `compile_fail` doctests (each compiles once the
/// marked problem is fixed).
///
/// A field without a tag:
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct NoTag {
///     a: i32,
/// }
/// ```
///
/// Two fields with one tag (hex and decimal spellings are the same key):
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Twice {
///     #[y3(tag = 0x11)]
///     a: i32,
///     #[y3(tag = 17)]
///     b: i32,
/// }
/// ```
///
/// A tag wider than six bits:
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Wide {
///     #[y3(tag = 0x40)]
///     a: i32,
/// }
/// ```
///
/// A tag and `skip` together, a string tag, an unknown option:
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Both {
///     #[y3(tag = 0x11, skip)]
///     a: i32,
/// }
/// ```
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Quoted {
///     #[y3(tag = "0x11")]
///     a: i32,
/// }
/// ```
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Unknown {
///     #[y3(tag = 0x11, rename = "b")]
///     a: i32,
/// }
/// ```
///
/// Enums, unions, tuple structs:
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// enum Kind {
///     #[default]
///     A,
/// }
/// ```
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Pair(i32, i32);
/// ```
///
/// A field type that is not a value (`u8` alone is not one, so that `Vec<u8>` is bytes):
///
/// ```compile_fail
/// #[derive(Default, y3_derive::Message)]
/// struct Byte {
///     #[y3(tag = 0x11)]
///     a: u8,
/// }
/// ```
///
/// The same shapes, fixed, compile:
///
/// ```
/// #[derive(Default, y3_derive::Message)]
/// struct Fine {
///     #[y3(tag = 0x11)]
///     a: i32,
///     #[y3(tag = 0x3f)]
///     b: Vec<u8>,
///     #[y3(skip)]
///     c: u8,
/// }
/// ```
#[cfg(doctest)]
pub struct DeriveCompileErrors;

/// Re-exports for code generated by `#[derive(y3::Message)]`; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use bytes::BufMut;
}

#[cfg(test)]
mod tests;
