//! Property tests, as prost's `check_type` does them: decode(encode(x)) == x,
//! `encoded_len(x) == encode(x).len()`, and chunked observation == whole observation.

mod common;

use common::same;
use proptest::prelude::*;
use y3::{Config, Dialect, Item, Observer, Packet, Value};

fn dialect() -> impl Strategy<Value = Dialect> {
    prop_oneof![
        Just(Dialect::Golang),
        Just(Dialect::NVarInt),
        Just(Dialect::Draft02)
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::I32),
        any::<i64>().prop_map(Value::I64),
        any::<u32>().prop_map(Value::U32),
        any::<u64>().prop_map(Value::U64),
        any::<u32>().prop_map(|b| Value::F32(f32::from_bits(b))),
        any::<u64>().prop_map(|b| Value::F64(f64::from_bits(b))),
        any::<bool>().prop_map(Value::Bool),
        ".{0,40}".prop_map(Value::Str),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Value::Bytes),
    ]
}

fn item(max_id: u32) -> impl Strategy<Value = Item> {
    let leaf = (0..=max_id, scalar()).prop_map(|(id, v)| Item::new(id, v));
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            (0..=max_id, proptest::collection::vec(inner.clone(), 0..6))
                .prop_map(|(id, c)| Item::node(id, c)),
            (0..=max_id, proptest::collection::vec(inner, 0..6)).prop_map(|(id, c)| {
                Item::array(id, c.into_iter().map(|e| Item { id: 0, ..e }).collect())
            }),
        ]
    })
}

fn dialect_and_item() -> impl Strategy<Value = (Dialect, Item)> {
    dialect().prop_flat_map(|d| {
        let max = if d == Dialect::Draft02 { 5000 } else { 0x3f };
        (Just(d), item(max))
    })
}

/// Observed `(sub, id, value)` triples for `paths` over `chunks`.
fn observe(
    config: Config,
    paths: &[&[u32]],
    chunks: &mut dyn Iterator<Item = &[u8]>,
) -> Vec<(usize, u32, Vec<u8>)> {
    let mut observer = Observer::new(config, paths).unwrap();
    let mut seen = Vec::new();
    for chunk in chunks {
        observer
            .feed_each(chunk, |v| seen.push((v.sub, v.id(), v.value().to_vec())))
            .unwrap();
    }
    observer.finish().unwrap();
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn encode_decode_round_trip((d, item) in dialect_and_item()) {
        let bytes = item.to_vec(d).unwrap();
        prop_assert_eq!(item.encoded_len(d), bytes.len());
        let config = Config::new(d);
        let packet = y3::decode_with(&bytes, &config).unwrap();
        let back = Item::read_like(&packet, &item.value).unwrap();
        prop_assert!(same(&back, &item), "{:?} != {:?}", back, item);
    }

    #[test]
    fn chunked_observation_matches_whole((d, item) in dialect_and_item(), chunk in 1usize..17) {
        let bytes = item.to_vec(d).unwrap();
        let config = Config::new(d);
        let top: &[u32] = &[item.id];
        let whole = observe(config, &[top], &mut [bytes.as_slice()].into_iter());
        prop_assert_eq!(&whole, &vec![(0, item.id, bytes[bytes.len() - item.value_len(d)..].to_vec())]);
        prop_assert_eq!(observe(config, &[top], &mut bytes.chunks(chunk)), whole);
        if let Value::Node(children) | Value::Array(children) = &item.value {
            let mut ids: Vec<u32> = children.iter().map(|c| c.id).collect();
            ids.sort_unstable();
            ids.dedup();
            let paths: Vec<Vec<u32>> = ids.iter().map(|&c| vec![item.id, c]).collect();
            let refs: Vec<&[u32]> = paths.iter().map(Vec::as_slice).collect();
            if !refs.is_empty() {
                let whole = observe(config, &refs, &mut [bytes.as_slice()].into_iter());
                prop_assert_eq!(whole.len(), children.len());
                prop_assert_eq!(observe(config, &refs, &mut bytes.chunks(chunk)), whole);
            }
        }
    }

    /// Arbitrary bytes never panic any reader, and the streaming walk agrees with the
    /// one-shot walk on success or failure.
    #[test]
    fn arbitrary_bytes_agree(bytes in proptest::collection::vec(any::<u8>(), 0..64), chunk in 1usize..5) {
        let config = Config::DEFAULT;
        let one_shot = y3::validate_with(&bytes, &config).map_err(|e| e.kind());
        let mut observer = Observer::validator(config);
        let mut chunked = Ok(());
        for c in bytes.chunks(chunk) {
            if let Err(e) = observer.feed_each(c, |_| ()) {
                chunked = Err(e.kind());
                break;
            }
        }
        if chunked.is_ok() {
            chunked = observer.finish().map_err(|e| e.kind());
        }
        prop_assert_eq!(one_shot, chunked);
        if let Ok((packet, _)) = Packet::parse(&bytes) {
            let _ = packet.i64();
            let _ = packet.str();
            if let Ok(children) = packet.children() {
                for child in children.flatten() {
                    let _ = child.f64();
                }
            }
        }
    }
}
