//! Frames produced by YoMo v1.22 itself (`testdata/yomo-v1.22/`): `wire-*` captured from
//! real connections, `codec-*` written by YoMo's encoder. Every one decodes to the fields
//! recorded beside it; every `codec-*` frame is re-encoded from those fields byte for byte
//! (the `wire-*` ones carry multi-key metadata in Go's random map order, so they are
//! compared as decoded maps).

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use y3_transport::frame::{self, ClientType, Data, Frame, Goaway, GoawayCode, Handshake};
use y3_transport::Metadata;

fn vectors(kind: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/yomo-v1.22")
        .join(format!("{kind}-vectors.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn bytes_of(v: &Value) -> Bytes {
    Bytes::from(hex::decode(v["hex"].as_str().unwrap()).unwrap())
}

fn str_of<'a>(d: &'a Value, key: &str) -> &'a str {
    d[key].as_str().unwrap_or_else(|| panic!("{key} in {d}"))
}

fn num(v: &Value) -> u32 {
    match v {
        Value::Number(n) => n.as_u64().unwrap() as u32,
        Value::String(s) => u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap(),
        other => panic!("not a number: {other}"),
    }
}

fn map_of(d: &Value) -> BTreeMap<String, String> {
    d["metadata"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect()
}

fn payload_of(d: &Value) -> Vec<u8> {
    if let Some(hex) = d.get("payload_hex") {
        hex::decode(hex.as_str().unwrap()).unwrap()
    } else if let Some(text) = d.get("payload") {
        text.as_str().unwrap().as_bytes().to_vec()
    } else {
        let byte = u8::from_str_radix(str_of(d, "payload_byte"), 16).unwrap();
        vec![byte; d["payload_len"].as_u64().unwrap() as usize]
    }
}

/// The frame the recorded fields describe, as y3 builds it.
fn expected(file: &str, d: &Value) -> Frame {
    let kind = &file[file.find('-').unwrap() + 4..];
    if d.get("client_type").is_some() {
        let mut h = Handshake::new(
            ClientType::from_code(num(&d["client_type"]) as u8),
            str_of(d, "name"),
            str_of(d, "id"),
        );
        h.observed = d["observe"].as_array().unwrap().iter().map(num).collect();
        h.auth_name = str_of(d, "auth_name").into();
        h.auth_payload = str_of(d, "auth_payload").into();
        h.version = str_of(d, "version").into();
        h.function_definition = Bytes::copy_from_slice(str_of(d, "function_definition").as_bytes());
        h.wanted_target = str_of(d, "wanted_target").into();
        h.extension = 0;
        h.into()
    } else if d.get("tag").is_some() {
        let map = map_of(d);
        let md = Metadata::from_pairs(map.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Frame::Data(Data::new(num(&d["tag"]), payload_of(d)).with_metadata(md))
    } else if kind.contains("rejected") {
        Frame::Rejected(Goaway::new(GoawayCode::Unspecified, str_of(d, "message")))
    } else if kind.contains("goaway") {
        Frame::Goaway(Goaway::new(GoawayCode::Unspecified, str_of(d, "message")))
    } else if kind.contains("connect") {
        let endpoint = d.get("endpoint").unwrap_or(&d["message"]);
        Frame::ConnectTo(endpoint.as_str().unwrap().into())
    } else {
        Frame::HandshakeAck
    }
}

#[test]
fn every_yomo_frame_decodes_to_its_fields() {
    let config = frame::config(1 << 20);
    let mut seen = 0;
    for v in vectors("codec").iter().chain(&vectors("wire")) {
        let file = v["file"].as_str().unwrap();
        let decoded = Frame::decode(bytes_of(v), &config).unwrap_or_else(|e| panic!("{file}: {e}"));
        let want = expected(file, &v["decoded"]);
        match (&decoded, &want) {
            // Metadata compared as maps: Go writes map keys in random order.
            (Frame::Data(got), Frame::Data(want)) => {
                assert_eq!(
                    (got.tag, &got.payload, got.hops),
                    (want.tag, &want.payload, 0),
                    "{file}"
                );
                assert_eq!(
                    got.metadata.to_map().unwrap(),
                    want.metadata.to_map().unwrap(),
                    "{file}"
                );
            }
            _ => assert_eq!(decoded, want, "{file}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 22);
}

#[test]
fn every_codec_frame_reencodes_byte_for_byte() {
    for v in vectors("codec") {
        let file = v["file"].as_str().unwrap();
        let frame = expected(file, &v["decoded"]);
        let mut buf = BytesMut::new();
        frame.encode(&mut buf, 1 << 20).unwrap();
        assert_eq!(hex::encode(&buf), v["hex"].as_str().unwrap(), "{file}");
        assert_eq!(frame.encoded_len(), buf.len(), "{file}");
    }
}

#[test]
fn hex_files_match_the_json() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/yomo-v1.22");
    for v in vectors("codec").iter().chain(&vectors("wire")) {
        let file = v["file"].as_str().unwrap();
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(text.trim(), v["hex"].as_str().unwrap(), "{file}");
    }
}
