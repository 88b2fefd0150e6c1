//! The native half of `y3.Sink`: frames handed over in batches, with a wake-up the asyncio
//! loop watches itself.
//!
//! A task moves frames from the SDK's `Sink` into a bounded queue (`cap` frames; it waits
//! for room when full, so a Python consumer that stops iterating stops the socket reads and
//! the router applies its queue policy to this subscriber). When the queue goes from empty
//! to not empty it writes one byte to a socket pair whose other end is registered with the
//! asyncio loop (`loop.add_reader`): the loop wakes in its own thread, without an awaitable
//! and without a tokio thread entering the interpreter. Python then takes up to `max`
//! frames at once with `take` (one crossing per batch, not per frame). Loops that cannot
//! watch a descriptor await `wait_ready` instead.
//!
//! ```text
//!  sdk::Sink (reads the socket) ─▶ mover task ─▶ queue [cap] ─▶ take(max) ─▶ list[Frame]
//!                                            └─ 1 byte when it was empty ─▶ loop.add_reader ─▶ wake
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use y3_transport::sdk::Sink;
use y3_transport::{Data, TransportError};

use super::frame::Frames;
use super::wake::{wake_pair, WakeEnd, WatchedEnd};
use super::Options;
use crate::errors::{transport_error, transport_py_err};

/// What the mover handed over and Python has not taken yet.
#[derive(Default)]
struct Queue {
    frames: VecDeque<Data>,
    /// How the sink ended, once it has: `Ok` closed, `Err` the failure, raised once after
    /// the frames before it.
    end: Option<Result<(), TransportError>>,
}

struct Shared {
    queue: Mutex<Queue>,
    cap: usize,
    /// Notified by `take`: there is room again.
    room: Notify,
    /// Notified by the mover: there are frames (for `wait_ready`).
    ready: Notify,
    /// The mover's end of the wake-up pair (non-blocking).
    wake: WakeEnd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Poisoned only by a panic while holding it; the queue is still consistent.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells Python there is something to take.
    fn wake(&self) {
        self.wake.wake();
        self.ready.notify_one();
    }
}

/// The native half of `y3.Sink`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeSink {
    shared: Arc<Shared>,
    /// Python's end of the wake-up pair; its descriptor is `fileno()`.
    watched: WatchedEnd,
    closing: watch::Sender<bool>,
    mover: Mutex<Option<JoinHandle<()>>>,
    id: String,
}

/// Connects (with backoff) and handshakes as a sink observing `observed`: an awaitable of
/// `NativeSink` whose queue holds up to `cap` frames.
#[pyfunction]
#[pyo3(signature = (options, observed, cap = 1024))]
pub fn sink_connect<'py>(
    py: Python<'py>,
    options: &Options,
    observed: Vec<u32>,
    cap: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let options = options.inner.clone();
    super::spawn_py(py, async move {
        let sink = Sink::connect(options, &observed)
            .await
            .map_err(transport_py_err)?;
        let (wake, watched) = wake_pair().map_err(|e| transport_py_err(TransportError::Io(e)))?;
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            cap: cap.max(1),
            room: Notify::new(),
            ready: Notify::new(),
            wake,
        });
        let closing = watch::Sender::new(false);
        let id = sink.id().to_owned();
        let mover = tokio::spawn(mover(sink, shared.clone(), closing.subscribe()));
        Ok(NativeSink {
            shared,
            watched,
            closing,
            mover: Mutex::new(Some(mover)),
            id,
        })
    })
}

/// Moves frames from the SDK's sink into the queue until the sink ends or `close`.
async fn mover(mut sink: Sink, shared: Arc<Shared>, mut closing: watch::Receiver<bool>) {
    loop {
        // Wait for room; `notified` is created before the check so no wake-up is lost.
        loop {
            let room = shared.room.notified();
            if shared.lock().frames.len() < shared.cap {
                break;
            }
            let closed = tokio::select! {
                _ = room => false,
                _ = closing.wait_for(|c| *c) => true,
            };
            if closed {
                return sink.close().await;
            }
        }
        let received = tokio::select! {
            r = sink.recv() => Some(r),
            _ = closing.wait_for(|c| *c) => None,
        };
        let Some(received) = received else {
            return sink.close().await;
        };
        let (wake, ended) = {
            let mut queue = shared.lock();
            let was_empty = queue.frames.is_empty();
            match received {
                Some(Ok(data)) => {
                    queue.frames.push_back(data);
                    (was_empty, false)
                }
                Some(Err(e)) => {
                    queue.end = Some(Err(e));
                    (true, true)
                }
                None => {
                    queue.end = Some(Ok(()));
                    (true, true)
                }
            }
        };
        if wake {
            shared.wake();
        }
        if ended {
            return sink.close().await;
        }
    }
}

#[pymethods]
impl NativeSink {
    /// The descriptor to watch for readability (`loop.add_reader`): readable when there
    /// may be frames to take. `drain_wakeups` empties it.
    fn fileno(&self) -> PyResult<i32> {
        self.watched.fileno()
    }

    /// Reads the pending wake-up bytes (call it from the reader callback).
    fn drain_wakeups(&self) {
        self.watched.drain();
    }

    /// The frames ready now, at most `max` (possibly none), without waiting; `None` once
    /// the sink has ended and everything was taken. Raises the failure that ended it,
    /// once, after the frames that came before it.
    fn take(&self, py: Python<'_>, max: usize) -> PyResult<Option<Frames>> {
        let mut queue = self.shared.lock();
        let n = queue.frames.len().min(max.max(1));
        if n > 0 {
            let out: Vec<Data> = queue.frames.drain(..n).collect();
            drop(queue);
            self.shared.room.notify_one();
            return Ok(Some(Frames(out)));
        }
        match queue.end.take() {
            None => Ok(Some(Frames(Vec::new()))),
            Some(end) => {
                queue.end = Some(Ok(()));
                end.map(|()| None).map_err(|e| transport_error(py, e))
            }
        }
    }

    /// Awaits until there may be frames to take (for loops without `add_reader`).
    fn wait_ready<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (shared, mut closing) = (self.shared.clone(), self.closing.subscribe());
        super::spawn_py(py, async move {
            tokio::select! {
                _ = shared.ready.notified() => {}
                _ = closing.wait_for(|c| *c) => {}
            }
            Ok(())
        })
    }

    /// Stops receiving and closes the connection; a waiting iteration then ends.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.closing.send_replace(true);
        {
            let mut queue = self.shared.lock();
            queue.frames.clear();
            queue.end.get_or_insert(Ok(()));
        }
        self.shared.wake();
        let mover = self.mover.lock().unwrap_or_else(|e| e.into_inner()).take();
        super::spawn_py(py, async move {
            if let Some(mover) = mover {
                let _ = mover.await;
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

impl Drop for NativeSink {
    fn drop(&mut self) {
        // Dropped without `close`: the mover closes the connection and ends.
        self.closing.send_replace(true);
    }
}
