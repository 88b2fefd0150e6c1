//! The observer with its fast path and skip runs against the general machine without them
//! (`Observer::without_skip_runs`), on crafted inputs cut into three chunks at every pair of
//! places: the cases random inputs rarely reach (a node at the depth limit, an invalid tag
//! byte that ends a chunk, negative and over-limit lengths, two-group lengths).

use hex_literal::hex;
use y3::{Config, Dialect, Limits, Observer};
use y3_harness::trace_chunks;

/// Every feed's answer (lent or assembled), position, packet count and `finish`, and the
/// same error at the same feed, for every 3-chunk split of `input`.
fn agrees_in_every_split(config: Config, path: &[u32], input: &[u8]) {
    let observer = Observer::new(config, &[path]).unwrap();
    let reference = observer.clone().without_skip_runs();
    for i in 0..=input.len() {
        for j in i..=input.len() {
            let chunks = [&input[..i], &input[i..j], &input[j..]];
            assert_eq!(
                trace_chunks(&mut observer.clone(), chunks.iter().copied()),
                trace_chunks(&mut reference.clone(), chunks.iter().copied()),
                "chunks {chunks:x?}"
            );
        }
    }
}

#[test]
fn a_node_at_the_depth_limit_is_refused_as_the_general_machine_refuses_it() {
    let config = Config::new(Dialect::Golang).with_limits(Limits {
        max_packet_len: 1 << 12,
        max_depth: 2,
    });
    // 0x01 { 0x02 { 0x03 = 7 } }: entering 0x02 would be depth 3.
    agrees_in_every_split(config, &[1, 2, 3], &hex!("81 05 82 03 03 01 07"));
    // Two packets, the first skipped whole, the path one deep.
    agrees_in_every_split(config, &[1, 3], &hex!("90 02 05 00 81 03 03 01 07"));
}

#[test]
fn a_chunk_that_ends_with_an_invalid_tag_byte_fails_at_once() {
    // 0x41 (the array flag without the node flag) after a complete child.
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &hex!("81 06 02 01 00 41 01 00"));
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &hex!("02 01 00 41 01 00"));
    // A negative length (the sign bit of a one-group PVarInt), split or not.
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &hex!("81 05 02 01 00 03 7f"));
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &hex!("02 01 00 03 7f 00 00"));
}

#[test]
fn values_nodes_and_packets_read_alike_in_every_split() {
    let packets = hex!(
        "81 0c 02 01 61 83 05 04 01 05 03 00 03 01 09"
        "02 02 ff 3f"
        "81 82 01 02 00 01" // a two-group length (1 << 7) over a short packet
    );
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &packets);
    agrees_in_every_split(Config::DEFAULT, &[1, 3, 4], &packets);
    agrees_in_every_split(Config::DEFAULT, &[2], &packets);
    // A child with a two-group length (128 bytes) skipped across chunks.
    let long: Vec<u8> = hex!("81 81 06 02 81 00")
        .into_iter()
        .chain(core::iter::repeat_n(0xaa, 128))
        .chain(hex!("03 01 07"))
        .collect();
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &long);
    // Values too long for the limit, and past their node.
    let tight = Config::new(Dialect::NVarInt).with_limits(Limits {
        max_packet_len: 8,
        max_depth: 8,
    });
    agrees_in_every_split(tight, &[1, 3], &hex!("81 06 02 01 00 03 09 00"));
    agrees_in_every_split(tight, &[1, 3], &hex!("02 09 00 00 00 00 00 00 00 00 00"));
    // A two-group length over a limit the skip runs serve (63 and up).
    let small = Config::new(Dialect::Golang).with_limits(Limits {
        max_packet_len: 100,
        max_depth: 8,
    });
    agrees_in_every_split(small, &[1, 3], &hex!("02 82 00 00 00 81 03 03 01 07"));
    agrees_in_every_split(Config::DEFAULT, &[1, 3], &hex!("81 04 02 01 00 03 05 00"));
}

/// The benches' C{n} packets (`crates/y3/benches/common/data.rs`).
#[path = "../../y3/benches/common/data.rs"]
mod data;

/// The stream loop's case (a child of a top-level node, the node longer than a chunk): the
/// C63 packet, then a packet of values longer than any chunk (taken across several) ending
/// its node, then C3, every child as the path, in chunks of 1 to 9 bytes, against the
/// general machine.
#[test]
fn a_child_of_a_long_node_reads_alike_in_chunks_of_every_size() {
    use y3::{Item, Value};
    let long = (1..=3).map(|k| Item::new(k, Value::Bytes(vec![7; 20 * k as usize])));
    let mut input = data::packet(63);
    input.extend(
        Item::node(0, long.collect())
            .to_vec(Dialect::Golang)
            .unwrap(),
    );
    input.extend(data::packet(3));
    for key in [1, 2, 3, 7, 31, 32, 62, 63, 64] {
        let observer = Observer::new(Config::DEFAULT, &[&[0, key]]).unwrap();
        let reference = observer.clone().without_skip_runs();
        for size in 1..=9 {
            assert_eq!(
                trace_chunks(&mut observer.clone(), input.chunks(size)),
                trace_chunks(&mut reference.clone(), input.chunks(size)),
                "key {key}, {size}-byte chunks"
            );
        }
    }
}

/// The stream loop's edges, in every 3-chunk split: no room in depth to enter the node, a
/// lone tag byte at the node's end (a header that cannot fit), a value that ends the node
/// with another packet after it.
#[test]
fn the_stream_loops_edges_read_alike_in_every_split() {
    let shallow = Config::new(Dialect::Golang).with_limits(Limits {
        max_packet_len: 1 << 12,
        max_depth: 1,
    });
    agrees_in_every_split(shallow, &[1, 3], &hex!("81 03 03 01 07 81 03 03 01 08"));
    agrees_in_every_split(
        Config::DEFAULT,
        &[1, 3],
        &hex!("81 04 02 01 00 05 81 03 03 01 07"),
    );
    agrees_in_every_split(
        Config::DEFAULT,
        &[1, 3],
        &hex!("81 06 02 01 00 03 01 07 81 03 03 01 08"),
    );
}

/// An observer cloned or reset in the middle of the stream loop (a value skipped, taken in
/// part, or a header cut after its tag byte) goes on as the general machine does: the clone
/// reads the rest alike (with its skip runs on or off), and after `reset` a fresh packet
/// reads as on a fresh observer.
#[test]
fn an_observer_cloned_or_reset_mid_stream_reads_alike() {
    let mut input = data::packet(63);
    input.extend(data::packet(3));
    let path: &[u32] = &[0, 32];
    let observer = Observer::new(Config::DEFAULT, &[path]).unwrap();
    let reference = observer.clone().without_skip_runs();
    let fresh = data::packet(16);
    for cut in 1..input.len() {
        let (head, rest) = input.split_at(cut);
        let mut a = observer.clone();
        let mut b = reference.clone();
        trace_chunks(&mut a, head.chunks(7));
        trace_chunks(&mut b, head.chunks(7));
        assert_eq!(
            trace_chunks(&mut a.clone(), rest.chunks(5)),
            trace_chunks(&mut b.clone(), rest.chunks(5)),
            "cloned after {cut} bytes"
        );
        // Its skip runs turned off there too (the harness's reference, made mid-stream).
        assert_eq!(
            trace_chunks(&mut a.clone().without_skip_runs(), rest.chunks(5)),
            trace_chunks(&mut b.clone(), rest.chunks(5)),
            "cloned without skip runs after {cut} bytes"
        );
        a.reset();
        assert_eq!(
            trace_chunks(&mut a, fresh.chunks(7)),
            trace_chunks(&mut observer.clone(), fresh.chunks(7)),
            "reset after {cut} bytes"
        );
    }
}
