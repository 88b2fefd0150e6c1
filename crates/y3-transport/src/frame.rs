//! Frames: what a connection carries, each one top-level Y3 packet in the `golang` dialect.
//!
//! A frame is a node packet whose key says the frame type; its children are the fields.
//! Unknown fields are skipped (a newer peer may add some), a repeated field keeps the last
//! value, and field order does not matter. Everything here is pure: bytes in, values out.
//! See `spec/frames.md` for the full specification.
//!
//! ```text
//! frame   = tag (1 B: 0x80 | type) | length (PVarInt32) | fields (length bytes)
//! field   = key (1 B) | length | value                   one Y3 packet per field
//!
//! type  key   frame       fields (key: type, "?" = omitted when empty/zero)
//! 0x31  b1    handshake   01 version u32 | 02 role u32 | 03 name str? | 04 token str?
//!                         | c5 observed: array of 00 u32 elements (omitted when none)
//! 0x29  a9    accepted    01 version u32 | 02 session u64
//! 0x3f  bf    data        01 tag u32 | 02 id u64 | 03 hops u32? | 04 metadata bytes?
//!                         | 05 payload bytes
//! 0x30  b0    goaway      01 code u32 | 02 reason str?
//! 0x2a  aa    ping        01 nonce u64
//! 0x2b  ab    pong        01 nonce u64
//! ```
//!
//! A data frame carrying tag 0x10, id 1 and the 3-byte payload `ab cd ef`:
//!
//! ```text
//! bf 0b                 data frame, 11 bytes of fields
//!    01 01 10           tag 0x10 (PVarInt)
//!    02 01 01           id 1
//!    05 03 ab cd ef     payload, zero-copy `Bytes` slice of the read buffer on decode
//! ```
//!
//! Integers use the `y3` value encodings: unsigned values travel as the signed integer with
//! the same bits (as `y3::typed` does), so `u32::MAX` is the one byte `7f`.

use bytes::{BufMut, Bytes, BytesMut};
use y3::tag::Header;
use y3::{value, Config, Dialect, Packet, Tag};

use crate::error::FrameError;

/// The protocol version this crate speaks, carried by handshake and accepted frames.
pub const VERSION: u32 = 1;

/// The wire dialect of every frame.
const D: Dialect = Dialect::Golang;

/// Frame type keys (the low six bits of the frame's tag byte; the node flag is always set).
pub mod kind {
    /// Handshake: the first frame a client sends.
    pub const HANDSHAKE: u32 = 0x31;
    /// Accepted: the router's answer to a valid handshake.
    pub const ACCEPTED: u32 = 0x29;
    /// Data: one message on a tag.
    pub const DATA: u32 = 0x3f;
    /// Goaway: the sender is closing the connection, with a reason code.
    pub const GOAWAY: u32 = 0x30;
    /// Ping: asks for a pong with the same nonce.
    pub const PING: u32 = 0x2a;
    /// Pong: answers a ping.
    pub const PONG: u32 = 0x2b;

    /// Whether `key` is a frame type this crate knows.
    pub const fn is_known(key: u32) -> bool {
        matches!(key, HANDSHAKE | ACCEPTED | DATA | GOAWAY | PING | PONG)
    }
}

/// What a client is to the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends data frames; observes nothing.
    Source,
    /// Observes tags and may send results under other tags.
    StreamFunction,
    /// Observes tags; sends nothing.
    Sink,
}

impl Role {
    /// The number on the wire.
    pub const fn code(self) -> u32 {
        match self {
            Role::Source => 1,
            Role::StreamFunction => 2,
            Role::Sink => 3,
        }
    }

    /// The role for a wire number.
    pub const fn from_code(code: u32) -> Option<Role> {
        match code {
            1 => Some(Role::Source),
            2 => Some(Role::StreamFunction),
            3 => Some(Role::Sink),
            _ => None,
        }
    }

    /// The snake_case name used in logs and metric labels.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::StreamFunction => "stream_function",
            Role::Sink => "sink",
        }
    }

    /// Whether a client in this role may send data frames.
    pub const fn sends(self) -> bool {
        !matches!(self, Role::Sink)
    }

    /// Whether a client in this role receives data frames.
    pub const fn observes(self) -> bool {
        !matches!(self, Role::Source)
    }
}

/// Why a connection is closed, as a goaway frame says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GoawayCode {
    /// The sender is done; nothing went wrong.
    Normal,
    /// The router is shutting down: stop sending, in-flight frames are still delivered.
    ShuttingDown,
    /// The handshake's token is wrong.
    Unauthorized,
    /// The peer sent bytes that are not valid frames, or a frame out of place.
    ProtocolError,
    /// The handshake's version is not spoken here.
    VersionMismatch,
    /// The handshake is invalid (unknown role, too many observed tags, a long name).
    BadHandshake,
    /// The subscriber did not read its frames in time and was disconnected.
    SlowConsumer,
    /// The router is at its connection limit.
    TooManyConnections,
    /// No handshake arrived in time.
    HandshakeTimeout,
    /// A code this crate does not know.
    Other(u32),
}

impl GoawayCode {
    /// The number on the wire.
    pub const fn code(self) -> u32 {
        match self {
            GoawayCode::Normal => 0,
            GoawayCode::ShuttingDown => 1,
            GoawayCode::Unauthorized => 2,
            GoawayCode::ProtocolError => 3,
            GoawayCode::VersionMismatch => 4,
            GoawayCode::BadHandshake => 5,
            GoawayCode::SlowConsumer => 6,
            GoawayCode::TooManyConnections => 7,
            GoawayCode::HandshakeTimeout => 8,
            GoawayCode::Other(code) => code,
        }
    }

    /// The code for a wire number.
    pub const fn from_code(code: u32) -> GoawayCode {
        match code {
            0 => GoawayCode::Normal,
            1 => GoawayCode::ShuttingDown,
            2 => GoawayCode::Unauthorized,
            3 => GoawayCode::ProtocolError,
            4 => GoawayCode::VersionMismatch,
            5 => GoawayCode::BadHandshake,
            6 => GoawayCode::SlowConsumer,
            7 => GoawayCode::TooManyConnections,
            8 => GoawayCode::HandshakeTimeout,
            other => GoawayCode::Other(other),
        }
    }

    /// The stable snake_case name.
    pub const fn kind(self) -> &'static str {
        match self {
            GoawayCode::Normal => "normal",
            GoawayCode::ShuttingDown => "shutting_down",
            GoawayCode::Unauthorized => "unauthorized",
            GoawayCode::ProtocolError => "protocol_error",
            GoawayCode::VersionMismatch => "version_mismatch",
            GoawayCode::BadHandshake => "bad_handshake",
            GoawayCode::SlowConsumer => "slow_consumer",
            GoawayCode::TooManyConnections => "too_many_connections",
            GoawayCode::HandshakeTimeout => "handshake_timeout",
            GoawayCode::Other(_) => "other",
        }
    }
}

/// The first frame of every connection: who the client is and what it observes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Protocol version, [`VERSION`].
    pub version: u32,
    /// The client's role.
    pub role: Role,
    /// A name for logs and metrics (e.g. `noise-sensor-1`).
    pub name: String,
    /// The shared secret the router may require; empty when none.
    pub token: String,
    /// Data tags the client wants to receive (functions and sinks).
    pub observed: Vec<u32>,
}

/// The router's answer to a valid handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Protocol version the router speaks.
    pub version: u32,
    /// The id the router gave this connection (for logs).
    pub session: u64,
}

/// One message on a tag.
///
/// `payload` and `metadata` are [`Bytes`]: decoding slices them out of the read buffer
/// without copying, and routing one frame to many subscribers clones reference counts,
/// not bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    /// The data tag subscribers observe.
    pub tag: u32,
    /// A per-message id chosen by the source; stream functions keep it on their outputs.
    pub id: u64,
    /// How many stream functions this message has passed through; the router drops
    /// messages past its hop limit, which breaks function loops.
    pub hops: u32,
    /// Opaque metadata, carried along unchanged.
    pub metadata: Option<Bytes>,
    /// The payload, usually itself a Y3 packet.
    pub payload: Bytes,
}

impl Data {
    /// A data frame with no metadata and zero hops.
    pub fn new(tag: u32, id: u64, payload: impl Into<Bytes>) -> Data {
        Data {
            tag,
            id,
            hops: 0,
            metadata: None,
            payload: payload.into(),
        }
    }
}

/// Closing a connection, with a reason code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goaway {
    /// Why.
    pub code: GoawayCode,
    /// Human-readable detail (may be empty).
    pub reason: String,
}

impl Goaway {
    /// A goaway with `code` and `reason`.
    pub fn new(code: GoawayCode, reason: impl Into<String>) -> Goaway {
        Goaway {
            code,
            reason: reason.into(),
        }
    }
}

/// Any frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// See [`Handshake`].
    Handshake(Handshake),
    /// See [`Accepted`].
    Accepted(Accepted),
    /// See [`Data`].
    Data(Data),
    /// See [`Goaway`].
    Goaway(Goaway),
    /// Asks for a [`Frame::Pong`] with the same nonce.
    Ping(u64),
    /// Answers a [`Frame::Ping`].
    Pong(u64),
}

// Field keys.
const F_VERSION: u32 = 0x01;
const F_ROLE: u32 = 0x02;
const F_NAME: u32 = 0x03;
const F_TOKEN: u32 = 0x04;
const F_OBSERVED: u32 = 0x05;
const F_SESSION: u32 = 0x02;
const F_TAG: u32 = 0x01;
const F_ID: u32 = 0x02;
const F_HOPS: u32 = 0x03;
const F_METADATA: u32 = 0x04;
const F_PAYLOAD: u32 = 0x05;
const F_CODE: u32 = 0x01;
const F_REASON: u32 = 0x02;
const F_NONCE: u32 = 0x01;

/// Bytes of a primitive packet with key `key` and a `len`-byte value.
const fn prim_len(key: u32, len: usize) -> usize {
    Header::encoded_len(Tag::primitive(key), len, D) + len
}

/// Bytes of an integer field.
const fn int_len(key: u32, v: i64) -> usize {
    prim_len(key, value::int_len(D, v))
}

/// Room one staged header plus integer can take.
const STEP: usize = y3::tag::MAX_HEADER_LEN + 1 + value::MAX_SCALAR_LEN;

/// Headers and integers gathered on the stack and appended to the frame buffer in one
/// copy before each byte string (and at the end). Appending them one by one costs a
/// `memmove` call per 1–3 bytes: 1.9% of a 100-byte echo server's CPU.
///
/// ```text
/// data frame:  [node hdr][tag hdr|int][id hdr|int][payload hdr] | payload bytes
///              └──────────── one staged copy ─────────────────┘   one copy
/// ```
struct Staged {
    buf: [u8; 4 * STEP],
    len: usize,
}

impl Staged {
    fn new() -> Staged {
        Staged {
            buf: [0; 4 * STEP],
            len: 0,
        }
    }

    /// Copies what is staged to `dst`.
    fn flush(&mut self, dst: &mut BytesMut) {
        dst.put_slice(&self.buf[..self.len]);
        self.len = 0;
    }

    /// Writes a header; every caller passes a key below 0x40 and a length that fits
    /// (checked by [`Frame::encode`] against `i32::MAX`), so `Header::write` cannot fail;
    /// a lost header would be caught by the round-trip tests.
    fn header(&mut self, dst: &mut BytesMut, tag: Tag, len: usize) {
        if self.len + STEP > self.buf.len() {
            self.flush(dst);
        }
        if let Some(out) = self.buf[self.len..].first_chunk_mut() {
            self.len += Header::write(tag, len, D, out).unwrap_or(0);
        }
    }

    /// An integer field; the header leaves room for the value (see [`STEP`]).
    fn int(&mut self, dst: &mut BytesMut, key: u32, v: i64) {
        self.header(dst, Tag::primitive(key), value::int_len(D, v));
        if let Some(out) = self.buf[self.len..].first_chunk_mut() {
            self.len += value::int_write(D, v, out);
        }
    }

    /// A byte-string field: its header is staged, then everything goes out before the bytes.
    fn bytes(&mut self, dst: &mut BytesMut, key: u32, bytes: &[u8]) {
        self.header(dst, Tag::primitive(key), bytes.len());
        self.flush(dst);
        dst.put_slice(bytes);
    }

    /// A string field, left out when empty.
    fn opt_str(&mut self, dst: &mut BytesMut, key: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(dst, key, s.as_bytes());
        }
    }
}

/// Unsigned values travel as the signed integer with the same bits.
const fn u32_bits(v: u32) -> i64 {
    v as i32 as i64
}

const fn u64_bits(v: u64) -> i64 {
    v as i64
}

impl Frame {
    /// The frame type key.
    pub fn kind(&self) -> u32 {
        match self {
            Frame::Handshake(_) => kind::HANDSHAKE,
            Frame::Accepted(_) => kind::ACCEPTED,
            Frame::Data(_) => kind::DATA,
            Frame::Goaway(_) => kind::GOAWAY,
            Frame::Ping(_) => kind::PING,
            Frame::Pong(_) => kind::PONG,
        }
    }

    /// The frame type's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        kind_name(self.kind())
    }

    /// Bytes of the fields: the frame packet's value length.
    pub fn body_len(&self) -> usize {
        match self {
            Frame::Handshake(h) => {
                let observed: usize = h.observed.iter().map(|&t| int_len(0, u32_bits(t))).sum();
                int_len(F_VERSION, u32_bits(h.version))
                    + int_len(F_ROLE, u32_bits(h.role.code()))
                    + opt_str_len(F_NAME, &h.name)
                    + opt_str_len(F_TOKEN, &h.token)
                    + if h.observed.is_empty() {
                        0
                    } else {
                        Header::encoded_len(Tag::array(F_OBSERVED), observed, D) + observed
                    }
            }
            Frame::Accepted(a) => {
                int_len(F_VERSION, u32_bits(a.version)) + int_len(F_SESSION, u64_bits(a.session))
            }
            Frame::Data(d) => {
                int_len(F_TAG, u32_bits(d.tag))
                    + int_len(F_ID, u64_bits(d.id))
                    + if d.hops == 0 {
                        0
                    } else {
                        int_len(F_HOPS, u32_bits(d.hops))
                    }
                    + d.metadata
                        .as_ref()
                        .map_or(0, |m| prim_len(F_METADATA, m.len()))
                    + prim_len(F_PAYLOAD, d.payload.len())
            }
            Frame::Goaway(g) => {
                int_len(F_CODE, u32_bits(g.code.code())) + opt_str_len(F_REASON, &g.reason)
            }
            Frame::Ping(n) | Frame::Pong(n) => int_len(F_NONCE, u64_bits(*n)),
        }
    }

    /// Bytes of the whole frame, header included: exactly what [`Frame::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        let body = self.body_len();
        Header::encoded_len(Tag::node(self.kind()), body, D) + body
    }

    /// Appends the frame to `dst`, reserving the room first.
    ///
    /// # Errors
    /// [`FrameError::TooLong`] when the fields exceed `max_len` bytes (the receiver's
    /// limit; at most `i32::MAX`). Nothing is written then.
    ///
    /// # Examples
    ///
    /// ```
    /// use y3_transport::frame::{Data, Frame};
    ///
    /// let mut buf = bytes::BytesMut::new();
    /// Frame::Data(Data::new(0x10, 1, &b"\xab\xcd\xef"[..])).encode(&mut buf, 1 << 20)?;
    /// assert_eq!(&buf[..], &[0xbf, 0x0b, 1, 1, 0x10, 2, 1, 1, 5, 3, 0xab, 0xcd, 0xef]);
    /// # Ok::<(), y3_transport::FrameError>(())
    /// ```
    pub fn encode(&self, dst: &mut BytesMut, max_len: usize) -> Result<(), FrameError> {
        let body = self.body_len();
        let limit = max_len.min(i32::MAX as usize);
        if body > limit {
            return Err(FrameError::TooLong {
                declared: body as u64,
                limit: limit as u64,
            });
        }
        dst.reserve(Header::encoded_len(Tag::node(self.kind()), body, D) + body);
        let mut out = Staged::new();
        out.header(dst, Tag::node(self.kind()), body);
        match self {
            Frame::Handshake(h) => {
                out.int(dst, F_VERSION, u32_bits(h.version));
                out.int(dst, F_ROLE, u32_bits(h.role.code()));
                out.opt_str(dst, F_NAME, &h.name);
                out.opt_str(dst, F_TOKEN, &h.token);
                if !h.observed.is_empty() {
                    let len = h.observed.iter().map(|&t| int_len(0, u32_bits(t))).sum();
                    out.header(dst, Tag::array(F_OBSERVED), len);
                    for &t in &h.observed {
                        out.int(dst, 0, u32_bits(t));
                    }
                }
            }
            Frame::Accepted(a) => {
                out.int(dst, F_VERSION, u32_bits(a.version));
                out.int(dst, F_SESSION, u64_bits(a.session));
            }
            Frame::Data(d) => {
                out.int(dst, F_TAG, u32_bits(d.tag));
                out.int(dst, F_ID, u64_bits(d.id));
                if d.hops != 0 {
                    out.int(dst, F_HOPS, u32_bits(d.hops));
                }
                if let Some(m) = &d.metadata {
                    out.bytes(dst, F_METADATA, m);
                }
                out.bytes(dst, F_PAYLOAD, &d.payload);
            }
            Frame::Goaway(g) => {
                out.int(dst, F_CODE, u32_bits(g.code.code()));
                out.opt_str(dst, F_REASON, &g.reason);
            }
            Frame::Ping(n) | Frame::Pong(n) => out.int(dst, F_NONCE, u64_bits(*n)),
        }
        out.flush(dst);
        Ok(())
    }

    /// Decodes one complete frame. `frame` holds exactly the frame's bytes (header
    /// included); payload and metadata of a data frame are slices of it, not copies.
    ///
    /// # Errors
    /// [`FrameError::UnknownFrame`] for a tag that is not a known frame node,
    /// [`FrameError::MissingField`] / [`FrameError::InvalidField`] for bad fields, and the
    /// codec's [`y3::DecodeError`]s for malformed packets (header errors, a child
    /// overflowing the frame, a string that is not UTF-8).
    ///
    /// # Examples
    ///
    /// ```
    /// use bytes::Bytes;
    /// use y3_transport::frame::Frame;
    ///
    /// let wire = Bytes::from_static(&[0xaa, 0x03, 0x01, 0x01, 0x07]);
    /// assert_eq!(Frame::decode(wire, &y3::Config::DEFAULT)?, Frame::Ping(7));
    /// # Ok::<(), y3_transport::FrameError>(())
    /// ```
    pub fn decode(frame: Bytes, config: &Config) -> Result<Frame, FrameError> {
        let (packet, rest) = Packet::parse_with(&frame, config)?;
        if !rest.is_empty() {
            return Err(y3::DecodeError::TrailingBytes {
                count: rest.len() as u64,
            }
            .into());
        }
        if !packet.is_node() || !kind::is_known(packet.id()) {
            return Err(FrameError::UnknownFrame { tag: packet.id() });
        }
        let name = kind_name(packet.id());
        let missing = |field| FrameError::MissingField { frame: name, field };
        match packet.id() {
            kind::HANDSHAKE => {
                let (mut version, mut role, mut name_, mut token) = (None, None, None, None);
                let mut observed = Vec::new();
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_VERSION => version = Some(field.u32()?),
                        F_ROLE => role = Some(field.u32()?),
                        F_NAME => name_ = Some(field.str()?.to_owned()),
                        F_TOKEN => token = Some(field.str()?.to_owned()),
                        F_OBSERVED => {
                            observed.clear();
                            for element in field.children()? {
                                observed.push(element?.u32()?);
                            }
                        }
                        _ => {}
                    }
                }
                let role = role.ok_or(missing(F_ROLE))?;
                Ok(Frame::Handshake(Handshake {
                    version: version.ok_or(missing(F_VERSION))?,
                    role: Role::from_code(role).ok_or(FrameError::InvalidField {
                        frame: name,
                        field: "role",
                    })?,
                    name: name_.unwrap_or_default(),
                    token: token.unwrap_or_default(),
                    observed,
                }))
            }
            kind::ACCEPTED => {
                let (mut version, mut session) = (None, None);
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_VERSION => version = Some(field.u32()?),
                        F_SESSION => session = Some(field.u64()?),
                        _ => {}
                    }
                }
                Ok(Frame::Accepted(Accepted {
                    version: version.ok_or(missing(F_VERSION))?,
                    session: session.ok_or(missing(F_SESSION))?,
                }))
            }
            kind::DATA => {
                let (mut tag, mut id, mut hops, mut metadata, mut payload) =
                    (None, None, 0, None, None);
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_TAG => tag = Some(field.u32()?),
                        F_ID => id = Some(field.u64()?),
                        F_HOPS => hops = field.u32()?,
                        F_METADATA => metadata = Some(frame.slice_ref(field.bytes()?)),
                        F_PAYLOAD => payload = Some(frame.slice_ref(field.bytes()?)),
                        _ => {}
                    }
                }
                Ok(Frame::Data(Data {
                    tag: tag.ok_or(missing(F_TAG))?,
                    id: id.ok_or(missing(F_ID))?,
                    hops,
                    metadata,
                    payload: payload.ok_or(missing(F_PAYLOAD))?,
                }))
            }
            kind::GOAWAY => {
                let (mut code, mut reason) = (None, String::new());
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_CODE => code = Some(field.u32()?),
                        F_REASON => reason = field.str()?.to_owned(),
                        _ => {}
                    }
                }
                let code = GoawayCode::from_code(code.ok_or(missing(F_CODE))?);
                Ok(Frame::Goaway(Goaway { code, reason }))
            }
            kind::PING | kind::PONG => {
                let mut nonce = None;
                for field in packet.children()? {
                    let field = field?;
                    if field.id() == F_NONCE {
                        nonce = Some(field.u64()?);
                    }
                }
                let nonce = nonce.ok_or(missing(F_NONCE))?;
                Ok(if packet.id() == kind::PING {
                    Frame::Ping(nonce)
                } else {
                    Frame::Pong(nonce)
                })
            }
            // `is_known` was checked above.
            other => Err(FrameError::UnknownFrame { tag: other }),
        }
    }
}

/// The name of frame type `key`.
pub const fn kind_name(key: u32) -> &'static str {
    match key {
        kind::HANDSHAKE => "handshake",
        kind::ACCEPTED => "accepted",
        kind::DATA => "data",
        kind::GOAWAY => "goaway",
        kind::PING => "ping",
        kind::PONG => "pong",
        _ => "unknown",
    }
}

fn opt_str_len(key: u32, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        prim_len(key, s.len())
    }
}

impl From<Data> for Frame {
    fn from(data: Data) -> Frame {
        Frame::Data(data)
    }
}

impl From<Goaway> for Frame {
    fn from(goaway: Goaway) -> Frame {
        Frame::Goaway(goaway)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn roundtrip(frame: Frame) -> Bytes {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf, 1 << 20).unwrap();
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let bytes = buf.freeze();
        assert_eq!(
            Frame::decode(bytes.clone(), &Config::DEFAULT).unwrap(),
            frame
        );
        // Every frame is also a well-formed Y3 packet.
        y3::decode(&bytes).unwrap();
        bytes
    }

    #[test]
    fn data_layout() {
        let bytes = roundtrip(Frame::Data(Data::new(0x10, 1, &hex!("abcdef")[..])));
        assert_eq!(&bytes[..], hex!("bf0b 010110 020101 0503abcdef"));
        let full = Data {
            tag: u32::MAX,
            id: u64::MAX,
            hops: 2,
            metadata: Some(Bytes::from_static(b"m")),
            payload: Bytes::new(),
        };
        let bytes = roundtrip(Frame::Data(full));
        assert_eq!(&bytes[..], hex!("bf0e 01017f 02017f 030102 04016d 0500"));
    }

    #[test]
    fn payload_is_a_slice_of_the_frame() {
        let wire = Bytes::from_static(&hex!("bf0b 010110 020101 0503abcdef"));
        let Frame::Data(d) = Frame::decode(wire.clone(), &Config::DEFAULT).unwrap() else {
            panic!("data");
        };
        assert_eq!(d.payload.as_ptr(), wire[10..].as_ptr());
    }

    #[test]
    fn control_frames() {
        let bytes = roundtrip(Frame::Handshake(Handshake {
            version: VERSION,
            role: Role::StreamFunction,
            name: "f".into(),
            token: "t".into(),
            observed: vec![0x10, 0x200],
        }));
        assert_eq!(
            &bytes[..],
            hex!("b115 010101 020102 030166 040174 c507 000110 00028400")
        );
        roundtrip(Frame::Handshake(Handshake {
            version: VERSION,
            role: Role::Source,
            name: String::new(),
            token: String::new(),
            observed: vec![],
        }));
        roundtrip(Frame::Accepted(Accepted {
            version: 1,
            session: 42,
        }));
        let bytes = roundtrip(Frame::Goaway(Goaway::new(GoawayCode::Unauthorized, "")));
        assert_eq!(&bytes[..], hex!("b003 010102"));
        roundtrip(Frame::Goaway(Goaway::new(GoawayCode::Other(99), "why")));
        assert_eq!(&roundtrip(Frame::Ping(7))[..], hex!("aa03 010107"));
        roundtrip(Frame::Pong(u64::MAX));
    }

    /// Far more staged headers and integers than the stack buffer holds: it spills to the
    /// frame buffer in the middle of the observed list, byte-exact with each element
    /// written on its own.
    #[test]
    fn staged_writes_spill_in_order() {
        let observed: Vec<u32> = (0..300u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9) >> (i % 32))
            .collect();
        let bytes = roundtrip(Frame::Handshake(Handshake {
            version: u32::MAX,
            role: Role::Sink,
            name: "n".repeat(70),
            token: String::new(),
            observed: observed.clone(),
        }));
        let mut expected = BytesMut::new();
        for &t in &observed {
            let mut scratch = [0u8; value::MAX_SCALAR_LEN];
            let n = value::int_write(D, u32_bits(t), &mut scratch);
            let mut head = [0u8; y3::tag::MAX_HEADER_LEN + 1];
            let h = Header::write(Tag::primitive(0), n, D, &mut head).unwrap();
            expected.put_slice(&head[..h]);
            expected.put_slice(&scratch[..n]);
        }
        assert!(
            bytes.ends_with(&expected),
            "observed list, element by element"
        );
        roundtrip(Frame::Data(Data {
            tag: 0x3f,
            id: u64::MAX / 3,
            hops: u32::MAX,
            metadata: Some(Bytes::from(vec![9u8; 300])),
            payload: Bytes::from(vec![7u8; 70_000]),
        }));
    }

    #[test]
    fn unknown_fields_are_skipped_and_order_is_free() {
        // data { payload "x", 0x20 "?" unknown, id 1, tag 2 }
        let wire = Bytes::from_static(&hex!("bf0c 050178 20013f 020101 010102"));
        let frame = Frame::decode(wire, &Config::DEFAULT).unwrap();
        assert_eq!(frame, Frame::Data(Data::new(2, 1, &b"x"[..])));
    }

    #[test]
    fn bad_frames() {
        let c = Config::DEFAULT;
        let err = |hex: &[u8]| Frame::decode(Bytes::copy_from_slice(hex), &c).unwrap_err();
        assert_eq!(err(&hex!("bf03 010110")).kind(), "missing_field");
        assert_eq!(err(&hex!("a000")).kind(), "unknown_frame");
        assert_eq!(err(&hex!("3f00")).kind(), "unknown_frame");
        assert_eq!(err(&hex!("b106 010101 020109")).kind(), "invalid_field");
        // A field that claims more bytes than its frame holds.
        assert_eq!(err(&hex!("bf03 0105 01")).kind(), "child_overflow");
        assert_eq!(err(&hex!("bf01")).kind(), "unexpected_end");
        // Payload given as a node.
        assert_eq!(err(&hex!("bf08 010110 020101 8500")).kind(), "wrong_type");
        assert_eq!(
            Frame::Ping(1)
                .encode(&mut BytesMut::new(), 2)
                .unwrap_err()
                .kind(),
            "too_long"
        );
    }

    #[test]
    fn codes_and_roles_roundtrip() {
        for code in 0..10 {
            assert_eq!(GoawayCode::from_code(code).code(), code);
        }
        for role in [Role::Source, Role::StreamFunction, Role::Sink] {
            assert_eq!(Role::from_code(role.code()), Some(role));
        }
        assert_eq!(Role::from_code(0), None);
    }
}
