//! MQTT packets in and out, over rumqttc's codec (`mqttbytes` v4 for MQTT 3.1.1, v5 for
//! MQTT 5): the router writes no parser of its own, only this translation into the few
//! packets its session logic knows.
//!
//! ```text
//!  fixed header: byte 1 = type (4 bits) | flags (4 bits)
//!                remaining length: 1..4 bytes, 7 bits each, low first, bit 7 = more
//!  CONNECT variable header: 00 04 'M' 'Q' 'T' 'T' | level (4: 3.1.1, 5: 5) | flags | keep-alive
//! ```
//!
//! The remaining length is checked against `mqtt.max_packet_bytes` from the fixed header,
//! before the packet is buffered.

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4;
use rumqttc::mqttbytes::QoS as Qos4;
use rumqttc::v5::mqttbytes::v5;
use rumqttc::v5::mqttbytes::QoS as Qos5;

use super::error::MqttError;
use super::puback::PubAckCode;

/// The protocol a connection speaks, from its CONNECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1.1 (protocol level 4).
    V4,
    /// MQTT 5.
    V5,
}

impl Version {
    /// The name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Version::V4 => "3.1.1",
            Version::V5 => "5",
        }
    }
}

/// A will message, from CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    /// Its topic.
    pub topic: String,
    /// Its payload.
    pub payload: Bytes,
    /// Its QoS (0 or 1; 2 is served as 1).
    pub qos: u8,
    /// Whether it is retained.
    pub retain: bool,
}

/// What CONNECT says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connect {
    /// The protocol.
    pub version: Version,
    /// Client id (empty: the router assigns one, clean sessions only).
    pub client_id: String,
    /// Clean session (3.1.1) or clean start (5).
    pub clean: bool,
    /// Keep-alive, seconds (0: none).
    pub keep_alive: u16,
    /// MQTT 5's session expiry interval, seconds (3.1.1: a persistent session never expires).
    pub session_expiry: Option<u32>,
    /// MQTT 5's Receive Maximum: QoS 1 messages the client takes in flight at once
    /// (3.1.1: none said).
    pub receive_max: Option<u16>,
    /// User name and password.
    pub login: Option<(String, String)>,
    /// The will.
    pub will: Option<Will>,
}

/// A PUBLISH, either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// The topic.
    pub topic: String,
    /// 0, 1 (or 2, which the router refuses).
    pub qos: u8,
    /// Packet id (QoS 1).
    pub pkid: u16,
    /// The retain flag.
    pub retain: bool,
    /// The dup flag.
    pub dup: bool,
    /// The payload.
    pub payload: Bytes,
}

/// The packets a client sends that the router acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// CONNECT.
    Connect(Connect),
    /// PUBLISH.
    Publish(Publish),
    /// PUBACK of a QoS 1 message the router sent.
    PubAck(u16),
    /// SUBSCRIBE: packet id and (filter, QoS) pairs.
    Subscribe(u16, Vec<(String, u8)>),
    /// UNSUBSCRIBE: packet id and filters.
    Unsubscribe(u16, Vec<String>),
    /// PINGREQ.
    PingReq,
    /// DISCONNECT; `true` when an MQTT 5 client asks for its will anyway (0x04).
    Disconnect(bool),
    /// A packet a client may not send the router (QoS 2 flow, CONNACK, AUTH, ...).
    Unexpected(&'static str),
}

/// CONNACK's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnCode {
    /// Accepted.
    Accepted,
    /// Wrong user name or password (3.1.1: 4, 5: 0x86).
    BadCredentials,
    /// Not authorized (3.1.1: 5, 5: 0x87).
    NotAuthorized,
    /// An empty client id with a persistent session (3.1.1: 2, 5: 0x85).
    BadClientId,
    /// The router is busy: sessions full, or shutting down (3.1.1: 3, 5: 0x89).
    Busy,
}

/// The packets the router sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// CONNACK: verdict, session present, and (MQTT 5) the Receive Maximum announced:
    /// QoS 1 publishes the client may have unacknowledged at once.
    ConnAck(ConnCode, bool, u16),
    /// PUBLISH to a subscriber.
    Publish(Publish),
    /// PUBACK: packet id, and its MQTT 5 reason code (`puback.rs`).
    PubAck(u16, PubAckCode),
    /// SUBACK: packet id, granted QoS per filter (`None`: refused).
    SubAck(u16, Vec<Option<u8>>),
    /// UNSUBACK: packet id, filters.
    UnsubAck(u16, usize),
    /// PINGRESP.
    PingResp,
    /// DISCONNECT with an MQTT 5 reason code (MQTT 3.1.1 has none: not sent).
    Disconnect(u8),
}

/// Reads the next packet out of `buf`, or `None` when it holds no whole packet yet.
/// `version` is `None` before CONNECT (then only CONNECT is accepted, and it decides).
///
/// # Errors
/// [`MqttError::TooLarge`] from the fixed header; [`MqttError::Malformed`],
/// [`MqttError::Version`], [`MqttError::Protocol`] as the packet is.
pub fn read(
    buf: &mut BytesMut,
    version: Option<Version>,
    max: usize,
) -> Result<Option<Incoming>, MqttError> {
    let header = match rumqttc::mqttbytes::check(buf.iter(), max) {
        Ok(h) => h,
        Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => return Ok(None),
        Err(rumqttc::mqttbytes::Error::PayloadSizeLimitExceeded(len)) => {
            return Err(MqttError::TooLarge { len, max })
        }
        Err(e) => return Err(MqttError::Malformed(e.to_string())),
    };
    // The fixed header: byte 1 and the remaining length's bytes (the codec checked them).
    let header_len = 1 + buf[1..].iter().take_while(|b| *b & 0x80 != 0).count() + 1;
    let remaining_len = header.frame_length() - header_len;
    let version = match version {
        Some(v) => v,
        None => {
            if buf[0] >> 4 != 1 {
                return Err(MqttError::Protocol("the first packet must be CONNECT"));
            }
            // The level byte: after the fixed header and the protocol name "MQTT".
            let at = header_len + 6;
            match buf.get(at) {
                Some(4) => Version::V4,
                Some(5) => Version::V5,
                Some(&level) => return Err(MqttError::Version(level)),
                None => return Err(MqttError::Malformed("short CONNECT".into())),
            }
        }
    };
    // MQTT 5 allows a bare DISCONNECT (reason 0, no properties): the codec does not.
    if buf[0] == 0xE0 && remaining_len == 0 {
        let _ = buf.split_to(2);
        return Ok(Some(Incoming::Disconnect(false)));
    }
    let malformed = |e: &dyn std::fmt::Display| MqttError::Malformed(e.to_string());
    let packet = match version {
        Version::V4 => from_v4(v4::Packet::read(buf, max).map_err(|e| malformed(&e))?),
        Version::V5 => {
            let max = u32::try_from(max).unwrap_or(u32::MAX);
            from_v5(v5::Packet::read(buf, Some(max)).map_err(|e| malformed(&e))?)?
        }
    };
    Ok(Some(packet))
}

fn qos4(q: Qos4) -> u8 {
    q as u8
}

fn qos5(q: Qos5) -> u8 {
    q as u8
}

fn from_v4(p: v4::Packet) -> Incoming {
    match p {
        v4::Packet::Connect(c) => Incoming::Connect(Connect {
            version: Version::V4,
            client_id: c.client_id,
            clean: c.clean_session,
            keep_alive: c.keep_alive,
            session_expiry: None,
            receive_max: None,
            login: c.login.map(|l| (l.username, l.password)),
            will: c.last_will.map(|w| Will {
                topic: w.topic,
                payload: w.message,
                qos: qos4(w.qos),
                retain: w.retain,
            }),
        }),
        v4::Packet::Publish(p) => Incoming::Publish(Publish {
            topic: p.topic,
            qos: qos4(p.qos),
            pkid: p.pkid,
            retain: p.retain,
            dup: p.dup,
            payload: p.payload,
        }),
        v4::Packet::PubAck(a) => Incoming::PubAck(a.pkid),
        v4::Packet::Subscribe(s) => Incoming::Subscribe(
            s.pkid,
            s.filters
                .into_iter()
                .map(|f| (f.path, qos4(f.qos)))
                .collect(),
        ),
        v4::Packet::Unsubscribe(u) => Incoming::Unsubscribe(u.pkid, u.topics),
        v4::Packet::PingReq => Incoming::PingReq,
        v4::Packet::Disconnect => Incoming::Disconnect(false),
        v4::Packet::ConnAck(_) => Incoming::Unexpected("CONNACK"),
        v4::Packet::PubRec(_) => Incoming::Unexpected("PUBREC"),
        v4::Packet::PubRel(_) => Incoming::Unexpected("PUBREL"),
        v4::Packet::PubComp(_) => Incoming::Unexpected("PUBCOMP"),
        v4::Packet::SubAck(_) => Incoming::Unexpected("SUBACK"),
        v4::Packet::UnsubAck(_) => Incoming::Unexpected("UNSUBACK"),
        v4::Packet::PingResp => Incoming::Unexpected("PINGRESP"),
    }
}

fn from_v5(p: v5::Packet) -> Result<Incoming, MqttError> {
    let utf8 = |b: Bytes| {
        String::from_utf8(b.to_vec())
            .map_err(|_| MqttError::Malformed("a topic is not UTF-8".into()))
    };
    Ok(match p {
        v5::Packet::Connect(c, will, login) => Incoming::Connect(Connect {
            version: Version::V5,
            client_id: c.client_id,
            clean: c.clean_start,
            keep_alive: c.keep_alive,
            session_expiry: Some(
                c.properties
                    .as_ref()
                    .and_then(|p| p.session_expiry_interval)
                    .unwrap_or(0),
            ),
            receive_max: c
                .properties
                .as_ref()
                .and_then(|p| p.receive_maximum)
                .filter(|&n| n > 0),
            login: login.map(|l| (l.username, l.password)),
            will: match will {
                Some(w) => Some(Will {
                    topic: utf8(w.topic)?,
                    payload: w.message,
                    qos: qos5(w.qos),
                    retain: w.retain,
                }),
                None => None,
            },
        }),
        v5::Packet::Publish(p) => {
            if p.properties
                .as_ref()
                .is_some_and(|p| p.topic_alias.is_some())
            {
                // The CONNACK announces no topic alias maximum: an alias is a protocol error.
                return Err(MqttError::Protocol("topic alias not announced"));
            }
            Incoming::Publish(Publish {
                topic: utf8(p.topic)?,
                qos: qos5(p.qos),
                pkid: p.pkid,
                retain: p.retain,
                dup: p.dup,
                payload: p.payload,
            })
        }
        v5::Packet::PubAck(a) => Incoming::PubAck(a.pkid),
        v5::Packet::Subscribe(s) => Incoming::Subscribe(
            s.pkid,
            s.filters
                .into_iter()
                .map(|f| (f.path, qos5(f.qos)))
                .collect(),
        ),
        v5::Packet::Unsubscribe(u) => Incoming::Unsubscribe(u.pkid, u.filters),
        v5::Packet::PingReq(_) => Incoming::PingReq,
        v5::Packet::Disconnect(d) => Incoming::Disconnect(
            d.reason_code == v5::DisconnectReasonCode::DisconnectWithWillMessage,
        ),
        v5::Packet::Auth(_) => Incoming::Unexpected("AUTH"),
        v5::Packet::ConnAck(_) => Incoming::Unexpected("CONNACK"),
        v5::Packet::PubRec(_) => Incoming::Unexpected("PUBREC"),
        v5::Packet::PubRel(_) => Incoming::Unexpected("PUBREL"),
        v5::Packet::PubComp(_) => Incoming::Unexpected("PUBCOMP"),
        v5::Packet::SubAck(_) => Incoming::Unexpected("SUBACK"),
        v5::Packet::UnsubAck(_) => Incoming::Unexpected("UNSUBACK"),
        v5::Packet::PingResp(_) => Incoming::Unexpected("PINGRESP"),
    })
}

fn to_qos4(q: u8) -> Qos4 {
    if q == 0 {
        Qos4::AtMostOnce
    } else {
        Qos4::AtLeastOnce
    }
}

fn to_qos5(q: u8) -> Qos5 {
    if q == 0 {
        Qos5::AtMostOnce
    } else {
        Qos5::AtLeastOnce
    }
}

/// The most an MQTT remaining length can say (four 7-bit bytes).
const MAX_REMAINING_LEN: usize = 268_435_455;

/// Appends a PUBLISH to `out` straight from `p` (the hot path to subscribers: no packet
/// struct in between, no copy of the topic), byte for byte what rumqttc's codec writes
/// (`tests::publish_is_written_as_the_codec_writes_it`):
///
/// ```text
///  0x30 | dup << 3 | qos << 1 | retain   remaining length (1..4 bytes, 7 bits each)
///  u16 topic length, topic   [u16 packet id: QoS 1]   [MQTT 5: properties length 0x00]
///  payload
/// ```
///
/// # Errors
/// [`MqttError::Malformed`] for a topic over 65535 bytes or a packet over MQTT's largest.
pub fn write_publish(version: Version, p: &Publish, out: &mut BytesMut) -> Result<(), MqttError> {
    let topic_len = u16::try_from(p.topic.len())
        .map_err(|_| MqttError::Malformed(format!("topic of {} bytes", p.topic.len())))?;
    let qos = p.qos.min(1);
    let remaining = 2
        + p.topic.len()
        + if qos > 0 { 2 } else { 0 }
        + usize::from(version == Version::V5)
        + p.payload.len();
    if remaining > MAX_REMAINING_LEN {
        return Err(MqttError::Malformed(format!(
            "a PUBLISH of {remaining} bytes"
        )));
    }
    out.reserve(5 + remaining);
    out.extend_from_slice(&[0x30 | u8::from(p.dup) << 3 | qos << 1 | u8::from(p.retain)]);
    let mut len = remaining;
    loop {
        let byte = (len & 0x7F) as u8;
        len >>= 7;
        if len == 0 {
            out.extend_from_slice(&[byte]);
            break;
        }
        out.extend_from_slice(&[byte | 0x80]);
    }
    out.extend_from_slice(&topic_len.to_be_bytes());
    out.extend_from_slice(p.topic.as_bytes());
    if qos > 0 {
        out.extend_from_slice(&p.pkid.to_be_bytes());
    }
    if version == Version::V5 {
        out.extend_from_slice(&[0]);
    }
    out.extend_from_slice(&p.payload);
    Ok(())
}

/// Appends `packet` to `out` as `version` writes it.
///
/// # Errors
/// [`MqttError::Malformed`] when the codec cannot write it (a topic over 65535 bytes).
pub fn write(version: Version, packet: &Outgoing, out: &mut BytesMut) -> Result<(), MqttError> {
    let err = |e: &dyn std::fmt::Display| MqttError::Malformed(e.to_string());
    match version {
        Version::V4 => {
            let p = match packet {
                Outgoing::ConnAck(code, present, _) => {
                    let code = match code {
                        ConnCode::Accepted => v4::ConnectReturnCode::Success,
                        ConnCode::BadCredentials => v4::ConnectReturnCode::BadUserNamePassword,
                        ConnCode::NotAuthorized => v4::ConnectReturnCode::NotAuthorized,
                        ConnCode::BadClientId => v4::ConnectReturnCode::BadClientId,
                        ConnCode::Busy => v4::ConnectReturnCode::ServiceUnavailable,
                    };
                    v4::Packet::ConnAck(v4::ConnAck::new(code, *present))
                }
                Outgoing::Publish(p) => return write_publish(version, p, out),
                Outgoing::PubAck(pkid, _) => v4::Packet::PubAck(v4::PubAck::new(*pkid)),
                Outgoing::SubAck(pkid, codes) => v4::Packet::SubAck(v4::SubAck::new(
                    *pkid,
                    codes
                        .iter()
                        .map(|c| match c {
                            Some(q) => v4::SubscribeReasonCode::Success(to_qos4(*q)),
                            None => v4::SubscribeReasonCode::Failure,
                        })
                        .collect(),
                )),
                Outgoing::UnsubAck(pkid, _) => v4::Packet::UnsubAck(v4::UnsubAck::new(*pkid)),
                Outgoing::PingResp => v4::Packet::PingResp,
                Outgoing::Disconnect(_) => return Ok(()),
            };
            p.write(out, usize::MAX).map_err(|e| err(&e))?;
        }
        Version::V5 => {
            let p = match packet {
                Outgoing::ConnAck(code, present, receive_max) => {
                    let code = match code {
                        ConnCode::Accepted => v5::ConnectReturnCode::Success,
                        ConnCode::BadCredentials => v5::ConnectReturnCode::BadUserNamePassword,
                        ConnCode::NotAuthorized => v5::ConnectReturnCode::NotAuthorized,
                        ConnCode::BadClientId => v5::ConnectReturnCode::ClientIdentifierNotValid,
                        ConnCode::Busy => v5::ConnectReturnCode::ServerBusy,
                    };
                    let properties = v5::ConnAckProperties {
                        receive_max: Some(*receive_max),
                        max_qos: Some(1),
                        retain_available: Some(1),
                        topic_alias_max: Some(0),
                        shared_subscription_available: Some(0),
                        subscription_identifiers_available: Some(0),
                        wildcard_subscription_available: Some(1),
                        ..empty_connack_properties()
                    };
                    v5::Packet::ConnAck(v5::ConnAck {
                        session_present: *present,
                        code,
                        properties: (code == v5::ConnectReturnCode::Success).then_some(properties),
                    })
                }
                Outgoing::Publish(p) => return write_publish(version, p, out),
                Outgoing::PubAck(pkid, reason) => v5::Packet::PubAck(v5::PubAck {
                    pkid: *pkid,
                    reason: match reason {
                        PubAckCode::Success => v5::PubAckReason::Success,
                        PubAckCode::NoMatchingSubscribers => {
                            v5::PubAckReason::NoMatchingSubscribers
                        }
                        PubAckCode::UnspecifiedError => v5::PubAckReason::UnspecifiedError,
                        PubAckCode::ImplementationSpecificError => {
                            v5::PubAckReason::ImplementationSpecificError
                        }
                        PubAckCode::NotAuthorized => v5::PubAckReason::NotAuthorized,
                        PubAckCode::TopicNameInvalid => v5::PubAckReason::TopicNameInvalid,
                    },
                    properties: None,
                }),
                Outgoing::SubAck(pkid, codes) => v5::Packet::SubAck(v5::SubAck {
                    pkid: *pkid,
                    return_codes: codes
                        .iter()
                        .map(|c| match c {
                            Some(q) => v5::SubscribeReasonCode::Success(to_qos5(*q)),
                            None => v5::SubscribeReasonCode::NotAuthorized,
                        })
                        .collect(),
                    properties: None,
                }),
                Outgoing::UnsubAck(pkid, n) => v5::Packet::UnsubAck(v5::UnsubAck {
                    pkid: *pkid,
                    reasons: vec![v5::UnsubAckReason::Success; *n],
                    properties: None,
                }),
                Outgoing::PingResp => v5::Packet::PingResp(v5::PingResp),
                Outgoing::Disconnect(code) => {
                    let reason = match code {
                        0x81 => v5::DisconnectReasonCode::MalformedPacket,
                        0x82 => v5::DisconnectReasonCode::ProtocolError,
                        0x87 => v5::DisconnectReasonCode::NotAuthorized,
                        0x89 => v5::DisconnectReasonCode::ServerBusy,
                        0x8B => v5::DisconnectReasonCode::ServerShuttingDown,
                        0x8D => v5::DisconnectReasonCode::KeepAliveTimeout,
                        0x8E => v5::DisconnectReasonCode::SessionTakenOver,
                        0x93 => v5::DisconnectReasonCode::ReceiveMaximumExceeded,
                        0x90 => v5::DisconnectReasonCode::TopicNameInvalid,
                        0x95 => v5::DisconnectReasonCode::PacketTooLarge,
                        0x9B => v5::DisconnectReasonCode::QoSNotSupported,
                        _ => v5::DisconnectReasonCode::UnspecifiedError,
                    };
                    v5::Packet::Disconnect(v5::Disconnect::new(reason))
                }
            };
            p.write(out, None).map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

fn empty_connack_properties() -> v5::ConnAckProperties {
    v5::ConnAckProperties {
        session_expiry_interval: None,
        receive_max: None,
        max_qos: None,
        retain_available: None,
        max_packet_size: None,
        assigned_client_identifier: None,
        topic_alias_max: None,
        reason_string: None,
        user_properties: Vec::new(),
        wildcard_subscription_available: None,
        subscription_identifiers_available: None,
        shared_subscription_available: None,
        server_keep_alive: None,
        response_information: None,
        server_reference: None,
        authentication_method: None,
        authentication_data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(level: u8) -> BytesMut {
        // CONNECT, client id "c", clean, keep-alive 60.
        let mut b = BytesMut::new();
        let body: &[u8] = if level == 5 {
            &[0, 4, b'M', b'Q', b'T', b'T', 5, 2, 0, 60, 0, 0, 1, b'c']
        } else {
            &[0, 4, b'M', b'Q', b'T', b'T', level, 2, 0, 60, 0, 1, b'c']
        };
        b.extend_from_slice(&[0x10, body.len() as u8]);
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn reads_connect_of_both_versions() {
        for (level, version) in [(4, Version::V4), (5, Version::V5)] {
            let mut b = connect(level);
            let Some(Incoming::Connect(c)) = read(&mut b, None, 1024).unwrap() else {
                panic!("not a connect")
            };
            assert_eq!(c.version, version);
            assert_eq!(c.client_id, "c");
            assert!(c.clean);
            assert!(b.is_empty());
        }
        assert!(matches!(
            read(&mut connect(3), None, 1024),
            Err(MqttError::Version(3))
        ));
    }

    #[test]
    fn waits_for_whole_packets_and_refuses_huge_ones() {
        let mut b = connect(4);
        let mut half = b.split_to(5);
        assert_eq!(read(&mut half, None, 1024).unwrap(), None);
        // Remaining length 268435455 (the most MQTT allows): refused from the header.
        let mut huge = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0x7F][..]);
        assert!(matches!(
            read(&mut huge, Some(Version::V4), 1024),
            Err(MqttError::TooLarge { .. })
        ));
        // A fifth length byte is malformed.
        let mut bad = BytesMut::from(&[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01][..]);
        assert!(read(&mut bad, Some(Version::V4), 1024).is_err());
        let mut not_connect = BytesMut::from(&[0xC0, 0x00][..]);
        assert!(matches!(
            read(&mut not_connect, None, 1024),
            Err(MqttError::Protocol(_))
        ));
    }

    #[test]
    fn connack_announces_the_receive_maximum_under_mqtt_5() {
        let mut out = BytesMut::new();
        write(
            Version::V5,
            &Outgoing::ConnAck(ConnCode::Accepted, false, 7),
            &mut out,
        )
        .unwrap();
        match v5::Packet::read(&mut out, None).unwrap() {
            v5::Packet::ConnAck(c) => {
                assert_eq!(c.properties.and_then(|p| p.receive_max), Some(7));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn publish_is_written_as_the_codec_writes_it() {
        let sizes = [0usize, 1, 100, 127, 128, 16_383, 16_384, 70_000];
        for (size, qos, dup, retain) in sizes.iter().flat_map(|&n| {
            [
                (n, 0u8, false, false),
                (n, 1, true, false),
                (n, 1, false, true),
            ]
        }) {
            let payload = Bytes::from(vec![7u8; size]);
            let p = Publish {
                topic: "a/b/c".into(),
                qos,
                pkid: if qos > 0 { 513 } else { 0 },
                retain,
                dup,
                payload: payload.clone(),
            };
            let mut ours = BytesMut::new();
            write_publish(Version::V4, &p, &mut ours).unwrap();
            let mut codec = BytesMut::new();
            v4::Packet::Publish(v4::Publish {
                dup,
                qos: to_qos4(qos),
                retain,
                topic: p.topic.clone(),
                pkid: p.pkid,
                payload: payload.clone(),
            })
            .write(&mut codec, usize::MAX)
            .unwrap();
            assert_eq!(ours, codec, "3.1.1, {size} B, QoS {qos}");
            let mut ours = BytesMut::new();
            write_publish(Version::V5, &p, &mut ours).unwrap();
            let mut codec = BytesMut::new();
            v5::Packet::Publish(v5::Publish {
                dup,
                qos: to_qos5(qos),
                retain,
                topic: Bytes::copy_from_slice(p.topic.as_bytes()),
                pkid: p.pkid,
                payload,
                properties: None,
            })
            .write(&mut codec, None)
            .unwrap();
            assert_eq!(ours, codec, "5, {size} B, QoS {qos}");
        }
        let long = Publish {
            topic: "x".repeat(70_000),
            qos: 0,
            pkid: 0,
            retain: false,
            dup: false,
            payload: Bytes::new(),
        };
        assert!(write_publish(Version::V4, &long, &mut BytesMut::new()).is_err());
    }

    #[test]
    fn writes_what_it_reads() {
        for version in [Version::V4, Version::V5] {
            let publish = Publish {
                topic: "a/b".into(),
                qos: 1,
                pkid: 7,
                retain: false,
                dup: false,
                payload: Bytes::from_static(b"x"),
            };
            let mut out = BytesMut::new();
            write(version, &Outgoing::Publish(publish.clone()), &mut out).unwrap();
            assert_eq!(
                read(&mut out, Some(version), 1024).unwrap(),
                Some(Incoming::Publish(publish))
            );
            let mut bare = BytesMut::from(&[0xE0, 0x00][..]);
            assert_eq!(
                read(&mut bare, Some(version), 1024).unwrap(),
                Some(Incoming::Disconnect(false))
            );
        }
    }
}
