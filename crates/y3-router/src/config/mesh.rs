//! `[mesh]`: this router's name and the downstream zippers it forwards to.

use serde::{Deserialize, Serialize};

use crate::error::RouterError;

/// `[mesh]`: this router's name and the downstream zippers it forwards local frames to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeshConfig {
    /// This router's name: the handshake name of its links to downstream zippers.
    pub name: String,
    /// The downstream zippers (`[[mesh.downstream]]`); none by default.
    pub downstream: Vec<DownstreamConfig>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            name: "y3-router".into(),
            downstream: Vec::new(),
        }
    }
}

/// `[[mesh.downstream]]`: one downstream zipper (a `y3 serve` or a YoMo zipper).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DownstreamConfig {
    /// Its name, unique in the mesh: the label of its logs and metrics.
    pub name: String,
    /// `host:port` (an IP address or a host name, resolved at every connection attempt).
    pub addr: String,
    /// Credential as `type:payload` (`token:SECRET`); empty: none.
    pub credential: String,
    /// The adapter.
    pub transport: MeshTransport,
}

/// How a downstream zipper is dialed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeshTransport {
    /// QUIC, as YoMo's zippers serve it; the certificate is not verified (see the module
    /// docs).
    #[default]
    Quic,
    /// Plain TCP (a downstream `y3 serve`; YoMo serves QUIC only).
    Tcp,
}

impl DownstreamConfig {
    /// The host and port of [`addr`](DownstreamConfig::addr), checked: a non-empty host
    /// (brackets around an IPv6 address removed) and a port number.
    ///
    /// # Errors
    /// [`RouterError::Config`] naming `mesh.downstream.addr`.
    pub fn host_port(&self) -> Result<(&str, u16), RouterError> {
        let bad = |problem| RouterError::Config {
            field: "mesh.downstream.addr",
            problem,
        };
        let addr = self.addr.trim();
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or(bad("not a host:port address"))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(|c: char| c.is_whitespace()) {
            return Err(bad("not a host:port address"));
        }
        if host.contains(':') && !addr.starts_with('[') {
            return Err(bad("an IPv6 address goes in brackets: [addr]:port"));
        }
        let port = port.parse::<u16>().map_err(|_| bad("not a port number"))?;
        if port == 0 {
            return Err(bad("port 0 cannot be dialed"));
        }
        Ok((host, port))
    }
}
