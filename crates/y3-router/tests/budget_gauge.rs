//! The router's memory gauge against the memory it holds (issue 26): 50 subscribers that
//! never read, all on one tag, hold the same frames, charged once. The test reads the
//! process's resident memory growth, so it runs in a process of its own: after another
//! test, memory that test freed and the allocator kept is reused unseen by RSS (the gauge
//! read 57.8 MB against 33 MB of growth after `budget.rs`'s other tests; 57.7 MB against
//! 51.7 MB alone).

mod common;

use std::time::Duration;

use futures_util::SinkExt;
use y3_transport::frame::{ClientType, Frame};

use common::*;

const KIB: usize = 1024;

/// The gauge counts the bytes held: 50 subscribers on one tag that never read hold the
/// same frames, charged once (the probe before: gauge 537 MB, RSS 86 MB). The gauge stays
/// within 1.5× of the process's resident memory growth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gauge_counts_a_shared_frame_once() {
    let router = router(|_| {}).await;
    let tag = 0xa0;
    let mut stuck = Vec::new();
    for _ in 0..50 {
        stuck.push(stuck_over_tcp(&router, tag).await);
    }
    eventually("all admitted", || router.stats().connections == 50).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    let before = rss();
    // 32 MB per subscriber: the kernel's socket buffers take a few MB of each, the router
    // holds the rest.
    const FRAMES: u64 = 8_000;
    const PAYLOAD: usize = 4 * KIB;
    let sender = tokio::spawn(async move {
        for i in 0..FRAMES {
            // A payload of its own per frame, as a real client's frames are.
            let frame = Frame::Data(numbered(tag, i, bytes::Bytes::from(vec![i as u8; PAYLOAD])));
            source.writer.feed(frame).await.unwrap();
            if i % 64 == 63 {
                source.writer.flush().await.unwrap();
            }
        }
        source.writer.flush().await.unwrap();
        source
    });
    let source = within("the frames sent", sender).await.unwrap();
    eventually("every frame routed", || router.stats().frames_in == FRAMES).await;
    // Let the writers push what the sockets take.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = router.stats();
    let grown = rss().saturating_sub(before);
    let gauge = stats.queued_bytes as usize;
    let naive = stats.queued as usize * (PAYLOAD + 100);
    eprintln!(
        "50 non-readers of one tag, {FRAMES} frames of {PAYLOAD} B: {} queued; gauge {gauge} B, \
         RSS grew {grown} B (ratio {:.2}); charging each queue its own copy would read about \
         {naive} B",
        stats.queued,
        gauge as f64 / grown.max(1) as f64
    );
    assert_eq!(stats.total_drops(), 0, "{stats:?}");
    assert!(stats.queued > 25 * FRAMES, "queued: {}", stats.queued);
    assert!(
        gauge * 2 <= grown * 3 && grown * 2 <= gauge * 3,
        "gauge {gauge} B within 1.5x of RSS growth {grown} B"
    );
    drop(stuck);
    drop(source);
    router.shutdown().await;
}
