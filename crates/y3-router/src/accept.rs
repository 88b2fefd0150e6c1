//! One accept loop for every listener: TCP (optionally TLS) and QUIC take the same path
//! from an incoming connection to its task (`Shared::spawn_connection`: the connection
//! cap, the TLS or QUIC handshake under `limits.handshake_timeout_ms`, then
//! `connection.rs`).
//!
//! ```text
//!  Listener::next ──▶ Some(Ok(incoming)) ──▶ spawn_connection(peer, incoming.establish())
//!       │          ──▶ Some(Err(e))       ──▶ logged, 50 ms pause (out of descriptors)
//!       │          ──▶ None               ──▶ the listener is closed: the loop ends
//!       └── stop_accepting (shutdown)     ──▶ the loop ends
//! ```

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use y3_transport::quic::{QuicIncoming, QuicServer};
use y3_transport::tcp::{TcpIncoming, TcpServer};
use y3_transport::{Connection, TransportError};

use crate::shared::Shared;

/// How long the loop pauses after a failed accept (out of descriptors and the like), so
/// that it backs off instead of spinning.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// A connection a listener took, before its handshake.
pub(crate) trait Incoming: Send + 'static {
    /// The peer's address.
    fn peer(&self) -> SocketAddr;
    /// The TLS or QUIC handshake (none for plain TCP).
    fn establish(self)
        -> impl Future<Output = Result<Connection, TransportError>> + Send + 'static;
}

/// A bound listener.
pub(crate) trait Listener: Send + Sync + 'static {
    /// What it hands over.
    type Incoming: Incoming;
    /// The transport, for logs.
    const TRANSPORT: &'static str;
    /// The next connection; `Err` for a failed accept, `None` once the listener is closed.
    fn next(&self) -> impl Future<Output = Option<io::Result<Self::Incoming>>> + Send;
}

impl Incoming for TcpIncoming {
    fn peer(&self) -> SocketAddr {
        TcpIncoming::peer(self)
    }

    fn establish(
        self,
    ) -> impl Future<Output = Result<Connection, TransportError>> + Send + 'static {
        TcpIncoming::establish(self)
    }
}

impl Listener for TcpServer {
    type Incoming = TcpIncoming;
    const TRANSPORT: &'static str = "tcp";

    async fn next(&self) -> Option<io::Result<TcpIncoming>> {
        Some(self.accept().await)
    }
}

impl Incoming for QuicIncoming {
    fn peer(&self) -> SocketAddr {
        QuicIncoming::peer(self)
    }

    fn establish(
        self,
    ) -> impl Future<Output = Result<Connection, TransportError>> + Send + 'static {
        QuicIncoming::establish(self)
    }
}

impl Listener for Arc<QuicServer> {
    type Incoming = QuicIncoming;
    const TRANSPORT: &'static str = "quic";

    async fn next(&self) -> Option<io::Result<QuicIncoming>> {
        self.accept().await.map(Ok)
    }
}

/// Serves every connection `listener` takes until the router stops accepting or the
/// listener closes.
pub(crate) async fn accept_loop<L: Listener>(shared: Arc<Shared>, listener: L) {
    loop {
        let incoming = tokio::select! {
            incoming = listener.next() => incoming,
            _ = shared.stop_accepting.cancelled() => return,
        };
        match incoming {
            Some(Ok(incoming)) => {
                shared.spawn_connection(Some(incoming.peer()), incoming.establish())
            }
            Some(Err(e)) => {
                tracing::warn!(transport = L::TRANSPORT, error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
            None => return,
        }
    }
}
