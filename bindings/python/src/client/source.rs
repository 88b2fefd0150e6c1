//! The native half of `y3.Source` and `y3.DurableSource`: a bounded queue in front of a
//! task that owns the SDK's `Source` or `DurableSource` (one bridge for both, through
//! [`Sending`]).
//!
//! `try_send` puts a frame on the queue without creating an awaitable (the common case);
//! only a full queue makes Python await `send`, which is where backpressure reaches it. The
//! task hands each frame to `sdk::Source::send`, whose own writer task batches the writes.
//! A send that failed (the router refused a frame, reconnecting gave up) is kept and raised
//! by the next `try_send`, `send` or `flush`, as the Rust SDK returns it from the next call.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use tokio::sync::{mpsc, oneshot};
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{new_id, ClientOptions, DurableSource, Refusals, Source};
use y3_transport::{Data, TransportError};

use super::{payload_of, Options};
use crate::errors::{transport_error, transport_py_err};

/// How long a durable source that is dropped or shut down (not closed) still waits for
/// its frames to be stored, in the background.
const DROPPED_LINGER: Duration = Duration::from_secs(2);

/// What the bridge task is asked to do.
enum Cmd {
    Send(Outgoing),
    /// Flush; for a durable source, wait (at most this long) until everything is stored.
    /// Answers whether everything is.
    Flush(Duration, oneshot::Sender<Result<bool, TransportError>>),
    /// Close, a durable source after waiting at most this long for its frames to be stored.
    Close(Duration),
}

/// What the bridge drives: the SDK's [`Source`] or [`DurableSource`].
trait Sending: Send + 'static {
    /// The client's id (`yomo-source-id`).
    fn id(&self) -> &str;
    /// Sends (or for a durable source, keeps and sends) one frame.
    fn send_out(
        &mut self,
        out: Outgoing,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Flushes; a durable source waits up to `stored_within` until everything is stored.
    fn flush(
        &mut self,
        stored_within: Duration,
    ) -> impl Future<Output = Result<bool, TransportError>> + Send;
    /// Closes; a durable source waits up to `stored_within` first. Whether all was stored.
    fn close(
        self,
        stored_within: Duration,
    ) -> impl Future<Output = Result<bool, TransportError>> + Send;
    /// Frames written again after a reconnect (a durable source's).
    fn resent(&self) -> u64;
    /// The record of frames the router refused (a durable source's; none for a plain one).
    fn refusals(&self) -> Refusals {
        Refusals::default()
    }
}

impl Sending for Source {
    fn id(&self) -> &str {
        Source::id(self)
    }

    async fn send_out(&mut self, out: Outgoing) -> Result<(), TransportError> {
        match (out.target, out.metadata) {
            (None, None) => self.send(out.tag, out.payload).await,
            (Some(target), None) => self.send_with_target(out.tag, out.payload, &target).await,
            (target, Some(extra)) => {
                let md = metadata_of(self.id(), target.as_deref(), &extra);
                self.send_data(Data::new(out.tag, out.payload).with_metadata(md))
                    .await
            }
        }
    }

    async fn flush(&mut self, _: Duration) -> Result<bool, TransportError> {
        Source::flush(self).await.map(|()| true)
    }

    async fn close(self, _: Duration) -> Result<bool, TransportError> {
        Source::close(self).await.map(|()| true)
    }

    fn resent(&self) -> u64 {
        0
    }
}

impl Sending for DurableSource {
    fn id(&self) -> &str {
        DurableSource::id(self)
    }

    async fn send_out(&mut self, out: Outgoing) -> Result<(), TransportError> {
        if out.target.is_none() && out.metadata.is_none() {
            return self.send(out.tag, out.payload).await;
        }
        let extra = out.metadata.unwrap_or_default();
        let md = metadata_of(self.id(), out.target.as_deref(), &extra);
        self.send_data(Data::new(out.tag, out.payload).with_metadata(md))
            .await
    }

    async fn flush(&mut self, stored_within: Duration) -> Result<bool, TransportError> {
        self.wait_stored(stored_within).await
    }

    async fn close(self, stored_within: Duration) -> Result<bool, TransportError> {
        DurableSource::close(self, stored_within).await
    }

    fn resent(&self) -> u64 {
        DurableSource::resent(self)
    }

    fn refusals(&self) -> Refusals {
        DurableSource::refusals(self)
    }
}

/// YoMo's source metadata (`yomo-source-id`, a fresh `yomo-tid`, `yomo-target` if given),
/// then the caller's pairs (which may override).
fn metadata_of(id: &str, target: Option<&str>, extra: &[(String, String)]) -> Metadata {
    let tid = new_id();
    let mut pairs: Vec<(&str, &str)> = vec![(metadata::SOURCE_ID, id), (metadata::TID, &tid)];
    if let Some(target) = target {
        pairs.push((metadata::TARGET, target));
    }
    let base = Metadata::from_pairs(pairs);
    let set: Vec<(&str, &str)> = extra
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    base.edit(&set, &[]).unwrap_or(base)
}

/// A frame to send, as Python described it.
struct Outgoing {
    tag: u32,
    payload: Bytes,
    target: Option<String>,
    metadata: Option<Vec<(String, String)>>,
}

/// How the bridge task ended (whether everything was stored), until `close` takes it.
type Done = Arc<tokio::sync::Mutex<Option<oneshot::Receiver<Result<bool, TransportError>>>>>;

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

/// The native half of `y3.Source` and `y3.DurableSource`.
#[pyclass(frozen, module = "y3._y3")]
pub struct NativeSource {
    tx: Mutex<Option<mpsc::Sender<Cmd>>>,
    failed: Arc<Failed>,
    done: Done,
    resent: Arc<AtomicU64>,
    refusals: Refusals,
    id: String,
}

/// Connects (with backoff) and handshakes as a source: an awaitable of `NativeSource`.
#[pyfunction]
pub fn source_connect<'py>(py: Python<'py>, options: &Options) -> PyResult<Bound<'py, PyAny>> {
    let options = options.inner.clone();
    super::spawn_py(py, start(options, Source::connect))
}

/// Connects (with backoff) and handshakes as a source that keeps its frames until the
/// router stored them (`DurableSource`): an awaitable of `NativeSource`.
#[pyfunction]
pub fn durable_source_connect<'py>(
    py: Python<'py>,
    options: &Options,
) -> PyResult<Bound<'py, PyAny>> {
    let options = options.inner.clone();
    super::spawn_py(py, start(options, DurableSource::connect))
}

/// Connects with `connect` and starts the bridge task.
async fn start<S: Sending, F: Future<Output = Result<S, TransportError>>>(
    options: ClientOptions,
    connect: impl FnOnce(ClientOptions) -> F,
) -> PyResult<NativeSource> {
    let queue = options.send_queue;
    let source = connect(options).await.map_err(transport_py_err)?;
    let id = source.id().to_owned();
    let refusals = source.refusals();
    let (tx, rx) = mpsc::channel(queue);
    let (done_tx, done_rx) = oneshot::channel();
    let failed = Arc::new(Failed::default());
    let resent = Arc::new(AtomicU64::new(0));
    tokio::spawn(bridge(source, rx, failed.clone(), resent.clone(), done_tx));
    Ok(NativeSource {
        tx: Mutex::new(Some(tx)),
        failed,
        done: Arc::new(tokio::sync::Mutex::new(Some(done_rx))),
        resent,
        refusals,
        id,
    })
}

/// Owns the SDK source: sends what is queued, in order; closes it on `Cmd::Close` or when
/// the queue's last sender is gone (`shutdown`, or the Python object collected).
async fn bridge<S: Sending>(
    mut source: S,
    mut rx: mpsc::Receiver<Cmd>,
    failed: Arc<Failed>,
    resent: Arc<AtomicU64>,
    done: oneshot::Sender<Result<bool, TransportError>>,
) {
    let mut linger = DROPPED_LINGER;
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Cmd::Send(out) => {
                if let Err(e) = source.send_out(out).await {
                    failed.keep(e);
                }
            }
            Cmd::Flush(stored_within, ack) => {
                let result = match failed.take() {
                    Some(e) => Err(e),
                    None => source.flush(stored_within).await,
                };
                resent.store(source.resent(), Ordering::Relaxed);
                let _ = ack.send(result);
            }
            Cmd::Close(stored_within) => {
                linger = stored_within;
                break;
            }
        }
    }
    resent.store(source.resent(), Ordering::Relaxed);
    let result = match failed.take() {
        Some(e) => {
            let _ = source.close(linger).await;
            Err(e)
        }
        None => source.close(linger).await,
    };
    let _ = done.send(result);
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

    /// Waits until every frame queued so far is written to the connection; a durable
    /// source, until every frame is stored, at most `timeout` seconds. Whether all is
    /// (always `True` for a plain source).
    #[pyo3(signature = (timeout = 0.0))]
    fn flush<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.sender().map_err(|e| transport_error(py, e))?;
        let stored_within = seconds(timeout);
        super::spawn_py(py, async move {
            let (ack, acked) = oneshot::channel();
            tx.send(Cmd::Flush(stored_within, ack))
                .await
                .map_err(|_| transport_py_err(TransportError::Closed))?;
            acked
                .await
                .unwrap_or(Err(TransportError::Closed))
                .map_err(transport_py_err)
        })
    }

    /// Sends what is queued (a durable source: waits at most `timeout` seconds until it
    /// is stored), closes the connection, and waits (bounded) for the router to close its
    /// side. Whether everything was stored (always `True` for a plain source). A second
    /// call returns `True` at once.
    #[pyo3(signature = (timeout = 0.0))]
    fn close<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let done = self.done.clone();
        let stored_within = seconds(timeout);
        super::spawn_py(py, async move {
            if let Some(tx) = tx {
                // Behind every queued frame; a bridge that already ended does not need it.
                let _ = tx.send(Cmd::Close(stored_within)).await;
            }
            let Some(rx) = done.lock().await.take() else {
                return Ok(true);
            };
            rx.await.unwrap_or(Ok(true)).map_err(transport_py_err)
        })
    }

    /// Frames a durable source wrote again after a reconnect, as of its last `flush` or
    /// `close`.
    #[getter]
    fn resent(&self) -> u64 {
        self.resent.load(Ordering::Relaxed)
    }

    /// Frames the router refused so far (a durable source's): delivered to no one, not
    /// sent again.
    #[getter]
    fn refused(&self) -> u64 {
        self.refusals.count()
    }

    /// Times the router answered a durable source's frame `no_subscriber` (nobody took it)
    /// or `not_stored` (JetStream did not store it) so far: each time the frame was kept and
    /// written again after a backoff.
    #[getter]
    fn retried(&self) -> u64 {
        self.refusals.retried()
    }

    /// The first refused frames (up to 1,024), each `(tag, yomo-tid, reason)` with the
    /// reason's stable name (`too_long`, `hop_limit`, `loop`).
    #[getter]
    fn refusals(&self) -> Vec<(u32, String, &'static str)> {
        self.refusals
            .list()
            .into_iter()
            .map(|r| (r.tag, r.tid, r.reason.kind()))
            .collect()
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

/// `timeout` seconds as a duration (negative or not a number: zero; at most a day).
fn seconds(timeout: f64) -> Duration {
    if timeout.is_nan() {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(timeout.clamp(0.0, 86_400.0))
}
