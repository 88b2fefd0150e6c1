//! Bad input and faults on loopback TCP and QUIC: each gets a clear error or a counted
//! drop, the router keeps serving everyone else, memory stays bounded, the block policy
//! loses nothing for live subscribers, and a shutdown drains in-flight frames.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use y3_router::metrics::Drop;
use y3_router::{Policy, RouterHandle};
use y3_transport::frame::{Frame, GoawayCode, Role};
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Transport};
use y3_transport::{FrameCodec, TransportError};

/// A source and a sink on tag 0x77 that prove the router still serves other clients.
async fn bystanders_still_served(router: &RouterHandle, transport: Transport) {
    let mut sink = Sink::connect(options(router, transport, "bystander-sink"), &[0x77])
        .await
        .unwrap();
    let mut source = Source::connect(options(router, transport, "bystander"))
        .await
        .unwrap();
    for i in 0..10u8 {
        source.send(0x77, vec![i]).await.unwrap();
    }
    source.flush().await.unwrap();
    for i in 0..10u8 {
        let d = within("bystander frame", sink.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&d.payload[..], [i]);
    }
    source.close().await.unwrap();
}

/// Encodes a frame to bytes.
fn wire(frame: Frame) -> Vec<u8> {
    let mut buf = bytes::BytesMut::new();
    frame.encode(&mut buf, 1 << 20).unwrap();
    buf.to_vec()
}

/// Writes `bytes` on a raw TCP connection and reads until the router closes it.
async fn raw_exchange(router: &RouterHandle, bytes: &[u8], close_write: bool) -> Vec<u8> {
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(bytes).await.unwrap();
    if close_write {
        tcp.shutdown().await.unwrap();
    }
    let mut reply = Vec::new();
    within("the router to close", tcp.read_to_end(&mut reply))
        .await
        .unwrap();
    reply
}

/// The frames in `bytes`.
fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut codec = FrameCodec::default();
    let mut buf = bytes::BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Ok(Some(f)) = tokio_util::codec::Decoder::decode(&mut codec, &mut buf) {
        out.push(f);
    }
    out
}

fn goaway_code(frames: &[Frame]) -> Option<GoawayCode> {
    frames.iter().find_map(|f| match f {
        Frame::Goaway(g) => Some(g.code),
        _ => None,
    })
}

#[tokio::test]
async fn garbage_bytes_get_a_protocol_error() {
    let router = router(|_| {}).await;
    let reply = raw_exchange(&router, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false).await;
    assert_eq!(
        goaway_code(&frames(&reply)),
        Some(GoawayCode::ProtocolError)
    );
    // Garbage after a valid handshake.
    let mut bytes = wire(hello(Role::Source, &[], ""));
    bytes.extend_from_slice(&[0x13, 0x37, 0xde, 0xad, 0xbe, 0xef]);
    let reply = raw_exchange(&router, &bytes, false).await;
    let got = frames(&reply);
    assert!(matches!(got[0], Frame::Accepted(_)), "{got:?}");
    assert_eq!(goaway_code(&got), Some(GoawayCode::ProtocolError));
    eventually("both errors counted", || {
        let errors = router.stats().protocol_errors;
        errors.get("invalid_tag") == Some(&1) && errors.get("unknown_frame") == Some(&1)
    })
    .await;
    bystanders_still_served(&router, Transport::Tcp).await;
    router.shutdown().await;
}

#[tokio::test]
async fn truncated_frames_are_reported_at_end_of_stream() {
    let router = router(|_| {}).await;
    let mut bytes = wire(hello(Role::Source, &[], ""));
    let data = wire(Frame::Data(y3_transport::Data::new(
        0x10,
        1,
        vec![7u8; 100],
    )));
    bytes.extend_from_slice(&data[..data.len() / 2]);
    let reply = raw_exchange(&router, &bytes, true).await;
    assert!(matches!(frames(&reply)[0], Frame::Accepted(_)));
    eventually("truncated counted", || {
        router.stats().protocol_errors.get("truncated") == Some(&1)
    })
    .await;
    // A frame whose fields overflow it.
    let mut bytes = wire(hello(Role::Source, &[], ""));
    bytes.extend_from_slice(&[0xbf, 0x03, 0x05, 0x7e, 0x00]);
    let reply = raw_exchange(&router, &bytes, false).await;
    assert_eq!(
        goaway_code(&frames(&reply)),
        Some(GoawayCode::ProtocolError)
    );
    bystanders_still_served(&router, Transport::Tcp).await;
    router.shutdown().await;
}

#[tokio::test]
async fn oversized_declared_length_fails_without_buffering() {
    let router = router(|c| c.limits.max_frame_len = 64 * 1024).await;
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(&wire(hello(Role::Source, &[], "")))
        .await
        .unwrap();
    // A data frame declaring 2 GiB - 1 bytes: the tag byte and a 5-byte length, nothing
    // more. The router must answer from these 6 bytes alone, allocating nothing for it.
    tcp.write_all(&[0xbf, 0x87, 0xff, 0xff, 0xff, 0x7f])
        .await
        .unwrap();
    let mut reply = Vec::new();
    within("the goaway", tcp.read_to_end(&mut reply))
        .await
        .unwrap();
    assert_eq!(
        goaway_code(&frames(&reply)),
        Some(GoawayCode::ProtocolError)
    );
    assert_eq!(router.stats().protocol_errors.get("too_long"), Some(&1));
    bystanders_still_served(&router, Transport::Tcp).await;
    router.shutdown().await;
}

#[tokio::test]
async fn a_client_stalling_mid_frame_is_closed_after_the_stall_timeout() {
    let router = router(|c| c.limits.frame_stall_timeout_ms = 300).await;
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(&wire(hello(Role::Source, &[], "")))
        .await
        .unwrap();
    // Half of a data frame, then silence: the router must not hold the connection forever.
    let data = wire(Frame::Data(y3_transport::Data::new(
        0x10,
        1,
        vec![7u8; 100],
    )));
    tcp.write_all(&data[..data.len() / 2]).await.unwrap();
    let mut reply = Vec::new();
    within("the stall goaway", tcp.read_to_end(&mut reply))
        .await
        .unwrap();
    assert_eq!(
        goaway_code(&frames(&reply)),
        Some(GoawayCode::ProtocolError)
    );
    assert_eq!(
        router.stats().protocol_errors.get("frame_stalled"),
        Some(&1)
    );
    // A slow client that keeps sending is not cut off: a frame dribbled out in pieces, each
    // well within the timeout, arrives.
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(&wire(hello(Role::Source, &[], "")))
        .await
        .unwrap();
    for piece in data.chunks(data.len() / 4 + 1) {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        tcp.write_all(piece).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        router.stats().protocol_errors.get("frame_stalled"),
        Some(&1)
    );
    drop(tcp);
    bystanders_still_served(&router, Transport::Tcp).await;
    router.shutdown().await;
}

#[tokio::test]
async fn wrong_token_is_refused_over_tcp_and_quic() {
    let router = router(|c| c.auth.token = "s3cret".into()).await;
    for transport in [Transport::Tcp, Transport::Quic] {
        let wrong = options(&router, transport, "intruder").token("guess");
        match Source::connect(wrong).await {
            Err(TransportError::Goaway { code }) => assert_eq!(code, GoawayCode::Unauthorized),
            Err(other) => panic!("{transport:?}: {other}"),
            Ok(_) => panic!("{transport:?}: admitted with a wrong token"),
        }
        let right = options(&router, transport, "friend").token("s3cret");
        let mut sink = Sink::connect(right.clone(), &[0x20]).await.unwrap();
        let mut source = Source::connect(right).await.unwrap();
        source.send(0x20, &b"ok"[..]).await.unwrap();
        source.flush().await.unwrap();
        assert_eq!(
            &within("frame", sink.recv()).await.unwrap().unwrap().payload[..],
            b"ok"
        );
        source.close().await.unwrap();
    }
    assert_eq!(router.stats().rejected.get("unauthorized"), Some(&2));
    router.shutdown().await;
}

/// Raw TCP sink that handshakes and then never reads.
async fn stuck_sink(router: &RouterHandle, tag: u32) -> TcpStream {
    let mut tcp = TcpStream::connect(router.tcp_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(&wire(hello(Role::Sink, &[tag], "")))
        .await
        .unwrap();
    tcp
}

#[tokio::test]
async fn a_client_that_stops_reading_is_evicted_under_block_and_nothing_is_lost_for_others() {
    let router = router(|c| {
        c.queue.policy = Policy::Block;
        c.queue.capacity = 64;
        c.queue.block_timeout_ms = 300;
    })
    .await;
    let _stuck = stuck_sink(&router, 0x30).await;
    let mut good = Sink::connect(options(&router, Transport::Tcp, "good"), &[0x30])
        .await
        .unwrap();
    eventually("both sinks admitted", || router.stats().connections == 2).await;
    // 2000 x 16 KiB = 32 MiB: far more than the kernel buffers of the stuck socket.
    const N: u64 = 2000;
    let received = Arc::new(AtomicU64::new(0));
    let reader = {
        let received = received.clone();
        tokio::spawn(async move {
            let mut last = None;
            while received.load(Ordering::Relaxed) < N {
                let Some(Ok(d)) = good.recv().await else {
                    break;
                };
                assert_eq!(d.payload.len(), 16 * 1024);
                if let Some(last) = last {
                    assert_eq!(d.id, last + 1, "in order, no gaps");
                }
                last = Some(d.id);
                received.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut source = Source::connect(options(&router, Transport::Tcp, "fast"))
        .await
        .unwrap();
    let payload = Bytes::from(vec![0xab; 16 * 1024]);
    for _ in 0..N {
        source.send(0x30, payload.clone()).await.unwrap();
    }
    source.flush().await.unwrap();
    within("the good sink to get everything", reader)
        .await
        .unwrap();
    assert_eq!(
        received.load(Ordering::Relaxed),
        N,
        "lossless for the live sink"
    );
    let stats = router.stats();
    assert!(stats.drops(Drop::SlowConsumer) > 0, "{stats:?}");
    assert_eq!(stats.connections, 2, "the stuck sink is gone: {stats:?}");
    source.close().await.unwrap();
    router.shutdown().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_costs_counted_drops_under_drop_oldest() {
    let router = router(|c| {
        c.queue.policy = Policy::DropOldest;
        c.queue.capacity = 64;
    })
    .await;
    let _stuck = stuck_sink(&router, 0x31).await;
    eventually("stuck sink admitted", || router.stats().connections == 1).await;
    let mut source = Source::connect(options(&router, Transport::Tcp, "fast"))
        .await
        .unwrap();
    const N: u64 = 2000;
    let payload = Bytes::from(vec![0xcd; 16 * 1024]);
    for _ in 0..N {
        source.send(0x31, payload.clone()).await.unwrap();
    }
    source.flush().await.unwrap();
    eventually("every frame read", || router.stats().frames_in == N).await;
    let stats = router.stats();
    let dropped = stats.drops(Drop::QueueFull);
    assert!(dropped > 0, "{stats:?}");
    // Bounded memory: at most the queue capacity waits in the router for the stuck sink.
    assert!(stats.queued <= 64, "{stats:?}");
    bystanders_still_served(&router, Transport::Tcp).await;
    source.close().await.unwrap();
    router.shutdown().await;
}

/// Source → function (0x40 → 0x41) → sink, with the function killed and restarted.
#[tokio::test]
async fn a_function_killed_mid_stream_and_restarted() {
    let router = router(|_| {}).await;
    let function = |router: &RouterHandle| {
        let f = StreamFunction::new(options(router, Transport::Quic, "doubler"), &[0x40]);
        tokio::spawn(f.run(|d| async move {
            let doubled: Vec<u8> = d.payload.iter().map(|b| b.wrapping_mul(2)).collect();
            Some((0x41, doubled.into()))
        }))
    };
    let mut sink = Sink::connect(options(&router, Transport::Tcp, "sink"), &[0x41])
        .await
        .unwrap();
    let f1 = function(&router);
    eventually("function subscribed", || router.stats().connections == 2).await;
    let mut source = Source::connect(options(&router, Transport::Tcp, "sensor"))
        .await
        .unwrap();
    let mut sent = 0u64;
    let mut got = Vec::new();
    // Phase 1: through the first function.
    for _ in 0..200 {
        source.send(0x40, vec![(sent % 100) as u8]).await.unwrap();
        sent += 1;
    }
    source.flush().await.unwrap();
    while got.len() < 200 {
        got.push(
            within("phase 1 output", sink.recv())
                .await
                .unwrap()
                .unwrap()
                .id,
        );
    }
    // Kill it mid-stream: frames keep coming.
    f1.abort();
    for _ in 0..200 {
        source.send(0x40, vec![1]).await.unwrap();
        sent += 1;
    }
    source.flush().await.unwrap();
    eventually("the dead function unsubscribed", || {
        router.stats().connections == 2
    })
    .await;
    // Restart it; outputs flow again.
    let f2 = function(&router);
    eventually("function back", || router.stats().connections == 3).await;
    let restart_at = sent;
    for _ in 0..200 {
        source.send(0x40, vec![3]).await.unwrap();
        sent += 1;
    }
    source.flush().await.unwrap();
    let mut after = 0;
    while after < 200 {
        let d = within("phase 3 output", sink.recv())
            .await
            .unwrap()
            .unwrap();
        if d.id > restart_at {
            assert_eq!(&d.payload[..], [6]);
            after += 1;
        }
        got.push(d.id);
    }
    // Ids only increase: no frame delivered twice, none reordered.
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
    let stats = router.stats();
    // Frames sent while no function was connected are counted, not silently lost.
    let counted = stats.drops(Drop::NoSubscriber) + stats.drops(Drop::Disconnected);
    assert!(got.len() as u64 + counted <= sent);
    bystanders_still_served(&router, Transport::Quic).await;
    f2.abort();
    source.close().await.unwrap();
    router.shutdown().await;
}

/// Under the block policy, with tiny queues that keep every hop blocking, two sources'
/// frames all reach the sinks through a function: sent == received, exactly.
#[tokio::test]
async fn block_policy_is_lossless_through_a_pipeline() {
    let router = router(|c| {
        c.queue.policy = Policy::Block;
        c.queue.capacity = 4;
    })
    .await;
    for transport in [Transport::Tcp, Transport::Quic] {
        let f = StreamFunction::new(options(&router, transport, "id"), &[0x50]);
        let f = tokio::spawn(f.run(|d| async move { Some((0x51, d.payload)) }));
        let mut sinks = Vec::new();
        for name in ["a", "b"] {
            sinks.push(
                Sink::connect(options(&router, transport, name), &[0x51])
                    .await
                    .unwrap(),
            );
        }
        eventually("pipeline up", || router.stats().connections == 3).await;
        const N: u64 = 3000;
        let mut sources = Vec::new();
        for s in 0..2u8 {
            let opts = options(&router, transport, "src");
            sources.push(tokio::spawn(async move {
                let mut source = Source::connect(opts).await.unwrap();
                for i in 0..N {
                    let mut payload = vec![s];
                    payload.extend_from_slice(&i.to_be_bytes());
                    source.send(0x50, payload).await.unwrap();
                }
                source.close().await.unwrap();
            }));
        }
        for sink in &mut sinks {
            let mut next = [0u64; 2];
            for _ in 0..2 * N {
                let d = within("pipeline output", sink.recv())
                    .await
                    .unwrap()
                    .unwrap();
                let s = d.payload[0] as usize;
                let i = u64::from_be_bytes(d.payload[1..9].try_into().unwrap());
                assert_eq!(i, next[s], "per-source order, no gaps");
                next[s] += 1;
            }
            assert_eq!(next, [N, N]);
        }
        for s in sources {
            within("sources done", s).await.unwrap();
        }
        f.abort();
        for sink in sinks {
            sink.close().await;
        }
        eventually("clients gone", || router.stats().connections == 0).await;
    }
    assert_eq!(router.stats().total_drops(), 0, "{:?}", router.stats());
    router.shutdown().await;
}

/// A shutdown while frames are in flight delivers every frame the source got onto the
/// wire, through a function, before closing.
#[tokio::test]
async fn shutdown_drains_in_flight_frames() {
    for transport in [Transport::Tcp, Transport::Quic] {
        let router = router(|c| c.queue.capacity = 16).await;
        let f = StreamFunction::new(options(&router, transport, "f"), &[0x60]);
        let f = tokio::spawn(f.run(|d| async move { Some((0x61, d.payload)) }));
        let mut sink = Sink::connect(options(&router, transport, "sink"), &[0x61])
            .await
            .unwrap();
        eventually("pipeline up", || router.stats().connections == 2).await;
        let mut source = Source::connect(options(&router, transport, "src"))
            .await
            .unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let sending = {
            let accepted = accepted.clone();
            tokio::spawn(async move {
                for i in 0..100_000u64 {
                    match source.send(0x60, i.to_be_bytes().to_vec()).await {
                        Ok(_) => accepted.fetch_add(1, Ordering::Relaxed),
                        Err(TransportError::Goaway { code }) => {
                            assert_eq!(code, GoawayCode::ShuttingDown);
                            break;
                        }
                        Err(e) => panic!("{e}"),
                    };
                }
                let _ = source.close().await;
            })
        };
        eventually("traffic flowing", || router.stats().frames_out > 500).await;
        let stats = within("shutdown", router.shutdown()).await;
        within("source stopped", sending).await.unwrap();
        let accepted = accepted.load(Ordering::Relaxed);
        let mut received = 0u64;
        while let Ok(Some(Ok(d))) = tokio::time::timeout(Duration::from_secs(2), sink.recv()).await
        {
            assert_eq!(
                u64::from_be_bytes(d.payload[..].try_into().unwrap()),
                received
            );
            received += 1;
            if received == accepted {
                break;
            }
        }
        assert_eq!(received, accepted, "{transport:?}: {stats:?}");
        assert_eq!(stats.total_drops(), 0, "{stats:?}");
        f.abort();
    }
}

#[tokio::test]
async fn metrics_endpoint_serves_prometheus_text() {
    let router = router(|c| c.listen.metrics = "127.0.0.1:0".into()).await;
    bystanders_still_served(&router, Transport::Tcp).await;
    let mut tcp = TcpStream::connect(router.metrics_addr().unwrap())
        .await
        .unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    within("metrics", tcp.read_to_string(&mut text))
        .await
        .unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("y3_router_frames_in_total{tag=\"0x77\"} 10"),
        "{text}"
    );
    assert!(
        text.contains("y3_router_handler_latency_seconds_bucket"),
        "{text}"
    );
    router.shutdown().await;
}

#[tokio::test]
async fn client_options_without_trust_fail_clearly_for_quic() {
    let router = router(|_| {}).await;
    let opts = ClientOptions::new(router.quic_addr().unwrap()).transport(Transport::Quic);
    let err = Source::connect(opts)
        .await
        .err()
        .expect("no trust configured");
    assert_eq!(err.kind(), "config");
    router.shutdown().await;
}

/// Clients ride out a router restart: the source reports the goaway once and reconnects on
/// its next send; the sink reconnects by itself with backoff.
#[tokio::test]
async fn clients_reconnect_after_a_router_restart() {
    let first = router(|c| c.listen.quic = String::new()).await;
    let addr = first.tcp_addr().unwrap();
    let patient = |name: &str| {
        ClientOptions::new(addr)
            .name(name)
            .backoff(y3_transport::sdk::Backoff {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(100),
                attempts: 50,
            })
    };
    let mut sink = Sink::connect(patient("sink"), &[0x70]).await.unwrap();
    let mut source = Source::connect(patient("source")).await.unwrap();
    source.send(0x70, &b"before"[..]).await.unwrap();
    source.flush().await.unwrap();
    let d = within("first frame", sink.recv()).await.unwrap().unwrap();
    assert_eq!(&d.payload[..], b"before");

    first.shutdown().await;
    let second = router(|c| {
        c.listen.tcp = addr.to_string();
        c.listen.quic = String::new();
    })
    .await;
    // The source learns about the shutdown once...
    let mut refused = 0;
    let mut sent = false;
    for _ in 0..3 {
        match source.send(0x70, &b"after"[..]).await {
            Ok(_) => {
                sent = true;
                break;
            }
            Err(TransportError::Goaway { code }) => {
                assert_eq!(code, GoawayCode::ShuttingDown);
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sent && refused <= 1, "sent {sent}, refused {refused}");
    // ...and the sink comes back on its own; resend until it is subscribed again.
    let got = within("a frame after the restart", async {
        loop {
            source.flush().await.unwrap();
            match tokio::time::timeout(Duration::from_millis(100), sink.recv()).await {
                Ok(Some(Ok(d))) => break d,
                Ok(other) => panic!("{other:?}"),
                Err(_) => {
                    source.send(0x70, &b"after"[..]).await.unwrap();
                }
            }
        }
    })
    .await;
    assert_eq!(&got.payload[..], b"after");
    source.close().await.unwrap();
    second.shutdown().await;
}
