//! The y3 router: connects sources, stream functions and sinks, routing data frames by tag.
//! It is a drop-in zipper for YoMo v1.22 applications: one wire protocol, YoMo's
//! (`spec/frames.md`), over QUIC (ALPN `yomo`) and, for y3's own clients, TCP and TLS.
//!
//! ```text
//!  source ─0x10─▶ ┌────────────────────────── router ───────────────────────────┐
//!                 │ session (handshake, auth) ─▶ table: tag → outboxes          │
//!                 │ per-subscriber bounded queue, policy block | drop_oldest   │─0x10─▶ function
//!  sink ◀─0x11─── │ writer task per connection: batches of frames per flush    │◀─0x11─ function
//!                 └──────────── metrics: GET /metrics (Prometheus) ─────────────┘
//! ```
//!
//! The pure parts have no IO and no clock: [`queue`] (bounded queue and policy), [`table`]
//! (tag → the stream functions observing it, YoMo's rules), [`session`] (the per-connection
//! protocol state machine, quinn-style `handle_*(now, ..)` in, events out: handshake rules,
//! metadata rules, reserved tags, the hop limit, each token's permissions) and [`throttle`]
//! (failed handshakes per address); below them [`config`] is plain data, and
//! [`federation`] reaches the router through one interface (`federation/local.rs`): the
//! rules are `CONTRIBUTING.md`'s "What may import what", checked by `tests/imports.rs`.
//! The server ([`Router::start`]) is a thin
//! tokio loop around them: one accept loop for TCP (optionally TLS) and QUIC, a reader and a
//! writer task per connection, routing through a published table snapshot that readers do
//! not lock (`routing.rs`), graceful shutdown that drains in-flight frames, and Prometheus
//! [`metrics`].
//!
//! With `[federation]`, routers share frames over NATS ([`federation`], `spec/federation.md`):
//! local frames of tags observed elsewhere are published, frames from NATS are routed locally
//! and never published again, durable tags go through JetStream. Clients that ask for them
//! get stored acknowledgements (`acks.rs`, `spec/frames.md`).
//!
//! A data frame's path, top to bottom: `connection.rs` reads it (one header parse in the
//! codec) ─▶ [`session`] checks it ─▶ `routing.rs` picks the outboxes ─▶ `outbox.rs`
//! queues it ─▶ `connection.rs`'s writer writes it, as the bytes it arrived as when nothing
//! in it changed.
//!
//! Guarantees:
//! - Under [`Policy::Block`] a frame accepted from a source is delivered to every live
//!   subscriber of its tag: a subscriber's queue buffers up to `queue.max_bytes` (64 MiB)
//!   without holding anybody back, and past that holds the source back while the
//!   subscriber takes frames. One that takes nothing for `queue.block_timeout_ms` stops
//!   holding sources (its frames queue on, up to twice the limits); one that takes nothing
//!   for `queue.write_deadline_ms` (10 s), or falls twice the limits behind meanwhile, is
//!   disconnected as a slow consumer (counted, logged), so one stuck client cannot stall
//!   the rest.
//! - Under [`Policy::DropOldest`] sources never wait; every dropped frame is counted.
//! - Memory is bounded: frames by `limits.max_frame_len` (checked from the header; a longer
//!   frame is skipped as it streams past, never buffered, counted, and the connection goes
//!   on), one partial frame per connection (so at most `limits.max_connections` times
//!   `max_frame_len` being read), queues by twice `queue.capacity` and `queue.max_bytes`
//!   each and by `limits.max_queued_bytes` together.
//! - A malformed frame, a wrong token or a silent client ends that connection with a
//!   reason (a rejected or goaway frame, and over QUIC a close code that tells YoMo clients
//!   whether to come back) and a counted metric; every other connection goes on.
//!
//! # Examples
//!
//! ```
//! use y3_router::{Router, RouterConfig};
//! use y3_transport::sdk::{ClientOptions, Sink, Source};
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let router = Router::start(RouterConfig::ephemeral()).await?;
//! let options = ClientOptions::new(router.tcp_addr().unwrap());
//! let mut sink = Sink::connect(options.clone(), &[0x10]).await?;
//! let mut source = Source::connect(options).await?;
//! source.send(0x10, &b"hello"[..]).await?;
//! source.flush().await?;
//! assert_eq!(&sink.recv().await.unwrap()?.payload[..], b"hello");
//! source.close().await?;
//! router.shutdown().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod accept;
mod acks;
mod budget;
pub mod config;
pub mod config_reference;
mod connection;
mod cycles;
mod dashboard;
mod error;
mod federated;
pub mod federation;
pub mod filters;
mod handoff;
mod histogram;
mod ingress;
mod journeys;
#[cfg(test)]
mod ledger_props;
mod mesh;
pub mod metrics;
pub mod mqtt;
mod outbox;
mod penalty;
pub mod queue;
pub mod ready;
mod reload;
mod routing;
mod server;
pub mod session;
mod shared;
#[cfg(test)]
mod sizes;
mod spread;
pub mod state;
pub mod status;
pub mod table;
mod tcp_acked;
pub mod throttle;
mod wakes;
pub mod yomo_yaml;

pub use config::RouterConfig;
pub use error::RouterError;
pub use federation::FederationConfig;
pub use metrics::{DownstreamStats, Metrics, Stats};
pub use queue::Policy;
pub use reload::Reloaded;
pub use server::{Router, RouterHandle};
