//! The native half of `y3.Source`: a bounded queue in front of a task that owns the SDK's
//! `Source`.
//!
//! `try_send` puts a frame on the queue without creating an awaitable (the common case);
//! only a full queue makes Python await `send`, which is where backpressure reaches it. The
//! task hands each frame to `sdk::Source::send`, whose own writer task batches the writes.
//! A send that failed (the router refused a frame, reconnecting gave up) is kept and raised
//! by the next `try_send`, `send` or `flush`, as the Rust SDK returns it from the next call.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{new_id, Source};
use y3_transport::{Data, TransportError};

use super::{payload_of, Options};
use crate::errors::{transport_error, transport_py_err};

/// What the bridge task is asked to do.
enum Cmd {
    Send(Outgoing),
    Flush(oneshot::Sender<Result<(), TransportError>>),
}

/// A frame to send, as Python described it.
struct Outgoing {
    tag: u32,
    payload: Bytes,
    target: Option<String>,
    metadata: Option<Vec<(String, String)>>,
}

/// How the bridge task ended, until `close` takes it.
type Done = Arc<tokio::sync::Mutex<Option<oneshot::Receiver<Result<(), TransportError>>>>>;

/// The first failure not yet reported to Python.
#[derive(Default)]
struct Failed(Mutex<Option<TransportError>>);

impl Failed {
    fn keep(&self, error: TransportError) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(error);
    }
    fn take(&self) -> Option<TransportError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The native half of `y3.Source`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeSource {
    tx: Mutex<Option<mpsc::Sender<Cmd>>>,
    failed: Arc<Failed>,
    done: Done,
    id: String,
}

/// Connects (with backoff) and handshakes as a source: an awaitable of `NativeSource`.
#[pyfunction]
pub fn source_connect<'py>(py: Python<'py>, options: &Options) -> PyResult<Bound<'py, PyAny>> {
    let options = options.inner.clone();
    super::spawn_py(py, async move {
        let queue = options.send_queue;
        let source = Source::connect(options).await.map_err(transport_py_err)?;
        let id = source.id().to_owned();
        let (tx, rx) = mpsc::channel(queue);
        let (done_tx, done_rx) = oneshot::channel();
        let failed = Arc::new(Failed::default());
        tokio::spawn(bridge(source, rx, failed.clone(), done_tx));
        Ok(NativeSource {
            tx: Mutex::new(Some(tx)),
            failed,
            done: Arc::new(tokio::sync::Mutex::new(Some(done_rx))),
            id,
        })
    })
}

/// Owns the SDK source: sends what is queued, in order; closes it when the queue's last
/// sender is gone (`close`, or the Python object collected).
async fn bridge(
    mut source: Source,
    mut rx: mpsc::Receiver<Cmd>,
    failed: Arc<Failed>,
    done: oneshot::Sender<Result<(), TransportError>>,
) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Cmd::Send(out) => {
                if let Err(e) = send(&mut source, out).await {
                    failed.keep(e);
                }
            }
            Cmd::Flush(ack) => {
                let result = match failed.take() {
                    Some(e) => Err(e),
                    None => source.flush().await,
                };
                let _ = ack.send(result);
            }
        }
    }
    let result = match failed.take() {
        Some(e) => {
            let _ = source.close().await;
            Err(e)
        }
        None => source.close().await,
    };
    let _ = done.send(result);
}

async fn send(source: &mut Source, out: Outgoing) -> Result<(), TransportError> {
    match (out.target, out.metadata) {
        (None, None) => source.send(out.tag, out.payload).await,
        (Some(target), None) => source.send_with_target(out.tag, out.payload, &target).await,
        (target, Some(extra)) => {
            // YoMo's source metadata first, then the caller's pairs (which may override).
            let tid = new_id();
            let mut pairs: Vec<(&str, &str)> =
                vec![(metadata::SOURCE_ID, source.id()), (metadata::TID, &tid)];
            if let Some(target) = &target {
                pairs.push((metadata::TARGET, target));
            }
            let base = Metadata::from_pairs(pairs);
            let set: Vec<(&str, &str)> = extra
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let md = base.edit(&set, &[]).unwrap_or(base);
            source
                .send_data(Data::new(out.tag, out.payload).with_metadata(md))
                .await
        }
    }
}

impl NativeSource {
    fn sender(&self) -> Result<mpsc::Sender<Cmd>, TransportError> {
        self.tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(TransportError::Closed)
    }

    fn outgoing(
        tag: u32,
        data: &Bound<'_, PyAny>,
        target: Option<String>,
        metadata: Option<Vec<(String, String)>>,
    ) -> PyResult<Cmd> {
        Ok(Cmd::Send(Outgoing {
            tag,
            payload: payload_of(data)?,
            target,
            metadata,
        }))
    }
}

#[pymethods]
impl NativeSource {
    /// Queues a frame if there is room: `True` queued, `False` full (await `send`).
    /// Raises the failure of an earlier frame, once.
    #[pyo3(signature = (tag, data, target = None, metadata = None))]
    fn try_send(
        &self,
        py: Python<'_>,
        tag: u32,
        data: &Bound<'_, PyAny>,
        target: Option<String>,
        metadata: Option<Vec<(String, String)>>,
    ) -> PyResult<bool> {
        if let Some(e) = self.failed.take() {
            return Err(transport_error(py, e));
        }
        let tx = self.sender().map_err(|e| transport_error(py, e))?;
        match tx.try_send(Self::outgoing(tag, data, target, metadata)?) {
            Ok(()) => Ok(true),
            Err(mpsc::error::TrySendError::Full(_)) => Ok(false),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                Err(transport_error(py, TransportError::Closed))
            }
        }
    }

    /// Awaits room on the queue, then queues the frame.
    #[pyo3(signature = (tag, data, target = None, metadata = None))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        tag: u32,
        data: &Bound<'py, PyAny>,
        target: Option<String>,
        metadata: Option<Vec<(String, String)>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(e) = self.failed.take() {
            return Err(transport_error(py, e));
        }
        let tx = self.sender().map_err(|e| transport_error(py, e))?;
        let cmd = Self::outgoing(tag, data, target, metadata)?;
        super::spawn_py(py, async move {
            tx.send(cmd)
                .await
                .map_err(|_| transport_py_err(TransportError::Closed))
        })
    }

    /// Waits until every frame queued so far is written to the connection.
    fn flush<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.sender().map_err(|e| transport_error(py, e))?;
        super::spawn_py(py, async move {
            let (ack, acked) = oneshot::channel();
            tx.send(Cmd::Flush(ack))
                .await
                .map_err(|_| transport_py_err(TransportError::Closed))?;
            acked
                .await
                .unwrap_or(Err(TransportError::Closed))
                .map_err(transport_py_err)
        })
    }

    /// Sends what is queued, closes the connection, and waits (bounded) for the router
    /// to close its side. A second call returns at once.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let done = self.done.clone();
        super::spawn_py(py, async move {
            let Some(rx) = done.lock().await.take() else {
                return Ok(());
            };
            rx.await.unwrap_or(Ok(())).map_err(transport_py_err)
        })
    }

    /// Closes without waiting: what is queued is still written and the connection closed,
    /// in the background (for leaving on an error or a cancellation).
    fn shutdown(&self) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Whether `close` or `shutdown` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// This client's id (the `yomo-source-id` of its frames).
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }
}
