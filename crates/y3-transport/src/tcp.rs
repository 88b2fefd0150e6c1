//! The TCP adapter: `FramedRead`/`FramedWrite` over a tokio `TcpStream`, optionally
//! wrapped in TLS 1.3 (tokio-rustls). `TCP_NODELAY` is set: writes are already batched by
//! the framed writer, so Nagle's algorithm would only add latency.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::codec::FrameCodec;
use crate::error::TransportError;
use crate::stream::{Connection, TransportKind};
use crate::tcp_acked::TcpAcked;

/// A listening TCP socket that hands out framed connections.
#[derive(Debug)]
pub struct TcpServer {
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    codec: FrameCodec,
}

impl TcpServer {
    /// Binds `addr`; with `tls`, every accepted connection is a TLS server session.
    ///
    /// # Errors
    /// The bind error.
    pub async fn bind(
        addr: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        codec: FrameCodec,
    ) -> io::Result<TcpServer> {
        Ok(TcpServer {
            listener: TcpListener::bind(addr).await?,
            tls,
            codec,
        })
    }

    /// The bound address.
    ///
    /// # Errors
    /// As [`TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Waits for the next connection. The TLS handshake, if any, is left to
    /// [`TcpIncoming::establish`] so that one slow client cannot stall the accept loop.
    ///
    /// # Errors
    /// The accept error (e.g. out of file descriptors).
    pub async fn accept(&self) -> io::Result<TcpIncoming> {
        let (stream, peer) = self.listener.accept().await?;
        Ok(TcpIncoming {
            stream,
            peer,
            tls: self.tls.clone(),
            codec: self.codec,
        })
    }
}

/// An accepted TCP connection, before its (optional) TLS handshake.
#[derive(Debug)]
pub struct TcpIncoming {
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    codec: FrameCodec,
}

impl TcpIncoming {
    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Completes the TLS handshake if configured and frames the stream.
    ///
    /// # Errors
    /// [`TransportError::Io`] for socket and TLS handshake failures.
    pub async fn establish(self) -> Result<Connection, TransportError> {
        tune(&self.stream)?;
        let acked = Some(TcpAcked::of(&self.stream));
        let mut conn = match self.tls {
            None => {
                let (r, w) = self.stream.into_split();
                Connection::new(r, w, self.codec, TransportKind::Tcp, Some(self.peer))
            }
            Some(config) => {
                let tls = TlsAcceptor::from(config).accept(self.stream).await?;
                let (r, w) = tokio::io::split(tls);
                Connection::new(r, w, self.codec, TransportKind::TcpTls, Some(self.peer))
            }
        };
        conn.acked = acked;
        Ok(conn)
    }
}

/// TCP keep-alive: a peer that vanished (power cut, cable pulled) is noticed within
/// about a minute, the role QUIC's keep-alive plays on the other adapter.
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// No Nagle delay on small frames; keep-alive probes on idle connections.
fn tune(stream: &TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEP_ALIVE)
        .with_interval(KEEP_ALIVE / 3);
    socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
}

/// Connects to `addr`; with `tls`, runs a TLS 1.3 client handshake for the server name.
///
/// # Errors
/// [`TransportError::Io`] for connect and TLS failures.
pub async fn connect(
    addr: SocketAddr,
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    codec: FrameCodec,
) -> Result<Connection, TransportError> {
    connect_with(addr, tls, codec, None).await
}

/// As [`connect`], with the socket's kernel receive buffer (`SO_RCVBUF`) set to
/// `recv_buffer` bytes before connecting (so the window the peer is offered follows it);
/// `None` leaves the kernel's default (on Linux, autotuned up to `tcp_rmem`'s maximum).
///
/// # Errors
/// As [`connect`].
pub async fn connect_with(
    addr: SocketAddr,
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    codec: FrameCodec,
    recv_buffer: Option<usize>,
) -> Result<Connection, TransportError> {
    let stream = match recv_buffer {
        None => TcpStream::connect(addr).await?,
        Some(bytes) => {
            let socket = match addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            socket.set_recv_buffer_size(u32::try_from(bytes).unwrap_or(u32::MAX))?;
            socket.connect(addr).await?
        }
    };
    tune(&stream)?;
    let acked = Some(TcpAcked::of(&stream));
    let mut conn = match tls {
        None => {
            let (r, w) = stream.into_split();
            Connection::new(r, w, codec, TransportKind::Tcp, Some(addr))
        }
        Some((config, name)) => {
            let tls = TlsConnector::from(config).connect(name, stream).await?;
            let (r, w) = tokio::io::split(tls);
            Connection::new(r, w, codec, TransportKind::TcpTls, Some(addr))
        }
    };
    conn.acked = acked;
    Ok(conn)
}
