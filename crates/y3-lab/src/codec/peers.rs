//! The peers (feature `peers`): each extracts the same value from the same pairs, encoded
//! in its own format in the data set's key order, and is checked before it is timed.
//!
//! | row | format | one op |
//! | --- | --- | --- |
//! | `protobuf-scan` | protobuf | skip-scan of the wire format with prost's `decode_key`/`skip_field`, then decode the one field |
//! | `prost-decode` | protobuf | `prost::Message::decode` of the whole record, then the field |
//! | `sonic-rs-get` | JSON | `sonic_rs::get(json, ["kK"])` (lazy, skips the rest), then the value |
//! | `simd-json-tape` | JSON | copy into a reused buffer, `to_tape_with_buffers`, object `get` |
//! | `serde_json-value` | JSON | `serde_json::from_slice::<Value>`, then `get` |
//! | `serde_json-typed` | JSON | `serde_json::from_slice` into the case's struct (borrowed strings) |
//! | `rmp-serde` | MessagePack map | `rmp_serde::from_slice` into the case's struct |
//! | `postcard` | postcard | `postcard::from_bytes` into the case's struct (no keys on the wire) |
//! | `rkyv-checked` | rkyv | `rkyv::access` (validates the archive), then the field |
//!
//! postcard and rkyv have no keys on the wire, so key order does not apply to them: they
//! run on the ascending data sets only.

use std::sync::Arc;

use anyhow::{bail, ensure, Result};
use prost::Message as _;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::records;
use super::{Impl, Prepared};
use crate::data::{value_for, Dataset, Order, Scalar};

/// A typed record's field by key.
pub trait Field {
    /// The value of key `k`, or [`Scalar::Missing`].
    fn field(&self, k: u32) -> Scalar;
}

/// A field value as a [`Scalar`].
pub trait ToScalar {
    /// The value.
    fn to_scalar(&self) -> Scalar;
}

macro_rules! to_scalar {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl ToScalar for $t {
            #[inline]
            fn to_scalar(&self) -> Scalar {
                Scalar::$v(*self)
            }
        })*
    };
}
to_scalar!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

macro_rules! archived_to_scalar {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl ToScalar for $t {
            #[inline]
            fn to_scalar(&self) -> Scalar {
                Scalar::$v(self.to_native())
            }
        })*
    };
}
// `rkyv::Archived<i32>` and friends, little-endian (rkyv's default).
archived_to_scalar!(
    rkyv::rend::i32_le => I32,
    rkyv::rend::u32_le => U32,
    rkyv::rend::i64_le => I64,
    rkyv::rend::u64_le => U64,
    rkyv::rend::f32_le => F32,
    rkyv::rend::f64_le => F64,
);

impl ToScalar for &str {
    #[inline]
    fn to_scalar(&self) -> Scalar {
        Scalar::str(self)
    }
}

impl ToScalar for String {
    #[inline]
    fn to_scalar(&self) -> Scalar {
        Scalar::str(self)
    }
}

impl ToScalar for rkyv::string::ArchivedString {
    #[inline]
    fn to_scalar(&self) -> Scalar {
        Scalar::str(self.as_str())
    }
}

/// Sets a record field from a [`Scalar`] of the same type.
pub trait FromScalar {
    /// Sets `self`; a value of another type leaves it as it is.
    fn set(&mut self, v: Scalar);
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl FromScalar for $t {
            fn set(&mut self, v: Scalar) {
                if let Scalar::$v(x) = v {
                    *self = x;
                }
            }
        })*
    };
}
from_scalar!(i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

impl FromScalar for String {
    fn set(&mut self, v: Scalar) {
        if let Scalar::Str(s) = v {
            *self = s.as_str().to_owned();
        }
    }
}

/// Borrows a record field for the serde shape (`String` → `&str`, numbers copied).
pub trait Lend<'a> {
    /// The borrowed form.
    type Out;
    /// Borrows.
    fn lend(&'a self) -> Self::Out;
}

impl<'a> Lend<'a> for String {
    type Out = &'a str;
    fn lend(&'a self) -> &'a str {
        self
    }
}

macro_rules! lend_copy {
    ($($t:ty),*) => {
        $(impl<'a> Lend<'a> for $t {
            type Out = $t;
            fn lend(&'a self) -> $t {
                *self
            }
        })*
    };
}
lend_copy!(i32, u32, i64, u64, f32, f64);

/// Runs `$body` with `$m` naming the records module of `$count` pairs.
macro_rules! with_case {
    ($count:expr, $m:ident => $body:expr) => {
        match $count {
            3 => {
                use records::c03 as $m;
                $body
            }
            16 => {
                use records::c16 as $m;
                $body
            }
            32 => {
                use records::c32 as $m;
                $body
            }
            63 => {
                use records::c63 as $m;
                $body
            }
            n => bail!("no typed record for {n} pairs"),
        }
    };
}

/// Protobuf bytes of the data set's pairs in its key order (prost's own encoders, one
/// field at a time; in ascending order this is exactly `Message::encode`).
pub fn protobuf_bytes(ds: &Dataset) -> Vec<u8> {
    use prost::encoding as pe;
    let mut buf = Vec::new();
    for &k in &ds.keys {
        match value_for(k) {
            Scalar::Str(s) => pe::string::encode(k, &s.as_str().to_owned(), &mut buf),
            Scalar::I32(v) => pe::sint32::encode(k, &v, &mut buf),
            Scalar::U32(v) => pe::uint32::encode(k, &v, &mut buf),
            Scalar::I64(v) => pe::sint64::encode(k, &v, &mut buf),
            Scalar::U64(v) => pe::uint64::encode(k, &v, &mut buf),
            Scalar::F32(v) => pe::float::encode(k, &v, &mut buf),
            Scalar::F64(v) => pe::double::encode(k, &v, &mut buf),
            Scalar::Missing => {}
        }
    }
    buf
}

/// The protobuf skip-scan: walk field keys, skip every other field by its wire type, and
/// decode only field `want` as the type of `expected`.
#[inline]
pub fn protobuf_scan(mut buf: &[u8], want: u32, expected: Scalar) -> Scalar {
    use prost::encoding::{decode_key, skip_field, DecodeContext};
    while !buf.is_empty() {
        let Ok((tag, wire_type)) = decode_key(&mut buf) else {
            return Scalar::Missing;
        };
        if tag == want {
            return protobuf_value(wire_type, buf, expected).unwrap_or(Scalar::Missing);
        }
        if skip_field(wire_type, tag, &mut buf, DecodeContext::default()).is_err() {
            return Scalar::Missing;
        }
    }
    Scalar::Missing
}

#[inline]
fn protobuf_value(
    wire_type: prost::encoding::WireType,
    mut buf: &[u8],
    expected: Scalar,
) -> Option<Scalar> {
    use prost::encoding::{self as pe, DecodeContext};
    let ctx = DecodeContext::default;
    Some(match expected {
        Scalar::Str(_) => {
            pe::check_wire_type(pe::WireType::LengthDelimited, wire_type).ok()?;
            let len = usize::try_from(pe::decode_varint(&mut buf).ok()?).ok()?;
            Scalar::str(std::str::from_utf8(buf.get(..len)?).ok()?)
        }
        Scalar::I32(_) => {
            let mut v = 0;
            pe::sint32::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::I32(v)
        }
        Scalar::U32(_) => {
            let mut v = 0;
            pe::uint32::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::U32(v)
        }
        Scalar::I64(_) => {
            let mut v = 0;
            pe::sint64::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::I64(v)
        }
        Scalar::U64(_) => {
            let mut v = 0;
            pe::uint64::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::U64(v)
        }
        Scalar::F32(_) => {
            let mut v = 0.0;
            pe::float::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::F32(v)
        }
        Scalar::F64(_) => {
            let mut v = 0.0;
            pe::double::merge(wire_type, &mut v, &mut buf, ctx()).ok()?;
            Scalar::F64(v)
        }
        Scalar::Missing => return None,
    })
}

/// The pairs as a MessagePack/serde map in the data set's key order.
struct OrderedMap<'a>(&'a [u32]);

struct ScalarSer(Scalar);

impl Serialize for ScalarSer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Scalar::Str(v) => s.serialize_str(v.as_str()),
            Scalar::I32(v) => s.serialize_i32(v),
            Scalar::U32(v) => s.serialize_u32(v),
            Scalar::I64(v) => s.serialize_i64(v),
            Scalar::U64(v) => s.serialize_u64(v),
            Scalar::F32(v) => s.serialize_f32(v),
            Scalar::F64(v) => s.serialize_f64(v),
            Scalar::Missing => s.serialize_unit(),
        }
    }
}

impl Serialize for OrderedMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for &k in self.0 {
            map.serialize_entry(&format!("k{k}"), &ScalarSer(value_for(k)))?;
        }
        map.end()
    }
}

/// MessagePack bytes (a map with the JSON keys) in the data set's key order.
///
/// # Errors
/// Serialization errors.
pub fn msgpack_bytes(ds: &Dataset) -> Result<Vec<u8>> {
    Ok(rmp_serde::to_vec_named(&OrderedMap(&ds.keys))?)
}

/// Reads a sonic-rs lazy value as the type of `expected`.
#[inline]
fn sonic_read(expected: Scalar, v: &sonic_rs::LazyValue<'_>) -> Scalar {
    use sonic_rs::JsonValueTrait;
    let got = match expected {
        Scalar::Str(_) => v.as_str().map(Scalar::str),
        Scalar::I32(_) => v
            .as_i64()
            .and_then(|x| i32::try_from(x).ok())
            .map(Scalar::I32),
        Scalar::U32(_) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Scalar::U32),
        Scalar::I64(_) => v.as_i64().map(Scalar::I64),
        Scalar::U64(_) => v.as_u64().map(Scalar::U64),
        Scalar::F32(_) => v.as_f64().map(|x| Scalar::F32(x as f32)),
        Scalar::F64(_) => v.as_f64().map(Scalar::F64),
        Scalar::Missing => None,
    };
    got.unwrap_or(Scalar::Missing)
}

/// Reads a simd-json tape value as the type of `expected`.
#[inline]
fn simd_read(expected: Scalar, v: &simd_json::tape::Value<'_, '_>) -> Scalar {
    use simd_json::prelude::*;
    let got = match expected {
        Scalar::Str(_) => v.as_str().map(Scalar::str),
        Scalar::I32(_) => v
            .as_i64()
            .and_then(|x| i32::try_from(x).ok())
            .map(Scalar::I32),
        Scalar::U32(_) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Scalar::U32),
        Scalar::I64(_) => v.as_i64().map(Scalar::I64),
        Scalar::U64(_) => v.as_u64().map(Scalar::U64),
        Scalar::F32(_) => v.cast_f64().map(|x| Scalar::F32(x as f32)),
        Scalar::F64(_) => v.cast_f64().map(Scalar::F64),
        Scalar::Missing => None,
    };
    got.unwrap_or(Scalar::Missing)
}

fn shared(bytes: Vec<u8>) -> Arc<[u8]> {
    bytes.into()
}

fn protobuf_scan_row(ds: &Dataset) -> Result<Prepared> {
    let input = shared(protobuf_bytes(ds));
    let (key, expected) = (ds.key, ds.expected);
    ensure!(
        protobuf_scan(&input, key, expected) == expected,
        "scan of encoded bytes"
    );
    Ok(Prepared::looping(input, expected, move || {
        move |buf: &[u8]| protobuf_scan(buf, key, expected)
    }))
}

fn prost_decode_row(ds: &Dataset) -> Result<Prepared> {
    let bytes = protobuf_bytes(ds);
    let (key, expected) = (ds.key, ds.expected);
    with_case!(ds.count, m => {
        let sample = m::Owned::sample();
        if ds.order == Order::Ascending {
            ensure!(bytes == sample.encode_to_vec(), "prost encodes ascending order the same");
        }
        ensure!(m::Owned::decode(bytes.as_slice())? == sample, "protobuf decodes to the pairs");
        Ok(Prepared::looping(shared(bytes), expected, move || {
            move |buf: &[u8]| match m::Owned::decode(buf) {
                Ok(o) => o.field(key),
                Err(_) => Scalar::Missing,
            }
        }))
    })
}

fn sonic_row(ds: &Dataset) -> Result<Prepared> {
    let input = shared(ds.json.clone());
    let (expected, name) = (ds.expected, format!("k{}", ds.key));
    Ok(Prepared::looping(input, expected, move || {
        let name = name.clone();
        move |buf: &[u8]| match sonic_rs::get(buf, [name.as_str()]) {
            Ok(v) => sonic_read(expected, &v),
            Err(_) => Scalar::Missing,
        }
    }))
}

fn simd_row(ds: &Dataset) -> Result<Prepared> {
    let input = shared(ds.json.clone());
    let (expected, name) = (ds.expected, format!("k{}", ds.key));
    let len = input.len();
    Ok(Prepared::looping(input, expected, move || {
        let name = name.clone();
        let mut scratch = Vec::with_capacity(len);
        let mut buffers = simd_json::Buffers::new(len);
        move |buf: &[u8]| {
            scratch.clear();
            scratch.extend_from_slice(buf);
            match simd_json::to_tape_with_buffers(&mut scratch, &mut buffers) {
                Ok(tape) => tape
                    .as_value()
                    .get(name.as_str())
                    .map_or(Scalar::Missing, |v| simd_read(expected, &v)),
                Err(_) => Scalar::Missing,
            }
        }
    }))
}

fn serde_value_row(ds: &Dataset) -> Result<Prepared> {
    let input = shared(ds.json.clone());
    let (expected, name) = (ds.expected, format!("k{}", ds.key));
    Ok(Prepared::looping(input, expected, move || {
        let name = name.clone();
        move |buf: &[u8]| match serde_json::from_slice::<serde_json::Value>(buf) {
            Ok(v) => v
                .get(name.as_str())
                .map_or(Scalar::Missing, |v| expected.read_json(v)),
            Err(_) => Scalar::Missing,
        }
    }))
}

fn serde_typed_row(ds: &Dataset) -> Result<Prepared> {
    let (key, expected) = (ds.key, ds.expected);
    with_case!(ds.count, m => {
        let sample = m::Owned::sample();
        ensure!(
            serde_json::from_slice::<m::Borrowed>(&ds.json)? == sample.borrowed(),
            "JSON decodes to the typed record"
        );
        Ok(Prepared::looping(shared(ds.json.clone()), expected, move || {
            move |buf: &[u8]| match serde_json::from_slice::<m::Borrowed>(buf) {
                Ok(r) => r.field(key),
                Err(_) => Scalar::Missing,
            }
        }))
    })
}

fn rmp_row(ds: &Dataset) -> Result<Prepared> {
    let (key, expected) = (ds.key, ds.expected);
    let bytes = msgpack_bytes(ds)?;
    with_case!(ds.count, m => {
        let sample = m::Owned::sample();
        ensure!(
            rmp_serde::from_slice::<m::Borrowed>(&bytes)? == sample.borrowed(),
            "MessagePack decodes to the typed record"
        );
        Ok(Prepared::looping(shared(bytes), expected, move || {
            move |buf: &[u8]| match rmp_serde::from_slice::<m::Borrowed>(buf) {
                Ok(r) => r.field(key),
                Err(_) => Scalar::Missing,
            }
        }))
    })
}

fn postcard_row(ds: &Dataset) -> Result<Prepared> {
    let (key, expected) = (ds.key, ds.expected);
    with_case!(ds.count, m => {
        let sample = m::Owned::sample();
        let bytes = postcard::to_allocvec(&sample.borrowed())?;
        ensure!(
            postcard::from_bytes::<m::Borrowed>(&bytes)? == sample.borrowed(),
            "postcard decodes to the typed record"
        );
        Ok(Prepared::looping(shared(bytes), expected, move || {
            move |buf: &[u8]| match postcard::from_bytes::<m::Borrowed>(buf) {
                Ok(r) => r.field(key),
                Err(_) => Scalar::Missing,
            }
        }))
    })
}

fn rkyv_row(ds: &Dataset) -> Result<Prepared> {
    let (key, expected) = (ds.key, ds.expected);
    with_case!(ds.count, m => {
        let bytes = m::rkyv_bytes(&m::Owned::sample())?;
        for k in 1..=ds.count {
            ensure!(m::rkyv_field(&bytes, k) == value_for(k), "rkyv field k{k}");
        }
        Ok(Prepared::looping(bytes, expected, move || {
            move |buf: &[u8]| m::rkyv_field(buf, key)
        }))
    })
}

/// The peer rows.
pub(super) fn impls() -> Vec<Impl> {
    vec![
        Impl {
            name: "protobuf-scan",
            format: "protobuf",
            op: "scan",
            about: "protobuf skip-scan (prost decode_key/skip_field), decode one field",
            prepare: protobuf_scan_row,
            keyed: true,
        },
        Impl {
            name: "prost-decode",
            format: "protobuf",
            op: "decode+field",
            about: "prost Message::decode of the whole record, then the field",
            prepare: prost_decode_row,
            keyed: true,
        },
        Impl {
            name: "sonic-rs-get",
            format: "json",
            op: "get",
            about: "sonic_rs::get(json, [\"kK\"]): lazy get, skips the rest",
            prepare: sonic_row,
            keyed: true,
        },
        Impl {
            name: "simd-json-tape",
            format: "json",
            op: "parse+get",
            about: "simd-json: copy to a reused buffer, to_tape_with_buffers, get",
            prepare: simd_row,
            keyed: true,
        },
        Impl {
            name: "serde_json-value",
            format: "json",
            op: "parse+get",
            about: "serde_json::from_slice::<Value>, then get",
            prepare: serde_value_row,
            keyed: true,
        },
        Impl {
            name: "serde_json-typed",
            format: "json",
            op: "decode+field",
            about: "serde_json::from_slice into the case's struct (borrowed strings)",
            prepare: serde_typed_row,
            keyed: true,
        },
        Impl {
            name: "rmp-serde",
            format: "msgpack",
            op: "decode+field",
            about: "rmp_serde::from_slice of a MessagePack map into the case's struct",
            prepare: rmp_row,
            keyed: true,
        },
        Impl {
            name: "postcard",
            format: "postcard",
            op: "decode+field",
            about: "postcard::from_bytes into the case's struct (no keys on the wire)",
            prepare: postcard_row,
            keyed: false,
        },
        Impl {
            name: "rkyv-checked",
            format: "rkyv",
            op: "access+field",
            about: "rkyv::access (validates the archive), then the field",
            prepare: rkyv_row,
            keyed: false,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_scan_finds_every_key_in_both_orders() {
        for ds in [
            Dataset::ascending(63, 32).unwrap(),
            Dataset::published(63, 32, 9).unwrap(),
        ] {
            let bytes = protobuf_bytes(&ds);
            for k in 1..=63 {
                assert_eq!(protobuf_scan(&bytes, k, value_for(k)), value_for(k), "k{k}");
            }
            assert_eq!(protobuf_scan(&bytes, 64, Scalar::I32(0)), Scalar::Missing);
        }
    }

    #[test]
    fn msgpack_keeps_the_key_order() {
        let ds = Dataset::published(16, 8, 3).unwrap();
        let bytes = msgpack_bytes(&ds).unwrap();
        let first = format!("k{}", ds.keys[0]);
        // map16 header (de 00 10), then the first key as a fixstr (a2/a3 + text).
        assert_eq!(bytes[..3], [0xde, 0x00, 0x10]);
        assert_eq!(&bytes[4..4 + first.len()], first.as_bytes());
    }
}
