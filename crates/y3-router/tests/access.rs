//! Secrets and access on loopback (issue 13): per-token permissions (a publish or an observed
//! tag outside them is `forbidden`, closed and counted), the tarpit for wrong credentials, the
//! metrics bearer token, the dev certificate written privately and only once the listeners
//! are bound, and clients pinning its SHA-256 fingerprint.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use futures_util::SinkExt;
use tokio::net::TcpSocket;
use y3_router::config::TokenConfig;
use y3_router::{Router, RouterConfig, RouterError, RouterHandle};
use y3_transport::frame::{ClientType, Frame, GoawayCode, Handshake};
use y3_transport::quic::CLOSE_TERMINAL;
use y3_transport::sdk::{Sink, Source, Transport};
use y3_transport::tls::{fingerprint_hex, Trust};
use y3_transport::{Connection, FrameCodec, TransportError, TransportKind};

/// `[[auth.tokens]]`: `pub-key` may publish 0x10 and observe nothing; `sink-key` may observe
/// 0x10 and publish nothing. The main token is `main`.
fn with_grants(config: &mut RouterConfig) {
    config.auth.token = "main".into();
    config.auth.tokens = vec![
        TokenConfig {
            name: "sensors".into(),
            token: "pub-key".into(),
            publish: Some(vec![0x10]),
            observe: Some(Vec::new()),
            ..TokenConfig::default()
        },
        TokenConfig {
            name: "dashboard".into(),
            token: "sink-key".into(),
            publish: Some(Vec::new()),
            observe: Some(vec![0x10]),
            ..TokenConfig::default()
        },
    ];
}

fn credential(mut hello: Handshake, token: &str) -> Handshake {
    hello.auth_name = "token".into();
    hello.auth_payload = token.into();
    hello
}

/// A raw TCP client of `router` from the local address `from` (any of 127.0.0.0/8).
async fn tcp_from(router: &RouterHandle, from: [u8; 4]) -> Connection {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let addr = router.tcp_addr().unwrap();
    let stream = within("a TCP connection", socket.connect(addr))
        .await
        .unwrap();
    let (r, w) = stream.into_split();
    Connection::new(r, w, FrameCodec::default(), TransportKind::Tcp, Some(addr))
}

/// Sends `hello` and returns what the router answered first.
async fn handshake(mut conn: Connection, hello: Handshake) -> (Connection, Frame) {
    conn.writer.send(Frame::from(hello)).await.unwrap();
    let answer = next(&mut conn).await.expect("an answer").expect("a frame");
    (conn, answer)
}

#[tokio::test]
async fn a_publish_outside_the_tokens_permissions_is_closed_forbidden_and_counted() {
    let router = router(with_grants).await;
    let opts = |name, token| options(&router, Transport::Tcp, name).token(token);
    let mut sink = Sink::connect(opts("dashboard", "sink-key"), &[0x10])
        .await
        .unwrap();
    // Raw, to see exactly what the router answers: 0x10 is routed, 0x11 closes the
    // connection with `forbidden`, and the 0x10 frame written after it is never read.
    let (mut source, ack) = handshake(
        router.connect_in_memory(),
        credential(hello(ClientType::Source, &[]), "pub-key"),
    )
    .await;
    assert_eq!(ack, Frame::HandshakeAck);
    for (i, tag) in [0x10, 0x11, 0x10].into_iter().enumerate() {
        let data = numbered(tag, i as u64, vec![tag as u8].into());
        source.writer.feed(Frame::Data(data)).await.unwrap();
    }
    source.writer.flush().await.unwrap();
    let frames = rest(&mut source).await;
    assert_eq!(goaway_code(&frames), GoawayCode::Forbidden);
    assert_eq!(
        goaways(&frames)[0].reason,
        "this token may not publish tag 0x11"
    );
    assert_eq!(protocol_errors(&router, "forbidden"), 1);
    let got = within("the allowed frame", sink.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((got.tag, &got.payload[..]), (0x10, &[0x10][..]));
    // Nothing after the refused frame reached the sink.
    let more = tokio::time::timeout(Duration::from_millis(300), sink.recv()).await;
    assert!(more.is_err(), "{more:?}");
    assert_eq!(router.stats().frames_in, 1);

    // The SDK source reports the refusal: `close` does not claim success for frames the
    // router stopped reading.
    let mut source = Source::connect(opts("sensors", "pub-key")).await.unwrap();
    source.send(0x10, &b"fine"[..]).await.unwrap();
    source.send(0x12, &b"not allowed"[..]).await.unwrap();
    match source.close().await {
        Err(TransportError::Goaway { code, .. }) => assert_eq!(code, GoawayCode::Forbidden),
        other => panic!("expected forbidden, got {other:?}"),
    }
    assert_eq!(protocol_errors(&router, "forbidden"), 2);
    // The main token publishes anything.
    let mut main = Source::connect(opts("main", "main")).await.unwrap();
    main.send(0x10, &b"main"[..]).await.unwrap();
    main.send(0x13, &b"main"[..]).await.unwrap();
    main.close().await.unwrap();
    let got = within("fine", sink.recv()).await.unwrap().unwrap();
    assert_eq!(&got.payload[..], b"fine");
    let got = within("main", sink.recv()).await.unwrap().unwrap();
    assert_eq!(&got.payload[..], b"main");
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn a_handshake_observing_a_forbidden_tag_is_rejected() {
    let router = router(with_grants).await;
    for transport in [Transport::Tcp, Transport::Quic] {
        let options = options(&router, transport, "peek").token("sink-key");
        match Sink::connect(options, &[0x10, 0x11]).await {
            Err(TransportError::Goaway { code, message }) => {
                assert_eq!(code, GoawayCode::Forbidden);
                assert_eq!(message, "this token may not observe tag 0x11");
            }
            other => panic!("{transport:?}: expected forbidden, got {:?}", other.err()),
        }
    }
    // A YoMo stream function (extension 0) over QUIC: the close YoMo does not retry.
    let mut conn = quic_connect(&router).await;
    let close = quic_close(&conn);
    let hello = credential(yomo_hello(ClientType::StreamFunction, &[0x20]), "pub-key");
    conn.writer.send(Frame::from(hello)).await.unwrap();
    let close = close.await;
    assert_eq!(close.code, u64::from(CLOSE_TERMINAL));
    assert_eq!(close.goaway.code, GoawayCode::Forbidden);
    assert!(!close.retryable);
    assert_eq!(rejected(&router, "forbidden"), 3);
    // Allowed tags are admitted; a wrong token is `unauthorized`, not `forbidden`.
    let sink = Sink::connect(
        options(&router, Transport::Tcp, "ok").token("sink-key"),
        &[0x10],
    )
    .await
    .unwrap();
    let wrong = Sink::connect(
        options(&router, Transport::Tcp, "x").token("guess"),
        &[0x10],
    )
    .await;
    assert!(matches!(
        wrong.err(),
        Some(TransportError::Goaway {
            code: GoawayCode::Unauthorized,
            ..
        })
    ));
    assert_eq!(rejected(&router, "unauthorized"), 1);
    sink.close().await;
    ledger(&router).await;
    router.shutdown().await;
}

/// `y3_router_tarpitted_total`.
fn tarpitted(router: &RouterHandle) -> u64 {
    let text = router.metrics().encode();
    text.lines()
        .find_map(|l| l.strip_prefix("y3_router_tarpitted_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A handshake from `from` with `token`, and how long its answer took.
async fn timed(router: &RouterHandle, from: [u8; 4], token: &str) -> (Frame, Duration) {
    let conn = tcp_from(router, from).await;
    let start = std::time::Instant::now();
    let (_, answer) = handshake(conn, credential(hello(ClientType::Source, &[]), token)).await;
    (answer, start.elapsed())
}

fn is_unauthorized(answer: &Frame) -> bool {
    matches!(answer, Frame::Rejected(g) if g.code == GoawayCode::Unauthorized)
}

/// The tarpit: wrong credentials past `max_failures` are answered late; a right one from
/// the same address, meanwhile, is admitted at once (issue 25: 20 wrong tokens locked
/// every correct client of the address out for 60 s, told not to retry).
#[tokio::test]
async fn wrong_credentials_are_slowed_down_and_a_right_one_never_waits() {
    const DELAY: Duration = Duration::from_millis(1500);
    let router = router(|c| {
        c.auth.token = "s3cret".into();
        c.auth.max_failures = 2;
        c.auth.tarpit_initial_ms = DELAY.as_millis() as u64;
        c.auth.tarpit_max_ms = DELAY.as_millis() as u64;
    })
    .await;
    for i in 0..2 {
        let (answer, _) = timed(&router, [127, 0, 0, 1], &format!("guess-{i}")).await;
        assert!(is_unauthorized(&answer), "attempt {i}: {answer:?}");
    }
    assert_eq!(tarpitted(&router), 0);
    // The third wrong one waits in the tarpit; the right token, sent while it waits, does
    // not.
    let slow = tokio::spawn({
        let conn = tcp_from(&router, [127, 0, 0, 1]).await;
        async move {
            let start = std::time::Instant::now();
            let (_, answer) =
                handshake(conn, credential(hello(ClientType::Source, &[]), "guess-2")).await;
            (answer, start.elapsed())
        }
    });
    within("the refusal to be delayed", async {
        while tarpitted(&router) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let (answer, took) = timed(&router, [127, 0, 0, 1], "s3cret").await;
    assert_eq!(answer, Frame::HandshakeAck);
    assert!(took < DELAY, "the right token waited {took:?}");
    let (answer, took) = slow.await.unwrap();
    assert!(is_unauthorized(&answer), "{answer:?}");
    assert!(took >= DELAY, "refused after {took:?}");
    assert_eq!(
        (rejected(&router, "unauthorized"), tarpitted(&router)),
        (3, 1)
    );
    // The SDK reads a (late) refusal as final, and the right token as welcome.
    let guesser = options(&router, Transport::Tcp, "guesser").token("guess-3");
    let err = Source::connect(guesser).await.err().unwrap();
    assert_eq!(err.kind(), "unauthorized", "{err}");
    assert!(!err.is_retryable(), "{err}");
    let legit = options(&router, Transport::Tcp, "legit").token("s3cret");
    Source::connect(legit).await.unwrap().close().await.unwrap();
    assert_eq!(rejected(&router, "throttled"), 0);
    ledger(&router).await;
    router.shutdown().await;
}

/// While `tarpit_max_in_flight` refusals of an address wait, its next handshakes are not
/// checked (a checked guess tells its answer by the missing ack) but turned away with a
/// code that makes clients retry; other addresses are not affected.
#[tokio::test]
async fn a_full_tarpit_turns_handshakes_away_unchecked_and_retryable() {
    let router = router(|c| {
        c.auth.token = "s3cret".into();
        c.auth.max_failures = 0;
        c.auth.tarpit_initial_ms = 3000;
        c.auth.tarpit_max_ms = 3000;
        c.auth.tarpit_max_in_flight = 2;
    })
    .await;
    let mut held = Vec::new();
    for i in 0..2 {
        let conn = tcp_from(&router, [127, 0, 0, 1]).await;
        held.push(tokio::spawn(async move {
            handshake(
                conn,
                credential(hello(ClientType::Source, &[]), &format!("g{i}")),
            )
            .await
        }));
    }
    within("two refusals held", async {
        while tarpitted(&router) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // The right token too: not checked, told to come back.
    let (answer, took) = timed(&router, [127, 0, 0, 1], "s3cret").await;
    let Frame::Rejected(g) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(g.code, GoawayCode::TooManyConnections);
    assert!(g.code.is_retryable());
    assert!(g.reason.starts_with("throttled: "), "{}", g.reason);
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(rejected(&router, "throttled"), 1);
    assert_eq!(rejected(&router, "unauthorized"), 2);
    // Another address is not affected.
    let (answer, _) = timed(&router, [127, 0, 0, 2], "s3cret").await;
    assert_eq!(answer, Frame::HandshakeAck);
    // The SDK retries, and gets in once a refusal was sent.
    let mut legit = options(&router, Transport::Tcp, "legit").token("s3cret");
    legit.backoff.attempts = 100;
    let source = within("the retried connect", Source::connect(legit)).await;
    source.unwrap().close().await.unwrap();
    for h in held {
        let (_, answer) = h.await.unwrap();
        assert!(is_unauthorized(&answer), "{answer:?}");
    }
    ledger(&router).await;
    router.shutdown().await;
}

/// Bad handshakes are refused but do not throttle the address: a broken client on an edge
/// host must not lock every other local client out.
#[tokio::test]
async fn bad_handshakes_do_not_throttle_the_address() {
    let router = router(|c| {
        c.auth.token = "s3cret".into();
        c.auth.max_failures = 0;
    })
    .await;
    for i in 0..10 {
        let conn = tcp_from(&router, [127, 0, 0, 3]).await;
        let mut bad = credential(hello(ClientType::Source, &[]), "s3cret");
        bad.version = "1999-01-01".into();
        let (_, answer) = handshake(conn, bad).await;
        assert!(
            matches!(answer, Frame::Rejected(_)),
            "attempt {i}: {answer:?}"
        );
    }
    let conn = tcp_from(&router, [127, 0, 0, 3]).await;
    let (_, answer) = handshake(conn, credential(hello(ClientType::Source, &[]), "s3cret")).await;
    assert_eq!(answer, Frame::HandshakeAck);
    assert_eq!(rejected(&router, "throttled"), 0);
    assert_eq!(tarpitted(&router), 0);
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn the_tarpit_can_be_turned_off() {
    let router = router(|c| {
        c.auth.token = "s3cret".into();
        c.auth.max_failures = 0;
        c.auth.tarpit_max_ms = 0;
    })
    .await;
    for i in 0..30 {
        let conn = tcp_from(&router, [127, 0, 0, 1]).await;
        let (_, answer) = handshake(conn, credential(hello(ClientType::Source, &[]), "no")).await;
        assert!(matches!(answer, Frame::Rejected(_)), "{i}: {answer:?}");
    }
    let conn = tcp_from(&router, [127, 0, 0, 1]).await;
    let (_, answer) = handshake(conn, credential(hello(ClientType::Source, &[]), "s3cret")).await;
    assert_eq!(answer, Frame::HandshakeAck);
    assert_eq!(rejected(&router, "throttled"), 0);
    assert_eq!(
        (rejected(&router, "unauthorized"), tarpitted(&router)),
        (30, 0)
    );
    ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test]
async fn metrics_need_the_bearer_token() {
    let router = router(|c| {
        c.listen.metrics = "127.0.0.1:0".into();
        c.listen.metrics_token = "m3trics".into();
    })
    .await;
    let addr = router.metrics_addr().unwrap();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer m3trics2"),
        Some("m3trics"),
    ] {
        let (status, body) = http_get(addr, "/metrics", auth).await;
        assert_eq!(status, 401, "{auth:?}");
        assert!(!body.contains("y3_router"), "{auth:?}");
    }
    let (status, body) = http_get(addr, "/metrics", Some("Bearer m3trics")).await;
    assert_eq!(status, 200);
    assert!(body.contains("y3_router_queue_depth"), "{body}");
    assert_eq!(
        http_get(addr, "/healthz", None).await,
        (200, "ok\n".to_owned())
    );
    ledger(&router).await;
    router.shutdown().await;
    // Without a token the endpoint stays open, as before.
    let open = router_with_metrics().await;
    let (status, _) = http_get(open.metrics_addr().unwrap(), "/metrics", None).await;
    assert_eq!(status, 200);
    open.shutdown().await;
}

async fn router_with_metrics() -> RouterHandle {
    router(|c| c.listen.metrics = "127.0.0.1:0".into()).await
}

#[cfg(unix)]
#[tokio::test]
async fn the_dev_certificate_is_private_and_written_only_after_binding() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let base = std::env::temp_dir().join(format!("y3-access-{}", std::process::id()));
    let dir = base.join("y3");
    let cert = dir.join("dev-cert.pem");
    let first = router(|c| c.tls.dev_cert_out = cert.clone()).await;
    assert_eq!((mode(&dir), mode(&cert)), (0o700, 0o600));
    let pem = std::fs::read_to_string(&cert).unwrap();
    assert_eq!(pem, first.identity().certificate_pem());

    // A second router on the same port fails to bind: the first one's certificate stays.
    let mut config = RouterConfig::ephemeral();
    config.listen.tcp = first.tcp_addr().unwrap().to_string();
    config.tls.dev_cert_out = cert.clone();
    let err = Router::start(config).await.expect_err("address in use");
    assert!(
        matches!(err, RouterError::Bind { what: "tcp", .. }),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&cert).unwrap(), pem);
    // ...and QUIC clients of the first router still connect with what the file holds.
    let options =
        options(&first, Transport::Quic, "after").trust(Trust::from_pem_file(&cert).unwrap());
    Source::connect(options)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();

    // A symbolic link planted at the certificate's path is replaced, not followed.
    let victim = base.join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::remove_file(&cert).unwrap();
    std::os::unix::fs::symlink(&victim, &cert).unwrap();
    let second = router(|c| c.tls.dev_cert_out = cert.clone()).await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&cert).unwrap().is_file());
    assert_eq!(mode(&cert), 0o600);
    assert_eq!(
        std::fs::read_to_string(&cert).unwrap(),
        second.identity().certificate_pem()
    );
    // A certificate directory that is a symbolic link is refused.
    let link = base.join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let mut config = RouterConfig::ephemeral();
    config.tls.dev_cert_out = link.join("dev-cert.pem");
    let err = Router::start(config).await.expect_err("refused");
    assert_eq!(err.kind(), "write", "{err}");
    ledger(&first).await;
    first.shutdown().await;
    ledger(&second).await;
    second.shutdown().await;
    std::fs::remove_dir_all(&base).unwrap();
}

#[tokio::test]
async fn clients_pin_the_certificate_fingerprint() {
    let router = router(|c| c.listen.tcp_tls = true).await;
    let pin = router.identity().fingerprint();
    assert_eq!(fingerprint_hex(&pin).len(), 64);
    let mut wrong = pin;
    wrong[0] ^= 1;
    for transport in [Transport::Quic, Transport::TcpTls] {
        let pinned = Trust::from_fingerprint(&fingerprint_hex(&pin)).unwrap();
        let options = options(&router, transport, "pinned").trust(pinned);
        let mut sink = Sink::connect(options.clone(), &[0x10]).await.unwrap();
        let mut source = Source::connect(options.clone()).await.unwrap();
        source.send(0x10, &b"pinned"[..]).await.unwrap();
        source.close().await.unwrap();
        let got = within("the frame", sink.recv()).await.unwrap().unwrap();
        assert_eq!(&got.payload[..], b"pinned");
        sink.close().await;
        // Another certificate's fingerprint: refused at once, not retried.
        let err = Source::connect(options.trust(Trust::Fingerprint(wrong)))
            .await
            .err()
            .expect("refused");
        assert!(!err.is_retryable(), "{transport:?}: {err}");
    }
    ledger(&router).await;
    router.shutdown().await;
    // Every router generates its own certificate: another one has another fingerprint.
    let other = router_with_metrics().await;
    assert_ne!(other.identity().fingerprint(), pin);
    other.shutdown().await;
}
