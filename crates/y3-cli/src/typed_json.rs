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

use serde_json::{Map, Value as Json};
use y3::{Dialect, Item, Value};

use crate::error::CliError;

/// The value keys a packet object may carry (exactly one of them).
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

/// Parses typed JSON text into the top-level packets it describes, checking every tag
/// against `dialect`.
///
/// # Errors
/// `invalid_json` for malformed JSON, `invalid_packet` for a shape or range error, and the
/// codec's `invalid_tag` for a tag the dialect cannot carry.
pub fn parse(text: &[u8], dialect: Dialect) -> Result<Vec<Item>, CliError> {
    let json: Json = serde_json::from_slice(text)
        .map_err(|e| CliError::bad_input("invalid_json", format!("not JSON: {e}")))?;
    items(&json, dialect)
}

/// The top-level packets of a parsed typed JSON document.
///
/// # Errors
/// As [`parse`].
pub fn items(json: &Json, dialect: Dialect) -> Result<Vec<Item>, CliError> {
    match json {
        Json::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, p)| item(p, &format!("$[{i}]"), dialect, false))
            .collect(),
        _ => Ok(vec![item(json, "$", dialect, false)?]),
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

/// One packet object; `in_array` lets the tag default to 0 (array elements).
fn item(json: &Json, at: &str, dialect: Dialect, in_array: bool) -> Result<Item, CliError> {
    let Json::Object(obj) = json else {
        return Err(bad(
            at,
            format!("expected a packet object, found {}", describe(json)),
        ));
    };
    for key in obj.keys() {
        if key != "tag" && !VALUE_KEYS.contains(&key.as_str()) {
            return Err(bad(
                at,
                format!(
                    "unknown key {key:?} (expected \"tag\" and one of {})",
                    VALUE_KEYS.join(" ")
                ),
            ));
        }
    }
    let id = match obj.get("tag") {
        Some(tag) => parse_tag(tag, &format!("{at}.tag"))?,
        None if in_array => 0,
        None => return Err(bad(at, "missing \"tag\"")),
    };
    let (key, raw) = value_key(obj, at)?;
    let here = format!("{at}.{key}");
    let value = match key {
        "int32" => Value::I32(int(raw, &here, key, |j| j.as_i64().and_then(to::<i32, _>))?),
        "int64" => Value::I64(int(raw, &here, key, Json::as_i64)?),
        "uint32" => Value::U32(int(raw, &here, key, |j| j.as_u64().and_then(to::<u32, _>))?),
        "uint64" => Value::U64(int(raw, &here, key, Json::as_u64)?),
        "float32" => Value::F32(float32(raw, &here)?),
        "float64" => Value::F64(float64(raw, &here)?),
        "float32_bits" => Value::F32(f32::from_bits(u32::from_be_bytes(bits(raw, &here)?))),
        "float64_bits" => Value::F64(f64::from_bits(u64::from_be_bytes(bits(raw, &here)?))),
        "bool" => Value::Bool(raw.as_bool().ok_or_else(|| {
            bad(
                &here,
                format!("expected true or false, found {}", describe(raw)),
            )
        })?),
        "string" => Value::Str(
            raw.as_str()
                .ok_or_else(|| {
                    bad(
                        &here,
                        format!("expected a JSON string, found {}", describe(raw)),
                    )
                })?
                .to_owned(),
        ),
        "bytes" => Value::Bytes(hex_string(raw, &here)?),
        "node" => Value::Node(children(raw, &here, dialect, false)?),
        "array" => Value::Array(children(raw, &here, dialect, true)?),
        // `value_key` only returns names from VALUE_KEYS.
        _ => unreachable!("value key {key}"),
    };
    let item = Item::new(id, value);
    item.tag().check(dialect).map_err(|e| {
        CliError::bad_input(
            e.kind(),
            format!("{at}.tag: {e} (dialect {})", dialect.name()),
        )
    })?;
    Ok(item)
}

/// The single value key of a packet object.
fn value_key<'j>(
    obj: &'j Map<String, Json>,
    at: &str,
) -> Result<(&'static str, &'j Json), CliError> {
    let mut found: Option<(&'static str, &Json)> = None;
    for name in VALUE_KEYS {
        if let Some(raw) = obj.get(name) {
            if let Some((first, _)) = found {
                return Err(bad(
                    at,
                    format!("two value keys {first:?} and {name:?}: a packet has exactly one"),
                ));
            }
            found = Some((name, raw));
        }
    }
    found.ok_or_else(|| {
        bad(
            at,
            format!("no value key: expected one of {}", VALUE_KEYS.join(" ")),
        )
    })
}

fn to<T: TryFrom<U>, U>(v: U) -> Option<T> {
    T::try_from(v).ok()
}

fn int<T>(raw: &Json, at: &str, ty: &str, get: impl Fn(&Json) -> Option<T>) -> Result<T, CliError> {
    if let Some(v) = get(raw) {
        return Ok(v);
    }
    match raw {
        Json::Number(n) if n.is_i64() || n.is_u64() => {
            Err(bad(at, format!("{n} out of range for {ty}")))
        }
        _ => Err(bad(
            at,
            format!("expected a JSON integer for {ty}, found {}", describe(raw)),
        )),
    }
}

fn parse_tag(raw: &Json, at: &str) -> Result<u32, CliError> {
    let parsed = match raw {
        Json::Number(n) => n.as_u64().and_then(to::<u32, _>),
        Json::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => s.parse::<u32>().ok(),
        },
        _ => None,
    };
    parsed.ok_or_else(|| {
        bad(
            at,
            format!(
                "expected a tag id (integer 0..=4294967295 or \"0x..\"), found {}",
                describe(raw)
            ),
        )
    })
}

/// A named non-finite float, as `y3 get` prints them (Go's spellings accepted too).
fn special(raw: &Json) -> Option<f64> {
    match raw.as_str()?.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    }
}

fn float64(raw: &Json, at: &str) -> Result<f64, CliError> {
    raw.as_f64().or_else(|| special(raw)).ok_or_else(|| {
        bad(
            at,
            format!(
                "expected a JSON number or \"inf\"/\"-inf\"/\"nan\", found {}",
                describe(raw)
            ),
        )
    })
}

fn float32(raw: &Json, at: &str) -> Result<f32, CliError> {
    let wide = float64(raw, at)?;
    // Rounds to nearest; only overflow to infinity is refused.
    let narrow = wide as f32;
    if wide.is_finite() && !narrow.is_finite() {
        return Err(bad(at, format!("{wide} out of range for float32")));
    }
    Ok(narrow)
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

fn children(raw: &Json, at: &str, dialect: Dialect, in_array: bool) -> Result<Vec<Item>, CliError> {
    let Json::Array(list) = raw else {
        return Err(bad(
            at,
            format!("expected a JSON array of packets, found {}", describe(raw)),
        ));
    };
    list.iter()
        .enumerate()
        .map(|(i, child)| item(child, &format!("{at}[{i}]"), dialect, in_array))
        .collect()
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
