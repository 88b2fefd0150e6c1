//! The y3 rows, always compiled.
//!
//! - `y3-observe`: one [`Observer`] per thread, reset and fed the whole packet per op (the
//!   stream-function pattern: the subscription is set up once).
//! - `y3-stream7`: the same observer fed 7-byte chunks until the value completes.
//! - `y3-get`: [`y3::get`], which sets up a fresh observer per call.
//! - `y3-decode`: [`y3::decode`] (validates every header of the packet), then
//!   [`Packet::child`](y3::Packet::child): the "full decode, then find" method.
//! - `y3-floor`: not a codec: a walk that trusts every length (no limit, no bounds within
//!   the node, one-byte child headers assumed), then the value read as the other rows read
//!   it. The latency floor of walking these TLVs, measured in the same run so that the
//!   codec's ratio to it (issue 14: one-shot within 1.3× the floor plus 3 ns) is a same-run
//!   number.
//! - `y3-stream7-floor`: not a codec either: the same trusting walk fed 7-byte chunks, its
//!   place kept between chunks (the streaming floor `y3-stream7` is measured against: no
//!   check, no error, no nesting beyond the root).

use std::sync::Arc;

use anyhow::Result;
use y3::{Config, Fed, Observer};

use super::{Impl, Prepared};
use crate::data::{Dataset, Scalar};

pub(super) fn impls() -> Vec<Impl> {
    vec![
        Impl {
            name: "y3-observe",
            format: "y3",
            op: "observe",
            about: "y3 Observer (one per thread), reset and fed the whole packet",
            prepare: observe,
            keyed: true,
        },
        Impl {
            name: "y3-stream7",
            format: "y3",
            op: "observe (7-byte chunks)",
            about: "y3 Observer fed the packet in 7-byte chunks until the value completes",
            prepare: stream7,
            keyed: true,
        },
        Impl {
            name: "y3-get",
            format: "y3",
            op: "get",
            about: "y3::get: a fresh observer per call",
            prepare: get,
            keyed: true,
        },
        Impl {
            name: "y3-floor",
            format: "y3",
            op: "unchecked walk",
            about: "the floor: a TLV walk trusting every length (not a codec)",
            prepare: floor,
            keyed: true,
        },
        Impl {
            name: "y3-stream7-floor",
            format: "y3",
            op: "unchecked walk (7-byte chunks)",
            about: "the streaming floor: the unchecked walk fed 7-byte chunks (not a codec)",
            prepare: stream7_floor,
            keyed: true,
        },
        Impl {
            name: "y3-decode",
            format: "y3",
            op: "validate+find",
            about: "y3::decode (every header checked), then Packet::child",
            prepare: decode,
            keyed: true,
        },
    ]
}

fn observer(key: u32) -> Observer {
    // Two keys, one path: never refused.
    Observer::new(Config::DEFAULT, &[&[0, key]]).expect("a valid path")
}

fn observe(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        let mut obs = observer(key);
        move |buf: &[u8]| {
            obs.reset();
            // Read in place: moving the `Fed` out copies it wider than it was written.
            match &obs.feed(buf) {
                Ok(Fed {
                    observed: Some(v), ..
                }) => expected.read_y3(v),
                _ => Scalar::Missing,
            }
        }
    }))
}

fn stream7(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        let mut obs = observer(key);
        move |buf: &[u8]| {
            obs.reset();
            for chunk in buf.chunks(7) {
                // Read in place, as `observe` does.
                match &obs.feed(chunk) {
                    Ok(Fed {
                        observed: Some(v), ..
                    }) => return expected.read_y3(v),
                    Ok(_) => {}
                    Err(_) => return Scalar::Missing,
                }
            }
            Scalar::Missing
        }
    }))
}

fn get(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        move |buf: &[u8]| match y3::get(buf, &[0, key]) {
            Ok(Some(p)) => expected.read_y3(&p),
            _ => Scalar::Missing,
        }
    }))
}

fn decode(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        move |buf: &[u8]| match y3::decode(buf).and_then(|root| root.child(key)) {
            Ok(Some(p)) => expected.read_y3(&p),
            _ => Scalar::Missing,
        }
    }))
}

/// The unchecked walk: the root header, then `tag len value` children with one-byte lengths,
/// checking nothing but the slice bounds Rust checks anyway.
fn floor_find(buf: &[u8], key: u32) -> Option<y3::Packet<'_>> {
    let mut i = if buf.get(1)? & 0x80 != 0 { 3 } else { 2 };
    while let Some(&[tag, len]) = buf.get(i..i + 2) {
        if (tag & 0x3f) as u32 == key {
            let value = buf.get(i + 2..i + 2 + len as usize)?;
            return Some(y3::Packet::from_value(
                y3::Tag::primitive(key),
                value,
                Config::DEFAULT,
            ));
        }
        i += 2 + len as usize;
    }
    None
}

fn floor(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        move |buf: &[u8]| floor_find(buf, key).map_or(Scalar::Missing, |p| expected.read_y3(&p))
    }))
}

// The one copy of the walk across chunks, shared with the codec's instruction counts.
#[path = "../../../y3/benches/support/stream_floor.rs"]
mod stream_floor;
use stream_floor::StreamFloor;

fn stream7_floor(ds: &Dataset) -> Result<Prepared> {
    let input: Arc<[u8]> = ds.y3.clone().into();
    let (key, expected) = (ds.key, ds.expected);
    Ok(Prepared::looping(input, expected, move || {
        let mut walk = StreamFloor::new(key);
        move |buf: &[u8]| {
            walk.reset();
            for chunk in buf.chunks(7) {
                if let Some(v) = walk.feed(chunk) {
                    let p = y3::Packet::from_value(y3::Tag::primitive(key), v, Config::DEFAULT);
                    return expected.read_y3(&p);
                }
            }
            Scalar::Missing
        }
    }))
}
