//! Content filters at the router (`spec/filters.md`): subscribers with filters receive
//! only matching frames, each distinct filter counts every frame once, YoMo functions get
//! filters from the config, and bad filters are refused at the handshake.

mod common;

use bytes::Bytes;
use common::*;
use futures_util::SinkExt;
use y3::{Dialect, Item, Value};
use y3_router::config::AttachConfig;
use y3_transport::frame::{ClientType, Frame, GoawayCode};

const TAG: u32 = 0x10;

/// A reading: `0x11` = `level` (int64), `0x12` = "lab".
fn reading(level: i64) -> Vec<u8> {
    let mut out = Item::new(0x11, Value::I64(level))
        .to_vec(Dialect::Golang)
        .unwrap();
    out.extend(
        Item::new(0x12, Value::Str("lab".into()))
            .to_vec(Dialect::Golang)
            .unwrap(),
    );
    out
}

#[tokio::test]
async fn subscribers_receive_only_what_their_filter_matches() {
    let router = router(|c| {
        c.filters.attach.push(AttachConfig {
            function: "yomo-fn".into(),
            tag: TAG,
            filter: "0x11 > 60".into(),
        });
    })
    .await;
    let loud = "0x11 >= 50 and 0x12 == \"lab\"";
    let mut a = join_with(
        &router,
        hello(ClientType::StreamFunction, &[TAG]).filter(TAG, loud),
    )
    .await;
    let mut b = join_with(
        &router,
        hello(ClientType::StreamFunction, &[TAG]).filter(TAG, loud),
    )
    .await;
    let mut yomo = yomo_hello(ClientType::StreamFunction, &[TAG]);
    yomo.name = "yomo-fn".into();
    let mut yomo = join_with(&router, yomo).await;
    let mut all = join(&router, ClientType::StreamFunction, &[TAG]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;

    // 100 readings 0..100, then 5 payloads that are not Y3.
    for i in 0..100 {
        let data = numbered(TAG, i, Bytes::from(reading(i as i64)));
        source.writer.send(Frame::Data(data)).await.unwrap();
    }
    for i in 100..105 {
        let data = numbered(TAG, i, Bytes::from_static(b"\x11\x7fnot y3"));
        source.writer.send(Frame::Data(data)).await.unwrap();
    }
    // The unfiltered subscriber sees everything; then each filtered one its share, in order.
    for i in 0..105 {
        assert_eq!(seq(&next_data(&mut all).await), i);
    }
    for conn in [&mut a, &mut b] {
        for i in 50..100 {
            assert_eq!(seq(&next_data(conn).await), i);
        }
    }
    for i in 61..100 {
        assert_eq!(seq(&next_data(&mut yomo).await), i);
    }
    // Nothing else was queued for them: the next frame each gets is a loud sentinel.
    let sentinel = numbered(TAG, 1000, Bytes::from(reading(99)));
    source.writer.send(Frame::Data(sentinel)).await.unwrap();
    for conn in [&mut a, &mut b, &mut yomo, &mut all] {
        assert_eq!(seq(&next_data(conn).await), 1000);
    }

    // Counted once per frame per distinct filter, however many subscribers share it.
    let m = router.metrics();
    let shared = m.filter_stats(TAG, loud).unwrap();
    assert_eq!(
        (shared.matched, shared.withheld, shared.malformed),
        (51, 55, 5)
    );
    let config = m.filter_stats(TAG, "0x11 > 60").unwrap();
    assert_eq!(
        (config.matched, config.withheld, config.malformed),
        (40, 66, 5)
    );
    let text = m.encode();
    assert!(
        text.contains("y3_router_filter_withheld_total{tag=\"0x10\",filter=\"0x11 > 60\"} 66"),
        "{text}"
    );
    // Withheld frames are not `no_subscriber` drops, and every delivery owed is settled.
    assert_eq!(counter(&router, "dropped", "reason", "no_subscriber"), 0);
    ledger(&router).await;
}

#[tokio::test]
async fn a_frame_every_filter_withholds_is_not_a_drop() {
    let router = router(|_| {}).await;
    let mut f = join_with(
        &router,
        hello(ClientType::StreamFunction, &[TAG]).filter(TAG, "0x11 > 1000"),
    )
    .await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, TAG, 0..3, &reading(5)).await;
    send_all(&mut source, TAG, 3..4, &reading(5000)).await;
    assert_eq!(seq(&next_data(&mut f).await), 3);
    let stats = router.metrics().filter_stats(TAG, "0x11 > 1000").unwrap();
    assert_eq!((stats.matched, stats.withheld), (1, 3));
    assert_eq!(counter(&router, "dropped", "reason", "no_subscriber"), 0);
    ledger(&router).await;
}

#[tokio::test]
async fn bad_filters_are_refused_at_the_handshake() {
    let router = router(|c| c.filters.max_len = 64).await;
    let cases = [
        (
            hello(ClientType::StreamFunction, &[TAG]).filter(TAG, "0x11 >"),
            "filter_syntax",
        ),
        (
            hello(ClientType::StreamFunction, &[TAG]).filter(TAG, "0x11 exists or ".repeat(10)),
            "filter_too_long",
        ),
        (
            hello(ClientType::StreamFunction, &[TAG]).filter(TAG, "0x11 > 60.5"),
            "filter_untyped_float",
        ),
        (
            hello(ClientType::StreamFunction, &[TAG]).filter(0x20, "0x11 > 1"),
            "filter for tag 0x20, which is not observed",
        ),
        (
            hello(ClientType::StreamFunction, &[TAG])
                .filter(TAG, "0x11 > 1")
                .filter(TAG, "0x11 > 2"),
            "two filters for tag 0x10",
        ),
    ];
    for (n, (hello, want)) in cases.into_iter().enumerate() {
        let mut conn = router.connect_in_memory();
        conn.writer.send(Frame::from(hello)).await.unwrap();
        let frames = rest(&mut conn).await;
        let g = rejection(&frames);
        assert_eq!(g.code, GoawayCode::BadFilter, "{g:?}");
        assert!(g.reason.contains(want), "{}: {}", want, g.reason);
        eventually("the rejection counted", || {
            rejected(&router, "bad_filter") == n as u64 + 1
        })
        .await;
    }
}

/// The Rust SDK: a `Sink` whose options carry a filter gets only the matching frames; one
/// whose filter does not compile gets `bad_filter` from `connect`.
#[tokio::test]
async fn sdk_sink_with_a_filter() {
    use y3_transport::sdk::{Sink, Source, Transport};
    let router = router(|_| {}).await;
    let opts = options(&router, Transport::Tcp, "loud").filter(TAG, "0x11 >= 90");
    let mut sink = Sink::connect(opts, &[TAG]).await.unwrap();
    let mut source = Source::connect(options(&router, Transport::Tcp, "src"))
        .await
        .unwrap();
    for i in 0..100 {
        source
            .send_data(numbered(TAG, i, Bytes::from(reading(i as i64))))
            .await
            .unwrap();
    }
    source.flush().await.unwrap();
    for i in 90..100 {
        let data = within("a loud reading", sink.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seq(&data), i);
    }
    let stats = router.metrics().filter_stats(TAG, "0x11 >= 90").unwrap();
    assert_eq!((stats.matched, stats.withheld), (10, 90));
    let bad = options(&router, Transport::Tcp, "bad").filter(TAG, "0x11 >= ");
    let err = Sink::connect(bad, &[TAG]).await.err().unwrap();
    assert!(err.to_string().contains("filter_syntax"), "{err}");
    source.close().await.unwrap();
    sink.close().await;
    ledger(&router).await;
}

#[test]
fn config_refuses_a_bad_attached_filter() {
    let mut config = y3_router::RouterConfig::ephemeral();
    config.filters.attach.push(AttachConfig {
        function: "f".into(),
        tag: TAG,
        filter: "0x11 ==".into(),
    });
    let err = config.validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "config: filters.attach.filter: filter_syntax"
    );
    config.filters.attach.clear();
    config.filters.max_paths = 17;
    assert!(config.validate().is_err());
}

/// An admitted client with this handshake, over an in-memory pipe.
async fn join_with(
    router: &y3_router::RouterHandle,
    hello: y3_transport::frame::Handshake,
) -> y3_transport::Connection {
    admit(router.connect_in_memory(), hello).await
}
