//! The client SDK for asyncio: `Options`, `Frame` and the native halves of `y3.Source`
//! (and `y3.DurableSource`), `y3.StreamFunction` and `y3.Sink`, each a thin shell over `y3_transport::sdk`.
//!
//! Awaitables are tokio futures turned into asyncio futures by pyo3-async-runtimes (one
//! process-wide multi-thread runtime); the sink's wake-ups go through a socket pair the
//! asyncio loop watches instead. Data crosses between the two worlds through bounded queues
//! only, so a Python consumer that stops taking frames stops the Rust side too:
//!
//! ```text
//!  Source:   send() ─try_send/send─▶ [queue: send_queue] ─▶ bridge task ─▶ sdk::Source
//!  Sink:     sdk::Sink [1024] ─▶ mover ─▶ [queue: 2 × batch] ─▶ take(batch) ─▶ list[Frame]
//!  Function: sdk::StreamFunction::run_with_writer_until ─▶ [1 call] ─▶ try_next / next(outputs) ─▶ handler
//!                                 ◀── writer().write(tag, payload, target) ◀── handler
//! ```
//!
//! The pure-Python half (`python/y3/_client.py`) holds the asyncio-facing classes; this
//! module holds no Python-visible state beyond what those classes wrap.

mod frame;
mod function;
mod options;
mod sink;
mod source;
mod wake;

pub use frame::Frame;
pub use function::{NativeFunction, NativeWriter};
pub use options::Options;
pub use sink::NativeSink;
pub use source::NativeSource;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

/// A payload as `Bytes`: a `bytes` object is shared, not copied (it is immutable); a
/// `bytearray` or `memoryview` is copied once (it may change after the call).
pub(crate) fn payload_of(data: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if data.cast::<PyBytes>().is_ok() {
        let backed: PyBackedBytes = data.extract()?;
        return Ok(Bytes::from_owner(backed));
    }
    crate::with_bytes(data, |b| Ok(Bytes::copy_from_slice(b)))
}

/// Awaitables whose Rust future has not finished (or been dropped) yet.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts one awaitable in [`IN_FLIGHT`] for as long as its future lives.
struct InFlight;

impl InFlight {
    fn new() -> InFlight {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `future_into_py` on the shared runtime, counted in [`IN_FLIGHT`] so that [`quiesce`]
/// can wait for it.
pub(crate) fn spawn_py<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let guard = InFlight::new();
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        let _guard = guard;
        fut.await
    })
}

/// Waits (without holding the interpreter, at most `timeout` seconds) until no awaitable
/// is still running on the runtime, then a little longer for the threads that hand their
/// results to asyncio to let go of the interpreter. Registered with `atexit`: a tokio
/// thread that enters the interpreter while it finalizes aborts the process
/// (PyO3/pyo3-async-runtimes#40).
#[pyfunction]
fn quiesce(py: Python<'_>, timeout: f64) {
    py.detach(|| {
        let deadline = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 60.0));
        while IN_FLIGHT.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
    });
}

/// Registers the client classes and functions on the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Options>()?;
    m.add_class::<Frame>()?;
    m.add_class::<NativeSource>()?;
    m.add_class::<NativeSink>()?;
    m.add_class::<NativeFunction>()?;
    m.add_class::<NativeWriter>()?;
    m.add_function(wrap_pyfunction!(source::source_connect, m)?)?;
    m.add_function(wrap_pyfunction!(source::durable_source_connect, m)?)?;
    m.add_function(wrap_pyfunction!(sink::sink_connect, m)?)?;
    m.add_function(wrap_pyfunction!(function::function_start, m)?)?;
    m.add_function(wrap_pyfunction!(quiesce, m)?)?;
    Ok(())
}
