//! Typed structs against the reference `NewCodec(key).Marshal(v)` / `ToObject` of
//! `y3-codec-golang` v1.7.3: every `marshal_*` vector byte for byte, both ways, plus
//! property tests of the round trip in all three dialects.

use std::fmt::Debug;

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::Value as Json;
use y3::typed::{self, FieldValue, Message};
use y3::{Config, DecodeError, Dialect, EncodeError};
use y3_derive::Message;

// The Go types of the vectors, field for field.

/// `NoiseData{Noise float32 0x11; Time int64 0x12; From string 0x13}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct NoiseData {
    #[y3(tag = 0x11)]
    noise: f32,
    #[y3(tag = 0x12)]
    time: i64,
    #[y3(tag = 0x13)]
    from: String,
}

/// `AllTypes{S string 0x10; I32 0x11; U32 0x12; I64 0x13; U64 0x14; F32 0x15; F64 0x16;
/// B bool 0x17; Bs []uint8 0x18}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct AllTypes {
    #[y3(tag = 0x10)]
    s: String,
    #[y3(tag = 0x11)]
    i32: i32,
    #[y3(tag = 0x12)]
    u32: u32,
    #[y3(tag = 0x13)]
    i64: i64,
    #[y3(tag = 0x14)]
    u64: u64,
    #[y3(tag = 0x15)]
    f32: f32,
    #[y3(tag = 0x16)]
    f64: f64,
    #[y3(tag = 0x17)]
    b: bool,
    #[y3(tag = 0x18)]
    bs: Vec<u8>,
}

/// `Inner{Name string 0x21; Vals []int32 0x22}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Inner {
    #[y3(tag = 0x21)]
    name: String,
    #[y3(tag = 0x22)]
    vals: Vec<i32>,
}

/// `Outer{ID int32 0x11; In Inner 0x12; Arr [3]int32 0x13; Items []Inner 0x14;
/// Tags []string 0x15}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Outer {
    #[y3(tag = 0x11)]
    id: i32,
    #[y3(tag = 0x12)]
    inner: Inner,
    #[y3(tag = 0x13)]
    arr: [i32; 3],
    #[y3(tag = 0x14)]
    items: Vec<Inner>,
    #[y3(tag = 0x15)]
    tags: Vec<String>,
}

/// `Level1{C int32 0x33}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Level1 {
    #[y3(tag = 0x33)]
    c: i32,
}

/// `Level2{B Level1 0x32}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Level2 {
    #[y3(tag = 0x32)]
    b: Level1,
}

/// `Level3{A Level2 0x31}`
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Level3 {
    #[y3(tag = 0x31)]
    a: Level2,
}

// Reading the vectors.

fn vectors() -> Vec<Json> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/vectors/y3-codec-golang-v1.7.3.json"
    );
    let text = std::fs::read_to_string(path).expect("vector file");
    let all: Vec<Json> = serde_json::from_str(&text).expect("vector json");
    all.into_iter()
        .filter(|v| v["api"].as_str().unwrap_or("").starts_with("NewCodec("))
        .collect()
}

fn name(v: &Json) -> &str {
    v["name"].as_str().unwrap()
}

fn key(v: &Json) -> u32 {
    v["tag"].as_u64().unwrap() as u32
}

fn bytes_of(hex_str: &Json) -> Vec<u8> {
    hex::decode(hex_str.as_str().unwrap()).unwrap()
}

fn i64_of(j: &Json) -> i64 {
    j.as_i64().unwrap()
}

fn u64_of(j: &Json) -> u64 {
    j.as_u64().unwrap()
}

fn str_of(j: &Json) -> String {
    j.as_str().unwrap().to_owned()
}

fn list<T>(j: &Json, f: impl Fn(&Json) -> T) -> Vec<T> {
    j.as_array().unwrap().iter().map(f).collect()
}

/// Float slices come with their exact IEEE-754 `bits`.
fn f32s(v: &Json) -> Vec<f32> {
    list(&v["bits"], |b| {
        f32::from_bits(u32::from_str_radix(b.as_str().unwrap(), 16).unwrap())
    })
}

fn f64s(v: &Json) -> Vec<f64> {
    list(&v["bits"], |b| {
        f64::from_bits(u64::from_str_radix(b.as_str().unwrap(), 16).unwrap())
    })
}

fn noise(j: &Json) -> NoiseData {
    NoiseData {
        noise: j["Noise"].as_f64().unwrap() as f32,
        time: i64_of(&j["Time"]),
        from: str_of(&j["From"]),
    }
}

fn inner(j: &Json) -> Inner {
    Inner {
        name: str_of(&j["Name"]),
        vals: list(&j["Vals"], |x| i64_of(x) as i32),
    }
}

fn all_types(j: &Json) -> AllTypes {
    AllTypes {
        s: str_of(&j["S"]),
        i32: i64_of(&j["I32"]) as i32,
        u32: u64_of(&j["U32"]) as u32,
        i64: i64_of(&j["I64"]),
        u64: u64_of(&j["U64"]),
        f32: j["F32"].as_f64().unwrap() as f32,
        f64: j["F64"].as_f64().unwrap(),
        b: j["B"].as_bool().unwrap(),
        bs: bytes_of(&j["Bs"]),
    }
}

fn outer(j: &Json) -> Outer {
    let arr = list(&j["Arr"], |x| i64_of(x) as i32);
    Outer {
        id: i64_of(&j["ID"]) as i32,
        inner: inner(&j["In"]),
        arr: arr.try_into().unwrap(),
        items: list(&j["Items"], inner),
        tags: list(&j["Tags"], str_of),
    }
}

fn level3(j: &Json) -> Level3 {
    Level3 {
        a: Level2 {
            b: Level1 {
                c: i64_of(&j["A"]["B"]["C"]) as i32,
            },
        },
    }
}

/// Bitwise equality, NaN-safe: two values are the same when they encode to the same bytes
/// (VarFloat keeps every bit, so floats compare by bits).
fn same_bits<T: FieldValue>(a: &T, b: &T) -> bool {
    typed::marshal(0x10, a).unwrap() == typed::marshal(0x10, b).unwrap()
}

/// Checks one vector both ways with the Rust value `expected`.
fn check<T: FieldValue + PartialEq + Debug>(v: &Json, expected: T) {
    let (name, key, want) = (name(v), key(v), bytes_of(&v["hex"]));

    let ours = typed::marshal(key, &expected).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        hex::encode(&ours),
        v["hex"].as_str().unwrap(),
        "{name}: marshal"
    );
    assert_eq!(
        typed::marshaled_len(key, &expected, Dialect::Golang),
        ours.len(),
        "{name}: marshaled_len"
    );
    // Exact capacity: one allocation, no slack.
    assert_eq!(ours.capacity(), ours.len(), "{name}: capacity");
    let mut into = Vec::new();
    typed::marshal_into(key, &expected, Dialect::Golang, &mut into).unwrap();
    assert_eq!(into, ours, "{name}: marshal_into");

    // The packet under the root is what `to_packet` writes on its own.
    let root = y3::decode(&want).unwrap_or_else(|e| panic!("{name}: {e}"));
    let observed = root.child(key).unwrap().expect("observed key");
    let bare = typed::to_packet(key, &expected, Dialect::Golang).unwrap();
    assert_eq!(bare, &want[2..], "{name}: to_packet");
    assert_eq!(expected.value_len(Dialect::Golang), observed.value().len());

    // ToObject is given the observed node; unmarshal reads the root itself.
    let back: T = typed::unmarshal(&want, key)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|| panic!("{name}: key missing"));
    assert!(
        same_bits(&back, &expected),
        "{name}: {back:?} != {expected:?}"
    );
    assert_eq!(back, expected, "{name}: unmarshal");
    let from_observed: T = typed::from_packet(&observed).unwrap();
    assert_eq!(from_observed, expected, "{name}: from_packet");
}

/// The error `marshal` must return for a key the reference panics on.
fn check_refused(v: &Json) {
    let key = key(v);
    let err = typed::marshal(key, &1i32).unwrap_err();
    let want = if key < 0x10 {
        EncodeError::ReservedTag { tag: key }
    } else {
        EncodeError::InvalidTag {
            tag: key,
            max: 0x3f,
        }
    };
    assert_eq!(err, want, "{}", name(v));
    assert!(v["decoded"].as_str().unwrap().contains("prohibit"));
}

#[test]
fn every_marshal_vector() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 35, "marshal_* vectors in the file");
    let mut checked = 0;
    for v in &vectors {
        let val = &v["value"];
        let ty = v["type"].as_str().unwrap();
        let go_type = v["go_type"].as_str().unwrap_or("");
        if name(v).starts_with("marshal_forbidden") {
            check_refused(v);
            checked += 1;
            continue;
        }
        match ty {
            "int32" => check(v, i64_of(val) as i32),
            "int64" => check(v, i64_of(val)),
            "uint32" => check(v, u64_of(val) as u32),
            "uint64" => check(v, u64_of(val)),
            "bool" => check(v, val.as_bool().unwrap()),
            "string" => check(v, str_of(val)),
            "bytes" => {
                check(v, bytes_of(val));
                check(v, Bytes::from(bytes_of(val)));
            }
            "slice<int32>" => check(v, list(val, |x| i64_of(x) as i32)),
            "slice<uint32>" => check(v, list(val, |x| u64_of(x) as u32)),
            "slice<int64>" => check(v, list(val, i64_of)),
            "slice<uint64>" => check(v, list(val, u64_of)),
            "slice<float32>" => check(v, f32s(v)),
            "slice<float64>" => check(v, f64s(v)),
            "slice<bool>" => check(v, list(val, |x| x.as_bool().unwrap())),
            "slice<string>" => check(v, list(val, str_of)),
            "array<int32,3>" => {
                // The reference panics on a bare Go array; ours writes it as the slice.
                assert_eq!(v["hex"], "", "{}", name(v));
                let arr: [i32; 3] = list(val, |x| i64_of(x) as i32).try_into().unwrap();
                let bytes = typed::marshal(key(v), &arr).unwrap();
                assert_eq!(bytes, typed::marshal(key(v), &arr.to_vec()).unwrap());
                assert_eq!(typed::unmarshal(&bytes, key(v)), Ok(Some(arr)));
            }
            "struct" if go_type.starts_with("NoiseData") => check(v, noise(val)),
            "struct" if go_type.starts_with("AllTypes") => check(v, all_types(val)),
            "struct" if go_type.starts_with("Outer") => check(v, outer(val)),
            "struct" if go_type.starts_with("Level3") => check(v, level3(val)),
            "slice<struct>" => check(v, list(val, noise)),
            other => panic!("{}: unhandled type {other}", name(v)),
        }
        checked += 1;
    }
    assert_eq!(checked, vectors.len());
}

#[test]
fn struct_layout_rules() {
    // Zero numbers are written, empty strings and bytes omitted (marshal_struct_AllTypes_zero).
    let bytes = typed::marshal(0x10, &AllTypes::default()).unwrap();
    assert_eq!(
        hex::encode(&bytes),
        "81179015110100120100130100140100150100160100170100"
    );
    // A Vec of messages is an array node as a field, a plain node at the top level.
    let items = vec![Inner::default()];
    let field = Outer {
        items: items.clone(),
        ..Outer::default()
    };
    let node = field.to_packet(0x10, Dialect::Golang).unwrap();
    assert!(node.windows(4).any(|w| w == [0xd4, 0x04, 0x80, 0x02]));
    assert_eq!(
        typed::to_packet(0x10, &items, Dialect::Golang).unwrap(),
        [0x90, 0x04, 0x80, 0x02, 0xe2, 0x00]
    );
    // Decoding a Vec accepts both.
    let plain = y3::decode(&[0x90, 0x04, 0x80, 0x02, 0xe2, 0x00]).unwrap();
    let array = y3::decode(&[0xd0, 0x04, 0x80, 0x02, 0xe2, 0x00]).unwrap();
    assert_eq!(typed::from_packet::<Vec<Inner>>(&plain).unwrap(), items);
    assert_eq!(typed::from_packet::<Vec<Inner>>(&array).unwrap(), items);
    // Message::packet_len is exact.
    assert_eq!(field.packet_len(0x10, Dialect::Golang), node.len());
}

#[test]
fn decoding_is_lenient_where_the_reference_is() {
    // Unknown keys are skipped, missing fields keep their default, the last duplicate wins.
    // 90 0c | 3f 01 09 (unknown) | 12 01 01 | 12 01 02 | 13 01 61
    let node = y3::decode(&[
        0x90, 0x0c, 0x3f, 0x01, 0x09, 0x12, 0x01, 0x01, 0x12, 0x01, 0x02, 0x13, 0x01, 0x61,
    ])
    .unwrap();
    let got = NoiseData::from_packet(&node).unwrap();
    assert_eq!(
        got,
        NoiseData {
            noise: 0.0,
            time: 2,
            from: "a".into()
        }
    );
    // The observed node, found by key path as a router would.
    let bytes = typed::marshal(0x10, &got).unwrap();
    let observed = y3::get(&bytes, &[0x01, 0x10]).unwrap().unwrap();
    assert_eq!(NoiseData::from_packet(&observed).unwrap(), got);
}

#[test]
fn decoding_errors() {
    // A field with the wrong shape: 0x12 (Inner) as a primitive.
    let err = typed::unmarshal::<Outer>(&[0x81, 0x05, 0x90, 0x03, 0x12, 0x01, 0x00], 0x10);
    assert_eq!(
        err,
        Err(DecodeError::WrongType {
            expected: "node",
            tag: 0x12
        })
    );
    // [3]int32 with two elements.
    let err = typed::unmarshal::<Outer>(
        &[
            0x81, 0x0a, 0x90, 0x08, 0xd3, 0x06, 0x00, 0x01, 0x01, 0x00, 0x01, 0x02,
        ],
        0x10,
    );
    assert_eq!(
        err,
        Err(DecodeError::WrongCount {
            expected: 3,
            found: 2
        })
    );
    // A struct where a primitive was written.
    let err = typed::unmarshal::<NoiseData>(&[0x81, 0x03, 0x10, 0x01, 0x05], 0x10);
    assert_eq!(err.unwrap_err().kind(), "wrong_type");
    // A child that overflows its node.
    let err = typed::unmarshal::<NoiseData>(&[0x81, 0x04, 0x90, 0x02, 0x11, 0x05], 0x10);
    assert_eq!(err.unwrap_err().kind(), "child_overflow");
    // Depth is bounded by the limits.
    let deep = typed::marshal(0x10, &Level3::default()).unwrap();
    let config = Config::DEFAULT.with_limits(y3::Limits {
        max_packet_len: 1 << 10,
        max_depth: 3,
    });
    assert_eq!(
        typed::unmarshal_with::<Level3>(&deep, 0x10, &config),
        Err(DecodeError::TooDeep { limit: 3 })
    );
}

#[test]
fn nvarint_dialect() {
    let all = AllTypes {
        s: "s".into(),
        i32: -65,
        u32: 128,
        i64: -1,
        u64: u64::MAX,
        f32: 0.25,
        f64: 23.0,
        b: true,
        bs: vec![0xde, 0xad],
    };
    let bytes = typed::marshal_with(0x10, &all, Dialect::NVarInt).unwrap();
    // Minimal two's complement: -65 is bf, 128 is 00 80, -1 is ff.
    assert_eq!(
        hex::encode(&bytes),
        "8121 901f 100173 1101bf 12020080 1301ff 1401ff 15023e80 16024037 170101 1802dead"
            .replace(' ', "")
    );
    assert_eq!(
        typed::marshaled_len(0x10, &all, Dialect::NVarInt),
        bytes.len()
    );
    let config = Config::new(Dialect::NVarInt);
    assert_eq!(
        typed::unmarshal_with::<AllTypes>(&bytes, 0x10, &config),
        Ok(Some(all.clone()))
    );
    // Read in the wrong dialect, bf is an unterminated PVarInt.
    assert!(typed::unmarshal::<AllTypes>(&bytes, 0x10).is_err());

    let outer = Outer {
        id: -7,
        inner: Inner {
            name: "in".into(),
            vals: vec![i32::MIN, -1, 0, i32::MAX],
        },
        arr: [4, -5, 6],
        items: vec![
            Inner::default(),
            Inner {
                name: String::new(),
                vals: vec![300],
            },
        ],
        tags: vec![String::new(), "y".into()],
    };
    let bytes = typed::marshal_with(0x10, &outer, Dialect::NVarInt).unwrap();
    assert_eq!(
        typed::unmarshal_with::<Outer>(&bytes, 0x10, &config),
        Ok(Some(outer))
    );
}

#[test]
fn draft02_dialect_keeps_the_schema_without_flags() {
    let outer = Outer {
        id: 1,
        items: vec![Inner {
            name: "a".into(),
            vals: vec![1, 2],
        }],
        ..Outer::default()
    };
    let bytes = typed::marshal_with(0x10, &outer, Dialect::Draft02).unwrap();
    // draft02 tags carry no node flag: the root is 01, the struct 10.
    assert_eq!(&bytes[..1], [0x01]);
    let config = Config::new(Dialect::Draft02);
    assert_eq!(
        typed::unmarshal_with::<Outer>(&bytes, 0x10, &config),
        Ok(Some(outer))
    );
}

/// Option, Box, Bytes, skipped fields, recursion and generics.
#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Tree {
    #[y3(tag = 0x20)]
    label: Option<String>,
    #[y3(tag = 0x21)]
    payload: Bytes,
    #[y3(tag = 0x22)]
    children: Vec<Tree>,
    #[y3(tag = 0x23)]
    next: Option<Box<Tree>>,
    #[y3(skip)]
    cache: u8,
}

#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Wrapper<T> {
    #[y3(tag = 0x3f)]
    value: T,
    #[y3(tag = 0x00)]
    zero_key: u32,
}

#[test]
fn options_boxes_recursion_generics() {
    let tree = Tree {
        label: Some(String::new()),
        payload: Bytes::from_static(b"\x01"),
        children: vec![Tree::default()],
        next: Some(Box::new(Tree {
            label: Some("n".into()),
            ..Tree::default()
        })),
        cache: 9,
    };
    let bytes = typed::marshal(0x10, &tree).unwrap();
    // Some("") is written (20 00); None and the skipped field are not.
    assert_eq!(
        hex::encode(&bytes),
        "8114 9012 2000 210101 e204 8002e200 a305 20016e e200".replace(' ', "")
    );
    let back: Tree = typed::unmarshal(&bytes, 0x10).unwrap().unwrap();
    assert_eq!(back, Tree { cache: 0, ..tree });

    let w = Wrapper {
        value: vec![1.5f64],
        zero_key: 3,
    };
    let bytes = typed::marshal(0x10, &w).unwrap();
    assert_eq!(typed::unmarshal(&bytes, 0x10), Ok(Some(w)));
}

#[cfg(feature = "derive")]
#[test]
fn derive_through_the_y3_crate() {
    #[derive(Debug, Default, PartialEq, y3::Message)]
    struct Point {
        #[y3(tag = 0x11)]
        x: i32,
    }
    let bytes = y3::marshal(0x20, &Point { x: 1 }).unwrap();
    assert_eq!(bytes, [0x81, 0x05, 0xa0, 0x03, 0x11, 0x01, 0x01]);
    assert_eq!(y3::unmarshal(&bytes, 0x20), Ok(Some(Point { x: 1 })));
}

// Property tests: decode(encode(x)) == x and exact lengths, in every dialect.

fn inner_strategy() -> impl Strategy<Value = Inner> {
    (".{0,8}", prop::collection::vec(any::<i32>(), 0..6))
        .prop_map(|(name, vals)| Inner { name, vals })
}

prop_compose! {
    fn all_types_strategy()(
        s in ".{0,12}",
        i32 in any::<i32>(),
        u32 in any::<u32>(),
        i64 in any::<i64>(),
        u64 in any::<u64>(),
        f32 in any::<f32>(),
        f64 in any::<f64>(),
        b in any::<bool>(),
        bs in prop::collection::vec(any::<u8>(), 0..12),
    ) -> AllTypes {
        AllTypes { s, i32, u32, i64, u64, f32, f64, b, bs }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Message)]
struct Nested {
    #[y3(tag = 0x11)]
    all: AllTypes,
    #[y3(tag = 0x12)]
    outer: Outer,
    #[y3(tag = 0x13)]
    many: Vec<AllTypes>,
    #[y3(tag = 0x14)]
    grid: Vec<Vec<u64>>,
    #[y3(tag = 0x15)]
    blobs: Vec<Vec<u8>>,
    #[y3(tag = 0x16)]
    maybe: Option<Level3>,
    #[y3(tag = 0x17)]
    floats: [f32; 2],
}

prop_compose! {
    fn outer_strategy()(
        id in any::<i32>(),
        inner in inner_strategy(),
        arr in any::<[i32; 3]>(),
        items in prop::collection::vec(inner_strategy(), 0..4),
        tags in prop::collection::vec(".{0,4}", 0..4),
    ) -> Outer {
        Outer { id, inner, arr, items, tags }
    }
}

prop_compose! {
    fn nested_strategy()(
        all in all_types_strategy(),
        outer in outer_strategy(),
        many in prop::collection::vec(all_types_strategy(), 0..3),
        grid in prop::collection::vec(prop::collection::vec(any::<u64>(), 0..3), 0..3),
        blobs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), 0..3),
        maybe in prop::option::of(any::<i32>()),
        floats in any::<[f32; 2]>(),
    ) -> Nested {
        let maybe = maybe.map(|c| Level3 { a: Level2 { b: Level1 { c } } });
        Nested { all, outer, many, grid, blobs, maybe, floats }
    }
}

fn dialects() -> impl Strategy<Value = Dialect> {
    prop_oneof![
        Just(Dialect::Golang),
        Just(Dialect::NVarInt),
        Just(Dialect::Draft02)
    ]
}

proptest! {
    #[test]
    fn nested_round_trip(n in nested_strategy(), key in 0x10u32..=0x3f, dialect in dialects()) {
        let bytes = typed::marshal_with(key, &n, dialect).unwrap();
        prop_assert_eq!(typed::marshaled_len(key, &n, dialect), bytes.len());
        let config = Config::new(dialect);
        let back: Nested = typed::unmarshal_with(&bytes, key, &config).unwrap().unwrap();
        // Floats may be NaN: compare by re-encoding, which keeps every bit.
        prop_assert_eq!(&typed::marshal_with(key, &back, dialect).unwrap(), &bytes);
        // The bare node alone: exact length, same bytes as under the root.
        let bare = n.to_packet(key, dialect).unwrap();
        prop_assert_eq!(n.packet_len(key, dialect), bare.len());
        prop_assert_eq!(&bytes[bytes.len() - bare.len()..], &bare[..]);
        // The whole tree is well formed.
        y3::decode_with(&bytes, &config).unwrap();
    }

    /// Integer fields have their own writer (header and value at once): byte for byte what
    /// the item encoder writes, in every dialect, for any value and key.
    #[test]
    fn integer_fields_match_the_item_encoder(v in any::<i64>(), small in -300i64..300, key in 0u32..=0x3f, dialect in dialects()) {
        fn check<T: FieldValue>(key: u32, v: T, item: y3::Value, dialect: Dialect) -> Result<(), TestCaseError> {
            let mut field = Vec::new();
            typed::encode_field(key, &v, dialect, &mut field).unwrap();
            let expected = y3::Item::new(key, item).to_vec(dialect).unwrap();
            prop_assert_eq!(&field, &expected);
            prop_assert_eq!(typed::field_len(key, &v, dialect), expected.len());
            Ok(())
        }
        for v in [v, small, v >> 20, v >> 40] {
            check(key, v, y3::Value::I64(v), dialect)?;
            check(key, v as i32, y3::Value::I32(v as i32), dialect)?;
            check(key, v as u32, y3::Value::U32(v as u32), dialect)?;
            check(key, v as u64, y3::Value::U64(v as u64), dialect)?;
        }
        check(key, v & 1 == 1, y3::Value::Bool(v & 1 == 1), dialect)?;
    }

    #[test]
    fn all_types_equal_without_nan(mut a in all_types_strategy()) {
        if a.f32.is_nan() { a.f32 = 0.5; }
        if a.f64.is_nan() { a.f64 = -0.5; }
        let bytes = typed::marshal(0x10, &a).unwrap();
        prop_assert_eq!(typed::unmarshal::<AllTypes>(&bytes, 0x10).unwrap(), Some(a));
    }
}
