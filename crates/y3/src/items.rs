//! Typed items: packets written as plain data with their wire types spelled out, the model
//! `y3 encode` reads from JSON and the Python binding's `encode` reads from dicts.
//!
//! ```text
//! item    = { "tag": ID, TYPE: VALUE }             one value key, nothing else
//!         | { "tag": ID, "node":  [item, ...] }
//!         | { "tag": ID, "array": [item, ...] }    element tags may be left out (0)
//! TYPE    = int32 int64 uint32 uint64 float32 float64 float32_bits float64_bits
//!         | bool | string | bytes
//! ```
//!
//! The walk over an item (exactly one value key, the tag defaulting to 0 in arrays, nested
//! nodes and arrays, the tag checked against the dialect) lives here once. A front end
//! implements [`ItemSource`] for its own values: how a scalar is spelled (a JSON number, a
//! Python int, a hex string, a `bytes`) and how its errors are worded are its own.
//!
//! ```
//! use y3::items::{item, ItemSource, Problem, ValueKey};
//! use y3::{Dialect, EncodeError, Value};
//!
//! /// A toy source: `(tag, key, text)` leaves.
//! struct Leaf(u32, &'static str, &'static str);
//!
//! impl ItemSource for Leaf {
//!     type Error = String;
//!     fn entries(&self, _at: &str) -> Result<Vec<(String, Self)>, String> {
//!         Ok(vec![("tag".into(), Leaf(self.0, "", "")), (self.1.into(), Leaf(0, "", self.2))])
//!     }
//!     fn elements(&self, at: &str) -> Result<Vec<Self>, String> {
//!         Err(format!("{at}: no lists here"))
//!     }
//!     fn tag(&self, _at: &str) -> Result<u32, String> {
//!         Ok(self.0)
//!     }
//!     fn scalar(&self, key: ValueKey, at: &str) -> Result<Value, String> {
//!         match key {
//!             ValueKey::String => Ok(Value::Str(self.2.into())),
//!             _ => Err(format!("{at}: only strings")),
//!         }
//!     }
//!     fn problem(at: &str, problem: Problem<'_>) -> String {
//!         format!("{at}: {problem:?}")
//!     }
//!     fn bad_tag(at: &str, error: EncodeError, _dialect: Dialect) -> String {
//!         format!("{at}: {error}")
//!     }
//! }
//!
//! let it = item(&Leaf(0x10, "string", "hi"), "$", Dialect::Golang, false)?;
//! assert_eq!(it.to_vec(Dialect::Golang).unwrap(), [0x10, 0x02, b'h', b'i']);
//! let err = item(&Leaf(0x10, "colour", "red"), "$", Dialect::Golang, false).unwrap_err();
//! assert_eq!(err, "$: UnknownKey(\"colour\")");
//! # Ok::<(), String>(())
//! ```

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::{Dialect, EncodeError, Item, Value};

/// The value keys an item may carry (exactly one of them), in [`ValueKey`] order.
pub const VALUE_KEYS: [&str; 13] = [
    "int32",
    "int64",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "float32_bits",
    "float64_bits",
    "bool",
    "string",
    "bytes",
    "node",
    "array",
];

/// Which value an item holds: the key beside its `"tag"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKey {
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint32`.
    Uint32,
    /// `uint64`.
    Uint64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `float32_bits`: IEEE-754 bits.
    Float32Bits,
    /// `float64_bits`: IEEE-754 bits.
    Float64Bits,
    /// `bool`.
    Bool,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `node`: a list of child items.
    Node,
    /// `array`: a list of element items.
    Array,
}

impl ValueKey {
    /// Every key, in [`VALUE_KEYS`] order.
    pub const ALL: [ValueKey; 13] = [
        ValueKey::Int32,
        ValueKey::Int64,
        ValueKey::Uint32,
        ValueKey::Uint64,
        ValueKey::Float32,
        ValueKey::Float64,
        ValueKey::Float32Bits,
        ValueKey::Float64Bits,
        ValueKey::Bool,
        ValueKey::String,
        ValueKey::Bytes,
        ValueKey::Node,
        ValueKey::Array,
    ];

    /// The key as written.
    pub fn name(self) -> &'static str {
        VALUE_KEYS[self as usize]
    }

    /// The key written `name`, if it is one.
    pub fn from_name(name: &str) -> Option<ValueKey> {
        VALUE_KEYS
            .iter()
            .position(|k| *k == name)
            .map(|i| ValueKey::ALL[i])
    }

    /// The range of an integer key's values (`None` for the others).
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            ValueKey::Int32 => (i32::MIN.into(), i32::MAX.into()),
            ValueKey::Int64 => (i64::MIN.into(), i64::MAX.into()),
            ValueKey::Uint32 | ValueKey::Float32Bits => (0, u32::MAX.into()),
            ValueKey::Uint64 | ValueKey::Float64Bits => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// The value an integer key's `v` stands for (`None`: out of range, or not an
    /// integer key).
    pub fn int_value(self, v: i128) -> Option<Value> {
        let (min, max) = self.int_range()?;
        if !(min..=max).contains(&v) {
            return None;
        }
        // In range, checked just above.
        Some(match self {
            ValueKey::Int32 => Value::I32(v as i32),
            ValueKey::Int64 => Value::I64(v as i64),
            ValueKey::Uint32 => Value::U32(v as u32),
            ValueKey::Uint64 => Value::U64(v as u64),
            ValueKey::Float32Bits => Value::F32(f32::from_bits(v as u32)),
            _ => Value::F64(f64::from_bits(v as u64)),
        })
    }
}

/// A tag id written as a string: `"0x10"` (hex) or `"16"`.
pub fn parse_tag_text(text: &str) -> Option<u32> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// A named non-finite float: `inf`, `+inf`, `infinity`, `-inf`, `-infinity`, `nan`, in
/// any case (`y3 get`'s spellings, and Go's).
pub fn special_float(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    }
}

/// `wide` rounded to the nearest `f32`; `None` when a finite value overflows to infinity.
pub fn narrow_f32(wide: f64) -> Option<f32> {
    let narrow = wide as f32;
    (!wide.is_finite() || narrow.is_finite()).then_some(narrow)
}

/// A structural fault of an item, for the front end to word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem<'a> {
    /// A key that is neither `tag` nor a value key.
    UnknownKey(&'a str),
    /// Two value keys, in the order met.
    TwoValueKeys(&'static str, &'static str),
    /// No `tag` outside an array.
    MissingTag,
    /// No value key.
    NoValueKey,
}

/// What a front end's values answer (a JSON value, a Python object). Errors are the front
/// end's own, located by `at` (`$[1].node[0].int32`).
pub trait ItemSource: Sized {
    /// The front end's error.
    type Error;
    /// The entries of an item object, in order (an error when it is not an object).
    fn entries(&self, at: &str) -> Result<Vec<(String, Self)>, Self::Error>;
    /// The elements of a `node` or `array` list (an error when it is not a list).
    fn elements(&self, at: &str) -> Result<Vec<Self>, Self::Error>;
    /// The value of a `tag` entry.
    fn tag(&self, at: &str) -> Result<u32, Self::Error>;
    /// The value of a scalar key (every key but `node` and `array`).
    fn scalar(&self, key: ValueKey, at: &str) -> Result<Value, Self::Error>;
    /// A structural fault at `at`.
    fn problem(at: &str, problem: Problem<'_>) -> Self::Error;
    /// A tag the dialect cannot carry (`at` names the tag).
    fn bad_tag(at: &str, error: EncodeError, dialect: Dialect) -> Self::Error;
}

/// The item `src` describes, at `at`; `in_array` lets its tag default to 0.
///
/// # Errors
/// The source's: a structural [`Problem`], a scalar it refuses, a tag the dialect cannot
/// carry.
pub fn item<S: ItemSource>(
    src: &S,
    at: &str,
    dialect: Dialect,
    in_array: bool,
) -> Result<Item, S::Error> {
    let mut tag = None;
    let mut found: Option<(ValueKey, S)> = None;
    for (key, raw) in src.entries(at)? {
        if key == "tag" {
            tag = Some(raw);
            continue;
        }
        let Some(this) = ValueKey::from_name(&key) else {
            return Err(S::problem(at, Problem::UnknownKey(&key)));
        };
        if let Some((first, _)) = &found {
            return Err(S::problem(
                at,
                Problem::TwoValueKeys(first.name(), this.name()),
            ));
        }
        found = Some((this, raw));
    }
    let tag_at = format!("{at}.tag");
    let id = match tag {
        Some(raw) => raw.tag(&tag_at)?,
        None if in_array => 0,
        None => return Err(S::problem(at, Problem::MissingTag)),
    };
    let Some((key, raw)) = found else {
        return Err(S::problem(at, Problem::NoValueKey));
    };
    let here = format!("{at}.{}", key.name());
    let value = match key {
        ValueKey::Node => Value::Node(children(&raw, &here, dialect, false)?),
        ValueKey::Array => Value::Array(children(&raw, &here, dialect, true)?),
        scalar => raw.scalar(scalar, &here)?,
    };
    let item = Item::new(id, value);
    item.tag()
        .check(dialect)
        .map_err(|e| S::bad_tag(&tag_at, e, dialect))?;
    Ok(item)
}

/// The items of a `node` (`in_array` false) or `array` list.
fn children<S: ItemSource>(
    raw: &S,
    at: &str,
    dialect: Dialect,
    in_array: bool,
) -> Result<Vec<Item>, S::Error> {
    raw.elements(at)?
        .iter()
        .enumerate()
        .map(|(i, child)| item(child, &format!("{at}[{i}]"), dialect, in_array))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_ranges_are_exact() {
        for (i, key) in ValueKey::ALL.iter().enumerate() {
            assert_eq!(key.name(), VALUE_KEYS[i]);
            assert_eq!(ValueKey::from_name(VALUE_KEYS[i]), Some(*key));
        }
        assert_eq!(ValueKey::from_name("colour"), None);
        assert_eq!(
            ValueKey::Int32.int_value(i32::MIN.into()),
            Some(Value::I32(i32::MIN))
        );
        assert_eq!(ValueKey::Int32.int_value(i128::from(i32::MAX) + 1), None);
        assert_eq!(ValueKey::Uint64.int_value(-1), None);
        assert_eq!(
            ValueKey::Uint64.int_value(u64::MAX.into()),
            Some(Value::U64(u64::MAX))
        );
        assert_eq!(ValueKey::String.int_value(1), None);
    }

    #[test]
    fn tags_floats_and_narrowing() {
        assert_eq!(parse_tag_text("0x10"), Some(16));
        assert_eq!(parse_tag_text(" 16 "), Some(16));
        assert_eq!(parse_tag_text("0x1_0"), None);
        assert_eq!(special_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(special_float("NaN").is_some_and(f64::is_nan));
        assert_eq!(special_float("1.5"), None);
        assert_eq!(narrow_f32(1e39), None);
        assert_eq!(narrow_f32(f64::INFINITY), Some(f32::INFINITY));
        assert_eq!(narrow_f32(0.25), Some(0.25));
    }
}
