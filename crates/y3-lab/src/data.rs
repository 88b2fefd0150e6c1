//! The report's data sets, built once per run in every format and checked equal.
//!
//! A case `Cnn-Kkk` is a packet of `nn` key-value pairs, keys `0x01..=nn`, from which the
//! value of key `kk` is taken. Values cycle with the key, as in the report's generator:
//!
//! ```text
//! key   1    2          3           4         5                 6              7
//! value "a"  int32 -65  uint32 128  int64 -1  uint64 2^64-1     float32 0.25   float64 23
//!       (then again from key 8)
//! ```
//!
//! The Y3 packet is a node `80` (key 0) holding the pairs as primitive packets, the layout the
//! report draws (`0x80 / 0x01 value ... 0x3f value`); the JSON text is `{"k1":"a","k2":-65,...}`
//! with the numbers written as Go's `encoding/json` writes them (`23`, not `23.0`).
//!
//! Orders: `ascending` puts key K at position K (the report's description); `published`
//! draws a random permutation per case, because the report's generator built the packet from
//! a Go map and so placed the key at a random position on every run. The permutation is drawn
//! from the run's seed and recorded with the results. All formats of one data set share the
//! same key order.

use std::fmt;

use anyhow::{bail, ensure, Context, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use y3::{Dialect, Item, Value};

/// The report's cases: (pairs, observed key).
pub const CASES: [(u32, u32); 4] = [(3, 2), (16, 8), (32, 16), (63, 32)];

/// The key-position sweep on C63: first, middle and last key (ascending order).
pub const SWEEP: [(u32, u32, &str); 3] = [(63, 1, "first"), (63, 32, "middle"), (63, 63, "last")];

/// A short string kept inline so that comparing extracted values never allocates.
///
/// Holds up to 15 bytes; longer strings keep their length and first 15 bytes (the data sets
/// only use `"a"`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InlineStr {
    len: usize,
    bytes: [u8; 15],
}

impl InlineStr {
    /// Copies (a prefix of) `s`.
    #[inline]
    pub fn new(s: &str) -> InlineStr {
        let mut bytes = [0u8; 15];
        let n = s.len().min(15);
        bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        InlineStr {
            len: s.len(),
            bytes,
        }
    }

    /// The kept bytes as text.
    pub fn as_str(&self) -> &str {
        let n = self.len.min(15);
        std::str::from_utf8(&self.bytes[..n]).unwrap_or("<invalid utf-8>")
    }
}

impl fmt::Debug for InlineStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// One extracted value, comparable without allocating.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A string.
    Str(InlineStr),
    /// `int32`.
    I32(i32),
    /// `uint32`.
    U32(u32),
    /// `int64`.
    I64(i64),
    /// `uint64`.
    U64(u64),
    /// `float32`.
    F32(f32),
    /// `float64`.
    F64(f64),
    /// Nothing was found, or the value had the wrong type.
    Missing,
}

impl Scalar {
    /// A string value.
    #[inline]
    pub fn str(s: &str) -> Scalar {
        Scalar::Str(InlineStr::new(s))
    }

    /// The type name used in the Go data file (`string`, `int32`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "string",
            Scalar::I32(_) => "int32",
            Scalar::U32(_) => "uint32",
            Scalar::I64(_) => "int64",
            Scalar::U64(_) => "uint64",
            Scalar::F32(_) => "float32",
            Scalar::F64(_) => "float64",
            Scalar::Missing => "missing",
        }
    }

    /// The value as JSON text, the way Go's `encoding/json` writes it.
    pub fn json(&self) -> String {
        match self {
            Scalar::Str(s) => serde_json::Value::from(s.as_str()).to_string(),
            Scalar::I32(v) => v.to_string(),
            Scalar::U32(v) => v.to_string(),
            Scalar::I64(v) => v.to_string(),
            Scalar::U64(v) => v.to_string(),
            Scalar::F32(v) => go_float(f64::from(*v)),
            Scalar::F64(v) => go_float(*v),
            Scalar::Missing => "null".into(),
        }
    }

    /// The y3 value of the same type.
    pub fn y3(&self) -> Option<Value> {
        Some(match *self {
            Scalar::Str(s) => Value::Str(s.as_str().into()),
            Scalar::I32(v) => Value::I32(v),
            Scalar::U32(v) => Value::U32(v),
            Scalar::I64(v) => Value::I64(v),
            Scalar::U64(v) => Value::U64(v),
            Scalar::F32(v) => Value::F32(v),
            Scalar::F64(v) => Value::F64(v),
            Scalar::Missing => return None,
        })
    }

    /// Reads a y3 packet as a value of this scalar's type.
    #[inline]
    pub fn read_y3(&self, packet: &y3::Packet<'_>) -> Scalar {
        let read = match self {
            Scalar::Str(_) => packet.str().map(Scalar::str),
            Scalar::I32(_) => packet.i32().map(Scalar::I32),
            Scalar::U32(_) => packet.u32().map(Scalar::U32),
            Scalar::I64(_) => packet.i64().map(Scalar::I64),
            Scalar::U64(_) => packet.u64().map(Scalar::U64),
            Scalar::F32(_) => packet.f32().map(Scalar::F32),
            Scalar::F64(_) => packet.f64().map(Scalar::F64),
            Scalar::Missing => return Scalar::Missing,
        };
        read.unwrap_or(Scalar::Missing)
    }

    /// Reads a parsed JSON value as a value of this scalar's type (numbers must fit).
    pub fn read_json(&self, v: &serde_json::Value) -> Scalar {
        let got = match self {
            Scalar::Str(_) => v.as_str().map(Scalar::str),
            Scalar::I32(_) => v
                .as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .map(Scalar::I32),
            Scalar::U32(_) => v
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .map(Scalar::U32),
            Scalar::I64(_) => v.as_i64().map(Scalar::I64),
            Scalar::U64(_) => v.as_u64().map(Scalar::U64),
            Scalar::F32(_) => v.as_f64().map(|v| Scalar::F32(v as f32)),
            Scalar::F64(_) => v.as_f64().map(Scalar::F64),
            Scalar::Missing => None,
        };
        got.unwrap_or(Scalar::Missing)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.type_name(), self.json())
    }
}

/// Go's `encoding/json` float format for the values used here: integral values without a
/// fraction (`23`), others in the shortest round-trip form (`0.25`).
fn go_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e21 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The value of key `k` (1-based) in every data set.
pub fn value_for(k: u32) -> Scalar {
    match (k - 1) % 7 {
        0 => Scalar::str("a"),
        1 => Scalar::I32(-65),
        2 => Scalar::U32(128),
        3 => Scalar::I64(-1),
        4 => Scalar::U64(u64::MAX),
        5 => Scalar::F32(0.25),
        _ => Scalar::F64(23.0),
    }
}

/// How the keys of a data set are ordered on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Key K at position K.
    Ascending,
    /// A permutation drawn from the run's seed (the report's map order).
    Published,
}

impl Order {
    /// `ascending` or `published`.
    pub fn name(self) -> &'static str {
        match self {
            Order::Ascending => "ascending",
            Order::Published => "published",
        }
    }
}

/// One data set: the same pairs in every format the lab times.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Pairs in the packet.
    pub count: u32,
    /// The observed key.
    pub key: u32,
    /// Key order.
    pub order: Order,
    /// Keys in wire order.
    pub keys: Vec<u32>,
    /// 1-based position of `key` in `keys`.
    pub key_pos: usize,
    /// What every implementation must extract.
    pub expected: Scalar,
    /// The Y3 packet (`golang` dialect, byte-exact with y3-codec-golang v1.7.3).
    pub y3: Vec<u8>,
    /// The JSON object text.
    pub json: Vec<u8>,
}

impl Dataset {
    /// Builds the data set `C{count}-K{key}` with keys in `keys` order.
    ///
    /// # Errors
    /// When `keys` is not a permutation of `1..=count` holding `key`, or encoding fails.
    pub fn new(count: u32, key: u32, order: Order, keys: Vec<u32>) -> Result<Dataset> {
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        ensure!(
            sorted == (1..=count).collect::<Vec<_>>(),
            "keys are not a permutation of 1..={count}"
        );
        let key_pos = keys
            .iter()
            .position(|&k| k == key)
            .context("observed key not in the data set")?
            + 1;
        let children = keys
            .iter()
            .map(|&k| Item::new(k, value_for(k).y3().expect("value_for never gives Missing")))
            .collect();
        let y3 = Item::node(0, children).to_vec(Dialect::Golang)?;
        let mut json = String::from("{");
        for (i, &k) in keys.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&format!("\"k{k}\":{}", value_for(k).json()));
        }
        json.push('}');
        Ok(Dataset {
            count,
            key,
            order,
            keys,
            key_pos,
            expected: value_for(key),
            y3,
            json: json.into_bytes(),
        })
    }

    /// Keys `1..=count` in ascending order.
    ///
    /// # Errors
    /// As [`Dataset::new`].
    pub fn ascending(count: u32, key: u32) -> Result<Dataset> {
        Dataset::new(count, key, Order::Ascending, (1..=count).collect())
    }

    /// Keys in a permutation drawn from `seed` (and the case, so that each case differs).
    ///
    /// # Errors
    /// As [`Dataset::new`].
    pub fn published(count: u32, key: u32, seed: u64) -> Result<Dataset> {
        let mut keys: Vec<u32> = (1..=count).collect();
        let case_seed = seed ^ (u64::from(count) << 32 | u64::from(key));
        keys.shuffle(&mut rand::rngs::StdRng::seed_from_u64(case_seed));
        Dataset::new(count, key, Order::Published, keys)
    }

    /// `C63-K32`.
    pub fn case(&self) -> String {
        format!("C{:02}-K{:02}", self.count, self.key)
    }

    /// `first`, `middle`, `last` or `pos N` (published order).
    pub fn position(&self) -> String {
        if self.key_pos == 1 {
            "first".into()
        } else if self.key_pos == self.count as usize {
            "last".into()
        } else if self.order == Order::Ascending {
            "middle".into()
        } else {
            format!("pos {}", self.key_pos)
        }
    }

    /// A short unique label: `C63-K32 ascending`.
    pub fn label(&self) -> String {
        format!("{} {}", self.case(), self.order.name())
    }

    /// Checks that the Y3 packet and the JSON text hold exactly the pairs of
    /// [`value_for`], in `keys` order, and that the observed key reads back as `expected`.
    ///
    /// # Errors
    /// The first difference found.
    pub fn verify(&self) -> Result<()> {
        let root = y3::decode(&self.y3)?;
        ensure!(root.is_node() && root.id() == 0, "root is not node 0x80");
        let mut n = 0;
        for (child, &k) in root.children()?.zip(&self.keys) {
            let child = child?;
            let want = value_for(k);
            ensure!(
                child.id() == k,
                "y3 key {} where {k} was expected",
                child.id()
            );
            let got = want.read_y3(&child);
            ensure!(got == want, "y3 key {k}: {got} != {want}");
            n += 1;
        }
        ensure!(n == self.keys.len(), "y3 packet has {n} pairs");
        let text = std::str::from_utf8(&self.json)?;
        let parsed: serde_json::Value = serde_json::from_str(text)?;
        let object = parsed.as_object().context("JSON is not an object")?;
        ensure!(
            object.len() == self.keys.len(),
            "JSON has {} pairs",
            object.len()
        );
        for &k in &self.keys {
            let want = value_for(k);
            let got = object
                .get(&format!("k{k}"))
                .map_or(Scalar::Missing, |v| want.read_json(v));
            ensure!(got == want, "JSON k{k}: {got} != {want}");
        }
        // The JSON keys appear in wire order too.
        let mut at = 0;
        for &k in &self.keys {
            let needle = format!("\"k{k}\":");
            match text[at..].find(&needle) {
                Some(i) => at += i + needle.len(),
                None => bail!("JSON key k{k} out of order"),
            }
        }
        let observed = y3::get(&self.y3, &[0, self.key])?.context("key not found")?;
        ensure!(self.expected.read_y3(&observed) == self.expected);
        Ok(())
    }
}

/// Every data set of a codec run: the four cases in both orders, then the C63 sweep's
/// first and last key (its middle key is C63-K32 ascending).
///
/// # Errors
/// When a data set fails to build or to [verify](Dataset::verify).
pub fn datasets(seed: u64) -> Result<Vec<Dataset>> {
    let mut out = Vec::new();
    for (n, k) in CASES {
        out.push(Dataset::ascending(n, k)?);
    }
    for (n, k) in CASES {
        out.push(Dataset::published(n, k, seed)?);
    }
    for (n, k, _) in SWEEP {
        if !CASES.contains(&(n, k)) {
            out.push(Dataset::ascending(n, k)?);
        }
    }
    for ds in &out {
        ds.verify().with_context(|| ds.label())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cycle_like_the_report() {
        assert_eq!(value_for(1), Scalar::str("a"));
        assert_eq!(value_for(2), Scalar::I32(-65));
        assert_eq!(value_for(5), Scalar::U64(u64::MAX));
        assert_eq!(value_for(8), Scalar::str("a"));
        assert_eq!(value_for(32), Scalar::I64(-1));
        assert_eq!(value_for(63), Scalar::F64(23.0));
    }

    #[test]
    fn small_case_bytes() {
        let ds = Dataset::ascending(3, 2).unwrap();
        // 80 len | 01 01 61 | 02 02 ff 3f | 03 02 81 00
        assert_eq!(hex(&ds.y3), "800b0101610202ff3f03028100");
        assert_eq!(ds.json, br#"{"k1":"a","k2":-65,"k3":128}"#);
        assert_eq!(ds.expected, Scalar::I32(-65));
        assert_eq!((ds.key_pos, ds.position()), (2, "middle".to_string()));
    }

    #[test]
    fn every_dataset_verifies_and_formats_agree() {
        let sets = datasets(7).unwrap();
        assert_eq!(sets.len(), 10);
        let c63 = &sets[3];
        assert_eq!(c63.case(), "C63-K32");
        assert_eq!(c63.expected, Scalar::I64(-1));
        // C63 needs a two-byte root length.
        assert_eq!(c63.y3[0], 0x80);
        assert!(c63.y3[1] & 0x80 != 0);
        let json = std::str::from_utf8(&c63.json).unwrap();
        assert!(json.contains(r#""k5":18446744073709551615"#));
        assert!(json.contains(r#""k6":0.25"#));
        assert!(json.contains(r#""k7":23,"#));
    }

    #[test]
    fn published_order_is_seeded() {
        let a = Dataset::published(63, 32, 1).unwrap();
        let b = Dataset::published(63, 32, 1).unwrap();
        let c = Dataset::published(63, 32, 2).unwrap();
        assert_eq!(a.keys, b.keys);
        assert_ne!(a.keys, c.keys);
        assert_ne!(a.keys, (1..=63).collect::<Vec<_>>());
        a.verify().unwrap();
        assert_eq!(a.expected, Scalar::I64(-1));
    }

    #[test]
    fn verify_catches_a_wrong_value() {
        let mut ds = Dataset::ascending(3, 2).unwrap();
        ds.json = br#"{"k1":"a","k2":-66,"k3":128}"#.to_vec();
        assert!(ds.verify().is_err());
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }
}
