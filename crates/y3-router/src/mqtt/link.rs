//! Internal links: an MQTT client reaches the routing table through in-memory y3
//! connections that the router serves exactly as it serves any client's (handshake, token
//! and permissions, the tarpit for the MQTT client's own address, per-subscriber queues,
//! the memory budget, the ledger, the metrics).
//!
//! ```text
//!  MQTT client ─▶ conn.rs ─ uplink (source; stored acks once QoS 1) ─▶ connection.rs ─▶ routing
//!              ◀─ session ◀ downlink (sink, mapped tags)  ◀─ outbox ◀────────┘
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use y3_transport::frame::{ClientType, Goaway, GoawayCode, Handshake};
use y3_transport::{Connection, Frame};

use crate::session::Permissions;
use crate::shared::Shared;

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
    /// Opens a link as `client_type` observing `observed`, handshaken; the router's
    /// refusal as its goaway.
    pub async fn open(
        &self,
        who: &Who,
        client_type: ClientType,
        observed: &[u32],
        wants_acks: bool,
    ) -> Result<(Connection, Arc<Permissions>), Goaway> {
        let codec = y3_transport::FrameCodec::new(self.shared.config.limits.max_frame_len);
        let (mut client, mut server) = Connection::pair(codec, PIPE_BYTES);
        server.peer = Some(who.peer);
        let id = format!("mqtt-{}-{}", who.client_id, y3_transport::sdk::new_id());
        let mut hello =
            Handshake::new(client_type, who.name.clone(), id).credential(&who.credential);
        hello.observed = observed.to_vec();
        hello.wants_acks = wants_acks;
        let permissions = self.shared.admission().check(&hello);
        self.shared
            .spawn_connection(Some(who.peer), async move { Ok(server) });
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
}
