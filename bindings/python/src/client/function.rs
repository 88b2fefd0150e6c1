//! The native half of `y3.StreamFunction`: `sdk::StreamFunction::run_with_writer_until`
//! with a handler that hands each frame to Python and waits for its answer.
//!
//! The SDK runs the handler once per frame, in arrival order, and reads the next frame
//! only after the handler returned; the handler here waits on a channel of one call, so at
//! most one frame is in Python's hands and one on its way, and a slow Python handler slows
//! the reads (the router then applies its queue policy). `next(reply)` answers the previous
//! frame and awaits the next one: one crossing per frame. The answer is a list of outputs,
//! any number, each `(tag, payload, target)` (`""`: no target), which the SDK's handler
//! then writes in order through the frame's [`Writer`], each waiting for room in the send
//! queue. A Python handler may also write while it runs, through the frame's
//! [`NativeWriter`] (`writer()`), awaiting each write and seeing its error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use y3_transport::sdk::{StreamFunction, Writer};
use y3_transport::{Data, TransportError};

use super::frame::MaybeFrame;
use super::wake::{wake_pair, WakeEnd, WatchedEnd};
use super::{payload_of, Options};
use crate::errors::transport_py_err;

/// The outputs Python answered a frame with: `(tag, payload, target)`, `""` for none.
type Reply = Vec<(u32, Bytes, String)>;

/// The SDK's task, until `result` takes it.
type Running = Arc<tokio::sync::Mutex<Option<JoinHandle<Result<(), TransportError>>>>>;

/// A frame waiting for Python, and where its answer goes.
struct Call {
    data: Data,
    writer: Writer,
    reply: oneshot::Sender<Reply>,
}

/// The frame in Python's hands: where its answer goes, and its writer.
type Pending = Arc<Mutex<Option<(oneshot::Sender<Reply>, Writer)>>>;

/// The native half of `y3.StreamFunction`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeFunction {
    calls: Arc<tokio::sync::Mutex<mpsc::Receiver<Call>>>,
    /// The answer channel and writer of the frame Python holds.
    pending: Pending,
    /// Outputs of answers that could not be written (the connection was gone).
    unwritten: Arc<AtomicU64>,
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
    let unwritten = Arc::new(AtomicU64::new(0));
    let lost = unwritten.clone();
    let handler = move |data: Data, writer: Writer| {
        let (tx, wake, lost) = (tx.clone(), woken.clone(), lost.clone());
        async move {
            let (reply, answer) = oneshot::channel();
            let call = Call {
                data,
                writer: writer.clone(),
                reply,
            };
            if tx.send(call).await.is_err() {
                return;
            }
            wake.wake();
            let outputs = answer.await.unwrap_or_default();
            let count = outputs.len();
            for (i, (tag, payload, target)) in outputs.into_iter().enumerate() {
                if writer
                    .write_with_target(tag, payload, &target)
                    .await
                    .is_err()
                {
                    // Counted; the Python half logs it (`unwritten`).
                    lost.fetch_add((count - i) as u64, Ordering::Relaxed);
                    return;
                }
            }
        }
    };
    let run = function.run_with_writer_until(handler, async {
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
        unwritten,
        stop: Mutex::new(Some(stop)),
        task: Arc::new(tokio::sync::Mutex::new(Some(task))),
        watched,
    })
}

#[pymethods]
impl NativeFunction {
    /// Answers the frame last returned (`reply`: the outputs to write, `(tag, payload,
    /// target)` each, `""` for no target), then awaits the next frame: an awaitable of
    /// `Frame`, or of `None` once the function has stopped (await `result` for why).
    #[pyo3(signature = (reply = None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        reply: Option<Vec<(u32, Bound<'py, PyAny>, String)>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.answer(reply)?;
        let (calls, pending) = (self.calls.clone(), self.pending.clone());
        super::spawn_py(py, async move {
            let call = calls.lock().await.recv().await;
            Ok(MaybeFrame(call.map(|c| {
                // Answered by the following `next`; should this awaitable be cancelled
                // after this point, the answer channel is dropped there instead and the
                // SDK's handler writes nothing.
                *lock(&pending) = Some((c.reply, c.writer));
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
        reply: Option<Vec<(u32, Bound<'py, PyAny>, String)>>,
        spin_us: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.answer(reply)?;
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
                *lock(&self.pending) = Some((call.reply, call.writer));
                Ok(Bound::new(py, super::Frame::new(py, call.data))?.into_any())
            }
            Ok(None) => Ok(py.None().into_bound(py)),
            Err(()) => Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any()),
        }
    }

    /// A writer for the outputs of the frame last returned, usable while the function runs
    /// (also after the handler returned); `None` when no frame is in Python's hands.
    fn writer(&self) -> Option<NativeWriter> {
        lock(&self.pending)
            .as_ref()
            .map(|(_, writer)| NativeWriter {
                writer: writer.clone(),
            })
    }

    /// Outputs of answers that were not written because the connection was gone (each
    /// logged); writes through a [`NativeWriter`] raise instead.
    #[getter]
    fn unwritten(&self) -> u64 {
        self.unwritten.load(Ordering::Relaxed)
    }

    /// Asks the function to stop: the frame in Python's hands gets no outputs, outputs
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

impl NativeFunction {
    /// Hands `reply` (the outputs of the frame Python holds) to the SDK's handler.
    fn answer(&self, reply: Option<Vec<(u32, Bound<'_, PyAny>, String)>>) -> PyResult<()> {
        let mut outputs = Vec::with_capacity(reply.as_ref().map_or(0, Vec::len));
        for (tag, payload, target) in reply.unwrap_or_default() {
            outputs.push((tag, payload_of(&payload)?, target));
        }
        if let Some((pending, _)) = lock(&self.pending).take() {
            let _ = pending.send(outputs);
        }
        Ok(())
    }
}

/// Writes the outputs of one frame (`sdk::Writer`): each keeps the input's metadata minus
/// `yomo-target`, with one more hop; a target adds `yomo-target`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeWriter {
    writer: Writer,
}

#[pymethods]
impl NativeWriter {
    /// Writes `payload` under `tag` (with `yomo-target` = `target` unless it is empty):
    /// an awaitable that waits for room in the send queue and raises `TransportError`
    /// (`closed`) once the connection is gone or the function stopped.
    #[pyo3(signature = (tag, payload, target = String::new()))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        tag: u32,
        payload: Bound<'py, PyAny>,
        target: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let payload = payload_of(&payload)?;
        let writer = self.writer.clone();
        super::spawn_py(py, async move {
            writer
                .write_with_target(tag, payload, &target)
                .await
                .map_err(transport_py_err)
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Poisoned only by a panic while holding it; the slot is still meaningful.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
