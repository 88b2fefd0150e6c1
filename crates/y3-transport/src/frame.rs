//! Frames: YoMo v1.22's, each one top-level Y3 packet in the `nvarint` dialect, plus y3's
//! extension fields (sequence ids `0x30`..`0x3f`, which YoMo's decoder skips).
//!
//! A frame is a node packet whose key is the frame type; its children are primitive fields.
//! Decoders take fields in any order, skip unknown ones and keep the last of a repeated
//! one; encoders write YoMo's fields in YoMo's order, empty ones included, then y3's.
//! Each frame's fields are declared once, in wire order (`Frame::fields`); the encoded
//! length and the encoding both walk that declaration. Everything here is pure: bytes in,
//! values out. See `spec/frames.md`.
//!
//! ```text
//! frame = tag (1 B: 0x80 | type) | length (signed PVarInt32) | fields
//! field = seq id (1 B) | length | value
//!
//! type  byte  frame          fields, in the order written      (y3: only when not empty)
//! 0x31  b1    handshake      01 name | 03 id | 02 client type (1 B) | 06 observed (LE u32s)
//!                            | 04 auth name | 05 auth payload | 07 version | 09 function
//!                            definition | 08 wanted target   (y3: 30 extension | 31 filters)
//! 0x29  a9    handshake ack  none
//! 0x39  b9    rejected       01 message                                (y3: 30 code)
//! 0x2e  ae    goaway         01 message                                (y3: 30 code)
//! 0x3e  be    connect to     01 endpoint
//! 0x3f  bf    data           01 tag (NVarUInt32) | 03 metadata (msgpack) | 02 payload
//!                                                                      (y3: 30 hops)
//! 0x33  b3    stored (y3)    30 count (always) | 31 refused runs (only when any)
//! ```
//!
//! The stored frame's refused runs (y3, field `31`): the data frames of the count that the
//! router refused rather than delivered, 9 bytes per run, any number of runs:
//!
//! ```text
//! run = first index u32 LE | frames u32 LE | reason u8
//!       (indexes count the connection's data frames from 0, as the count does;
//!        reason: 1 too_long, 2 hop_limit, 3 loop, 4 metadata_too_large; others are kept as a number)
//! ```
//!
//! Stored 3, frame 1 refused as too long:
//!
//! ```text
//! b3 0e                                    stored, 14 bytes of fields
//!    30 01 03                              count 3
//!    31 09 01 00 00 00 01 00 00 00 01      refused: from index 1, 1 frame, too_long
//! ```
//!
//! A data frame as YoMo's encoder writes it: tag 0x33, metadata `{"yomo-tid": "tid-0001"}`,
//! payload `hello`:
//!
//! ```text
//! bf 1f                                    data, 31 bytes of fields
//!    01 01 33                              tag 0x33
//!    03 13 81 a8 "yomo-tid" a8 "tid-0001"  metadata
//!    02 05 68 65 6c 6c 6f                  payload: a zero-copy slice on decode
//! ```

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use y3::tag::Header;
use y3::{scalar, Config, Dialect, Packet, Tag};

use crate::metadata::Metadata;

mod error;

pub use error::FrameError;

/// The protocol version every handshake carries (YoMo's `core/version.go`).
pub const VERSION: &str = "2024-01-03";

/// The y3 extension level this crate speaks (handshake field `30`); YoMo's clients send none.
pub const EXTENSION_LEVEL: u32 = 1;

/// The wire dialect of every frame.
pub const DIALECT: Dialect = Dialect::NVarInt;

const D: Dialect = DIALECT;

/// Frame type keys (the low six bits of the frame's tag byte; the node flag is always set).
pub mod kind {
    /// Handshake: the first frame a client sends.
    pub const HANDSHAKE: u32 = 0x31;
    /// Handshake ack: the router admits the client.
    pub const HANDSHAKE_ACK: u32 = 0x29;
    /// Rejected: the router refuses the handshake.
    pub const REJECTED: u32 = 0x39;
    /// Goaway: the router is closing the connection.
    pub const GOAWAY: u32 = 0x2e;
    /// Connect to: the router sends the client elsewhere.
    pub const CONNECT_TO: u32 = 0x3e;
    /// Data: one message on a tag.
    pub const DATA: u32 = 0x3f;
    /// Stored (y3 only, `spec/frames.md`): the router has handled this many of the client's
    /// data frames, and which of them it refused. Sent only to clients whose handshake
    /// asked for it: YoMo's clients reconnect on a frame type they do not know.
    pub const STORED: u32 = 0x33;

    /// Whether `key` is a frame type this crate knows.
    pub const fn is_known(key: u32) -> bool {
        matches!(
            key,
            HANDSHAKE | HANDSHAKE_ACK | REJECTED | GOAWAY | CONNECT_TO | DATA | STORED
        )
    }

    /// The frame type's name, for logs and errors.
    pub const fn name(key: u32) -> &'static str {
        match key {
            HANDSHAKE => "handshake",
            HANDSHAKE_ACK => "handshake_ack",
            REJECTED => "rejected",
            GOAWAY => "goaway",
            CONNECT_TO => "connect_to",
            DATA => "data",
            STORED => "stored",
            _ => "unknown",
        }
    }
}

/// What a client is to the router: the handshake's one-byte client type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientType {
    /// `0x5f`: writes data; never receives.
    Source,
    /// `0x5d`: observes tags, may write. A y3 sink is a stream function that never writes.
    StreamFunction,
    /// `0x5e`: a zipper of a mesh forwarding its local clients' frames to this one.
    UpstreamZipper,
    /// Any other byte: admitted as a source, as YoMo does.
    Other(u8),
}

impl ClientType {
    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            ClientType::Source => 0x5f,
            ClientType::StreamFunction => 0x5d,
            ClientType::UpstreamZipper => 0x5e,
            ClientType::Other(b) => b,
        }
    }

    /// The client type of a wire byte.
    pub const fn from_code(code: u8) -> ClientType {
        match code {
            0x5f => ClientType::Source,
            0x5d => ClientType::StreamFunction,
            0x5e => ClientType::UpstreamZipper,
            other => ClientType::Other(other),
        }
    }

    /// The snake_case name used in logs and metric labels.
    pub const fn name(self) -> &'static str {
        match self {
            ClientType::Source => "source",
            ClientType::StreamFunction => "stream_function",
            ClientType::UpstreamZipper => "upstream_zipper",
            ClientType::Other(_) => "other",
        }
    }

    /// Whether the router delivers data to clients of this type.
    pub const fn receives(self) -> bool {
        matches!(self, ClientType::StreamFunction)
    }
}

/// Why a connection is refused or closed: the y3 code of rejected and goaway frames
/// (field `30`), with a stable snake_case [`kind`](GoawayCode::kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GoawayCode {
    /// The sender is done; nothing went wrong.
    Normal,
    /// The router is shutting down: reconnect (to its successor).
    ShuttingDown,
    /// The handshake's credential is wrong.
    Unauthorized,
    /// The peer sent bytes that are not valid frames, or a frame out of place.
    ProtocolError,
    /// The handshake's version is not spoken here.
    VersionMismatch,
    /// The handshake is invalid (empty client type, too many observed tags, a long name).
    BadHandshake,
    /// The subscriber did not read its frames in time and was disconnected.
    SlowConsumer,
    /// The router is at its connection limit.
    TooManyConnections,
    /// No handshake arrived in time.
    HandshakeTimeout,
    /// A data frame used a reserved tag (`0xf000..=0xffff`).
    ReservedTag,
    /// The client's token does not allow it to publish or observe a tag.
    Forbidden,
    /// A content filter in the handshake (or the router's config for it) does not compile
    /// or is over a limit (`spec/filters.md`); the message names the filter error's kind.
    BadFilter,
    /// A rejected or goaway frame without a y3 code (as YoMo's zipper sends them).
    Unspecified,
    /// A code this crate does not know.
    Other(u32),
}

impl GoawayCode {
    /// The number on the wire; `None` for [`GoawayCode::Unspecified`], which has none.
    pub const fn code(self) -> Option<u32> {
        Some(match self {
            GoawayCode::Normal => 0,
            GoawayCode::ShuttingDown => 1,
            GoawayCode::Unauthorized => 2,
            GoawayCode::ProtocolError => 3,
            GoawayCode::VersionMismatch => 4,
            GoawayCode::BadHandshake => 5,
            GoawayCode::SlowConsumer => 6,
            GoawayCode::TooManyConnections => 7,
            GoawayCode::HandshakeTimeout => 8,
            GoawayCode::ReservedTag => 9,
            GoawayCode::Forbidden => 10,
            GoawayCode::BadFilter => 11,
            GoawayCode::Unspecified => return None,
            GoawayCode::Other(code) => code,
        })
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
            9 => GoawayCode::ReservedTag,
            10 => GoawayCode::Forbidden,
            11 => GoawayCode::BadFilter,
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
            GoawayCode::ReservedTag => "reserved_tag",
            GoawayCode::Forbidden => "forbidden",
            GoawayCode::BadFilter => "bad_filter",
            GoawayCode::Unspecified => "rejected",
            GoawayCode::Other(_) => "other",
        }
    }

    /// The code whose [`kind`](GoawayCode::kind) is `kind` (how a QUIC close reason
    /// `<kind>: <detail>` is read back).
    pub fn from_kind(kind: &str) -> Option<GoawayCode> {
        (0..12)
            .map(GoawayCode::from_code)
            .find(|c| c.kind() == kind)
    }

    /// Whether a client told this may come back (to this router or its successor): the
    /// router is going away or overloaded, not refusing the client.
    pub const fn is_retryable(self) -> bool {
        matches!(
            self,
            GoawayCode::Normal
                | GoawayCode::ShuttingDown
                | GoawayCode::SlowConsumer
                | GoawayCode::TooManyConnections
                | GoawayCode::HandshakeTimeout
        )
    }
}

/// The first frame of every connection: who the client is and what it observes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Application name (function name, source name, or the upstream zipper's name).
    pub name: String,
    /// Client id: 21 random characters, `-`, and the reconnect count (`…-0`, `…-1`).
    pub id: String,
    /// What the client is.
    pub client_type: ClientType,
    /// Data tags a stream function receives.
    pub observed: Vec<u32>,
    /// Credential type (`token`); empty: the router's default.
    pub auth_name: String,
    /// Credential (the token).
    pub auth_payload: String,
    /// Protocol version, [`VERSION`].
    pub version: String,
    /// An LLM function-calling schema (JSON); empty: none.
    pub function_definition: Bytes,
    /// The `yomo-target` value this stream function accepts; empty: none.
    pub wanted_target: String,
    /// y3 extension level ([`EXTENSION_LEVEL`]); 0 for YoMo's own clients.
    pub extension: u32,
    /// y3: content filters, one per observed tag at most, as `(tag, filter text)`
    /// (`spec/filters.md`). Field `31`, left out when empty.
    pub filters: Vec<(u32, String)>,
    /// y3: the client wants [`Frame::Stored`] acknowledgements of its data frames
    /// (handshake field `32`); it keeps what it wrote until then, and resends it after a
    /// reconnect.
    pub wants_acks: bool,
}

impl Handshake {
    /// A handshake of this crate's version and extension level, with no credential.
    pub fn new(client_type: ClientType, name: impl Into<String>, id: impl Into<String>) -> Self {
        Handshake {
            name: name.into(),
            id: id.into(),
            client_type,
            observed: Vec::new(),
            auth_name: String::new(),
            auth_payload: String::new(),
            version: VERSION.to_owned(),
            function_definition: Bytes::new(),
            wanted_target: String::new(),
            extension: EXTENSION_LEVEL,
            filters: Vec::new(),
            wants_acks: false,
        }
    }

    /// Sets the credential from its `type:payload` spelling (`token:SECRET`); without a
    /// `:`, the whole string is the payload for the router's default auth.
    pub fn credential(mut self, credential: &str) -> Self {
        (self.auth_name, self.auth_payload) = match credential.split_once(':') {
            Some((name, payload)) => (name.to_owned(), payload.to_owned()),
            None => (String::new(), credential.to_owned()),
        };
        self
    }

    /// Adds a content filter for observed tag `tag` (`spec/filters.md`); the router refuses
    /// the handshake if it does not compile.
    pub fn filter(mut self, tag: u32, filter: impl Into<String>) -> Self {
        self.filters.push((tag, filter.into()));
        self
    }
}

/// Why the router refused one of a client's data frames (a [`Stored`] frame's runs): it
/// was delivered to no one. For every reason but [`NoSubscriber`](RefusedReason::NoSubscriber)
/// and [`NotStored`](RefusedReason::NotStored) it was handled for good (the client must not
/// send it again: that would not help); a frame refused as `no_subscriber` or `not_stored`
/// is *not stored*, and a durable client keeps it and sends it again later
/// ([`RefusedReason::is_retried`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusedReason {
    /// Over the router's `limits.max_frame_len`: skipped as it streamed past; or a durable
    /// tag's frame over the federation's NATS `max_payload` (never storable).
    TooLong,
    /// Past the router's `limits.max_hops`: a loop of y3 functions.
    HopLimit,
    /// Its message came back to every function it would reach more than the router's
    /// `limits.max_loop_returns` times (a loop by `yomo-tid`).
    Loop,
    /// Its metadata is over the router's `limits.max_metadata_bytes` or
    /// `limits.max_metadata_entries`.
    MetadataTooLarge,
    /// Nobody subscribes to its tag (and it went to no downstream zipper and not to the
    /// federation): not stored. A durable client keeps the frame and sends it again with
    /// backoff until a subscriber takes it (or its own window is full).
    NoSubscriber,
    /// On a durable tag of the federation: JetStream did not store it in the router's
    /// attempts (NATS unreachable, no quorum). A durable client keeps the frame and sends
    /// it again with backoff, as for [`NoSubscriber`](RefusedReason::NoSubscriber).
    NotStored,
    /// A reason this crate does not know.
    Other(u8),
}

impl RefusedReason {
    /// The byte on the wire.
    pub const fn code(self) -> u8 {
        match self {
            RefusedReason::TooLong => 1,
            RefusedReason::HopLimit => 2,
            RefusedReason::Loop => 3,
            RefusedReason::MetadataTooLarge => 4,
            RefusedReason::NoSubscriber => 5,
            RefusedReason::NotStored => 6,
            RefusedReason::Other(b) => b,
        }
    }

    /// The reason of a wire byte.
    pub const fn from_code(code: u8) -> RefusedReason {
        match code {
            1 => RefusedReason::TooLong,
            2 => RefusedReason::HopLimit,
            3 => RefusedReason::Loop,
            4 => RefusedReason::MetadataTooLarge,
            5 => RefusedReason::NoSubscriber,
            6 => RefusedReason::NotStored,
            other => RefusedReason::Other(other),
        }
    }

    /// The stable snake_case name.
    pub const fn kind(self) -> &'static str {
        match self {
            RefusedReason::TooLong => "too_long",
            RefusedReason::HopLimit => "hop_limit",
            RefusedReason::Loop => "loop",
            RefusedReason::MetadataTooLarge => "metadata_too_large",
            RefusedReason::NoSubscriber => "no_subscriber",
            RefusedReason::NotStored => "not_stored",
            RefusedReason::Other(_) => "other",
        }
    }

    /// Whether a durable client keeps a frame refused for this reason and sends it again
    /// later (`no_subscriber`: a subscriber may come; `not_stored`: JetStream may come
    /// back), rather than forgetting it.
    pub const fn is_retried(self) -> bool {
        matches!(self, RefusedReason::NoSubscriber | RefusedReason::NotStored)
    }
}

impl fmt::Display for RefusedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// Consecutive data frames of a connection that the router refused for one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedRun {
    /// The first frame's index on the connection (counted from 0, modulo 2^32, as
    /// [`Stored::count`] counts).
    pub first: u32,
    /// How many frames, from `first` on.
    pub frames: u32,
    /// Why.
    pub reason: RefusedReason,
}

impl RefusedRun {
    /// Bytes of one run on the wire.
    pub const LEN: usize = 9;

    /// Whether the frame of index `index` is in the run (modulo 2^32).
    pub fn contains(&self, index: u32) -> bool {
        index.wrapping_sub(self.first) < self.frames
    }
}

/// y3's stored frame: the router has handled the first [`count`](Stored::count) data frames
/// the client wrote on this connection (modulo 2^32): stored, or, for those in
/// [`refused`](Stored::refused), refused. A refused frame is always listed in the frame
/// whose count first moves past it (or an earlier one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Data frames of this connection handled.
    pub count: u32,
    /// Frames among them refused (field `31`, left out when empty).
    pub refused: Vec<RefusedRun>,
}

impl Stored {
    /// A count with no refusals.
    pub fn count(count: u32) -> Stored {
        Stored {
            count,
            refused: Vec::new(),
        }
    }
}

/// A rejection or goaway: a message for people and, from y3 routers, a code for programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goaway {
    /// Why, as a stable code ([`GoawayCode::Unspecified`] when the frame has none).
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

/// Where a decoded data frame came from: its bytes, and the field values they encode, so
/// that an unchanged frame is written back as those bytes.
#[derive(Clone)]
struct Wire {
    frame: Bytes,
    tag: u32,
    hops: u32,
    metadata: (usize, usize),
    payload: (usize, usize),
}

/// Address and length: whether a `Bytes` is still the very slice decoded.
fn span(b: &Bytes) -> (usize, usize) {
    (b.as_ptr() as usize, b.len())
}

/// One message on a tag.
///
/// `payload` and `metadata` are [`Bytes`]: decoding slices them out of the read buffer
/// without copying, and routing one frame to many subscribers clones reference counts,
/// not bytes. A decoded frame whose fields are left as they are encodes as the bytes it
/// was decoded from (one copy, nothing rebuilt).
#[derive(Clone)]
pub struct Data {
    /// The data tag functions observe.
    pub tag: u32,
    /// The metadata map.
    pub metadata: Metadata,
    /// The payload, usually itself a Y3 packet.
    pub payload: Bytes,
    /// How many stream functions this message has passed (y3 field `30`); the router drops
    /// messages past its hop limit, which breaks function loops.
    pub hops: u32,
    wire: Option<Wire>,
    /// Dropped with the last clone of this frame: see [`Data::set_token`].
    token: Option<Token>,
    /// Whether the frame's own bytes hold its token ([`Data::detach_holding`]).
    held: bool,
}

/// Something a frame carries along and drops with its last clone (a router's charge
/// against its memory budget: the bytes of one frame shared by many queues are charged
/// once, and released when the last queue lets go). Cloning a frame clones the `Arc`.
pub type Token = std::sync::Arc<dyn std::any::Any + Send + Sync>;

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Data")
            .field("tag", &format_args!("{:#x}", self.tag))
            .field("metadata", &self.metadata)
            .field("payload", &self.payload)
            .field("hops", &self.hops)
            .finish()
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        self.tag == other.tag
            && self.hops == other.hops
            && self.metadata == other.metadata
            && self.payload == other.payload
    }
}

impl Eq for Data {}

impl Data {
    /// A data frame with empty metadata and zero hops.
    pub fn new(tag: u32, payload: impl Into<Bytes>) -> Data {
        Data {
            tag,
            metadata: Metadata::empty(),
            payload: payload.into(),
            hops: 0,
            wire: None,
            token: None,
            held: false,
        }
    }

    /// Attaches `token` to this frame, replacing any it had: every clone made after this
    /// shares it, and it is dropped with the last of them. Not part of the frame's value
    /// (ignored by `==`, `Debug` and encoding).
    pub fn set_token(&mut self, token: Token) {
        self.token = Some(token);
    }

    /// Whether a token is attached ([`Data::set_token`], [`Data::detach_holding`]).
    pub fn has_token(&self) -> bool {
        self.token.is_some() || self.held
    }

    /// Sets the metadata.
    pub fn with_metadata(mut self, metadata: Metadata) -> Data {
        self.metadata = metadata;
        self
    }

    /// Moves the frame's bytes into an allocation of their own, so that holding the frame
    /// (in a subscriber's queue) does not keep alive the whole read buffer it was decoded
    /// from. An unchanged frame keeps its wire bytes (copied once, fields re-pointed into
    /// the copy); a changed one copies its payload and metadata.
    pub fn detach(&mut self) {
        self.detach_with(Bytes::copy_from_slice);
    }

    /// As [`Data::detach`], the copy's one allocation also holding the token `keep` makes
    /// from the bytes the copy holds ([`held_for`](crate::holding::held_for) its length):
    /// dropped with the last clone of the frame (the last slice of its bytes), as a token
    /// attached with [`Data::set_token`] would be, but without an allocation of its own
    /// (see [`crate::holding`]). The frame then counts as carrying a token.
    pub fn detach_holding<K: Send + 'static>(&mut self, keep: impl FnOnce(usize) -> K) {
        let mut keep = Some(keep);
        // The token goes with the first copy made (there is one, unless the frame is a
        // changed one with an empty payload: then with its metadata's).
        self.detach_with(|bytes| match keep.take() {
            Some(keep) => {
                let held = crate::holding::held_for(bytes.len());
                crate::holding::copy_holding(bytes, keep(held))
            }
            None => Bytes::copy_from_slice(bytes),
        });
        self.held = true;
    }

    /// Moves the frame's bytes into what `copy` makes of them: its wire bytes in one copy,
    /// or (a changed frame) its payload, then its metadata.
    fn detach_with(&mut self, mut copy: impl FnMut(&[u8]) -> Bytes) {
        // The wire bytes are borrowed for the copy (no reference taken on them).
        let copied = self
            .wire()
            .map(|frame| (frame.as_ptr() as usize, copy(frame)));
        if let Some((base, copy)) = copied {
            // The same bytes in the copy. An empty field is no slice of the frame (it is
            // `Bytes::new()`, wherever that points) and stays empty.
            let moved = |b: &Bytes| match (b.as_ptr() as usize).checked_sub(base) {
                Some(at) if !b.is_empty() => copy.slice(at..at + b.len()),
                _ => Bytes::new(),
            };
            self.metadata = Metadata::from_bytes(moved(self.metadata.as_bytes()));
            self.payload = moved(&self.payload);
            self.wire = Some(Wire {
                tag: self.tag,
                hops: self.hops,
                metadata: span(self.metadata.as_bytes()),
                payload: span(&self.payload),
                frame: copy,
            });
        } else {
            self.wire = None;
            let (payload, metadata) = if self.payload.is_empty() {
                (Bytes::new(), copy(self.metadata.as_bytes()))
            } else {
                (copy(&self.payload), copy(self.metadata.as_bytes()))
            };
            self.payload = payload;
            self.metadata = Metadata::from_bytes(metadata);
        }
    }

    /// The bytes this frame was decoded from, while its fields still say what they say.
    pub fn wire(&self) -> Option<&Bytes> {
        let w = self.wire.as_ref()?;
        let same = w.tag == self.tag
            && w.hops == self.hops
            && w.metadata == span(self.metadata.as_bytes())
            && w.payload == span(&self.payload);
        same.then_some(&w.frame)
    }

    fn body_len(&self) -> usize {
        let mut len = 0;
        data_fields(self, |f| len += f.len());
        len
    }

    /// As [`Frame::check_len`] for this data frame.
    ///
    /// # Errors
    /// [`FrameError::TooLong`] when the body exceeds `max_len`.
    pub fn check_len(&self, max_len: usize) -> Result<usize, FrameError> {
        fits(self.body_len(), max_len)
    }
}

/// `body` if it is within `max_len` (at most `i32::MAX`), else [`FrameError::TooLong`].
fn fits(body: usize, max_len: usize) -> Result<usize, FrameError> {
    let limit = max_len.min(i32::MAX as usize);
    if body > limit {
        return Err(FrameError::TooLong {
            declared: body as u64,
            limit: limit as u64,
        });
    }
    Ok(body)
}

/// Any frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// See [`Handshake`] (boxed: it is large and rare, and frames are queued by value).
    Handshake(Box<Handshake>),
    /// The router admits the client.
    HandshakeAck,
    /// The router refuses the handshake.
    Rejected(Goaway),
    /// The router is closing the connection.
    Goaway(Goaway),
    /// The router sends the client to another `host:port`.
    ConnectTo(String),
    /// See [`Data`].
    Data(Data),
    /// y3: see [`Stored`]; only to clients whose handshake set [`Handshake::wants_acks`].
    Stored(Stored),
}

// Field keys.
const F_NAME: u32 = 0x01;
const F_CLIENT_TYPE: u32 = 0x02;
const F_ID: u32 = 0x03;
const F_AUTH_NAME: u32 = 0x04;
const F_AUTH_PAYLOAD: u32 = 0x05;
const F_OBSERVED: u32 = 0x06;
const F_VERSION: u32 = 0x07;
const F_WANTED_TARGET: u32 = 0x08;
const F_FUNCTION: u32 = 0x09;
const F_MESSAGE: u32 = 0x01;
const F_TAG: u32 = 0x01;
const F_PAYLOAD: u32 = 0x02;
const F_METADATA: u32 = 0x03;
/// y3's field in every frame that has one: extension level, code, hops, stored count.
const F_EXT: u32 = 0x30;
/// y3's handshake field of content filters; the stored frame's refused runs.
const F_FILTERS: u32 = 0x31;
const F_REFUSED: u32 = 0x31;
/// y3's handshake field: the client wants stored acknowledgements.
const F_ACKS: u32 = 0x32;

/// One field as the encoder sees it. Each frame lists its fields once, in wire order
/// ([`Frame::fields`]); its length and its encoding both walk that list, so they cannot
/// disagree.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    /// A string or byte-string field, written even when empty (YoMo's fields).
    Bytes(u32, &'a [u8]),
    /// Exactly one byte (the handshake's client type).
    Byte(u32, u8),
    /// Tags as fixed 4-byte little-endian integers (the handshake's observed tags).
    TagsLe(u32, &'a [u32]),
    /// An integer field (NVarUInt32).
    Int(u32, u32),
    /// A y3 integer field, left out when zero.
    OptInt(u32, u32),
    /// y3's filters: `tag u32 LE | length u32 LE | text` per entry, left out when empty.
    Filters(u32, &'a [(u32, String)]),
    /// y3's refused runs: `first u32 LE | frames u32 LE | reason u8`, left out when empty.
    Refused(u32, &'a [RefusedRun]),
}

impl Field<'_> {
    /// Bytes the field takes, header included.
    #[inline(always)]
    fn len(self) -> usize {
        let value = match self {
            Field::Bytes(_, b) => b.len(),
            Field::Byte(..) => 1,
            Field::TagsLe(_, tags) => 4 * tags.len(),
            Field::Int(_, v) => scalar::int_len(D, u32_bits(v)),
            Field::OptInt(_, 0) => return 0,
            Field::OptInt(_, v) => scalar::int_len(D, u32_bits(v)),
            Field::Filters(_, []) => return 0,
            Field::Filters(_, filters) => filters_len(filters),
            Field::Refused(_, []) => return 0,
            Field::Refused(_, runs) => RefusedRun::LEN * runs.len(),
        };
        Header::encoded_len(Tag::primitive(self.key()), value, D) + value
    }

    #[inline(always)]
    fn key(self) -> u32 {
        match self {
            Field::Bytes(k, _)
            | Field::Byte(k, _)
            | Field::TagsLe(k, _)
            | Field::Int(k, _)
            | Field::OptInt(k, _)
            | Field::Filters(k, _)
            | Field::Refused(k, _) => k,
        }
    }
}

/// The fields of a data frame, in the order YoMo writes them, then y3's.
#[inline(always)]
fn data_fields<'a>(d: &'a Data, mut f: impl FnMut(Field<'a>)) {
    f(Field::Int(F_TAG, d.tag));
    f(Field::Bytes(F_METADATA, d.metadata.as_bytes()));
    f(Field::Bytes(F_PAYLOAD, &d.payload));
    f(Field::OptInt(F_EXT, d.hops));
}

/// Bytes of the filters field's value.
fn filters_len(filters: &[(u32, String)]) -> usize {
    filters.iter().map(|(_, text)| 8 + text.len()).sum()
}

/// Reads the filters field: `tag u32 LE | length u32 LE | UTF-8 text`, repeated.
fn read_filters(mut bytes: &[u8]) -> Result<Vec<(u32, String)>, FrameError> {
    let invalid = || FrameError::InvalidField {
        frame: "handshake",
        field: "filters",
    };
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (Some(tag), Some(len)) = (bytes.first_chunk::<4>(), bytes.get(4..8)) else {
            return Err(invalid());
        };
        let tag = u32::from_le_bytes(*tag);
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let text = bytes
            .get(8..8usize.saturating_add(len))
            .ok_or_else(invalid)?;
        let text = core::str::from_utf8(text).map_err(|_| invalid())?;
        out.push((tag, text.to_owned()));
        bytes = &bytes[8 + len..];
    }
    Ok(out)
}

/// Reads the refused runs of a stored frame: 9 bytes each.
fn read_refused(bytes: &[u8]) -> Result<Vec<RefusedRun>, FrameError> {
    if !bytes.len().is_multiple_of(RefusedRun::LEN) {
        return Err(FrameError::InvalidField {
            frame: "stored",
            field: "refused",
        });
    }
    Ok(bytes
        .chunks_exact(RefusedRun::LEN)
        .map(|r| RefusedRun {
            first: u32::from_le_bytes([r[0], r[1], r[2], r[3]]),
            frames: u32::from_le_bytes([r[4], r[5], r[6], r[7]]),
            reason: RefusedReason::from_code(r[8]),
        })
        .collect())
}

/// Unsigned values travel as the signed 32-bit integer with the same bits (NVarUInt32).
const fn u32_bits(v: u32) -> i64 {
    v as i32 as i64
}

/// Room one staged header plus integer can take.
const STEP: usize = y3::tag::MAX_HEADER_LEN + 1 + scalar::MAX_SCALAR_LEN;

/// Headers and integers gathered on the stack and appended to the frame buffer in one
/// copy before each byte string (and at the end). Appending them one by one costs a
/// `memmove` call per 1–3 bytes: 1.9% of a 100-byte echo server's CPU.
///
/// ```text
/// data frame:  [node hdr][tag hdr|int][metadata hdr] | metadata | [payload hdr] | payload
///              └────── one staged copy ────────────┘   one copy   staged copy    one copy
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
    #[inline(always)]
    fn header(&mut self, dst: &mut BytesMut, tag: Tag, len: usize) {
        if self.len + STEP > self.buf.len() {
            self.flush(dst);
        }
        if let Some(out) = self.buf[self.len..].first_chunk_mut() {
            self.len += Header::write(tag, len, D, out).unwrap_or(0);
        }
    }

    /// Writes one field: headers and integers are staged; before a byte string everything
    /// staged goes out, then the bytes themselves.
    #[inline(always)]
    fn field(&mut self, dst: &mut BytesMut, field: Field<'_>) {
        let key = field.key();
        match field {
            Field::OptInt(_, 0) => {}
            Field::Int(_, v) | Field::OptInt(_, v) => {
                let v = u32_bits(v);
                self.header(dst, Tag::primitive(key), scalar::int_len(D, v));
                if let Some(out) = self.buf[self.len..].first_chunk_mut() {
                    self.len += scalar::int_write(D, v, out);
                }
            }
            Field::Bytes(_, bytes) => {
                self.header(dst, Tag::primitive(key), bytes.len());
                if !bytes.is_empty() {
                    self.flush(dst);
                    dst.put_slice(bytes);
                }
            }
            Field::Byte(_, b) => {
                self.header(dst, Tag::primitive(key), 1);
                if let Some(out) = self.buf.get_mut(self.len) {
                    *out = b;
                    self.len += 1;
                }
            }
            Field::TagsLe(_, tags) => {
                self.header(dst, Tag::primitive(key), 4 * tags.len());
                self.flush(dst);
                for &tag in tags {
                    dst.put_u32_le(tag);
                }
            }
            Field::Filters(_, []) => {}
            Field::Filters(_, filters) => {
                self.header(dst, Tag::primitive(key), filters_len(filters));
                self.flush(dst);
                for (tag, text) in filters {
                    dst.put_u32_le(*tag);
                    // Filter texts are bounded far below 4 GiB by the frame limit.
                    dst.put_u32_le(text.len() as u32);
                    dst.put_slice(text.as_bytes());
                }
            }
            Field::Refused(_, []) => {}
            Field::Refused(_, runs) => {
                self.header(dst, Tag::primitive(key), RefusedRun::LEN * runs.len());
                self.flush(dst);
                for run in runs {
                    dst.put_u32_le(run.first);
                    dst.put_u32_le(run.frames);
                    dst.put_u8(run.reason.code());
                }
            }
        }
    }
}

impl Frame {
    /// The frame type key.
    pub fn kind(&self) -> u32 {
        match self {
            Frame::Handshake(_) => kind::HANDSHAKE,
            Frame::HandshakeAck => kind::HANDSHAKE_ACK,
            Frame::Rejected(_) => kind::REJECTED,
            Frame::Goaway(_) => kind::GOAWAY,
            Frame::ConnectTo(_) => kind::CONNECT_TO,
            Frame::Data(_) => kind::DATA,
            Frame::Stored(_) => kind::STORED,
        }
    }

    /// The frame type's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        kind::name(self.kind())
    }

    /// Every field of the frame, in wire order: the one declaration that
    /// [`Frame::body_len`] and [`Frame::encode`] both walk.
    #[inline(always)]
    fn fields<'a>(&'a self, mut f: impl FnMut(Field<'a>)) {
        match self {
            Frame::Handshake(h) => {
                f(Field::Bytes(F_NAME, h.name.as_bytes()));
                f(Field::Bytes(F_ID, h.id.as_bytes()));
                f(Field::Byte(F_CLIENT_TYPE, h.client_type.code()));
                f(Field::TagsLe(F_OBSERVED, &h.observed));
                f(Field::Bytes(F_AUTH_NAME, h.auth_name.as_bytes()));
                f(Field::Bytes(F_AUTH_PAYLOAD, h.auth_payload.as_bytes()));
                f(Field::Bytes(F_VERSION, h.version.as_bytes()));
                f(Field::Bytes(F_FUNCTION, &h.function_definition));
                f(Field::Bytes(F_WANTED_TARGET, h.wanted_target.as_bytes()));
                f(Field::OptInt(F_EXT, h.extension));
                f(Field::Filters(F_FILTERS, &h.filters));
                f(Field::OptInt(F_ACKS, u32::from(h.wants_acks)));
            }
            Frame::HandshakeAck => {}
            Frame::Rejected(g) | Frame::Goaway(g) => {
                f(Field::Bytes(F_MESSAGE, g.reason.as_bytes()));
                if let Some(code) = g.code.code() {
                    f(Field::Int(F_EXT, code));
                }
            }
            Frame::ConnectTo(endpoint) => f(Field::Bytes(F_MESSAGE, endpoint.as_bytes())),
            Frame::Data(d) => data_fields(d, f),
            Frame::Stored(s) => {
                f(Field::Int(F_EXT, s.count));
                f(Field::Refused(F_REFUSED, &s.refused));
            }
        }
    }

    /// Bytes of the fields: the frame packet's value length.
    pub fn body_len(&self) -> usize {
        let mut len = 0;
        self.fields(|f| len += f.len());
        len
    }

    /// Bytes of the whole frame, header included: exactly what [`Frame::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        if let Frame::Data(d) = self {
            if let Some(wire) = d.wire() {
                return wire.len();
            }
        }
        let body = self.body_len();
        Header::encoded_len(Tag::node(self.kind()), body, D) + body
    }

    /// The frame's body length, checked against `max_len` (the receiver's limit; at most
    /// `i32::MAX`): what [`encode`](Frame::encode) checks first, for a sender that wants
    /// to refuse a frame before queueing it.
    ///
    /// # Errors
    /// [`FrameError::TooLong`] when the body exceeds the limit.
    pub fn check_len(&self, max_len: usize) -> Result<usize, FrameError> {
        fits(self.body_len(), max_len)
    }

    /// Appends the frame to `dst`, reserving the room first. A decoded data frame whose
    /// fields are unchanged is copied out as the bytes it arrived as.
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
    /// Frame::Data(Data::new(0x34, &b"\x01\x02\x03"[..])).encode(&mut buf, 1 << 20)?;
    /// assert_eq!(&buf[..], &[0xbf, 0x0a, 1, 1, 0x34, 3, 0, 2, 3, 1, 2, 3]);
    /// # Ok::<(), y3_transport::FrameError>(())
    /// ```
    pub fn encode(&self, dst: &mut BytesMut, max_len: usize) -> Result<(), FrameError> {
        if let Frame::Data(d) = self {
            if let Some(wire) = d.wire() {
                // Its body is shorter than its bytes: within our limit when they are, and
                // only a frame longer than the limit has its body measured (by its fields).
                if wire.len() > max_len.min(i32::MAX as usize) {
                    fits(d.body_len(), max_len)?;
                }
                dst.put_slice(wire);
                return Ok(());
            }
        }
        let body = self.check_len(max_len)?;
        dst.reserve(Header::encoded_len(Tag::node(self.kind()), body, D) + body);
        let mut out = Staged::new();
        out.header(dst, Tag::node(self.kind()), body);
        self.fields(|f| out.field(dst, f));
        out.flush(dst);
        Ok(())
    }

    /// Decodes one complete frame. `frame` holds exactly the frame's bytes (header
    /// included); payload and metadata of a data frame are slices of it, not copies.
    ///
    /// # Errors
    /// As [`Frame::decode_parsed`], and the header errors of the codec.
    ///
    /// # Examples
    ///
    /// ```
    /// use bytes::Bytes;
    /// use y3_transport::frame::Frame;
    ///
    /// let wire = Bytes::from_static(&[0xa9, 0x00]);
    /// assert_eq!(Frame::decode(wire, &y3_transport::frame::config(1 << 20))?, Frame::HandshakeAck);
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
        let (tag, head_len) = (packet.tag(), packet.encoded_len() - packet.value().len());
        Frame::decode_parsed(frame, tag, head_len, config)
    }

    /// Decodes a frame whose header the caller already parsed: `frame` is the whole frame,
    /// `tag` its tag and `head_len` the header's length (the codec's one header parse).
    ///
    /// # Errors
    /// [`FrameError::UnknownFrame`] for a tag that is not a known frame node,
    /// [`FrameError::InvalidField`] for a bad field (an empty client type), and the
    /// codec's [`y3::DecodeError`]s for malformed fields (a field overflowing the frame, a
    /// string that is not UTF-8, a node where a primitive belongs).
    pub fn decode_parsed(
        frame: Bytes,
        tag: Tag,
        head_len: usize,
        config: &Config,
    ) -> Result<Frame, FrameError> {
        if !tag.is_node() || !kind::is_known(tag.id()) {
            return Err(FrameError::UnknownFrame { tag: tag.id() });
        }
        let name = kind::name(tag.id());
        let packet = Packet::from_parsed(tag, &frame[head_len..], head_len, *config);
        let invalid = |field| FrameError::InvalidField { frame: name, field };
        match tag.id() {
            kind::DATA => {
                let (mut tag, mut hops) = (None, 0);
                let (mut metadata, mut payload) = (Metadata::empty(), Bytes::new());
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_TAG => tag = Some(scalar::read_u32(D, field.bytes()?)?),
                        F_METADATA => {
                            metadata = Metadata::from_bytes(frame.slice_ref(field.bytes()?))
                        }
                        F_PAYLOAD => payload = frame.slice_ref(field.bytes()?),
                        F_EXT => hops = scalar::read_u32(D, field.bytes()?)?,
                        _ => {}
                    }
                }
                let tag = tag.ok_or(FrameError::MissingField {
                    frame: name,
                    field: F_TAG,
                })?;
                let wire = Wire {
                    tag,
                    hops,
                    metadata: span(metadata.as_bytes()),
                    payload: span(&payload),
                    frame,
                };
                Ok(Frame::Data(Data {
                    tag,
                    metadata,
                    payload,
                    hops,
                    wire: Some(wire),
                    token: None,
                    held: false,
                }))
            }
            kind::HANDSHAKE => {
                let mut h = Handshake::new(ClientType::Source, "", "");
                h.version.clear();
                h.extension = 0;
                let mut client_type = None;
                for field in packet.children()? {
                    let field = field?;
                    let string = || field.str().map(str::to_owned);
                    match field.id() {
                        F_NAME => h.name = string()?,
                        F_ID => h.id = string()?,
                        F_CLIENT_TYPE => client_type = Some(field.bytes()?),
                        F_OBSERVED => {
                            h.observed = field
                                .bytes()?
                                .chunks_exact(4)
                                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                                .collect();
                        }
                        F_AUTH_NAME => h.auth_name = string()?,
                        F_AUTH_PAYLOAD => h.auth_payload = string()?,
                        F_VERSION => h.version = string()?,
                        F_FUNCTION => h.function_definition = frame.slice_ref(field.bytes()?),
                        F_WANTED_TARGET => h.wanted_target = string()?,
                        F_EXT => h.extension = scalar::read_u32(D, field.bytes()?)?,
                        F_FILTERS => h.filters = read_filters(field.bytes()?)?,
                        F_ACKS => h.wants_acks = scalar::read_u32(D, field.bytes()?)? != 0,
                        _ => {}
                    }
                }
                // Exactly one byte: an empty one is what crashes YoMo's zipper.
                h.client_type = match client_type {
                    Some(&[b]) => ClientType::from_code(b),
                    _ => return Err(invalid("client_type")),
                };
                Ok(Frame::Handshake(Box::new(h)))
            }
            kind::STORED => {
                let mut stored = Stored::default();
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_EXT => stored.count = scalar::read_u32(D, field.bytes()?)?,
                        F_REFUSED => stored.refused = read_refused(field.bytes()?)?,
                        _ => {}
                    }
                }
                Ok(Frame::Stored(stored))
            }
            kind::HANDSHAKE_ACK => {
                for field in packet.children()? {
                    field?;
                }
                Ok(Frame::HandshakeAck)
            }
            kind::REJECTED | kind::GOAWAY | kind::CONNECT_TO => {
                let (mut message, mut code) = (String::new(), GoawayCode::Unspecified);
                for field in packet.children()? {
                    let field = field?;
                    match field.id() {
                        F_MESSAGE => message = field.str()?.to_owned(),
                        F_EXT => code = GoawayCode::from_code(scalar::read_u32(D, field.bytes()?)?),
                        _ => {}
                    }
                }
                Ok(match tag.id() {
                    kind::REJECTED => Frame::Rejected(Goaway::new(code, message)),
                    kind::GOAWAY => Frame::Goaway(Goaway::new(code, message)),
                    _ => Frame::ConnectTo(message),
                })
            }
            // `is_known` was checked above.
            other => Err(FrameError::UnknownFrame { tag: other }),
        }
    }
}

/// The decoding configuration of frames: the `nvarint` dialect, frame bodies up to
/// `max_frame_len`, and the depth frames need (the frame and its fields).
pub fn config(max_frame_len: usize) -> Config {
    Config::new(D).with_limits(y3::Limits {
        max_packet_len: max_frame_len.min(i32::MAX as usize) as u64,
        max_depth: 4,
    })
}

impl From<Handshake> for Frame {
    fn from(hello: Handshake) -> Frame {
        Frame::Handshake(Box::new(hello))
    }
}

impl From<Data> for Frame {
    fn from(data: Data) -> Frame {
        Frame::Data(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn cfg() -> Config {
        config(1 << 20)
    }

    fn roundtrip(frame: Frame) -> Bytes {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf, 1 << 20).unwrap();
        assert_eq!(buf.len(), frame.encoded_len(), "{frame:?}");
        let bytes = buf.freeze();
        let back = Frame::decode(bytes.clone(), &cfg()).unwrap();
        assert_eq!(back, frame);
        // Decoded, unchanged, it encodes as the same bytes (the forwarding path).
        let mut again = BytesMut::new();
        back.encode(&mut again, 1 << 20).unwrap();
        assert_eq!(&again[..], &bytes[..]);
        // Every frame is also a well-formed Y3 packet.
        y3::decode_with(&bytes, &cfg()).unwrap();
        bytes
    }

    #[test]
    fn data_layout() {
        let bytes = roundtrip(Frame::Data(Data::new(0x34, &hex!("010203")[..])));
        assert_eq!(&bytes[..], hex!("bf0a 010134 0300 0203010203"));
        let md = Metadata::from_pairs([("yomo-tid", "tid-0001")]);
        let bytes = roundtrip(Frame::Data(
            Data::new(0x33, &b"hello"[..]).with_metadata(md),
        ));
        assert_eq!(
            &bytes[..],
            hex!("bf1f 010133 031381a8796f6d6f2d746964a87469642d30303031 020568656c6c6f")
        );
        let mut d = Data::new(u32::MAX, Bytes::new());
        d.hops = 2;
        assert_eq!(
            &roundtrip(Frame::Data(d))[..],
            hex!("bf0a 0101ff 0300 0200 300102")
        );
        assert_eq!(
            &roundtrip(Frame::Data(Data::new(0xe001, Bytes::new())))[..],
            hex!("bf09 010300e001 0300 0200")
        );
    }

    #[test]
    fn a_changed_frame_is_rebuilt() {
        let wire = Bytes::from_static(&hex!("bf0a 010134 0300 0203010203"));
        let Frame::Data(mut d) = Frame::decode(wire.clone(), &cfg()).unwrap() else {
            panic!("data");
        };
        assert_eq!(d.payload.as_ptr(), wire[9..].as_ptr());
        assert_eq!(d.wire().map(|w| w.as_ptr()), Some(wire.as_ptr()));
        d.hops = 1;
        assert!(d.wire().is_none());
        let mut buf = BytesMut::new();
        Frame::Data(d.clone()).encode(&mut buf, 1 << 20).unwrap();
        assert_eq!(&buf[..], hex!("bf0d 010134 0300 0203010203 300101"));
        d.hops = 0;
        d.payload = Bytes::from_static(b"\x01\x02\x03");
        assert!(d.wire().is_none(), "same bytes elsewhere are a change");
    }

    /// An unchanged frame written as its bytes is still held to the writer's limit on its
    /// body (10 bytes here, 12 with the header).
    #[test]
    fn a_frame_written_as_its_bytes_is_checked_against_the_limit() {
        let wire = Bytes::from_static(&hex!("bf0a 010134 0300 0203010203"));
        let frame = Frame::decode(wire.clone(), &cfg()).unwrap();
        let mut buf = BytesMut::new();
        for max_len in [10, 11, 1 << 20] {
            buf.clear();
            frame.encode(&mut buf, max_len).unwrap();
            assert_eq!(buf, wire);
        }
        buf.clear();
        assert!(matches!(
            frame.encode(&mut buf, 9),
            Err(FrameError::TooLong {
                declared: 10,
                limit: 9
            })
        ));
        assert!(buf.is_empty());
    }

    #[test]
    fn detached_frames_own_their_bytes() {
        let md = Metadata::from_pairs([("yomo-tid", "t")]);
        let mut buf = BytesMut::new();
        Frame::Data(Data::new(0x33, &b"hello"[..]).with_metadata(md))
            .encode(&mut buf, 1 << 20)
            .unwrap();
        buf.extend_from_slice(&[0u8; 4096]); // the rest of a read buffer
        let read = buf.freeze();
        let frame_len = read.len() - 4096;
        let Frame::Data(mut d) = Frame::decode(read.slice(..frame_len), &cfg()).unwrap() else {
            panic!()
        };
        let before = d.clone();
        d.detach();
        assert_eq!(d, before);
        let wire = d.wire().expect("still forwarded as its bytes").clone();
        assert_eq!(&wire[..], &read[..frame_len]);
        assert_ne!(wire.as_ptr(), read.as_ptr());
        assert!(d.payload.as_ptr() as usize >= wire.as_ptr() as usize);
        // Empty fields (no metadata, an empty payload) stay empty.
        let wire = Bytes::from_static(&hex!("bf07 010133 0300 0200 aaaa"));
        let Frame::Data(mut bare) = Frame::decode(wire.slice(..9), &cfg()).unwrap() else {
            panic!()
        };
        bare.detach();
        assert_eq!(bare, Data::new(0x33, Bytes::new()));
        assert_eq!(bare.wire().map(|w| &w[..]), Some(&wire[..9]));
        // A changed frame copies its fields.
        d.hops = 1;
        d.detach();
        assert!(d.wire().is_none());
        assert_eq!((&d.payload[..], d.hops), (&b"hello"[..], 1));
    }

    #[test]
    fn control_frames() {
        assert_eq!(&roundtrip(Frame::HandshakeAck)[..], hex!("a900"));
        let bytes = roundtrip(Frame::Rejected(Goaway::new(
            GoawayCode::Unauthorized,
            "invalid token",
        )));
        assert_eq!(
            &bytes[..],
            hex!("b912 010d 696e76616c696420746f6b656e 300102")
        );
        let bytes = roundtrip(Frame::Goaway(Goaway::new(
            GoawayCode::Unspecified,
            "goaway error",
        )));
        assert_eq!(&bytes[..], hex!("ae0e 010c 676f61776179206572726f72"));
        roundtrip(Frame::Goaway(Goaway::new(GoawayCode::Other(99), "why")));
        let bytes = roundtrip(Frame::ConnectTo("127.0.0.1:9001".into()));
        assert_eq!(&bytes[..], hex!("be10 010e 3132372e302e302e313a39303031"));
    }

    #[test]
    fn stored_acknowledgements() {
        // y3 only: type 0x33, the count in field 30 (NVarUInt32).
        let stored = |n| Frame::Stored(Stored::count(n));
        assert_eq!(&roundtrip(stored(0))[..], hex!("b3 03 30 01 00"));
        assert_eq!(&roundtrip(stored(300))[..], hex!("b3 04 30 02 012c"));
        roundtrip(stored(u32::MAX));
        // Refused runs (field 31): the module doc's example, shared with the Go client.
        let refused = Frame::Stored(Stored {
            count: 3,
            refused: vec![RefusedRun {
                first: 1,
                frames: 1,
                reason: RefusedReason::TooLong,
            }],
        });
        assert_eq!(
            &roundtrip(refused)[..],
            hex!("b3 0e 30 01 03 31 09 01000000 01000000 01")
        );
        let runs = vec![
            RefusedRun {
                first: u32::MAX,
                frames: 2,
                reason: RefusedReason::HopLimit,
            },
            RefusedRun {
                first: 7,
                frames: 300,
                reason: RefusedReason::Other(200),
            },
        ];
        assert!(runs[0].contains(u32::MAX) && runs[0].contains(0) && !runs[0].contains(1));
        let bytes = roundtrip(Frame::Stored(Stored {
            count: 400,
            refused: runs,
        }));
        // The Go client's vector of the same frame (bindings/go/client/frame_test.go).
        assert_eq!(
            &bytes[..],
            hex!("b318 30020190 3112 ffffffff 02000000 02 07000000 2c010000 c8")
        );
        // A run that is not 9 bytes is an invalid frame.
        let bad = Bytes::from_static(&hex!("b3 0d 30 01 03 31 08 01000000 01000000"));
        let err = Frame::decode(bad, &cfg()).unwrap_err();
        assert_eq!(err.to_string(), "invalid refused in stored frame");
        for code in 0..=255u8 {
            let reason = RefusedReason::from_code(code);
            assert_eq!(reason.code(), code);
        }
        assert_eq!(RefusedReason::Loop.kind(), "loop");
        assert_eq!(RefusedReason::from_code(4), RefusedReason::MetadataTooLarge);
        assert_eq!(RefusedReason::from_code(5), RefusedReason::NoSubscriber);
        assert_eq!(RefusedReason::NoSubscriber.kind(), "no_subscriber");
        assert!(RefusedReason::NoSubscriber.is_retried() && !RefusedReason::Loop.is_retried());
        assert_eq!(RefusedReason::from_code(6), RefusedReason::NotStored);
        assert_eq!(RefusedReason::NotStored.kind(), "not_stored");
        assert!(RefusedReason::NotStored.is_retried());
        // Handshake field 32: present only when the client wants acknowledgements.
        let mut h = Handshake::new(ClientType::Source, "s", "id-0");
        let plain = roundtrip(h.clone().into());
        h.wants_acks = true;
        let acked = roundtrip(h.into());
        assert_eq!(&acked[acked.len() - 3..], hex!("32 01 01"));
        assert_eq!(acked.len(), plain.len() + 3);
    }

    #[test]
    fn handshakes() {
        let mut h = Handshake::new(ClientType::StreamFunction, "sink", "sfnid-0");
        h.observed = vec![0x33, 0xe001];
        h.wanted_target = "t1".into();
        h.extension = 0;
        // YoMo's own encoding of this handshake (codec-02).
        let bytes = roundtrip(h.clone().into());
        assert_eq!(
            &bytes[..],
            hex!(
                "b132 0104 73696e6b 0307 7366 6e69642d30 02015d 0608 3300000001e00000
                 0400 0500 070a 323032342d30312d3033 0900 0802 7431"
            )
        );
        h.extension = EXTENSION_LEVEL;
        let h = h.credential("token:secret");
        assert_eq!((&h.auth_name[..], &h.auth_payload[..]), ("token", "secret"));
        let bytes = roundtrip(h.clone().into());
        assert!(bytes.ends_with(&hex!("300101")));
        // y3's filters (field 31): tag LE, length LE, text, per filter; after field 30.
        let filtered = h.clone().filter(0x33, "0x01 > 5").filter(0xe001, "");
        let bytes = roundtrip(filtered.into());
        assert!(bytes.ends_with(&hex!(
            "300101 3118 33000000 08000000 30783031203e2035 01e00000 00000000"
        )));
        // A filters field that is not tag | length | text is an invalid handshake.
        for bad in [
            &hex!("b109 02015d 3104 33000000")[..],
            &hex!("b10e 02015d 3109 33000000 05000000 31"),
        ] {
            let err = Frame::decode(Bytes::copy_from_slice(bad), &config(1 << 20)).unwrap_err();
            assert_eq!(err.to_string(), "invalid filters in handshake frame");
        }
        let bare = h.credential("s:e:c");
        assert_eq!((&bare.auth_name[..], &bare.auth_payload[..]), ("s", "e:c"));
        let bare = bare.credential("plain");
        assert_eq!((&bare.auth_name[..], &bare.auth_payload[..]), ("", "plain"));
        // Any client type byte is kept; an unknown one is a source to the router.
        let mut odd = Handshake::new(ClientType::Other(1), "", "");
        odd.observed = vec![u32::MAX];
        roundtrip(odd.into());
    }

    /// Far more staged headers than the stack buffer holds, and long values: it spills.
    #[test]
    fn long_fields_spill_in_order() {
        let mut h = Handshake::new(ClientType::StreamFunction, "n".repeat(70), "i".repeat(9000));
        h.observed = (0..3000).collect();
        h.function_definition = Bytes::from(vec![b'{'; 200]);
        roundtrip(h.into());
        let md = Metadata::from_pairs([("k", "v".repeat(300).as_str())]);
        let mut d = Data::new(0x3f, vec![7u8; 70_000]).with_metadata(md);
        d.hops = u32::MAX;
        roundtrip(Frame::Data(d));
    }

    #[test]
    fn decoders_are_tolerant() {
        // Fields out of order, an unknown field, a repeated tag (the last wins), no
        // metadata field at all.
        let wire = Bytes::from_static(&hex!("bf0e 020178 20013f 010110 010111 0400"));
        let frame = Frame::decode(wire, &cfg()).unwrap();
        assert_eq!(frame, Frame::Data(Data::new(0x11, &b"x"[..])));
        // A handshake with only a client type: everything else empty.
        let Frame::Handshake(h) =
            Frame::decode(Bytes::from_static(&hex!("b103 02015f")), &cfg()).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (h.client_type, h.version.as_str(), h.extension),
            (ClientType::Source, "", 0)
        );
        // Observed tags: a tail shorter than four bytes is ignored, as YoMo does.
        let Frame::Handshake(h) = Frame::decode(
            Bytes::from_static(&hex!("b10a 02015d 0605 3300000001")),
            &cfg(),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(h.observed, [0x33]);
    }

    #[test]
    fn bad_frames() {
        let c = cfg();
        let err = |hex: &[u8]| Frame::decode(Bytes::copy_from_slice(hex), &c).unwrap_err();
        assert_eq!(err(&hex!("bf03 020100")).kind(), "missing_field");
        assert_eq!(err(&hex!("a000")).kind(), "unknown_frame");
        assert_eq!(err(&hex!("3f00")).kind(), "unknown_frame");
        // The handshake that kills YoMo's zipper: an empty client type.
        assert_eq!(err(&hex!("b104 0100 0200")).kind(), "invalid_field");
        assert_eq!(err(&hex!("b106 0100 0203 5d5d")).kind(), "child_overflow");
        assert_eq!(err(&hex!("b106 0100 02025d5d")).kind(), "invalid_field");
        assert_eq!(err(&hex!("b102 0100")).kind(), "invalid_field");
        // A field that claims more bytes than its frame holds.
        assert_eq!(err(&hex!("bf03 0105 01")).kind(), "child_overflow");
        assert_eq!(err(&hex!("bf01")).kind(), "unexpected_end");
        // An empty tag, a payload given as a node, a name that is not UTF-8.
        assert_eq!(err(&hex!("bf02 0100")).kind(), "invalid_length");
        assert_eq!(err(&hex!("bf05 010110 8200")).kind(), "wrong_type");
        assert_eq!(err(&hex!("b106 0101ff 02015f")).kind(), "invalid_utf8");
        // An ack has no body: it fits any limit.
        Frame::HandshakeAck.encode(&mut BytesMut::new(), 0).unwrap();
        let data = Frame::Data(Data::new(1, vec![0; 10]));
        assert_eq!(
            data.encode(&mut BytesMut::new(), 8).unwrap_err().kind(),
            "too_long"
        );
    }

    #[test]
    fn codes_and_client_types_roundtrip() {
        for code in 0..12 {
            let c = GoawayCode::from_code(code);
            assert_eq!(c.code(), Some(code));
            if code < 11 {
                assert_eq!(GoawayCode::from_kind(c.kind()), Some(c));
            }
        }
        assert_eq!(GoawayCode::Unspecified.code(), None);
        assert_eq!(GoawayCode::from_kind("nope"), None);
        assert_eq!(
            GoawayCode::from_kind("forbidden"),
            Some(GoawayCode::Forbidden)
        );
        assert_eq!(GoawayCode::Forbidden.code(), Some(10));
        assert!(!GoawayCode::Forbidden.is_retryable());
        for b in 0..=255u8 {
            assert_eq!(ClientType::from_code(b).code(), b);
        }
        assert!(ClientType::StreamFunction.receives());
        assert!(!ClientType::UpstreamZipper.receives());
    }
}
