//! The chaos: a stream function killed and restarted, garbage and partial frames, and
//! storms of short-lived clients.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::{ClientType, Data, Frame, Handshake};
use y3_transport::sdk::{ClientOptions, Source, StreamFunction};

use crate::attacks::drain_to_close;

/// Counts of what the chaos did and how the router took it.
#[derive(Debug, Default, Serialize)]
pub struct ChaosCounts {
    /// Relay function processes killed mid-stream.
    pub functions_killed: AtomicU64,
    /// Frames the relay function turned into outputs.
    pub relayed: AtomicU64,
    /// Garbage connections the router closed.
    pub garbage_closed: AtomicU64,
    /// Garbage connections still open after 10 s (should be none). Garbage that happens to
    /// start like a handshake header waits for the rest until the router's handshake
    /// timeout (5 s by default) cuts it.
    pub garbage_left_open: AtomicU64,
    /// Garbage connections that failed on the soak's side (no connection, or an error
    /// other than the router's close): neither closed nor left open.
    pub garbage_failed: AtomicU64,
    /// Partial frames cut by the router.
    pub partial_cut: AtomicU64,
    /// How long each partial frame was held before the cut, in ms.
    pub partial_held_ms: Mutex<Vec<u64>>,
    /// Storm clients that connected, sent and closed.
    pub storm_clients: AtomicU64,
    /// Storm clients that failed.
    pub storm_failures: AtomicU64,
}

/// A stream function relaying `from` to `to`, killed (its task aborted: the connection
/// drops without a goodbye) every `every` and started again 300 ms later.
pub async fn killed_function(
    options: ClientOptions,
    from: u32,
    to: u32,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<ChaosCounts>,
) {
    while !stop.is_cancelled() {
        let c = counts.clone();
        let task = tokio::spawn(
            StreamFunction::new(options.clone(), &[from]).run(move |data| {
                c.relayed.fetch_add(1, Ordering::Relaxed);
                async move { Some((to, data.payload)) }
            }),
        );
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
        task.abort();
        let _ = task.await;
        if stop.is_cancelled() {
            break;
        }
        counts.functions_killed.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Every `every`, a connection that sends random bytes; the router must close it (at once,
/// or at its handshake timeout when the bytes begin like a handshake).
pub async fn garbage(
    addr: SocketAddr,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<ChaosCounts>,
) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    while !stop.is_cancelled() {
        let mut junk = [0u8; 48];
        for b in &mut junk {
            // xorshift64: reproducible junk, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *b = state as u8;
        }
        let counts = counts.clone();
        tokio::spawn(async move {
            let closed = async {
                let mut conn = TcpStream::connect(addr).await.ok()?;
                conn.write_all(&junk).await.ok()?;
                drain_to_close(&mut conn).await
            };
            match tokio::time::timeout(Duration::from_secs(10), closed).await {
                Ok(Some(())) => counts.garbage_closed.fetch_add(1, Ordering::Relaxed),
                Ok(None) => counts.garbage_failed.fetch_add(1, Ordering::Relaxed),
                Err(_) => counts.garbage_left_open.fetch_add(1, Ordering::Relaxed),
            };
        });
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// Every `every`, a source's handshake, the first 100 bytes of a 4 KiB data frame, and
/// then silence; the router must cut it at its frame-stall timeout.
pub async fn partial_frames(
    addr: SocketAddr,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<ChaosCounts>,
) {
    let mut head = BytesMut::new();
    Frame::Handshake(Box::new(Handshake::new(
        ClientType::Source,
        "partial",
        "partial-0",
    )))
    .encode(&mut head, usize::MAX)
    .expect("a handshake encodes");
    let mut frame = BytesMut::new();
    Frame::Data(Data::new(0x50, vec![7u8; 4096]))
        .encode(&mut frame, usize::MAX)
        .expect("a 4 KiB frame encodes");
    head.extend_from_slice(&frame[..100]);
    let head = head.freeze();
    while !stop.is_cancelled() {
        let (counts, head) = (counts.clone(), head.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let cut = async {
                let mut conn = TcpStream::connect(addr).await.ok()?;
                conn.write_all(&head).await.ok()?;
                drain_to_close(&mut conn).await
            };
            if let Ok(Some(())) = tokio::time::timeout(Duration::from_secs(10), cut).await {
                counts.partial_cut.fetch_add(1, Ordering::Relaxed);
                let ms = started.elapsed().as_millis() as u64;
                let mut held = counts
                    .partial_held_ms
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                held.push(ms);
            }
        });
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// Every `every`, `clients` sources connect at once, send one frame on `tag` (which
/// nobody observes) and close.
pub async fn storms(
    options: ClientOptions,
    clients: usize,
    tag: u32,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<ChaosCounts>,
) {
    while !stop.is_cancelled() {
        let mut storm = tokio::task::JoinSet::new();
        for i in 0..clients {
            let options = options.clone().name(format!("storm-{i}"));
            storm.spawn(async move {
                let mut s = Source::connect(options).await?;
                s.send(tag, &b"storm"[..]).await?;
                s.close().await
            });
        }
        while let Some(done) = storm.join_next().await {
            match done {
                Ok(Ok(())) => counts.storm_clients.fetch_add(1, Ordering::Relaxed),
                _ => counts.storm_failures.fetch_add(1, Ordering::Relaxed),
            };
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
}
