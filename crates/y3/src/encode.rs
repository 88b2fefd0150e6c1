//! The encoder: an owned packet tree whose `encoded_len` is exact, written into any
//! [`BufMut`], plus one-call writers for single primitives.
//!
//! ```text
//! Item { id 0x10, Node [ Item { id 0x11, I32(1) }, Item { id 0x12, Str("a") } ] }
//!
//!   90 06 | 11 01 01 | 12 01 61
//!   ^  ^    ^          ^
//!   |  |    child 0x11 child 0x12
//!   |  value length 6 = sum of the children's encoded_len
//!   node flag | 0x10
//! ```
//!
//! Nothing is written unless everything can be: tags and lengths are checked and the
//! buffer's remaining capacity compared with `encoded_len` first (as prost's `encode` does).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::BufMut;

use crate::scalar::{self, MAX_SCALAR_LEN};
use crate::tag::{self, Header};
use crate::{DecodeError, Dialect, EncodeError, Packet, Tag};

/// A value in an owned packet tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `int32`.
    I32(i32),
    /// `int64`.
    I64(i64),
    /// `uint32`, written as the int32 with the same bits.
    U32(u32),
    /// `uint64`, written as the int64 with the same bits.
    U64(u64),
    /// `float32` (VarFloat).
    F32(f32),
    /// `float64` (VarFloat).
    F64(f64),
    /// `bool` (integer 0 or 1).
    Bool(bool),
    /// UTF-8 string.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A node: child packets.
    Node(Vec<Item>),
    /// An array node: child packets, by convention with key 0.
    Array(Vec<Item>),
}

/// A packet in an owned tree: a key and a value.
///
/// # Examples
///
/// ```
/// use y3::{Dialect, Item, Value};
///
/// let item = Item::node(0x10, vec![Item::new(0x11, Value::I32(1)), Item::new(0x12, Value::Str("a".into()))]);
/// let bytes = item.to_vec(Dialect::Golang)?;
/// assert_eq!(bytes, [0x90, 0x06, 0x11, 0x01, 0x01, 0x12, 0x01, 0x61]);
/// assert_eq!(item.encoded_len(Dialect::Golang), bytes.len());
/// # Ok::<(), y3::EncodeError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The key.
    pub id: u32,
    /// The value.
    pub value: Value,
}

impl Item {
    /// An item with key `id`.
    pub fn new(id: u32, value: Value) -> Item {
        Item { id, value }
    }

    /// A node item.
    pub fn node(id: u32, children: Vec<Item>) -> Item {
        Item {
            id,
            value: Value::Node(children),
        }
    }

    /// An array item.
    pub fn array(id: u32, elements: Vec<Item>) -> Item {
        Item {
            id,
            value: Value::Array(elements),
        }
    }

    /// The tag this item is written with.
    pub fn tag(&self) -> Tag {
        match self.value {
            Value::Node(_) => Tag::node(self.id),
            Value::Array(_) => Tag::array(self.id),
            _ => Tag::primitive(self.id),
        }
    }

    /// Bytes of the value alone.
    pub fn value_len(&self, dialect: Dialect) -> usize {
        match &self.value {
            Value::I32(v) => scalar::int_len(dialect, *v as i64),
            Value::I64(v) => scalar::int_len(dialect, *v),
            Value::U32(v) => scalar::int_len(dialect, *v as i32 as i64),
            Value::U64(v) => scalar::int_len(dialect, *v as i64),
            Value::F32(v) => scalar::f32_len(*v),
            Value::F64(v) => scalar::f64_len(*v),
            Value::Bool(v) => scalar::int_len(dialect, *v as i64),
            Value::Str(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::Node(children) | Value::Array(children) => {
                children.iter().map(|c| c.encoded_len(dialect)).sum()
            }
        }
    }

    /// Bytes of the whole packet, header included. Exactly what [`Item::encode`] writes.
    pub fn encoded_len(&self, dialect: Dialect) -> usize {
        let len = self.value_len(dialect);
        Header::encoded_len(self.tag(), len, dialect) + len
    }

    /// Checks every tag and length in the tree against `dialect`.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`], [`EncodeError::TooLong`].
    pub fn check(&self, dialect: Dialect) -> Result<(), EncodeError> {
        Header::checked_len(self.tag(), self.value_len(dialect), dialect)?;
        if let Value::Node(children) | Value::Array(children) = &self.value {
            children.iter().try_for_each(|c| c.check(dialect))?;
        }
        Ok(())
    }

    /// Writes the packet into `buf`. Nothing is written on error.
    ///
    /// # Errors
    /// As [`Item::check`], and [`EncodeError::BufferTooSmall`] when `buf` cannot grow to
    /// [`Item::encoded_len`].
    pub fn encode(&self, dialect: Dialect, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        self.check(dialect)?;
        let required = self.encoded_len(dialect);
        if buf.remaining_mut() < required {
            return Err(EncodeError::BufferTooSmall {
                required: required as u64,
                remaining: buf.remaining_mut() as u64,
            });
        }
        self.write(dialect, buf);
        Ok(())
    }

    /// The packet as a new vector.
    ///
    /// # Errors
    /// As [`Item::check`].
    pub fn to_vec(&self, dialect: Dialect) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.encoded_len(dialect));
        self.encode(dialect, &mut out)?;
        Ok(out)
    }

    /// Writes after [`Item::check`] passed and capacity was confirmed.
    fn write(&self, dialect: Dialect, buf: &mut impl BufMut) {
        let len = self.value_len(dialect);
        put_header(buf, self.tag(), len, dialect);
        let mut scratch = [0u8; MAX_SCALAR_LEN];
        let n = match &self.value {
            Value::I32(v) => scalar::int_write(dialect, *v as i64, &mut scratch),
            Value::I64(v) => scalar::int_write(dialect, *v, &mut scratch),
            Value::U32(v) => scalar::int_write(dialect, *v as i32 as i64, &mut scratch),
            Value::U64(v) => scalar::int_write(dialect, *v as i64, &mut scratch),
            Value::F32(v) => scalar::f32_write(*v, &mut scratch),
            Value::F64(v) => scalar::f64_write(*v, &mut scratch),
            Value::Bool(v) => scalar::int_write(dialect, *v as i64, &mut scratch),
            Value::Str(s) => {
                buf.put_slice(s.as_bytes());
                return;
            }
            Value::Bytes(b) => {
                buf.put_slice(b);
                return;
            }
            Value::Node(children) | Value::Array(children) => {
                children.iter().for_each(|c| c.write(dialect, buf));
                return;
            }
        };
        buf.put_slice(&scratch[..n]);
    }

    /// Reads `packet` with the shape and scalar types of `schema` (the types are not on the
    /// wire). Children are matched by position; unknown extra children are an error.
    ///
    /// # Errors
    /// Any [`DecodeError`] of the typed accessors; [`DecodeError::WrongCount`] when a node
    /// has a different number of children than the schema.
    pub fn read_like(packet: &Packet<'_>, schema: &Value) -> Result<Item, DecodeError> {
        let value = match schema {
            Value::I32(_) => Value::I32(packet.i32()?),
            Value::I64(_) => Value::I64(packet.i64()?),
            Value::U32(_) => Value::U32(packet.u32()?),
            Value::U64(_) => Value::U64(packet.u64()?),
            Value::F32(_) => Value::F32(packet.f32()?),
            Value::F64(_) => Value::F64(packet.f64()?),
            Value::Bool(_) => Value::Bool(packet.bool()?),
            Value::Str(_) => Value::Str(packet.str()?.into()),
            Value::Bytes(_) => Value::Bytes(packet.bytes()?.to_vec()),
            Value::Node(items) | Value::Array(items) => {
                let mut children = Vec::with_capacity(items.len());
                let mut iter = packet.children()?;
                for item in items {
                    let child = iter.next().transpose()?.ok_or(DecodeError::WrongCount {
                        expected: items.len() as u32,
                        found: children.len() as u32,
                    })?;
                    let mut read = Item::read_like(&child, &item.value)?;
                    read.id = child.id();
                    children.push(read);
                }
                let extra = iter.count();
                if extra != 0 {
                    return Err(DecodeError::WrongCount {
                        expected: items.len() as u32,
                        found: (items.len() + extra) as u32,
                    });
                }
                match schema {
                    Value::Array(_) => Value::Array(children),
                    _ => Value::Node(children),
                }
            }
        };
        Ok(Item {
            id: packet.id(),
            value,
        })
    }
}

/// Writes a header for `tag` and a `len`-byte value; the caller checked tag and length.
fn put_header(buf: &mut impl BufMut, tag: Tag, len: usize, dialect: Dialect) {
    let written = tag::put_header(tag, len, dialect, buf);
    debug_assert!(written.is_ok(), "checked by Item::check");
}

/// Writes a header for `tag` followed by `len` value bytes that the caller writes next.
///
/// # Errors
/// [`EncodeError::InvalidTag`], [`EncodeError::TooLong`], [`EncodeError::BufferTooSmall`]
/// (for the header and the announced value together).
pub fn write_header(
    buf: &mut impl BufMut,
    dialect: Dialect,
    tag: Tag,
    len: usize,
) -> Result<(), EncodeError> {
    let n = Header::checked_len(tag, len, dialect)?;
    if buf.remaining_mut() < n + len {
        return Err(EncodeError::BufferTooSmall {
            required: (n + len) as u64,
            remaining: buf.remaining_mut() as u64,
        });
    }
    tag::put_header(tag, len, dialect, buf)
}

/// Writes a primitive packet whose value is `bytes` (a string, raw bytes, or a value
/// encoded elsewhere).
///
/// # Errors
/// As [`write_header`].
pub fn write_bytes(
    buf: &mut impl BufMut,
    dialect: Dialect,
    id: u32,
    bytes: &[u8],
) -> Result<(), EncodeError> {
    write_header(buf, dialect, Tag::primitive(id), bytes.len())?;
    buf.put_slice(bytes);
    Ok(())
}

/// Writes a primitive integer packet (`int32`, `int64`, or an unsigned value's bits).
///
/// # Errors
/// As [`write_header`].
pub fn write_int(
    buf: &mut impl BufMut,
    dialect: Dialect,
    id: u32,
    v: i64,
) -> Result<(), EncodeError> {
    let mut scratch = [0u8; MAX_SCALAR_LEN];
    let n = scalar::int_write(dialect, v, &mut scratch);
    write_bytes(buf, dialect, id, &scratch[..n])
}

/// Writes a primitive `float32` packet.
///
/// # Errors
/// As [`write_header`].
pub fn write_f32(
    buf: &mut impl BufMut,
    dialect: Dialect,
    id: u32,
    v: f32,
) -> Result<(), EncodeError> {
    let mut scratch = [0u8; MAX_SCALAR_LEN];
    let n = scalar::f32_write(v, &mut scratch);
    write_bytes(buf, dialect, id, &scratch[..n])
}

/// Writes a primitive `float64` packet.
///
/// # Errors
/// As [`write_header`].
pub fn write_f64(
    buf: &mut impl BufMut,
    dialect: Dialect,
    id: u32,
    v: f64,
) -> Result<(), EncodeError> {
    let mut scratch = [0u8; MAX_SCALAR_LEN];
    let n = scalar::f64_write(v, &mut scratch);
    write_bytes(buf, dialect, id, &scratch[..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    #[test]
    fn nested_tree() {
        let item = Item::node(
            0x01,
            vec![
                Item::new(0x02, Value::I32(-1)),
                Item::node(0x03, vec![Item::new(0x04, Value::Str("C".into()))]),
            ],
        );
        assert_eq!(
            item.to_vec(Dialect::Golang).unwrap(),
            hex!("810802017f8303040143")
        );
        assert_eq!(
            item.to_vec(Dialect::NVarInt).unwrap(),
            hex!("81080201ff8303040143")
        );
        // draft02 has no node flag.
        assert_eq!(
            item.to_vec(Dialect::Draft02).unwrap(),
            hex!("010802017f0303040143")
        );
    }

    #[test]
    fn nothing_written_on_error() {
        let item = Item::node(0x10, vec![Item::new(0x40, Value::I32(1))]);
        let mut out = Vec::new();
        assert_eq!(
            item.encode(Dialect::Golang, &mut out),
            Err(EncodeError::InvalidTag {
                tag: 0x40,
                max: 0x3f
            })
        );
        assert!(out.is_empty());
        let mut small = [0u8; 3];
        let err =
            Item::new(1, Value::Str("abcd".into())).encode(Dialect::Golang, &mut &mut small[..]);
        assert_eq!(
            err,
            Err(EncodeError::BufferTooSmall {
                required: 6,
                remaining: 3
            })
        );
    }

    #[test]
    fn writers() {
        let mut out = Vec::new();
        write_int(&mut out, Dialect::Golang, 0x11, 128).unwrap();
        write_f32(&mut out, Dialect::Golang, 0x12, 1.5).unwrap();
        assert_eq!(out, hex!("11028100 12023fc0"));
    }
}
