//! The real router driven over in-memory pipes (quinn's `Pair` idea): fake sources and
//! stream functions exchange raw frames with it, no sockets involved. These tests pin
//! YoMo v1.22's routing rules (`spec/frames.md`, "Routing") and y3's extensions.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures_util::SinkExt;
use hex_literal::hex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use y3_router::metrics::Drop;
use y3_transport::frame::{ClientType, Data, Frame, Goaway, GoawayCode};
use y3_transport::metadata::{self, Metadata};

/// Closes a raw client's write half and returns the data frames it still received
/// before the router ended the stream.
async fn leftover_data(conn: &mut y3_transport::Connection) -> Vec<Data> {
    conn.writer.close().await.unwrap();
    rest(conn)
        .await
        .into_iter()
        .filter_map(|f| match f {
            Frame::Data(d) => Some(d),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn source_function_sink_pipeline() {
    let router = router(|_| {}).await;
    // A y3 sink is a stream function that never writes.
    let mut sink = join(&router, ClientType::StreamFunction, &[0x11]).await;
    let mut function = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;

    send_all(&mut source, 0x10, 0..100, b"in").await;
    for i in 0..100 {
        let input = next_data(&mut function).await;
        assert_eq!(
            (input.tag, seq(&input), input.hops, &input.payload[..]),
            (0x10, i, 0, &b"in"[..])
        );
        // As YoMo's functions do: the input's metadata, one more hop.
        let mut output = Data::new(0x11, &b"out"[..]).with_metadata(input.metadata.clone());
        output.hops = input.hops + 1;
        function.writer.send(Frame::Data(output)).await.unwrap();
    }
    for i in 0..100 {
        let d = next_data(&mut sink).await;
        assert_eq!(
            (d.tag, seq(&d), d.hops, &d.payload[..]),
            (0x11, i, 1, &b"out"[..])
        );
    }
    // Counted once written, which may be just after the sink read them.
    eventually("every frame counted", || router.stats().frames_out == 200).await;
    let stats = router.stats();
    assert_eq!((stats.frames_in, stats.frames_out), (200, 200));
    assert_eq!(stats.total_drops(), 0);
    assert_eq!(stats.connections, 3);
    let text = router.metrics().encode();
    assert!(
        text.contains("y3_router_frames_in_total{tag=\"0x10\"} 100"),
        "{text}"
    );
    assert!(
        text.contains("y3_router_connections{client_type=\"stream_function\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("y3_router_connections{client_type=\"source\"} 1"),
        "{text}"
    );
    drop(source);
    ledger(&router).await;
    router.shutdown().await;
}

/// YoMo's rule: every stream function observing the tag gets the frame, the sender too
/// when it observes the tag; whatever else observes it does not.
#[tokio::test]
async fn every_observing_function_gets_the_frame_the_sender_included() {
    let router = router(|_| {}).await;
    let mut function = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut other = join(&router, ClientType::StreamFunction, &[0x10, 0x12]).await;
    let mut yomo = admit(
        router.connect_in_memory(),
        yomo_hello(ClientType::StreamFunction, &[0x10]),
    )
    .await;
    // Clients that never receive, whatever their handshakes say they observe.
    let mut source = join(&router, ClientType::Source, &[0x10]).await;
    let mut upstream = join(&router, ClientType::UpstreamZipper, &[0x10]).await;
    let mut odd = join(&router, ClientType::Other(0x01), &[0x10]).await;
    assert_eq!(
        router.stats().connections,
        6,
        "every admitted client type counts"
    );

    send_all(&mut function, 0x10, 0..3, b"x").await;
    for f in [&mut function, &mut other, &mut yomo] {
        for i in 0..3 {
            assert_eq!(seq(&next_data(f).await), i);
        }
    }
    // From a source as well: every function, and still not the source itself.
    send_all(&mut source, 0x10, 3..4, b"y").await;
    for f in [&mut function, &mut other, &mut yomo] {
        assert_eq!(seq(&next_data(f).await), 3);
    }
    // Every route above has completed (each function got every frame), so a frame for a
    // non-receiver would be queued by now.
    for c in [&mut source, &mut upstream, &mut odd] {
        assert_eq!(leftover_data(c).await, []);
    }
    // A tag only one function observes: only that one.
    send_all(&mut function, 0x12, 4..5, b"z").await;
    assert_eq!(seq(&next_data(&mut other).await), 4);
    assert_eq!(leftover_data(&mut function).await, []);
    assert_eq!(leftover_data(&mut yomo).await, []);
    eventually("every frame counted", || {
        router.stats().frames_out == 3 * 3 + 3 + 1
    })
    .await;
    drop(other);
    ledger(&router).await;
    router.shutdown().await;
}

/// `yomo-target` picks the functions whose wanted target equals it; untargeted frames
/// reach every observer, whatever it wants; a target nobody wants is a counted drop.
#[tokio::test]
async fn wanted_targets_select_functions() {
    let router = router(|_| {}).await;
    let mut fa = admit(router.connect_in_memory(), wanting(&[0x33], "a")).await;
    let mut fb = admit(router.connect_in_memory(), wanting(&[0x33], "b")).await;
    let mut plain = join(&router, ClientType::StreamFunction, &[0x33]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;

    let targeted = |i: u64, target: &str| {
        let md =
            Metadata::from_pairs([(metadata::TID, tid(i).as_str()), (metadata::TARGET, target)]);
        Frame::Data(Data::new(0x33, &b"t"[..]).with_metadata(md))
    };
    source.writer.feed(targeted(0, "a")).await.unwrap();
    source.writer.feed(targeted(1, "c")).await.unwrap();
    source.writer.flush().await.unwrap();
    // The untargeted frame comes after the targeted ones on the same connection, so it is
    // routed after them: each function's first frame says what it got before.
    send_all(&mut source, 0x33, 2..3, b"u").await;
    let d = next_data(&mut fa).await;
    assert_eq!(
        (seq(&d), d.metadata.get(metadata::TARGET).unwrap()),
        (0, Some("a"))
    );
    assert_eq!(seq(&next_data(&mut fa).await), 2);
    assert_eq!(seq(&next_data(&mut fb).await), 2, "fb wants b, not a");
    assert_eq!(
        seq(&next_data(&mut plain).await),
        2,
        "plain wants no target"
    );
    assert_eq!(
        router.stats().drops(Drop::NoSubscriber),
        1,
        "the frame for c"
    );

    // A function's targeted output reaches only the function it names.
    fa.writer.send(targeted(3, "b")).await.unwrap();
    send_all(&mut fa, 0x33, 4..5, b"u").await;
    let d = next_data(&mut fb).await;
    assert_eq!(seq(&d), 3);
    assert_eq!(d.metadata.get(metadata::WANTED_TARGET).unwrap(), Some("a"));
    assert_eq!(seq(&next_data(&mut fb).await), 4);
    assert_eq!(
        seq(&next_data(&mut fa).await),
        4,
        "fa is not b: only the untargeted one"
    );
    assert_eq!(seq(&next_data(&mut plain).await), 4);
    drop((fa, fb, plain, source));
    ledger(&router).await;
    router.shutdown().await;
}

/// The sender's wanted target is merged into what it sends (over a forged one), and the
/// reducer tag 0xE001 loses its `yomo-target`.
#[tokio::test]
async fn metadata_rules_of_the_router() {
    let router = router(|_| {}).await;
    let mut fa = admit(router.connect_in_memory(), wanting(&[0x33, 0xe001], "a")).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x44, 0xe001]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;

    let md = Metadata::from_pairs([(metadata::TID, "t1"), ("k", "v")]);
    fa.writer
        .send(Frame::Data(Data::new(0x44, &b"1"[..]).with_metadata(md)))
        .await
        .unwrap();
    let map = next_data(&mut sink).await.metadata.to_map().unwrap();
    assert_eq!(map.len(), 3, "{map:?}");
    assert_eq!(
        (
            &map[metadata::TID][..],
            &map["k"][..],
            &map[metadata::WANTED_TARGET][..]
        ),
        ("t1", "v", "a")
    );
    let forged = Metadata::from_pairs([(metadata::WANTED_TARGET, "b")]);
    fa.writer
        .send(Frame::Data(
            Data::new(0x44, &b"2"[..]).with_metadata(forged.clone()),
        ))
        .await
        .unwrap();
    let d = next_data(&mut sink).await;
    assert_eq!(d.metadata.get(metadata::WANTED_TARGET).unwrap(), Some("a"));
    // A sender without a wanted target has nothing merged: its frame passes as it is.
    source
        .writer
        .send(Frame::Data(
            Data::new(0x44, &b"3"[..]).with_metadata(forged.clone()),
        ))
        .await
        .unwrap();
    assert_eq!(next_data(&mut sink).await.metadata, forged);

    // The reducer tag: the target goes, so every observer gets it, the rest stays.
    let md = Metadata::from_pairs([(metadata::TID, "t2"), (metadata::TARGET, "nobody")]);
    source
        .writer
        .send(Frame::Data(Data::new(0xe001, &b"r"[..]).with_metadata(md)))
        .await
        .unwrap();
    for f in [&mut fa, &mut sink] {
        let d = next_data(f).await;
        assert_eq!(d.tag, 0xe001);
        assert_eq!(d.metadata.get(metadata::TARGET).unwrap(), None);
        assert_eq!(d.metadata.get(metadata::TID).unwrap(), Some("t2"));
    }
    assert_eq!(router.stats().total_drops(), 0);
    drop((fa, sink, source));
    ledger(&router).await;
    router.shutdown().await;
}

/// What the router does not need to change, it forwards as it arrived: a source's
/// `yomo-tid` and `yomo-source-id` byte for byte, and an unchanged frame as the same bytes,
/// even in a layout y3's encoder would not write.
#[tokio::test]
async fn unchanged_frames_pass_through_byte_identical() {
    let router = router(|_| {}).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x33]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    let md = Metadata::from_pairs([
        (metadata::SOURCE_ID, "oJpidoxJNrbDOEh6DbC0x"),
        (metadata::TID, "tid-0001"),
        ("custom", "ü 😀"),
    ]);
    let sent = Data::new(0x33, &b"hello"[..]).with_metadata(md.clone());
    source.writer.send(Frame::Data(sent.clone())).await.unwrap();
    let got = next_data(&mut sink).await;
    assert_eq!(got, sent);
    assert_eq!(got.metadata.as_bytes(), md.as_bytes());
    assert_eq!(
        got.wire().map(|w| w.to_vec()),
        Some(wire(Frame::Data(sent))),
        "forwarded as the bytes written"
    );

    // By hand: payload before metadata, metadata as a map16 with str8/str16 strings (another
    // msgpack encoder's choice), and a field no one knows (0x20).
    let mut raw = raw_in_memory(&router, 1 << 20);
    raw.write_all(&wire(Frame::from(yomo_hello(ClientType::Source, &[]))))
        .await
        .unwrap();
    let mut ack = [0u8; 2];
    within("the ack", raw.read_exact(&mut ack)).await.unwrap();
    assert_eq!(ack, hex!("a900"));
    #[rustfmt::skip]
    let frame = hex!(
        "bf 23"
        "01 01 33"                                     // tag 0x33
        "02 02 6869"                                   // payload "hi"
        "20 03 010203"                                 // unknown field 0x20
        "03 15 de0001 d908 796f6d6f2d746964 da0005 742d303031" // {"yomo-tid": "t-001"}
    );
    raw.write_all(&frame).await.unwrap();
    let got = next_data(&mut sink).await;
    assert_eq!((got.tag, &got.payload[..]), (0x33, &b"hi"[..]));
    assert_eq!(got.metadata.get(metadata::TID).unwrap(), Some("t-001"));
    assert_eq!(got.wire().map(|w| &w[..]), Some(&frame[..]));
    drop((source, raw));
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn function_loops_stop_at_the_hop_limit() {
    let router = router(|c| c.limits.max_hops = 4).await;
    // f1: 0x10 -> 0x11, f2: 0x11 -> 0x10, forever, unless the router cuts the loop.
    let f1 = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let f2 = join(&router, ClientType::StreamFunction, &[0x11]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x10, 0..1, b"ping-pong").await;
    let mut hops_seen = Vec::new();
    let mut functions = [(f1, 0x11), (f2, 0x10)];
    for step in 0..10 {
        let (f, out_tag) = &mut functions[step % 2];
        let d = next_data(f).await;
        hops_seen.push(d.hops);
        let mut out = Data::new(*out_tag, d.payload).with_metadata(d.metadata);
        out.hops = d.hops + 1;
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
    // The dropped frame went nowhere, and its sender is still served.
    let [(mut f1, _), (mut f2, _)] = functions;
    send_all(&mut f2, 0x10, 9..10, b"again").await;
    assert_eq!(seq(&next_data(&mut f1).await), 9);
    drop(source);
    ledger(&router).await;
    router.shutdown().await;
}

/// Frames a client never sends, a second handshake, data before the handshake: the
/// router ends the connection with a reason and counts it. y3 clients read the reason
/// in a goaway frame; YoMo's clients get no goaway (they would give up for good), only the
/// end of the stream.
#[tokio::test]
async fn protocol_violations_close_the_connection() {
    let router = router(|_| {}).await;
    let misplaced = [
        Frame::HandshakeAck,
        Frame::Rejected(Goaway::new(GoawayCode::Normal, "no")),
        Frame::Goaway(Goaway::new(GoawayCode::Normal, "bye")),
        Frame::ConnectTo("127.0.0.1:1".into()),
        Frame::from(hello(ClientType::Source, &[])),
    ];
    for frame in &misplaced {
        let mut c = join(&router, ClientType::StreamFunction, &[0x10]).await;
        c.writer.send(frame.clone()).await.unwrap();
        let got = rest(&mut c).await;
        assert_eq!(goaway_code(&got), GoawayCode::ProtocolError, "{frame:?}");
        assert_eq!(got.len(), 1, "{got:?}");
    }
    for frame in &misplaced {
        let mut c = admit(
            router.connect_in_memory(),
            yomo_hello(ClientType::Source, &[]),
        )
        .await;
        c.writer.send(frame.clone()).await.unwrap();
        assert_eq!(rest(&mut c).await, [], "{frame:?}");
    }
    // Data before the handshake: refused with a rejected frame, then closed.
    let mut early = router.connect_in_memory();
    send_all(&mut early, 0x10, 0..1, b"early").await;
    let got = rest(&mut early).await;
    assert_eq!(rejection(&got).code, GoawayCode::ProtocolError);
    assert_eq!(got.len(), 1, "{got:?}");
    eventually("every violation counted", || {
        protocol_errors(&router, "protocol_error") == 10
    })
    .await;
    assert_eq!(router.stats().rejected.get("protocol_error"), Some(&1));
    // Everyone else goes on.
    let mut sink = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x10, 0..1, b"fine").await;
    assert_eq!(seq(&next_data(&mut sink).await), 0);
    drop((sink, source));
    ledger(&router).await;
    router.shutdown().await;
}

/// Tags 0xF000..=0xFFFF are refused as `yomo serve` refuses them: not routed, the sender
/// closed (`reserved_tag`).
#[tokio::test]
async fn reserved_tags_close_the_sender() {
    let router = router(|_| {}).await;
    let mut observer = join(
        &router,
        ClientType::StreamFunction,
        &[0xf000, 0xffff, 0xefff],
    )
    .await;
    let mut y3 = join(&router, ClientType::Source, &[]).await;
    send_all(&mut y3, 0xefff, 0..1, b"ok").await;
    assert_eq!(seq(&next_data(&mut observer).await), 0);
    send_all(&mut y3, 0xf000, 1..2, b"no").await;
    let got = rest(&mut y3).await;
    assert_eq!(goaway_code(&got), GoawayCode::ReservedTag);
    assert_eq!(got.len(), 1, "{got:?}");
    let mut yomo = admit(
        router.connect_in_memory(),
        yomo_hello(ClientType::Source, &[]),
    )
    .await;
    send_all(&mut yomo, 0xffff, 2..3, b"no").await;
    assert_eq!(rest(&mut yomo).await, []);
    // A function writing one is closed the same way.
    let mut f = join(&router, ClientType::StreamFunction, &[0x10]).await;
    send_all(&mut f, 0xf123, 3..4, b"no").await;
    assert_eq!(goaway_code(&rest(&mut f).await), GoawayCode::ReservedTag);
    assert_eq!(protocol_errors(&router, "reserved_tag"), 3);
    assert_eq!(
        router.stats().frames_in,
        1,
        "reserved frames are not routed"
    );
    assert_eq!(leftover_data(&mut observer).await, []);
    ledger(&router).await;
    router.shutdown().await;
}

/// Metadata that is not a msgpack string map is a protocol error of its sender
/// (`bad_metadata`); it is not forwarded. (A string that is not UTF-8 is not malformed:
/// see `metadata_strings_are_bytes_as_on_yomo`.)
#[tokio::test]
async fn undecodable_metadata_closes_the_sender() {
    let router = router(|_| {}).await;
    let mut sink = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let bad = |bytes: &'static [u8]| {
        Frame::Data(
            Data::new(0x10, &b"x"[..])
                .with_metadata(Metadata::from_bytes(Bytes::from_static(bytes))),
        )
    };
    for (bytes, what) in [
        (&hex!("81 a161")[..], "truncated"),
        (&hex!("81 a161 01")[..], "not a string"),
        (&hex!("a3 616263")[..], "not a map"),
        (
            &hex!("82 a8 796f6d6f2d746964 a2ff00 a161 d905 61")[..],
            "string longer than the map",
        ),
        (&hex!("81 a161 c3")[..], "not a string"),
    ] {
        let mut y3 = join(&router, ClientType::Source, &[]).await;
        y3.writer.send(bad(bytes)).await.unwrap();
        let got = rest(&mut y3).await;
        let [Frame::Goaway(g)] = &got[..] else {
            panic!("{got:?}")
        };
        assert_eq!(g.code, GoawayCode::ProtocolError);
        assert!(g.reason.starts_with("bad_metadata"), "{}", g.reason);
        assert!(g.reason.contains(what), "{}", g.reason);
    }
    let mut yomo = admit(
        router.connect_in_memory(),
        yomo_hello(ClientType::Source, &[]),
    )
    .await;
    yomo.writer.send(bad(&hex!("c1"))).await.unwrap();
    assert_eq!(rest(&mut yomo).await, []);
    assert_eq!(protocol_errors(&router, "bad_metadata"), 6);
    assert_eq!(router.stats().frames_in, 0);
    assert_eq!(leftover_data(&mut sink).await, []);
    ledger(&router).await;
    router.shutdown().await;
}

/// A metadata string is bytes, as on YoMo's zipper (Go strings are bytes; its msgpack
/// decoder also reads bin and nil as strings): a tid, target, key or value that is not
/// UTF-8 is routed by its bytes and forwarded unchanged (edited maps included), and the
/// sender keeps its connection.
#[tokio::test]
async fn metadata_strings_are_bytes_as_on_yomo() {
    let router = router(|_| {}).await;
    let mut fa = admit(router.connect_in_memory(), wanting(&[0x10], "a")).await;
    let mut plain = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    // A function wanting "w": the router merges that into what it writes (an edit).
    let mut fw = admit(router.connect_in_memory(), wanting(&[0x99], "w")).await;
    let frame = |md: &'static [u8], payload: &'static [u8]| {
        Frame::Data(
            Data::new(0x10, payload).with_metadata(Metadata::from_bytes(Bytes::from_static(md))),
        )
    };
    // tid ff00, target "a" ff (nobody's), key fe with a bin value fe.
    let to_nobody =
        &hex!("83 a8 796f6d6f2d746964 a2ff00 ab 796f6d6f2d746172676574 a261ff a1fe c401fe");
    // tid ff01, target "a", key fe with a nil value.
    let to_a = &hex!("83 a8 796f6d6f2d746964 a2ff01 ab 796f6d6f2d746172676574 a161 a1fe c0");
    // tid ff02, untargeted.
    let to_all = &hex!("81 a8 796f6d6f2d746964 a2ff02");
    for f in [
        frame(to_nobody, b"0"),
        frame(to_a, b"1"),
        frame(to_all, b"2"),
    ] {
        source.writer.feed(f).await.unwrap();
    }
    source.writer.flush().await.unwrap();

    let got_a: Vec<Data> = vec![next_data(&mut fa).await, next_data(&mut fa).await];
    assert_eq!(got_a[0].payload, &b"1"[..]);
    assert_eq!(
        got_a[0].metadata.as_bytes(),
        &to_a[..],
        "forwarded as it came"
    );
    assert_eq!(got_a[1].metadata.as_bytes(), &to_all[..]);
    let d = next_data(&mut plain).await;
    assert_eq!(
        (&d.payload[..], d.metadata.as_bytes()),
        (&b"2"[..], &Bytes::from_static(to_all))
    );
    // The function's frame, edited to carry its wanted target: the tid kept as it was.
    fw.writer.send(frame(to_all, b"3")).await.unwrap();
    for d in [next_data(&mut fa).await, next_data(&mut plain).await] {
        assert_eq!(d.payload, &b"3"[..]);
        assert_eq!(
            d.metadata.get_bytes(metadata::TID).unwrap(),
            Some(&hex!("ff02")[..])
        );
        assert_eq!(d.metadata.get(metadata::WANTED_TARGET).unwrap(), Some("w"));
    }
    assert_eq!(
        router.stats().drops(Drop::NoSubscriber),
        1,
        "the frame for a ff"
    );
    assert_eq!(protocol_errors(&router, "bad_metadata"), 0);
    // Both writers are still served.
    send_all(&mut source, 0x10, 4..5, b"u").await;
    assert_eq!(seq(&next_data(&mut plain).await), 4);
    assert_eq!(leftover_data(&mut fa).await.len(), 1);
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn silent_clients_time_out() {
    let router = router(|c| c.limits.handshake_timeout_ms = 100).await;
    let mut silent = router.connect_in_memory();
    let got = rest(&mut silent).await;
    assert_eq!(rejection(&got).code, GoawayCode::HandshakeTimeout);
    assert_eq!(got.len(), 1, "closed after the rejection: {got:?}");
    assert_eq!(router.stats().rejected.get("handshake_timeout"), Some(&1));
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn connection_limit() {
    let router = router(|c| c.limits.max_connections = 2).await;
    let a = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let b = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut c = router.connect_in_memory();
    c.writer
        .send(Frame::from(hello(ClientType::StreamFunction, &[0x10])))
        .await
        .unwrap();
    let got = rest(&mut c).await;
    assert_eq!(rejection(&got).code, GoawayCode::TooManyConnections);
    assert_eq!(
        router.stats().rejected.get("too_many_connections"),
        Some(&1)
    );
    drop((a, b));
    ledger(&router).await;
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
    let _stuck = join(&router, ClientType::StreamFunction, &[0x10]).await;
    let mut source = join(&router, ClientType::Source, &[]).await;
    send_all(&mut source, 0x10, 0..1000, &[0u8; 1024]).await;
    eventually("all frames read", || router.stats().frames_in == 1000).await;
    let stats = router.stats();
    assert!(stats.drops(Drop::QueueFull) >= 1000 - 300, "{stats:?}");
    // Every frame is delivered, queued, counted as dropped, or in the writer's one batch
    // (at most the queue capacity) waiting for the pipe.
    let accounted = stats.frames_out + stats.queued + stats.drops(Drop::QueueFull);
    assert!((1000 - 8..=1000).contains(&accounted), "{stats:?}");
    // Sources never wait under drop-oldest: the source is still served.
    let mut live = join(&router, ClientType::StreamFunction, &[0x12]).await;
    send_all(&mut source, 0x12, 1000..1001, b"still here").await;
    assert_eq!(seq(&next_data(&mut live).await), 1000);
    ledger(&router).await;
    drop(router);
    tokio::time::sleep(Duration::from_millis(10)).await;
}
