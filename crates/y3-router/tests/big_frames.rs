//! Big frames: 16 MiB payloads pass on the defaults; a frame over `limits.max_frame_len`
//! is skipped as it streams in, counted (`y3_router_skipped_frames_total{reason="too_long"}`)
//! and logged, and the connection goes on with the next frame: never a close (0x13 over
//! QUIC). A frame being skipped still stalls at the stall timeout.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use y3_transport::frame::{ClientType, Data, Frame, GoawayCode};
use y3_transport::sdk::{Sink, Source, Transport};
use y3_transport::Connection;

const LIMIT: usize = 1024;

/// Writes `bytes` in `pieces` writes with a pause between them, so that the router reads
/// them in many small reads.
async fn dribble(conn: &mut Connection, bytes: &[u8], pieces: usize) {
    for piece in bytes.chunks(bytes.len().div_ceil(pieces)) {
        conn.writer.get_mut().write_all(piece).await.unwrap();
        conn.writer.get_mut().flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Over an in-memory pipe and QUIC, from a y3 source and a YoMo-style one: an over-long frame arriving in
/// 50 pieces is skipped, the next frame is delivered, the skip is counted, no goaway and
/// no close; the connection then carries more.
#[tokio::test]
async fn a_frame_over_the_limit_is_skipped_counted_and_the_connection_stays_up() {
    let router = router(|c| c.limits.max_frame_len = LIMIT).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let big = wire(Frame::Data(numbered(
        0x10,
        1,
        vec![0xee; 20 * LIMIT].into(),
    )));
    let mut skipped = 0;
    for quic in [false, true] {
        for yomo in [false, true] {
            let hello = if yomo {
                yomo_hello(ClientType::Source, &[])
            } else {
                hello(ClientType::Source, &[])
            };
            let conn = if quic {
                quic_connect(&router).await
            } else {
                router.connect_in_memory()
            };
            let mut conn = admit(conn, hello).await;
            let watch = quic.then(|| quic_close(&conn));
            dribble(&mut conn, &big, 50).await;
            skipped += 1;
            eventually("the skip is counted", || {
                router.metrics().skipped("too_long") == skipped
            })
            .await;
            for i in 2..5 {
                conn.writer
                    .send(Frame::Data(numbered(0x10, i, vec![i as u8; 100].into())))
                    .await
                    .unwrap();
                let got = next_data(&mut sink).await;
                assert_eq!(
                    (seq(&got), got.payload.len()),
                    (i, 100),
                    "quic {quic} yomo {yomo}"
                );
            }
            if let Some(watch) = watch {
                // Still open: nothing closed it while we waited.
                let waited = tokio::time::timeout(Duration::from_millis(100), watch).await;
                assert!(waited.is_err(), "closed: {waited:?}");
            }
            let _ = conn.writer.close().await;
        }
    }
    assert_eq!(router.metrics().skipped("too_long"), 4);
    assert_eq!(router.stats().protocol_errors.get("too_long"), None);
    assert!(router.stats().rejected.values().all(|&n| n == 0));
    ledger(&router).await;
    router.shutdown().await;
}

/// A frame being skipped is mid-frame for the stall timeout: a client that declares a
/// 2 GiB frame and trickles a byte every 20 ms is cut within one and a half stall timeouts
/// (plus slack), as for a frame being buffered; the skip itself was counted.
#[tokio::test]
async fn a_frame_being_skipped_still_stalls() {
    const STALL: Duration = Duration::from_millis(300);
    let router = router(|c| {
        c.limits.max_frame_len = LIMIT;
        c.limits.frame_stall_timeout_ms = STALL.as_millis() as u64;
    })
    .await;
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(&wire(Frame::from(hello(ClientType::Source, &[]))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    // Data frame declaring 2^31 - 1 bytes of fields.
    tcp.write_all(&[0xbf, 0x87, 0xff, 0xff, 0xff, 0x7f])
        .await
        .unwrap();
    let (mut rd, mut wr) = tcp.into_split();
    let writer = tokio::spawn(async move {
        while started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            if wr.write_all(&[0x00]).await.is_err() {
                break;
            }
        }
    });
    let mut reply = Vec::new();
    within("the stall close", rd.read_to_end(&mut reply))
        .await
        .unwrap();
    let took = started.elapsed();
    writer.abort();
    assert!(
        took >= STALL && took < STALL * 3 / 2 + Duration::from_millis(400),
        "closed after {took:?}"
    );
    let got = frames(&reply);
    assert_eq!(goaway_code(&got[1..]), GoawayCode::ProtocolError);
    assert!(
        goaways(&got)[0]
            .reason
            .contains("skipping an over-long frame"),
        "{got:?}"
    );
    assert_eq!(protocol_errors(&router, "frame_stalled"), 1);
    assert_eq!(router.metrics().skipped("too_long"), 1);
    ledger(&router).await;
    router.shutdown().await;
}

/// The SDK refuses to queue a frame over its own limit with `too_long` (nothing is sent,
/// the connection goes on), and 16 MiB payloads pass router and clients on the defaults,
/// with the next small frame after them.
#[tokio::test]
async fn sixteen_mib_pass_on_the_defaults_and_the_sdk_refuses_what_is_over_its_limit() {
    let router = router(|_| {}).await;
    for transport in [Transport::Tcp, Transport::Quic] {
        let mut sink = Sink::connect(options(&router, transport, "big-sink"), &[0x10])
            .await
            .unwrap();
        let mut source = Source::connect(options(&router, transport, "big-source"))
            .await
            .unwrap();
        let big: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
        source.send(0x10, big.clone()).await.unwrap();
        source.send(0x10, &b"after"[..]).await.unwrap();
        source.flush().await.unwrap();
        let got = within("16 MiB", sink.recv()).await.unwrap().unwrap();
        assert!(got.payload == big, "{transport:?}: payload differs");
        let got = within("the next", sink.recv()).await.unwrap().unwrap();
        assert_eq!(&got.payload[..], b"after");
        source.close().await.unwrap();

        let mut small = options(&router, transport, "small-source");
        small.max_frame_len = LIMIT;
        let mut source = Source::connect(small).await.unwrap();
        let err = source.send(0x10, vec![1u8; LIMIT]).await.unwrap_err();
        assert_eq!(err.kind(), "too_long", "{err}");
        let err = source
            .send_data(Data::new(0x10, vec![1u8; LIMIT]))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "too_long", "{err}");
        source.send(0x10, &b"fits"[..]).await.unwrap();
        source.flush().await.unwrap();
        let got = within("the small one", sink.recv()).await.unwrap().unwrap();
        assert_eq!(&got.payload[..], b"fits");
        source.close().await.unwrap();
    }
    assert_eq!(router.metrics().skipped("too_long"), 0);
    ledger(&router).await;
    router.shutdown().await;
}

/// A y3 sink whose own `max_frame_len` is below the router's skips (and logs) a frame over
/// it and receives the next one: its connection stays up too.
#[tokio::test]
async fn a_sink_skips_what_is_over_its_own_limit_and_goes_on() {
    let router = router(|_| {}).await;
    let mut small = options(&router, Transport::Tcp, "small-sink");
    small.max_frame_len = LIMIT;
    let mut sink = Sink::connect(small, &[0x10]).await.unwrap();
    let mut source = Source::connect(options(&router, Transport::Tcp, "source"))
        .await
        .unwrap();
    source.send(0x10, vec![1u8; 4 * LIMIT]).await.unwrap();
    source.send(0x10, &b"next"[..]).await.unwrap();
    source.flush().await.unwrap();
    let got = within("the next frame", sink.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got.payload[..], b"next");
    source.close().await.unwrap();
    ledger(&router).await;
    router.shutdown().await;
}
