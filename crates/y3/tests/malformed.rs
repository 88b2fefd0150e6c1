//! Hostile inputs built by hand, with their byte layout, and the reference libraries'
//! malformed-input behaviour (`testdata/vectors/malformed-behaviour.json`) held against ours.
//!
//! Every case must end in a typed error (or a value we accept on purpose), never a panic,
//! an allocation sized by the wire or unbounded recursion.

use hex_literal::hex;
use y3::encode::write_header;
use y3::{
    decode, decode_with, validate_with, Config, DecodeError, Dialect, Limits, Observer, Packet, Tag,
};

const GOLANG: Config = Config::DEFAULT;
const NVARINT: Config = Config::new(Dialect::NVarInt);
const DRAFT02: Config = Config::new(Dialect::Draft02);

/// Feeds `input` into a fresh validator in chunks of `chunk` bytes, then finishes.
fn validate_chunked(input: &[u8], chunk: usize, config: Config) -> Result<(), DecodeError> {
    let mut observer = Observer::validator(config);
    for piece in input.chunks(chunk.max(1)) {
        observer.feed(piece)?;
    }
    observer.finish()
}

/// Every value observed at `path` and how the stream ended, fed in chunks of `chunk` bytes.
fn observe(
    input: &[u8],
    path: &[u32],
    chunk: usize,
    config: Config,
) -> (Vec<Vec<u8>>, Result<(), DecodeError>) {
    let mut observer = Observer::new(config, &[path]).unwrap();
    let mut seen = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        if let Err(e) = observer.feed_each(piece, |v| seen.push(v.value().to_vec())) {
            return (seen, Err(e));
        }
    }
    (seen, observer.finish())
}

fn kind<T>(result: Result<T, DecodeError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.kind(),
    }
}

// ---------------------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------------------

/// Valid packets to cut short, with a path to a leaf inside each.
fn valid_packets() -> Vec<(Config, Vec<u8>, Vec<u32>)> {
    let long = y3::Item::node(
        0x10,
        vec![
            y3::Item::new(0x11, y3::Value::Str("x".repeat(200))),
            y3::Item::array(
                0x12,
                vec![
                    y3::Item::new(0, y3::Value::I64(i64::MIN)),
                    y3::Item::new(0, y3::Value::F64(0.1)),
                ],
            ),
        ],
    );
    vec![
        // 90 17                      node 0x10, 23 bytes
        //   11 02 42 20              float32 0x11 = 40.0
        //   12 06 ae c8 bb ba 80 00  int64 0x12 = 1600000000000
        //   13 09 31 32 37 ...       string 0x13 = "127.0.0.1"
        (
            GOLANG,
            hex!("9017110242201206aec8bbba800013093132372e302e302e31").to_vec(),
            vec![0x10, 0x13],
        ),
        // 81 08                      node 0x01, 8 bytes
        //   02 01 7f                 int32 0x02 = -1
        //   83 03                    node 0x03, 3 bytes
        //     04 01 43               string 0x04 = "C"
        (
            GOLANG,
            hex!("810802017f8303040143").to_vec(),
            vec![0x01, 0x03, 0x04],
        ),
        // The same tree in nvarint (-1 is ff).
        (
            NVARINT,
            hex!("81080201ff8303040143").to_vec(),
            vec![0x01, 0x03, 0x04],
        ),
        // 90 81 5a (length 218 as PVarInt 81 5a), 11 81 48 + 200 x "x", array d2 ...
        (
            GOLANG,
            long.to_vec(Dialect::Golang).unwrap(),
            vec![0x10, 0x11],
        ),
        (
            NVARINT,
            long.to_vec(Dialect::NVarInt).unwrap(),
            vec![0x10, 0x12],
        ),
        // draft02: 82 2c 80 40 = tag 300, length 64, then 64 bytes.
        (
            DRAFT02,
            [&hex!("822c8040")[..], &[0x61; 64]].concat(),
            vec![300],
        ),
    ]
}

/// Bytes of the top-level header of `buf`.
fn top_header_len(buf: &[u8], config: &Config) -> usize {
    let (packet, _) = Packet::parse_with(buf, config).unwrap();
    packet.encoded_len() - packet.value().len()
}

#[test]
fn truncation_at_every_byte_is_unexpected_end() {
    for (config, buf, path) in valid_packets() {
        assert!(decode_with(&buf, &config).is_ok());
        let total = buf.len() as u64;
        let head = top_header_len(&buf, &config);
        for cut in 0..buf.len() {
            let prefix = &buf[..cut];
            // What is missing: the rest of the outermost packet, or at least one header byte.
            let needed = if cut < head { 1 } else { total - cut as u64 };
            let missing = Err(DecodeError::UnexpectedEnd { needed });
            assert_eq!(
                decode_with(prefix, &config).map(|_| ()),
                missing,
                "cut {cut}"
            );
            assert_eq!(
                Packet::parse_with(prefix, &config).map(|_| ()),
                missing,
                "cut {cut}"
            );
            // Streaming: nothing is wrong until the end is declared. An empty stream is a
            // complete stream of zero packets.
            let streamed = if cut == 0 { Ok(()) } else { missing };
            for chunk in [1, 3, cut.max(1)] {
                assert_eq!(
                    validate_chunked(prefix, chunk, config),
                    streamed,
                    "cut {cut}"
                );
                assert_eq!(
                    observe(prefix, &path, chunk, config).1,
                    streamed,
                    "cut {cut}"
                );
            }
        }
    }
}

#[test]
fn length_beyond_input() {
    // 11 05 01: int32 0x11 declares 5 bytes, 1 arrived.
    let buf = hex!("11 05 01");
    assert_eq!(decode(&buf), Err(DecodeError::UnexpectedEnd { needed: 4 }));
    assert_eq!(
        validate_chunked(&buf, 1, GOLANG),
        Err(DecodeError::UnexpectedEnd { needed: 4 })
    );
    // 81 05 | 11 01 01: the node declares 5 bytes, holds 3 (the reference panics here).
    let buf = hex!("81 05 11 01 01");
    assert_eq!(decode(&buf), Err(DecodeError::UnexpectedEnd { needed: 2 }));
    assert_eq!(
        observe(&buf, &[0x01, 0x11], 1, GOLANG),
        (
            vec![vec![0x01]],
            Err(DecodeError::UnexpectedEnd { needed: 2 })
        )
    );
}

// ---------------------------------------------------------------------------------------
// Lengths over the limit
// ---------------------------------------------------------------------------------------

/// 11 87 ff ff ff 7f: int32 0x11 declaring i32::MAX (2^31 - 1) bytes, the largest length.
const HUGE: [u8; 6] = hex!("11 87 ff ff ff 7f");

#[test]
fn length_over_limit_is_too_long_on_the_header() {
    let too_long = DecodeError::TooLong {
        declared: i32::MAX as u64,
        limit: Limits::DEFAULT.max_packet_len,
    };
    assert_eq!(decode(&HUGE), Err(too_long));
    assert_eq!(Packet::parse(&HUGE).map(|_| ()), Err(too_long));
    // Streaming, one byte at a time: refused as the last length byte arrives.
    let mut observer = Observer::new(GOLANG, &[&[0x11]]).unwrap();
    for (i, byte) in HUGE.iter().enumerate() {
        let fed = observer.feed(std::slice::from_ref(byte));
        if i + 1 < HUGE.len() {
            assert!(fed.unwrap().observed.is_none());
        } else {
            assert_eq!(fed.unwrap_err(), too_long);
        }
    }
    // Inside a node: 81 06 | 11 87 ff ff ff 7f, the child header is refused the same way.
    let nested = hex!("81 06 11 87 ff ff ff 7f");
    assert_eq!(decode(&nested), Err(too_long));
    assert_eq!(Packet::parse(&nested).unwrap().0.child(0x11), Err(too_long));
    // The limit is inclusive: 100 (80 64) passes the header check, 101 (80 65) does not.
    let config = GOLANG.with_limits(Limits {
        max_packet_len: 100,
        max_depth: 8,
    });
    assert_eq!(
        decode_with(&hex!("11 80 64"), &config),
        Err(DecodeError::UnexpectedEnd { needed: 100 })
    );
    assert_eq!(
        decode_with(&hex!("11 80 65"), &config),
        Err(DecodeError::TooLong {
            declared: 101,
            limit: 100
        })
    );
}

/// Virtual memory of this process in KiB (Linux), to see a reservation sized by the wire.
fn vm_size_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn huge_declared_length_allocates_only_what_arrived() {
    // With the limit raised to i32::MAX the header is accepted; the observer must then hold
    // only the bytes that arrived, never reserve the declared 2 GiB.
    let config = GOLANG.with_limits(Limits {
        max_packet_len: i32::MAX as u64,
        max_depth: 8,
    });
    assert_eq!(
        decode_with(&HUGE, &config),
        Err(DecodeError::UnexpectedEnd {
            needed: i32::MAX as u64
        })
    );
    let before = vm_size_kib();
    let mut observer = Observer::new(config, &[&[0x11]]).unwrap();
    let arrived = 64 * 1024;
    let body = vec![0x61u8; arrived];
    for byte in HUGE.iter().chain(&body) {
        let fed = observer.feed(std::slice::from_ref(byte)).unwrap();
        assert!(fed.observed.is_none());
    }
    assert_eq!(
        observer.finish(),
        Err(DecodeError::UnexpectedEnd {
            needed: i32::MAX as u64 - arrived as u64
        })
    );
    if let (Some(before), Some(after)) = (before, vm_size_kib()) {
        // Other tests run in parallel threads; a 2 GiB reservation would still stand out.
        assert!(
            after.saturating_sub(before) < 1024 * 1024,
            "VmSize grew from {before} KiB to {after} KiB"
        );
    }
    // Skipped (not subscribed) huge values are counted down, never buffered.
    let mut skipper = Observer::new(config, &[&[0x12]]).unwrap();
    skipper.feed(&HUGE).unwrap();
    skipper.feed(&body).unwrap();
    assert_eq!(
        skipper.finish(),
        Err(DecodeError::UnexpectedEnd {
            needed: i32::MAX as u64 - arrived as u64
        })
    );
}

// ---------------------------------------------------------------------------------------
// Depth
// ---------------------------------------------------------------------------------------

/// `levels` nested nodes 0x01, each the only child of the one above, the innermost empty:
///
/// ```text
/// 81 L(n-1) | 81 L(n-2) | ... | 81 01 | 81 00
/// ```
///
/// Lengths are PVarInt, so 10,000 levels take about 40 KB.
fn deep_chain(levels: usize) -> Vec<u8> {
    let mut headers = Vec::with_capacity(levels);
    let mut len = 0usize;
    for _ in 0..levels {
        let mut head = Vec::new();
        write_header(&mut head, Dialect::Golang, Tag::node(0x01), len).unwrap();
        len += head.len();
        headers.push(head);
    }
    headers.into_iter().rev().flatten().collect()
}

#[test]
fn deep_nesting_is_too_deep_without_recursion() {
    let chain = deep_chain(10_000);
    assert!(chain.len() < 48 * 1024, "{} bytes", chain.len());
    let too_deep = Err(DecodeError::TooDeep {
        limit: Limits::DEFAULT.max_depth,
    });
    assert_eq!(decode(&chain).map(|_| ()), too_deep);
    assert_eq!(validate_with(&chain, &GOLANG), too_deep);
    // The first 3 KB already hold more than 64 levels: refused before the rest arrives.
    assert_eq!(validate_chunked(&chain[..3 * 1024], 1, GOLANG), too_deep);
    // Navigating the view hits the same limit at depth 64.
    let (mut packet, _) = Packet::parse(&chain).unwrap();
    let mut depth = 1;
    loop {
        match packet.children() {
            Ok(mut children) => packet = children.next().unwrap().unwrap(),
            Err(e) => {
                assert_eq!(Err::<(), _>(e), too_deep);
                break;
            }
        }
        depth += 1;
    }
    assert_eq!(depth, Limits::DEFAULT.max_depth);

    // With the limit lifted, the whole chain is walked on a 256 KiB stack: the observer keeps
    // its node stack on the heap, so 10,000 levels cannot overflow the call stack.
    let unlimited = GOLANG.with_limits(Limits {
        max_packet_len: Limits::DEFAULT.max_packet_len,
        max_depth: 20_000,
    });
    let walked = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let whole = validate_with(&chain, &unlimited);
            let bytewise = validate_chunked(&chain, 1, unlimited);
            let (seen, end) = observe(&chain, &[0x01; 16], 7, unlimited);
            (whole, bytewise, seen.len(), end)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(walked, (Ok(()), Ok(()), 1, Ok(())));
}

// ---------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------

#[test]
fn invalid_utf8_on_string_access() {
    // 11 02 c3 28: a two-byte sequence whose second byte is not a continuation.
    let p = decode(&hex!("11 02 c3 28")).unwrap();
    assert_eq!(p.str(), Err(DecodeError::InvalidUtf8 { valid_up_to: 0 }));
    assert_eq!(p.bytes(), Ok(&hex!("c3 28")[..]), "bytes stay readable");
    // 11 03 61 ff 62: "a", a byte that never occurs in UTF-8, "b".
    let p = decode(&hex!("11 03 61 ff 62")).unwrap();
    assert_eq!(p.str(), Err(DecodeError::InvalidUtf8 { valid_up_to: 1 }));
    // 11 02 61 e2: a three-byte sequence cut after its first byte.
    let p = decode(&hex!("11 02 61 e2")).unwrap();
    assert_eq!(p.str(), Err(DecodeError::InvalidUtf8 { valid_up_to: 1 }));
    // 90 05 | 12 03 ed a0 80: an encoded UTF-16 surrogate, observed across chunks.
    let buf = hex!("90 05 12 03 ed a0 80");
    let mut observer = Observer::new(GOLANG, &[&[0x10, 0x12]]).unwrap();
    let mut errors = Vec::new();
    for piece in buf.chunks(2) {
        observer
            .feed_each(piece, |v| errors.push(v.str().unwrap_err()))
            .unwrap();
    }
    assert_eq!(errors, [DecodeError::InvalidUtf8 { valid_up_to: 0 }]);
}

#[test]
fn overlong_varints() {
    // Lengths are PVarInt32 of at most 5 bytes.
    // 11 80 80 80 80 80 01: a sixth length byte.
    assert_eq!(
        decode(&hex!("11 80 80 80 80 80 01")),
        Err(DecodeError::VarintOverflow { len: 6, bits: 32 })
    );
    // 11 88 80 80 80 00: 2^31, one past i32::MAX.
    assert_eq!(
        decode(&hex!("11 88 80 80 80 00")),
        Err(DecodeError::VarintOverflow { len: 5, bits: 32 })
    );
    // 11 80 80 80 80 05 + 5 bytes: 5 written in five bytes is redundant but in range: accepted.
    let p = decode(&hex!("11 80 80 80 80 05 0102030405")).unwrap();
    assert_eq!(p.value().len(), 5);
    // Inside a node the same length error surfaces from the child header:
    // 81 07 | 11 80 80 80 80 80 01.
    assert_eq!(
        decode(&hex!("81 07 11 80 80 80 80 80 01")),
        Err(DecodeError::VarintOverflow { len: 6, bits: 32 })
    );

    // Values: a PVarInt that does not fit its type.
    // 11 06 81 81 81 81 81 01: 36 significant bits, read as int32.
    let p = decode(&hex!("11 06 81 81 81 81 81 01")).unwrap();
    assert_eq!(
        p.i32(),
        Err(DecodeError::VarintOverflow { len: 6, bits: 32 })
    );
    assert_eq!(
        p.i64(),
        Ok((1 << 35) + 270_549_121),
        "the reference truncates to 270549121"
    );
    // 11 0b 81 80 80 80 80 80 80 80 80 80 00: 11 bytes, 71 bits, read as int64.
    let p = decode(&hex!("11 0b 81 80 80 80 80 80 80 80 80 80 00")).unwrap();
    assert_eq!(p.i64().unwrap_err().kind(), "varint_overflow");
    // ff 80 80 80 80 80 80 80 80 00 is i64::MIN in ten bytes, the longest valid int64.
    let p = decode(&hex!("11 0a ff 80 80 80 80 80 80 80 80 00")).unwrap();
    assert_eq!(p.i64(), Ok(i64::MIN));
    // 11 01 80: a continuation bit on the last byte of the value.
    let p = decode(&hex!("11 01 80")).unwrap();
    assert_eq!(p.i32(), Err(DecodeError::VarintUnterminated { len: 1 }));
    // nvarint: 9 bytes cannot be an int64.
    let p = decode_with(&hex!("11 09 01 00 00 00 00 00 00 00 00"), &NVARINT).unwrap();
    assert_eq!(p.i64().unwrap_err().kind(), "varint_overflow");
    // draft02 tags are at most four 7-bit groups: 80 80 80 80 01 is a fifth.
    assert_eq!(
        decode_with(&hex!("80 80 80 80 01 00"), &DRAFT02)
            .unwrap_err()
            .kind(),
        "varint_overflow"
    );
}

#[test]
fn negative_lengths() {
    // One-byte PVarInt with the sign bit (0x40) set: 7f = -1, 40 = -64.
    for (buf, declared) in [
        (&hex!("11 7f")[..], -1),
        (&hex!("11 40 01")[..], -64),
        // ff 7f: -1 with a redundant sign group.
        (&hex!("11 ff 7f")[..], -1),
        // f8 80 80 80 00: i32::MIN.
        (&hex!("11 f8 80 80 80 00")[..], i32::MIN as i64),
        // Node 0x01 whose own length is negative.
        (&hex!("81 7f")[..], -1),
        // 81 02 | 11 7f: a child with a negative length.
        (&hex!("81 02 11 7f")[..], -1),
    ] {
        let negative = DecodeError::NegativeLength { declared };
        for config in [GOLANG, NVARINT, DRAFT02] {
            // draft02 has no node flag; 81 is the first byte of a two-byte tag there.
            if config.dialect == Dialect::Draft02 && buf[0] & 0x80 != 0 {
                continue;
            }
            assert_eq!(
                decode_with(buf, &config).map(|_| ()),
                Err(negative),
                "{buf:x?}"
            );
            assert_eq!(validate_chunked(buf, 1, config), Err(negative), "{buf:x?}");
        }
    }
}

#[test]
fn array_flag_on_a_primitive_is_an_invalid_tag() {
    // 0x40..=0x7f: array flag without the node flag. The reference reads 51 as key 0x11.
    for tag in [0x40u8, 0x51, 0x7f] {
        let buf = [tag, 0x01, 0x05];
        for config in [GOLANG, NVARINT] {
            assert_eq!(
                decode_with(&buf, &config).map(|_| ()),
                Err(DecodeError::InvalidTag { tag: tag as u32 })
            );
        }
        // In draft02 the same byte is simply key 0x40..=0x7f.
        assert_eq!(decode_with(&buf, &DRAFT02).unwrap().id(), tag as u32);
    }
    // 81 03 | 51 01 05: as a child, refused by the walk and by the view alike.
    let buf = hex!("81 03 51 01 05");
    let invalid = DecodeError::InvalidTag { tag: 0x51 };
    assert_eq!(decode(&buf).map(|_| ()), Err(invalid));
    assert_eq!(Packet::parse(&buf).unwrap().0.child(0x11), Err(invalid));
    assert_eq!(observe(&buf, &[0x01, 0x11], 1, GOLANG).1, Err(invalid));
}

#[test]
fn child_overflow_and_truncated_child_headers() {
    let cases: [(&[u8], DecodeError); 6] = [
        // 81 03 | 11 05 01: the child declares 5 bytes, its node has 1 left.
        (
            &hex!("81 03 11 05 01"),
            DecodeError::ChildOverflow {
                declared: 5,
                available: 1,
            },
        ),
        // 82 04 | 11 81 00 00: a two-byte child length (128) over 1 byte left.
        (
            &hex!("82 04 11 81 00 00"),
            DecodeError::ChildOverflow {
                declared: 128,
                available: 1,
            },
        ),
        // 81 05 | 11 01 05 | 12 05: the second child declares 5, nothing left.
        (
            &hex!("81 05 11 01 05 12 05"),
            DecodeError::ChildOverflow {
                declared: 5,
                available: 0,
            },
        ),
        // 81 04 | 82 03 | 11 01: a node inside a node overflowing it.
        (
            &hex!("81 04 82 03 11 01"),
            DecodeError::ChildOverflow {
                declared: 3,
                available: 2,
            },
        ),
        // 81 01 | 11: a child that is a lone tag byte.
        (
            &hex!("81 01 11"),
            DecodeError::TruncatedHeader { available: 1 },
        ),
        // 81 02 | 11 80: the child's length varint is cut by the end of the node.
        (
            &hex!("81 02 11 80"),
            DecodeError::TruncatedHeader { available: 2 },
        ),
    ];
    for (buf, err) in cases {
        assert_eq!(decode(buf).map(|_| ()), Err(err), "{buf:x?}");
        let (node, _) = Packet::parse(buf).unwrap();
        let first_error = node.children().unwrap().find_map(Result::err);
        assert_eq!(first_error, Some(err), "{buf:x?}");
        for chunk in 1..=buf.len() {
            assert_eq!(validate_chunked(buf, chunk, GOLANG), Err(err), "{buf:x?}");
        }
    }
    // 81 01 | 11 01 05: the child header runs past its node into the bytes after it; a
    // stream reader must not take them.
    assert_eq!(
        validate_with(&hex!("81 01 11 01 05"), &GOLANG),
        Err(DecodeError::TruncatedHeader { available: 1 })
    );
}

// ---------------------------------------------------------------------------------------
// The reference libraries' behaviour, entry by entry
// ---------------------------------------------------------------------------------------

/// What we do with each `malformed-behaviour.json` entry, keyed by (name, lib, call).
///
/// `lib`: `golang` = y3-codec-golang v1.7.3 (our `golang` dialect), `nvarint` = y3 v1.0.5.
/// `call`: `prim` = DecodePrimitivePacket + ToInt32 (ours: `decode` + `i32`), `helpers` =
/// ToInt32 / ToBool / ToFloat32 / ToFloat64 (ours: `decode` + `i32`/`bool`/`f32`/`f64`),
/// `node` = DecodeNodePacket (ours: `decode`, which walks the tree, then counting children).
/// Where `decode` fails but `Packet::parse` (which reads one packet and returns the rest)
/// succeeds, the row says so.
const TABLE: &[(&str, &str, &str, &str)] = &[
    ("empty", "golang", "prim", "decode unexpected_end"),
    ("empty", "golang", "helpers", "decode unexpected_end"),
    ("empty", "nvarint", "prim", "decode unexpected_end"),
    ("tag_only", "golang", "prim", "decode unexpected_end"),
    ("tag_only", "golang", "helpers", "decode unexpected_end"),
    ("tag_only", "nvarint", "prim", "decode unexpected_end"),
    ("length_0", "golang", "prim", "i32 invalid_length"),
    (
        "length_0",
        "golang",
        "helpers",
        "i32 invalid_length, bool invalid_length, f32 invalid_length, f64 invalid_length",
    ),
    ("length_0", "nvarint", "prim", "i32 invalid_length"),
    (
        "value_truncated (len 2, 1 byte)",
        "golang",
        "prim",
        "decode unexpected_end",
    ),
    (
        "value_truncated (len 2, 1 byte)",
        "golang",
        "helpers",
        "decode unexpected_end",
    ),
    (
        "value_truncated (len 2, 1 byte)",
        "nvarint",
        "prim",
        "decode unexpected_end",
    ),
    (
        "length_varint_unterminated",
        "golang",
        "prim",
        "decode unexpected_end",
    ),
    (
        "length_varint_unterminated",
        "golang",
        "helpers",
        "decode unexpected_end",
    ),
    (
        "length_varint_unterminated",
        "nvarint",
        "prim",
        "decode unexpected_end",
    ),
    (
        "length_negative_-1 (0x7f)",
        "golang",
        "prim",
        "decode negative_length",
    ),
    (
        "length_negative_-1 (0x7f)",
        "golang",
        "helpers",
        "decode negative_length",
    ),
    (
        "length_negative_-1 (0x7f)",
        "nvarint",
        "prim",
        "decode negative_length",
    ),
    (
        "length_negative_-64 (0x40)",
        "golang",
        "prim",
        "decode negative_length",
    ),
    (
        "length_negative_-64 (0x40)",
        "golang",
        "helpers",
        "decode negative_length",
    ),
    (
        "length_negative_-64 (0x40)",
        "nvarint",
        "prim",
        "decode negative_length",
    ),
    ("length_non_minimal (1 as 80 01)", "golang", "prim", "i32 5"),
    (
        "length_non_minimal (1 as 80 01)",
        "golang",
        "helpers",
        "i32 5, bool invalid_bool, f32 6.018531e-36, f64 1.344974619049452e-284",
    ),
    (
        "length_non_minimal (1 as 80 01)",
        "nvarint",
        "prim",
        "i32 5",
    ),
    (
        "trailing_bytes_after_packet",
        "golang",
        "prim",
        "decode trailing_bytes; parse ok (rest 2), i32 5",
    ),
    (
        "trailing_bytes_after_packet",
        "golang",
        "helpers",
        "decode trailing_bytes; parse ok (rest 2), i32 5",
    ),
    (
        "trailing_bytes_after_packet",
        "nvarint",
        "prim",
        "decode trailing_bytes; parse ok (rest 2), i32 5",
    ),
    (
        "value_non_minimal_pvarint (5 as 80 05)",
        "golang",
        "prim",
        "i32 5",
    ),
    (
        "value_non_minimal_pvarint (5 as 80 05)",
        "golang",
        "helpers",
        "i32 5, bool invalid_bool, f32 -4.59177e-40, f64 -6.953355807835004e-309",
    ),
    (
        "value_non_minimal_pvarint (5 as 80 05)",
        "nvarint",
        "prim",
        "i32 -32763",
    ),
    (
        "value_pvarint_overlong_6_bytes",
        "golang",
        "prim",
        "i32 varint_overflow",
    ),
    (
        "value_pvarint_overlong_6_bytes",
        "golang",
        "helpers",
        "i32 varint_overflow, bool invalid_bool, f32 invalid_length, f64 -2.0422003852342723e-301",
    ),
    (
        "value_pvarint_overlong_6_bytes",
        "nvarint",
        "prim",
        "i32 varint_overflow",
    ),
    (
        "value_pvarint_unterminated",
        "golang",
        "prim",
        "i32 varint_unterminated",
    ),
    (
        "value_pvarint_unterminated",
        "golang",
        "helpers",
        "i32 varint_unterminated, bool varint_unterminated, f32 -0.0, f64 -0.0",
    ),
    ("value_pvarint_unterminated", "nvarint", "prim", "i32 -128"),
    ("bool_value_2", "golang", "prim", "i32 2"),
    (
        "bool_value_2",
        "golang",
        "helpers",
        "i32 2, bool invalid_bool, f32 9.403955e-38, f64 4.778309726736481e-299",
    ),
    ("bool_value_2", "nvarint", "prim", "i32 2"),
    ("float32_5_bytes", "golang", "prim", "i32 trailing_bytes"),
    (
        "float32_5_bytes",
        "golang",
        "helpers",
        "i32 trailing_bytes, bool trailing_bytes, f32 invalid_length, f64 0.1250000004656613",
    ),
    ("float32_5_bytes", "nvarint", "prim", "i32 varint_overflow"),
    ("float64_9_bytes", "golang", "prim", "i32 trailing_bytes"),
    (
        "float64_9_bytes",
        "golang",
        "helpers",
        "i32 trailing_bytes, bool trailing_bytes, f32 invalid_length, f64 invalid_length",
    ),
    ("float64_9_bytes", "nvarint", "prim", "i32 varint_overflow"),
    (
        "tag_with_slice_flag_on_primitive (0x51)",
        "golang",
        "prim",
        "decode invalid_tag",
    ),
    (
        "tag_with_slice_flag_on_primitive (0x51)",
        "golang",
        "helpers",
        "decode invalid_tag",
    ),
    (
        "tag_with_slice_flag_on_primitive (0x51)",
        "nvarint",
        "prim",
        "decode invalid_tag",
    ),
    (
        "node_empty_buffer",
        "golang",
        "node",
        "decode unexpected_end",
    ),
    (
        "node_empty_buffer",
        "nvarint",
        "node",
        "decode unexpected_end",
    ),
    ("node_tag_only", "golang", "node", "decode unexpected_end"),
    ("node_tag_only", "nvarint", "node", "decode unexpected_end"),
    ("node_length_0", "golang", "node", "ok (prims 0, nodes 0)"),
    ("node_length_0", "nvarint", "node", "ok (prims 0, nodes 0)"),
    (
        "node_length_exceeds_buffer",
        "golang",
        "node",
        "decode unexpected_end",
    ),
    (
        "node_length_exceeds_buffer",
        "nvarint",
        "node",
        "decode unexpected_end",
    ),
    (
        "node_child_truncated",
        "golang",
        "node",
        "decode child_overflow; parse ok (rest 0)",
    ),
    (
        "node_child_truncated",
        "nvarint",
        "node",
        "decode child_overflow; parse ok (rest 0)",
    ),
    (
        "node_negative_length (0x7f)",
        "golang",
        "node",
        "decode negative_length",
    ),
    (
        "node_negative_length (0x7f)",
        "nvarint",
        "node",
        "decode negative_length",
    ),
    (
        "node_child_negative_length",
        "golang",
        "node",
        "decode negative_length; parse ok (rest 0)",
    ),
    (
        "node_child_negative_length",
        "nvarint",
        "node",
        "decode negative_length; parse ok (rest 0)",
    ),
    (
        "node_child_length_unterminated",
        "golang",
        "node",
        "decode truncated_header; parse ok (rest 0)",
    ),
    (
        "node_child_length_unterminated",
        "nvarint",
        "node",
        "decode truncated_header; parse ok (rest 0)",
    ),
    (
        "node_trailing_bytes",
        "golang",
        "node",
        "decode trailing_bytes; parse ok (rest 1)",
    ),
    (
        "node_trailing_bytes",
        "nvarint",
        "node",
        "decode trailing_bytes; parse ok (rest 1)",
    ),
    (
        "node_child_is_single_byte",
        "golang",
        "node",
        "decode truncated_header; parse ok (rest 0)",
    ),
    (
        "node_child_is_single_byte",
        "nvarint",
        "node",
        "decode truncated_header; parse ok (rest 0)",
    ),
];

fn call_kind(call: &str) -> &'static str {
    if call.contains("NodePacket") {
        "node"
    } else if call.starts_with("ToInt32 /") {
        "helpers"
    } else {
        assert!(
            call.contains("PrimitivePacket + ToInt32"),
            "unknown call {call}"
        );
        "prim"
    }
}

fn lib_kind(lib: &str) -> (&'static str, Config) {
    match lib {
        "y3-codec-golang v1.7.3" => ("golang", GOLANG),
        "y3 v1.0.5" => ("nvarint", NVARINT),
        other => panic!("unknown lib {other}"),
    }
}

fn show<T: std::fmt::Debug>(result: Result<T, DecodeError>) -> String {
    match result {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.kind().to_owned(),
    }
}

/// Our outcome for one entry, in the words of the table.
fn ours(input: &[u8], config: &Config, call: &str) -> String {
    let packet = match decode_with(input, config) {
        Ok(packet) => packet,
        Err(e) => {
            let mut out = format!("decode {}", e.kind());
            if let Ok((p, rest)) = Packet::parse_with(input, config) {
                let value = if call == "node" {
                    String::new()
                } else {
                    format!(", i32 {}", show(p.i32()))
                };
                out += &format!("; parse ok (rest {}){value}", rest.len());
            }
            return out;
        }
    };
    match call {
        "prim" => format!("i32 {}", show(packet.i32())),
        "helpers" => format!(
            "i32 {}, bool {}, f32 {}, f64 {}",
            show(packet.i32()),
            show(packet.bool()),
            show(packet.f32()),
            show(packet.f64())
        ),
        _ => {
            let (mut prims, mut nodes) = (0, 0);
            for child in packet.children().unwrap() {
                if child.unwrap().is_node() {
                    nodes += 1;
                } else {
                    prims += 1;
                }
            }
            format!("ok (prims {prims}, nodes {nodes})")
        }
    }
}

#[test]
fn reference_malformed_behaviour_is_tabled() {
    let path = format!(
        "{}/../../testdata/vectors/malformed-behaviour.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut used = vec![false; TABLE.len()];
    let mut problems = Vec::new();
    for entry in &entries {
        let name = entry["name"].as_str().unwrap();
        let (lib, config) = lib_kind(entry["lib"].as_str().unwrap());
        let call = call_kind(entry["call"].as_str().unwrap());
        let compact: String = entry["input_hex"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .collect();
        let input = hex::decode(compact).unwrap();
        let got = ours(&input, &config, call);
        // Streaming agrees with one-shot on every entry.
        let one_shot = validate_with(&input, &config);
        assert_eq!(validate_chunked(&input, 1, config), one_shot, "{name}");
        match TABLE
            .iter()
            .position(|row| (row.0, row.1, row.2) == (name, lib, call))
        {
            Some(i) => {
                used[i] = true;
                if TABLE[i].3 != got {
                    problems.push(format!("    ({name:?}, {lib:?}, {call:?}, {got:?}),"));
                }
            }
            None => problems.push(format!(
                "    ({name:?}, {lib:?}, {call:?}, {got:?}), // new"
            )),
        }
    }
    for (row, used) in TABLE.iter().zip(&used) {
        if !used {
            problems.push(format!("    stale row {row:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "malformed-behaviour.json and TABLE disagree; rows as we behave now:\n{}",
        problems.join("\n")
    );
    assert_eq!(kind(decode(&[])), "unexpected_end");
}
