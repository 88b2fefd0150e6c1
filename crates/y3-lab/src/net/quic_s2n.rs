//! The `s2n-quic` row of `y3-lab net quic` (y3-lab feature `net-s2n-quic`): a second QUIC
//! stack under the same frame codec, so that quinn is measured against another well-kept
//! stack before anyone switches (issue 28: "switch only on numbers").
//!
//! ```text
//!  s2n-quic client ── one bidirectional stream ──▶ s2n-quic server     (127.0.0.1, UDP)
//!  send half  ─▶ y3_transport::Connection::new ◀─ receive half
//!              (FramedRead / FramedWrite with FrameCodec: quinn's rows' very codec)
//! ```
//!
//! s2n-quic as it comes: its defaults for flow control, congestion (CUBIC), ACKs and
//! GSO; TLS 1.3 by rustls, packet protection by aws-lc-rs (s2n-quic's own crypto, where
//! quinn's rows use ring through rustls). One self-signed certificate for `localhost` per
//! pair, made with rcgen and trusted by the client alone.

use anyhow::{anyhow, Context, Result};
use futures_util::SinkExt;
use s2n_quic::client::Connect;
use s2n_quic::{Client, Server};
use y3_transport::frame::Frame;
use y3_transport::{Connection, FrameCodec, TransportKind};

/// What keeps an s2n-quic pair alive while its framed streams run: both endpoints and both
/// connections (a dropped connection handle closes it).
pub(crate) struct Held {
    _server: Server,
    _client: Client,
    _connections: [s2n_quic::Connection; 2],
}

/// A connected (sender, receiver) pair over s2n-quic on loopback, the sender's stream made
/// visible to the receiver by writing `first` (the receiver has not read it yet).
///
/// # Errors
/// Certificate, endpoint, handshake and stream errors.
pub(crate) async fn pair(
    codec: FrameCodec,
    first: Frame,
) -> Result<(Held, Connection, Connection)> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .context("s2n-quic: self-signed certificate")?;
    let cert = certified.cert.pem();
    let key = certified.signing_key.serialize_pem();
    let mut server = Server::builder()
        .with_tls((cert.as_str(), key.as_str()))
        .map_err(|e| anyhow!("s2n-quic server TLS: {e}"))?
        .with_io("127.0.0.1:0")
        .map_err(|e| anyhow!("s2n-quic server socket: {e}"))?
        .start()
        .map_err(|e| anyhow!("s2n-quic server: {e}"))?;
    let addr = server.local_addr()?;
    let client = Client::builder()
        .with_tls(cert.as_str())
        .map_err(|e| anyhow!("s2n-quic client TLS: {e}"))?
        .with_io("127.0.0.1:0")
        .map_err(|e| anyhow!("s2n-quic client socket: {e}"))?
        .start()
        .map_err(|e| anyhow!("s2n-quic client: {e}"))?;
    let connect = async {
        let mut conn = client
            .connect(Connect::new(addr).with_server_name("localhost"))
            .await
            .context("s2n-quic: connect")?;
        let (recv, send) = conn.open_bidirectional_stream().await?.split();
        let mut tx = Connection::new(recv, send, codec, TransportKind::Quic, Some(addr));
        // The stream shows at the server once it carries bytes.
        tx.writer.send(first).await?;
        Ok::<_, anyhow::Error>((conn, tx))
    };
    let accept = async {
        let mut conn = server.accept().await.context("s2n-quic: server closed")?;
        let peer = conn.remote_addr().ok();
        let stream = conn
            .accept_bidirectional_stream()
            .await?
            .context("s2n-quic: connection closed before its stream")?;
        let (recv, send) = stream.split();
        let rx = Connection::new(recv, send, codec, TransportKind::Quic, peer);
        Ok::<_, anyhow::Error>((conn, rx))
    };
    let (connected, accepted) = tokio::join!(connect, accept);
    let ((client_conn, tx), (server_conn, rx)) = (connected?, accepted?);
    Ok((
        Held {
            _server: server,
            _client: client,
            _connections: [client_conn, server_conn],
        },
        tx,
        rx,
    ))
}
