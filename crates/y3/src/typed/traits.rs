//! The traits: how a Rust type sits on the wire ([`FieldValue`], [`Element`]) and a struct
//! of fields ([`Message`]).

use alloc::vec::Vec;
use bytes::BufMut;

use super::wire::{header, put_header, put_header_and_value, reserve};
use crate::tag::Header;
use crate::{DecodeError, Dialect, EncodeError, Packet, Tag};

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
/// under a [`marshal`](super::marshal) key.
///
/// Implemented for `i32 i64 u32 u64 f32 f64 bool String Vec<u8> bytes::Bytes`, `Option<T>`,
/// `Box<T>`, `Vec<T>` and `[T; N]` of [`Element`]s, and every `#[derive(y3::Message)]`
/// struct. The methods are the building blocks of [`encode_field`](super::encode_field) and friends; call those
/// instead.
pub trait FieldValue: Sized {
    /// The shape of this value as a struct field or array element.
    const SHAPE: Shape;

    /// The shape at the top level, under a [`marshal`](super::marshal) key or as a bare packet. The same as
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
    /// [`EncodeError`] from a nested header ([`EncodeError::InvalidTag`](crate::EncodeError::InvalidTag) for a key the
    /// dialect cannot carry).
    fn encode_value(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError>;

    /// Writes the whole packet of this value under `tag`: its header, then its value. The
    /// provided method does exactly that; the integers override it to write both at once
    /// (their length is their value's). Not meant to be overridden outside this crate.
    #[doc(hidden)]
    #[inline(always)]
    fn encode_tagged(
        &self,
        tag: Tag,
        dialect: Dialect,
        buf: &mut impl BufMut,
    ) -> Result<(), EncodeError> {
        put_header_and_value(tag, self, dialect, buf)
    }

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

    /// Writes the field packets in order (see [`encode_field`](super::encode_field)). The caller has checked
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

    /// Writes the message as a bare node `80|key len fields`, without the [`ROOT`](super::ROOT) that
    /// [`marshal`](super::marshal) adds. Any key the dialect carries is allowed, reserved ones included.
    /// Nothing is written on error.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`](crate::EncodeError::InvalidTag) when `key` exceeds [`Dialect::max_tag`],
    /// [`EncodeError::TooLong`](crate::EncodeError::TooLong) above `i32::MAX` bytes, [`EncodeError::BufferTooSmall`](crate::EncodeError::BufferTooSmall).
    fn encode_packet(
        &self,
        key: u32,
        dialect: Dialect,
        buf: &mut impl BufMut,
    ) -> Result<(), EncodeError> {
        let len = self.fields_len(dialect);
        let tag = Tag::node(key);
        // The header's own errors (tag, length) come before the room check, as always.
        let head_len = Header::checked_len(tag, len, dialect)?;
        reserve(buf, head_len + len)?;
        put_header(tag, len, dialect, buf)?;
        self.encode_fields(dialect, buf)
    }

    /// The message as a bare node in a new vector of exactly [`Message::packet_len`] bytes.
    ///
    /// # Errors
    /// As [`Message::encode_packet`], except [`EncodeError::BufferTooSmall`](crate::EncodeError::BufferTooSmall).
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
