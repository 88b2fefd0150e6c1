//! The router under hostile clients: partial frames, pinned buffers, slow consumers, loops.
//! Each attack asserts a number.

mod common;

use std::time::{Duration, Instant};

use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use y3_transport::frame::{ClientType, Frame};

use common::*;

/// A partial frame is cut at the stall timeout however it arrives: in a read of its own
/// after the handshake, and trickled a byte at a time so that the connection never looks
/// idle. Both are closed between one and one and a half stall timeouts after the first
/// bytes, as `limits.frame_stall_timeout_ms` says (the router looks again every half
/// timeout while idle), plus at most 100 ms of a loaded machine's scheduling: 1.46-1.49 s
/// measured for the 1 s timeout here.
#[tokio::test]
async fn partial_frames_are_cut_at_the_stall_timeout_however_they_arrive() {
    const STALL: Duration = Duration::from_millis(1_000);
    let router = router(|c| c.limits.frame_stall_timeout_ms = STALL.as_millis() as u64).await;
    // A data frame header declaring 1 MiB - 1 of fields (within max_frame_len).
    let header = [0xbf, 0x80, 0xbf, 0xff, 0x7f];
    for trickle in [false, true] {
        let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
            .await
            .unwrap();
        tcp.write_all(&wire(Frame::from(hello(ClientType::Source, &[]))))
            .await
            .unwrap();
        // The handshake is answered first, so the partial frame lands in a read of its own.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        tcp.write_all(&header).await.unwrap();
        let (mut rd, mut wr) = tcp.into_split();
        let writer = tokio::spawn(async move {
            while trickle && started.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if wr.write_all(&[0x00]).await.is_err() {
                    break;
                }
            }
            wr
        });
        let mut reply = Vec::new();
        within("the stall close", rd.read_to_end(&mut reply))
            .await
            .unwrap();
        let took = started.elapsed();
        writer.abort();
        eprintln!("partial frame (trickle {trickle}): cut after {took:?}");
        assert!(
            took >= STALL && took <= STALL * 3 / 2 + Duration::from_millis(100),
            "trickle {trickle}: closed after {took:?}"
        );
        assert_eq!(
            goaway_code(&frames(&reply)),
            y3_transport::GoawayCode::ProtocolError
        );
    }
    assert_eq!(protocol_errors(&router, "frame_stalled"), 2);
    ledger(&router).await;
    router.shutdown().await;
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The pinning attack: eight subscribers that never read, and a source alternating 60 KB
/// frames to a tag nobody observes with 16-byte frames to those subscribers. Each queued
/// small frame used to keep its 64 KiB read buffer alive (+435 MB for 6,800 frames); now
/// small frames are copied out, and RSS grows by at most 32 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_small_frames_do_not_pin_read_buffers() {
    const PAIRS: u64 = 6_800;
    let router = router(|c| {
        c.queue.policy = y3_router::Policy::DropOldest;
        c.queue.capacity = 8_192;
        c.queue.max_bytes = 64 << 20;
    })
    .await;
    let mut stuck = Vec::new();
    for _ in 0..8 {
        // Handshaken, then never read again.
        stuck.push(join(&router, ClientType::StreamFunction, &[0x20]).await);
    }
    let mut source = join(&router, ClientType::Source, &[]).await;
    let before = rss();
    let big = bytes::Bytes::from(vec![0x42u8; 60_000]);
    let small = bytes::Bytes::from_static(&[0x17; 16]);
    for i in 0..PAIRS {
        source
            .writer
            .feed(Frame::Data(numbered(0x30, i, big.clone())))
            .await
            .unwrap();
        source
            .writer
            .feed(Frame::Data(numbered(0x20, i, small.clone())))
            .await
            .unwrap();
        if i % 64 == 63 {
            source.writer.flush().await.unwrap();
        }
    }
    source.writer.flush().await.unwrap();
    // Every frame was read: 6,800 to nobody, 6,800 queued for (or written to) the eight.
    eventually("every frame read", || router.stats().frames_in >= 2 * PAIRS).await;
    let grown = rss().saturating_sub(before);
    eprintln!("pinning attack: RSS grew by {:.1} MB", grown as f64 / 1e6);
    assert!(grown < 32 << 20, "RSS grew by {} MB", grown >> 20);
    assert_eq!(
        router.stats().drops(y3_router::metrics::Drop::NoSubscriber),
        PAIRS
    );
    drop(stuck);
    ledger(&router).await;
    router.shutdown().await;
}

/// A function as YoMo's run it: every frame it receives is written back under the same
/// tag with the same metadata (and no y3 hop count, which YoMo's functions do not carry).
/// Reading and writing are decoupled so that the loop itself cannot deadlock.
fn echo_function(conn: y3_transport::Connection) -> tokio::task::JoinHandle<u64> {
    let y3_transport::Connection {
        mut reader,
        mut writer,
        ..
    } = conn;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if writer.send(frame).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut seen = 0u64;
        while let Ok(Some(Ok(Frame::Data(d)))) =
            tokio::time::timeout(Duration::from_millis(500), reader.next()).await
        {
            seen += 1;
            let echo = y3_transport::Data::new(d.tag, d.payload.clone()).with_metadata(d.metadata);
            if tx.send(Frame::Data(echo)).is_err() {
                break;
            }
        }
        seen
    })
}

/// The loop attack: three functions that re-emit the tag they observe. Each sees every
/// frame, its own included, so a message multiplies by three at every pass; YoMo-style
/// functions carry no hop count. A message may come back to each function whose output
/// led to it `max_loop_returns` times (8 by default): once every function is led by every
/// other, each takes at most 1 + 8 frames from the source and returns plus what the
/// functions before it wrote, so 200 messages cause at most 200 × 7 × (1 + 8) = 12,600
/// deliveries (they caused 306,600 with no bound, and 26,200 = 200 × 131 under the old
/// budget of 128 deliveries per message; 6,000 = 200 × 30 were measured now), and the rest
/// are counted as `loop` drops. Each function is reported once as a self-loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_are_bounded_in_width() {
    const MESSAGES: u64 = 200;
    let returns = u64::from(y3_router::RouterConfig::default().limits.max_loop_returns);
    let router = router(|_| {}).await;
    let mut functions = Vec::new();
    for _ in 0..3 {
        let conn = admit(
            router.connect_in_memory(),
            yomo_hello(ClientType::StreamFunction, &[0x40]),
        )
        .await;
        functions.push(echo_function(conn));
    }
    let mut source = join(&router, ClientType::Source, &[]).await;
    let started = Instant::now();
    send_all(&mut source, 0x40, 0..MESSAGES, b"ping").await;
    let mut delivered = 0;
    for f in functions {
        delivered += within("the loop to die out", f).await.unwrap();
    }
    let stats = router.stats();
    eprintln!(
        "loop attack: {delivered} deliveries ({:.1} per message), {} dropped as loop, died \
         out within {:?} (incl. 500 ms idle)",
        delivered as f64 / MESSAGES as f64,
        stats.drops(y3_router::metrics::Drop::Loop),
        started.elapsed()
    );
    assert!(delivered >= MESSAGES * 3, "{delivered}");
    assert!(delivered <= MESSAGES * 7 * (1 + returns), "{delivered}");
    assert!(stats.drops(y3_router::metrics::Drop::Loop) > 0);
    assert_eq!(stats.self_loops, 3);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// A subscriber that stops reading holds up its tag's publisher, and so that publisher's
/// other tags, once its queue is full (64 frames here, filled by a burst at the start with
/// its connection's buffer), for
/// at most the block timeout (250 ms by default) counted from the subscriber's last
/// progress (here: the burst); then its frames go into the overdraft without holding
/// anybody, and twice its queue behind it is evicted (`backlog`), named in the metrics. The
/// healthy subscriber of the other tag sees one gap of about the block timeout (the hold,
/// less the few ms the burst took) and at most 50 ms more (its own frame interval, 2 ms,
/// and scheduling), never more. (On the default 64 MiB queue the same holds past 64 MiB:
/// tests/slow_consumers.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_subscriber_delays_other_tags_at_most_the_block_timeout() {
    let router = router(|c| c.queue.capacity = 64).await;
    assert_eq!(router_block_timeout(), Duration::from_millis(250));
    let mut stuck_hello = hello(ClientType::StreamFunction, &[0x50]);
    stuck_hello.name = "stuck-sink".into();
    let _stuck = admit(router.connect_in_memory(), stuck_hello).await;
    let mut healthy = join(&router, ClientType::StreamFunction, &[0x51]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    let sender = tokio::spawn(async move {
        let payload = bytes::Bytes::from(vec![0u8; 1024]);
        // The stuck subscriber's connection (a 256 KiB in-memory pipe) and queue, full at
        // once: its writer's last progress, and so the hold, start now.
        for i in 0..512u64 {
            source
                .writer
                .feed(Frame::Data(numbered(0x50, 1_000 + i, payload.clone())))
                .await
                .unwrap();
        }
        source.writer.flush().await.unwrap();
        for i in 0..600u64 {
            source
                .writer
                .feed(Frame::Data(numbered(0x50, i, payload.clone())))
                .await
                .unwrap();
            source
                .writer
                .feed(Frame::Data(numbered(0x51, i, payload.clone())))
                .await
                .unwrap();
            source.writer.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        source
    });
    let (mut last, mut worst, mut got) = (Instant::now(), Duration::ZERO, 0u64);
    while got < 600 {
        let d = next_data(&mut healthy).await;
        assert_eq!(seq(&d), got, "in order, none lost");
        let now = Instant::now();
        worst = worst.max(now - last);
        last = now;
        got += 1;
    }
    let _source = sender.await.unwrap();
    eprintln!("stuck subscriber: the other tag's longest gap {worst:?}");
    let block = router_block_timeout();
    // The hold happened (the publisher was blocked), and lasted no longer than promised.
    assert!(
        worst >= block - Duration::from_millis(50),
        "gap {worst:?}: the stuck subscriber never held the publisher"
    );
    assert!(worst < block + Duration::from_millis(50), "gap {worst:?}");
    assert_eq!(counter(&router, "evictions", "client", "stuck-sink"), 1);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// A subscriber that stops reading delays nobody on other tags: with a stuck subscriber of
/// one publisher's tag, a healthy subscriber fed by another publisher sees no gap over
/// 100 ms (13 ms measured; the stuck tag's own publisher is held up to the block timeout,
/// then the stuck subscriber's frames go into its overdraft and, twice its 64-frame queue
/// behind, it is evicted). The block timeout is 2 s here, so that any hold-up by the stuck
/// subscriber would show as a gap of 2 s, far from the 500 ms bound that leaves a starved
/// CI machine room (10-14 ms measured on a loaded 2-core machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_subscriber_delays_nobody_on_other_publishers_tags() {
    const BLOCK: Duration = Duration::from_millis(2_000);
    let router = router(|c| {
        c.queue.capacity = 64;
        c.queue.block_timeout_ms = BLOCK.as_millis() as u64;
    })
    .await;
    let _stuck = admit(
        router.connect_in_memory(),
        hello(ClientType::StreamFunction, &[0x52]),
    )
    .await;
    let mut healthy = join(&router, ClientType::StreamFunction, &[0x53]).await;
    let mut flooding = join(&router, ClientType::Source, &[]).await;
    let mut steady = join(&router, ClientType::Source, &[]).await;
    let flood = tokio::spawn(async move {
        let payload = bytes::Bytes::from(vec![0u8; 1024]);
        for i in 0..2000u64 {
            let sent = flooding
                .writer
                .send(Frame::Data(numbered(0x52, i, payload.clone())))
                .await;
            if sent.is_err() {
                break;
            }
        }
        flooding
    });
    let sender = tokio::spawn(async move {
        let payload = bytes::Bytes::from(vec![0u8; 64]);
        for i in 0..400u64 {
            steady
                .writer
                .send(Frame::Data(numbered(0x53, i, payload.clone())))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        steady
    });
    let (mut last, mut worst, mut got) = (Instant::now(), Duration::ZERO, 0u64);
    while got < 400 {
        let d = next_data(&mut healthy).await;
        assert_eq!(seq(&d), got, "in order, none lost");
        let now = Instant::now();
        if got > 0 {
            worst = worst.max(now - last);
        }
        last = now;
        got += 1;
    }
    let _steady = sender.await.unwrap();
    let _flooding = flood.await.unwrap();
    eprintln!("stuck subscriber, other publisher: the healthy tag's longest gap {worst:?}");
    assert!(worst < BLOCK / 4, "gap {worst:?}");
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

fn router_block_timeout() -> Duration {
    Duration::from_millis(y3_router::RouterConfig::default().queue.block_timeout_ms)
}

/// Frames without metadata or payload (as YoMo's encoder writes `03 00`, `02 00`) are
/// copied out of the read buffer and routed like any other.
#[tokio::test]
async fn bare_frames_are_routed() {
    let router = router(|_| {}).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x60]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    for payload in [&b""[..], &b"x"[..]] {
        source
            .writer
            .send(Frame::Data(y3_transport::Data::new(0x60, payload)))
            .await
            .unwrap();
        let got = next_data(&mut sink).await;
        assert_eq!((&got.payload[..], got.metadata.is_empty()), (payload, true));
    }
    ledger(&router).await;
    router.shutdown().await;
}

/// With `evicted_backoff_ms` set (off by default; 1 s here), a client evicted as a slow
/// consumer that comes straight back is held off, counted, and let in again afterwards;
/// other clients of the same address are not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_slow_consumer_is_held_off() {
    let router = router(|c| {
        c.queue.capacity = 16;
        c.queue.evicted_backoff_ms = 1_000;
    })
    .await;
    let addr = router.tcp_addr().unwrap();
    let named = |name: &str| {
        let mut h = hello(ClientType::StreamFunction, &[0x70]);
        h.name = name.into();
        h
    };
    let tcp = |h| async move {
        let conn = y3_transport::tcp::connect(addr, None, y3_transport::FrameCodec::default())
            .await
            .unwrap();
        admit(conn, h).await
    };
    // Handshaken, never read: its queue and socket buffers fill, then it is evicted.
    let stuck = tcp(named("stuck")).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    let payload = bytes::Bytes::from(vec![0u8; 64 * 1024]);
    let mut i = 0;
    while counter(&router, "evictions", "client", "stuck") == 0 {
        source
            .writer
            .send(Frame::Data(numbered(0x70, i, payload.clone())))
            .await
            .unwrap();
        i += 1;
        assert!(i < 10_000, "never evicted");
    }
    drop(stuck);
    // Straight back: refused, retryable, counted.
    let mut again = y3_transport::tcp::connect(addr, None, y3_transport::FrameCodec::default())
        .await
        .unwrap();
    again
        .writer
        .send(Frame::from(named("stuck")))
        .await
        .unwrap();
    let refusal = rejection(&rest(&mut again).await).clone();
    assert_eq!(refusal.code, y3_transport::GoawayCode::SlowConsumer);
    assert!(refusal.reason.contains("held off"), "{}", refusal.reason);
    assert_eq!(rejected(&router, "held_off"), 1);
    // Another client of the same address is let in meanwhile, and the evicted one after
    // the back-off.
    let _other = tcp(named("healthy")).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let _back = tcp(named("stuck")).await;
    ledger(&router).await;
    router.shutdown().await;
}

/// The router-wide memory budget: four subscribers that never read, each allowed 16 MiB of
/// queue, and 8 MiB of 16 KiB frames for them. All queues together stay within the
/// 1 MiB budget; what does not fit is dropped and counted as `memory_budget`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_queues_together_stay_within_the_memory_budget() {
    const BUDGET: u64 = 1 << 20;
    let router = router(|c| {
        c.limits.max_queued_bytes = BUDGET as usize;
        c.queue.policy = y3_router::Policy::DropOldest;
    })
    .await;
    let mut stuck = Vec::new();
    for _ in 0..4 {
        stuck.push(join(&router, ClientType::StreamFunction, &[0x80]).await);
    }
    let mut source = join(&router, ClientType::Source, &[]).await;
    let payload = bytes::Bytes::from(vec![0u8; 16 * 1024]);
    let mut most = 0;
    for i in 0..512 {
        source
            .writer
            .send(Frame::Data(numbered(0x80, i, payload.clone())))
            .await
            .unwrap();
        most = most.max(router.stats().queued_bytes);
    }
    eventually("every frame read", || router.stats().frames_in >= 512).await;
    let stats = router.stats();
    most = most.max(stats.queued_bytes);
    let dropped = stats.drops(y3_router::metrics::Drop::MemoryBudget);
    eprintln!("memory budget: at most {most} bytes queued, {dropped} deliveries dropped");
    // The budget counts the frame being routed too (read, so held): the gauge may pass the
    // limit by that one frame, charged its 64 KiB read buffer (a 16 KiB frame pins one).
    assert!(most <= BUDGET + 64 * 1024 + 64, "{most} bytes queued");
    assert!(dropped > 0);
    drop(stuck);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}
