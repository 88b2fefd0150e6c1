//! `inspect`: the raw tree of packet bytes as typed dicts that `encode` accepts back.
//!
//! ```text
//! {"tag": 16, "node":  [child, ...]}     a node (tag byte 0x80 | key)
//! {"tag": 16, "array": [child, ...]}     an array node (0xc0 | key)
//! {"tag": 17, "bytes": b"..."}           a primitive: its value bytes (the type is not on the wire)
//! ```
//!
//! In `draft02` nothing on the wire marks a node, so every packet comes back as `bytes`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use y3::Packet;

use crate::errors::OrRaise;
use crate::schema::{Fail, Walk};
use crate::{config, with_bytes};

/// One packet and everything below it.
pub(crate) fn tree<'py>(py: Python<'py>, packet: &Packet<'_>) -> Walk<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "tag"), packet.id())?;
    if packet.is_node() {
        let children = PyList::empty(py);
        for (i, child) in packet.children()?.enumerate() {
            let child = child.map_err(|e| Fail::from(e).at(|| format!("[{i}]")))?;
            children.append(tree(py, &child).map_err(|f| f.at(|| format!("[{i}]")))?)?;
        }
        let key = if packet.is_array() {
            intern!(py, "array")
        } else {
            intern!(py, "node")
        };
        dict.set_item(key, children)?;
    } else {
        dict.set_item(intern!(py, "bytes"), PyBytes::new(py, packet.value()))?;
    }
    Ok(dict.into_any())
}

/// Every top-level packet of `data` (validated as a whole first) as a typed-dict tree.
#[pyfunction]
#[pyo3(signature = (data, dialect = "golang", max_packet_len = None, max_depth = None))]
pub fn inspect<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
) -> PyResult<Bound<'py, PyList>> {
    let config = config(dialect, max_packet_len, max_depth)?;
    with_bytes(data, |buf| {
        y3::validate_with(buf, &config).or_raise(py)?;
        let out = PyList::empty(py);
        let mut rest = buf;
        while !rest.is_empty() {
            let (packet, tail) = Packet::parse_with(rest, &config).or_raise(py)?;
            out.append(tree(py, &packet).map_err(|f| f.into_py(py))?)?;
            rest = tail;
        }
        Ok(out)
    })
}

/// Checks a stream of complete top-level packets: every header, every node length, the
/// depth limit. Returns the number of top-level packets.
#[pyfunction]
#[pyo3(signature = (data, dialect = "golang", max_packet_len = None, max_depth = None))]
pub fn validate(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    dialect: &str,
    max_packet_len: Option<u64>,
    max_depth: Option<u32>,
) -> PyResult<u64> {
    let config = config(dialect, max_packet_len, max_depth)?;
    with_bytes(data, |buf| {
        let mut observer = y3::Observer::validator(config);
        observer.feed(buf).or_raise(py)?;
        observer.finish().or_raise(py)?;
        Ok(observer.packets())
    })
}
