//! Y3 frames over TCP (optionally TLS) and QUIC: one sans-IO frame codec, thin IO adapters,
//! and the client SDK.
//!
//! - [`frame`]: YoMo v1.22's frames (handshake, handshake ack, rejected, goaway, connect
//!   to, data), each one top-level Y3 packet, and their byte layout, plus y3's extension
//!   fields. [`metadata`]: the msgpack string map a data frame carries. Pure: no IO, no
//!   clock.
//! - [`FrameCodec`]: tokio-util `Decoder`/`Encoder` over [`frame`], shared by every
//!   adapter. It decodes every complete frame in whatever the socket returned and checks
//!   declared lengths against `max_frame_len` before buffering anything; a longer frame
//!   is skipped as it streams past and noted ([`Skipped`]), the next one read normally.
//! - [`tcp`] (feature `tcp`) and [`quic`] (feature `quic`): adapters that produce a
//!   [`Connection`], a framed reader and writer. [`tls`] holds the certificate handling
//!   both share (self-signed development certificates, pinning).
//! - [`sdk`]: [`Source`](sdk::Source), [`StreamFunction`](sdk::StreamFunction) and
//!   [`Sink`](sdk::Sink), with reconnection and typed errors.
//!
//! This crate does not route; `y3-router` does. The wire format of frames is specified in
//! `spec/frames.md`.
//!
//! # Examples
//!
//! ```
//! use y3_transport::frame::{Data, Frame};
//! use y3_transport::{Connection, FrameCodec};
//! use futures_util::{SinkExt, StreamExt};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let (mut a, mut b) = Connection::pair(FrameCodec::default(), 4096);
//! a.writer.send(Frame::Data(Data::new(0x10, &b"hi"[..]))).await?;
//! let Some(Ok(Frame::Data(d))) = b.reader.next().await else { panic!() };
//! assert_eq!((d.tag, &d.payload[..]), (0x10, &b"hi"[..]));
//! # Ok::<(), y3_transport::FrameError>(())
//! # }).unwrap();
//! ```
#![warn(missing_docs)]
#![deny(unsafe_code)] // allowed in tcp_acked.rs only

pub mod codec;
mod error;
pub mod frame;
pub mod holding;
pub mod metadata;
mod plain_write;
#[cfg(feature = "quic")]
pub mod quic;
#[cfg(feature = "quic")]
mod quic_peers;
mod retry;
pub mod sdk;
mod stream;
#[cfg(feature = "tcp")]
pub mod tcp;
#[cfg(feature = "tcp")]
pub mod tcp_acked;
pub mod tls;
mod yielding;

pub use codec::{FrameCodec, Skipped, DEFAULT_MAX_FRAME_LEN};
pub use error::TransportError;
pub use frame::FrameError;
pub use frame::{ClientType, Data, Frame, Goaway, GoawayCode, RefusedReason, Stored};
pub use metadata::Metadata;
pub use plain_write::PlainWrite;
pub use stream::{
    feed_ref, mid_frame, next_buffered, next_metered, next_or_skipped, partial_len, BoxRead,
    BoxWrite, Connection, FrameReader, FrameWriter, Guard, Next, TransportKind, WriteHalf,
    READ_BUFFER, WRITE_BUFFER,
};
