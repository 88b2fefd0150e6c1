//! The hostile clients of issue 26, run beside the healthy flows: a metadata bomb, budget
//! hogs and unauthenticated partial handshakes. For each, the router may refuse the
//! client with a counted reason (the outcome the router's limits aim at) or take it and
//! stay healthy; either way the healthy flows must not notice (`report.rs`). What each
//! attack did is counted in [`AttackCounts`], so the report can check it happened.
//!
//! ```text
//!  metadata bomb   raw TCP: source handshake with a wanted target (the router rewrites its
//!                  frames' metadata) ─▶ one data frame whose metadata has `bomb_keys` keys
//!  budget hogs     `hogs` raw TCP stream functions observing HOG_TAG that never read,
//!                  fed 1 KiB frames by a source: their queues fill until the router
//!                  evicts them or drops for its budget (both counted by the router)
//!  partial hellos  `count` raw TCP connections, no token, each the first 1 MiB of a
//!                  handshake frame (a 1 MiB name) less 64 bytes, then silence
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use y3_transport::frame::{ClientType, Data, Frame, Handshake};
use y3_transport::metadata::Metadata;

/// The tag the budget hogs observe (their source is a chaos flow).
pub const HOG_TAG: u32 = 0x61;
/// The tag the metadata bomb is sent on (nobody observes it but the hogs' neighbours).
pub const BOMB_TAG: u32 = 0x60;
/// Bytes of a partial handshake sent before the silence (its frame declares 1 MiB).
const PARTIAL_HELLO: usize = 1 << 20;
/// How long an attacking connection may stay open before the soak gives up on it.
const GIVE_UP: Duration = Duration::from_secs(15);

/// What the attacks did.
#[derive(Debug, Default, Serialize)]
pub struct AttackCounts {
    /// Metadata bombs written whole to the router.
    pub bombs_sent: AtomicU64,
    /// Metadata bomb connections the router closed within 15 s (refused, or a restart).
    pub bombs_closed: AtomicU64,
    /// Keys in each bomb's metadata.
    pub bomb_keys: AtomicU64,
    /// Hog subscribers admitted (handshake acknowledged).
    pub hogs_admitted: AtomicU64,
    /// Partial 1 MiB handshakes written (up to the silence).
    pub partial_hellos_sent: AtomicU64,
    /// Partial handshakes the router cut (closed) within [`GIVE_UP`].
    pub partial_hellos_cut: AtomicU64,
    /// How long each cut partial handshake was held, in ms.
    pub partial_hello_held_ms: Mutex<Vec<u64>>,
}

/// Every `every`, a metadata bomb: a source whose handshake wants a target (so the router
/// rewrites the metadata of its frames) sends one data frame with `keys` metadata keys.
pub async fn metadata_bombs(
    addr: SocketAddr,
    keys: usize,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<AttackCounts>,
) {
    counts.bomb_keys.store(keys as u64, Ordering::Relaxed);
    let metadata = bomb_metadata(keys);
    let mut wire = BytesMut::new();
    let mut hello = Handshake::new(ClientType::Source, "bomb", "bomb-0");
    hello.wanted_target = "bomb-target".to_owned();
    Frame::Handshake(Box::new(hello))
        .encode(&mut wire, usize::MAX)
        .expect("a handshake encodes");
    Frame::Data(Data::new(BOMB_TAG, &b"bomb"[..]).with_metadata(metadata))
        .encode(&mut wire, usize::MAX)
        .expect("a bomb encodes");
    let wire = wire.freeze();
    while !stop.is_cancelled() {
        let (counts, wire) = (counts.clone(), wire.clone());
        tokio::spawn(async move {
            let Ok(mut conn) = TcpStream::connect(addr).await else {
                return;
            };
            if conn.write_all(&wire).await.is_err() {
                return;
            }
            counts.bombs_sent.fetch_add(1, Ordering::Relaxed);
            // Refused: the router closes; taken: it stays open until the soak lets go.
            if let Ok(Some(())) = tokio::time::timeout(GIVE_UP, drain_to_close(&mut conn)).await {
                counts.bombs_closed.fetch_add(1, Ordering::Relaxed);
            }
        });
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// A msgpack map of `keys` distinct string keys (`k0`, `k1`, ...), each with value `v`,
/// written directly (linear: the SDK's `Metadata::from_pairs` checks each key against
/// the others, quadratic for a map this size).
///
/// ```text
/// df | count u32 BE | (a0+len | "k<i>" | a1 | "v") × count
/// ```
fn bomb_metadata(keys: usize) -> Metadata {
    let mut map = Vec::with_capacity(5 + keys * 10);
    map.push(0xdf);
    map.extend_from_slice(&(keys as u32).to_be_bytes());
    for i in 0..keys {
        let key = format!("k{i}");
        // fixstr: keys up to 31 bytes (`k` and at most 20 digits).
        map.push(0xa0 | key.len() as u8);
        map.extend_from_slice(key.as_bytes());
        map.extend_from_slice(&[0xa1, b'v']);
    }
    Metadata::from(bytes::Bytes::from(map))
}

/// `hogs` stream functions observing [`HOG_TAG`] that never read a byte after their
/// handshake (with 4 KiB receive buffers, so their backlog piles up in the router), held
/// until `stop`. The router's answer (evictions, budget drops) is in its counters.
pub async fn budget_hogs(
    addr: SocketAddr,
    hogs: usize,
    stop: CancellationToken,
    counts: Arc<AttackCounts>,
) {
    let mut hello = Handshake::new(ClientType::StreamFunction, "hog", "hog-0");
    hello.observed = vec![HOG_TAG];
    let mut wire = BytesMut::new();
    Frame::Handshake(Box::new(hello))
        .encode(&mut wire, usize::MAX)
        .expect("a handshake encodes");
    let wire = wire.freeze();
    let mut held = Vec::new();
    for _ in 0..hogs {
        let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
            continue;
        };
        let _ = socket.set_recv_buffer_size(4096);
        let Ok(mut conn) = socket.connect(addr).await else {
            continue;
        };
        if conn.write_all(&wire).await.is_ok() {
            counts.hogs_admitted.fetch_add(1, Ordering::Relaxed);
            held.push(conn);
        }
    }
    stop.cancelled().await;
    drop(held);
}

/// Every `every`, `count` unauthenticated connections each write the first 1 MiB of a
/// handshake frame (less 64 bytes), then go silent; the router must cut or refuse them.
pub async fn partial_hellos(
    addr: SocketAddr,
    count: usize,
    every: Duration,
    stop: CancellationToken,
    counts: Arc<AttackCounts>,
) {
    let mut wire = BytesMut::new();
    let hello = Handshake::new(
        ClientType::Source,
        "x".repeat(PARTIAL_HELLO),
        "partial-hello",
    );
    Frame::Handshake(Box::new(hello))
        .encode(&mut wire, usize::MAX)
        .expect("a handshake encodes");
    let head = wire.freeze().slice(..PARTIAL_HELLO - 64);
    while !stop.is_cancelled() {
        for _ in 0..count {
            let (counts, head) = (counts.clone(), head.clone());
            tokio::spawn(async move {
                let started = Instant::now();
                let Ok(mut conn) = TcpStream::connect(addr).await else {
                    return;
                };
                // A router that refuses early closes while this writes: cut too.
                let wrote = conn.write_all(&head).await.is_ok();
                if wrote {
                    counts.partial_hellos_sent.fetch_add(1, Ordering::Relaxed);
                }
                let cut = if wrote {
                    matches!(
                        tokio::time::timeout(GIVE_UP, drain_to_close(&mut conn)).await,
                        Ok(Some(()))
                    )
                } else {
                    counts.partial_hellos_sent.fetch_add(1, Ordering::Relaxed);
                    true
                };
                if cut {
                    counts.partial_hellos_cut.fetch_add(1, Ordering::Relaxed);
                    let ms = started.elapsed().as_millis() as u64;
                    counts
                        .partial_hello_held_ms
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(ms);
                }
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// Reads until the peer closes (`Some`), or fails on an error other than a reset.
pub async fn drain_to_close(conn: &mut TcpStream) -> Option<()> {
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf).await {
            Ok(0) => return Some(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(()),
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bomb_is_a_valid_map_of_distinct_keys() {
        let m = bomb_metadata(1000);
        assert_eq!(m.get("k0").unwrap(), Some("v"));
        assert_eq!(m.get("k999").unwrap(), Some("v"));
        assert_eq!(m.get("k1000").unwrap(), None);
    }
}
