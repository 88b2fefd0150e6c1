//! The native half of `y3.Sink`: frames handed over in batches.
//!
//! One crossing of the bridge costs about as much as handling a few dozen frames in Python,
//! so frames are taken in batches: `try_recv_batch` takes whatever is ready without creating
//! an awaitable, and only when nothing is ready does Python await `recv_batch`, which waits
//! for one frame and adds whatever else is ready by then. Nothing is buffered here beyond
//! the batch being built: the SDK's own bounded channel (1024 frames) sits in front, so a
//! Python consumer that stops iterating stops the socket reads, and the router applies its
//! queue policy to this subscriber.

use std::sync::Arc;

use futures_util::FutureExt;
use pyo3::prelude::*;
use tokio::sync::{watch, Mutex};
use y3_transport::sdk::Sink;
use y3_transport::{Data, TransportError};

use super::frame::Frames;
use super::Options;
use crate::errors::{transport_error, transport_py_err};

#[derive(Default)]
struct State {
    sink: Option<Sink>,
    /// A failure seen while filling a batch, raised by the next call (after the frames
    /// that came before it).
    failed: Option<TransportError>,
}

/// The native half of `y3.Sink`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeSink {
    state: Arc<Mutex<State>>,
    /// Set by `close`: a `recv_batch` waiting for a frame (holding the state) lets go.
    closing: watch::Sender<bool>,
    id: String,
}

/// Connects (with backoff) and handshakes as a sink observing `observed`: an awaitable of
/// `NativeSink`.
#[pyfunction]
pub fn sink_connect<'py>(
    py: Python<'py>,
    options: &Options,
    observed: Vec<u32>,
) -> PyResult<Bound<'py, PyAny>> {
    let options = options.inner.clone();
    super::spawn_py(py, async move {
        let sink = Sink::connect(options, &observed)
            .await
            .map_err(transport_py_err)?;
        Ok(NativeSink {
            closing: watch::Sender::new(false),
            id: sink.id().to_owned(),
            state: Arc::new(Mutex::new(State {
                sink: Some(sink),
                failed: None,
            })),
        })
    })
}

/// Adds the frames that are ready now, up to `max`, without waiting.
fn fill(state: &mut State, out: &mut Vec<Data>, max: usize) {
    let State { sink, failed } = state;
    let Some(s) = sink else { return };
    while out.len() < max {
        // `recv` is cancel-safe: a poll that finds nothing loses nothing.
        match s.recv().now_or_never() {
            Some(Some(Ok(data))) => out.push(data),
            Some(Some(Err(e))) => {
                *failed = Some(e);
                break;
            }
            Some(None) => {
                *sink = None;
                break;
            }
            None => break,
        }
    }
}

/// `Ok(None)`: the sink ended; `Ok(Some(frames))`, never empty when awaited.
async fn recv_batch(
    state: &Mutex<State>,
    mut closing: watch::Receiver<bool>,
    max: usize,
) -> Result<Option<Vec<Data>>, TransportError> {
    let mut st = tokio::select! {
        st = state.lock() => st,
        _ = closing.wait_for(|c| *c) => return Ok(None),
    };
    if let Some(e) = st.failed.take() {
        return Err(e);
    }
    let Some(sink) = st.sink.as_mut() else {
        return Ok(None);
    };
    let received = tokio::select! {
        r = sink.recv() => r,
        _ = closing.wait_for(|c| *c) => return Ok(None),
    };
    let first = match received {
        Some(Ok(data)) => data,
        Some(Err(e)) => {
            st.sink = None;
            return Err(e);
        }
        None => {
            st.sink = None;
            return Ok(None);
        }
    };
    let mut out = Vec::with_capacity(max.clamp(1, 64));
    out.push(first);
    fill(&mut st, &mut out, max);
    Ok(Some(out))
}

#[pymethods]
impl NativeSink {
    /// The frames ready now (at most `max`, possibly none) without waiting; `None` once
    /// the sink has ended. Raises the failure that ended it, once.
    fn try_recv_batch(&self, py: Python<'_>, max: usize) -> PyResult<Option<Frames>> {
        // Locked only by a pending `recv_batch`: then nothing is ready for us anyway.
        let Ok(mut st) = self.state.try_lock() else {
            return Ok(Some(Frames(Vec::new())));
        };
        if let Some(e) = st.failed.take() {
            return Err(transport_error(py, e));
        }
        if st.sink.is_none() {
            return Ok(None);
        }
        let mut out = Vec::new();
        fill(&mut st, &mut out, max);
        if out.is_empty() && st.sink.is_none() {
            if let Some(e) = st.failed.take() {
                return Err(transport_error(py, e));
            }
            return Ok(None);
        }
        Ok(Some(Frames(out)))
    }

    /// Awaits at least one frame, then adds what else is ready (at most `max` in all):
    /// an awaitable of `list[Frame]`, or of `None` once the sink has ended.
    fn recv_batch<'py>(&self, py: Python<'py>, max: usize) -> PyResult<Bound<'py, PyAny>> {
        let (state, closing) = (self.state.clone(), self.closing.subscribe());
        let max = max.max(1);
        super::spawn_py(py, async move {
            recv_batch(&state, closing, max)
                .await
                .map(|batch| batch.map(Frames))
                .map_err(transport_py_err)
        })
    }

    /// Stops receiving (a pending `recv_batch` returns `None`) and closes the connection.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.closing.send_replace(true);
        let state = self.state.clone();
        super::spawn_py(py, async move {
            let sink = state.lock().await.sink.take();
            if let Some(sink) = sink {
                sink.close().await;
            }
            Ok(())
        })
    }

    /// This client's id (without the reconnect suffix).
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }
}
