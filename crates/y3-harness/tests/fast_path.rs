//! The complete-buffer fast path (`src/fast.rs`) against the general machine.
//!
//! The fast path answers a one-path observer (and [`y3::get`]) fed whole packets, and gives
//! up on anything else. These tests build streams where it answers and streams where it
//! must give up part-way — a mutated byte, a long length, the depth limit, a truncation —
//! and run them through the fuzz harness, which requires the same values, the same error,
//! the same position and packet count with the fast path on and off, whole and chunked.

use proptest::prelude::*;
use y3::{Config, Dialect, Item, Observer, Value};
use y3_harness::{observe_header, observe_split, trace_chunks};

/// A small tree over keys 0..=3 so that paths and siblings collide.
fn tree(depth: u32) -> impl Strategy<Value = Item> {
    let leaf = (0u32..4, prop::collection::vec(any::<u8>(), 0..80))
        .prop_map(|(k, bytes)| Item::new(k, Value::Bytes(bytes)));
    leaf.prop_recursive(depth, 24, 4, |inner| {
        (0u32..4, prop::collection::vec(inner, 0..5)).prop_map(|(k, kids)| Item::node(k, kids))
    })
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(tree(4), 1..4),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(items, edits, cut, truncate)| {
            let mut out = Vec::new();
            for item in items {
                out.extend(item.to_vec(Dialect::Golang).expect("small keys encode"));
            }
            for (at, byte) in edits {
                let i = at.index(out.len());
                out[i] = byte;
            }
            if truncate {
                out.truncate(cut.index(out.len() + 1));
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_path_agrees_with_the_general_machine(
        data in stream(),
        path in prop::collection::vec(0u8..4, 1..=3),
        nvarint in any::<bool>(),
        seed in any::<u8>(),
    ) {
        let dialect = usize::from(nvarint);
        let mut input = observe_header(dialect, &path, false, seed).to_vec();
        input.extend_from_slice(&data);
        observe_split(&input);
    }

    #[test]
    fn validation_fast_path_agrees_with_the_general_machine(
        data in stream(),
        path in prop::collection::vec(0u8..4, 1..=3),
        nvarint in any::<bool>(),
        seed in any::<u8>(),
    ) {
        // Validating: the harness also runs a validator without paths, fast path on and
        // off, and `decode_with` / `validate_with` against a walk of the parsed tree.
        let dialect = usize::from(nvarint);
        let mut input = observe_header(dialect, &path, true, seed).to_vec();
        input.extend_from_slice(&data);
        observe_split(&input);
        y3_harness::decode(&data);
    }
}

#[test]
fn small_message_get_and_observer() {
    // NoiseData under 0x10: the README's packet, through the fast path.
    let packet = hex_literal::hex!("9017110242201206aec8bbba800013093132372e302e302e31");
    let noise = y3::get(&packet, &[0x10, 0x11]).unwrap().unwrap();
    assert_eq!((noise.f32().unwrap(), noise.depth()), (40.0, 2));
    let from = y3::get(&packet, &[0x10, 0x13]).unwrap().unwrap();
    assert_eq!(from.str().unwrap(), "127.0.0.1");
    assert!(y3::get(&packet, &[0x10, 0x14]).unwrap().is_none());
    // Truncated: the fast path gives up and the machine reports the end.
    let err = y3::get(&packet[..10], &[0x10, 0x13]).unwrap_err();
    assert_eq!(err.kind(), "unexpected_end");
}

#[test]
fn fast_path_levels_opened_later_read_as_the_machine_reads() {
    // Node 0x01 { node 0x02 { 0x03 = "x", 0x03 = "y" }, 0x03 = "z" }, then node
    // 0x01 { node 0x02 { 0x03 = "w" } } and node 0x01 { node 0x02 { 0x04 = "v" } }:
    // the fast path stops inside two nodes, at their ends, and at a node's end.
    let buf =
        hex_literal::hex!("810d 8206 030178 030179 03017a  8105 8203 030177  8105 8203 040176");
    let path: &[&[u32]] = &[&[0x01, 0x02, 0x03]];
    for split in 0..=buf.len() {
        let chunks = [&buf[..split], &buf[split..]];
        let mut fast = Observer::new(Config::DEFAULT, path).unwrap();
        let mut general = Observer::new(Config::DEFAULT, path)
            .unwrap()
            .without_fast_path();
        let got = trace_chunks(&mut fast, chunks.iter().copied());
        let reference = trace_chunks(&mut general, chunks.iter().copied());
        assert_eq!(got, reference, "split {split}");
        // Reused after a reset, the deferred levels are forgotten.
        fast.reset();
        general.reset();
        assert_eq!(
            trace_chunks(&mut fast, chunks.iter().copied()),
            got,
            "split {split}, reset"
        );
    }
}
