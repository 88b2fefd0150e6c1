//! [`MqttError`]: why an MQTT connection was closed.

/// Why the router closed an MQTT connection; each has a stable snake_case [`kind`]
/// (the `reason` label of `y3_router_mqtt_closed_total`).
///
/// [`kind`]: MqttError::kind
#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    /// The packet did not parse (the codec's error), or broke a protocol rule.
    #[error("malformed MQTT packet: {0}")]
    Malformed(String),
    /// A packet's remaining length is over `mqtt.max_packet_bytes`.
    #[error("MQTT packet of {len} bytes over the limit of {max}")]
    TooLarge {
        /// The declared remaining length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The first packet was not CONNECT, or CONNECT came twice.
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    /// An MQTT version other than 3.1.1 (4) or 5.
    #[error("unsupported MQTT protocol level {0}")]
    Version(u8),
    /// A QoS 2 publish (the router supports QoS 0 and 1).
    #[error("QoS 2 is not supported")]
    QosNotSupported,
    /// A publish on a topic no `[[mqtt.publish]]` maps (MQTT 3.1.1, or QoS 0).
    #[error("topic {0:?} is not mapped to a tag")]
    Unmapped(String),
    /// A publish the client's token may not send.
    #[error("not authorized to publish on {0:?}")]
    NotAuthorized(String),
    /// An MQTT 5 client had more QoS 1 publishes unacknowledged than the CONNACK's
    /// Receive Maximum (`mqtt.receive_maximum`) allows.
    #[error("more than {0} QoS 1 publishes in flight (the announced receive maximum)")]
    ReceiveMaximum(u16),
    /// No packet within one and a half keep-alive periods.
    #[error("keep-alive timeout")]
    KeepAlive,
    /// Another connection took the session over (same client id).
    #[error("session taken over")]
    TakenOver,
    /// The router refused the connection's internal link (shutting down, budgets).
    #[error("router refused: {0}")]
    Router(String),
    /// The socket failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl MqttError {
    /// The stable snake_case name.
    pub fn kind(&self) -> &'static str {
        match self {
            MqttError::Malformed(_) => "malformed",
            MqttError::TooLarge { .. } => "too_large",
            MqttError::Protocol(_) => "protocol",
            MqttError::Version(_) => "unsupported_version",
            MqttError::QosNotSupported => "qos_not_supported",
            MqttError::Unmapped(_) => "unmapped_topic",
            MqttError::NotAuthorized(_) => "not_authorized",
            MqttError::ReceiveMaximum(_) => "receive_maximum_exceeded",
            MqttError::KeepAlive => "keepalive_timeout",
            MqttError::TakenOver => "session_taken_over",
            MqttError::Router(_) => "router",
            MqttError::Io(_) => "io",
        }
    }

    /// The MQTT 5 DISCONNECT reason code the router sends for it (none for a broken
    /// socket).
    pub fn reason_code(&self) -> Option<u8> {
        Some(match self {
            MqttError::Malformed(_) => 0x81,
            MqttError::TooLarge { .. } => 0x95,
            MqttError::Protocol(_) | MqttError::Version(_) => 0x82,
            MqttError::QosNotSupported => 0x9B,
            MqttError::Unmapped(_) => 0x90,
            MqttError::NotAuthorized(_) => 0x87,
            MqttError::ReceiveMaximum(_) => 0x93,
            MqttError::KeepAlive => 0x8D,
            MqttError::TakenOver => 0x8E,
            MqttError::Router(_) => 0x89,
            MqttError::Io(_) => return None,
        })
    }
}
