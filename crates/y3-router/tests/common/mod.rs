//! Helpers shared by the router tests: raw framed clients (y3's and YoMo-style), raw bytes,
//! QUIC close inspection and bounded waits.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use tokio::io::DuplexStream;
use y3_router::{Router, RouterConfig, RouterHandle};
use y3_transport::frame::{ClientType, Data, Frame, Goaway, GoawayCode, Handshake};
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{new_id, Backoff, ClientOptions, Transport};
use y3_transport::tls::DEV_SERVER_NAME;
use y3_transport::{Connection, FrameCodec, FrameError, Guard, TransportError, TransportKind};

/// Every wait in these tests is bounded by this.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `fut` or panics after [`WAIT`] naming `what`.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `cond` every 5 ms until it holds, for at most [`WAIT`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// A router on ephemeral loopback ports, metrics off, with `tweak` applied.
pub async fn router(tweak: impl FnOnce(&mut RouterConfig)) -> RouterHandle {
    let mut config = RouterConfig::ephemeral();
    config.shutdown.drain_timeout_ms = 3000;
    config.shutdown.quiet_ms = 50;
    tweak(&mut config);
    Router::start(config).await.expect("router starts")
}

/// SDK options for `router` over `transport`, with a short backoff.
pub fn options(router: &RouterHandle, transport: Transport, name: &str) -> ClientOptions {
    let addr = match transport {
        Transport::Quic => router.quic_addr(),
        _ => router.tcp_addr(),
    }
    .expect("listener on");
    ClientOptions::new(addr)
        .transport(transport)
        .trust(router.trust())
        .name(name)
        .backoff(Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            attempts: 3,
        })
}

/// A y3 client's handshake (extension level 1): YoMo-style id, no credential.
pub fn hello(client_type: ClientType, observed: &[u32]) -> Handshake {
    let name = format!("raw-{}", client_type.name());
    let mut h = Handshake::new(client_type, name, format!("{}-0", new_id()));
    h.observed = observed.to_vec();
    h
}

/// The handshake of one of YoMo's own clients: extension level 0.
pub fn yomo_hello(client_type: ClientType, observed: &[u32]) -> Handshake {
    let mut h = hello(client_type, observed);
    h.extension = 0;
    h
}

/// A stream function's handshake wanting `target`.
pub fn wanting(observed: &[u32], target: &str) -> Handshake {
    let mut h = hello(ClientType::StreamFunction, observed);
    h.wanted_target = target.into();
    h
}

/// A raw framed client: sends `hello`, expects the handshake ack.
pub async fn admit(mut conn: Connection, hello: Handshake) -> Connection {
    conn.writer.send(Frame::from(hello)).await.unwrap();
    match next(&mut conn).await {
        Some(Ok(Frame::HandshakeAck)) => conn,
        other => panic!("expected the handshake ack, got {other:?}"),
    }
}

/// An admitted y3 client of `client_type` over an in-memory pipe.
pub async fn join(router: &RouterHandle, client_type: ClientType, observed: &[u32]) -> Connection {
    admit(router.connect_in_memory(), hello(client_type, observed)).await
}

/// The next frame, bounded by [`WAIT`].
pub async fn next(conn: &mut Connection) -> Option<Result<Frame, FrameError>> {
    within("a frame", conn.reader.next()).await
}

/// The next frame, which must be a data frame.
pub async fn next_data(conn: &mut Connection) -> Data {
    match next(conn).await {
        Some(Ok(Frame::Data(d))) => d,
        other => panic!("expected data, got {other:?}"),
    }
}

/// Every frame until the router ends the stream (or a read error), bounded by [`WAIT`].
pub async fn rest(conn: &mut Connection) -> Vec<Frame> {
    within("the end of the stream", async {
        let mut out = Vec::new();
        while let Some(Ok(f)) = conn.reader.next().await {
            out.push(f);
        }
        out
    })
    .await
}

/// The `yomo-tid` these tests give message number `i`.
pub fn tid(i: u64) -> String {
    format!("tid-{i}")
}

/// Message number `i` on `tag`: its number in `yomo-tid`, as a source writes it.
pub fn numbered(tag: u32, i: u64, payload: Bytes) -> Data {
    Data::new(tag, payload).with_metadata(Metadata::from_pairs([(metadata::TID, tid(i).as_str())]))
}

/// The message number of a frame made by [`numbered`].
pub fn seq(d: &Data) -> u64 {
    let tid = d.metadata.get(metadata::TID).unwrap().expect("yomo-tid");
    tid.strip_prefix("tid-").unwrap().parse().unwrap()
}

/// Sends numbered data frames `ids` on `tag` with `payload`, one flush at the end.
pub async fn send_all(conn: &mut Connection, tag: u32, ids: std::ops::Range<u64>, payload: &[u8]) {
    let payload = Bytes::copy_from_slice(payload);
    for i in ids {
        conn.writer
            .feed(Frame::Data(numbered(tag, i, payload.clone())))
            .await
            .unwrap();
    }
    conn.writer.flush().await.unwrap();
}

/// A frame's bytes.
pub fn wire(frame: Frame) -> Vec<u8> {
    let mut buf = BytesMut::new();
    frame.encode(&mut buf, 1 << 20).unwrap();
    buf.to_vec()
}

/// The frames in `bytes`, up to the first one that does not decode.
pub fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Ok(Some(f)) = tokio_util::codec::Decoder::decode(&mut codec, &mut buf) {
        out.push(f);
    }
    out
}

/// The goaway frames among `frames`.
pub fn goaways(frames: &[Frame]) -> Vec<&Goaway> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Goaway(g) => Some(g),
            _ => None,
        })
        .collect()
}

/// The code of the only goaway frame among `frames`.
pub fn goaway_code(frames: &[Frame]) -> GoawayCode {
    match goaways(frames)[..] {
        [g] => g.code,
        _ => panic!("expected one goaway frame in {frames:?}"),
    }
}

/// What a YoMo client (extension 0) may read before a protocol error closes it: the
/// handshake ack at most (when it pipelined its handshake with the bad bytes), never a
/// goaway frame.
pub fn no_goaway(frames: &[Frame]) {
    assert!(
        frames.is_empty() || frames == [Frame::HandshakeAck],
        "no goaway for YoMo's clients: {frames:?}"
    );
}

/// The rejection that `frames` start with.
pub fn rejection(frames: &[Frame]) -> &Goaway {
    match frames.first() {
        Some(Frame::Rejected(g)) => g,
        _ => panic!("expected a rejected frame first, got {frames:?}"),
    }
}

/// A counter of the router's Prometheus text: `name` (without `y3_router_` and `_total`)
/// with the one label `label="value"`; 0 when absent.
pub fn counter(router: &RouterHandle, name: &str, label: &str, value: &str) -> u64 {
    series(
        router,
        &format!("y3_router_{name}_total{{{label}=\"{value}\"}}"),
    )
}

/// The value of one series of the router's Prometheus text, named in full (labels
/// included: `y3_router_cycle_throttled_total`, `y3_router_dropped_total{reason="loop"}`);
/// 0 when absent.
pub fn series(router: &RouterHandle, series: &str) -> u64 {
    let prefix = format!("{series} ");
    router
        .metrics()
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Protocol errors of `kind` in the router's metrics.
pub fn protocol_errors(router: &RouterHandle, kind: &str) -> u64 {
    counter(router, "protocol_errors", "kind", kind)
}

/// Refused handshakes of `kind` in the router's metrics.
pub fn rejected(router: &RouterHandle, kind: &str) -> u64 {
    counter(router, "rejected", "reason", kind)
}

/// A connection served by `router` over an in-memory pipe whose client end is left as
/// bytes: what the test writes is what the router reads, and the other way round.
pub fn raw_in_memory(router: &RouterHandle, max_frame_len: usize) -> DuplexStream {
    let (client, server) = tokio::io::duplex(256 * 1024);
    let (r, w) = tokio::io::split(server);
    let codec = FrameCodec::new(max_frame_len);
    router.serve(Connection::new(r, w, codec, TransportKind::Memory, None));
    client
}

/// A raw QUIC connection to `router` (its stream opened, nothing sent yet).
pub async fn quic_connect(router: &RouterHandle) -> Connection {
    let tls = router.trust().client_config().unwrap();
    let addr = router.quic_addr().expect("quic listener");
    within(
        "the QUIC connection",
        y3_transport::quic::connect(addr, tls, DEV_SERVER_NAME, FrameCodec::default()),
    )
    .await
    .unwrap()
}

/// How the router closed a QUIC connection.
#[derive(Debug)]
pub struct QuicClose {
    /// The application close code.
    pub code: u64,
    /// The close reason.
    pub reason: String,
    /// What a client reads from it: `<kind>: <detail>` turned back into a code.
    pub goaway: Goaway,
    /// Whether a YoMo client reconnects after it (not 0x13, not 0 without a reason).
    pub retryable: bool,
}

/// Waits for the router to close `conn` and returns the close.
///
/// This crate has no direct dependency on quinn, so the close is taken apart through
/// `y3_transport::quic::goaway_from_io` (the reason) and quinn's `Debug` output of
/// `ApplicationClosed(ApplicationClose { error_code: N, reason: .. })` (the number).
pub fn quic_close(conn: &Connection) -> impl Future<Output = QuicClose> + Send + 'static {
    let Guard::Quic(quic, _) = &conn.guard else {
        panic!("not a QUIC connection: {conn:?}")
    };
    let quic = quic.clone();
    async move {
        let error = within("the QUIC close", quic.closed()).await;
        let debug = format!("{error:?}");
        let code = debug
            .split_once("ApplicationClosed(ApplicationClose { error_code: ")
            .and_then(|(_, rest)| rest.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("not an application close: {debug}"));
        let goaway = y3_transport::quic::goaway_from_io(&std::io::Error::other(error.clone()))
            .unwrap_or_else(|| panic!("no goaway in {debug}"));
        let retryable = TransportError::from(error).is_retryable();
        QuicClose {
            code,
            reason: goaway.reason.clone(),
            goaway,
            retryable,
        }
    }
}

/// The router's delivery ledger (issue 26), checked at the end of every test that routes
/// frames: no term below zero (a drop counted against no delivery owed would hide a real
/// loss) and, once what is in flight has settled, nothing unaccounted. Waits at most
/// [`WAIT`] for frames still being routed; a negative term fails at once.
pub async fn ledger(router: &RouterHandle) {
    let started = std::time::Instant::now();
    loop {
        let stats = router.stats();
        match stats.ledger().check() {
            Ok(()) => return,
            Err(e @ y3_router::metrics::LedgerError::Negative { .. }) => {
                panic!("ledger: {e} ({:?}; {stats:?})", stats.ledger())
            }
            Err(e) if started.elapsed() > WAIT => {
                panic!("ledger: {e} ({:?}; {stats:?})", stats.ledger())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// As [`ledger`], for the totals a router's `shutdown` returned (nothing is in flight).
pub fn ledger_of(stats: &y3_router::Stats) {
    if let Err(e) = stats.ledger().check() {
        panic!("ledger: {e} ({:?}; {stats:?})", stats.ledger());
    }
}

/// A GET of `path` over a fresh TCP connection to `addr`, with `authorization` as the
/// `Authorization` header's value when given: the status code and the body.
pub async fn http_get(
    addr: std::net::SocketAddr,
    path: &str,
    authorization: Option<&str>,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let header = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{header}Connection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    within("the HTTP answer", tcp.read_to_string(&mut text))
        .await
        .unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// Resident memory of this process, bytes.
pub fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A subscriber over TCP with a small receive buffer that handshakes and then never reads.
pub async fn stuck_over_tcp(router: &y3_router::RouterHandle, tag: u32) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4 * 1024).unwrap();
    let mut tcp = socket.connect(router.tcp_addr().unwrap()).await.unwrap();
    let h = hello(ClientType::StreamFunction, &[tag]);
    tokio::io::AsyncWriteExt::write_all(&mut tcp, &wire(Frame::from(h)))
        .await
        .unwrap();
    tcp
}
