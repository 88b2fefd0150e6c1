//! [`Writer`]: how a [`StreamFunction`](super::StreamFunction)'s handler writes its outputs
//! for one input, any number of them, as YoMo's `ctx.Write` / `ctx.WriteWithTarget` do.
//!
//! Every output carries the input's metadata as YoMo v1.22's serverless context builds it
//! (`core/serverless/context.go`, `sfn.go`): the input's pairs (`yomo-tid`,
//! `yomo-source-id`, custom keys) without `yomo-target`; a targeted write adds
//! `yomo-target`. The y3 hop count (field `30`) is the input's plus one.
//!
//! ```text
//!  input   {custom: x, yomo-source-id: SRC, yomo-target: fn-a, yomo-tid: TID1}  hops h
//!  write(0x34, p)                   ─▶ 0x34 {custom: x, yomo-source-id: SRC, yomo-tid: TID1}  h+1
//!  write_with_target(0x35, p, "b")  ─▶ 0x35 {custom: x, yomo-source-id: SRC, yomo-tid: TID1,
//!                                            yomo-target: b}                                    h+1
//! ```
//!
//! One deliberate difference: YoMo's `WriteWithTarget` sets the target in the context's
//! shared map, so the handler's later plain `Write`s carry it too; here each write carries
//! only its own target.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::sync::Mutex;

use super::outbox::Outbox;
use super::window::Window;
use crate::frame::{Data, Frame};
use crate::metadata::{self, Metadata};
use crate::TransportError;

/// Writes a stream function's outputs for one input.
///
/// Writes are backpressured: each waits for room in the connection's bounded send queue
/// ([`ClientOptions::send_queue`](super::ClientOptions::send_queue)), never buffering
/// without bound. `Ok` means the output is queued on the connection (a durable function:
/// kept until the router stored it); a write after the connection is gone, or after the
/// function stopped, is an error ([`TransportError::Closed`]) and nothing is written.
///
/// A writer may be cloned and moved into tasks that outlive the handler; its writes then
/// go on the connection its input came on (a durable function's: on the current one).
#[derive(Debug, Clone)]
pub struct Writer {
    /// The input's metadata.
    input: Metadata,
    /// The input's metadata without `yomo-target`, built at the first write (a function
    /// that writes nothing for most inputs pays nothing for it).
    metadata: OnceLock<Metadata>,
    /// The outputs' hop count: the input's plus one.
    hops: u32,
    to: Outputs,
}

/// Where a [`Writer`]'s outputs go.
#[derive(Debug, Clone)]
pub(crate) enum Outputs {
    /// A plain function's: the send queue of the connection the input came on.
    Plain(Outbox),
    /// A durable function's: its window and current connection, shared with its run loop.
    Durable(Arc<Mutex<Durable>>),
}

/// A durable function's outputs: kept until stored, written on the current connection.
#[derive(Debug)]
pub(crate) struct Durable {
    /// Outputs kept until the router stored them.
    pub window: Window,
    /// The current connection's send queue; `None` once the function stopped.
    pub tx: Option<Outbox>,
    /// Most outputs kept unwritten while no connection is up (the send queue's size):
    /// past it a write is refused rather than buffered without bound.
    pub max_unwritten: usize,
}

impl Writer {
    /// A writer of the outputs for `input`.
    pub(crate) fn new(input: &Data, to: Outputs) -> Writer {
        Writer {
            input: input.metadata.clone(),
            metadata: OnceLock::new(),
            hops: input.hops.saturating_add(1),
            to,
        }
    }

    /// The outputs' metadata: the input's without `yomo-target`.
    fn metadata(&self) -> &Metadata {
        // A metadata map the router let through is well formed; should it not be, the
        // outputs go without it rather than not at all.
        self.metadata
            .get_or_init(|| self.input.without(metadata::TARGET).unwrap_or_default())
    }

    /// Writes `payload` under `tag` with the input's metadata (YoMo's `ctx.Write`).
    ///
    /// # Errors
    /// [`TransportError::Closed`] when the connection is gone or the function stopped.
    pub async fn write(&self, tag: u32, payload: impl Into<Bytes>) -> Result<(), TransportError> {
        self.send(self.output(tag, payload.into(), self.metadata().clone()))
            .await
    }

    /// Writes `payload` under `tag` with the input's metadata and `yomo-target` = `target`
    /// (YoMo's `ctx.WriteWithTarget`): only stream functions whose wanted target is
    /// `target` receive it. An empty `target` writes as [`write`](Writer::write) does.
    ///
    /// # Errors
    /// As [`write`](Writer::write).
    pub async fn write_with_target(
        &self,
        tag: u32,
        payload: impl Into<Bytes>,
        target: &str,
    ) -> Result<(), TransportError> {
        let metadata = self
            .metadata()
            .with(metadata::TARGET, target)
            .unwrap_or_else(|_| Metadata::from_pairs([(metadata::TARGET, target)]));
        self.send(self.output(tag, payload.into(), metadata)).await
    }

    fn output(&self, tag: u32, payload: Bytes, metadata: Metadata) -> Data {
        let mut out = Data::new(tag, payload).with_metadata(metadata);
        out.hops = self.hops;
        out
    }

    async fn send(&self, out: Data) -> Result<(), TransportError> {
        match &self.to {
            Outputs::Plain(tx) => tx.send(&Frame::Data(out)).await,
            Outputs::Durable(durable) => durable.lock().await.keep(out).await,
        }
    }
}

impl Durable {
    /// Keeps `out` until stored and writes what the current connection has not carried.
    /// With no connection up, keeps it for the next one, up to
    /// [`max_unwritten`](Durable::max_unwritten); refused once the function stopped.
    async fn keep(&mut self, out: Data) -> Result<(), TransportError> {
        let Some(tx) = self.tx.clone() else {
            return Err(TransportError::Closed);
        };
        if tx.is_closed() && self.window.unwritten() >= self.max_unwritten {
            return Err(TransportError::Closed);
        }
        self.window.keep(out);
        self.write_pending(&tx).await;
        Ok(())
    }

    /// Writes the outputs `tx`'s connection has not carried yet; stops at the first that
    /// cannot be queued (the connection ended: the window writes them after the reconnect).
    pub async fn write_pending(&mut self, tx: &Outbox) {
        if tx.is_closed() {
            return;
        }
        while let Some(data) = self.window.next_unwritten() {
            if tx.send(&Frame::Data(data)).await.is_err() {
                tracing::debug!("durable function's connection ended while writing");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    /// YoMo v1.22's SFN, given this input, wrote `wire-05-data-from-sfn.hex` for
    /// `ctx.Write(0x34, "re:ping")`.
    fn yomo_input() -> Data {
        let md = Metadata::from_pairs([
            ("custom", "x"),
            ("yomo-source-id", "SRC"),
            ("yomo-target", "probe-sfn"),
            ("yomo-tid", "TID1"),
        ]);
        let mut input = Data::new(0x33, &b"ping"[..]).with_metadata(md);
        input.hops = 2;
        input
    }

    /// The one frame queued (the writer task's part, taken by hand).
    async fn written(outbox: &Outbox) -> Data {
        match &outbox.take_frames()[..] {
            [Frame::Data(data)] => data.clone(),
            other => panic!("not one data frame: {other:?}"),
        }
    }

    fn outbox(frames: usize) -> Outbox {
        Outbox::new(frames, 1 << 20)
    }

    fn encoded(data: &Data) -> String {
        let mut buf = BytesMut::new();
        Frame::Data(data.clone()).encode(&mut buf, 1 << 20).unwrap();
        hex::encode(&buf)
    }

    #[tokio::test]
    async fn writes_carry_yomo_s_metadata_byte_for_byte_and_one_more_hop() {
        let rx = outbox(4);
        let writer = Writer::new(&yomo_input(), Outputs::Plain(rx.clone()));
        writer.write(0x34, &b"re:ping"[..]).await.unwrap();
        let mut out = written(&rx).await;
        assert_eq!(out.hops, 3);
        // YoMo has no hop field: without it, the frame is YoMo's, byte for byte (the
        // vector's keys happen to be in this order; YoMo's order is random).
        out.hops = 0;
        let wire = include_str!("../../../../testdata/yomo-v1.22/wire-05-data-from-sfn.hex");
        assert_eq!(encoded(&out), wire.trim());

        writer
            .write_with_target(0x35, &b"t"[..], "fn-b")
            .await
            .unwrap();
        let out = written(&rx).await;
        let md = out.metadata.to_map().unwrap();
        let want = [
            ("custom", "x"),
            ("yomo-source-id", "SRC"),
            ("yomo-tid", "TID1"),
            ("yomo-target", "fn-b"),
        ];
        let want: std::collections::BTreeMap<String, String> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!((out.tag, md, out.hops), (0x35, want, 3));

        // A plain write after a targeted one carries no target (YoMo's would).
        writer.write(0x34, &b"again"[..]).await.unwrap();
        let out = written(&rx).await;
        assert_eq!(out.metadata.get(metadata::TARGET).unwrap(), None);
        // An empty target is a plain write.
        writer.write_with_target(0x34, &b"e"[..], "").await.unwrap();
        let out = written(&rx).await;
        assert_eq!(out.metadata.get(metadata::TARGET).unwrap(), None);
    }

    #[tokio::test]
    async fn a_write_after_the_connection_is_gone_is_an_error() {
        let rx = outbox(1);
        let writer = Writer::new(&yomo_input(), Outputs::Plain(rx.clone()));
        rx.end();
        let err = writer.write(0x34, &b"x"[..]).await.unwrap_err();
        assert!(matches!(err, TransportError::Closed), "{err:?}");
    }

    #[tokio::test]
    async fn a_full_queue_holds_the_writer_back() {
        let rx = outbox(1);
        let writer = Writer::new(&yomo_input(), Outputs::Plain(rx.clone()));
        writer.write(0x34, &b"1"[..]).await.unwrap();
        let second = writer.write(0x34, &b"2"[..]);
        tokio::pin!(second);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), &mut second);
        assert!(waited.await.is_err(), "a write went past a full queue");
        written(&rx).await;
        second.await.unwrap();
        assert_eq!(&written(&rx).await.payload[..], b"2");
    }

    #[tokio::test]
    async fn a_durable_writer_keeps_a_bounded_number_while_disconnected_then_refuses() {
        let tx = outbox(8);
        tx.end();
        let durable = Arc::new(Mutex::new(Durable {
            window: Window::default(),
            tx: Some(tx),
            max_unwritten: 2,
        }));
        let writer = Writer::new(&yomo_input(), Outputs::Durable(durable.clone()));
        writer.write(0x34, &b"1"[..]).await.unwrap();
        writer.write(0x34, &b"2"[..]).await.unwrap();
        assert!(writer.write(0x34, &b"3"[..]).await.is_err());
        // Reconnected: both kept ones go out on the new connection, in order.
        let tx = outbox(8);
        let rx = tx.clone();
        let mut d = durable.lock().await;
        d.window.reconnected();
        d.tx = Some(tx.clone());
        d.write_pending(&tx).await;
        drop(d);
        let payloads: Vec<Bytes> = rx
            .take_frames()
            .into_iter()
            .map(|f| match f {
                Frame::Data(d) => d.payload,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(payloads, [&b"1"[..], &b"2"[..]]);
        writer.write(0x34, &b"4"[..]).await.unwrap();
        assert_eq!(&written(&rx).await.payload[..], b"4");
        assert_eq!(durable.lock().await.window.len(), 3);
        // Stopped: refused.
        durable.lock().await.tx = None;
        assert!(writer.write(0x34, &b"5"[..]).await.is_err());
    }
}
