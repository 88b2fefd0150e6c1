//! The benches' data sets, shared by `observe.rs` and `filter.rs`: C{n} is a node 0x00 with
//! keys 0x01..=n whose values cycle string, int32, uint32, int64, uint64, float32, float64
//! (the published Y3 report's shapes).

use y3::{Dialect, Item, Value};

/// The value under key `k`.
pub fn value(k: u32) -> Value {
    match (k - 1) % 7 {
        0 => Value::Str("a".into()),
        1 => Value::I32(-65),
        2 => Value::U32(128),
        3 => Value::I64(-1),
        4 => Value::U64(u64::MAX),
        5 => Value::F32(0.25),
        _ => Value::F64(23.0),
    }
}

/// The C{n} packet.
pub fn packet(n: u32) -> Vec<u8> {
    Item::node(0, (1..=n).map(|k| Item::new(k, value(k))).collect())
        .to_vec(Dialect::Golang)
        .unwrap()
}
