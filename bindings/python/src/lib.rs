//! `y3._y3`: the native half of the `y3` Python package.
//!
//! Everything that touches bytes runs here, on the Rust core in `crates/y3`: encoding typed
//! dicts, decoding by a compiled schema, `get`, `inspect`, `marshal` / `unmarshal` and the
//! streaming `Observer`; and the asyncio client SDK (`client`), a thin shell over
//! `y3_transport::sdk`. The pure-Python half (`python/y3/`) turns the schema forms users
//! write into the canonical tuples [`schema::CompiledSchema`] reads, parses key paths, and
//! defines the exception classes raised from here.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyByteArrayMethods, PyBytes, PyMemoryView};

mod client;
mod encode;
mod errors;
mod inspect;
mod observer;
mod schema;

use y3::{Config, Dialect, Limits};

/// Builds a [`Config`] from the keyword arguments every decoding call takes.
pub(crate) fn config(
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
) -> PyResult<Config> {
    let dialect = dialect_of(dialect)?;
    let mut limits = Limits::DEFAULT;
    if let Some(len) = max_packet_len {
        limits.max_packet_len = len;
    }
    if let Some(depth) = max_depth {
        limits.max_depth = depth;
    }
    Ok(Config::new(dialect).with_limits(limits))
}

/// `"golang"`, `"nvarint"` or `"draft02"`.
pub(crate) fn dialect_of(name: &str) -> PyResult<Dialect> {
    Dialect::from_name(name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown dialect {name:?} (expected \"golang\", \"nvarint\" or \"draft02\")"
        ))
    })
}

/// Runs `f` on the bytes of a `bytes`, `bytearray` or `memoryview` object. `bytes` is
/// borrowed; the others are copied first (they are mutable, and `f` may call into Python).
pub(crate) fn with_bytes<R>(
    data: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u8]) -> PyResult<R>,
) -> PyResult<R> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return f(bytes.as_bytes());
    }
    if let Ok(array) = data.cast::<PyByteArray>() {
        return f(&array.to_vec());
    }
    if data.cast::<PyMemoryView>().is_ok() {
        let copy = data.call_method0("tobytes")?;
        let copy = copy.cast::<PyBytes>()?;
        return f(copy.as_bytes());
    }
    Err(PyTypeError::new_err(format!(
        "expected bytes, bytearray or memoryview, found {}",
        data.get_type().name()?
    )))
}

/// The native module.
#[pymodule]
fn _y3(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode::encode, m)?)?;
    m.add_function(wrap_pyfunction!(encode::encoded_len, m)?)?;
    m.add_function(wrap_pyfunction!(schema::decode, m)?)?;
    m.add_function(wrap_pyfunction!(schema::decode_stream, m)?)?;
    m.add_function(wrap_pyfunction!(schema::get, m)?)?;
    m.add_function(wrap_pyfunction!(schema::parse, m)?)?;
    m.add_function(wrap_pyfunction!(schema::marshal, m)?)?;
    m.add_function(wrap_pyfunction!(schema::unmarshal, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::validate, m)?)?;
    m.add_function(wrap_pyfunction!(observer::parse_path, m)?)?;
    m.add_class::<schema::CompiledSchema>()?;
    m.add_class::<observer::Observer>()?;
    client::register(m)?;
    m.add("MAX_PATH_DEPTH", y3::MAX_PATH_DEPTH)?;
    m.add("MAX_SUBSCRIPTIONS", y3::MAX_SUBSCRIPTIONS)?;
    m.add("DEFAULT_MAX_PACKET_LEN", Limits::DEFAULT.max_packet_len)?;
    m.add("DEFAULT_MAX_DEPTH", Limits::DEFAULT.max_depth)?;
    Ok(())
}
