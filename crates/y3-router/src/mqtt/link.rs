//! Internal links and the direct way in: an MQTT client is admitted through an in-memory
//! y3 connection that the router serves exactly as it serves any client's (handshake, token
//! and permissions, the tarpit for the MQTT client's own address, the connection limit, the
//! drain's goaway), and receives through another (per-subscriber queues, the memory budget,
//! the ledger, the metrics). Its publishes take the direct way: each becomes the router's
//! parsed data frame and goes through [`Ingress`], the code a socket connection's read loop
//! routes with (the session's checks, the budget, the counters, stored acknowledgements),
//! with no encoding, pipe or decoding in between. So do the frames its downlink receives:
//! the downlink's writer hands each data frame from its outbox to the MQTT session
//! ([`Handoff`]) where a socket's writer would encode it; only the link's control frames
//! (the handshake ack, the goaway at its end) cross the pipe.
//!
//! ```text
//!  MQTT client ─▶ conn.rs ─ publish ─▶ Direct: Session + Ingress ─▶ routing
//!                   │  ◀─ Acks (QoS 1: stored / refused) ─┘
//!                   └─ uplink (source: admission, the drain's goaway) ─▶ connection.rs
//!              ◀─ session ◀─ Handoff ◀─ downlink's writer ◀─ outbox ◀── routing
//!                                        (sink, mapped tags)
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use y3_transport::frame::{ClientType, Goaway, GoawayCode, Handshake};
use y3_transport::{Connection, Frame};

use crate::acks::Acks;
use crate::handoff::Handoff;
use crate::ingress::Ingress;
use crate::session::{Event, Permissions, Session};
use crate::shared::Shared;
use crate::status::ConnCounters;
use crate::table::SessionId;

/// Bytes each way of an internal link's in-memory pipe.
const PIPE_BYTES: usize = 256 * 1024;

/// The metadata key that carries a publish's MQTT topic to stream functions.
pub const TOPIC_KEY: &str = "mqtt-topic";

/// How MQTT connections open internal links.
#[derive(Clone)]
pub(crate) struct Links {
    pub shared: Arc<Shared>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Links")
    }
}

/// Who a link speaks for.
#[derive(Debug, Clone)]
pub(crate) struct Who {
    /// The MQTT client's address (the router's tarpit and logs see it).
    pub peer: SocketAddr,
    /// Its name in logs (user name, else client id).
    pub name: String,
    /// Its client id.
    pub client_id: String,
    /// `token:<password>`, or empty.
    pub credential: String,
}

impl Links {
    /// Opens a link as `client_type` observing `observed`, handshaken, its data frames
    /// given to `handoff` (none: they cross the pipe); the router's refusal as its goaway.
    pub async fn open(
        &self,
        who: &Who,
        (client_type, observed): (ClientType, &[u32]),
        wants_acks: bool,
        handoff: Option<Handoff>,
    ) -> Result<(Connection, Arc<Permissions>), Goaway> {
        let codec = y3_transport::FrameCodec::new(self.shared.config.limits.max_frame_len);
        let (mut client, mut server) = Connection::pair(codec, PIPE_BYTES);
        server.peer = Some(who.peer);
        let mut hello = hello(who, client_type);
        hello.observed = observed.to_vec();
        hello.wants_acks = wants_acks;
        let permissions = self.shared.admission().check(&hello);
        self.shared
            .spawn_connection_with(Some(who.peer), async move { Ok(server) }, handoff);
        let gone = || Goaway::new(GoawayCode::ShuttingDown, "the router closed the link");
        client
            .writer
            .send(Frame::Handshake(Box::new(hello)))
            .await
            .map_err(|_| gone())?;
        match client.reader.next().await {
            Some(Ok(Frame::HandshakeAck)) => {}
            Some(Ok(Frame::Rejected(g) | Frame::Goaway(g))) => return Err(g),
            _ => return Err(gone()),
        }
        // The router admitted the same handshake: its permissions are these.
        let permissions = permissions?;
        Ok((client, permissions))
    }

    /// The direct way in for the publishes of `who`, already admitted through its uplink:
    /// a session opened by the same handshake (so the same token, permissions and metadata
    /// rules), its [`Ingress`] as session `id` counted in `counters` (`/connz`), and the
    /// stored acknowledgements of its QoS 1 publishes.
    pub fn direct(
        &self,
        who: &Who,
        id: SessionId,
        counters: ConnCounters,
    ) -> Result<Direct, Goaway> {
        let shared = &self.shared;
        let now = std::time::Instant::now();
        let mut session = Session::new(
            id,
            now + shared.config.handshake_timeout(),
            shared.admission(),
        );
        let hello = hello(who, ClientType::Source);
        match session.handle_frame(now, Frame::Handshake(Box::new(hello))) {
            Event::Admitted(peer) => Ok(Direct {
                ingress: Ingress::new(shared, (id, counters), &peer),
                session,
                acks: Arc::new(Acks::default()),
            }),
            Event::Close(goaway) => Err(goaway),
            _ => Err(Goaway::new(
                GoawayCode::ProtocolError,
                "the router did not open the session",
            )),
        }
    }
}

/// The handshake an MQTT client's links and direct way in are opened with.
fn hello(who: &Who, client_type: ClientType) -> Handshake {
    let id = format!("mqtt-{}-{}", who.client_id, y3_transport::sdk::new_id());
    Handshake::new(client_type, who.name.clone(), id).credential(&who.credential)
}

/// An MQTT client's direct way into the routing table ([`Links::direct`]).
pub(crate) struct Direct {
    /// Its session, open: it checks each frame (`Session::check_data`).
    pub session: Session,
    /// Its frames' way in, shared with the read loop of socket connections.
    pub ingress: Ingress,
    /// The stored acknowledgements of its QoS 1 publishes (a ticket each).
    pub acks: Arc<Acks>,
}
