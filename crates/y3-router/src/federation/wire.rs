//! A data frame as a NATS message, and back (`spec/federation.md`).
//!
//! ```text
//!  subject  <prefix>.tag.<tag, decimal>            e.g. y3.tag.51
//!  headers  Y3-Origin:   the publishing router's federation name
//!           Y3-Epoch:    the publishing router's start (ms since the Unix epoch)
//!           Y3-Seq:      1, 2, 3, ... per (origin, epoch, subject): gaps are counted losses
//!           Y3-Hops:     the frame's hops (stream functions passed)
//!           Y3-Metadata: the frame's msgpack metadata, hex (absent: empty)
//!           Nats-Msg-Id: <tag>:<yomo-tid> (durable tags: JetStream's de-duplication)
//!  payload  the frame's payload, as is
//! ```

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use y3_transport::frame::Data;
use y3_transport::metadata::{self, Metadata};

pub(crate) const ORIGIN: &str = "Y3-Origin";
pub(crate) const EPOCH: &str = "Y3-Epoch";
pub(crate) const SEQ: &str = "Y3-Seq";
pub(crate) const HOPS: &str = "Y3-Hops";
pub(crate) const METADATA: &str = "Y3-Metadata";
pub(crate) const MSG_ID: &str = "Nats-Msg-Id";

/// The header names, built once: a name made from a `&str` is validated and allocated on
/// every insert and every lookup.
fn name(name: &'static str) -> HeaderName {
    HeaderName::from_static(name)
}

/// The subject of `tag`'s frames.
pub(crate) fn subject(prefix: &str, tag: u32) -> String {
    format!("{prefix}.tag.{tag}")
}

/// The tag of a frame subject, if it is one.
pub(crate) fn tag_of(prefix: &str, subject: &str) -> Option<u32> {
    subject
        .strip_prefix(prefix)?
        .strip_prefix(".tag.")?
        .parse()
        .ok()
}

/// The JetStream message id of a frame: its tag and `yomo-tid` (`None` without a tid).
pub(crate) fn msg_id(data: &Data) -> Option<String> {
    match data.metadata.get(metadata::TID) {
        Ok(Some(tid)) if !tid.is_empty() => Some(format!("{}:{tid}", data.tag)),
        _ => None,
    }
}

/// Who published a message, and where it stands in that publisher's sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub origin: String,
    pub epoch: u64,
    pub seq: u64,
}

/// The headers of `data` published by `stamp`.
pub(crate) fn headers(data: &Data, stamp: &Stamp) -> HeaderMap {
    let mut h = HeaderMap::new();
    // Every value is a `String` moved in (no second copy). The origin is a subject token,
    // the numbers are digits and the metadata is hex: none holds a line break, which
    // async-nats refuses with a panic.
    h.insert(name(ORIGIN), stamp.origin.clone());
    h.insert(name(EPOCH), stamp.epoch.to_string());
    h.insert(name(SEQ), stamp.seq.to_string());
    h.insert(name(HOPS), data.hops.to_string());
    if !data.metadata.is_empty() {
        h.insert(name(METADATA), to_hex(data.metadata.as_bytes()));
    }
    // The id carries a client's yomo-tid: one with a line break is left out (the frame is
    // then not de-duplicated by JetStream) rather than refused.
    if let Some(id) = msg_id(data).and_then(|id| id.parse::<HeaderValue>().ok()) {
        h.insert(name(MSG_ID), id);
    }
    h
}

/// Lower-case hex of `bytes`, by table (`hex::encode` goes one `char` at a time).
fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Why a message is not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    Subject,
    Header(&'static str),
}

/// The frame and stamp of a message on `subject`.
pub(crate) fn decode(
    prefix: &str,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: Bytes,
) -> Result<(Data, Stamp), Malformed> {
    let tag = tag_of(prefix, subject).ok_or(Malformed::Subject)?;
    let get = |n: &'static str| headers.and_then(|h| h.get(name(n))).map(|v| v.as_str());
    let number = |name: &'static str| -> Result<u64, Malformed> {
        get(name)
            .ok_or(Malformed::Header(name))?
            .parse()
            .map_err(|_| Malformed::Header(name))
    };
    let stamp = Stamp {
        origin: get(ORIGIN).ok_or(Malformed::Header(ORIGIN))?.to_owned(),
        epoch: number(EPOCH)?,
        seq: number(SEQ)?,
    };
    let hops = u32::try_from(number(HOPS)?).map_err(|_| Malformed::Header(HOPS))?;
    let metadata = match get(METADATA) {
        None => Metadata::empty(),
        Some(hexed) => {
            let bytes = hex::decode(hexed).map_err(|_| Malformed::Header(METADATA))?;
            let metadata = Metadata::from_bytes(Bytes::from(bytes));
            metadata
                .validate()
                .map_err(|_| Malformed::Header(METADATA))?;
            metadata
        }
    };
    let mut data = Data::new(tag, payload).with_metadata(metadata);
    data.hops = hops;
    Ok((data, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut data =
            Data::new(0x33, Bytes::from_static(b"hello")).with_metadata(Metadata::from_pairs([
                ("yomo-tid", "t1"),
                ("yomo-source-id", "s"),
            ]));
        data.hops = 2;
        let stamp = Stamp {
            origin: "a".into(),
            epoch: 7,
            seq: 42,
        };
        let h = headers(&data, &stamp);
        assert_eq!(h.get(MSG_ID).unwrap().as_str(), "51:t1");
        assert_eq!(
            h.get(METADATA).unwrap().as_str(),
            hex::encode(data.metadata.as_bytes())
        );
        let (back, s) = decode("y3", "y3.tag.51", Some(&h), data.payload.clone()).unwrap();
        assert_eq!(s, stamp);
        assert_eq!(back.tag, 0x33);
        assert_eq!(back.hops, 2);
        assert_eq!(
            back.metadata.to_map().unwrap(),
            data.metadata.to_map().unwrap()
        );
        assert_eq!(&back.payload[..], b"hello");
    }

    #[test]
    fn a_tid_with_a_line_break_is_no_message_id() {
        let data = Data::new(0x33, Bytes::from_static(b"x"))
            .with_metadata(Metadata::from_pairs([("yomo-tid", "a\r\nInjected: 1")]));
        let stamp = Stamp {
            origin: "a".into(),
            epoch: 1,
            seq: 1,
        };
        let h = headers(&data, &stamp);
        assert!(h.get(MSG_ID).is_none());
        assert!(h.get("Injected").is_none());
        let (back, _) = decode("y3", "y3.tag.51", Some(&h), data.payload.clone()).unwrap();
        assert_eq!(
            back.metadata.to_map().unwrap(),
            data.metadata.to_map().unwrap()
        );
    }

    #[test]
    fn malformed_messages_are_refused() {
        let h = HeaderMap::new();
        assert_eq!(
            decode("y3", "y3.tag.x", Some(&h), Bytes::new()).unwrap_err(),
            Malformed::Subject
        );
        assert_eq!(
            decode("y3", "y3.tag.1", Some(&h), Bytes::new()).unwrap_err(),
            Malformed::Header(ORIGIN)
        );
        assert_eq!(tag_of("y3", "y3x.tag.1"), None);
    }
}
