//! Vector loading shared by the integration tests: the reference vectors in
//! `testdata/vectors/` turned into `y3::Item` trees.
#![allow(dead_code)]

use serde_json::Value as Json;
use y3::{Item, Value};

/// One vector file entry.
pub struct Vector {
    pub name: String,
    pub ty: String,
    pub tag: u32,
    pub hex: String,
    pub json: Json,
}

impl Vector {
    /// The reference bytes (empty when the reference refused to encode).
    pub fn bytes(&self) -> Vec<u8> {
        hex::decode(&self.hex).expect("vector hex")
    }

    /// Whether this entry comes from the high-level `Marshal` API.
    pub fn is_marshal(&self) -> bool {
        self.json["api"]
            .as_str()
            .is_some_and(|a| a.starts_with("NewCodec("))
    }
}

pub fn load(file: &str) -> Vec<Vector> {
    let path = format!(
        "{}/../../testdata/vectors/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let entries: Vec<Json> = serde_json::from_str(&text).expect("vector json");
    entries
        .into_iter()
        .map(|e| Vector {
            name: e["name"].as_str().unwrap().to_owned(),
            ty: e["type"].as_str().unwrap().to_owned(),
            tag: e["tag"].as_u64().unwrap() as u32,
            hex: e["hex"].as_str().unwrap().to_owned(),
            json: e,
        })
        .collect()
}

pub fn golang() -> Vec<Vector> {
    load("y3-codec-golang-v1.7.3.json")
}

pub fn nvarint() -> Vec<Vector> {
    load("yomorun-y3-v1.0.5.json")
}

fn recipe_string(recipe: &str) -> String {
    // "repeat 'a' 16384"
    let parts: Vec<&str> = recipe.split(' ').collect();
    assert_eq!(parts[0], "repeat", "recipe {recipe}");
    let ch = parts[1].trim_matches('\'');
    ch.repeat(parts[2].parse().unwrap())
}

/// The scalar of type `ty` described by a vector's `value` (and `bits` for floats).
pub fn scalar(ty: &str, value: &Json, bits: Option<&Json>) -> Value {
    let bits_u64 = || u64::from_str_radix(bits.unwrap().as_str().unwrap(), 16).unwrap();
    match ty {
        "int32" => Value::I32(value.as_i64().unwrap() as i32),
        "int64" => Value::I64(value.as_i64().unwrap()),
        "uint32" => Value::U32(value.as_u64().unwrap() as u32),
        "uint64" => Value::U64(value.as_u64().unwrap()),
        "float32" => Value::F32(f32::from_bits(bits_u64() as u32)),
        "float64" => Value::F64(f64::from_bits(bits_u64())),
        "bool" => Value::Bool(value.as_bool().unwrap()),
        "string" => Value::Str(value.as_str().unwrap().to_owned()),
        "bytes" => Value::Bytes(hex::decode(value.as_str().unwrap()).unwrap()),
        other => panic!("no scalar type {other}"),
    }
}

/// Children of a node described as `{"0x11": {"int32": 1}, "0x03": {"0x04": {...}}}`.
fn node_children(map: &serde_json::Map<String, Json>) -> Vec<Item> {
    map.iter()
        .map(|(key, inner)| {
            let id = u32::from_str_radix(key.trim_start_matches("0x"), 16).unwrap();
            let inner = inner.as_object().unwrap();
            if inner.keys().all(|k| k.starts_with("0x")) && !inner.is_empty() {
                Item::node(id, node_children(inner))
            } else {
                let (ty, v) = inner.iter().next().unwrap();
                Item::new(id, scalar(ty, v, None))
            }
        })
        .collect()
}

/// The value in the report's C63 data set at key `k` (1-based).
pub fn stress_value(k: u32) -> Value {
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

/// The packet(s) a low-level (non-`Marshal`) vector describes, or `None` for entries that
/// are not built from the packet encoders.
pub fn items(v: &Vector) -> Option<Vec<Item>> {
    if v.is_marshal() {
        return None;
    }
    let value = &v.json["value"];
    let item = match v.ty.as_str() {
        "node" if v.name.starts_with("stress_C63") => Item::node(
            v.tag,
            (1..=63).map(|k| Item::new(k, stress_value(k))).collect(),
        ),
        // node_duplicate_child_keys: three int32 children, all with key 0.
        "node" if value.is_array() => Item::node(
            v.tag,
            value
                .as_array()
                .unwrap()
                .iter()
                .map(|e| Item::new(0, scalar("int32", e, None)))
                .collect(),
        ),
        "node" => Item::node(v.tag, node_children(value.as_object().unwrap())),
        "slice<int32>" => Item::array(
            v.tag,
            value
                .as_array()
                .unwrap()
                .iter()
                .map(|e| Item::new(0, scalar("int32", e, None)))
                .collect(),
        ),
        "stream" => {
            // spec_tlv_example: age 0x01 = 5, summary 0x02 { name 0x03, create 0x04 }.
            return Some(vec![
                Item::new(0x01, Value::I32(5)),
                Item::node(
                    0x02,
                    vec![
                        Item::new(0x03, Value::Str("CELLA".into())),
                        Item::new(0x04, Value::Str("Y3".into())),
                    ],
                ),
            ]);
        }
        ty => {
            let scalar = match v.json.get("value_recipe") {
                Some(recipe) => Value::Str(recipe_string(recipe.as_str().unwrap())),
                None => scalar(ty, value, v.json.get("bits")),
            };
            Item::new(v.tag, scalar)
        }
    };
    Some(vec![item])
}

/// Bit-exact comparison of two trees (NaN payloads and the sign of zero matter).
pub fn same(a: &Item, b: &Item) -> bool {
    a.id == b.id
        && match (&a.value, &b.value) {
            (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
            (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
            (Value::Node(x), Value::Node(y)) | (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
            }
            (x, y) => x == y,
        }
}
