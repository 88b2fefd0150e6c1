//! `y3-lab serde`: encode and decode msg/s of one ~120-byte message, the unit of the
//! Erlang report (protobuf 103 k msg/s encode, 61 k msg/s decode vs the VM's native
//! `term_to_binary`/`binary_to_term`), plus MQTT PUBLISH frame encode/parse.
//!
//! The message has the report message's shape: several integers, a host string, a
//! timestamp, an id string and an embedded MQTT PUBLISH frame as bytes.
//!
//! ```text
//! Envelope { version 1, kind 3, qos 1, seq 1234567, host "edge-gw-07.eu-west.yomo",
//!            timestamp 1700000000123 (ms), id "5f0c8a8e-...-7d0c" (36), rssi -67,
//!            frame: PUBLISH qos1 pkid 7 "yomo/noise/7" payload "noise=47.5" (28 bytes) }
//! ```
//!
//! Rows: `y3-derive` (always), and with `peers`: `prost`, `postcard`, `rmp-serde` (compact
//! arrays, its default), `serde_json`, and `mqtt-rumqttc` (rumqttc's v4 codec encoding and
//! parsing the frame alone). Encoding writes into a reused buffer; decoding builds an owned
//! message (strings and bytes copied) in every format. Each row is checked (decode of the
//! encoding equals the message) before it is timed.

use std::sync::Arc;

use anyhow::{ensure, Result};
use indicatif::ProgressBar;
use y3::{Dialect, Message as _, Packet};

use crate::data::Scalar;
use crate::measure::{self, looped, Factory, Mode, Settings};
use crate::record::{Dim, Harness, Meta, Record, Results};

/// The message, y3 shape (`#[derive(y3::Message)]`).
#[derive(Debug, Clone, Default, PartialEq, y3::Message)]
pub struct Envelope {
    /// Schema version.
    #[y3(tag = 0x10)]
    pub version: u32,
    /// Message kind.
    #[y3(tag = 0x11)]
    pub kind: i32,
    /// QoS of the embedded frame.
    #[y3(tag = 0x12)]
    pub qos: u32,
    /// Sequence number.
    #[y3(tag = 0x13)]
    pub seq: u64,
    /// Origin host.
    #[y3(tag = 0x14)]
    pub host: String,
    /// Milliseconds since the Unix epoch.
    #[y3(tag = 0x15)]
    pub timestamp: i64,
    /// Message id.
    #[y3(tag = 0x16)]
    pub id: String,
    /// Signal strength.
    #[y3(tag = 0x17)]
    pub rssi: i32,
    /// The embedded MQTT PUBLISH frame.
    #[y3(tag = 0x18)]
    pub frame: Vec<u8>,
}

/// The key the y3 message node is written under.
pub const ENVELOPE_KEY: u32 = 0x20;

/// The embedded frame: MQTT 3.1.1 PUBLISH, QoS 1, packet id 7, topic `yomo/noise/7`,
/// payload `noise=47.5`.
///
/// ```text
/// 32 1a                       PUBLISH, QoS 1; remaining length 26
/// 00 0c 796f6d6f2f6e6f6973652f37   topic "yomo/noise/7"
/// 00 07                       packet id 7
/// 6e6f6973653d34372e35        payload "noise=47.5"
/// ```
pub const FRAME: [u8; 28] = [
    0x32, 0x1a, 0x00, 0x0c, b'y', b'o', b'm', b'o', b'/', b'n', b'o', b'i', b's', b'e', b'/', b'7',
    0x00, 0x07, b'n', b'o', b'i', b's', b'e', b'=', b'4', b'7', b'.', b'5',
];

/// Topic, packet id and payload of [`FRAME`].
pub const FRAME_PARTS: (&str, u16, &[u8]) = ("yomo/noise/7", 7, b"noise=47.5");

/// The benchmark message.
pub fn envelope() -> Envelope {
    Envelope {
        version: 1,
        kind: 3,
        qos: 1,
        seq: 1_234_567,
        host: "edge-gw-07.eu-west.yomo".into(),
        timestamp: 1_700_000_000_123,
        id: "5f0c8a8e-3b1d-4c2e-9a47-0b6e2f1c7d0c".into(),
        rssi: -67,
        frame: FRAME.to_vec(),
    }
}

/// One serde-suite implementation: encode and decode of one format.
pub struct SerdeImpl {
    /// Row name.
    pub name: &'static str,
    /// Wire format.
    pub format: &'static str,
    /// The case (`envelope` or `mqtt-publish`).
    pub case: &'static str,
    /// One line for the report.
    pub about: &'static str,
    /// Checks the format and returns (encoded size, encode factory, decode factory).
    pub prepare: fn() -> Result<(usize, Factory, Factory)>,
}

/// A runner with no input: `op` does everything.
fn no_input<F>(expected: Scalar, op: F) -> Box<dyn measure::Runner>
where
    F: FnMut() -> Scalar + Send + 'static,
{
    let mut op = op;
    let empty: Arc<[u8]> = Arc::from(&[][..]);
    looped(empty, expected, move |_: &[u8]| op())
}

fn y3_encode(env: &Envelope, buf: &mut Vec<u8>) -> Result<(), y3::EncodeError> {
    env.encode_packet(ENVELOPE_KEY, Dialect::Golang, buf)
}

fn y3_decode(buf: &[u8]) -> Result<Envelope, y3::DecodeError> {
    let (packet, _) = Packet::parse(buf)?;
    Envelope::from_packet(&packet)
}

fn y3_prepare() -> Result<(usize, Factory, Factory)> {
    let env = envelope();
    let bytes = env.to_packet(ENVELOPE_KEY, Dialect::Golang)?;
    ensure!(y3::decode(&bytes).is_ok(), "y3 packet validates");
    let mut encoded = Vec::new();
    y3_encode(&env, &mut encoded)?;
    ensure!(encoded == bytes, "encode_packet writes to_packet's bytes");
    round_trip(
        envelope,
        |e| e.seq,
        256,
        |e, buf| Ok(y3_encode(e, buf)?),
        |b| Ok(y3_decode(b)?),
    )
}

/// The encode and decode rows of one implementation of a message type, the prepare/loop/
/// check every serde row shares: checks that `decode` reads back what `encode_into` wrote,
/// then makes the runners: encode `make()` into a reused buffer of `capacity` (must give
/// the encoded size), decode the encoded bytes (must give the message's `seq`).
fn round_trip<T: PartialEq + Send + 'static>(
    make: fn() -> T,
    seq: fn(&T) -> u64,
    capacity: usize,
    encode_into: fn(&T, &mut Vec<u8>) -> Result<()>,
    decode: fn(&[u8]) -> Result<T>,
) -> Result<(usize, Factory, Factory)> {
    let msg = make();
    let mut bytes = Vec::new();
    encode_into(&msg, &mut bytes)?;
    ensure!(decode(&bytes)? == msg, "round trip");
    let len = bytes.len();
    let encode: Factory = Box::new(move || {
        let msg = make();
        let mut buf = Vec::with_capacity(capacity);
        no_input(Scalar::U64(len as u64), move || {
            buf.clear();
            match encode_into(&msg, &mut buf) {
                Ok(()) => Scalar::U64(buf.len() as u64),
                Err(_) => Scalar::Missing,
            }
        })
    });
    let input: Arc<[u8]> = bytes.into();
    let witness = Scalar::U64(seq(&msg));
    let decode: Factory = Box::new(move || {
        looped(input.clone(), witness, move |buf: &[u8]| {
            match decode(buf) {
                Ok(m) => Scalar::U64(seq(&m)),
                Err(_) => Scalar::Missing,
            }
        })
    });
    Ok((len, encode, decode))
}

/// Every serde-suite implementation compiled in.
pub fn impls() -> Vec<SerdeImpl> {
    #[allow(unused_mut)]
    let mut out = vec![SerdeImpl {
        name: "y3-derive",
        format: "y3",
        case: "envelope",
        about:
            "#[derive(y3::Message)]: encode_packet into a reused Vec; Packet::parse + from_packet",
        prepare: y3_prepare,
    }];
    #[cfg(feature = "peers")]
    out.extend(peers::impls());
    out
}

/// What `y3-lab serde` runs.
#[derive(Debug, Clone)]
pub struct SerdeOptions {
    /// Timing settings.
    pub settings: Settings,
    /// Modes to run.
    pub modes: Vec<Mode>,
    /// Only implementations whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// `--quick`.
    pub quick: bool,
    /// The command line.
    pub command: String,
}

/// Runs the serde suite.
///
/// # Errors
/// None in practice: failing rows are skipped and noted.
pub fn run(opts: &SerdeOptions, bar: &ProgressBar) -> Result<Results> {
    let impls: Vec<SerdeImpl> = impls()
        .into_iter()
        .filter(|i| opts.only.is_empty() || opts.only.iter().any(|o| i.name.contains(o.as_str())))
        .collect();
    bar.set_length((impls.len() * 2 * opts.modes.len()) as u64);
    let mut results = Results {
        meta: Meta {
            harness: Some(Harness {
                seed: 0,
                samples: opts.settings.samples,
                sample_ms: opts.settings.sample.as_millis() as u64,
                threads: opts.settings.threads,
                peers: crate::PEERS_ENABLED,
            }),
            ..Meta::now("serde", &opts.command, opts.quick)
        },
        ..Results::default()
    };
    if !crate::PEERS_ENABLED {
        results.notes.push(
            "peers disabled: built without the `peers` feature; run \
             `cargo run --release -p y3-lab --features peers -- serde`"
                .into(),
        );
    }
    // (impl, op, bytes, factory) for every row that prepared.
    let mut rows: Vec<(&SerdeImpl, &'static str, usize, Factory)> = Vec::new();
    for imp in &impls {
        match (imp.prepare)() {
            Ok((bytes, encode, decode)) => {
                rows.push((imp, "encode", bytes, encode));
                rows.push((imp, "decode", bytes, decode));
            }
            Err(e) => {
                results.notes.push(format!("skipped {}: {e:#}", imp.name));
                bar.inc((2 * opts.modes.len()) as u64);
            }
        }
    }
    let labelled: Vec<(String, &Factory)> = rows
        .iter()
        .map(|(imp, op, _, factory)| (format!("{} {op}", imp.name), factory))
        .collect();
    for (_, outcomes) in measure::measure_rows(&labelled, &opts.modes, &opts.settings, bar) {
        for ((imp, op, bytes, _), outcome) in rows.iter().zip(outcomes) {
            match outcome {
                Ok(m) => {
                    let mut r = Record::from_measurement("serde", &m)
                        .dim(Dim::Format, imp.format)
                        .dim(Dim::Op, *op)
                        .dim(Dim::Bytes, *bytes);
                    r.case = imp.case.into();
                    r.implementation = imp.name.into();
                    results.records.push(r);
                }
                Err(e) => results
                    .notes
                    .push(format!("refused {} {op}: {e:#}", imp.name)),
            }
        }
    }
    Ok(results)
}

#[cfg(feature = "peers")]
mod peers {
    //! The serde-suite peers.

    use super::*;
    use bytes::BytesMut;
    use prost::Message as _;
    use serde::{Deserialize, Serialize};

    /// The message, protobuf shape.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProstEnvelope {
        #[prost(uint32, tag = "1")]
        pub version: u32,
        #[prost(int32, tag = "2")]
        pub kind: i32,
        #[prost(uint32, tag = "3")]
        pub qos: u32,
        #[prost(uint64, tag = "4")]
        pub seq: u64,
        #[prost(string, tag = "5")]
        pub host: String,
        #[prost(int64, tag = "6")]
        pub timestamp: i64,
        #[prost(string, tag = "7")]
        pub id: String,
        #[prost(sint32, tag = "8")]
        pub rssi: i32,
        #[prost(bytes = "vec", tag = "9")]
        pub frame: Vec<u8>,
    }

    /// The message, serde shape (owned, bytes as a byte string).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SerdeEnvelope {
        pub version: u32,
        pub kind: i32,
        pub qos: u32,
        pub seq: u64,
        pub host: String,
        pub timestamp: i64,
        pub id: String,
        pub rssi: i32,
        #[serde(with = "serde_bytes")]
        pub frame: Vec<u8>,
    }

    fn prost_envelope() -> ProstEnvelope {
        let e = envelope();
        ProstEnvelope {
            version: e.version,
            kind: e.kind,
            qos: e.qos,
            seq: e.seq,
            host: e.host,
            timestamp: e.timestamp,
            id: e.id,
            rssi: e.rssi,
            frame: e.frame,
        }
    }

    fn serde_envelope() -> SerdeEnvelope {
        let e = envelope();
        SerdeEnvelope {
            version: e.version,
            kind: e.kind,
            qos: e.qos,
            seq: e.seq,
            host: e.host,
            timestamp: e.timestamp,
            id: e.id,
            rssi: e.rssi,
            frame: e.frame,
        }
    }

    fn prost_prepare() -> Result<(usize, Factory, Factory)> {
        round_trip(
            prost_envelope,
            |m| m.seq,
            256,
            |m, buf| Ok(m.encode(buf)?),
            |b| Ok(ProstEnvelope::decode(b)?),
        )
    }

    /// A serde format: `encode` appends to a cleared buffer, `decode` reads the message.
    fn serde_prepare(
        encode_into: fn(&SerdeEnvelope, &mut Vec<u8>) -> Result<()>,
        decode: fn(&[u8]) -> Result<SerdeEnvelope>,
    ) -> Result<(usize, Factory, Factory)> {
        round_trip(serde_envelope, |m| m.seq, 512, encode_into, decode)
    }

    fn postcard_prepare() -> Result<(usize, Factory, Factory)> {
        serde_prepare(
            |m, buf| {
                // `to_extend` appends to the caller's Vec (kept by the caller between ops).
                let taken = std::mem::take(buf);
                *buf = postcard::to_extend(m, taken)?;
                Ok(())
            },
            |b| Ok(postcard::from_bytes(b)?),
        )
    }

    fn rmp_prepare() -> Result<(usize, Factory, Factory)> {
        serde_prepare(
            |m, buf| Ok(rmp_serde::encode::write(buf, m)?),
            |b| Ok(rmp_serde::from_slice(b)?),
        )
    }

    fn json_prepare() -> Result<(usize, Factory, Factory)> {
        serde_prepare(
            |m, buf| Ok(serde_json::to_writer(buf, m)?),
            |b| Ok(serde_json::from_slice(b)?),
        )
    }

    /// The frame as rumqttc builds it.
    pub fn rumqttc_publish() -> rumqttc::mqttbytes::v4::Publish {
        let (topic, pkid, payload) = FRAME_PARTS;
        let mut p = rumqttc::mqttbytes::v4::Publish::new(
            topic,
            rumqttc::mqttbytes::QoS::AtLeastOnce,
            payload,
        );
        p.pkid = pkid;
        p
    }

    fn mqtt_read(stream: &mut BytesMut) -> Option<rumqttc::mqttbytes::v4::Publish> {
        match rumqttc::mqttbytes::v4::Packet::read(stream, 1 << 20) {
            Ok(rumqttc::mqttbytes::v4::Packet::Publish(p)) => Some(p),
            _ => None,
        }
    }

    fn mqtt_prepare() -> Result<(usize, Factory, Factory)> {
        let publish = rumqttc_publish();
        let mut out = BytesMut::new();
        publish.write(&mut out)?;
        ensure!(
            out[..] == FRAME[..],
            "rumqttc writes the frame byte for byte"
        );
        let mut stream = BytesMut::from(&FRAME[..]);
        ensure!(
            mqtt_read(&mut stream).as_ref() == Some(&publish),
            "rumqttc parses the frame"
        );
        let len = FRAME.len();
        let encode: Factory = Box::new(move || {
            let publish = rumqttc_publish();
            let mut buf = BytesMut::with_capacity(256);
            no_input(Scalar::U64(len as u64), move || {
                buf.clear();
                match publish.write(&mut buf) {
                    Ok(n) => Scalar::U64(n as u64),
                    Err(_) => Scalar::Missing,
                }
            })
        });
        let input: Arc<[u8]> = Arc::from(&FRAME[..]);
        let decode: Factory = Box::new(move || {
            let mut stream = BytesMut::with_capacity(256);
            looped(input.clone(), Scalar::U64(7), move |buf: &[u8]| {
                // Bytes arrive in the read buffer, then the codec splits a frame off it.
                stream.extend_from_slice(buf);
                mqtt_read(&mut stream).map_or(Scalar::Missing, |p| Scalar::U64(u64::from(p.pkid)))
            })
        });
        Ok((len, encode, decode))
    }

    pub(super) fn impls() -> Vec<SerdeImpl> {
        vec![
            SerdeImpl {
                name: "prost",
                format: "protobuf",
                case: "envelope",
                about: "#[derive(prost::Message)]: encode into a reused Vec; Message::decode",
                prepare: prost_prepare,
            },
            SerdeImpl {
                name: "postcard",
                format: "postcard",
                case: "envelope",
                about: "postcard::to_extend into a reused Vec; postcard::from_bytes",
                prepare: postcard_prepare,
            },
            SerdeImpl {
                name: "rmp-serde",
                format: "msgpack",
                case: "envelope",
                about: "rmp_serde::encode::write (compact arrays) into a reused Vec; from_slice",
                prepare: rmp_prepare,
            },
            SerdeImpl {
                name: "serde_json",
                format: "json",
                case: "envelope",
                about: "serde_json::to_writer into a reused Vec; from_slice",
                prepare: json_prepare,
            },
            SerdeImpl {
                name: "mqtt-rumqttc",
                format: "mqtt",
                case: "mqtt-publish",
                about: "rumqttc v4 codec: Publish::write into a reused BytesMut; Packet::read",
                prepare: mqtt_prepare,
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_about_130_bytes_and_round_trips() {
        let env = envelope();
        let bytes = env.to_packet(ENVELOPE_KEY, Dialect::Golang).unwrap();
        assert!((110..=140).contains(&bytes.len()), "{} bytes", bytes.len());
        assert_eq!(y3_decode(&bytes).unwrap(), env);
        assert_eq!(FRAME[1] as usize, FRAME.len() - 2);
    }

    #[test]
    fn every_row_checks() {
        for imp in impls() {
            let (bytes, encode, decode) =
                (imp.prepare)().unwrap_or_else(|e| panic!("{}: {e}", imp.name));
            assert!(bytes > 0);
            measure::check(&encode).unwrap_or_else(|e| panic!("{} encode: {e}", imp.name));
            measure::check(&decode).unwrap_or_else(|e| panic!("{} decode: {e}", imp.name));
        }
    }
}
