//! The real router driven over in-memory pipes (quinn's `Pair` idea): fake sources, stream
//! functions and sinks exchange raw frames with it, no sockets involved.

mod common;

use std::time::Duration;

use common::*;
use futures_util::SinkExt;
use y3_router::metrics::Drop;
use y3_transport::frame::{Data, Frame, GoawayCode, Role};

#[tokio::test]
async fn source_function_sink_pipeline() {
    let router = router(|_| {}).await;
    let mut sink = admit(router.connect_in_memory(), Role::Sink, &[0x11]).await;
    let mut function = admit(router.connect_in_memory(), Role::StreamFunction, &[0x10]).await;
    let mut source = admit(router.connect_in_memory(), Role::Source, &[]).await;

    send_all(&mut source, 0x10, 0..100, b"in").await;
    for id in 0..100 {
        let input = next_data(&mut function).await;
        assert_eq!(
            (input.tag, input.id, &input.payload[..]),
            (0x10, id, &b"in"[..])
        );
        let output = Data {
            tag: 0x11,
            hops: input.hops + 1,
            ..Data::new(0x11, input.id, &b"out"[..])
        };
        function.writer.send(Frame::Data(output)).await.unwrap();
    }
    for id in 0..100 {
        let d = next_data(&mut sink).await;
        assert_eq!(
            (d.tag, d.id, d.hops, &d.payload[..]),
            (0x11, id, 1, &b"out"[..])
        );
    }
    let stats = router.stats();
    assert_eq!((stats.frames_in, stats.frames_out), (200, 200));
    assert_eq!(stats.total_drops(), 0);
    let text = router.metrics().encode();
    assert!(
        text.contains("y3_router_frames_in_total{tag=\"0x10\"} 100"),
        "{text}"
    );
    assert!(text.contains("y3_router_connections{role=\"stream_function\"} 1"));
    drop(source);
    router.shutdown().await;
}

#[tokio::test]
async fn output_never_loops_back_to_its_issuer() {
    let router = router(|_| {}).await;
    // A function that observes the very tag it emits, and a sink on that tag.
    let mut function = admit(router.connect_in_memory(), Role::StreamFunction, &[0x10]).await;
    let mut sink = admit(router.connect_in_memory(), Role::Sink, &[0x10]).await;
    send_all(&mut function, 0x10, 0..3, b"x").await;
    for id in 0..3 {
        assert_eq!(next_data(&mut sink).await.id, id);
    }
    // The function got nothing back: its next frame is the pong to this ping.
    function.writer.send(Frame::Ping(7)).await.unwrap();
    assert!(matches!(
        next(&mut function).await,
        Some(Ok(Frame::Pong(7)))
    ));
    router.shutdown().await;
}

#[tokio::test]
async fn function_loops_stop_at_the_hop_limit() {
    let router = router(|c| c.limits.max_hops = 4).await;
    // f1: 0x10 -> 0x11, f2: 0x11 -> 0x10, forever, unless the router cuts the loop.
    let f1 = admit(router.connect_in_memory(), Role::StreamFunction, &[0x10]).await;
    let f2 = admit(router.connect_in_memory(), Role::StreamFunction, &[0x11]).await;
    let mut source = admit(router.connect_in_memory(), Role::Source, &[]).await;
    send_all(&mut source, 0x10, 0..1, b"ping-pong").await;
    let mut hops_seen = Vec::new();
    let mut functions = [(f1, 0x11), (f2, 0x10)];
    for step in 0..10 {
        let (f, out_tag) = &mut functions[step % 2];
        let d = next_data(f).await;
        hops_seen.push(d.hops);
        let out = Data {
            tag: *out_tag,
            hops: d.hops + 1,
            ..d
        };
        let last = out.hops > 4;
        f.writer.send(Frame::Data(out)).await.unwrap();
        if last {
            break;
        }
    }
    assert_eq!(hops_seen, [0, 1, 2, 3, 4]);
    eventually("the loop drop to be counted", || {
        router.stats().drops(Drop::Loop) == 1
    })
    .await;
    drop(source);
    router.shutdown().await;
}

#[tokio::test]
async fn protocol_violations_get_a_goaway() {
    let router = router(|_| {}).await;
    // A sink that sends data.
    let mut sink = admit(router.connect_in_memory(), Role::Sink, &[0x10]).await;
    send_all(&mut sink, 0x10, 0..1, b"no").await;
    match next(&mut sink).await {
        Some(Ok(Frame::Goaway(g))) => assert_eq!(g.code, GoawayCode::ProtocolError),
        other => panic!("{other:?}"),
    }
    // Data before the handshake.
    let mut early = router.connect_in_memory();
    send_all(&mut early, 0x10, 0..1, b"early").await;
    match next(&mut early).await {
        Some(Ok(Frame::Goaway(g))) => assert_eq!(g.code, GoawayCode::ProtocolError),
        other => panic!("{other:?}"),
    }
    // A second handshake.
    let mut twice = admit(router.connect_in_memory(), Role::Source, &[]).await;
    twice
        .writer
        .send(hello(Role::Source, &[], ""))
        .await
        .unwrap();
    match next(&mut twice).await {
        Some(Ok(Frame::Goaway(g))) => assert_eq!(g.code, GoawayCode::ProtocolError),
        other => panic!("{other:?}"),
    }
    eventually("rejections counted", || {
        router.stats().rejected.get("protocol_error") == Some(&1)
    })
    .await;
    router.shutdown().await;
}

#[tokio::test]
async fn silent_clients_time_out() {
    let router = router(|c| c.limits.handshake_timeout_ms = 100).await;
    let mut silent = router.connect_in_memory();
    match next(&mut silent).await {
        Some(Ok(Frame::Goaway(g))) => assert_eq!(g.code, GoawayCode::HandshakeTimeout),
        other => panic!("{other:?}"),
    }
    assert!(next(&mut silent).await.is_none(), "closed after the goaway");
    assert_eq!(router.stats().rejected.get("handshake_timeout"), Some(&1));
    router.shutdown().await;
}

#[tokio::test]
async fn connection_limit() {
    let router = router(|c| c.limits.max_connections = 2).await;
    let _a = admit(router.connect_in_memory(), Role::Sink, &[0x10]).await;
    let _b = admit(router.connect_in_memory(), Role::Sink, &[0x10]).await;
    let mut c = router.connect_in_memory();
    c.writer.send(hello(Role::Sink, &[0x10], "")).await.unwrap();
    match next(&mut c).await {
        Some(Ok(Frame::Goaway(g))) => assert_eq!(g.code, GoawayCode::TooManyConnections),
        other => panic!("{other:?}"),
    }
    router.shutdown().await;
}

#[tokio::test]
async fn drop_oldest_counts_what_a_stuck_subscriber_misses() {
    let router = router(|c| {
        c.queue.policy = y3_router::Policy::DropOldest;
        c.queue.capacity = 8;
    })
    .await;
    // The in-memory pipe holds 256 KiB; 1 KiB payloads overflow it and the queue.
    let _stuck = admit(router.connect_in_memory(), Role::Sink, &[0x10]).await;
    let mut source = admit(router.connect_in_memory(), Role::Source, &[]).await;
    send_all(&mut source, 0x10, 0..1000, &[0u8; 1024]).await;
    eventually("all frames read", || router.stats().frames_in == 1000).await;
    let stats = router.stats();
    assert!(stats.drops(Drop::QueueFull) >= 1000 - 300, "{stats:?}");
    // Every frame is delivered, queued, counted as dropped, or in the writer's one batch
    // (at most the queue capacity) waiting for the pipe.
    let accounted = stats.frames_out + stats.queued + stats.drops(Drop::QueueFull);
    assert!((1000 - 8..=1000).contains(&accounted), "{stats:?}");
    // Sources never wait under drop-oldest: the source is still served.
    source.writer.send(Frame::Ping(1)).await.unwrap();
    assert!(matches!(next(&mut source).await, Some(Ok(Frame::Pong(1)))));
    drop(router);
    tokio::time::sleep(Duration::from_millis(10)).await;
}
