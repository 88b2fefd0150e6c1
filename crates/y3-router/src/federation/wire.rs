//! A data frame as a NATS message, and back (`spec/federation.md`).
//!
//! ```text
//!  subject  <prefix>.tag.<tag, decimal>            e.g. y3.tag.51
//!  headers  Y3-Origin:   the publishing router's federation name
//!           Y3-Epoch:    the publishing router's start (ms since the Unix epoch)
//!           Y3-Seq:      1, 2, 3, ... per (origin, epoch, subject): gaps are counted losses
//!           Y3-Hops:     the frame's hops (stream functions passed)
//!           Y3-Metadata: the frame's msgpack metadata, hex (absent: empty)
//!           Nats-Msg-Id: <tag>:<yomo-tid>:<content, 16 hex> (durable tags only: JetStream's
//!                        de-duplication; see [`msg_id`])
//!  payload  the frame's payload, as is
//! ```
//!
//! Plain frames of one subject that were waiting together may travel as one message, a
//! batch: header `Y3-Batch: <count>` instead of `Y3-Hops`/`Y3-Metadata`, `Y3-Seq` the
//! first frame's (the others follow, one each), and the frames in the body:
//!
//! ```text
//!  entry    hops: u32 BE | metadata length: u32 BE | payload length: u32 BE
//!           | metadata (msgpack, raw) | payload
//!  body     entry 1 | entry 2 | ... | entry <count>      (nothing after the last)
//! ```
//!
//! To routers that read them (`Y3-Reads-Packed`), the same frames go **packed**: a message
//! without headers (core NATS `PUB`, no header block for either side to build or parse), the
//! stamp and count in front of the entries:
//!
//! ```text
//!  0       4      5             5+o          13+o       21+o         23+o
//!  +-------+------+-------------+------------+----------+------------+-----------------+
//!  | Y3P1  | o:u8 | origin (o)  | epoch u64  | seq u64  | count u16  | entry 1 ... <count> |
//!  +-------+------+-------------+------------+----------+------------+-----------------+
//! ```
//!
//! A publisher that went quiet on a subject says how far it got with a **mark**: a message
//! with headers `Y3-Origin`, `Y3-Epoch`, `Y3-Seq` (its last frame's) and `Y3-Mark: 1`, and
//! no body, so a receiver counts the frames lost after the last one that arrived
//! (`spec/federation.md`, "Marks").

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use y3_transport::frame::Data;
use y3_transport::metadata::{self, Metadata};

pub(crate) const ORIGIN: &str = "Y3-Origin";
pub(crate) const EPOCH: &str = "Y3-Epoch";
pub(crate) const SEQ: &str = "Y3-Seq";
pub(crate) const HOPS: &str = "Y3-Hops";
pub(crate) const METADATA: &str = "Y3-Metadata";
pub(crate) const MSG_ID: &str = "Nats-Msg-Id";
pub(crate) const BATCH: &str = "Y3-Batch";
/// On a mark: `1` (a message without frames, `Y3-Seq` the publisher's last).
pub(crate) const MARK: &str = "Y3-Mark";
/// On an interest announcement: the announcing router reads batches (`spec/federation.md`).
pub(crate) const READS_BATCHES: &str = "Y3-Reads-Batches";
/// On an interest announcement: the announcing router reads packed messages.
pub(crate) const READS_PACKED: &str = "Y3-Reads-Packed";
/// On an interest announcement: the announcing router reads marks.
pub(crate) const READS_MARKS: &str = "Y3-Reads-Marks";

/// The first bytes of a packed message's body (a message without headers).
const PACKED_MAGIC: &[u8; 4] = b"Y3P1";

/// A packed message's fixed part after the magic and the origin: epoch, seq, count.
const PACKED_STAMP: usize = 8 + 8 + 2;

pub(crate) use crate::config::federation::MAX_BATCH_FRAMES;

/// The fixed part of a batch entry: hops, metadata length, payload length.
const ENTRY_HEAD: usize = 12;

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

/// The JetStream message id of a frame: its tag, its `yomo-tid` and a digest of its
/// content (`None` without a tid).
///
/// ```text
///  <tag, decimal> ":" <yomo-tid> ":" <FNV-1a 64 of metadata bytes, then payload bytes, 16 hex>
/// ```
///
/// A frame written again after a reconnect (a durable client's resend) is the same frame,
/// metadata and payload, so it gets the same id and JetStream stores it once. The outputs a
/// stream function writes for one input share its `yomo-tid` but not their content, so each
/// is stored: with the tid alone, 300 outputs of one input were stored as one. Outputs of one
/// input that are byte for byte the same, metadata included, are one frame to the stream.
/// FNV-1a is fixed by its definition, so routers of any version agree on an id.
pub(crate) fn msg_id(data: &Data) -> Option<String> {
    use std::hash::Hasher as _;
    match data.metadata.get(metadata::TID) {
        Ok(Some(tid)) if !tid.is_empty() => {
            let mut content = fnv::FnvHasher::default();
            content.write(data.metadata.as_bytes());
            content.write(&data.payload);
            Some(format!("{}:{tid}:{:016x}", data.tag, content.finish()))
        }
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

/// Headers with `stamp`: `Y3-Origin`, `Y3-Epoch`, `Y3-Seq`.
///
/// Numbers go in as `HeaderValue::from(u64)` (digits, not checked again); a `String` or
/// `&str` value is scanned for line breaks by async-nats on every insert (a refused one is
/// a panic), a per-message cost on the hot path. The origin is a subject token (checked
/// when the federation starts) and the metadata is hex: neither holds a line break.
fn stamped(stamp: &Stamp) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(name(ORIGIN), stamp.origin.as_str());
    h.insert(name(EPOCH), HeaderValue::from(stamp.epoch));
    h.insert(name(SEQ), HeaderValue::from(stamp.seq));
    h
}

/// The headers of `data` published by `stamp` on a plain tag (core NATS): no
/// `Nats-Msg-Id`, which only JetStream reads (see [`durable_headers`]).
pub(crate) fn headers(data: &Data, stamp: &Stamp) -> HeaderMap {
    let mut h = stamped(stamp);
    h.insert(name(HOPS), HeaderValue::from(data.hops));
    if !data.metadata.is_empty() {
        h.insert(name(METADATA), to_hex(data.metadata.as_bytes()));
    }
    h
}

/// The headers of `data` published by `stamp` on a durable tag (JetStream): [`headers`]
/// and `Nats-Msg-Id` ([`msg_id`]), which the stream de-duplicates by. Only here: the id
/// digests the whole payload (FNV-1a, a byte at a time), work a plain frame does not need.
pub(crate) fn durable_headers(data: &Data, stamp: &Stamp) -> HeaderMap {
    let mut h = headers(data, stamp);
    // The id carries a client's yomo-tid: one with a line break is left out (the frame is
    // then not de-duplicated by JetStream) rather than refused.
    if let Some(id) = msg_id(data).and_then(|id| id.parse::<HeaderValue>().ok()) {
        h.insert(name(MSG_ID), id);
    }
    h
}

/// The headers of a mark: `stamp`'s seq is the last frame its publisher sent on the
/// subject (the body is empty).
pub(crate) fn mark(stamp: &Stamp) -> HeaderMap {
    let mut h = stamped(stamp);
    h.insert(name(MARK), "1");
    h
}

/// The bytes `data` takes in a batch body.
pub(crate) fn entry_len(data: &Data) -> usize {
    ENTRY_HEAD + data.metadata.as_bytes().len() + data.payload.len()
}

/// One message carrying `frames` (all of one tag, at least one), the first published as
/// `first`, the others with the following sequence numbers: its headers and payload. A
/// batch of one is for routers that read batches: its hops and metadata travel in the
/// body, raw, instead of as `Y3-Hops` and hex `Y3-Metadata` headers; for the others a frame
/// goes as a message of its own ([`headers`]).
pub(crate) fn batch(frames: &[Data], first: &Stamp) -> (HeaderMap, Bytes) {
    let mut h = stamped(first);
    h.insert(name(BATCH), HeaderValue::from(frames.len()));
    let mut body = BytesMut::with_capacity(frames.iter().map(entry_len).sum());
    put_entries(&mut body, frames);
    (h, body.freeze())
}

/// `frames` (all of one tag, 1 to [`MAX_BATCH_FRAMES`]), the first published as `first`,
/// as one packed message's body (no headers); `None` when the origin is longer than 255
/// bytes or there are too many frames (then a batch carries them).
pub(crate) fn packed(frames: &[Data], first: &Stamp) -> Option<Bytes> {
    let origin = u8::try_from(first.origin.len()).ok()?;
    let count = u16::try_from(frames.len())
        .ok()
        .filter(|&n| usize::from(n) <= MAX_BATCH_FRAMES)?;
    let fixed = PACKED_MAGIC.len() + 1 + usize::from(origin) + PACKED_STAMP;
    let mut body = BytesMut::with_capacity(fixed + frames.iter().map(entry_len).sum::<usize>());
    body.put_slice(PACKED_MAGIC);
    body.put_u8(origin);
    body.put_slice(first.origin.as_bytes());
    body.put_u64(first.epoch);
    body.put_u64(first.seq);
    body.put_u16(count);
    put_entries(&mut body, frames);
    Some(body.freeze())
}

/// Appends `frames` as batch entries.
fn put_entries(body: &mut BytesMut, frames: &[Data]) {
    for data in frames {
        let metadata = data.metadata.as_bytes();
        body.put_u32(data.hops);
        // A frame's metadata and payload are bounded by the router's frame limit, far
        // below 4 GiB.
        body.put_u32(u32::try_from(metadata.len()).unwrap_or(u32::MAX));
        body.put_u32(u32::try_from(data.payload.len()).unwrap_or(u32::MAX));
        body.put_slice(metadata);
        body.put_slice(&data.payload);
    }
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
    /// A batch body that does not hold exactly the announced frames.
    Batch(BadBatch),
    /// A packed message whose fixed part (origin, epoch, sequence, count) is cut short or
    /// out of range.
    Packed,
    /// A mark with a body.
    Mark,
}

/// How a batch body disagrees with its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadBatch {
    /// The body ends inside entry `entry`'s fixed part.
    Truncated { entry: usize },
    /// Entry `entry`'s lengths reach past the body.
    PastBody { entry: usize },
    /// Bytes left after the announced count.
    Trailing { left: usize },
}

/// The frames of a message and the stamp of its first; the others follow it, one sequence
/// number each.
#[derive(Debug)]
pub(crate) struct Frames {
    pub first: Stamp,
    pub frames: Vec<Data>,
}

/// A message on a plain subject.
#[derive(Debug)]
pub(crate) enum Plain {
    /// Frames ([`decode_all`]).
    Frames(Frames),
    /// A mark: its publisher's last frame on the subject so far ([`mark`]).
    Mark(Stamp),
}

impl Plain {
    /// Its publisher's stamp (a batch's: its first frame's).
    pub(crate) fn stamp(&self) -> &Stamp {
        match self {
            Plain::Frames(f) => &f.first,
            Plain::Mark(stamp) => stamp,
        }
    }

    /// How many frames it carries.
    pub(crate) fn frames(&self) -> u64 {
        match self {
            Plain::Frames(f) => f.frames.len() as u64,
            Plain::Mark(_) => 0,
        }
    }
}

/// A message on a plain subject: frames or a mark. A mark has no body and no `Y3-Batch`.
pub(crate) fn decode_plain(
    prefix: &str,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: Bytes,
) -> Result<Plain, Malformed> {
    let Some(h) = headers.filter(|h| h.get(name(MARK)).is_some()) else {
        return decode_all(prefix, subject, headers, payload).map(Plain::Frames);
    };
    tag_of(prefix, subject).ok_or(Malformed::Subject)?;
    if h.get(name(MARK)).map(|v| v.as_str()) != Some("1") || h.get(name(BATCH)).is_some() {
        return Err(Malformed::Header(MARK));
    }
    if !payload.is_empty() {
        return Err(Malformed::Mark);
    }
    // As for frames: a sequence number with a successor (a frame's `Y3-Seq` + count fits).
    let mark = stamp(headers)?;
    if mark.seq == u64::MAX {
        return Err(Malformed::Header(SEQ));
    }
    Ok(Plain::Mark(mark))
}

/// The frames of a message on `subject`: one, a batch's (`Y3-Batch`) or a packed
/// message's (no headers, [`PACKED_MAGIC`]). A batch is taken whole or refused whole.
pub(crate) fn decode_all(
    prefix: &str,
    subject: &str,
    headers: Option<&HeaderMap>,
    payload: Bytes,
) -> Result<Frames, Malformed> {
    if headers.is_none_or(HeaderMap::is_empty) && payload.starts_with(PACKED_MAGIC) {
        return decode_packed(prefix, subject, payload);
    }
    let count = match headers.and_then(|h| h.get(name(BATCH))) {
        None => {
            let (data, first) = decode(prefix, subject, headers, payload)?;
            return Ok(Frames {
                first,
                frames: vec![data],
            });
        }
        Some(count) => count
            .as_str()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_BATCH_FRAMES).contains(n))
            .ok_or(Malformed::Header(BATCH))?,
    };
    let tag = tag_of(prefix, subject).ok_or(Malformed::Subject)?;
    let first = stamp(headers)?;
    if first.seq.checked_add(count as u64).is_none() {
        return Err(Malformed::Header(SEQ));
    }
    let frames = entries(tag, count, payload)?;
    Ok(Frames { first, frames })
}

/// The frames of a packed message (`body` starts with [`PACKED_MAGIC`]).
fn decode_packed(prefix: &str, subject: &str, mut body: Bytes) -> Result<Frames, Malformed> {
    let tag = tag_of(prefix, subject).ok_or(Malformed::Subject)?;
    body.advance(PACKED_MAGIC.len());
    let origin_len = usize::from(*body.first().ok_or(Malformed::Packed)?);
    let fixed = 1 + origin_len + PACKED_STAMP;
    if origin_len == 0 || body.len() < fixed {
        return Err(Malformed::Packed);
    }
    let origin = std::str::from_utf8(&body[1..1 + origin_len]).map_err(|_| Malformed::Packed)?;
    let origin = origin.to_owned();
    let mut stamp = &body[1 + origin_len..fixed];
    let (epoch, seq, count) = (
        stamp.get_u64(),
        stamp.get_u64(),
        usize::from(stamp.get_u16()),
    );
    if !(1..=MAX_BATCH_FRAMES).contains(&count) || seq.checked_add(count as u64).is_none() {
        return Err(Malformed::Packed);
    }
    body.advance(fixed);
    let frames = entries(tag, count, body)?;
    Ok(Frames {
        first: Stamp { origin, epoch, seq },
        frames,
    })
}

/// Exactly `count` batch entries of `tag` in `payload`.
fn entries(tag: u32, count: usize, payload: Bytes) -> Result<Vec<Data>, Malformed> {
    // Bounded by the constant and by what the body can hold, not by a length in it.
    let mut frames = Vec::with_capacity(count.min(payload.len() / ENTRY_HEAD));
    let mut rest = payload;
    for entry in 0..count {
        if rest.len() < ENTRY_HEAD {
            return Err(Malformed::Batch(BadBatch::Truncated { entry }));
        }
        let word =
            |at: usize| u32::from_be_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        let (hops, meta_len, payload_len) = (word(0), word(4) as usize, word(8) as usize);
        let end = meta_len
            .checked_add(payload_len)
            .and_then(|n| n.checked_add(ENTRY_HEAD))
            .filter(|&end| end <= rest.len())
            .ok_or(Malformed::Batch(BadBatch::PastBody { entry }))?;
        let mut entry_bytes = rest.split_to(end);
        entry_bytes.advance(ENTRY_HEAD);
        let payload = entry_bytes.split_off(meta_len);
        let metadata = (meta_len > 0).then_some(entry_bytes);
        frames.push(frame(tag, hops, metadata, payload)?);
    }
    if !rest.is_empty() {
        return Err(Malformed::Batch(BadBatch::Trailing { left: rest.len() }));
    }
    Ok(frames)
}

/// The origin, epoch and sequence number of a message.
fn stamp(headers: Option<&HeaderMap>) -> Result<Stamp, Malformed> {
    let get = |n: &'static str| headers.and_then(|h| h.get(name(n))).map(|v| v.as_str());
    Ok(Stamp {
        origin: get(ORIGIN).ok_or(Malformed::Header(ORIGIN))?.to_owned(),
        epoch: number(headers, EPOCH)?,
        seq: number(headers, SEQ)?,
    })
}

/// The decimal header `n`.
fn number(headers: Option<&HeaderMap>, n: &'static str) -> Result<u64, Malformed> {
    headers
        .and_then(|h| h.get(name(n)))
        .ok_or(Malformed::Header(n))?
        .as_str()
        .parse()
        .map_err(|_| Malformed::Header(n))
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
    if get(BATCH).is_some() {
        // A batch where one frame is expected (durable tags are one frame per message).
        return Err(Malformed::Header(BATCH));
    }
    let stamp = stamp(headers)?;
    let hops = u32::try_from(number(headers, HOPS)?).map_err(|_| Malformed::Header(HOPS))?;
    let metadata = match get(METADATA) {
        None => None,
        Some(hexed) => Some(Bytes::from(
            hex::decode(hexed).map_err(|_| Malformed::Header(METADATA))?,
        )),
    };
    Ok((frame(tag, hops, metadata, payload)?, stamp))
}

/// The frame of `tag` with `hops`, `metadata` (msgpack; `None`: empty) and `payload`.
fn frame(tag: u32, hops: u32, metadata: Option<Bytes>, payload: Bytes) -> Result<Data, Malformed> {
    let metadata = match metadata {
        None => Metadata::empty(),
        Some(bytes) => {
            let metadata = Metadata::from_bytes(bytes);
            metadata
                .validate()
                .map_err(|_| Malformed::Header(METADATA))?;
            metadata
        }
    };
    let mut data = Data::new(tag, payload).with_metadata(metadata);
    data.hops = hops;
    Ok(data)
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
        assert!(headers(&data, &stamp).get(MSG_ID).is_none());
        let h = durable_headers(&data, &stamp);
        let id = h.get(MSG_ID).unwrap().as_str();
        assert!(
            id.starts_with("51:t1:") && id.len() == "51:t1:".len() + 16,
            "{id}"
        );
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
    fn outputs_of_one_input_have_their_own_ids_and_a_resend_the_same() {
        let tid = Metadata::from_pairs([("yomo-tid", "t1")]);
        let output = |payload: &'static [u8]| {
            Data::new(0x33, Bytes::from_static(payload)).with_metadata(tid.clone())
        };
        let first = msg_id(&output(b"one")).unwrap();
        assert_ne!(first, msg_id(&output(b"two")).unwrap());
        assert_eq!(first, msg_id(&output(b"one")).unwrap());
        let targeted =
            Data::new(0x33, Bytes::from_static(b"one")).with_metadata(Metadata::from_pairs([
                ("yomo-tid", "t1"),
                ("yomo-target", "a"),
            ]));
        assert_ne!(first, msg_id(&targeted).unwrap());
        // FNV-1a 64 of the metadata bytes, then the payload: fixed across versions.
        let mut fnv = 0xcbf2_9ce4_8422_2325_u64;
        for b in tid.as_bytes().iter().chain(b"one") {
            fnv = (fnv ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        assert_eq!(first, format!("51:t1:{fnv:016x}"));
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
        let h = durable_headers(&data, &stamp);
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

    fn frames() -> Vec<Data> {
        let mut with =
            Data::new(0x33, Bytes::from_static(b"first")).with_metadata(Metadata::from_pairs([
                ("yomo-tid", "t1"),
                ("yomo-target", "x"),
            ]));
        with.hops = 3;
        let bare = Data::new(0x33, Bytes::new());
        let last = Data::new(0x33, Bytes::from(vec![7u8; 300]))
            .with_metadata(Metadata::from_pairs([("k", "v")]));
        vec![with, bare, last]
    }

    fn first() -> Stamp {
        Stamp {
            origin: "a".into(),
            epoch: 9,
            seq: 40,
        }
    }

    /// A batch's headers with `count` in `Y3-Batch`.
    fn batch_headers(count: &str) -> HeaderMap {
        let (mut h, _) = batch(&frames(), &first());
        h.insert(name(BATCH), count);
        h
    }

    fn decode_batch(h: &HeaderMap, body: &[u8]) -> Result<Frames, Malformed> {
        decode_all("y3", "y3.tag.51", Some(h), Bytes::copy_from_slice(body))
    }

    #[test]
    fn batch_round_trip() {
        let sent = frames();
        let (h, body) = batch(&sent, &first());
        assert_eq!(h.get(BATCH).unwrap().as_str(), "3");
        assert!(h.get(HOPS).is_none() && h.get(MSG_ID).is_none());
        assert_eq!(body.len(), sent.iter().map(entry_len).sum::<usize>());
        let got = decode_all("y3", "y3.tag.51", Some(&h), body).unwrap();
        assert_eq!(got.first, first());
        assert_eq!(got.frames.len(), sent.len());
        for (back, data) in got.frames.iter().zip(&sent) {
            assert_eq!(back.tag, 0x33);
            assert_eq!(back.hops, data.hops);
            assert_eq!(back.payload, data.payload);
            assert_eq!(back.metadata.as_bytes(), data.metadata.as_bytes());
        }
    }

    #[test]
    fn a_frame_alone_is_a_plain_message_or_a_batch_of_one() {
        let one = &frames()[0];
        let h = headers(one, &first());
        assert!(h.get(BATCH).is_none() && h.get(MSG_ID).is_none());
        // Read as before by any router, and as a single frame by `decode_all`.
        let (data, stamp) = decode("y3", "y3.tag.51", Some(&h), one.payload.clone()).unwrap();
        assert_eq!((data.hops, stamp), (3, first()));
        let got = decode_all("y3", "y3.tag.51", Some(&h), one.payload.clone()).unwrap();
        assert_eq!(got.frames.len(), 1);
        assert_eq!(got.frames[0].metadata.as_bytes(), one.metadata.as_bytes());
        // For routers that read batches: hops and metadata in the body, no hex.
        let (h, body) = batch(std::slice::from_ref(one), &first());
        assert_eq!(h.get(BATCH).unwrap().as_str(), "1");
        assert!(h.get(HOPS).is_none() && h.get(METADATA).is_none() && h.get(MSG_ID).is_none());
        let got = decode_all("y3", "y3.tag.51", Some(&h), body).unwrap();
        assert_eq!(got.first, first());
        assert_eq!(got.frames.len(), 1);
        let back = &got.frames[0];
        assert_eq!((back.hops, &back.payload), (3, &one.payload));
        assert_eq!(back.metadata.as_bytes(), one.metadata.as_bytes());
    }

    #[test]
    fn packed_round_trip() {
        let sent = frames();
        for frames in [&sent[..1], &sent[..]] {
            let body = packed(frames, &first()).unwrap();
            let got = decode_all("y3", "y3.tag.51", None, body.clone()).unwrap();
            assert_eq!(got.first, first());
            assert_eq!(got.frames.len(), frames.len());
            for (back, data) in got.frames.iter().zip(frames) {
                assert_eq!((back.tag, back.hops), (0x33, data.hops));
                assert_eq!(back.payload, data.payload);
                assert_eq!(back.metadata.as_bytes(), data.metadata.as_bytes());
            }
            // async-nats hands a message without headers over as `None` or as an empty map.
            let empty = HeaderMap::new();
            assert!(decode_all("y3", "y3.tag.51", Some(&empty), body).is_ok());
        }
        let long = Stamp {
            origin: "o".repeat(256),
            ..first()
        };
        assert!(
            packed(&sent, &long).is_none(),
            "a batch carries a long origin"
        );
    }

    #[test]
    fn hostile_packed_messages_are_malformed() {
        let body = packed(&frames(), &first()).unwrap().to_vec();
        let fixed = PACKED_MAGIC.len() + 1 + 1 + PACKED_STAMP; // origin "a"
        let decode = |b: &[u8]| decode_all("y3", "y3.tag.51", None, Bytes::copy_from_slice(b));
        // Cut inside the fixed part, at every length.
        for len in PACKED_MAGIC.len()..fixed {
            assert_eq!(
                decode(&body[..len]).unwrap_err(),
                Malformed::Packed,
                "{len}"
            );
        }
        // Counts 0 and past the bound, a sequence number that would wrap, an empty origin.
        let with = |at: usize, bytes: &[u8]| {
            let mut b = body.clone();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            b
        };
        for count in [0u16, 1025, u16::MAX] {
            let b = with(fixed - 2, &count.to_be_bytes());
            assert_eq!(decode(&b).unwrap_err(), Malformed::Packed);
        }
        let b = with(fixed - 10, &(u64::MAX - 1).to_be_bytes());
        assert_eq!(decode(&b).unwrap_err(), Malformed::Packed);
        let b = with(PACKED_MAGIC.len(), &[0]);
        assert_eq!(decode(&b).unwrap_err(), Malformed::Packed);
        // Count and entries disagree, as for a batch.
        let b = with(fixed - 2, &4u16.to_be_bytes());
        assert_eq!(
            decode(&b).unwrap_err(),
            Malformed::Batch(BadBatch::Truncated { entry: 3 })
        );
        let b = with(fixed - 2, &2u16.to_be_bytes());
        assert!(matches!(
            decode(&b).unwrap_err(),
            Malformed::Batch(BadBatch::Trailing { .. })
        ));
        // Without the magic, a message without headers is not a frame (as before).
        assert_eq!(
            decode(&body[PACKED_MAGIC.len()..]).unwrap_err(),
            Malformed::Header(ORIGIN)
        );
    }

    #[test]
    fn marks_round_trip_and_hostile_marks_are_malformed() {
        let decode = |h: &HeaderMap, body: &'static [u8]| {
            decode_plain("y3", "y3.tag.51", Some(h), Bytes::from_static(body))
        };
        let h = mark(&first());
        assert!(matches!(decode(&h, b"").unwrap(), Plain::Mark(s) if s == first()));
        // Frames still decode as frames.
        let (batch_h, body) = batch(&frames(), &first());
        let got = decode_plain("y3", "y3.tag.51", Some(&batch_h), body).unwrap();
        assert!(matches!(got, Plain::Frames(f) if f.frames.len() == 3));
        // A body, a batch count, another value, no stamp, a bad subject.
        assert_eq!(decode(&h, b"x").unwrap_err(), Malformed::Mark);
        let mut with_batch = h.clone();
        with_batch.insert(name(BATCH), "1");
        assert_eq!(
            decode(&with_batch, b"").unwrap_err(),
            Malformed::Header(MARK)
        );
        let mut other = h.clone();
        other.insert(name(MARK), "2");
        assert_eq!(decode(&other, b"").unwrap_err(), Malformed::Header(MARK));
        let mut bare = HeaderMap::new();
        bare.insert(name(MARK), "1");
        assert_eq!(decode(&bare, b"").unwrap_err(), Malformed::Header(ORIGIN));
        // A sequence number no frame can carry (a frame's seq + count fits in u64).
        let mut last = h.clone();
        last.insert(name(SEQ), u64::MAX.to_string());
        assert_eq!(decode(&last, b"").unwrap_err(), Malformed::Header(SEQ));
        assert_eq!(
            decode_plain("y3", "y3.x", Some(&h), Bytes::new()).unwrap_err(),
            Malformed::Subject
        );
        // A router that does not read marks (`decode_all`) refuses one: marks go only to
        // routers that announce `Y3-Reads-Marks`.
        assert!(decode_all("y3", "y3.tag.51", Some(&h), Bytes::new()).is_err());
    }

    #[test]
    fn hostile_batches_are_malformed() {
        let (h, body) = batch(&frames(), &first());
        let body = body.to_vec();
        // Count and body disagree: fewer entries than announced, or bytes left over.
        assert_eq!(
            decode_batch(&batch_headers("4"), &body).unwrap_err(),
            Malformed::Batch(BadBatch::Truncated { entry: 3 })
        );
        assert_eq!(
            decode_batch(&batch_headers("2"), &body).unwrap_err(),
            Malformed::Batch(BadBatch::Trailing {
                left: entry_len(&frames()[2])
            })
        );
        // Counts out of bounds or not numbers.
        for count in ["0", "1025", "18446744073709551616", "-1", "x", ""] {
            assert_eq!(
                decode_batch(&batch_headers(count), &body).unwrap_err(),
                Malformed::Header(BATCH),
                "{count:?}"
            );
        }
        // A truncated entry: the body ends inside an entry's fixed part or its bytes.
        assert_eq!(
            decode_batch(&h, &body[..body.len() - 1]).unwrap_err(),
            Malformed::Batch(BadBatch::PastBody { entry: 2 })
        );
        let second = entry_len(&frames()[0]);
        assert_eq!(
            decode_batch(&h, &body[..second + 5]).unwrap_err(),
            Malformed::Batch(BadBatch::Truncated { entry: 1 })
        );
        // Lengths past the body, up to the largest (no allocation from them).
        for (at, value) in [(4, 1000u32), (8, u32::MAX), (4, u32::MAX)] {
            let mut bad = body.clone();
            bad[at..at + 4].copy_from_slice(&value.to_be_bytes());
            assert_eq!(
                decode_batch(&h, &bad).unwrap_err(),
                Malformed::Batch(BadBatch::PastBody { entry: 0 })
            );
        }
        // Metadata that is not a msgpack string map.
        let mut bad = body.clone();
        bad[12] = 0xc1;
        assert_eq!(
            decode_batch(&h, &bad).unwrap_err(),
            Malformed::Header(METADATA)
        );
        // Sequence numbers past u64, missing stamps, a bad subject.
        let mut over = h.clone();
        over.insert(name(SEQ), (u64::MAX - 1).to_string());
        assert_eq!(
            decode_batch(&over, &body).unwrap_err(),
            Malformed::Header(SEQ)
        );
        let mut bare = HeaderMap::new();
        bare.insert(name(BATCH), "3");
        assert_eq!(
            decode_batch(&bare, &body).unwrap_err(),
            Malformed::Header(ORIGIN)
        );
        assert_eq!(
            decode_all("y3", "y3.tag.x", Some(&h), Bytes::from(body.clone())).unwrap_err(),
            Malformed::Subject
        );
        // Where one frame is expected (durable tags), a batch is refused.
        assert_eq!(
            decode("y3", "y3.tag.51", Some(&h), Bytes::from(body)).unwrap_err(),
            Malformed::Header(BATCH)
        );
    }
}
