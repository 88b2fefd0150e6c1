//! The streaming observer: `Observer(paths).feed(chunk)` → `[(index, tag, value), ...]`.
//!
//! Values are copied out of the core observer (borrowed from the chunk or assembled across
//! chunks there) into Python objects: `bytes` of the value, or the value read by the path's
//! schema. "Need more bytes" is an empty list; truncation is reported by `finish()`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use y3::{Config, DecodeError};

use crate::errors::{decode_error, OrRaise};
use crate::schema::{read_observed, CompiledSchema};
use crate::{config, with_bytes};

/// Parses a key path such as `"0x10/0x11"` or `"16/17"` (hex with `0x`, else decimal).
#[pyfunction]
pub fn parse_path(py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
    y3::parse_path(text).or_raise(py)
}

/// Incremental decoder of subscribed key paths over a stream of packets.
#[pyclass(module = "y3._y3", name = "Observer")]
pub struct Observer {
    inner: y3::Observer,
    paths: Vec<Vec<u32>>,
    schemas: Vec<Option<Py<CompiledSchema>>>,
    config: Config,
    /// The error that stopped the stream; raised again until `reset()`.
    failed: Option<DecodeError>,
}

#[pymethods]
impl Observer {
    #[new]
    #[pyo3(signature = (paths, schemas = None, dialect = "golang", max_packet_len = None, max_depth = None, validate = false))]
    fn new(
        py: Python<'_>,
        paths: Vec<Vec<u32>>,
        schemas: Option<Vec<Option<Py<CompiledSchema>>>>,
        dialect: &str,
        max_packet_len: Option<u64>,
        max_depth: Option<u32>,
        validate: bool,
    ) -> PyResult<Self> {
        let config = config(dialect, max_packet_len, max_depth)?;
        let refs: Vec<&[u32]> = paths.iter().map(Vec::as_slice).collect();
        // No paths and validation on: a pure validator (the core's `Observer::validator`).
        let inner = if refs.is_empty() && validate {
            y3::Observer::validator(config)
        } else {
            y3::Observer::new(config, &refs)
                .or_raise(py)?
                .validating(validate)
        };
        let schemas = schemas.unwrap_or_else(|| paths.iter().map(|_| None).collect());
        if schemas.len() != paths.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{} schemas for {} paths",
                schemas.len(),
                paths.len()
            )));
        }
        Ok(Observer {
            inner,
            paths,
            schemas,
            config,
            failed: None,
        })
    }

    /// Feeds a chunk; returns every value that completed in it, in stream order.
    ///
    /// On a malformed stream raises `DecodeError` whose `observed` attribute holds the
    /// values that completed in this chunk before the error. The observer then keeps
    /// raising that error until `reset()`.
    ///
    /// A value that its path's schema cannot read (an `invalid_bool`, a node read as a
    /// scalar) does not stop the stream: the rest of the chunk is still fed, then the first
    /// such error is raised with `observed` holding the chunk's other values, and the
    /// observer stays usable.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Some(e) = self.failed {
            return Err(decode_error(py, e));
        }
        let out = PyList::empty(py);
        let mut unreadable: Option<PyErr> = None;
        let schemas = &self.schemas;
        let inner = &mut self.inner;
        let result = with_bytes(chunk, |mut input| loop {
            let fed = match inner.feed(input) {
                Ok(fed) => fed,
                Err(e) => return Ok(Err(e)),
            };
            let consumed = fed.consumed;
            let Some(found) = fed.observed else {
                return Ok(Ok(()));
            };
            let value = match &schemas[found.sub] {
                None => Ok(PyBytes::new(py, found.value()).into_any()),
                Some(schema) => read_observed(py, &found.packet, &schema.get().root),
            };
            match value {
                Ok(value) => {
                    let entry = PyTuple::new(
                        py,
                        [
                            found.sub.into_pyobject(py)?.into_any(),
                            found.id().into_pyobject(py)?.into_any(),
                            value,
                        ],
                    )?;
                    out.append(entry)?;
                }
                Err(e) => {
                    unreadable.get_or_insert(e);
                }
            }
            input = &input[consumed..];
        })?;
        let err = match result {
            Ok(()) => match unreadable {
                None => return Ok(out),
                Some(err) => err,
            },
            Err(e) => {
                self.failed = Some(e);
                decode_error(py, e)
            }
        };
        err.value(py).setattr("observed", &out)?;
        Err(err)
    }

    /// Declares the end of the stream: raises `DecodeError` (`unexpected_end`) when it
    /// stopped inside a packet. A stream that ends between top-level packets is complete.
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(e) = self.failed {
            return Err(decode_error(py, e));
        }
        self.inner.finish().or_raise(py)
    }

    /// Forgets all stream state (and a previous error), keeping the subscriptions.
    fn reset(&mut self) {
        self.inner.reset();
        self.failed = None;
    }

    /// Bytes consumed since creation or the last `reset()`.
    #[getter]
    fn position(&self) -> u64 {
        self.inner.position()
    }

    /// Top-level packets completed so far.
    #[getter]
    fn packets(&self) -> u64 {
        self.inner.packets()
    }

    /// The subscribed key paths, in index order.
    #[getter]
    fn paths(&self) -> Vec<Vec<u32>> {
        self.paths.clone()
    }

    /// The dialect name.
    #[getter]
    fn dialect(&self) -> &'static str {
        self.config.dialect.name()
    }
}
