//! `Frame`: one data frame handed to Python, its payload copied once into a `bytes`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use y3_transport::metadata::{self, Metadata};
use y3_transport::Data;

/// A received data frame. The payload is copied out of the connection's read buffer once,
/// into an immutable `bytes`, when the frame crosses into Python: the read buffer is freed
/// at once (a shared slice would keep the whole buffer alive), and codec calls on
/// `frame.payload` borrow that `bytes` without copying it again.
#[pyclass(frozen, module = "y3", name = "Frame")]
pub struct Frame {
    /// The data tag.
    #[pyo3(get)]
    tag: u32,
    /// The payload.
    #[pyo3(get)]
    payload: Py<PyBytes>,
    /// Stream functions passed so far.
    #[pyo3(get)]
    hops: u32,
    metadata: Metadata,
}

impl Frame {
    pub(crate) fn new(py: Python<'_>, data: Data) -> Frame {
        Frame {
            tag: data.tag,
            payload: PyBytes::new(py, &data.payload).unbind(),
            hops: data.hops,
            metadata: data.metadata,
        }
    }
}

/// Frames converted into a `list[Frame]` when the awaitable completes.
pub(crate) struct Frames(pub Vec<Data>);

impl<'py> IntoPyObject<'py> for Frames {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let frames = self
            .0
            .into_iter()
            .map(|d| Bound::new(py, Frame::new(py, d)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, frames)
    }
}

/// One frame (or `None`) converted when the awaitable completes.
pub(crate) struct MaybeFrame(pub Option<Data>);

impl<'py> IntoPyObject<'py> for MaybeFrame {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Some(d) => Ok(Bound::new(py, Frame::new(py, d))?.into_any()),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

#[pymethods]
impl Frame {
    /// The metadata map (`yomo-tid`, `yomo-source-id`, custom keys) as a new dict; a map
    /// that is not msgpack strings gives the pairs before the first bad one, and a pair
    /// that is not UTF-8 (YoMo's strings are any bytes) is left out: see `metadata_bytes`.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (k, v) in self.metadata.iter_bytes().map_while(Result::ok) {
            if let (Ok(k), Ok(v)) = (std::str::from_utf8(k), std::str::from_utf8(v)) {
                dict.set_item(k, v)?;
            }
        }
        Ok(dict)
    }

    /// The metadata map as bytes to bytes, every pair whether UTF-8 or not; a map that is
    /// not msgpack strings gives the pairs before the first bad one.
    #[getter]
    fn metadata_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (k, v) in self.metadata.iter_bytes().map_while(Result::ok) {
            dict.set_item(PyBytes::new(py, k), PyBytes::new(py, v))?;
        }
        Ok(dict)
    }

    /// The transaction id (`yomo-tid`), if any.
    #[getter]
    fn tid(&self) -> Option<String> {
        self.metadata
            .get(metadata::TID)
            .ok()
            .flatten()
            .map(str::to_owned)
    }

    /// The id of the source that sent it (`yomo-source-id`), if any.
    #[getter]
    fn source_id(&self) -> Option<String> {
        self.metadata
            .get(metadata::SOURCE_ID)
            .ok()
            .flatten()
            .map(str::to_owned)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Frame(tag=0x{:02x}, payload=<{} bytes>, hops={})",
            self.tag,
            self.payload.bind(py).as_bytes().len(),
            self.hops
        )
    }
}
