//! The native half of `y3.StreamFunction`: `sdk::StreamFunction::run_until` with a
//! handler that hands each frame to Python and waits for its answer.
//!
//! The SDK runs the handler once per frame, in arrival order, and reads the next frame
//! only after the handler returned; the handler here waits on a channel of one call, so at
//! most one frame is in Python's hands and one on its way, and a slow Python handler slows
//! the reads (the router then applies its queue policy). `next(reply)` answers the previous
//! frame and awaits the next one: one crossing per frame.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use y3_transport::sdk::StreamFunction;
use y3_transport::{Data, TransportError};

use super::frame::MaybeFrame;
use super::wake::{wake_pair, WakeEnd, WatchedEnd};
use super::{payload_of, Options};
use crate::errors::transport_py_err;

type Reply = Option<(u32, Bytes)>;

/// The SDK's task, until `result` takes it.
type Running = Arc<tokio::sync::Mutex<Option<JoinHandle<Result<(), TransportError>>>>>;

/// A frame waiting for Python, and where its answer goes.
struct Call {
    data: Data,
    reply: oneshot::Sender<Reply>,
}

/// The native half of `y3.StreamFunction`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeFunction {
    calls: Arc<tokio::sync::Mutex<mpsc::Receiver<Call>>>,
    /// The answer channel of the frame Python holds.
    pending: Arc<Mutex<Option<oneshot::Sender<Reply>>>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    task: Running,
    /// Readable when a frame was handed over or the function ended (`fileno`).
    watched: WatchedEnd,
}

/// Starts the SDK's stream function observing `observed` on the runtime; it connects
/// (with backoff) in the background and reconnects when the connection is lost. A
/// `durable` one keeps its outputs until the router stored them (`StreamFunction::durable`).
#[pyfunction]
#[pyo3(signature = (options, observed, durable = false))]
pub fn function_start(
    options: &Options,
    observed: Vec<u32>,
    durable: bool,
) -> PyResult<NativeFunction> {
    let (wake, watched) =
        wake_pair().map_err(|e| crate::errors::transport_py_err(TransportError::Io(e)))?;
    let wake = Arc::new(wake);
    let (tx, rx) = mpsc::channel::<Call>(1);
    let (stop, stopped) = oneshot::channel::<()>();
    let mut function = StreamFunction::new(options.inner.clone(), &observed);
    if durable {
        function = function.durable();
    }
    let woken: Arc<WakeEnd> = wake.clone();
    let handler = move |data: Data| {
        let (tx, wake) = (tx.clone(), woken.clone());
        async move {
            let (reply, answer) = oneshot::channel();
            if tx.send(Call { data, reply }).await.is_err() {
                return None;
            }
            wake.wake();
            answer.await.ok().flatten()
        }
    };
    let run = function.run_until(handler, async {
        let _ = stopped.await;
    });
    let task = pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
        let result = run.await;
        // The handler (and its sender) is gone: Python's next take sees the end.
        wake.wake();
        result
    });
    Ok(NativeFunction {
        calls: Arc::new(tokio::sync::Mutex::new(rx)),
        pending: Arc::default(),
        stop: Mutex::new(Some(stop)),
        task: Arc::new(tokio::sync::Mutex::new(Some(task))),
        watched,
    })
}

#[pymethods]
impl NativeFunction {
    /// Answers the frame last returned (`reply`: `(tag, payload)` to emit, or `None`), then
    /// awaits the next frame: an awaitable of `Frame`, or of `None` once the function has
    /// stopped (await `result` for why).
    #[pyo3(signature = (reply = None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        reply: Option<(u32, Bound<'py, PyAny>)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reply = match reply {
            Some((tag, payload)) => Some((tag, payload_of(&payload)?)),
            None => None,
        };
        if let Some(pending) = lock(&self.pending).take() {
            let _ = pending.send(reply);
        }
        let (calls, pending) = (self.calls.clone(), self.pending.clone());
        super::spawn_py(py, async move {
            let call = calls.lock().await.recv().await;
            Ok(MaybeFrame(call.map(|c| {
                // Answered by the following `next`; should this awaitable be cancelled
                // after this point, the answer channel is dropped there instead and the
                // SDK's handler answers `None`.
                *lock(&pending) = Some(c.reply);
                c.data
            })))
        })
    }

    /// The descriptor to watch for readability (`loop.add_reader`): readable when a frame
    /// may be waiting for `try_next`, or the function ended.
    fn fileno(&self) -> PyResult<i32> {
        self.watched.fileno()
    }

    /// Reads the pending wake-up bytes (call it from the reader callback).
    fn drain_wakeups(&self) {
        self.watched.drain();
    }

    /// `next` without an awaitable when the next frame comes soon: answers the frame last
    /// returned, then waits up to `spin_us` microseconds (not holding the interpreter) for
    /// the next one. `Frame`; `False` when none came in time (await `next()`); `None` once
    /// the function has stopped. When frames stream in, the SDK hands over the next one a
    /// few microseconds after the answer, and the asyncio round trip is saved.
    #[pyo3(signature = (reply = None, spin_us = 0))]
    fn try_next<'py>(
        &self,
        py: Python<'py>,
        reply: Option<(u32, Bound<'py, PyAny>)>,
        spin_us: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reply = match reply {
            Some((tag, payload)) => Some((tag, payload_of(&payload)?)),
            None => None,
        };
        if let Some(pending) = lock(&self.pending).take() {
            let _ = pending.send(reply);
        }
        let calls = self.calls.clone();
        let got = py.detach(|| {
            let Ok(mut rx) = calls.try_lock() else {
                return Err(());
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_micros(spin_us);
            loop {
                match rx.try_recv() {
                    Ok(call) => return Ok(Some(call)),
                    Err(mpsc::error::TryRecvError::Disconnected) => return Ok(None),
                    Err(mpsc::error::TryRecvError::Empty) => {
                        if std::time::Instant::now() >= deadline {
                            return Err(());
                        }
                        std::thread::yield_now();
                    }
                }
            }
        });
        match got {
            Ok(Some(call)) => {
                *lock(&self.pending) = Some(call.reply);
                Ok(Bound::new(py, super::Frame::new(py, call.data))?.into_any())
            }
            Ok(None) => Ok(py.None().into_bound(py)),
            Err(()) => Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any()),
        }
    }

    /// Asks the function to stop: the frame in Python's hands is answered `None`, outputs
    /// already handed over are flushed, and the connection is closed.
    fn stop(&self) {
        drop(lock(&self.pending).take());
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
        let calls = self.calls.clone();
        pyo3_async_runtimes::tokio::get_runtime().spawn(async move {
            // Refuse frames from now on, so a handler waiting to hand one over returns.
            calls.lock().await.close();
        });
    }

    /// Awaits the end of the function: `None`, or raises the `TransportError` that ended
    /// it (a refusal such as `unauthorized`, or `gave_up`).
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let task = self.task.clone();
        super::spawn_py(py, async move {
            let Some(handle) = task.lock().await.take() else {
                return Ok(());
            };
            match handle.await {
                Ok(result) => result.map_err(transport_py_err),
                Err(_) => Err(transport_py_err(TransportError::Closed)),
            }
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Poisoned only by a panic while holding it; the slot is still meaningful.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
