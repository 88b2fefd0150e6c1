//! Headers and fields: the building blocks every [`FieldValue`](super::FieldValue) impl and
//! the marshal API share.

use bytes::BufMut;

use super::{FieldValue, FIRST_USER_KEY};
pub(super) use crate::tag::put_header;
use crate::tag::{put_one_group, Header, MAX_HEADER_LEN};
use crate::{varint, DecodeError, Dialect, EncodeError, Packet, Tag};

/// A header already written into a small array.
pub(super) struct Head {
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
pub(super) fn header(tag: Tag, len: usize, dialect: Dialect) -> Result<Head, EncodeError> {
    let mut bytes = [0u8; MAX_HEADER_LEN + 1];
    let len = Header::write(tag, len, dialect, &mut bytes)?;
    Ok(Head { bytes, len })
}

/// Checks that `buf` can take `required` more bytes.
#[inline]
pub(super) fn reserve(buf: &impl BufMut, required: usize) -> Result<(), EncodeError> {
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
pub(super) fn put_packet<T: FieldValue>(
    tag: Tag,
    v: &T,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    v.encode_tagged(tag, dialect, buf)
}

/// The header for `tag` and `v`'s length, then `v`'s value: the provided
/// [`FieldValue::encode_tagged`].
#[inline(always)]
pub(super) fn put_header_and_value<T: FieldValue>(
    tag: Tag,
    v: &T,
    dialect: Dialect,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    put_header(tag, v.value_len(dialect), dialect, buf)?;
    v.encode_value(dialect, buf)
}

/// Writes an integer packet of the `golang` dialect: the one-byte tag `t`, the length, and
/// `v` as PVarInt, the groups computed in place from the last one back: the header as one
/// fixed-size slice, then the groups byte by byte (a variable-length copy is a `memcpy`
/// call, which costs more time than these few stores, though fewer instructions).
///
/// ```text
/// t  n  g1 .. gn      n = pvarint_len(v) <= 10: never more than one length byte
/// ```
#[inline(always)]
pub(super) fn put_int_packet(t: u8, v: i64, buf: &mut impl BufMut) {
    let n = varint::pvarint_len(v);
    let mut groups = [0u8; 10];
    let mut x = v;
    let mut more = 0;
    for slot in groups[..n].iter_mut().rev() {
        *slot = (x as u8 & 0x7f) | more;
        x >>= 7;
        more = 0x80;
    }
    put_one_group(t, n as u8, buf);
    for &g in &groups[..n] {
        buf.put_u8(g);
    }
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
/// block of [`Message::encode_fields`](super::Message::encode_fields).
///
/// Like prost's `encode_raw`, this does not check `buf`'s room first; the entry points
/// ([`marshal`](super::marshal), [`Message::encode_packet`](super::Message::encode_packet)) do. A `buf` that cannot grow panics in
/// [`BufMut::put_slice`].
///
/// # Errors
/// [`EncodeError::InvalidTag`](crate::EncodeError::InvalidTag) when `key` exceeds [`Dialect::max_tag`],
/// [`EncodeError::TooLong`](crate::EncodeError::TooLong) for a value above `i32::MAX` bytes.
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
/// [`Message::merge_field`](super::Message::merge_field).
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
pub(super) fn check_key(key: u32, dialect: Dialect) -> Result<(), EncodeError> {
    if key < FIRST_USER_KEY {
        return Err(EncodeError::ReservedTag { tag: key });
    }
    Tag::primitive(key).check(dialect)
}

/// Bytes of the packet under the root (0 when omitted), checked against the length limit.
pub(super) fn inner_len<T: FieldValue>(
    key: u32,
    v: &T,
    dialect: Dialect,
) -> Result<usize, EncodeError> {
    if v.is_omitted() {
        return Ok(0);
    }
    let len = v.value_len(dialect);
    check_len(len)?;
    Ok(Header::encoded_len(T::TOP_SHAPE.tag(key), len, dialect) + len)
}

pub(super) fn check_len(len: usize) -> Result<(), EncodeError> {
    crate::tag::check_value_len(len)
}
