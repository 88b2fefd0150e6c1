//! The QUIC adapter: one bidirectional quinn stream per connection, framed with the same
//! [`FrameCodec`] as TCP (quinn's `RecvStream`/`SendStream` are tokio `AsyncRead`/
//! `AsyncWrite`). TLS 1.3 always; see [`crate::tls`] for certificates.
//!
//! The client opens the stream and writes its handshake at once, which is what makes the
//! stream visible to the server's `accept_bi`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, TransportConfig};

use crate::codec::FrameCodec;
use crate::error::TransportError;
use crate::stream::{Connection, Guard, TransportKind};

/// Keep-alive interval of client connections (the idle timeout is quinn's 30 s default).
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

fn transport_config(client: bool) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    // One stream per connection: no need for more concurrent streams than that.
    config.max_concurrent_uni_streams(0u32.into());
    config.max_concurrent_bidi_streams(1u32.into());
    if client {
        config.keep_alive_interval(Some(KEEP_ALIVE));
    }
    Arc::new(config)
}

/// A QUIC endpoint that accepts framed connections.
#[derive(Debug)]
pub struct QuicServer {
    endpoint: Endpoint,
    codec: FrameCodec,
}

impl QuicServer {
    /// Binds a UDP socket on `addr` and serves `tls` (which must allow TLS 1.3).
    ///
    /// # Errors
    /// [`TransportError::Config`] for a TLS config QUIC cannot use, [`TransportError::Io`]
    /// for the bind.
    pub fn bind(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        codec: FrameCodec,
    ) -> Result<QuicServer, TransportError> {
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|_| TransportError::Config("the TLS config offers no QUIC cipher suite"))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(transport_config(false));
        Ok(QuicServer {
            endpoint: Endpoint::server(config, addr)?,
            codec,
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// As [`Endpoint::local_addr`].
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Waits for the next connection attempt; `None` once the endpoint is closed.
    pub async fn accept(&self) -> Option<QuicIncoming> {
        let incoming = self.endpoint.accept().await?;
        Some(QuicIncoming {
            incoming,
            codec: self.codec,
        })
    }

    /// Refuses new connections from now on; established ones continue.
    pub fn refuse_new(&self) {
        self.endpoint.set_server_config(None);
    }

    /// Closes every connection and waits (at most `linger`) for the peers to acknowledge.
    pub async fn close(&self, linger: Duration) {
        self.endpoint.close(0u32.into(), b"shutdown");
        let _ = tokio::time::timeout(linger, self.endpoint.wait_idle()).await;
    }
}

/// A QUIC connection attempt, before its handshake and stream.
#[derive(Debug)]
pub struct QuicIncoming {
    incoming: quinn::Incoming,
    codec: FrameCodec,
}

impl QuicIncoming {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.incoming.remote_address()
    }

    /// Completes the QUIC handshake and accepts the client's stream.
    ///
    /// # Errors
    /// [`TransportError::QuicConnection`] when the handshake fails or the client goes
    /// away before opening its stream.
    pub async fn establish(self) -> Result<Connection, TransportError> {
        let peer = self.incoming.remote_address();
        let conn = self.incoming.await?;
        let (send, recv) = conn.accept_bi().await?;
        let mut framed = Connection::new(recv, send, self.codec, TransportKind::Quic, Some(peer));
        framed.guard = Guard::Quic(conn, None);
        Ok(framed)
    }
}

/// Connects to a router at `addr` presenting `server_name`, and opens the stream.
///
/// The client endpoint binds the loopback address for a loopback router, else the
/// unspecified address of the same family.
///
/// # Errors
/// [`TransportError::Config`] for a TLS config QUIC cannot use, and the connect errors.
pub async fn connect(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    server_name: &str,
    codec: FrameCodec,
) -> Result<Connection, TransportError> {
    let crypto = QuicClientConfig::try_from(tls)
        .map_err(|_| TransportError::Config("the TLS config offers no QUIC cipher suite"))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(transport_config(true));
    let bind = match (addr.ip().is_loopback(), addr.is_ipv4()) {
        (true, true) => SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        (true, false) => SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        (false, true) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        (false, false) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let endpoint = Endpoint::client(bind)?;
    let conn = endpoint.connect_with(config, addr, server_name)?.await?;
    let (send, recv) = conn.open_bi().await?;
    let mut framed = Connection::new(recv, send, codec, TransportKind::Quic, Some(addr));
    framed.guard = Guard::Quic(conn, Some(endpoint));
    Ok(framed)
}
