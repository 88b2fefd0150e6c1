//! Raising `y3.DecodeError` / `y3.EncodeError` / `y3.PathError` (defined in
//! `python/y3/_errors.py`) with the core's stable `kind()` strings and numeric context.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

static DECODE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static ENCODE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static PATH_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Instantiates `y3._errors.<class>(kind, message, **details)` as a `PyErr`.
fn raise(
    py: Python<'_>,
    cell: &PyOnceLock<Py<PyType>>,
    class: &str,
    kind: &str,
    message: String,
    details: &[(&str, i128)],
    text: &[(&str, &str)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = cell.import(py, "y3._errors", class)?;
        let kwargs = PyDict::new(py);
        for (name, value) in details {
            kwargs.set_item(*name, *value)?;
        }
        for (name, value) in text {
            kwargs.set_item(*name, *value)?;
        }
        let instance = cls.call((kind, message), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// The numeric fields of a decode error, by name, as the Rust variant carries them.
fn decode_details(err: &y3::DecodeError) -> Vec<(&'static str, i128)> {
    use y3::DecodeError as E;
    match *err {
        E::UnexpectedEnd { needed } => vec![("needed", needed.into())],
        E::TooLong { declared, limit } => {
            vec![("declared", declared.into()), ("limit", limit.into())]
        }
        E::TooDeep { limit } => vec![("limit", limit.into())],
        E::NegativeLength { declared } => vec![("declared", declared.into())],
        E::VarintOverflow { len, bits } => vec![("len", len.into()), ("bits", bits.into())],
        E::VarintUnterminated { len } => vec![("len", len.into())],
        E::ChildOverflow {
            declared,
            available,
        } => {
            vec![
                ("declared", declared.into()),
                ("available", available.into()),
            ]
        }
        E::TruncatedHeader { available } => vec![("available", available.into())],
        E::InvalidTag { tag } => vec![("tag", tag.into())],
        E::InvalidUtf8 { valid_up_to } => vec![("valid_up_to", valid_up_to.into())],
        E::InvalidLength { len, min, max } => {
            vec![
                ("len", len.into()),
                ("min", min.into()),
                ("max", max.into()),
            ]
        }
        E::InvalidBool { value } => vec![("value", value.into())],
        E::WrongType { tag, .. } => vec![("tag", tag.into())],
        E::WrongCount { expected, found } => {
            vec![("expected", expected.into()), ("found", found.into())]
        }
        E::TrailingBytes { count } => vec![("count", count.into())],
        // `DecodeError` is non-exhaustive: a new variant still carries its kind and message.
        _ => Vec::new(),
    }
}

/// `y3.DecodeError` for a core decode error.
pub fn decode_error(py: Python<'_>, err: y3::DecodeError) -> PyErr {
    raise_decode(py, err, None)
}

/// [`decode_error`] with a location prefix (`$.node[0]` style) in the message.
pub fn decode_error_at(py: Python<'_>, err: y3::DecodeError, at: &str) -> PyErr {
    raise_decode(py, err, Some(at))
}

fn raise_decode(py: Python<'_>, err: y3::DecodeError, at: Option<&str>) -> PyErr {
    let message = match at {
        Some(at) => format!("{at}: {err}"),
        None => err.to_string(),
    };
    let text: &[(&str, &str)] = match err {
        y3::DecodeError::WrongType { expected, .. } => &[("expected", expected)],
        _ => &[],
    };
    raise(
        py,
        &DECODE_ERROR,
        "DecodeError",
        err.kind(),
        message,
        &decode_details(&err),
        text,
    )
}

/// `y3.EncodeError` for a core encode error, with an optional location prefix.
pub fn encode_error(py: Python<'_>, err: y3::EncodeError, at: Option<&str>) -> PyErr {
    use y3::EncodeError as E;
    let details: Vec<(&str, i128)> = match err {
        E::InvalidTag { tag, max } => vec![("tag", tag.into()), ("max", max.into())],
        E::ReservedTag { tag } => vec![("tag", tag.into())],
        E::TooLong { len, limit } => vec![("len", len.into()), ("limit", limit.into())],
        E::BufferTooSmall {
            required,
            remaining,
        } => {
            vec![
                ("required", required.into()),
                ("remaining", remaining.into()),
            ]
        }
        _ => Vec::new(),
    };
    let message = match at {
        Some(at) => format!("{at}: {err}"),
        None => err.to_string(),
    };
    raise(
        py,
        &ENCODE_ERROR,
        "EncodeError",
        err.kind(),
        message,
        &details,
        &[],
    )
}

/// `y3.PathError` for a key path the observer refuses.
pub fn path_error(py: Python<'_>, err: y3::PathError) -> PyErr {
    use y3::PathError as E;
    let details: Vec<(&str, i128)> = match err {
        E::TooDeep { len, max } => vec![("len", len as i128), ("max", max as i128)],
        E::Count { count, max } => vec![("count", count as i128), ("max", max as i128)],
        E::Overlap { shorter, longer } => {
            vec![("shorter", shorter as i128), ("longer", longer as i128)]
        }
        E::Syntax { at } => vec![("at", at as i128)],
        _ => Vec::new(),
    };
    raise(
        py,
        &PATH_ERROR,
        "PathError",
        err.kind(),
        err.to_string(),
        &details,
        &[],
    )
}

/// Extension: `?` on core results inside `#[pyfunction]`s.
pub trait OrRaise<T> {
    /// Maps the core error to its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for Result<T, y3::DecodeError> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| decode_error(py, e))
    }
}

impl<T> OrRaise<T> for Result<T, y3::EncodeError> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| encode_error(py, e, None))
    }
}

impl<T> OrRaise<T> for Result<T, y3::PathError> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| path_error(py, e))
    }
}

static TRANSPORT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `y3.TransportError` for a client error: `kind` is the transport's stable
/// [`kind`](y3_transport::TransportError::kind) (a refusal's code kind, such as
/// `unauthorized`, or `io`, `closed`, `gave_up`, ...), with `retryable` and, for a refusal,
/// the numeric `code`; for `gave_up`, `attempts`.
pub fn transport_error(py: Python<'_>, err: y3_transport::TransportError) -> PyErr {
    use y3_transport::TransportError as E;
    let build = || -> PyResult<PyErr> {
        let cls = TRANSPORT_ERROR.import(py, "y3._errors", "TransportError")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("retryable", err.is_retryable())?;
        match &err {
            E::Goaway { code, .. } => kwargs.set_item("code", code.code())?,
            E::GaveUp { attempts, .. } => kwargs.set_item("attempts", *attempts)?,
            _ => {}
        }
        let instance = cls.call((err.kind(), err.to_string()), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// [`transport_error`] from a thread that does not hold the interpreter (a tokio task).
pub fn transport_py_err(err: y3_transport::TransportError) -> PyErr {
    Python::attach(|py| transport_error(py, err))
}
