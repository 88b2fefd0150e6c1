//! Refused frames (`spec/frames.md`, "Stored acknowledgements"): a frame the router drops by
//! its rules — over `limits.max_frame_len`, past `limits.max_hops`, a loop by `yomo-tid` —
//! is reported to an acknowledging client as refused with its reason, never as stored. The
//! client does not send it again; everything else is stored and delivered once. A frame
//! nobody takes (no subscriber) is refused as `no_subscriber`: not stored, so the durable
//! client keeps it and sends it again until a subscriber takes it.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use y3_transport::frame::{ClientType, RefusedReason};
use y3_transport::sdk::{DurableSource, StreamFunction, Transport};

const LIMIT: usize = 1024;

/// A durable source named `name` on `router` over `transport`.
async fn durable_source(
    router: &y3_router::RouterHandle,
    transport: Transport,
    name: &str,
) -> DurableSource {
    DurableSource::connect(options(router, transport, name))
        .await
        .unwrap()
}

/// The sequence numbers of the next `n` frames on `sink`, sorted, each once: what a
/// late subscriber got of frames that may have been sent more than once.
async fn distinct_seqs(sink: &mut y3_transport::Connection, n: u64) -> Vec<u64> {
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(seq(&next_data(sink).await));
    }
    got.sort_unstable();
    got.dedup();
    got
}

/// A durable source's frames 3 and 4 are over the router's `max_frame_len` and frame 6 is
/// past its hop limit: the source learns exactly those three as refused, with their
/// reasons; the sink gets the seven others once each; nothing is resent; `close` does not
/// report success. The router still counts the drops as before.
#[tokio::test]
async fn a_durable_source_learns_which_frames_were_refused_and_why() {
    let router = router(|c| {
        c.limits.max_frame_len = LIMIT;
        c.limits.max_hops = 2;
    })
    .await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut source = durable_source(&router, Transport::Tcp, "durable").await;
    for i in 0..10u64 {
        let len = if i == 3 || i == 4 { 4 * LIMIT } else { 100 };
        let mut data = numbered(0x10, i, Bytes::from(vec![i as u8; len]));
        if i == 6 {
            data.hops = 5;
        }
        source.send_data(data).await.unwrap();
    }
    assert!(source.wait_stored(WAIT).await.unwrap(), "all handled");
    let delivered: Vec<u64> = {
        let mut got = Vec::new();
        for _ in 0..7 {
            got.push(seq(&next_data(&mut sink).await));
        }
        got
    };
    assert_eq!(delivered, [0, 1, 2, 5, 7, 8, 9]);
    let refused: Vec<(String, RefusedReason)> = source
        .refusals()
        .list()
        .into_iter()
        .map(|r| (r.tid, r.reason))
        .collect();
    assert_eq!(
        refused,
        [
            (tid(3), RefusedReason::TooLong),
            (tid(4), RefusedReason::TooLong),
            (tid(6), RefusedReason::HopLimit),
        ]
    );
    assert_eq!(source.refused(), 3);
    assert_eq!(source.refusals().count_of(RefusedReason::TooLong), 2);
    assert_eq!((source.resent(), source.unacked()), (0, 0));
    // Metrics as before: the skip and the hop-limit drop (counted as `loop`).
    assert_eq!(router.metrics().skipped("too_long"), 2);
    assert_eq!(counter(&router, "dropped", "reason", "loop"), 1);
    let closed = source.finish(WAIT).await.unwrap();
    assert!(!closed.all_stored());
    assert_eq!((closed.unstored, closed.refused), (0, 3));
    // Nothing more reaches the sink: no frame was sent twice.
    let more = tokio::time::timeout(Duration::from_millis(300), next(&mut sink)).await;
    assert!(!matches!(more, Ok(Some(Ok(_)))), "an extra frame: {more:?}");

    // A source with nothing refused still closes with success.
    let mut clean = durable_source(&router, Transport::Tcp, "clean").await;
    clean.send(0x10, &b"fine"[..]).await.unwrap();
    assert!(clean.close(WAIT).await.unwrap());
    ledger(&router).await;
}

/// The same over QUIC, with the limit hit by consecutive frames of one run and frames
/// after it: the counts stay in step (what follows the refusals is stored, not resent).
#[tokio::test]
async fn refusals_over_quic_keep_the_count_in_step() {
    let router = router(|c| c.limits.max_frame_len = LIMIT).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x11]).await;
    let mut source = durable_source(&router, Transport::Quic, "durable-quic").await;
    for i in 0..40u64 {
        let len = if (10..20).contains(&i) { 2 * LIMIT } else { 10 };
        source
            .send_data(numbered(0x11, i, Bytes::from(vec![1u8; len])))
            .await
            .unwrap();
    }
    assert!(source.wait_stored(WAIT).await.unwrap());
    for want in (0..10).chain(20..40) {
        assert_eq!(seq(&next_data(&mut sink).await), want);
    }
    assert_eq!(source.refusals().count_of(RefusedReason::TooLong), 10);
    let tids: Vec<String> = source
        .refusals()
        .list()
        .into_iter()
        .map(|r| r.tid)
        .collect();
    assert_eq!(tids, (10..20).map(tid).collect::<Vec<_>>());
    assert_eq!((source.refused(), source.resent()), (10, 0));
    assert!(!source.close(WAIT).await.unwrap());
    ledger(&router).await;
}

/// A durable function that observes the tag it writes (a self-loop) with
/// `max_loop_returns = 1`: its message comes back once, and the next output would reach
/// no one but the function again: it is refused as `loop`, and the function records it.
#[tokio::test]
async fn a_durable_function_learns_its_looping_output_was_refused() {
    let router = router(|c| {
        c.limits.max_loop_returns = 1;
        c.limits.max_hops = 100;
    })
    .await;
    let function =
        StreamFunction::new(options(&router, Transport::Tcp, "looper"), &[0x20]).durable();
    let refusals = function.refusals();
    let inputs = Arc::new(AtomicU64::new(0));
    let seen = inputs.clone();
    let task = tokio::spawn(function.run(move |data| {
        seen.fetch_add(1, Ordering::Relaxed);
        async move { Some((0x20, data.payload)) }
    }));
    eventually("the function is subscribed", || {
        router
            .metrics()
            .encode()
            .contains("client_type=\"stream_function\"} 1")
    })
    .await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x20, 0..1, b"round").await;
    eventually("the loop's output is refused", || refusals.count() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let list = refusals.list();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].tid.as_str(), list[0].reason),
        ("tid-0", RefusedReason::Loop)
    );
    // The input, its one allowed return, then nothing: the refused output is not resent.
    assert_eq!(inputs.load(Ordering::Relaxed), 2);
    assert_eq!(counter(&router, "dropped", "reason", "loop"), 1);
    task.abort();
    ledger(&router).await;
}

/// "Stored" means stored: a durable source writes 50 frames to a tag nobody subscribes
/// to. The router answers `no_subscriber` (never stored) and counts the drops; the source
/// keeps every frame and sends it again with backoff, without calling it refused. Once a
/// sink subscribes, every frame reaches it and the source closes with success.
#[tokio::test]
async fn frames_nobody_takes_are_not_stored_and_are_sent_again_until_a_subscriber_comes() {
    const N: u64 = 50;
    let router = router(|_| {}).await;
    let mut source = durable_source(&router, Transport::Tcp, "early").await;
    for i in 0..N {
        source
            .send_data(numbered(0x12, i, Bytes::from_static(b"kept")))
            .await
            .unwrap();
    }
    // Not stored: the wait ends with frames kept, none refused for good.
    assert!(!source
        .wait_stored(Duration::from_millis(400))
        .await
        .unwrap());
    assert_eq!(source.unacked(), N as usize);
    assert!(source.retried() >= N, "retried {}", source.retried());
    assert_eq!(source.refused(), 0);
    assert!(counter(&router, "dropped", "reason", "no_subscriber") >= N);
    let mut sink = join(&router, ClientType::StreamFunction, &[0x12]).await;
    assert!(
        source.wait_stored(WAIT).await.unwrap(),
        "all stored once a sink came"
    );
    let got = distinct_seqs(&mut sink, N).await;
    assert_eq!(got.len() as u64, N, "every frame reached the sink");
    let closed = source.finish(WAIT).await.unwrap();
    assert!(closed.all_stored(), "{closed:?}");
}

/// The same for a durable function's outputs: its output tag has no subscriber at first,
/// so its outputs are answered `no_subscriber`, kept and written again (the function's
/// loop wakes for them with no new input); once a sink subscribes they all arrive.
#[tokio::test]
async fn a_durable_functions_outputs_nobody_takes_are_kept_until_a_subscriber_comes() {
    const N: u64 = 20;
    let router = router(|_| {}).await;
    let function =
        StreamFunction::new(options(&router, Transport::Tcp, "early-fn"), &[0x14]).durable();
    let refusals = function.refusals();
    let task = tokio::spawn(function.run(|data| async move { Some((0x15, data.payload)) }));
    eventually("the function is subscribed", || {
        router
            .metrics()
            .encode()
            .contains("client_type=\"stream_function\"} 1")
    })
    .await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x14, 0..N, b"out").await;
    eventually("the outputs are retried", || refusals.retried() >= N).await;
    assert_eq!(refusals.count(), 0, "not refused for good");
    let mut sink = join(&router, ClientType::StreamFunction, &[0x15]).await;
    let got = distinct_seqs(&mut sink, N).await;
    assert_eq!(got.len() as u64, N, "every output reached the late sink");
    task.abort();
}
