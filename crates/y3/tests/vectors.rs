//! Every reference vector, both ways: our encoder must produce the reference bytes, and our
//! decoder must read them back to the same values. Entries where the reference accepted a
//! tag that this implementation refuses are checked against the documented refusal
//! (`spec/compatibility.md`).

mod common;

use common::{items, same, Vector};
use y3::{Config, DecodeError, Dialect, EncodeError, Item, Packet};

fn encode_all(items: &[Item], dialect: Dialect) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    for item in items {
        item.encode(dialect, &mut out)?;
    }
    Ok(out)
}

/// Reads `bytes` as the packets `items` describe, in `dialect`.
fn read_back(bytes: &[u8], items: &[Item], dialect: Dialect) -> Result<Vec<Item>, DecodeError> {
    let config = Config::new(dialect);
    y3::validate_with(bytes, &config)?;
    let mut rest = bytes;
    let mut out = Vec::new();
    for item in items {
        let (packet, tail) = Packet::parse_with(rest, &config)?;
        out.push(Item::read_like(&packet, &item.value)?);
        rest = tail;
    }
    assert!(rest.is_empty(), "trailing bytes");
    Ok(out)
}

/// Checks one vector both ways; returns whether it was checked (false: not a packet-level
/// vector, or a refused tag handled elsewhere).
fn check_both_ways(v: &Vector, dialect: Dialect) -> bool {
    let Some(items) = items(v) else { return false };
    if v.hex.is_empty() {
        // The reference refused to encode (sid > 0x7f, or > 0x3f in yomorun/y3): so do we.
        let err = encode_all(&items, dialect).unwrap_err();
        assert_eq!(err.kind(), "invalid_tag", "{}", v.name);
        return true;
    }
    if v.tag > 0x3f {
        return false;
    }
    let ours = encode_all(&items, dialect).unwrap_or_else(|e| panic!("{}: {e}", v.name));
    assert_eq!(hex::encode(&ours), v.hex, "{}: encode", v.name);
    let encoded_len: usize = items.iter().map(|i| i.encoded_len(dialect)).sum();
    assert_eq!(encoded_len, ours.len(), "{}: encoded_len", v.name);
    let back = read_back(&v.bytes(), &items, dialect).unwrap_or_else(|e| panic!("{}: {e}", v.name));
    for (a, b) in back.iter().zip(&items) {
        assert!(same(a, b), "{}: decoded {a:?} != {b:?}", v.name);
    }
    if items.len() == 1 {
        let bytes = v.bytes();
        let packet = y3::decode_with(&bytes, &Config::new(dialect)).unwrap();
        assert_eq!(packet.encoded_len(), ours.len());
    }
    true
}

#[test]
fn golang_vectors_both_ways() {
    let vectors = common::golang();
    let checked = vectors
        .iter()
        .filter(|v| check_both_ways(v, Dialect::Golang))
        .count();
    let marshal = vectors.iter().filter(|v| v.is_marshal()).count();
    let refused = vectors
        .iter()
        .filter(|v| !v.is_marshal() && !v.hex.is_empty() && v.tag > 0x3f)
        .count();
    // Marshal vectors are checked in marshal.rs, refused tags below: nothing is left out.
    assert_eq!(checked + marshal + refused, vectors.len());
    assert!(checked >= 90, "only {checked} vectors checked");
}

#[test]
fn nvarint_vectors_both_ways() {
    let vectors = common::nvarint();
    let checked = vectors
        .iter()
        .filter(|v| check_both_ways(v, Dialect::NVarInt))
        .count();
    assert_eq!(
        checked,
        vectors.len(),
        "every yomorun/y3 vector is packet-level"
    );
}

/// `draft02_hex` in the yomorun/y3 file is what the PVarInt encoding gives for the same
/// value: our `golang` dialect must produce it, and so must `draft02` for primitives (a
/// draft-02 tag below 0x80 is the bare key byte).
#[test]
fn nvarint_vectors_pvarint_counterparts() {
    let mut checked = 0;
    for v in common::nvarint() {
        let Some(expected) = v.json.get("draft02_hex").and_then(|h| h.as_str()) else {
            continue;
        };
        let items = items(&v).unwrap();
        assert_eq!(
            hex::encode(encode_all(&items, Dialect::Golang).unwrap()),
            expected,
            "{}",
            v.name
        );
        if items.iter().all(|i| !i.tag().is_node()) {
            assert_eq!(
                hex::encode(encode_all(&items, Dialect::Draft02).unwrap()),
                expected,
                "{}",
                v.name
            );
        }
        checked += 1;
    }
    assert!(checked >= 50);
}

/// Every packet-level vector also round-trips through the draft-02 dialect, where node
/// tags lose their flags and the reader follows the schema.
#[test]
fn draft02_round_trip_of_every_vector() {
    for v in common::golang().iter().chain(&common::nvarint()) {
        let Some(items) = items(v) else { continue };
        if v.hex.is_empty() || v.tag > 0x3f {
            continue;
        }
        let bytes = encode_all(&items, Dialect::Draft02).unwrap();
        let back = read_back(&bytes, &items, Dialect::Draft02).unwrap();
        assert!(
            back.iter().zip(&items).all(|(a, b)| same(a, b)),
            "{}",
            v.name
        );
    }
}

/// Tags 0x40..=0x7f: the reference golang encoder wrote them, but bit 0x40 is the array
/// flag, so the key is lost. We refuse them on encode; on decode, a primitive with the
/// array flag is refused and a node with it is an array node.
#[test]
fn tags_that_collide_with_the_array_flag() {
    /// `(key, node, array)` as decoded, or the error kind.
    type Expected = Result<(u32, bool, bool), &'static str>;
    let expect: &[(&str, Expected)] = &[
        ("tag_primitive_sid_0x40", Err("invalid_tag")),
        ("tag_primitive_sid_0x41", Err("invalid_tag")),
        ("tag_node_sid_0x40_empty", Ok((0x00, true, true))),
        ("tag_node_sid_0x7f_empty", Ok((0x3f, true, true))),
    ];
    let vectors = common::golang();
    for (name, outcome) in expect {
        let v = vectors.iter().find(|v| v.name == *name).unwrap();
        let items = items(v).unwrap();
        assert_eq!(
            encode_all(&items, Dialect::Golang).unwrap_err().kind(),
            "invalid_tag",
            "{name}"
        );
        let got = y3::decode(&v.bytes()).map(|p| (p.id(), p.is_node(), p.is_array()));
        match outcome {
            Ok(tag) => assert_eq!(got, Ok(*tag), "{name}"),
            Err(kind) => assert_eq!(got.unwrap_err().kind(), *kind, "{name}"),
        }
    }
    let refused = vectors
        .iter()
        .filter(|v| !v.is_marshal() && !v.hex.is_empty() && v.tag > 0x3f)
        .count();
    assert_eq!(
        refused,
        expect.len(),
        "a refused-tag vector has no expectation"
    );
}

/// yomorun/y3 v1.0.5 keeps only the last of repeated child keys; we keep all, in order.
#[test]
fn duplicate_child_keys_are_kept() {
    let v = common::nvarint()
        .into_iter()
        .find(|v| v.name == "node_duplicate_child_keys")
        .unwrap();
    let bytes = v.bytes();
    let config = Config::new(Dialect::NVarInt);
    let packet = y3::decode_with(&bytes, &config).unwrap();
    let values: Vec<i32> = packet
        .children()
        .unwrap()
        .map(|c| c.unwrap().i32().unwrap())
        .collect();
    assert_eq!(values, [1, 2, 3]);
}

/// The C63 stress vector is the published report's data set; every key is reachable by
/// path and by the packet view.
#[test]
fn stress_vector_every_key() {
    let v = common::golang()
        .into_iter()
        .find(|v| v.name == "stress_C63_ascending")
        .unwrap();
    let bytes = v.bytes();
    let packet = y3::decode(&bytes).unwrap();
    for k in 1..=63 {
        let by_path = y3::get(&bytes, &[0, k]).unwrap().unwrap();
        let by_view = packet.child(k).unwrap().unwrap();
        assert_eq!(by_path.value(), by_view.value());
        let read = Item::read_like(&by_view, &common::stress_value(k)).unwrap();
        assert!(
            same(&read, &Item::new(k, common::stress_value(k))),
            "key {k}"
        );
    }
}
