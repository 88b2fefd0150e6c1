//! The SDK's clients outlive a router restart by default: with [`Backoff::default`]'s
//! attempts (forever) a source, a stream function and a sink carry on across an outage that
//! spans many more attempts than any fixed limit the SDK ever had (10); a client that does
//! set a limit gives up with an error naming the address and the cause.

mod common;

use std::time::{Duration, Instant};

use common::*;
use y3_transport::sdk::{Backoff, ClientOptions, Sink, Source, StreamFunction};

/// How long the router stays down: 40 attempts at the short delays below.
const OUTAGE: Duration = Duration::from_secs(2);

#[tokio::test]
async fn clients_outlive_a_router_outage_by_default() {
    let first = router(|c| c.listen.quic = String::new()).await;
    let addr = first.tcp_addr().unwrap();
    // The default attempts; only the delays are shortened so that the outage spans ~40.
    let options = |name: &str| {
        ClientOptions::new(addr).name(name).backoff(Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(50),
            ..Backoff::default()
        })
    };
    assert!(Backoff::default().is_forever());

    let mut sink = Sink::connect(options("sink"), &[0x71]).await.unwrap();
    let function = StreamFunction::new(options("upper"), &[0x70]);
    let function = tokio::spawn(
        function.run(|d| async move { Some((0x71, d.payload.to_ascii_uppercase().into())) }),
    );
    eventually("sink and function subscribed", || {
        first.stats().connections == 2
    })
    .await;
    let mut source = Source::connect(options("source")).await.unwrap();
    let roundtrip = async |source: &mut Source, sink: &mut Sink, payload: &[u8]| {
        within("a frame through the function", async {
            loop {
                // Every send succeeds: a lost connection is waited out, not reported.
                source.send(0x70, payload.to_vec()).await.unwrap();
                // A flush can fail when the connection broke under queued frames (those are
                // lost: at most once); the next send reconnects.
                let _ = source.flush().await;
                match tokio::time::timeout(Duration::from_millis(200), sink.recv()).await {
                    Ok(Some(Ok(d))) if d.payload[..] == payload.to_ascii_uppercase() => break,
                    Ok(Some(Ok(_))) | Err(_) => {}
                    Ok(other) => panic!("the sink ended: {other:?}"),
                }
            }
        })
        .await
    };
    roundtrip(&mut source, &mut sink, b"before").await;

    first.shutdown().await;
    let down = Instant::now();
    let restart = tokio::spawn(async move {
        tokio::time::sleep(OUTAGE).await;
        router(|c| {
            c.listen.tcp = addr.to_string();
            c.listen.quic = String::new();
        })
        .await
    });
    roundtrip(&mut source, &mut sink, b"after").await;
    assert!(
        down.elapsed() >= OUTAGE,
        "delivered while the router was down?"
    );
    assert!(
        !function.is_finished(),
        "the function gave up: {function:?}"
    );
    let second = restart.await.unwrap();
    eventually("all three reconnected", || second.stats().connections == 3).await;
    source.close().await.unwrap();
    sink.close().await;
    function.abort();
    second.shutdown().await;
}

#[tokio::test]
async fn a_limited_client_gives_up_naming_the_address_and_the_cause() {
    // A port nothing listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let options = ClientOptions::new(addr).backoff(Backoff {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(10),
        attempts: 2,
    });
    let err = match Source::connect(options).await {
        Ok(_) => panic!("connected to a closed port"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), "gave_up");
    let text = err.to_string();
    for part in [
        &addr.to_string(),
        "tcp",
        "after 2 attempts",
        "refused",
        "running",
    ] {
        assert!(text.contains(part), "{part:?} not in {text:?}");
    }
}
