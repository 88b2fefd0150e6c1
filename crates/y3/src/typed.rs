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
//! - Integers and floats use the dialect's value encodings ([`crate::value`]); unsigned
//!   integers are written as the signed integer with the same bits, as the reference does.
//! - A top-level `Vec` of messages is a *plain* node `80|k` in the reference, while the same
//!   `Vec` as a struct field is an array node `c0|k`; decoding accepts either.
//! - [`marshal`] wraps the packet in the root node `81` and refuses the keys the reference
//!   panics on: `0x00..=0x0f` ([`EncodeError::ReservedTag`]) and `0x40..`
//!   ([`EncodeError::InvalidTag`]). A bare `[T; N]` at the top level, which the reference
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

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{BufMut, Bytes};

use crate::tag::{Header, MAX_HEADER_LEN};
use crate::value::{self, MAX_SCALAR_LEN};
use crate::{Config, DecodeError, Dialect, EncodeError, Packet, Tag};

/// The root node [`marshal`] wraps every value in: key `0x01` with the node flag, `81`.
pub const ROOT: Tag = Tag::node(0x01);

/// Keys below this are reserved by the reference `Marshal` (`0x00`, and `0x01..=0x0f` for
/// signals); [`marshal`] refuses them with [`EncodeError::ReservedTag`].
pub const FIRST_USER_KEY: u32 = 0x10;

/// How a value is framed: the kind its tag carries.
///
/// ```text
/// Primitive   k        len  scalar or byte string
/// Node        80 | k   len  child packets with their own keys (a struct's fields)
/// Array       c0 | k   len  child packets with key 0 (the elements)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A leaf value.
    Primitive,
    /// A node of keyed fields.
    Node,
    /// An array node of key-0 elements.
    Array,
}

impl Shape {
    /// The tag for a value of this shape under key `id`.
    pub const fn tag(self, id: u32) -> Tag {
        match self {
            Shape::Primitive => Tag::primitive(id),
            Shape::Node => Tag::node(id),
            Shape::Array => Tag::array(id),
        }
    }
}

/// A type that can be the value of a packet: a struct field, an array element, or the value
/// under a [`marshal`] key.
///
/// Implemented for `i32 i64 u32 u64 f32 f64 bool String Vec<u8> bytes::Bytes`, `Option<T>`,
/// `Box<T>`, `Vec<T>` and `[T; N]` of [`Element`]s, and every `#[derive(y3::Message)]`
/// struct. The methods are the building blocks of [`encode_field`] and friends; call those
/// instead.
pub trait FieldValue: Sized {
    /// The shape of this value as a struct field or array element.
    const SHAPE: Shape;

    /// The shape at the top level, under a [`marshal`] key or as a bare packet. The same as
    /// [`FieldValue::SHAPE`] except for a `Vec` of messages, which the reference writes as a
    /// plain node.
    const TOP_SHAPE: Shape = Self::SHAPE;

    /// Whether a struct leaves this value out: empty strings and byte strings, `None`.
    #[inline]
    fn is_omitted(&self) -> bool {
        false
    }

    /// Bytes of the value alone, without its header. Exactly what
    /// [`FieldValue::encode_value`] writes.
    fn value_len(&self, dialect: Dialect) -> usize;

    /// Writes the value bytes (not the header). The caller has checked that `buf` has room
    /// for [`FieldValue::value_len`] bytes and that the lengths fit.
    ///
    /// # Errors
    /// [`EncodeError`] from a nested header ([`EncodeError::InvalidTag`] for a key the
    /// dialect cannot carry).
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError>;

    /// Reads the value from `packet`, in the packet's dialect.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] when the tag's node flag does not match the shape (not in
    /// `draft02`, whose tags carry no flags), and the errors of the typed accessors of
    /// [`Packet`].
    fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError>;
}

/// A [`FieldValue`] that can be an element of a `Vec<T>` or `[T; N]` array node.
///
/// Every `FieldValue` except `Option<T>` is one. `u8` is deliberately not a `FieldValue` at
/// all, so that `Vec<u8>` is a byte string rather than an array of one-byte integers.
pub trait Element: FieldValue {}

/// A struct whose fields are packets in a node: what `#[derive(y3::Message)]` implements.
///
/// ```text
/// 80|k len | field packet | field packet | ...     fields in declaration order,
///                                                  omitted ones left out
/// ```
///
/// Decoding starts from [`Default`] and merges each child: known keys replace their field
/// (the last one wins), unknown keys are skipped, missing ones keep the default.
///
/// # Examples
///
/// By hand, for a type the derive cannot see:
///
/// ```
/// use bytes::BufMut;
/// use y3::typed::{self, Message};
/// use y3::{Dialect, DecodeError, EncodeError, Packet};
///
/// #[derive(Debug, Default, PartialEq)]
/// struct Point { x: i32, y: i32 }
///
/// impl Message for Point {
///     fn fields_len(&self, d: Dialect) -> usize {
///         typed::field_len(0x11, &self.x, d) + typed::field_len(0x12, &self.y, d)
///     }
///     fn encode_fields(&self, d: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
///         typed::encode_field(0x11, &self.x, d, buf)?;
///         typed::encode_field(0x12, &self.y, d, buf)
///     }
///     fn merge_field(&mut self, field: &Packet<'_>) -> Result<(), DecodeError> {
///         match field.id() {
///             0x11 => self.x = typed::decode_field(field)?,
///             0x12 => self.y = typed::decode_field(field)?,
///             _ => {}
///         }
///         Ok(())
///     }
/// }
///
/// let bytes = Point { x: 1, y: -1 }.to_packet(0x20, Dialect::Golang)?;
/// assert_eq!(bytes, [0xa0, 0x06, 0x11, 0x01, 0x01, 0x12, 0x01, 0x7f]);
/// let point = Point::from_packet(&y3::decode(&bytes)?)?;
/// assert_eq!(point, Point { x: 1, y: -1 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Message: Default {
    /// Bytes of all the field packets, headers included: the node's value length.
    fn fields_len(&self, dialect: Dialect) -> usize;

    /// Writes the field packets in order (see [`encode_field`]). The caller has checked
    /// room and lengths.
    ///
    /// # Errors
    /// As [`FieldValue::encode_value`].
    fn encode_fields(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError>;

    /// Reads one child packet of the node into its field; ignores unknown keys.
    ///
    /// # Errors
    /// As [`FieldValue::decode_value`] for the field's type.
    fn merge_field(&mut self, field: &Packet<'_>) -> Result<(), DecodeError>;

    /// Merges every child of `node` with [`Message::merge_field`].
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] when `node` is a primitive (not in `draft02`),
    /// [`DecodeError::TooDeep`], a malformed child, or a field's decoding error.
    fn merge(&mut self, node: &Packet<'_>) -> Result<(), DecodeError> {
        for field in node.children()? {
            self.merge_field(&field?)?;
        }
        Ok(())
    }

    /// Reads a message from a bare node packet (no root), such as the value an
    /// [`Observer`](crate::Observer) or [`get`](crate::get) found, or what
    /// [`Message::to_packet`] wrote.
    ///
    /// # Errors
    /// As [`Message::merge`].
    fn from_packet(node: &Packet<'_>) -> Result<Self, DecodeError> {
        let mut message = Self::default();
        message.merge(node)?;
        Ok(message)
    }

    /// Bytes of the message as a bare node under `key`, header included.
    fn packet_len(&self, key: u32, dialect: Dialect) -> usize {
        let len = self.fields_len(dialect);
        Header::encoded_len(Tag::node(key), len, dialect) + len
    }

    /// Writes the message as a bare node `80|key len fields`, without the [`ROOT`] that
    /// [`marshal`] adds. Any key the dialect carries is allowed, reserved ones included.
    /// Nothing is written on error.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`] when `key` exceeds [`Dialect::max_tag`],
    /// [`EncodeError::TooLong`] above `i32::MAX` bytes, [`EncodeError::BufferTooSmall`].
    fn encode_packet(
        &self,
        key: u32,
        dialect: Dialect,
        buf: &mut impl BufMut,
    ) -> Result<(), EncodeError> {
        let len = self.fields_len(dialect);
        let tag = Tag::node(key);
        // The header's own errors (tag, length) come before the room check, as always.
        let head_len = match (dialect.has_node_flag(), tag.byte()) {
            (true, Some(_)) if len < 0x2000 => Header::encoded_len(tag, len, dialect),
            _ => header(tag, len, dialect)?.len(),
        };
        reserve(buf, head_len + len)?;
        put_header(tag, len, dialect, buf)?;
        self.encode_fields(dialect, buf)
    }

    /// The message as a bare node in a new vector of exactly [`Message::packet_len`] bytes.
    ///
    /// # Errors
    /// As [`Message::encode_packet`], except [`EncodeError::BufferTooSmall`].
    fn to_packet(&self, key: u32, dialect: Dialect) -> Result<Vec<u8>, EncodeError> {
        let len = self.fields_len(dialect);
        let head = header(Tag::node(key), len, dialect)?;
        let mut out = Vec::with_capacity(head.len() + len);
        out.put_slice(&head);
        self.encode_fields(dialect, &mut out)?;
        debug_assert_eq!(out.len(), head.len() + len, "fields_len is exact");
        Ok(out)
    }
}

/// A header already written into a small array.
struct Head {
    bytes: [u8; MAX_HEADER_LEN + 1],
    len: usize,
}

impl core::ops::Deref for Head {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Writes the header for `tag` and a `len`-byte value.
#[inline]
fn header(tag: Tag, len: usize, dialect: Dialect) -> Result<Head, EncodeError> {
    let mut bytes = [0u8; MAX_HEADER_LEN + 1];
    let len = Header::write(tag, len, dialect, &mut bytes)?;
    Ok(Head { bytes, len })
}

/// Checks that `buf` can take `required` more bytes.
#[inline]
fn reserve(buf: &impl BufMut, required: usize) -> Result<(), EncodeError> {
    if buf.remaining_mut() < required {
        return Err(EncodeError::BufferTooSmall {
            required: required as u64,
            remaining: buf.remaining_mut() as u64,
        });
    }
    Ok(())
}

/// Writes the header and value of `v` with tag `tag`.
#[inline(always)]
fn put_packet<T: FieldValue>(
    tag: Tag,
    v: &T,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    put_header(tag, v.value_len(dialect), dialect, buf)?;
    v.encode_value(dialect, buf)
}

/// Writes the header for `tag` and a `len`-byte value.
///
/// The usual header — a one-byte tag, a value under 8 KiB — is written as one fixed-size
/// slice (a store, where a variable-length copy is a `memcpy` call); the rest goes through
/// [`Header::write`], which also reports the errors.
#[inline(always)]
fn put_header(
    tag: Tag,
    len: usize,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    if let (true, Some(t)) = (dialect.has_node_flag(), tag.byte()) {
        // PVarInt: one group `00xx_xxxx` for 0..=63, two groups `10xx_xxxx 0yyy_yyyy` for
        // 64..=8191 (the sign bit, bit 6 of the first group, clear).
        if len < 0x40 {
            buf.put_slice(&[t, len as u8]);
            return Ok(());
        }
        if len < 0x2000 {
            buf.put_slice(&[t, 0x80 | (len >> 7) as u8, (len & 0x7f) as u8]);
            return Ok(());
        }
    }
    buf.put_slice(&header(tag, len, dialect)?);
    Ok(())
}

/// Bytes a struct field `key` holding `v` takes, header included; 0 when it is omitted.
///
/// ```
/// use y3::{typed::field_len, Dialect};
/// assert_eq!(field_len(0x11, &128i32, Dialect::Golang), 4); // 11 02 81 00
/// assert_eq!(field_len(0x12, &String::new(), Dialect::Golang), 0);
/// ```
#[inline]
pub fn field_len<T: FieldValue>(key: u32, v: &T, dialect: Dialect) -> usize {
    if v.is_omitted() {
        return 0;
    }
    let len = v.value_len(dialect);
    Header::encoded_len(T::SHAPE.tag(key), len, dialect) + len
}

/// Writes a struct field `key` holding `v` (nothing when it is omitted): the building
/// block of [`Message::encode_fields`].
///
/// Like prost's `encode_raw`, this does not check `buf`'s room first; the entry points
/// ([`marshal`], [`Message::encode_packet`]) do. A `buf` that cannot grow panics in
/// [`BufMut::put_slice`].
///
/// # Errors
/// [`EncodeError::InvalidTag`] when `key` exceeds [`Dialect::max_tag`],
/// [`EncodeError::TooLong`] for a value above `i32::MAX` bytes.
///
/// # Examples
///
/// ```
/// use y3::{typed::encode_field, Dialect};
/// let mut out = Vec::new();
/// encode_field(0x11, &vec![1i32, -1], Dialect::Golang, &mut out)?;
/// encode_field(0x12, &String::new(), Dialect::Golang, &mut out)?; // omitted
/// assert_eq!(out, [0xd1, 0x06, 0x00, 0x01, 0x01, 0x00, 0x01, 0x7f]);
/// # Ok::<(), y3::EncodeError>(())
/// ```
#[inline]
pub fn encode_field<T: FieldValue>(
    key: u32,
    v: &T,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    if v.is_omitted() {
        return Ok(());
    }
    put_packet(T::SHAPE.tag(key), v, dialect, buf)
}

/// Reads a field, an element or any bare packet as `T`: the building block of
/// [`Message::merge_field`].
///
/// # Errors
/// As [`FieldValue::decode_value`].
///
/// # Examples
///
/// ```
/// let packet = y3::decode(&[0xd1, 0x06, 0x00, 0x01, 0x01, 0x00, 0x01, 0x7f])?;
/// assert_eq!(y3::typed::decode_field::<Vec<i32>>(&packet)?, [1, -1]);
/// assert_eq!(y3::typed::decode_field::<i32>(&packet).unwrap_err().kind(), "wrong_type");
/// # Ok::<(), y3::DecodeError>(())
/// ```
#[inline]
pub fn decode_field<T: FieldValue>(packet: &Packet<'_>) -> Result<T, DecodeError> {
    T::decode_value(packet)
}

/// Refuses the keys the reference `Marshal` panics on: `0x01..=0x0f` ("prohibit the use of
/// this key"), `0x00` ("observe cannot be 0"; it is also the array element key) and, in the
/// one-byte dialects, `0x40..`.
fn check_key(key: u32, dialect: Dialect) -> Result<(), EncodeError> {
    if key < FIRST_USER_KEY {
        return Err(EncodeError::ReservedTag { tag: key });
    }
    Tag::primitive(key).check(dialect)
}

/// Bytes of the packet under the root (0 when omitted), checked against the length limit.
fn inner_len<T: FieldValue>(key: u32, v: &T, dialect: Dialect) -> Result<usize, EncodeError> {
    if v.is_omitted() {
        return Ok(0);
    }
    let len = v.value_len(dialect);
    check_len(len)?;
    Ok(Header::encoded_len(T::TOP_SHAPE.tag(key), len, dialect) + len)
}

fn check_len(len: usize) -> Result<(), EncodeError> {
    if len > i32::MAX as usize {
        return Err(EncodeError::TooLong {
            len: len as u64,
            limit: i32::MAX as u64,
        });
    }
    Ok(())
}

/// Bytes [`marshal_with`] produces for `v` under `key`, root included.
pub fn marshaled_len<T: FieldValue>(key: u32, v: &T, dialect: Dialect) -> usize {
    let inner = if v.is_omitted() {
        0
    } else {
        let len = v.value_len(dialect);
        Header::encoded_len(T::TOP_SHAPE.tag(key), len, dialect) + len
    };
    Header::encoded_len(ROOT, inner, dialect) + inner
}

/// Encodes `v` under the observe key `key` in the `golang` dialect, as the reference
/// `NewCodec(key).Marshal(v)` does.
///
/// ```text
/// 81 len | key-packet            root 0x01 with the node flag, then v's packet:
///          10 01 05              int32 5 under 0x10
///          90 len fields         a message under 0x10
///          d0 len 00 len v ...   a Vec of scalars under 0x10
///          90 len 80 len ...     a Vec of messages: a plain node of 80 elements
/// ```
///
/// # Errors
/// [`EncodeError::ReservedTag`] for keys `0x00..=0x0f`, [`EncodeError::InvalidTag`] for
/// keys above `0x3f`, [`EncodeError::TooLong`] when the result would exceed `i32::MAX`.
///
/// # Examples
///
/// ```
/// assert_eq!(y3::typed::marshal(0x10, &5i32)?, [0x81, 0x03, 0x10, 0x01, 0x05]);
/// assert_eq!(y3::typed::marshal(0x10, &vec![1u32])?, [0x81, 0x05, 0xd0, 0x03, 0x00, 0x01, 0x01]);
/// assert_eq!(y3::typed::marshal(0x01, &5i32).unwrap_err().kind(), "reserved_tag");
/// # Ok::<(), y3::EncodeError>(())
/// ```
pub fn marshal<T: FieldValue>(key: u32, v: &T) -> Result<Vec<u8>, EncodeError> {
    marshal_with(key, v, Dialect::Golang)
}

/// [`marshal`] in any dialect (`nvarint` integers, `draft02` tags, where keys may exceed
/// `0x3f`). The vector is allocated once, with exactly [`marshaled_len`] bytes.
///
/// # Errors
/// As [`marshal`], with [`Dialect::max_tag`] as the largest key.
pub fn marshal_with<T: FieldValue>(
    key: u32,
    v: &T,
    dialect: Dialect,
) -> Result<Vec<u8>, EncodeError> {
    check_key(key, dialect)?;
    let inner = inner_len(key, v, dialect)?;
    let root = header(ROOT, inner, dialect)?;
    let mut out = Vec::with_capacity(root.len() + inner);
    out.put_slice(&root);
    if inner != 0 {
        put_packet(T::TOP_SHAPE.tag(key), v, dialect, &mut out)?;
    }
    debug_assert_eq!(out.len(), root.len() + inner, "value_len is exact");
    Ok(out)
}

/// [`marshal_with`] into a caller's buffer. Nothing is written on error.
///
/// # Errors
/// As [`marshal_with`], and [`EncodeError::BufferTooSmall`] when `buf` cannot take
/// [`marshaled_len`] more bytes.
pub fn marshal_into<T: FieldValue>(
    key: u32,
    v: &T,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    check_key(key, dialect)?;
    let inner = inner_len(key, v, dialect)?;
    let root = header(ROOT, inner, dialect)?;
    reserve(buf, root.len() + inner)?;
    buf.put_slice(&root);
    if inner != 0 {
        put_packet(T::TOP_SHAPE.tag(key), v, dialect, buf)?;
    }
    Ok(())
}

/// Decodes what [`marshal`] wrote (`golang` dialect): the value under `key` in the root
/// node, or `Ok(None)` when the root holds no `key`.
///
/// The root's own key is not checked; its other children are skipped; bytes after the
/// root are an error.
///
/// # Errors
/// [`DecodeError::TrailingBytes`], [`DecodeError::UnexpectedEnd`],
/// [`DecodeError::WrongType`] when the root is not a node, malformed children met before
/// `key`, and the errors of [`FieldValue::decode_value`].
///
/// # Examples
///
/// ```
/// assert_eq!(y3::typed::unmarshal::<i32>(&[0x81, 0x03, 0x10, 0x01, 0x05], 0x10)?, Some(5));
/// assert_eq!(y3::typed::unmarshal::<i32>(&[0x81, 0x03, 0x10, 0x01, 0x05], 0x11)?, None);
/// # Ok::<(), y3::DecodeError>(())
/// ```
pub fn unmarshal<T: FieldValue>(buf: &[u8], key: u32) -> Result<Option<T>, DecodeError> {
    unmarshal_with(buf, key, &Config::DEFAULT)
}

/// [`unmarshal`] with a dialect and limits.
///
/// # Errors
/// As [`unmarshal`].
pub fn unmarshal_with<T: FieldValue>(
    buf: &[u8],
    key: u32,
    config: &Config,
) -> Result<Option<T>, DecodeError> {
    let (root, rest) = Packet::parse_with(buf, config)?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes {
            count: rest.len() as u64,
        });
    }
    match root.child(key)? {
        Some(packet) => T::decode_value(&packet).map(Some),
        None => Ok(None),
    }
}

/// Encodes `v` as a bare packet under `key`, without the root: the value part of
/// [`marshal`]'s output, with the top-level shape. Any key the dialect carries is allowed.
///
/// Unlike [`marshal`], nothing is omitted: an empty string is `k 00`, and `None` is an empty
/// value of `T`'s shape.
///
/// # Errors
/// [`EncodeError::InvalidTag`] when `key` exceeds [`Dialect::max_tag`],
/// [`EncodeError::TooLong`].
///
/// # Examples
///
/// ```
/// let bytes = y3::typed::to_packet(0x10, &vec![true], y3::Dialect::Golang)?;
/// assert_eq!(bytes, [0xd0, 0x03, 0x00, 0x01, 0x01]);
/// assert_eq!(y3::typed::from_packet::<Vec<bool>>(&y3::decode(&bytes)?)?, [true]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_packet<T: FieldValue>(key: u32, v: &T, dialect: Dialect) -> Result<Vec<u8>, EncodeError> {
    let len = v.value_len(dialect);
    let head = header(T::TOP_SHAPE.tag(key), len, dialect)?;
    let mut out = Vec::with_capacity(head.len() + len);
    out.put_slice(&head);
    v.encode_value(dialect, &mut out)?;
    debug_assert_eq!(out.len(), head.len() + len, "value_len is exact");
    Ok(out)
}

/// Reads a bare packet (what [`to_packet`] wrote, an observed value) as `T`. The same as
/// [`decode_field`]; a `Vec` accepts both the plain and the array node.
///
/// # Errors
/// As [`FieldValue::decode_value`].
pub fn from_packet<T: FieldValue>(packet: &Packet<'_>) -> Result<T, DecodeError> {
    T::decode_value(packet)
}

/// Writes a scalar's bytes.
#[inline]
fn put_scalar(
    buf: &mut impl BufMut,
    write: impl FnOnce(&mut [u8; MAX_SCALAR_LEN]) -> usize,
) -> Result<(), EncodeError> {
    let mut scratch = [0u8; MAX_SCALAR_LEN];
    let n = write(&mut scratch);
    // Byte by byte: at most ten, and a variable-length `put_slice` is a `memcpy` call.
    for &b in &scratch[..n] {
        buf.put_u8(b);
    }
    Ok(())
}

/// Integers (and bool) as the dialect's integer encoding of the `i64` `$to` gives.
macro_rules! int_field {
    ($ty:ty, $read:ident, |$v:ident| $to:expr) => {
        impl FieldValue for $ty {
            const SHAPE: Shape = Shape::Primitive;

            #[inline]
            fn value_len(&self, dialect: Dialect) -> usize {
                let $v = *self;
                value::int_len(dialect, $to)
            }

            #[inline]
            fn encode_value(
                &self,
                dialect: Dialect,
                buf: &mut impl BufMut,
            ) -> Result<(), EncodeError> {
                let $v = *self;
                put_scalar(buf, |out| value::int_write(dialect, $to, out))
            }

            #[inline]
            fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
                packet.$read()
            }
        }

        impl Element for $ty {}
    };
}

int_field!(i32, i32, |v| v as i64);
int_field!(i64, i64, |v| v);
// Unsigned values travel as the signed integer with the same bits, as in the reference.
int_field!(u32, u32, |v| v as i32 as i64);
int_field!(u64, u64, |v| v as i64);
int_field!(bool, bool, |v| v as i64);

macro_rules! float_field {
    ($ty:ty, $read:ident, $len:path, $write:path) => {
        impl FieldValue for $ty {
            const SHAPE: Shape = Shape::Primitive;

            #[inline]
            fn value_len(&self, _dialect: Dialect) -> usize {
                $len(*self)
            }

            #[inline]
            fn encode_value(
                &self,
                _dialect: Dialect,
                buf: &mut impl BufMut,
            ) -> Result<(), EncodeError> {
                put_scalar(buf, |out| $write(*self, out))
            }

            #[inline]
            fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
                packet.$read()
            }
        }

        impl Element for $ty {}
    };
}

float_field!(f32, f32, value::f32_len, value::f32_write);
float_field!(f64, f64, value::f64_len, value::f64_write);

/// Byte strings: the raw bytes, omitted from structs when empty.
macro_rules! bytes_field {
    ($ty:ty, |$p:ident| $read:expr) => {
        impl FieldValue for $ty {
            const SHAPE: Shape = Shape::Primitive;

            #[inline]
            fn is_omitted(&self) -> bool {
                self.is_empty()
            }

            #[inline]
            fn value_len(&self, _dialect: Dialect) -> usize {
                self.len()
            }

            #[inline]
            fn encode_value(
                &self,
                _dialect: Dialect,
                buf: &mut impl BufMut,
            ) -> Result<(), EncodeError> {
                buf.put_slice(self.as_ref());
                Ok(())
            }

            #[inline]
            fn decode_value($p: &Packet<'_>) -> Result<Self, DecodeError> {
                $read
            }
        }

        impl Element for $ty {}
    };
}

bytes_field!(String, |p| p.str().map(String::from));
bytes_field!(Vec<u8>, |p| p.bytes().map(<[u8]>::to_vec));
bytes_field!(Bytes, |p| p.bytes().map(Bytes::copy_from_slice));

/// `None` is left out of structs; `Some(v)` is written as `v` even when `v` itself would be
/// omitted, so `Some(String::new())` comes back as `Some("")`.
impl<T: FieldValue> FieldValue for Option<T> {
    const SHAPE: Shape = T::SHAPE;
    const TOP_SHAPE: Shape = T::TOP_SHAPE;

    #[inline]
    fn is_omitted(&self) -> bool {
        self.is_none()
    }

    #[inline]
    fn value_len(&self, dialect: Dialect) -> usize {
        self.as_ref().map_or(0, |v| v.value_len(dialect))
    }

    #[inline]
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        match self {
            Some(v) => v.encode_value(dialect, buf),
            None => Ok(()),
        }
    }

    #[inline]
    fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
        T::decode_value(packet).map(Some)
    }
}

/// Transparent: for recursive messages (`Option<Box<Self>>`).
impl<T: FieldValue> FieldValue for Box<T> {
    const SHAPE: Shape = T::SHAPE;
    const TOP_SHAPE: Shape = T::TOP_SHAPE;

    #[inline]
    fn is_omitted(&self) -> bool {
        (**self).is_omitted()
    }

    #[inline]
    fn value_len(&self, dialect: Dialect) -> usize {
        (**self).value_len(dialect)
    }

    #[inline]
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        (**self).encode_value(dialect, buf)
    }

    #[inline]
    fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
        T::decode_value(packet).map(Box::new)
    }
}

impl<T: Element> Element for Box<T> {}

/// The top-level shape of an array of `T`: the reference writes a top-level slice of
/// structs as a plain node.
const fn array_top_shape(element: Shape) -> Shape {
    match element {
        Shape::Node => Shape::Node,
        _ => Shape::Array,
    }
}

#[inline]
fn elements_len<T: Element>(elements: &[T], dialect: Dialect) -> usize {
    let tag = T::SHAPE.tag(0);
    elements
        .iter()
        .map(|e| {
            let len = e.value_len(dialect);
            Header::encoded_len(tag, len, dialect) + len
        })
        .sum()
}

#[inline]
fn encode_elements<T: Element>(
    elements: &[T],
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    let tag = T::SHAPE.tag(0);
    elements
        .iter()
        .try_for_each(|e| put_packet(tag, e, dialect, buf))
}

/// The children of an array (or, at the top level, plain) node; element keys are not
/// checked.
fn array_children<'a>(packet: &Packet<'a>) -> Result<crate::Children<'a>, DecodeError> {
    if packet.config().dialect.has_node_flag() && !packet.is_node() {
        return Err(DecodeError::WrongType {
            expected: "array",
            tag: packet.id(),
        });
    }
    packet.children()
}

/// An array node of key-0 elements; an empty `Vec` is still written (`c0|k 00`).
impl<T: Element> FieldValue for Vec<T> {
    const SHAPE: Shape = Shape::Array;
    const TOP_SHAPE: Shape = array_top_shape(T::SHAPE);

    #[inline]
    fn value_len(&self, dialect: Dialect) -> usize {
        elements_len(self, dialect)
    }

    #[inline]
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        encode_elements(self, dialect, buf)
    }

    fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
        array_children(packet)?
            .map(|e| T::decode_value(&e?))
            .collect()
    }
}

impl<T: Element> Element for Vec<T> {}

/// Written like a `Vec`; decoding needs exactly `N` elements.
impl<T: Element, const N: usize> FieldValue for [T; N] {
    const SHAPE: Shape = Shape::Array;
    const TOP_SHAPE: Shape = array_top_shape(T::SHAPE);

    #[inline]
    fn value_len(&self, dialect: Dialect) -> usize {
        elements_len(self, dialect)
    }

    #[inline]
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        encode_elements(self, dialect, buf)
    }

    /// # Errors
    /// [`DecodeError::WrongCount`] unless the node holds exactly `N` elements.
    fn decode_value(packet: &Packet<'_>) -> Result<Self, DecodeError> {
        let mut elements = Vec::with_capacity(N);
        let mut found = 0usize;
        for e in array_children(packet)? {
            let e = e?;
            found += 1;
            // Count the extra elements without decoding them.
            if found <= N {
                elements.push(T::decode_value(&e)?);
            }
        }
        let wrong = DecodeError::WrongCount {
            expected: N as u32,
            found: found as u32,
        };
        if found != N {
            return Err(wrong);
        }
        elements.try_into().map_err(|_| wrong)
    }
}

impl<T: Element, const N: usize> Element for [T; N] {}

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
mod tests {
    use super::*;
    use hex_literal::hex;

    #[test]
    fn scalars_top_level() {
        assert_eq!(marshal(0x10, &-1i64).unwrap(), hex!("810310017f"));
        assert_eq!(marshal(0x10, &u64::MAX).unwrap(), hex!("810310017f"));
        assert_eq!(marshal(0x10, &128u32).unwrap(), hex!("810410028100"));
        assert_eq!(
            marshal(0x10, &"Y3".to_string()).unwrap(),
            hex!("810410025933")
        );
        assert_eq!(marshal(0x10, &1.5f32).unwrap(), hex!("810410023fc0"));
        assert_eq!(
            marshal_with(0x10, &-1i32, Dialect::NVarInt).unwrap(),
            hex!("81031001ff")
        );
    }

    #[test]
    fn omitted_at_top_level() {
        let bytes = marshal(0x10, &String::new()).unwrap();
        assert_eq!(bytes, hex!("8100"));
        assert_eq!(unmarshal::<String>(&bytes, 0x10), Ok(None));
        assert_eq!(marshal(0x10, &None::<i32>).unwrap(), hex!("8100"));
        let bytes = marshal(0x10, &Some(String::new())).unwrap();
        assert_eq!(bytes, hex!("81021000"));
        assert_eq!(
            unmarshal::<Option<String>>(&bytes, 0x10),
            Ok(Some(Some(String::new())))
        );
    }

    #[test]
    fn keys() {
        for key in [0x00, 0x01, 0x0f] {
            assert_eq!(
                marshal(key, &1i32),
                Err(EncodeError::ReservedTag { tag: key })
            );
        }
        assert_eq!(
            marshal(0x40, &1i32),
            Err(EncodeError::InvalidTag {
                tag: 0x40,
                max: 0x3f
            })
        );
        // draft02 carries wide keys.
        let bytes = marshal_with(300, &1i32, Dialect::Draft02).unwrap();
        assert_eq!(bytes, hex!("0104822c0101"));
        let config = Config::new(Dialect::Draft02);
        assert_eq!(unmarshal_with::<i32>(&bytes, 300, &config), Ok(Some(1)));
    }

    #[test]
    fn arrays() {
        let v = vec![vec![1i32], vec![]];
        let bytes = marshal(0x10, &v).unwrap();
        assert_eq!(bytes, hex!("8109d007c003000101c000"));
        assert_eq!(unmarshal::<Vec<Vec<i32>>>(&bytes, 0x10), Ok(Some(v)));
        let arr = [1u64, 2];
        let bytes = marshal(0x10, &arr).unwrap();
        assert_eq!(unmarshal::<[u64; 2]>(&bytes, 0x10), Ok(Some(arr)));
        assert_eq!(
            unmarshal::<[u64; 3]>(&bytes, 0x10),
            Err(DecodeError::WrongCount {
                expected: 3,
                found: 2
            })
        );
        assert_eq!(
            unmarshal::<[u64; 1]>(&bytes, 0x10),
            Err(DecodeError::WrongCount {
                expected: 1,
                found: 2
            })
        );
        assert_eq!(
            unmarshal::<Vec<u64>>(&hex!("810310017f"), 0x10),
            Err(DecodeError::WrongType {
                expected: "array",
                tag: 0x10
            })
        );
    }

    #[test]
    fn into_caller_buffers() {
        let mut small = [0u8; 4];
        assert_eq!(
            marshal_into(0x10, &5i32, Dialect::Golang, &mut &mut small[..]),
            Err(EncodeError::BufferTooSmall {
                required: 5,
                remaining: 4
            })
        );
        assert_eq!(small, [0; 4]);
        let mut out = Vec::new();
        marshal_into(0x10, &5i32, Dialect::Golang, &mut out).unwrap();
        assert_eq!(out, hex!("8103100105"));
        assert_eq!(marshaled_len(0x10, &5i32, Dialect::Golang), 5);
    }

    #[test]
    fn decode_errors() {
        assert_eq!(
            unmarshal::<i32>(&hex!("8103100105 00"), 0x10),
            Err(DecodeError::TrailingBytes { count: 1 })
        );
        assert_eq!(
            unmarshal::<i32>(&hex!("0103100105"), 0x10)
                .unwrap_err()
                .kind(),
            "wrong_type"
        );
        assert_eq!(
            unmarshal::<bool>(&hex!("8103100102"), 0x10),
            Err(DecodeError::InvalidBool { value: 2 })
        );
    }
}
