//! Typed JSON: packets written as JSON with their wire types spelled out.
//!
//! ```text
//! packet  = { "tag": ID, TYPE: VALUE }             one value key, nothing else
//!         | { "tag": ID, "node":  [packet, ...] }
//!         | { "tag": ID, "array": [packet, ...] }  element tags may be left out (0)
//! ID      = JSON integer, or a string "0x10" / "16"
//! TYPE    = int32 int64 uint32 uint64            JSON integers, range-checked exactly
//!         | float32 float64                      JSON numbers, or "inf" "-inf" "nan"
//!         | float32_bits float64_bits            IEEE-754 bits as 8 / 16 hex digits
//!         | bool | string | bytes                true/false, JSON string, hex string
//! input   = packet | [packet, ...]               an array is a stream of top-level packets
//! ```
//!
//! Integers go through serde_json's exact `u64`/`i64` accessors, never through `f64`, so
//! `18446744073709551615` and `-9223372036854775808` survive. Errors name the JSON
//! location: `$[1].node[0].int32: 2147483648 out of range for int32`.

use serde_json::Value as Json;
use y3::items::{self, ItemSource, Problem, ValueKey, VALUE_KEYS};
use y3::{Dialect, EncodeError, Item, Value};

use crate::error::CliError;

/// Parses typed JSON into the items it describes.
///
/// # Errors
/// `invalid_json` for text that is not JSON, `invalid_packet` for JSON that is not typed
/// JSON (the message names the location), and the codec's kind for a tag the dialect
/// cannot carry.
pub fn parse(text: &[u8], dialect: Dialect) -> Result<Vec<Item>, CliError> {
    let json: Json = serde_json::from_slice(text)
        .map_err(|e| CliError::bad_input("invalid_json", format!("not JSON: {e}")))?;
    items(&json, dialect)
}

/// The items of parsed typed JSON: one packet object, or an array of them.
///
/// # Errors
/// As [`parse`], without `invalid_json`.
pub fn items(json: &Json, dialect: Dialect) -> Result<Vec<Item>, CliError> {
    match json {
        Json::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, p)| items::item(&Typed(p), &format!("$[{i}]"), dialect, false))
            .collect(),
        _ => Ok(vec![items::item(&Typed(json), "$", dialect, false)?]),
    }
}

/// A JSON value read as a typed item (the walk is `y3::items`; the spellings are JSON's).
struct Typed<'j>(&'j Json);

impl ItemSource for Typed<'_> {
    type Error = CliError;

    fn entries(&self, at: &str) -> Result<Vec<(String, Self)>, CliError> {
        let Json::Object(obj) = self.0 else {
            return Err(bad(
                at,
                format!("expected a packet object, found {}", describe(self.0)),
            ));
        };
        Ok(obj.iter().map(|(k, v)| (k.clone(), Typed(v))).collect())
    }

    fn elements(&self, at: &str) -> Result<Vec<Self>, CliError> {
        let Json::Array(list) = self.0 else {
            return Err(bad(
                at,
                format!(
                    "expected a JSON array of packets, found {}",
                    describe(self.0)
                ),
            ));
        };
        Ok(list.iter().map(Typed).collect())
    }

    fn tag(&self, at: &str) -> Result<u32, CliError> {
        let parsed = match self.0 {
            Json::Number(n) => n.as_u64().and_then(|v| u32::try_from(v).ok()),
            Json::String(s) => items::parse_tag_text(s),
            _ => None,
        };
        parsed.ok_or_else(|| {
            bad(
                at,
                format!(
                    "expected a tag id (integer 0..=4294967295 or \"0x..\"), found {}",
                    describe(self.0)
                ),
            )
        })
    }

    fn scalar(&self, key: ValueKey, at: &str) -> Result<Value, CliError> {
        let raw = self.0;
        Ok(match key {
            ValueKey::Float32 => {
                let wide = float64(raw, at)?;
                Value::F32(
                    items::narrow_f32(wide)
                        .ok_or_else(|| bad(at, format!("{wide} out of range for float32")))?,
                )
            }
            ValueKey::Float64 => Value::F64(float64(raw, at)?),
            ValueKey::Float32Bits => Value::F32(f32::from_bits(u32::from_be_bytes(bits(raw, at)?))),
            ValueKey::Float64Bits => Value::F64(f64::from_bits(u64::from_be_bytes(bits(raw, at)?))),
            ValueKey::Bool => Value::Bool(raw.as_bool().ok_or_else(|| {
                bad(
                    at,
                    format!("expected true or false, found {}", describe(raw)),
                )
            })?),
            ValueKey::String => Value::Str(
                raw.as_str()
                    .ok_or_else(|| {
                        bad(
                            at,
                            format!("expected a JSON string, found {}", describe(raw)),
                        )
                    })?
                    .to_owned(),
            ),
            ValueKey::Bytes => Value::Bytes(hex_string(raw, at)?),
            int => integer(raw, at, int)?,
        })
    }

    fn problem(at: &str, problem: Problem<'_>) -> CliError {
        match problem {
            Problem::UnknownKey(key) => bad(
                at,
                format!(
                    "unknown key {key:?} (expected \"tag\" and one of {})",
                    VALUE_KEYS.join(" ")
                ),
            ),
            Problem::TwoValueKeys(first, second) => bad(
                at,
                format!("two value keys {first:?} and {second:?}: a packet has exactly one"),
            ),
            Problem::MissingTag => bad(at, "missing \"tag\""),
            Problem::NoValueKey => bad(
                at,
                format!("no value key: expected one of {}", VALUE_KEYS.join(" ")),
            ),
        }
    }

    fn bad_tag(at: &str, error: EncodeError, dialect: Dialect) -> CliError {
        CliError::bad_input(
            error.kind(),
            format!("{at}: {error} (dialect {})", dialect.name()),
        )
    }
}

fn bad(at: &str, reason: impl std::fmt::Display) -> CliError {
    CliError::bad_input("invalid_packet", format!("{at}: {reason}"))
}

fn describe(json: &Json) -> String {
    let text = json.to_string();
    if text.chars().count() > 40 {
        format!("{}...", text.chars().take(37).collect::<String>())
    } else {
        text
    }
}

/// An integer key's value: a JSON integer, read exactly (never through `f64`).
fn integer(raw: &Json, at: &str, key: ValueKey) -> Result<Value, CliError> {
    let exact = raw
        .as_i64()
        .map(i128::from)
        .or_else(|| raw.as_u64().map(i128::from));
    match exact {
        Some(v) => key
            .int_value(v)
            .ok_or_else(|| bad(at, format!("{v} out of range for {}", key.name()))),
        None => Err(bad(
            at,
            format!(
                "expected a JSON integer for {}, found {}",
                key.name(),
                describe(raw)
            ),
        )),
    }
}

fn float64(raw: &Json, at: &str) -> Result<f64, CliError> {
    raw.as_f64()
        .or_else(|| raw.as_str().and_then(items::special_float))
        .ok_or_else(|| {
            bad(
                at,
                format!(
                    "expected a JSON number or \"inf\"/\"-inf\"/\"nan\", found {}",
                    describe(raw)
                ),
            )
        })
}

fn bits<const N: usize>(raw: &Json, at: &str) -> Result<[u8; N], CliError> {
    let bytes = hex_string(raw, at)?;
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        bad(
            at,
            format!(
                "expected {} hex digits of IEEE-754 bits, found {}",
                2 * N,
                2 * bytes.len()
            ),
        )
    })
}

fn hex_string(raw: &Json, at: &str) -> Result<Vec<u8>, CliError> {
    let Some(text) = raw.as_str() else {
        return Err(bad(
            at,
            format!("expected a hex string, found {}", describe(raw)),
        ));
    };
    hex::decode(text).map_err(|e| bad(at, format!("invalid hex {}: {e}", describe(raw))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Item, CliError> {
        let mut items = parse(text.as_bytes(), Dialect::Golang)?;
        assert_eq!(items.len(), 1);
        Ok(items.remove(0))
    }

    fn err(text: &str) -> CliError {
        parse(text.as_bytes(), Dialect::Golang).unwrap_err()
    }

    #[test]
    fn scalars() {
        assert_eq!(
            one(r#"{"tag":17,"int32":-1}"#).unwrap(),
            Item::new(17, Value::I32(-1))
        );
        assert_eq!(
            one(r#"{"tag":"0x11","uint64":18446744073709551615}"#).unwrap(),
            Item::new(17, Value::U64(u64::MAX))
        );
        assert_eq!(
            one(r#"{"tag":17,"int64":-9223372036854775808}"#).unwrap(),
            Item::new(17, Value::I64(i64::MIN))
        );
        assert_eq!(
            one(r#"{"tag":17,"float32_bits":"80000000"}"#)
                .unwrap()
                .value,
            Value::F32(-0.0)
        );
        let Value::F64(nan) = one(r#"{"tag":17,"float64":"nan"}"#).unwrap().value else {
            panic!("not a float64");
        };
        assert!(nan.is_nan());
        assert_eq!(
            one(r#"{"tag":17,"bytes":"00ff"}"#).unwrap().value,
            Value::Bytes(vec![0, 0xff])
        );
    }

    #[test]
    fn trees_and_streams() {
        let text = r#"[{"tag":1,"int32":5},{"tag":2,"node":[{"tag":3,"string":"a"}]},
                       {"tag":16,"array":[{"bool":true},{"tag":0,"bool":false}]}]"#;
        let items = parse(text.as_bytes(), Dialect::Golang).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[1],
            Item::node(2, vec![Item::new(3, Value::Str("a".into()))])
        );
        assert_eq!(
            items[2],
            Item::array(
                16,
                vec![
                    Item::new(0, Value::Bool(true)),
                    Item::new(0, Value::Bool(false))
                ]
            )
        );
    }

    #[test]
    fn errors_name_the_location() {
        let e = err(r#"{"tag":17,"int32":2147483648}"#);
        assert_eq!(e.kind, "invalid_packet");
        assert_eq!(e.message, "$.int32: 2147483648 out of range for int32");
        let e = err(r#"{"tag":17,"uint32":-1}"#);
        assert!(
            e.message.contains("out of range for uint32"),
            "{}",
            e.message
        );
        let e = err(r#"{"tag":17,"int64":1.5}"#);
        assert!(
            e.message.contains("expected a JSON integer"),
            "{}",
            e.message
        );
        let e = err(r#"{"tag":17,"int32":1,"string":"a"}"#);
        assert!(e.message.contains("two value keys"), "{}", e.message);
        let e = err(r#"[{"tag":1,"node":[{"tag":2,"value":1}]}]"#);
        assert!(
            e.message.starts_with("$[0].node[0]: unknown key \"value\""),
            "{}",
            e.message
        );
        assert_eq!(err(r#"{"int32":1}"#).message, "$: missing \"tag\"");
        assert_eq!(err(r#"{"tag":64,"int32":1}"#).kind, "invalid_tag");
        assert_eq!(err(r#"{"tag":17,"float32":1e39}"#).kind, "invalid_packet");
        assert_eq!(
            err(r#"{"tag":17,"float32_bits":"800000"}"#).kind,
            "invalid_packet"
        );
        assert_eq!(err("{").kind, "invalid_json");
        assert!(parse(br#"{"tag":300,"int32":1}"#, Dialect::Draft02).is_ok());
    }
}
