//! `encode`: typed dicts (the CLI's typed JSON, as Python objects) to packet bytes.
//!
//! ```text
//! item  = {"tag": ID, TYPE: VALUE}                 exactly one value key
//!       | {"tag": ID, "node":  [item, ...]}
//!       | {"tag": ID, "array": [item, ...]}        element tags may be left out (0)
//! ID    = int, or a str "0x10" / "16"
//! TYPE  = int32 int64 uint32 uint64                int, range-checked exactly
//!       | float32 float64                          float or int, or "inf" "-inf" "nan"
//!       | float32_bits float64_bits                the IEEE-754 bits: int, or 8 / 16 hex digits
//!       | bool | string | bytes                    bool, str, bytes-like (or a hex str)
//! input = item | [item, ...]                       a list is a stream of top-level packets
//! ```
//!
//! Shape problems raise `TypeError` / `ValueError` naming the location (`$[1].node[0].int32`);
//! a tag the dialect cannot carry raises `y3.EncodeError` (`invalid_tag`), as the core does.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use y3::items::{self, ItemSource, Problem, ValueKey, VALUE_KEYS};
use y3::{Dialect, EncodeError, Item, Value};

use crate::errors::encode_error;
use crate::{dialect_of, with_bytes};

/// Encodes one item (a dict) or a stream of items (a list or tuple of dicts).
#[pyfunction]
#[pyo3(signature = (item, dialect = "golang"))]
pub fn encode<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
    dialect: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let dialect = dialect_of(dialect)?;
    let items = items_of(item, dialect)?;
    let len: usize = items.iter().map(|i| i.encoded_len(dialect)).sum();
    let mut out = Vec::with_capacity(len);
    for (i, item) in items.iter().enumerate() {
        item.encode(dialect, &mut out).map_err(|e| {
            let at = if items.len() == 1 {
                "$".to_owned()
            } else {
                format!("$[{i}]")
            };
            encode_error(py, e, Some(&at))
        })?;
    }
    Ok(PyBytes::new(py, &out))
}

/// Bytes `encode(item, dialect)` would return, without writing them.
#[pyfunction]
#[pyo3(signature = (item, dialect = "golang"))]
pub fn encoded_len(item: &Bound<'_, PyAny>, dialect: &str) -> PyResult<usize> {
    let dialect = dialect_of(dialect)?;
    Ok(items_of(item, dialect)?
        .iter()
        .map(|i| i.encoded_len(dialect))
        .sum())
}

/// The top-level items of `obj`: one dict, or a list/tuple of them.
pub fn items_of(obj: &Bound<'_, PyAny>, dialect: Dialect) -> PyResult<Vec<Item>> {
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        obj.try_iter()?
            .enumerate()
            .map(|(i, p)| items::item(&Py(p?), &format!("$[{i}]"), dialect, false))
            .collect()
    } else {
        Ok(vec![items::item(&Py(obj.clone()), "$", dialect, false)?])
    }
}

fn describe(obj: &Bound<'_, PyAny>) -> String {
    let text = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".to_owned());
    if text.chars().count() > 40 {
        format!("{}...", text.chars().take(37).collect::<String>())
    } else {
        text
    }
}

fn type_error(at: &str, reason: impl std::fmt::Display) -> PyErr {
    PyTypeError::new_err(format!("{at}: {reason}"))
}

fn value_error(at: &str, reason: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{at}: {reason}"))
}

/// A Python object read as a typed item (the walk is `y3::items`; the spellings and the
/// exception types are Python's).
struct Py<'py>(Bound<'py, PyAny>);

impl<'py> ItemSource for Py<'py> {
    type Error = PyErr;

    fn entries(&self, at: &str) -> PyResult<Vec<(String, Self)>> {
        let Ok(dict) = self.0.cast::<PyDict>() else {
            return Err(type_error(
                at,
                format!("expected an item dict, found {}", describe(&self.0)),
            ));
        };
        let mut entries = Vec::with_capacity(dict.len());
        for (key, raw) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(type_error(at, format!("non-str key {}", describe(&key))));
            };
            entries.push((key.to_str()?.to_owned(), Py(raw)));
        }
        Ok(entries)
    }

    fn elements(&self, at: &str) -> PyResult<Vec<Self>> {
        let raw = &self.0;
        if raw.cast::<PyList>().is_err() && raw.cast::<PyTuple>().is_err() {
            return Err(type_error(
                at,
                format!("expected a list of items, found {}", describe(raw)),
            ));
        }
        raw.try_iter()?.map(|child| Ok(Py(child?))).collect()
    }

    fn tag(&self, at: &str) -> PyResult<u32> {
        parse_tag(&self.0, at)
    }

    fn scalar(&self, key: ValueKey, at: &str) -> PyResult<Value> {
        let raw = &self.0;
        Ok(match key {
            ValueKey::Float32 => Value::F32(float32(raw, at)?),
            ValueKey::Float64 => Value::F64(float64(raw, at)?),
            ValueKey::Float32Bits => Value::F32(f32::from_bits(bits(raw, at, 4)? as u32)),
            ValueKey::Float64Bits => Value::F64(f64::from_bits(bits(raw, at, 8)?)),
            ValueKey::Bool => match raw.cast::<PyBool>() {
                Ok(b) => Value::Bool(b.is_true()),
                Err(_) => {
                    return Err(type_error(
                        at,
                        format!("expected True or False, found {}", describe(raw)),
                    ))
                }
            },
            ValueKey::String => match raw.cast::<PyString>() {
                Ok(s) => Value::Str(s.to_str()?.to_owned()),
                Err(_) => {
                    return Err(type_error(
                        at,
                        format!("expected a str, found {}", describe(raw)),
                    ))
                }
            },
            ValueKey::Bytes => Value::Bytes(bytes_value(raw, at)?),
            int_key => {
                let (min, max) = int_key.int_range().unwrap_or((0, 0));
                let v = int(raw, at, int_key.name(), min, max)?;
                int_key.int_value(v).ok_or_else(|| {
                    value_error(at, format!("{v} out of range for {}", int_key.name()))
                })?
            }
        })
    }

    fn problem(at: &str, problem: Problem<'_>) -> PyErr {
        match problem {
            Problem::UnknownKey(key) => value_error(
                at,
                format!(
                    "unknown key {key:?} (expected \"tag\" and one of {})",
                    VALUE_KEYS.join(" ")
                ),
            ),
            Problem::TwoValueKeys(first, second) => value_error(
                at,
                format!("two value keys {first:?} and {second:?}: an item has exactly one"),
            ),
            Problem::MissingTag => value_error(at, "missing \"tag\""),
            Problem::NoValueKey => value_error(
                at,
                format!("no value key: expected one of {}", VALUE_KEYS.join(" ")),
            ),
        }
    }

    fn bad_tag(at: &str, error: EncodeError, _dialect: Dialect) -> PyErr {
        Python::attach(|py| encode_error(py, error, Some(at)))
    }
}

/// A tag id: an int in `0..=u32::MAX`, or a str `"0x10"` / `"16"`.
pub fn parse_tag(raw: &Bound<'_, PyAny>, at: &str) -> PyResult<u32> {
    let parsed = if raw.cast::<PyBool>().is_ok() {
        None
    } else if raw.cast::<PyInt>().is_ok() {
        raw.extract::<u32>().ok()
    } else if let Ok(s) = raw.cast::<PyString>() {
        let s = s.to_str()?.trim();
        match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => s.parse::<u32>().ok(),
        }
    } else {
        None
    };
    parsed.ok_or_else(|| {
        value_error(
            at,
            format!(
                "expected a tag id (int 0..=4294967295 or \"0x..\"), found {}",
                describe(raw)
            ),
        )
    })
}

/// A Python int (not a bool) within `min..=max`.
pub fn int(raw: &Bound<'_, PyAny>, at: &str, ty: &str, min: i128, max: i128) -> PyResult<i128> {
    if raw.cast::<PyBool>().is_ok() || raw.cast::<PyInt>().is_err() {
        return Err(type_error(
            at,
            format!("expected an int for {ty}, found {}", describe(raw)),
        ));
    }
    match raw.extract::<i128>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(value_error(
            at,
            format!("{} out of range for {ty}", describe(raw)),
        )),
    }
}

/// A named non-finite float (`y3 get`'s spellings, Go's too).
fn special(raw: &Bound<'_, PyAny>) -> Option<f64> {
    let s = raw
        .cast::<PyString>()
        .ok()?
        .to_str()
        .ok()?
        .to_ascii_lowercase();
    match s.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    }
}

/// A float, an int (exactly representable or rounded) or a named non-finite value.
pub fn float64(raw: &Bound<'_, PyAny>, at: &str) -> PyResult<f64> {
    if let Some(v) = special(raw) {
        return Ok(v);
    }
    if raw.cast::<PyBool>().is_err()
        && (raw.cast::<PyFloat>().is_ok() || raw.cast::<PyInt>().is_ok())
    {
        if let Ok(v) = raw.extract::<f64>() {
            return Ok(v);
        }
        return Err(value_error(
            at,
            format!("{} out of range for float64", describe(raw)),
        ));
    }
    Err(type_error(
        at,
        format!(
            "expected a float or \"inf\"/\"-inf\"/\"nan\", found {}",
            describe(raw)
        ),
    ))
}

/// [`float64`] rounded to the nearest `f32`; only overflow to infinity is refused.
pub fn float32(raw: &Bound<'_, PyAny>, at: &str) -> PyResult<f32> {
    let wide = float64(raw, at)?;
    let narrow = wide as f32;
    if wide.is_finite() && !narrow.is_finite() {
        return Err(value_error(at, format!("{wide} out of range for float32")));
    }
    Ok(narrow)
}

/// IEEE-754 bits of `width` bytes: an int, or exactly `2 * width` hex digits.
fn bits(raw: &Bound<'_, PyAny>, at: &str, width: usize) -> PyResult<u64> {
    if raw.cast::<PyString>().is_ok() {
        let bytes = hex_str(raw, at)?;
        if bytes.len() != width {
            return Err(value_error(
                at,
                format!(
                    "expected {} hex digits of IEEE-754 bits, found {}",
                    width * 2,
                    describe(raw)
                ),
            ));
        }
        return Ok(bytes.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64));
    }
    let max = if width == 4 {
        u32::MAX as i128
    } else {
        u64::MAX as i128
    };
    Ok(int(
        raw,
        at,
        if width == 4 {
            "float32_bits"
        } else {
            "float64_bits"
        },
        0,
        max,
    )? as u64)
}

/// Bytes from a bytes-like object, or from a hex str (as typed JSON writes them).
fn bytes_value(raw: &Bound<'_, PyAny>, at: &str) -> PyResult<Vec<u8>> {
    if raw.cast::<PyString>().is_ok() {
        return hex_str(raw, at);
    }
    with_bytes(raw, |b| Ok(b.to_vec())).map_err(|_| {
        type_error(
            at,
            format!(
                "expected bytes, bytearray, memoryview or a hex str, found {}",
                describe(raw)
            ),
        )
    })
}

fn hex_str(raw: &Bound<'_, PyAny>, at: &str) -> PyResult<Vec<u8>> {
    let text = raw.cast::<PyString>()?.to_str()?;
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let bad = || value_error(at, format!("not a hex string: {}", describe(raw)));
    if !digits.len().is_multiple_of(2) {
        return Err(bad());
    }
    digits
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16).ok_or_else(bad)?;
            let lo = (pair[1] as char).to_digit(16).ok_or_else(bad)?;
            Ok((hi * 16 + lo) as u8)
        })
        .collect()
}
