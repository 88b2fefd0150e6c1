//! Instruction counts per operation, for callgrind (deterministic, unlike wall-clock time on
//! a shared machine): `icount <op> <case> <iterations>` runs one operation in a loop inside
//! `measured`, so that
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*icount*measured*' \
//!     target/release/deps/icount-<hash> stream7 63 100000
//! ```
//!
//! counts the instructions of that loop alone; divide by the iterations. `scripts/icount`
//! runs every operation and case and prints the table.
//!
//! Operations (cases C03/C16/C32/C63 of `observe.rs`, key N/2 or 2): `oneshot` (a reused
//! observer fed the packet), `get` ([`y3::get`]), `stream7` (the observer fed 7-byte
//! chunks until the value completes, as the lab's `y3-stream7` feeds it), `stream7each`
//! (the same chunks through `feed_each`, which walks on to each chunk's end), `validate` (a reused validator observer fed the packet), `validatewith`
//! ([`y3::validate_with`]) and `decodewith` ([`y3::decode`]: the packet checked whole),
//! `floor` (the unchecked walk), `stream7floor` (the unchecked walk
//! fed the same 7-byte chunks, the lab's `y3-stream7-floor`: the bound of issue 30 is
//! `stream7` within 1.5 × it), and the typed envelope of the lab's
//! serde suite: `encode` (`encode_packet` into a reused buffer), `decode`
//! (`Packet::parse` + `from_packet`).
//!
//! Under valgrind the CPU reports no AVX-512, so these are the scalar paths.
#![allow(missing_docs)]

use std::hint::black_box;

use y3::{Config, Dialect, Message as _, Observer, Packet};

#[path = "common/data.rs"]
mod data;

/// The lab's serde-suite envelope (`crates/y3-lab/src/serde_suite.rs`), same fields and tags
/// (the bench cannot depend on the lab, which depends on this crate).
#[derive(Debug, Clone, Default, PartialEq, y3_derive::Message)]
struct Envelope {
    #[y3(tag = 0x10)]
    version: u32,
    #[y3(tag = 0x11)]
    kind: i32,
    #[y3(tag = 0x12)]
    qos: u32,
    #[y3(tag = 0x13)]
    seq: u64,
    #[y3(tag = 0x14)]
    host: String,
    #[y3(tag = 0x15)]
    timestamp: i64,
    #[y3(tag = 0x16)]
    id: String,
    #[y3(tag = 0x17)]
    rssi: i32,
    #[y3(tag = 0x18)]
    frame: Vec<u8>,
}

/// The lab's envelope as the lab encodes it under key 0x20 (123 bytes): version 1, kind 3,
/// qos 1, seq 1234567, host "edge-gw-07.eu-west.yomo", timestamp 1700000000123, a 36-byte
/// id, rssi -67 and a 28-byte MQTT PUBLISH frame.
const ENVELOPE: [u8; 123] = hex_literal::hex!(
    "a08078100101110103120101130480cbad071417656467652d67772d30372e65752d776573742e796f6d6f"
    "1506b1bcff95d07b162435663063386138652d336231642d346332652d396134372d3062366532663163"
    "376430631702ff3d181c321a000c796f6d6f2f6e6f6973652f3700076e6f6973653d34372e35"
);

#[path = "support/stream_floor.rs"]
mod stream_floor;
use stream_floor::StreamFloor;

#[inline(never)]
fn measured(iterations: u64, mut op: impl FnMut() -> usize) -> usize {
    let mut sum = 0usize;
    for _ in 0..iterations {
        sum = sum.wrapping_add(op());
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`: nothing to do then.
    if args.len() != 4 {
        return;
    }
    let (op, n, iterations) = (
        args[1].as_str(),
        args[2].parse::<u32>().expect("case: 3, 16, 32 or 63"),
        args[3].parse::<u64>().expect("iterations"),
    );
    let buf = data::packet(n);
    let key = if n == 3 { 2 } else { n / 2 };
    let path: &[u32] = &[0, key];
    let mut observer = Observer::new(Config::DEFAULT, &[path]).unwrap();
    let mut validator = Observer::validator(Config::DEFAULT);
    let (packet, _) = Packet::parse(&ENVELOPE).unwrap();
    let env = Envelope::from_packet(&packet).unwrap();
    let mut out = Vec::with_capacity(256);
    env.encode_packet(0x20, Dialect::Golang, &mut out).unwrap();
    assert_eq!(
        out, ENVELOPE,
        "the envelope encodes back to the lab's bytes"
    );
    let encoded = out.clone();
    let sum = match op {
        "oneshot" => measured(iterations, || {
            observer.reset();
            let fed = observer.feed(black_box(&buf)).unwrap();
            fed.observed.unwrap().value().len()
        }),
        "get" => measured(iterations, || {
            y3::get(black_box(&buf), black_box(path))
                .unwrap()
                .unwrap()
                .value()
                .len()
        }),
        "stream7" => measured(iterations, || {
            observer.reset();
            for chunk in black_box(&buf).chunks(7) {
                if let Some(v) = observer.feed(chunk).unwrap().observed {
                    return v.value().len();
                }
            }
            0
        }),
        "stream7each" => measured(iterations, || {
            observer.reset();
            let mut found = 0;
            for chunk in black_box(&buf).chunks(7) {
                observer
                    .feed_each(chunk, |v| found = v.value().len())
                    .unwrap();
                if found != 0 {
                    break;
                }
            }
            found
        }),
        "stream7floor" => {
            let mut walk = StreamFloor::new(key);
            measured(iterations, || {
                walk.reset();
                for chunk in black_box(&buf).chunks(7) {
                    if let Some(v) = walk.feed(chunk) {
                        return v.len();
                    }
                }
                0
            })
        }
        "validatewith" => measured(iterations, || {
            y3::validate_with(black_box(&buf), &Config::DEFAULT).is_ok() as usize
        }),
        "decodewith" => measured(iterations, || {
            y3::decode(black_box(&buf)).unwrap().value().len()
        }),
        "validate" => measured(iterations, || {
            validator.reset();
            validator.feed(black_box(&buf)).unwrap().consumed
        }),
        "floor" => measured(iterations, || {
            let mut i = if buf[1] & 0x80 != 0 { 3 } else { 2 };
            let buf = black_box(&buf[..]);
            while let Some(&[tag, len]) = buf.get(i..i + 2) {
                if (tag & 0x3f) as u32 == key {
                    return len as usize;
                }
                i += 2 + len as usize;
            }
            0
        }),
        "encode" => measured(iterations, || {
            out.clear();
            black_box(&env)
                .encode_packet(0x20, Dialect::Golang, &mut out)
                .unwrap();
            out.len()
        }),
        "decode" => measured(iterations, || {
            let (packet, _) = Packet::parse(black_box(&encoded)).unwrap();
            Envelope::from_packet(&packet).unwrap().seq as usize
        }),
        other => panic!("unknown operation {other}"),
    };
    println!("{op} C{n:02}: {sum}");
}
