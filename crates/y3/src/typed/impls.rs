//! [`FieldValue`](super::FieldValue) for numbers, bools, strings, byte strings, `Option`,
//! `Box`, `Vec` and arrays.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::{BufMut, Bytes};

use super::wire::*;
use super::{Element, FieldValue, Shape};
use crate::scalar::{self, MAX_SCALAR_LEN};
use crate::tag::Header;
use crate::{DecodeError, Dialect, EncodeError, Packet, Tag};

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
                scalar::int_len(dialect, $to)
            }

            #[inline]
            fn encode_value(
                &self,
                dialect: Dialect,
                buf: &mut impl BufMut,
            ) -> Result<(), EncodeError> {
                let $v = *self;
                put_scalar(buf, |out| scalar::int_write(dialect, $to, out))
            }

            #[inline(always)]
            fn encode_tagged(
                &self,
                tag: Tag,
                dialect: Dialect,
                buf: &mut impl BufMut,
            ) -> Result<(), EncodeError> {
                match (dialect, tag.byte()) {
                    (Dialect::Golang, Some(t)) => {
                        let $v = *self;
                        put_int_packet(t, $to, buf);
                        Ok(())
                    }
                    _ => put_header_and_value(tag, self, dialect, buf),
                }
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

float_field!(f32, f32, scalar::f32_len, scalar::f32_write);
float_field!(f64, f64, scalar::f64_len, scalar::f64_write);

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
