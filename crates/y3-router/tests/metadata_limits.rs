//! Metadata the router rewrites (issue 26): a publisher with a wanted target in its
//! handshake, or tag 0xE001 with `yomo-target`, sending 100k keys in a 500 KB frame. The
//! rewrite was quadratic (14.3 s of CPU per frame; 2 frames stopped routing for every tag
//! for 31.5 s). Now metadata over `limits.max_metadata_bytes` / `max_metadata_entries` is
//! refused unread, and under raised limits the rewrite is linear.

mod common;

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::SinkExt;
use y3_router::RouterHandle;
use y3_transport::frame::{ClientType, Data, Frame, RefusedReason};
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{DurableSource, Transport};

use common::*;

/// The probe's keys: 100k.
const KEYS: usize = 100_000;
const HEALTHY: u32 = 0x10;
const WANTED: u32 = 0x20;
const REDUCER: u32 = 0xe001;

/// `keys` distinct 3-byte keys with empty values (5 bytes a pair: 500 KB for 100k), then
/// `extra`: one msgpack map32.
fn probe_metadata(keys: usize, extra: &[(&str, &str)]) -> Metadata {
    let mut out = BytesMut::with_capacity(5 + keys * 5 + 64);
    out.put_u8(0xdf);
    out.put_u32((keys + extra.len()) as u32);
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for i in 0..keys {
        out.put_u8(0xa3);
        for d in [i / (62 * 62), i / 62 % 62, i % 62] {
            out.put_u8(DIGITS[d]);
        }
        out.put_u8(0xa0);
    }
    for (k, v) in extra {
        for s in [k, v] {
            assert!(s.len() < 32);
            out.put_u8(0xa0 | s.len() as u8);
            out.put_slice(s.as_bytes());
        }
    }
    Metadata::from_bytes(out.freeze())
}

/// The two attackers: a source with a wanted target in its handshake (its frames get
/// `yomo-wanted-target` merged) and one writing the reducer tag with `yomo-target` (which
/// the router strips). Each sends two probe frames; returns when they are flushed.
async fn attack(router: &RouterHandle) {
    let mut wanting = hello(ClientType::Source, &[]);
    wanting.wanted_target = "w".into();
    let mut a = admit(router.connect_in_memory(), wanting).await;
    let mut b = join(router, ClientType::Source, &[]).await;
    let plain = probe_metadata(KEYS, &[(metadata::TID, "probe")]);
    let targeted = probe_metadata(KEYS, &[(metadata::TID, "probe"), (metadata::TARGET, "t")]);
    for _ in 0..2 {
        let frame = Data::new(WANTED, &b"x"[..]).with_metadata(plain.clone());
        a.writer.send(Frame::Data(frame)).await.unwrap();
        let frame = Data::new(REDUCER, &b"x"[..]).with_metadata(targeted.clone());
        b.writer.send(Frame::Data(frame)).await.unwrap();
    }
    // Kept open until the router read them.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        drop((a, b));
    });
}

/// A healthy stream on its own tag, one frame a millisecond for `span`, while `during`
/// runs: every frame arrives, in order; returns the longest gap between two arrivals.
async fn healthy_gap_while<F: std::future::Future<Output = ()>>(
    router: &RouterHandle,
    span: Duration,
    during: impl FnOnce() -> F,
) -> Duration {
    let mut sink = join(router, ClientType::StreamFunction, &[HEALTHY]).await;
    let mut source = join(router, ClientType::Source, &[]).await;
    let n = span.as_millis() as u64;
    let sender = tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        for i in 0..n {
            tokio::time::sleep_until(start + Duration::from_millis(i)).await;
            let frame = Frame::Data(numbered(HEALTHY, i, Bytes::from_static(b"ok")));
            source.writer.send(frame).await.unwrap();
        }
        source
    });
    let reader = tokio::spawn(async move {
        let (mut gap, mut last) = (Duration::ZERO, None::<Instant>);
        for i in 0..n {
            let d = next_data(&mut sink).await;
            assert_eq!(seq(&d), i, "the healthy stream: in order, none lost");
            let now = Instant::now();
            if let Some(last) = last {
                gap = gap.max(now - last);
            }
            last = Some(now);
        }
        gap
    });
    // The attack starts once the healthy stream flows.
    tokio::time::sleep(Duration::from_millis(200)).await;
    during().await;
    let gap = reader.await.unwrap();
    drop(sender.await.unwrap());
    gap
}

/// Defaults (64 KiB, 1,024 pairs): the four probe frames are refused unread, counted as
/// `metadata_too_large`, never delivered; the healthy stream beside them sees no gap over
/// the bound (the quadratic rewrite stopped it for 31.5 s). Refusing one costs about what
/// reading a same-sized frame does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_frames_over_the_limits_are_refused_unread_and_stop_no_one() {
    let router = router(|_| {}).await;
    let mut victim = join(&router, ClientType::StreamFunction, &[WANTED, REDUCER]).await;
    // What reading four 500 KB frames costs: the same size as payload, nobody observing.
    let before = router.stats().frames_in;
    let started = Instant::now();
    let mut plain = join(&router, ClientType::Source, &[]).await;
    let payload = Bytes::from(vec![7u8; probe_metadata(KEYS, &[]).as_bytes().len()]);
    for _ in 0..4 {
        let frame = Data::new(0x77, payload.clone());
        plain.writer.send(Frame::Data(frame)).await.unwrap();
    }
    eventually("four plain frames read", || {
        router.stats().frames_in == before + 4
    })
    .await;
    let reading = started.elapsed();

    let refused_in = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let gap = healthy_gap_while(&router, Duration::from_millis(1500), || {
        let (router, refused_in) = (&router, refused_in.clone());
        async move {
            let started = Instant::now();
            attack(router).await;
            eventually("four probe frames refused", || {
                router.metrics().skipped("metadata_too_large") == 4
            })
            .await;
            *refused_in.lock().unwrap() = started.elapsed();
        }
    })
    .await;
    let refusing = *refused_in.lock().unwrap();
    eprintln!(
        "metadata probe at defaults: healthy stream's longest gap {gap:?}; four probe frames \
         refused in {refusing:?}, four plain frames of the same size read in {reading:?}"
    );
    assert!(gap < Duration::from_millis(250), "healthy gap {gap:?}");
    assert!(
        refusing < reading * 3 + Duration::from_millis(250),
        "refusing {refusing:?} vs reading {reading:?}"
    );
    let more = tokio::time::timeout(Duration::from_millis(200), next(&mut victim)).await;
    assert!(more.is_err(), "a probe frame was delivered: {more:?}");
    assert_eq!(protocol_errors(&router, "bad_metadata"), 0);
    ledger(&router).await;
    router.shutdown().await;
}

/// Raised limits (1 MiB, 200k pairs): the probe frames are routed, rewritten in one linear
/// pass — the wanted target merged, the reducer's target stripped, the 100k pairs kept — in
/// well under a second each (a quadratic rewrite took 14.3 s of CPU per frame), and the
/// healthy stream beside them keeps flowing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_raised_limits_the_rewrite_is_linear() {
    let router = router(|c| {
        c.limits.max_metadata_bytes = 1 << 20;
        c.limits.max_metadata_entries = 200_000;
    })
    .await;
    let mut victim = join(&router, ClientType::StreamFunction, &[WANTED, REDUCER]).await;
    let took = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
    let gap = healthy_gap_while(&router, Duration::from_millis(1500), || {
        let took = took.clone();
        let (router, victim) = (&router, &mut victim);
        async move {
            let started = Instant::now();
            attack(router).await;
            let (mut merged, mut stripped) = (0, 0);
            for _ in 0..4 {
                let d = next_data(victim).await;
                let md = &d.metadata;
                // The probe's keys and its tid, plus the merged wanted target (0x20), or
                // less the stripped target (0xE001).
                assert_eq!(
                    md.validate().unwrap(),
                    KEYS + 1 + (d.tag == WANTED) as usize
                );
                if d.tag == WANTED {
                    assert_eq!(md.get(metadata::WANTED_TARGET).unwrap(), Some("w"));
                    merged += 1;
                } else {
                    assert_eq!(md.get(metadata::TARGET).unwrap(), None);
                    stripped += 1;
                }
            }
            assert_eq!((merged, stripped), (2, 2));
            *took.lock().unwrap() = started.elapsed();
        }
    })
    .await;
    let took = *took.lock().unwrap();
    eprintln!(
        "metadata probe under raised limits: four 100k-key frames rewritten and delivered in \
         {took:?}; healthy stream's longest gap {gap:?}"
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(gap < Duration::from_secs(2), "healthy gap {gap:?}");
    ledger(&router).await;
    router.shutdown().await;
}

/// A client that wants stored acknowledgements learns the frame was refused, with its
/// reason; the frames around it are stored and delivered, and the connection stays up.
#[tokio::test]
async fn a_durable_source_learns_its_frame_was_refused_as_metadata_too_large() {
    let router = router(|c| c.limits.max_metadata_entries = 8).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[REDUCER]).await;
    let mut source = DurableSource::connect(options(&router, Transport::Tcp, "durable"))
        .await
        .unwrap();
    for i in 0..3u64 {
        let tid = tid(i);
        let keys = if i == 1 { 20 } else { 2 };
        let md = probe_metadata(keys, &[(metadata::TID, &tid), (metadata::TARGET, "t")]);
        let data = Data::new(REDUCER, Bytes::from_static(b"x")).with_metadata(md);
        source.send_data(data).await.unwrap();
    }
    assert!(source.wait_stored(WAIT).await.unwrap(), "all handled");
    assert_eq!(seq(&next_data(&mut sink).await), 0);
    assert_eq!(seq(&next_data(&mut sink).await), 2);
    let refused: Vec<_> = source
        .refusals()
        .list()
        .into_iter()
        .map(|r| (r.tid, r.reason))
        .collect();
    assert_eq!(refused, [(tid(1), RefusedReason::MetadataTooLarge)]);
    assert_eq!(router.metrics().skipped("metadata_too_large"), 1);
    assert!(!source.close(WAIT).await.unwrap());
    ledger(&router).await;
    router.shutdown().await;
}
