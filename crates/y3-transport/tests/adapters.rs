//! The adapters on loopback: the same frames echo back over TCP, TLS over TCP and QUIC.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use y3_transport::frame::{Data, Frame};
use y3_transport::quic::QuicServer;
use y3_transport::tcp::{self, TcpServer};
use y3_transport::tls::{self, Identity, Trust};
use y3_transport::{Connection, FrameCodec, TransportKind};

const FRAMES: u64 = 2000;

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Echoes every frame of one connection back, batching writes.
async fn echo(mut conn: Connection) {
    while let Some(Ok(frame)) = conn.reader.next().await {
        if conn.writer.feed(frame).await.is_err() {
            return;
        }
        // Flush only when the read buffer holds no more complete frames.
        if conn.reader.read_buffer().is_empty() && conn.writer.flush().await.is_err() {
            return;
        }
    }
    let _ = conn.writer.close().await;
    conn.guard.linger(Duration::from_secs(1), None).await;
}

/// Sends `FRAMES` data frames with 100-byte payloads and checks the echo.
async fn exchange(conn: Connection) {
    let payload = Bytes::from(vec![0x5a; 100]);
    let (mut reader, mut writer) = (conn.reader, conn.writer);
    let send = tokio::spawn(async move {
        for id in 0..FRAMES {
            let mut data = Data::new(0x10, payload.clone());
            data.hops = id as u32;
            writer.feed(Frame::Data(data)).await.unwrap();
        }
        writer.flush().await.unwrap();
        writer
    });
    for id in 0..FRAMES {
        let frame = tokio::time::timeout(Duration::from_secs(10), reader.next())
            .await
            .expect("echo in time")
            .expect("open")
            .expect("valid frame");
        let Frame::Data(d) = frame else {
            panic!("{frame:?}")
        };
        assert_eq!((d.tag, d.hops as u64, d.payload.len()), (0x10, id, 100));
    }
    let mut writer = send.await.unwrap();
    writer.close().await.unwrap();
    assert!(
        reader.next().await.is_none(),
        "server closes after our close"
    );
    conn.guard.linger(Duration::from_secs(1), None).await;
}

#[tokio::test]
async fn tcp_echo() {
    let server = TcpServer::bind(local(), None, FrameCodec::default())
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(async move {
        let conn = server.accept().await.unwrap().establish().await.unwrap();
        echo(conn).await;
    });
    let conn = tcp::connect(addr, None, FrameCodec::default())
        .await
        .unwrap();
    assert_eq!(conn.transport, TransportKind::Tcp);
    let mut conn = conn;
    assert!(
        conn.writer.get_mut().as_mut().quic_send().is_none(),
        "a TCP write half takes batches through poll_write"
    );
    exchange(conn).await;
}

#[tokio::test]
async fn tls_over_tcp_echo_with_a_pinned_dev_certificate() {
    let id = Identity::self_signed().unwrap();
    let server = TcpServer::bind(
        local(),
        Some(id.server_config().unwrap()),
        FrameCodec::default(),
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let incoming = server.accept().await.unwrap();
            tokio::spawn(async move {
                if let Ok(conn) = incoming.establish().await {
                    echo(conn).await;
                }
            });
        }
    });
    let name = tls::server_name("localhost").unwrap();
    let pinned = Trust::Pinned(vec![id.certificate().clone()])
        .client_config()
        .unwrap();
    let conn = tcp::connect(addr, Some((pinned, name.clone())), FrameCodec::default())
        .await
        .unwrap();
    assert_eq!(conn.transport, TransportKind::TcpTls);
    exchange(conn).await;

    // Another certificate is not trusted.
    let other = Identity::self_signed().unwrap();
    let wrong = Trust::Pinned(vec![other.certificate().clone()])
        .client_config()
        .unwrap();
    let err = tcp::connect(addr, Some((wrong, name.clone())), FrameCodec::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "io", "{err}");
    // The insecure option accepts it.
    let insecure = Trust::Insecure.client_config().unwrap();
    let conn = tcp::connect(addr, Some((insecure, name)), FrameCodec::default())
        .await
        .unwrap();
    exchange(conn).await;
}

#[tokio::test]
async fn quic_echo() {
    let id = Identity::self_signed().unwrap();
    let server =
        QuicServer::bind(local(), id.server_config().unwrap(), FrameCodec::default()).unwrap();
    let addr = server.local_addr().unwrap();
    let pinned = Trust::Pinned(vec![id.certificate().clone()])
        .client_config()
        .unwrap();
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            tokio::spawn(async move {
                if let Ok(conn) = incoming.establish().await {
                    echo(conn).await;
                }
            });
        }
    });
    let conn = y3_transport::quic::connect(addr, pinned, "localhost", FrameCodec::default())
        .await
        .unwrap();
    assert_eq!(conn.transport, TransportKind::Quic);
    // The SDK's writer hands its batches to this stream whole (`write_chunk`, no copy).
    let mut conn = conn;
    assert!(conn.writer.get_mut().as_mut().quic_send().is_some());
    exchange(conn).await;
}

/// A QUIC server on loopback with `tuning`, presenting `id`.
fn tuned_server(id: &Identity, tuning: &y3_transport::quic::Tuning) -> QuicServer {
    let recovery = y3_transport::quic::Recovery {
        secret: y3_transport::quic::ResetSecret::random().unwrap(),
        peers_dir: None,
    };
    QuicServer::bind_tuned(
        local(),
        id.server_config().unwrap(),
        FrameCodec::default(),
        &recovery,
        tuning,
    )
    .unwrap()
}

/// A QUIC client with `tuning`, connected to `addr`, pinning `id`'s certificate.
async fn tuned_client(
    addr: SocketAddr,
    id: &Identity,
    tuning: &y3_transport::quic::Tuning,
) -> Connection {
    let pinned = Trust::Pinned(vec![id.certificate().clone()])
        .client_config()
        .unwrap();
    y3_transport::quic::connect_tuned(addr, pinned, "localhost", FrameCodec::default(), tuning)
        .await
        .unwrap()
}

/// Echoes 1,000 frames of 1 KiB over QUIC on loopback with `tuning`; the datagrams the
/// client sent and received, and its path's MTU.
async fn quic_datagrams(tuning: &y3_transport::quic::Tuning) -> (u64, u64, u16) {
    let id = Identity::self_signed().unwrap();
    let server = tuned_server(&id, tuning);
    let addr = server.local_addr().unwrap();
    tokio::spawn(async move {
        if let Some(incoming) = server.accept().await {
            if let Ok(conn) = incoming.establish().await {
                echo(conn).await;
            }
        }
    });
    let mut conn = tuned_client(addr, &id, tuning).await;
    // Written while the echo is read: 1 MiB is more than the windows hold.
    let mut writer = conn.writer;
    let send = tokio::spawn(async move {
        let payload = Bytes::from(vec![0x5a; 1024]);
        for _ in 0..1000 {
            let data = Data::new(0x10, payload.clone());
            writer.feed(Frame::Data(data)).await.unwrap();
        }
        writer.flush().await.unwrap();
        writer
    });
    for _ in 0..1000 {
        let frame = tokio::time::timeout(Duration::from_secs(20), conn.reader.next())
            .await
            .expect("echo in time")
            .expect("open")
            .expect("valid frame");
        assert!(matches!(frame, Frame::Data(d) if d.payload.len() == 1024));
    }
    let _writer = send.await.unwrap();
    let y3_transport::Guard::Quic(quic, _) = &conn.guard else {
        panic!("a QUIC connection without its guard")
    };
    let stats = quic.stats();
    (
        stats.udp_tx.datagrams,
        stats.udp_rx.datagrams,
        stats.path.current_mtu,
    )
}

#[tokio::test]
async fn quic_on_loopback_carries_many_frames_per_datagram() {
    use y3_transport::quic::{Tuning, LOOPBACK_UDP_PAYLOAD};
    // 1 MiB each way: at quinn's 1,452-byte datagrams that is over 700 of them.
    let (tx, rx, mtu) = quic_datagrams(&Tuning::QUINN_DEFAULTS).await;
    assert!(mtu <= 1452, "{mtu}");
    assert!(
        tx >= 700 && rx >= 700,
        "quinn's defaults: {tx} sent, {rx} received"
    );
    // y3's tuning: 6 KiB datagrams on loopback, both ways (at least 176 for 1 MiB).
    let (tx, rx, mtu) = quic_datagrams(&Tuning::default()).await;
    assert_eq!(mtu, LOOPBACK_UDP_PAYLOAD);
    assert!(
        tx < 300 && rx < 300,
        "y3's tuning: {tx} sent, {rx} received"
    );
}

/// A `tracing` writer into a shared buffer: what a test reads the logged lines from.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The value of `name=` in a logged line.
fn logged_count(line: &str, name: &str) -> u64 {
    let key = format!(" {name}=");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[tokio::test]
async fn quic_stats_say_when_the_peers_credit_held_data_back() {
    use y3_transport::quic::{log_stats, Tuning, STATS_TARGET};
    let id = Identity::self_signed().unwrap();
    let server = tuned_server(&id, &Tuning::default());
    let addr = server.local_addr().unwrap();
    // The server takes the connection and never reads: the client's writes stop at the
    // receive window (256 KiB) and quinn tells the server so (DATA_BLOCKED frames).
    let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let conn = server.accept().await.unwrap().establish().await.unwrap();
        let _ = held_rx.await;
        drop(conn);
    });
    let mut conn = tuned_client(addr, &id, &Tuning::default()).await;
    let payload = Bytes::from(vec![0x5a; 1024]);
    let fill = async {
        for _ in 0..1024 {
            let data = Data::new(0x10, payload.clone());
            conn.writer.feed(Frame::Data(data)).await.unwrap();
        }
        conn.writer.flush().await.unwrap();
    };
    // 1 MiB does not fit: the writes wait for credit that never comes.
    assert!(tokio::time::timeout(Duration::from_millis(500), fill)
        .await
        .is_err());
    let y3_transport::Guard::Quic(quic, _) = &conn.guard else {
        panic!("a QUIC connection without its guard")
    };
    // The blocked frame goes with the next packet: on a loaded machine, give it time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while quic.stats().frame_tx.data_blocked + quic.stats().frame_tx.stream_data_blocked == 0
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer({
            let c = captured.clone();
            move || c.clone()
        })
        .finish();
    tracing::subscriber::with_default(subscriber, || log_stats(quic));
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(STATS_TARGET))
        .unwrap_or_else(|| panic!("no stats line in {text:?}"));
    let blocked =
        logged_count(line, "tx_data_blocked") + logged_count(line, "tx_stream_data_blocked");
    assert!(blocked >= 1, "{line}");
    // Nothing was lost on loopback, so no congestion event; the window is still there.
    assert_eq!(logged_count(line, "congestion_events"), 0, "{line}");
    assert!(logged_count(line, "cwnd") > 0, "{line}");
    assert_eq!(logged_count(line, "rx_data_blocked"), 0, "{line}");
    let _ = held_tx.send(());
}

/// The congestion windows a fresh loopback QUIC connection with `tuning` starts with: the
/// client's and the server's, once the client's first frame arrived.
async fn quic_initial_windows(tuning: &y3_transport::quic::Tuning) -> (u64, u64) {
    let id = Identity::self_signed().unwrap();
    let server = tuned_server(&id, tuning);
    let addr = server.local_addr().unwrap();
    let accepted = tokio::spawn(async move {
        let mut conn = server.accept().await.unwrap().establish().await.unwrap();
        let _first = conn.reader.next().await;
        let y3_transport::Guard::Quic(quic, _) = &conn.guard else {
            panic!("a QUIC connection without its guard")
        };
        quic.stats().path.cwnd
    });
    let mut conn = tuned_client(addr, &id, tuning).await;
    let data = Data::new(0x10, Bytes::from_static(b"hello"));
    conn.writer.send(Frame::Data(data)).await.unwrap();
    let y3_transport::Guard::Quic(quic, _) = &conn.guard else {
        panic!("a QUIC connection without its guard")
    };
    let client = quic.stats().path.cwnd;
    let server = tokio::time::timeout(Duration::from_secs(20), accepted)
        .await
        .expect("accepted in time")
        .unwrap();
    (client, server)
}

#[tokio::test]
async fn quic_on_loopback_starts_with_the_receive_window_in_flight() {
    use y3_transport::quic::{Tuning, LOOPBACK_INITIAL_WINDOW, LOOPBACK_UDP_PAYLOAD};
    // quinn's default: 12,000 bytes, raised to two datagrams; at 6 KiB datagrams that is
    // one datagram per flight before an ACK (see LOOPBACK_INITIAL_WINDOW).
    let quinn = Tuning {
        loopback_initial_window: None,
        ..Tuning::default()
    };
    let (client, server) = quic_initial_windows(&quinn).await;
    let two = 2 * u64::from(LOOPBACK_UDP_PAYLOAD);
    assert!(client <= two && server <= two, "{client} {server}");
    let (client, server) = quic_initial_windows(&Tuning::default()).await;
    assert!(
        client >= LOOPBACK_INITIAL_WINDOW && server >= LOOPBACK_INITIAL_WINDOW,
        "{client} {server}"
    );
}
