//! Helpers shared by the router tests: raw framed clients and bounded waits.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use y3_router::{Router, RouterConfig, RouterHandle};
use y3_transport::frame::{Data, Frame, Handshake, Role, VERSION};
use y3_transport::sdk::{Backoff, ClientOptions, Transport};
use y3_transport::{Connection, FrameError};

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `fut` or panics after [`WAIT`] naming `what`.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `cond` every 5 ms until it holds, for at most [`WAIT`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// A router on ephemeral loopback ports, metrics off, with `tweak` applied.
pub async fn router(tweak: impl FnOnce(&mut RouterConfig)) -> RouterHandle {
    let mut config = RouterConfig::ephemeral();
    config.shutdown.drain_timeout_ms = 3000;
    config.shutdown.quiet_ms = 50;
    tweak(&mut config);
    Router::start(config).await.expect("router starts")
}

/// SDK options for `router` over `transport`, with a short backoff.
pub fn options(router: &RouterHandle, transport: Transport, name: &str) -> ClientOptions {
    let addr = match transport {
        Transport::Quic => router.quic_addr(),
        _ => router.tcp_addr(),
    }
    .expect("listener on");
    ClientOptions::new(addr)
        .transport(transport)
        .trust(router.trust())
        .name(name)
        .backoff(Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            attempts: 3,
        })
}

pub fn hello(role: Role, observed: &[u32], token: &str) -> Frame {
    Frame::Handshake(Handshake {
        version: VERSION,
        role,
        name: format!("raw-{}", role.name()),
        token: token.into(),
        observed: observed.to_vec(),
    })
}

/// A raw framed client: sends the handshake, expects `accepted`.
pub async fn admit(mut conn: Connection, role: Role, observed: &[u32]) -> Connection {
    conn.writer.send(hello(role, observed, "")).await.unwrap();
    match next(&mut conn).await {
        Some(Ok(Frame::Accepted(_))) => conn,
        other => panic!("expected accepted, got {other:?}"),
    }
}

/// The next frame, bounded by [`WAIT`].
pub async fn next(conn: &mut Connection) -> Option<Result<Frame, FrameError>> {
    within("a frame", conn.reader.next()).await
}

/// The next data frame (skipping control frames).
pub async fn next_data(conn: &mut Connection) -> Data {
    loop {
        match next(conn).await {
            Some(Ok(Frame::Data(d))) => return d,
            Some(Ok(_)) => continue,
            other => panic!("expected data, got {other:?}"),
        }
    }
}

/// Sends data frames `ids` on `tag` with `payload`, one flush at the end.
pub async fn send_all(conn: &mut Connection, tag: u32, ids: std::ops::Range<u64>, payload: &[u8]) {
    let payload = bytes::Bytes::copy_from_slice(payload);
    for id in ids {
        conn.writer
            .feed(Frame::Data(Data::new(tag, id, payload.clone())))
            .await
            .unwrap();
    }
    conn.writer.flush().await.unwrap();
}
