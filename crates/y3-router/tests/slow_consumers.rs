//! Slow consumers under the block policy, on the default queue settings unless a test says
//! otherwise: a subscriber that pauses loses nothing and holds nobody back while its backlog
//! fits its budget; past it, a publisher (and its other tags) waits at most the block
//! timeout per stall; one that takes nothing for the write deadline is evicted, counted,
//! logged with its name, id and address, and the delivery ledger still balances.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use tokio::io::AsyncWriteExt;
use y3_router::metrics::Drop;
use y3_router::RouterConfig;
use y3_transport::frame::{ClientType, Frame};

use common::*;

const KIB: usize = 1024;

/// The defaults these tests are about.
#[test]
fn the_default_queue_buffers_64_mib_and_evicts_after_10_s() {
    let q = RouterConfig::default().queue;
    assert_eq!(q.policy, y3_router::Policy::Block);
    assert_eq!((q.max_bytes, q.capacity), (64 << 20, 1 << 20));
    assert_eq!((q.block_timeout_ms, q.write_deadline_ms), (250, 10_000));
    assert_eq!(q.evicted_backoff_ms, 0);
}

/// What the two readers of a paced two-tag publisher saw.
struct Seen {
    /// The healthy subscriber's longest wait between two frames.
    healthy_gap: Duration,
    /// The publisher's longest single send (feed and flush).
    longest_send: Duration,
    /// Most frames queued in the router at once (sampled).
    most_queued: u64,
    most_queued_bytes: u64,
}

/// One publisher sends `n` pairs of 1 KiB frames, one on `paused_tag` and one on
/// `healthy_tag`, one pair per millisecond. The paused subscriber takes the first 100
/// frames, then nothing for `pause`, then the rest; the healthy one reads throughout. Both
/// must get every frame, in order.
async fn paced_pairs(router: &y3_router::RouterHandle, n: u64, pause: Duration) -> Seen {
    let (paused_tag, healthy_tag) = (0x90, 0x91);
    let mut paused = join(router, ClientType::StreamFunction, &[paused_tag]).await;
    let mut healthy = join(router, ClientType::StreamFunction, &[healthy_tag]).await;
    let mut source = join(router, ClientType::Source, &[]).await;
    let sender = tokio::spawn(async move {
        let payload = bytes::Bytes::from(vec![0u8; KIB]);
        let (mut longest, start) = (Duration::ZERO, tokio::time::Instant::now());
        for i in 0..n {
            // On a schedule: pair i at i ms, however coarse the timer.
            tokio::time::sleep_until(start + Duration::from_millis(i)).await;
            let started = Instant::now();
            for tag in [paused_tag, healthy_tag] {
                let frame = Frame::Data(numbered(tag, i, payload.clone()));
                source.writer.feed(frame).await.unwrap();
            }
            source.writer.flush().await.unwrap();
            longest = longest.max(started.elapsed());
        }
        (source, longest)
    });
    let paused_reader = tokio::spawn(async move {
        for i in 0..n {
            if i == 100 {
                tokio::time::sleep(pause).await;
            }
            let d = next_data(&mut paused).await;
            assert_eq!(seq(&d), i, "the paused subscriber: in order, none lost");
        }
        paused
    });
    let sampler = {
        let metrics = router.metrics_handle();
        tokio::spawn(async move {
            let (mut frames, mut bytes) = (0, 0);
            loop {
                let s = metrics.stats();
                (frames, bytes) = (frames.max(s.queued), bytes.max(s.queued_bytes));
                if s.frames_out >= 2 * n {
                    break (frames, bytes);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let (mut last, mut worst) = (Instant::now(), Duration::ZERO);
    for i in 0..n {
        let d = next_data(&mut healthy).await;
        assert_eq!(seq(&d), i, "the healthy subscriber: in order, none lost");
        let now = Instant::now();
        if i > 0 {
            worst = worst.max(now - last);
        }
        last = now;
    }
    let (_source, longest_send) = sender.await.unwrap();
    let _paused = within("the paused subscriber to catch up", paused_reader)
        .await
        .unwrap();
    let (most_queued, most_queued_bytes) = within("the sampler", sampler).await.unwrap();
    Seen {
        healthy_gap: worst,
        longest_send,
        most_queued,
        most_queued_bytes,
    }
}

/// "Lossless block" on the default queue: a subscriber that takes nothing for 3 s while
/// ~1,000 KiB frames a second come for it (more than the old 1,024-frame queue held) loses
/// none, and the publisher and its other tag are not held back at all meanwhile: the other
/// tag's longest gap stays under 200 ms, below the 250 ms block timeout any hold would show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_paused_3_s_loses_nothing_and_holds_nobody_on_the_default_queue() {
    let router = router(|_| {}).await;
    let seen = paced_pairs(&router, 5_000, Duration::from_secs(3)).await;
    eprintln!(
        "paused 3 s: healthy tag's longest gap {:?}, longest send {:?}, at most {} frames \
         ({} bytes) queued",
        seen.healthy_gap, seen.longest_send, seen.most_queued, seen.most_queued_bytes
    );
    assert!(
        seen.most_queued > 1_024,
        "the pause left {} frames queued: too few to matter",
        seen.most_queued
    );
    assert!(
        seen.healthy_gap < Duration::from_millis(200),
        "{:?}",
        seen.healthy_gap
    );
    assert!(
        seen.longest_send < Duration::from_millis(200),
        "{:?}",
        seen.longest_send
    );
    let stats = router.stats();
    assert_eq!(stats.total_drops(), 0, "{stats:?}");
    assert_eq!(
        counter(&router, "evictions", "client", "raw-stream_function"),
        0
    );
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// Past its budget (512 KiB here, so that the test stays small), a subscriber that takes
/// nothing holds its publisher, and so that publisher's other tag, at most until the block
/// timeout (250 ms) after its last batch taken (here it stopped taking more than that
/// before its queue filled, so it holds nobody); then its frames queue into the overdraft
/// without holding anybody, it is not evicted (the write deadline is 10 s), and when it
/// reads again it gets every frame. Both sides are measured: the other tag's longest gap
/// is under 450 ms, and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_budget_a_stuck_subscriber_holds_other_tags_once_and_loses_nothing() {
    const BUDGET: u64 = 512 * KIB as u64;
    let router = router(|c| c.queue.max_bytes = BUDGET as usize).await;
    // 850 frames, each charged ~1.25 KiB (payload, metadata, queue slot): past what the
    // 256 KiB pipe and the budget hold (~650 frames), within the pipe and twice the budget
    // (~1,060).
    let seen = paced_pairs(&router, 850, Duration::from_secs(3)).await;
    eprintln!(
        "stuck past its budget: healthy tag's longest gap {:?}, longest send {:?}, at most \
         {} bytes queued",
        seen.healthy_gap, seen.longest_send, seen.most_queued_bytes
    );
    assert!(
        seen.most_queued_bytes > BUDGET,
        "{}",
        seen.most_queued_bytes
    );
    assert!(
        seen.healthy_gap < Duration::from_millis(250 + 200),
        "held at most the block timeout: {:?}",
        seen.healthy_gap
    );
    let stats = router.stats();
    assert_eq!(stats.total_drops(), 0, "{stats:?}");
    assert_eq!(
        counter(&router, "evictions", "client", "raw-stream_function"),
        0
    );
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
}

/// Log lines written by the router, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A stream function over TCP with a small receive buffer that handshakes and then never
/// reads again.
async fn stuck_over_tcp(
    router: &y3_router::RouterHandle,
    name: &str,
    id: &str,
    tag: u32,
) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4 * KIB as u32).unwrap();
    let mut tcp = socket.connect(router.tcp_addr().unwrap()).await.unwrap();
    let mut h = hello(ClientType::StreamFunction, &[tag]);
    (h.name, h.id) = (name.into(), id.into());
    tcp.write_all(&wire(Frame::from(h))).await.unwrap();
    tcp
}

/// A subscriber that takes nothing is evicted once the write deadline (10 s by default)
/// has passed since it last took a frame: not before, counted in
/// `y3_router_evictions_total`, logged once with its name, id and address, its queue
/// counted as `slow_consumer` drops, and the ledger balanced. Its publisher, within the
/// budget all along, was never held back.
#[tokio::test]
async fn a_subscriber_taking_nothing_is_evicted_at_the_write_deadline() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .finish();
    // The test's runtime is single-threaded: the router's tasks run on this thread.
    let _logging = tracing::subscriber::set_default(subscriber);
    let router = router(|_| {}).await;
    let _stuck = stuck_over_tcp(&router, "stuck-sink", "stuck-id-7", 0xa0).await;
    eventually("the stuck sink admitted", || {
        router.stats().connections == 1
    })
    .await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    let payload = bytes::Bytes::from(vec![0u8; 4 * KIB]);
    let started = Instant::now();
    let (mut sent, mut longest) = (0u64, Duration::ZERO);
    let evicted_after = loop {
        let evicted = counter(&router, "evictions", "client", "stuck-sink") > 0;
        if evicted {
            break started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never evicted");
        let t = Instant::now();
        let frame = Frame::Data(numbered(0xa0, sent, payload.clone()));
        source.writer.send(frame).await.unwrap();
        longest = longest.max(t.elapsed());
        sent += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    eprintln!(
        "taking nothing: evicted {evicted_after:?} after the first of {sent} frames; \
         longest send {longest:?}"
    );
    // The clock starts at the first frame it did not take: at or after the first sent.
    assert!(
        evicted_after >= Duration::from_secs(10),
        "{evicted_after:?}"
    );
    // Kernel buffers take the first frames: a few seconds' worth at most.
    assert!(evicted_after < Duration::from_secs(16), "{evicted_after:?}");
    assert!(
        longest < Duration::from_millis(200),
        "never held: {longest:?}"
    );
    eventually("the stuck sink gone", || router.stats().connections == 1).await;
    let stats = router.stats();
    assert!(stats.drops(Drop::SlowConsumer) > 0, "{stats:?}");
    assert_eq!(
        stats.drops(Drop::QueueFull) + stats.drops(Drop::MemoryBudget),
        0
    );
    assert_eq!(counter(&router, "evictions", "client", "stuck-sink"), 1);
    drop(source);
    let last = router.shutdown().await;
    ledger_of(&last);
    assert_eq!(last.unaccounted(), 0, "{last:?}");
    let text = logs.text();
    let lines: Vec<_> = text
        .lines()
        .filter(|l| l.contains("slow consumer evicted"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    for want in [
        "stuck-sink",
        "stuck-id-7",
        "127.0.0.1:",
        "write deadline",
        "why=\"deadline\"",
    ] {
        assert!(lines[0].contains(want), "{want} in {}", lines[0]);
    }
}
