//! Schemas: the types the wire does not carry, for `decode`, `decode_stream`, `get`,
//! `marshal`, `unmarshal` and the observer.
//!
//! The Python side (`python/y3/_schema.py`) turns the forms users write into this canonical
//! form, which [`CompiledSchema`] reads once:
//!
//! ```text
//! schema = "int32" | "int64" | "uint32" | "uint64" | "float32" | "float64"
//!        | "bool" | "string" | "bytes"          a primitive read with the core's accessor
//!        | "raw"                                the value bytes of any packet (node or not)
//!        | "any"                                the packet as an inspect() tree
//!        | ("struct", [(tag, key, schema, has_default, default), ...])   children by key -> dict
//!        | ("list", schema)                     every child, whatever its key -> list
//! ```

use std::collections::HashMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};
use pyo3::BoundObject;
use y3::{Config, DecodeError, Dialect, EncodeError, Item, Packet, Tag, Value};

use crate::encode::{float32, float64, int};
use crate::errors::{decode_error, decode_error_at, encode_error, OrRaise};
use crate::inspect::tree;
use crate::{config, dialect_of, with_bytes};

/// Scalar types, read with the matching [`Packet`] accessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Bool,
    Str,
    Bytes,
}

impl Scalar {
    fn from_name(name: &str) -> Option<Scalar> {
        Some(match name {
            "int32" => Scalar::I32,
            "int64" => Scalar::I64,
            "uint32" => Scalar::U32,
            "uint64" => Scalar::U64,
            "float32" => Scalar::F32,
            "float64" => Scalar::F64,
            "bool" => Scalar::Bool,
            "string" => Scalar::Str,
            "bytes" => Scalar::Bytes,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Scalar::I32 => "int32",
            Scalar::I64 => "int64",
            Scalar::U32 => "uint32",
            Scalar::U64 => "uint64",
            Scalar::F32 => "float32",
            Scalar::F64 => "float64",
            Scalar::Bool => "bool",
            Scalar::Str => "string",
            Scalar::Bytes => "bytes",
        }
    }
}

/// One compiled schema node.
#[derive(Debug)]
pub enum Schema {
    Scalar(Scalar),
    Raw,
    Any,
    Struct(Struct),
    List(Box<Schema>),
}

/// A node read into a dict: fields by key.
#[derive(Debug)]
pub struct Struct {
    fields: Vec<Field>,
    by_tag: HashMap<u32, usize>,
}

#[derive(Debug)]
struct Field {
    tag: u32,
    key: Py<PyAny>,
    schema: Schema,
    default: Option<Py<PyAny>>,
}

/// What to put in the dict for a field with no packet on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Leave the key out.
    Omit,
    /// `None`.
    None,
    /// The type's zero value (`0`, `""`, `b""`, `[]`, a dict of zeros), as Go and the Rust
    /// `Message` derive fill them.
    Zero,
}

impl Missing {
    fn from_name(name: &str) -> PyResult<Missing> {
        match name {
            "omit" => Ok(Missing::Omit),
            "none" => Ok(Missing::None),
            "zero" => Ok(Missing::Zero),
            other => Err(PyValueError::new_err(format!(
                "missing={other:?}: expected \"omit\", \"none\" or \"zero\""
            ))),
        }
    }
}

/// A schema compiled from the canonical form, with an optional top-level tag to check.
#[pyclass(module = "y3._y3", frozen)]
pub struct CompiledSchema {
    pub root: Schema,
    pub tag: Option<u32>,
}

#[pymethods]
impl CompiledSchema {
    #[new]
    #[pyo3(signature = (canonical, tag = None))]
    fn new(canonical: &Bound<'_, PyAny>, tag: Option<u32>) -> PyResult<Self> {
        Ok(CompiledSchema {
            root: compile(canonical, "$")?,
            tag,
        })
    }

    /// The expected top-level tag, if the schema names one.
    #[getter]
    fn tag(&self) -> Option<u32> {
        self.tag
    }
}

fn compile(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<Schema> {
    if let Ok(name) = obj.cast::<PyString>() {
        let name = name.to_str()?;
        return match name {
            "raw" => Ok(Schema::Raw),
            "any" => Ok(Schema::Any),
            _ => Scalar::from_name(name)
                .map(Schema::Scalar)
                .ok_or_else(|| PyValueError::new_err(format!("{at}: unknown type {name:?}"))),
        };
    }
    let tuple = obj
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err(format!("{at}: not a canonical schema")))?;
    let kind: String = tuple.get_item(0)?.extract()?;
    match kind.as_str() {
        "list" => Ok(Schema::List(Box::new(compile(
            &tuple.get_item(1)?,
            &format!("{at}[]"),
        )?))),
        "struct" => {
            let mut fields = Vec::new();
            let mut by_tag = HashMap::new();
            for entry in tuple.get_item(1)?.try_iter()? {
                let entry = entry?;
                let entry = entry.cast::<PyTuple>()?;
                let tag: u32 = entry.get_item(0)?.extract()?;
                let here = format!("{at}.0x{tag:02x}");
                let has_default: bool = entry.get_item(3)?.extract()?;
                if by_tag.insert(tag, fields.len()).is_some() {
                    return Err(PyValueError::new_err(format!(
                        "{at}: two fields with tag 0x{tag:02x}"
                    )));
                }
                fields.push(Field {
                    tag,
                    key: entry.get_item(1)?.unbind(),
                    schema: compile(&entry.get_item(2)?, &here)?,
                    default: has_default
                        .then(|| entry.get_item(4))
                        .transpose()?
                        .map(Bound::unbind),
                });
            }
            Ok(Schema::Struct(Struct { fields, by_tag }))
        }
        other => Err(PyValueError::new_err(format!(
            "{at}: unknown canonical schema kind {other:?}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------

/// A failure inside the recursive walk: a core error with the location where it happened
/// (segments innermost first), or a Python error.
pub(crate) enum Fail {
    Decode(DecodeError, Vec<String>),
    Py(PyErr),
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Self {
        Fail::Py(e)
    }
}

impl From<DecodeError> for Fail {
    fn from(e: DecodeError) -> Self {
        Fail::Decode(e, Vec::new())
    }
}

impl Fail {
    pub(crate) fn at(self, segment: impl FnOnce() -> String) -> Fail {
        match self {
            Fail::Decode(e, mut path) => {
                path.push(segment());
                Fail::Decode(e, path)
            }
            other => other,
        }
    }

    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Py(e) => e,
            Fail::Decode(e, path) if path.is_empty() => decode_error(py, e),
            Fail::Decode(e, path) => {
                let at: String = std::iter::once("$".to_owned())
                    .chain(path.into_iter().rev())
                    .collect();
                decode_error_at(py, e, &at)
            }
        }
    }
}

pub(crate) type Walk<T> = Result<T, Fail>;

/// Reads `packet` as `schema`.
pub fn read<'py>(
    py: Python<'py>,
    packet: &Packet<'_>,
    schema: &Schema,
    missing: Missing,
) -> Walk<Bound<'py, PyAny>> {
    Ok(match schema {
        Schema::Scalar(s) => scalar(py, packet, *s)?,
        Schema::Raw => PyBytes::new(py, packet.value()).into_any(),
        Schema::Any => tree(py, packet)?,
        Schema::Struct(st) => read_struct(py, packet.children()?, st, missing)?.into_any(),
        Schema::List(elem) => read_list(py, packet.children()?, elem, missing)?.into_any(),
    })
}

fn int_obj<'py, T>(py: Python<'py>, v: T) -> Bound<'py, PyAny>
where
    T: IntoPyObject<'py, Error = std::convert::Infallible>,
{
    match v.into_pyobject(py) {
        Ok(obj) => obj.into_any().into_bound(),
        Err(never) => match never {},
    }
}

fn scalar<'py>(py: Python<'py>, p: &Packet<'_>, s: Scalar) -> Walk<Bound<'py, PyAny>> {
    Ok(match s {
        Scalar::I32 => int_obj(py, p.i32()?),
        Scalar::I64 => int_obj(py, p.i64()?),
        Scalar::U32 => int_obj(py, p.u32()?),
        Scalar::U64 => int_obj(py, p.u64()?),
        Scalar::F32 => PyFloat::new(py, p.f32()? as f64).into_any(),
        Scalar::F64 => PyFloat::new(py, p.f64()?).into_any(),
        Scalar::Bool => PyBool::new(py, p.bool()?).to_owned().into_any(),
        Scalar::Str => PyString::new(py, p.str()?).into_any(),
        Scalar::Bytes => PyBytes::new(py, p.bytes()?).into_any(),
    })
}

/// Reads children into a dict by the struct's fields: unknown keys are skipped, a repeated
/// key's last packet wins (as the Rust `Message` derive and the Go reference do).
fn read_struct<'a, 'py>(
    py: Python<'py>,
    children: impl Iterator<Item = Result<Packet<'a>, DecodeError>>,
    st: &Struct,
    missing: Missing,
) -> Walk<Bound<'py, PyDict>> {
    let mut found: Vec<Option<Bound<'py, PyAny>>> = vec![None; st.fields.len()];
    for child in children {
        let child = child?;
        if let Some(&i) = st.by_tag.get(&child.id()) {
            let field = &st.fields[i];
            let value = read(py, &child, &field.schema, missing)
                .map_err(|f| f.at(|| format!(".0x{:02x}", field.tag)))?;
            found[i] = Some(value);
        }
    }
    let dict = PyDict::new(py);
    for (field, value) in st.fields.iter().zip(found) {
        let value = match (value, &field.default) {
            (Some(v), _) => v,
            (None, Some(default)) => default.bind(py).clone(),
            (None, None) => match missing {
                Missing::Omit => continue,
                Missing::None => py.None().into_bound(py),
                Missing::Zero => zero(py, &field.schema)?,
            },
        };
        dict.set_item(field.key.bind(py), value)?;
    }
    Ok(dict)
}

fn read_list<'a, 'py>(
    py: Python<'py>,
    children: impl Iterator<Item = Result<Packet<'a>, DecodeError>>,
    elem: &Schema,
    missing: Missing,
) -> Walk<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (i, child) in children.enumerate() {
        let child = child?;
        let value = read(py, &child, elem, missing).map_err(|f| f.at(|| format!("[{i}]")))?;
        list.append(value)?;
    }
    Ok(list)
}

/// The zero value of a schema: what Go's decoder leaves in a field that is not on the wire.
fn zero<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyAny>> {
    Ok(match schema {
        Schema::Scalar(Scalar::F32 | Scalar::F64) => PyFloat::new(py, 0.0).into_any(),
        Schema::Scalar(Scalar::Bool) => PyBool::new(py, false).to_owned().into_any(),
        Schema::Scalar(Scalar::Str) => PyString::new(py, "").into_any(),
        Schema::Scalar(Scalar::Bytes) | Schema::Raw => PyBytes::new(py, b"").into_any(),
        Schema::Scalar(_) => 0i64.into_pyobject(py)?.into_any(),
        Schema::Any => py.None().into_bound(py),
        Schema::List(_) => PyList::empty(py).into_any(),
        Schema::Struct(st) => {
            let dict = PyDict::new(py);
            for field in &st.fields {
                let value = match &field.default {
                    Some(d) => d.bind(py).clone(),
                    None => zero(py, &field.schema)?,
                };
                dict.set_item(field.key.bind(py), value)?;
            }
            dict.into_any()
        }
    })
}

/// Top-level packets of a complete buffer, as an iterator like [`Packet::children`].
struct TopLevel<'a> {
    rest: &'a [u8],
    config: Config,
}

impl<'a> Iterator for TopLevel<'a> {
    type Item = Result<Packet<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match Packet::parse_with(self.rest, &self.config) {
            Ok((packet, rest)) => {
                self.rest = rest;
                Some(Ok(packet))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn check_top_tag(schema: &CompiledSchema, packet: &Packet<'_>) -> PyResult<()> {
    match schema.tag {
        Some(tag) if tag != packet.id() => Err(PyValueError::new_err(format!(
            "the schema names top-level tag 0x{tag:02x}, the packet has 0x{:02x}",
            packet.id()
        ))),
        _ => Ok(()),
    }
}

/// Decodes exactly one packet (validated as a whole first) by a compiled schema.
#[pyfunction]
#[pyo3(signature = (data, schema, dialect = "golang", max_packet_len = None, max_depth = None, missing = "omit"))]
pub fn decode<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    schema: &CompiledSchema,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
    missing: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let config = config(dialect, max_packet_len, max_depth)?;
    let missing = Missing::from_name(missing)?;
    with_bytes(data, |buf| {
        let packet = y3::decode_with(buf, &config).or_raise(py)?;
        check_top_tag(schema, &packet)?;
        read(py, &packet, &schema.root, missing).map_err(|f| f.into_py(py))
    })
}

/// Decodes a whole buffer of top-level packets as if they were the children of one node:
/// a struct schema gives a dict by top-level key, a list schema a list of packets.
#[pyfunction]
#[pyo3(signature = (data, schema, dialect = "golang", max_packet_len = None, max_depth = None, missing = "omit"))]
pub fn decode_stream<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    schema: &CompiledSchema,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
    missing: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let config = config(dialect, max_packet_len, max_depth)?;
    let missing = Missing::from_name(missing)?;
    with_bytes(data, |buf| {
        y3::validate_with(buf, &config).or_raise(py)?;
        let top = TopLevel { rest: buf, config };
        let value = match &schema.root {
            Schema::Struct(st) => read_struct(py, top, st, missing).map(Bound::into_any),
            Schema::List(elem) => read_list(py, top, elem, missing).map(Bound::into_any),
            _ => {
                return Err(PyTypeError::new_err(
                    "decode_stream needs a struct (dict) or list schema: a stream is read like the children of a node",
                ))
            }
        };
        value.map_err(|f| f.into_py(py))
    })
}

/// The first value at a key path (a list of keys), read by `schema` or as raw value bytes.
#[pyfunction]
#[pyo3(signature = (data, path, schema = None, dialect = "golang", max_packet_len = None, max_depth = None, missing = "omit"))]
#[allow(clippy::too_many_arguments)]
pub fn get<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    path: Vec<u32>,
    schema: Option<&CompiledSchema>,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
    missing: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let config = config(dialect, max_packet_len, max_depth)?;
    let missing = Missing::from_name(missing)?;
    // `y3::get_with` answers None for an empty path and TooDeep for a long one; the
    // binding reports both as the observer's PathError instead.
    if path.is_empty() {
        return Err(crate::errors::path_error(py, y3::PathError::Empty));
    }
    if path.len() > y3::MAX_PATH_DEPTH {
        return Err(crate::errors::path_error(
            py,
            y3::PathError::TooDeep {
                len: path.len(),
                max: y3::MAX_PATH_DEPTH,
            },
        ));
    }
    with_bytes(data, |buf| {
        let Some(packet) = y3::get_with(buf, &path, &config).or_raise(py)? else {
            return Ok(None);
        };
        match schema {
            None => Ok(Some(PyBytes::new(py, packet.value()).into_any())),
            Some(schema) => read(py, &packet, &schema.root, missing)
                .map(Some)
                .map_err(|f| f.into_py(py)),
        }
    })
}

/// Reads a value the observer handed out (tag and value bytes) by a schema.
pub fn read_observed<'py>(
    py: Python<'py>,
    packet: &Packet<'_>,
    schema: &Schema,
) -> PyResult<Bound<'py, PyAny>> {
    read(py, packet, schema, Missing::Omit).map_err(|f| f.into_py(py))
}

// ---------------------------------------------------------------------------------------
// Marshal
// ---------------------------------------------------------------------------------------

/// Where a value sits, which decides omission and the node/array flags (`typed.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Under the marshal key, inside the root node.
    Top,
    /// A struct field.
    Field,
    /// An array element (key 0, never omitted).
    Element,
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

/// The packet for `value` under key `id`, or `None` when it is omitted.
fn marshal_item(
    schema: &Schema,
    value: &Bound<'_, PyAny>,
    id: u32,
    ctx: Ctx,
    at: &str,
) -> PyResult<Option<Item>> {
    if value.is_none() {
        if ctx == Ctx::Element {
            return Err(PyTypeError::new_err(format!(
                "{at}: None cannot be an array element"
            )));
        }
        return Ok(None);
    }
    let v = match schema {
        Schema::Scalar(s) => {
            let name = s.name();
            match s {
                Scalar::I32 => {
                    Value::I32(int(value, at, name, i32::MIN as i128, i32::MAX as i128)? as i32)
                }
                Scalar::I64 => {
                    Value::I64(int(value, at, name, i64::MIN as i128, i64::MAX as i128)? as i64)
                }
                Scalar::U32 => Value::U32(int(value, at, name, 0, u32::MAX as i128)? as u32),
                Scalar::U64 => Value::U64(int(value, at, name, 0, u64::MAX as i128)? as u64),
                Scalar::F32 => Value::F32(float32(value, at)?),
                Scalar::F64 => Value::F64(float64(value, at)?),
                Scalar::Bool => match value.cast::<PyBool>() {
                    Ok(b) => Value::Bool(b.is_true()),
                    Err(_) => {
                        return Err(PyTypeError::new_err(format!(
                            "{at}: expected a bool, found {}",
                            describe(value)
                        )))
                    }
                },
                Scalar::Str => match value.cast::<PyString>() {
                    Ok(text) => Value::Str(text.to_str()?.to_owned()),
                    Err(_) => {
                        return Err(PyTypeError::new_err(format!(
                            "{at}: expected a str, found {}",
                            describe(value)
                        )))
                    }
                },
                Scalar::Bytes => {
                    Value::Bytes(with_bytes(value, |b| Ok(b.to_vec())).map_err(|_| {
                        PyTypeError::new_err(format!(
                            "{at}: expected bytes, found {}",
                            describe(value)
                        ))
                    })?)
                }
            }
        }
        Schema::Raw | Schema::Any => {
            return Err(PyTypeError::new_err(format!(
                "{at}: \"raw\" and \"any\" cannot be marshaled; give the value's type"
            )))
        }
        Schema::Struct(st) => Value::Node(marshal_fields(st, value, at)?),
        Schema::List(elem) => {
            if value.cast::<PyList>().is_err() && value.cast::<PyTuple>().is_err() {
                return Err(PyTypeError::new_err(format!(
                    "{at}: expected a list, found {}",
                    describe(value)
                )));
            }
            let mut elements = Vec::new();
            for (i, e) in value.try_iter()?.enumerate() {
                let item = marshal_item(elem, &e?, 0, Ctx::Element, &format!("{at}[{i}]"))?;
                elements.extend(item);
            }
            // A top-level list of structs is a plain node in the reference.
            if ctx == Ctx::Top && matches!(**elem, Schema::Struct(_)) {
                Value::Node(elements)
            } else {
                Value::Array(elements)
            }
        }
    };
    // Empty strings and byte strings are left out of structs and from under the root.
    if ctx != Ctx::Element {
        match &v {
            Value::Str(s) if s.is_empty() => return Ok(None),
            Value::Bytes(b) if b.is_empty() => return Ok(None),
            _ => {}
        }
    }
    Ok(Some(Item::new(id, v)))
}

/// The field packets of a struct value: a dict by field key (unknown keys refused), or any
/// object with the fields as attributes (a dataclass).
fn marshal_fields(st: &Struct, value: &Bound<'_, PyAny>, at: &str) -> PyResult<Vec<Item>> {
    let py = value.py();
    let mut out = Vec::with_capacity(st.fields.len());
    if let Ok(dict) = value.cast::<PyDict>() {
        for key in dict.keys() {
            let known = st.fields.iter().try_fold(false, |hit, f| {
                Ok::<_, PyErr>(hit || f.key.bind(py).eq(&key)?)
            })?;
            if !known {
                return Err(PyValueError::new_err(format!(
                    "{at}: {} is not a field of the schema",
                    describe(&key)
                )));
            }
        }
    }
    for field in &st.fields {
        let key = field.key.bind(py);
        let here = format!("{at}[{}]", describe(key));
        let v = if let Ok(dict) = value.cast::<PyDict>() {
            dict.get_item(key)?
        } else if let Ok(name) = key.cast::<PyString>() {
            if value.hasattr(name)? {
                Some(value.getattr(name)?)
            } else {
                None
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "{at}: expected a dict, found {}",
                describe(value)
            )));
        };
        if let Some(v) = v {
            out.extend(marshal_item(
                &field.schema,
                &v,
                field.tag,
                Ctx::Field,
                &here,
            )?);
        }
    }
    Ok(out)
}

/// `NewCodec(key).Marshal(v)`: the root node `0x81` around `value` under `key`.
#[pyfunction]
#[pyo3(signature = (key, value, schema, dialect = "golang"))]
pub fn marshal<'py>(
    py: Python<'py>,
    key: u32,
    value: &Bound<'py, PyAny>,
    schema: &CompiledSchema,
    dialect: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let dialect: Dialect = dialect_of(dialect)?;
    if key < y3::typed::FIRST_USER_KEY {
        return Err(encode_error(
            py,
            EncodeError::ReservedTag { tag: key },
            None,
        ));
    }
    Tag::primitive(key).check(dialect).or_raise(py)?;
    let inner = marshal_item(&schema.root, value, key, Ctx::Top, "$")?;
    let root = Item::node(y3::typed::ROOT.id(), inner.into_iter().collect());
    let bytes = root.to_vec(dialect).or_raise(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The value under `key` in what `marshal` wrote, or `None` when the root holds no `key`.
/// Fields missing from a struct get their zero values unless `missing` says otherwise.
#[pyfunction]
#[pyo3(signature = (data, key, schema, dialect = "golang", max_packet_len = None, max_depth = None, missing = "zero"))]
#[allow(clippy::too_many_arguments)]
pub fn unmarshal<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    key: u32,
    schema: &CompiledSchema,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
    missing: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let config = config(dialect, max_packet_len, max_depth)?;
    let missing = Missing::from_name(missing)?;
    with_bytes(data, |buf| {
        // As `y3::typed::unmarshal_with`: one root packet, nothing after it; children are
        // checked as they are walked up to `key`.
        let (root, rest) = Packet::parse_with(buf, &config).or_raise(py)?;
        if !rest.is_empty() {
            return Err(decode_error(
                py,
                DecodeError::TrailingBytes {
                    count: rest.len() as u64,
                },
            ));
        }
        match root.child(key).or_raise(py)? {
            Some(packet) => read(py, &packet, &schema.root, missing)
                .map(Some)
                .map_err(|f| f.into_py(py)),
            None => Ok(None),
        }
    })
}

/// Reads the first packet of `data` (header and value only; its children are checked as
/// the schema walks them) and returns its key, its value and the number of bytes it took: for framing a
/// stream packet by packet. Bytes after it are left alone.
#[pyfunction]
#[pyo3(signature = (data, schema = None, dialect = "golang", max_packet_len = None, max_depth = None, missing = "omit"))]
pub fn parse<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    schema: Option<&CompiledSchema>,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
    missing: &str,
) -> PyResult<(u32, Bound<'py, PyAny>, usize)> {
    let config = config(dialect, max_packet_len, max_depth)?;
    let missing = Missing::from_name(missing)?;
    with_bytes(data, |buf| {
        let (packet, rest) = Packet::parse_with(buf, &config).or_raise(py)?;
        let consumed = buf.len() - rest.len();
        let value = match schema {
            None => PyBytes::new(py, packet.value()).into_any(),
            Some(schema) => {
                check_top_tag(schema, &packet)?;
                read(py, &packet, &schema.root, missing).map_err(|f| f.into_py(py))?
            }
        };
        Ok((packet.id(), value, consumed))
    })
}
