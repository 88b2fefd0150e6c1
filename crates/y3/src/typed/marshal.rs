//! The root-node API of the reference codec: [`marshal`] wraps a value in root node `81`,
//! [`unmarshal`] finds it again; [`to_packet`] / [`from_packet`] go without the root.

use alloc::vec::Vec;
use bytes::BufMut;

use super::wire::*;
use super::{FieldValue, ROOT};
use crate::tag::Header;
use crate::{Config, DecodeError, Dialect, EncodeError, Packet};

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
