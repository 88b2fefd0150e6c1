//! One connection's protocol state, sans-IO in quinn's `Connection` style: frames and
//! timeouts go in through `handle_*(now, ..)`, decisions come out as [`Event`]s. The server
//! loop owns the socket and acts on the events; these tests drive the machine directly.
//!
//! ```text
//!   AwaitHandshake ──handshake ok──▶ Open ──data──▶ Route | Drop (loop, metadata too large)
//!        │  (deadline)                 │
//!        └──timeout, bad frame,        └──malformed or misplaced frame, bad metadata,
//!           refused handshake              reserved tag ──▶ Closed (goaway code)
//!           ──▶ Closed (goaway code)
//! ```
//!
//! The handshake rules are YoMo v1.22's (version `2024-01-03`, token auth, any client type
//! byte) without its faults: an empty client type is refused instead of crashing the
//! process, and a refusal never repeats the offered token. A data frame's metadata is
//! checked and rewritten here as YoMo's zipper does before routing (see `spec/frames.md`,
//! "Routing").
//!
//! Access: the router's main token allows every tag; each token of `[[auth.tokens]]` allows
//! the tags its [`Permissions`] list. A handshake observing a tag its token does not allow is
//! refused (`forbidden`); a data frame on a tag its sender may not publish closes the
//! connection (`forbidden`), as a reserved tag does.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use y3::{Filter, FilterLimits};
use y3_transport::frame::{ClientType, Data, Frame, Goaway, GoawayCode, Handshake, VERSION};
use y3_transport::metadata;
use y3_transport::FrameError;

use crate::config::AttachConfig;
use crate::table::SessionId;

/// YoMo's reducer tag: its frames lose `yomo-target` in the router.
pub const REDUCER_TAG: u32 = 0xe001;

pub use crate::config::{Grant, Permissions, RESERVED_TAGS};

/// What a handshake must satisfy.
#[derive(Clone, PartialEq, Eq)]
pub struct Admission {
    /// The main token, allowing every tag; empty: none.
    pub token: String,
    /// Further tokens, each with its permissions. With none and no main token, no token
    /// is required.
    pub grants: Vec<Grant>,
    /// Most observed tags.
    pub max_observed_tags: usize,
    /// Longest name (and id, and wanted target) in bytes.
    pub max_name_len: usize,
    /// Hop limit for data frames.
    pub max_hops: u32,
    /// Bounds on a data frame's metadata (`limits.max_metadata_*`).
    pub metadata_limits: metadata::MetadataLimits,
    /// Limits on content filters.
    pub filter_limits: FilterLimits,
    /// Filters the config attaches to functions by name.
    pub attached: Vec<AttachConfig>,
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("token", &(!self.token.is_empty()).then_some("<set>"))
            .field("grants", &self.grants)
            .field("max_observed_tags", &self.max_observed_tags)
            .field("max_name_len", &self.max_name_len)
            .field("max_hops", &self.max_hops)
            .field("metadata_limits", &self.metadata_limits)
            .field("filter_limits", &self.filter_limits)
            .field("attached", &self.attached)
            .finish()
    }
}

impl Admission {
    /// Whether handshakes must carry a token.
    pub fn requires_token(&self) -> bool {
        !self.token.is_empty() || !self.grants.is_empty()
    }

    /// Checks a handshake and returns what its token allows.
    ///
    /// # Errors
    /// The rejection to answer with: `version_mismatch`, `unauthorized`,
    /// `bad_handshake`, or `forbidden` for an observed tag the token does not allow.
    pub fn check(&self, hello: &Handshake) -> Result<Arc<Permissions>, Goaway> {
        if hello.version != VERSION {
            return Err(Goaway::new(
                GoawayCode::VersionMismatch,
                format!(
                    "version negotiation failed: client={}, server={VERSION}",
                    hello.version
                ),
            ));
        }
        let permissions = self.authenticate(hello)?;
        let longest = hello
            .name
            .len()
            .max(hello.id.len())
            .max(hello.wanted_target.len());
        if longest > self.max_name_len {
            return Err(Goaway::new(
                GoawayCode::BadHandshake,
                format!(
                    "name, id or wanted target of {longest} bytes is longer than \
                     limits.max_name_len ({} bytes)",
                    self.max_name_len
                ),
            ));
        }
        if hello.observed.len() > self.max_observed_tags {
            return Err(Goaway::new(
                GoawayCode::BadHandshake,
                format!(
                    "observes {} tags, more than limits.max_observed_tags ({})",
                    hello.observed.len(),
                    self.max_observed_tags
                ),
            ));
        }
        if let Some(tag) = hello
            .observed
            .iter()
            .find(|&&tag| !permissions.may_observe(tag))
        {
            return Err(Goaway::new(
                GoawayCode::Forbidden,
                format!("this token may not observe tag {tag:#x}"),
            ));
        }
        Ok(permissions)
    }

    /// The compiled content filters of an admitted stream function: its handshake's
    /// (field `31`) and the config's for its name, both applying where both exist.
    ///
    /// # Errors
    /// `bad_filter`, naming the tag and the filter error's kind: a filter that does not
    /// compile or is over a limit, a filter on a tag the handshake does not observe, two
    /// filters on one tag.
    pub fn filters(&self, hello: &Handshake) -> Result<Vec<(u32, Filter)>, Goaway> {
        let bad = |reason: String| Goaway::new(GoawayCode::BadFilter, reason);
        let mut texts: Vec<(u32, String)> = Vec::new();
        for (tag, text) in &hello.filters {
            if !hello.observed.contains(tag) {
                return Err(bad(format!(
                    "filter for tag {tag:#x}, which is not observed"
                )));
            }
            if texts.iter().any(|(t, _)| t == tag) {
                return Err(bad(format!("two filters for tag {tag:#x}")));
            }
            texts.push((*tag, text.clone()));
        }
        if hello.client_type.receives() {
            for a in self.attached.iter().filter(|a| a.function == hello.name) {
                if !hello.observed.contains(&a.tag) {
                    continue;
                }
                match texts.iter_mut().find(|(t, _)| *t == a.tag) {
                    Some((_, text)) => *text = format!("({}) and ({text})", a.filter),
                    None => texts.push((a.tag, a.filter.clone())),
                }
            }
        }
        texts
            .into_iter()
            .map(|(tag, text)| {
                Filter::parse_with(&text, &self.filter_limits, y3::Config::DEFAULT)
                    .map(|f| (tag, f))
                    .map_err(|e| bad(format!("{}: filter for tag {tag:#x}: {e}", e.kind())))
            })
            .collect()
    }

    /// The permissions of the handshake's token.
    fn authenticate(&self, hello: &Handshake) -> Result<Arc<Permissions>, Goaway> {
        if !self.requires_token() {
            return Ok(Arc::new(Permissions::ALL));
        }
        if !matches!(hello.auth_name.as_str(), "" | "token") {
            return Err(Goaway::new(
                GoawayCode::Unauthorized,
                format!("authentication not found: {}", hello.auth_name),
            ));
        }
        // Every token is compared, a match or not, so the time taken does not tell which
        // one matched (or how far a guess got).
        let offered = hello.auth_payload.as_bytes();
        let mut found = None;
        if !self.token.is_empty() && constant_time_eq(offered, self.token.as_bytes()) {
            found = Some(Arc::new(Permissions::ALL));
        }
        for grant in &self.grants {
            if constant_time_eq(offered, grant.token.as_bytes()) && found.is_none() {
                found = Some(grant.permissions.clone());
            }
        }
        // YoMo's zipper echoes the offered token here; y3 does not.
        found.ok_or_else(|| Goaway::new(GoawayCode::Unauthorized, "invalid token"))
    }
}

/// Compares tokens without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who an admitted client is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Client type.
    pub client_type: ClientType,
    /// Name.
    pub name: String,
    /// Client id (with its reconnect suffix).
    pub id: String,
    /// Observed tags (routed to only when the client type receives).
    pub observed: Vec<u32>,
    /// The `yomo-target` this client accepts; empty: none.
    pub wanted_target: String,
    /// y3 extension level: whether the client reads goaway frames and y3 codes.
    pub extension: u32,
    /// Compiled content filters by observed tag (handshake and config).
    pub filters: Vec<(u32, Filter)>,
}

/// Why a data frame was not routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Its hop count exceeds the limit (a function loop).
    Loop,
    /// Its metadata is over `limits.max_metadata_bytes` or `max_metadata_entries`
    /// (checked before the map is walked).
    MetadataTooLarge(metadata::MetadataTooLarge),
}

/// A data frame ready for routing, with what routing needs from its metadata: found by
/// one walk of the map ([`Routed::new`], or the session's checks), read back from the
/// frame's own bytes without walking again.
///
/// ```text
///   metadata:  | 82 | a8 yomo-tid | a8 "tid-0001" | ab yomo-target | a2 "fa" |
///                                   └─ tid: offset 11, 8 bytes        └─ target
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    data: Data,
    target: Option<Span>,
    tid: Option<Span>,
}

/// Where a string value lies in a frame's metadata bytes (offset and length): any bytes,
/// UTF-8 or not, as YoMo's zipper reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u32,
    len: u32,
}

impl Span {
    /// The span of `value`, a string's bytes borrowed from `map`.
    fn of(map: &[u8], value: &[u8]) -> Span {
        // `value` lies inside `map` (the walk borrows from it); a metadata map is far
        // shorter than 4 GiB (it is part of a frame within `limits.max_frame_len`).
        let at = (value.as_ptr() as usize).saturating_sub(map.as_ptr() as usize);
        Span {
            at: at as u32,
            len: value.len() as u32,
        }
    }

    /// The string's bytes at this span of `map` (checked: a span that does not fit reads
    /// as none).
    fn read(self, map: &[u8]) -> Option<&[u8]> {
        let start = self.at as usize;
        map.get(start..start.checked_add(self.len as usize)?)
    }
}

/// What routing reads from a frame's metadata, found in one walk.
#[derive(Debug, Default)]
struct Found<'a> {
    target: Option<&'a [u8]>,
    wanted: Option<&'a [u8]>,
    tid: Option<&'a [u8]>,
}

impl<'a> Found<'a> {
    /// Walks `metadata` once (the whole map: a malformed one is an error; a string that is
    /// not UTF-8 is not, as on YoMo's zipper). Keys are compared as bytes, values kept as
    /// bytes: routing compares them as bytes ([`Span::read`]).
    fn walk(metadata: &'a metadata::Metadata) -> Result<Found<'a>, metadata::MetadataError> {
        let [tid, target, wanted] = metadata.find([
            metadata::TID.as_bytes(),
            metadata::TARGET.as_bytes(),
            metadata::WANTED_TARGET.as_bytes(),
        ])?;
        Ok(Found {
            target,
            wanted,
            tid,
        })
    }
}

impl Routed {
    /// `data` as it is, its target and tid found in one walk of its metadata. A map that
    /// does not decode gives neither (the frame is still routed: to every observer).
    pub fn new(data: Data) -> Routed {
        let located = Located::find(&data.metadata);
        Routed::from_parts(data, located)
    }

    /// `data` with where its target and tid lie (found in its metadata by the session).
    pub(crate) fn from_parts(data: Data, located: Located) -> Routed {
        Routed {
            data,
            target: located.target,
            tid: located.tid,
        }
    }

    /// The frame.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Its `yomo-target`'s bytes, if any: only functions wanting it receive the frame.
    pub fn target(&self) -> Option<&[u8]> {
        self.target?.read(self.data.metadata.as_bytes())
    }

    /// Its `yomo-tid`'s bytes, if any (loops are followed by message).
    pub fn tid(&self) -> Option<&[u8]> {
        self.tid?.read(self.data.metadata.as_bytes())
    }

    /// The frame, and the spans of its target and tid.
    pub(crate) fn into_parts(self) -> (Data, Located) {
        (
            self.data,
            Located {
                target: self.target,
                tid: self.tid,
            },
        )
    }
}

/// Where a [`Routed`] frame's target and tid lie in its metadata, once the frame is taken
/// out of it ([`Routed::into_parts`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    target: Option<Span>,
    tid: Option<Span>,
}

impl Located {
    /// The target and tid of `metadata`, found in one walk. A map that does not decode
    /// gives neither (the frame is still routed: to every observer).
    fn find(metadata: &metadata::Metadata) -> Located {
        match Found::walk(metadata) {
            Ok(found) => Located::of(metadata, &found),
            Err(_) => Located {
                target: None,
                tid: None,
            },
        }
    }

    /// Where `found` (borrowed from `metadata`) lies in it.
    fn of(metadata: &metadata::Metadata, found: &Found<'_>) -> Located {
        let map = metadata.as_bytes();
        Located {
            target: found.target.map(|t| Span::of(map, t)),
            tid: found.tid.map(|t| Span::of(map, t)),
        }
    }

    /// The target, read from `map` (the metadata these spans were found in).
    pub fn target(self, map: &metadata::Metadata) -> Option<&[u8]> {
        self.target?.read(map.as_bytes())
    }

    /// The tid, read from `map` (the metadata these spans were found in).
    pub fn tid(self, map: &metadata::Metadata) -> Option<&[u8]> {
        self.tid?.read(map.as_bytes())
    }

    /// Whether the frame has a target.
    pub fn has_target(self) -> bool {
        self.target.is_some()
    }
}

/// A decision of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake is accepted: send the ack, subscribe the peer.
    Admitted(Peer),
    /// Route this data frame.
    Route(Routed),
    /// Drop this data frame (and count it).
    Drop(Data, DropReason),
    /// Refuse or close with this goaway. The session is over.
    Close(Goaway),
    /// Nothing to do.
    Nothing,
}

/// The session's decision on a data frame it checked where the frame lies
/// ([`Session::check_data`]): [`Event`]'s data cases, without moving the frame.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Route it; its target and tid lie here in its metadata.
    Route(Located),
    /// Drop it (and count it).
    Drop(DropReason),
    /// Refuse or close with this goaway. The session is over.
    Close(Goaway),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    AwaitHandshake {
        deadline: Instant,
    },
    Open {
        wanted_target: Option<String>,
        permissions: Arc<Permissions>,
    },
    Closed,
}

/// The protocol state of one connection.
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    state: State,
    admission: Arc<Admission>,
}

impl Session {
    /// A session waiting for its handshake until `deadline`.
    pub fn new(id: SessionId, deadline: Instant, admission: Arc<Admission>) -> Self {
        Session {
            id,
            state: State::AwaitHandshake { deadline },
            admission,
        }
    }

    /// The router's id for this connection.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// Whether the session has ended.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// When [`Session::handle_timeout`] must be called next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::AwaitHandshake { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// The clock reached `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> Event {
        match self.state {
            State::AwaitHandshake { deadline } if now >= deadline => {
                self.state = State::Closed;
                Event::Close(Goaway::new(
                    GoawayCode::HandshakeTimeout,
                    "no handshake in time",
                ))
            }
            _ => Event::Nothing,
        }
    }

    /// The connection delivered bytes that are not a frame.
    pub fn handle_error(&mut self, error: &FrameError) -> Event {
        if self.state == State::Closed {
            return Event::Nothing;
        }
        let code = match (&self.state, error) {
            // An empty client type, a handshake field of the wrong shape.
            (State::AwaitHandshake { .. }, FrameError::InvalidField { .. }) => {
                GoawayCode::BadHandshake
            }
            _ => GoawayCode::ProtocolError,
        };
        self.state = State::Closed;
        Event::Close(Goaway::new(code, format!("{}: {error}", error.kind())))
    }

    /// A frame arrived at `now`.
    pub fn handle_frame(&mut self, now: Instant, frame: Frame) -> Event {
        // A data frame of an open session: `check_data` decides.
        let frame = match frame {
            Frame::Data(mut data) => match self.check_data(&mut data) {
                Some(Verdict::Route(located)) => {
                    return Event::Route(Routed::from_parts(data, located))
                }
                Some(Verdict::Drop(reason)) => return Event::Drop(data, reason),
                Some(Verdict::Close(goaway)) => return Event::Close(goaway),
                None => Frame::Data(data),
            },
            frame => frame,
        };
        match (&self.state, frame) {
            (State::Closed, _) => Event::Nothing,
            (State::AwaitHandshake { deadline }, _) if now >= *deadline => self.handle_timeout(now),
            (State::AwaitHandshake { .. }, Frame::Handshake(hello)) => {
                let admitted = self
                    .admission
                    .check(&hello)
                    .and_then(|p| Ok((p, self.admission.filters(&hello)?)));
                match admitted {
                    Ok((permissions, filters)) => {
                        let wanted_target =
                            (!hello.wanted_target.is_empty()).then(|| hello.wanted_target.clone());
                        self.state = State::Open {
                            wanted_target,
                            permissions,
                        };
                        Event::Admitted(Peer {
                            client_type: hello.client_type,
                            name: hello.name,
                            id: hello.id,
                            observed: hello.observed,
                            wanted_target: hello.wanted_target,
                            extension: hello.extension,
                            filters,
                        })
                    }
                    Err(goaway) => {
                        self.state = State::Closed;
                        Event::Close(goaway)
                    }
                }
            }
            (State::AwaitHandshake { .. }, other) => {
                self.state = State::Closed;
                Event::Close(Goaway::new(
                    GoawayCode::ProtocolError,
                    format!("expected a handshake, got a {} frame", other.name()),
                ))
            }
            (State::Open { .. }, other) => {
                self.state = State::Closed;
                Event::Close(Goaway::new(
                    GoawayCode::ProtocolError,
                    format!("unexpected {} frame", other.name()),
                ))
            }
        }
    }

    /// A data frame arrived on an open session: checked where it lies (the hot path moves
    /// no frame), its metadata edited in place when the rules say so. `None` when the
    /// session is not open ([`handle_frame`](Session::handle_frame) decides then).
    pub(crate) fn check_data(&mut self, data: &mut Data) -> Option<Verdict> {
        let State::Open {
            wanted_target,
            permissions,
        } = &self.state
        else {
            return None;
        };
        if RESERVED_TAGS.contains(&data.tag) {
            self.state = State::Closed;
            return Some(Verdict::Close(Goaway::new(
                GoawayCode::ReservedTag,
                "[0xF000, 0xFFFF] is reserved; please do not write within this range",
            )));
        }
        if !permissions.may_publish(data.tag) {
            let reason = format!("this token may not publish tag {:#x}", data.tag);
            self.state = State::Closed;
            return Some(Verdict::Close(Goaway::new(GoawayCode::Forbidden, reason)));
        }
        if data.hops > self.admission.max_hops {
            return Some(Verdict::Drop(DropReason::Loop));
        }
        let limits = self.admission.metadata_limits;
        if let Err(e) = data.metadata.check_size(limits) {
            return Some(Verdict::Drop(DropReason::MetadataTooLarge(e)));
        }
        let sent_len = data.metadata.as_bytes().len();
        Some(match prepare(data, wanted_target.as_deref()) {
            // With the router's own `yomo-wanted-target` pair merged in, the frame as
            // forwarded must still be within the limits (the next router, or a y3 client,
            // would refuse it): over them, refused as the client's.
            Ok(located) if data.metadata.as_bytes().len() > sent_len => {
                match data.metadata.check_size(limits) {
                    Ok(()) => Verdict::Route(located),
                    Err(e) => Verdict::Drop(DropReason::MetadataTooLarge(e)),
                }
            }
            Ok(located) => Verdict::Route(located),
            Err(e) => {
                self.state = State::Closed;
                Verdict::Close(Goaway::new(
                    GoawayCode::ProtocolError,
                    format!("{}: {e}", e.kind()),
                ))
            }
        })
    }
}

/// YoMo's metadata rules, in one walk of the map: check it, find `yomo-target` and
/// `yomo-tid`, drop the target for the reducer tag, and merge the sender's wanted target.
/// An untouched frame keeps its bytes (and is forwarded as they are); an edited one (rare:
/// the reducer's, or a sender with a wanted target that the frame does not carry yet) is
/// walked again in its new bytes.
fn prepare(data: &mut Data, wanted_target: Option<&str>) -> Result<Located, FrameError> {
    let found = Found::walk(&data.metadata)?;
    let strip = data.tag == REDUCER_TAG && found.target.is_some();
    let merge = wanted_target.is_some_and(|w| found.wanted != Some(w.as_bytes()));
    if !(strip || merge) {
        return Ok(Located::of(&data.metadata, &found));
    }
    let set: Vec<(&str, &str)> = wanted_target
        .map(|w| (metadata::WANTED_TARGET, w))
        .into_iter()
        .collect();
    let remove: &[&str] = if strip { &[metadata::TARGET] } else { &[] };
    data.metadata = data.metadata.edit(&set, remove)?;
    Ok(Located::find(&data.metadata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;
    use std::time::Duration;
    use y3_transport::Metadata;

    fn admission(token: &str) -> Arc<Admission> {
        Arc::new(Admission {
            token: token.into(),
            grants: Vec::new(),
            max_observed_tags: 4,
            max_name_len: 16,
            max_hops: 2,
            metadata_limits: metadata::MetadataLimits {
                max_bytes: 64,
                max_entries: 3,
            },
            filter_limits: FilterLimits::DEFAULT,
            attached: vec![AttachConfig {
                function: "n".into(),
                tag: 0x10,
                filter: "0x01 == 1".into(),
            }],
        })
    }

    fn hello(client_type: ClientType, credential: &str, observed: &[u32]) -> Frame {
        let mut h = Handshake::new(client_type, "n", "id-0").credential(credential);
        h.observed = observed.to_vec();
        h.into()
    }

    fn code(event: Event) -> GoawayCode {
        match event {
            Event::Close(g) => g.code,
            other => panic!("expected close, got {other:?}"),
        }
    }

    fn open(wanted_target: &str) -> Session {
        let now = Instant::now();
        let mut s = Session::new(1, now + Duration::from_secs(1), admission(""));
        let Frame::Handshake(mut h) = hello(ClientType::StreamFunction, "", &[0x33]) else {
            panic!()
        };
        h.wanted_target = wanted_target.into();
        assert!(matches!(
            s.handle_frame(now, Frame::Handshake(h)),
            Event::Admitted(_)
        ));
        s
    }

    fn route(s: &mut Session, data: Data) -> Routed {
        match s.handle_frame(Instant::now(), Frame::Data(data)) {
            Event::Route(r) => r,
            other => panic!("expected route, got {other:?}"),
        }
    }

    #[test]
    fn handshake_then_route() {
        let now = Instant::now();
        let mut s = Session::new(5, now + Duration::from_secs(1), admission("t"));
        assert_eq!(s.poll_timeout(), Some(now + Duration::from_secs(1)));
        let Event::Admitted(peer) = s.handle_frame(now, hello(ClientType::Source, "token:t", &[]))
        else {
            panic!()
        };
        assert_eq!(
            (peer.client_type, peer.id.as_str()),
            (ClientType::Source, "id-0")
        );
        assert_eq!(s.poll_timeout(), None);
        let data = Data::new(0x10, &b"x"[..]);
        let routed = route(&mut s, data.clone());
        assert_eq!((routed.data(), routed.target()), (&data, None));
        // A second handshake is a protocol error, as is any frame a client never sends.
        assert_eq!(
            code(s.handle_frame(now, hello(ClientType::Source, "token:t", &[]))),
            GoawayCode::ProtocolError
        );
        assert!(s.is_closed());
    }

    #[test]
    fn refusals() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let new = || Session::new(1, later, admission("secret"));
        let wrong = new().handle_frame(now, hello(ClientType::Source, "token:guess", &[]));
        let Event::Close(g) = wrong else { panic!() };
        assert_eq!(g.code, GoawayCode::Unauthorized);
        assert!(
            !g.reason.contains("guess"),
            "the token is not echoed: {}",
            g.reason
        );
        let jwt = new().handle_frame(now, hello(ClientType::Source, "jwt:secret", &[]));
        assert_eq!(code(jwt), GoawayCode::Unauthorized);
        // No auth name: the default (token) auth.
        let bare = new().handle_frame(now, hello(ClientType::Source, "secret", &[]));
        assert!(matches!(bare, Event::Admitted(_)));
        let too_many = new().handle_frame(
            now,
            hello(ClientType::StreamFunction, "token:secret", &[1, 2, 3, 4, 5]),
        );
        assert_eq!(code(too_many), GoawayCode::BadHandshake);
        let data_first = new().handle_frame(now, Frame::Data(Data::new(1, Bytes::new())));
        assert_eq!(code(data_first), GoawayCode::ProtocolError);
        let mut late = new();
        assert_eq!(late.handle_timeout(now), Event::Nothing);
        assert_eq!(
            code(late.handle_timeout(later)),
            GoawayCode::HandshakeTimeout
        );
        let Frame::Handshake(mut h) = hello(ClientType::Source, "token:secret", &[]) else {
            panic!()
        };
        h.version = "2023-01-01".into();
        let Event::Close(g) = new().handle_frame(now, Frame::Handshake(h)) else {
            panic!()
        };
        assert_eq!(g.code, GoawayCode::VersionMismatch);
        assert!(g.reason.contains("client=2023-01-01, server=2024-01-03"));
        // The handshake that kills YoMo's zipper arrives here as a decode error.
        let err = FrameError::InvalidField {
            frame: "handshake",
            field: "client_type",
        };
        assert_eq!(code(new().handle_error(&err)), GoawayCode::BadHandshake);
    }

    #[test]
    fn loops_reserved_tags_and_bad_metadata() {
        let mut f = open("");
        let mut looped = Data::new(0x10, &b"x"[..]);
        looped.hops = 3;
        assert!(matches!(
            f.handle_frame(Instant::now(), Frame::Data(looped)),
            Event::Drop(_, DropReason::Loop)
        ));
        let reserved = f.handle_frame(Instant::now(), Frame::Data(Data::new(0xf001, Bytes::new())));
        assert_eq!(code(reserved), GoawayCode::ReservedTag);
        let mut g = open("");
        let bad = Data::new(0x10, Bytes::new())
            .with_metadata(Metadata::from_bytes(Bytes::from_static(b"\x81\xa1a")));
        let Event::Close(goaway) = g.handle_frame(Instant::now(), Frame::Data(bad)) else {
            panic!()
        };
        assert_eq!(goaway.code, GoawayCode::ProtocolError);
        assert!(
            goaway.reason.starts_with("bad_metadata"),
            "{}",
            goaway.reason
        );
        let err = FrameError::UnknownFrame { tag: 1 };
        assert_eq!(g.handle_error(&err), Event::Nothing);
    }

    /// The session's decision on a data frame of `tag` with metadata `md`, which must be a
    /// refusal for metadata over its limits: why.
    fn metadata_refusal(s: &mut Session, tag: u32, md: Metadata) -> metadata::MetadataTooLarge {
        let frame = Frame::Data(Data::new(tag, Bytes::new()).with_metadata(md));
        match s.handle_frame(Instant::now(), frame) {
            Event::Drop(_, DropReason::MetadataTooLarge(why)) => why,
            other => panic!("not refused for its metadata: {other:?}"),
        }
    }

    /// Strings that are not UTF-8 are bytes, as on YoMo's zipper: routed, read as bytes,
    /// and the session stays open.
    #[test]
    fn metadata_strings_that_are_not_utf8_are_routed() {
        let mut s = open("");
        let md = b"\x82\xa8yomo-tid\xa2\xff\x00\xabyomo-target\xa1\xfe";
        let data = Data::new(0x10, Bytes::new())
            .with_metadata(Metadata::from_bytes(Bytes::from_static(md)));
        let Event::Route(r) = s.handle_frame(Instant::now(), Frame::Data(data)) else {
            panic!()
        };
        assert_eq!(
            (r.target(), r.tid()),
            (Some(&b"\xfe"[..]), Some(&b"\xff\x00"[..]))
        );
        assert_eq!(
            &r.data().metadata.as_bytes()[..],
            md,
            "forwarded as it came"
        );
        let next = s.handle_frame(Instant::now(), Frame::Data(Data::new(0x10, Bytes::new())));
        assert!(matches!(next, Event::Route(_)));
    }

    #[test]
    fn metadata_over_its_limits_is_dropped_and_the_session_stays_open() {
        let mut s = open("a");
        let four = Metadata::from_pairs([("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]);
        let why = metadata_refusal(&mut s, REDUCER_TAG, four);
        assert!(
            matches!(
                why,
                metadata::MetadataTooLarge::Entries { count: 4, limit: 3 }
            ),
            "{why:?}"
        );
        let long = "x".repeat(64);
        let big = Metadata::from_pairs([("a", long.as_str())]);
        let why = metadata_refusal(&mut s, 0x33, big);
        assert!(
            matches!(why, metadata::MetadataTooLarge::Bytes { limit: 64, .. }),
            "{why:?}"
        );
        // At the limit, the router's own wanted-target pair would take it over: refused
        // (the next router would refuse the forwarded frame); one pair fewer is routed.
        let three = Metadata::from_pairs([("a", "1"), ("b", "2"), ("c", "3")]);
        let why = metadata_refusal(&mut s, 0x33, three);
        assert!(
            matches!(
                why,
                metadata::MetadataTooLarge::Entries { count: 4, limit: 3 }
            ),
            "{why:?}"
        );
        let two = Metadata::from_pairs([("a", "1"), ("b", "2")]);
        let r = route(&mut s, Data::new(0x33, Bytes::new()).with_metadata(two));
        assert_eq!(r.data().metadata.validate().unwrap(), 3);
        // Bytes likewise: what fits only without the pair is refused.
        let fill = "x".repeat(50);
        let near = Metadata::from_pairs([("k", fill.as_str())]);
        assert_eq!(near.as_bytes().len(), 55);
        let why = metadata_refusal(&mut s, 0x33, near);
        assert!(
            matches!(why, metadata::MetadataTooLarge::Bytes { .. }),
            "{why:?}"
        );
    }

    #[test]
    fn metadata_rules() {
        // Untouched: the frame keeps its bytes.
        let mut s = open("");
        let md = Metadata::from_pairs([(metadata::TID, "t1"), (metadata::TARGET, "fa")]);
        let data = Data::new(0x33, &b"x"[..]).with_metadata(md.clone());
        let r = route(&mut s, data);
        assert_eq!(r.target(), Some(&b"fa"[..]));
        assert_eq!(r.tid(), Some(&b"t1"[..]));
        assert_eq!(r.data().metadata, md);
        // The reducer tag loses its target.
        let r = route(
            &mut s,
            Data::new(REDUCER_TAG, Bytes::new()).with_metadata(md.clone()),
        );
        assert_eq!(r.target(), None);
        assert_eq!(r.tid(), Some(&b"t1"[..]));
        assert_eq!(r.data().metadata.get(metadata::TARGET).unwrap(), None);
        assert_eq!(r.data().metadata.get(metadata::TID).unwrap(), Some("t1"));
        // A sender with a wanted target has it merged into what it sends.
        let mut w = open("a");
        let r = route(
            &mut w,
            Data::new(0x33, Bytes::new()).with_metadata(md.clone()),
        );
        let map = r.data().metadata.to_map().unwrap();
        assert_eq!(map[metadata::WANTED_TARGET], "a");
        assert_eq!(map[metadata::TARGET], "fa");
        // Read back from the edited bytes, not the frame's old ones.
        assert_eq!((r.target(), r.tid()), (Some(&b"fa"[..]), Some(&b"t1"[..])));
        // ...overriding what the frame said.
        let forged = Metadata::from_pairs([(metadata::WANTED_TARGET, "b")]);
        let r = route(&mut w, Data::new(0x33, Bytes::new()).with_metadata(forged));
        assert_eq!(
            r.data().metadata.get(metadata::WANTED_TARGET).unwrap(),
            Some("a")
        );
    }

    #[test]
    fn routed_reads_target_and_tid_from_its_own_bytes() {
        let md = Metadata::from_pairs([
            (metadata::SOURCE_ID, "src"),
            (metadata::TID, "tid-0001"),
            (metadata::TARGET, "fa"),
        ]);
        let r = Routed::new(Data::new(0x33, &b"x"[..]).with_metadata(md.clone()));
        assert_eq!(
            (r.target(), r.tid()),
            (Some(&b"fa"[..]), Some(&b"tid-0001"[..]))
        );
        // Copied out of its buffer, the frame's spans still read the same strings.
        let (mut data, located) = r.into_parts();
        data.detach();
        assert_eq!(located.target(&data.metadata), Some(&b"fa"[..]));
        assert_eq!(located.tid(&data.metadata), Some(&b"tid-0001"[..]));
        // A map that does not decode: routed to every observer, no tid.
        let bad = Metadata::from_bytes(Bytes::from_static(b"\x81\xa1a"));
        let r = Routed::new(Data::new(0x33, Bytes::new()).with_metadata(bad));
        assert_eq!((r.target(), r.tid()), (None, None));
    }

    /// A main token `m` (every tag), a token `s-key` that may publish 0x10 and observe
    /// nothing, and a token `f-key` that may publish 0x20 and observe 0x10 and 0x11.
    fn with_grants() -> Arc<Admission> {
        let grant = |name: &str, publish: &[u32], observe: Option<&[u32]>| Grant {
            name: name.into(),
            token: format!("{name}-key"),
            permissions: Arc::new(Permissions::new(
                Some(publish.to_vec()),
                observe.map(<[u32]>::to_vec),
            )),
        };
        let mut admission = (*admission("m")).clone();
        admission.grants = vec![
            grant("s", &[0x10], Some(&[])),
            grant("f", &[0x20], Some(&[0x11, 0x10])),
        ];
        Arc::new(admission)
    }

    fn admitted(admission: &Arc<Admission>, credential: &str, observed: &[u32]) -> Session {
        let now = Instant::now();
        let mut s = Session::new(7, now + Duration::from_secs(1), admission.clone());
        let event = s.handle_frame(now, hello(ClientType::StreamFunction, credential, observed));
        assert!(
            matches!(event, Event::Admitted(_)),
            "{credential}: {event:?}"
        );
        s
    }

    #[test]
    fn permissions_of_each_token() {
        let admission = with_grants();
        assert!(admission.requires_token());
        let now = Instant::now();
        let refuse = |credential: &str, observed: &[u32]| {
            let mut s = Session::new(1, now + Duration::from_secs(1), admission.clone());
            let Event::Close(g) =
                s.handle_frame(now, hello(ClientType::StreamFunction, credential, observed))
            else {
                panic!("{credential} observing {observed:?} was admitted")
            };
            assert!(s.is_closed());
            g
        };
        // Observing: `f` may observe 0x10 and 0x11, not 0x12; `s` may observe nothing.
        admitted(&admission, "token:f-key", &[0x10, 0x11]);
        let g = refuse("token:f-key", &[0x10, 0x12]);
        assert_eq!(g.code, GoawayCode::Forbidden);
        assert_eq!(g.reason, "this token may not observe tag 0x12");
        assert_eq!(refuse("token:s-key", &[0x10]).code, GoawayCode::Forbidden);
        admitted(&admission, "token:s-key", &[]);
        // The main token observes anything; an unknown token is unauthorized, not forbidden.
        admitted(&admission, "token:m", &[1, 2, 3]);
        assert_eq!(refuse("token:x", &[]).code, GoawayCode::Unauthorized);
        assert_eq!(refuse("", &[]).code, GoawayCode::Unauthorized);

        // Publishing: `s` may publish 0x10; its first frame on 0x11 closes the session.
        let mut s = admitted(&admission, "token:s-key", &[]);
        route(&mut s, Data::new(0x10, &b"ok"[..]));
        let Event::Close(g) = s.handle_frame(now, Frame::Data(Data::new(0x11, Bytes::new())))
        else {
            panic!("publishing 0x11 was allowed")
        };
        assert_eq!(
            (g.code, g.reason.as_str()),
            (GoawayCode::Forbidden, "this token may not publish tag 0x11")
        );
        assert!(s.is_closed());
        assert_eq!(
            s.handle_frame(now, Frame::Data(Data::new(0x10, Bytes::new()))),
            Event::Nothing
        );
        // A reserved tag is still `reserved_tag`, whatever the token allows.
        let mut s = admitted(&admission, "token:s-key", &[]);
        let reserved = s.handle_frame(now, Frame::Data(Data::new(0xf000, Bytes::new())));
        assert_eq!(code(reserved), GoawayCode::ReservedTag);
        let mut m = admitted(&admission, "token:m", &[]);
        for tag in [0x10, 0x11, 0x20, 0xefff] {
            route(&mut m, Data::new(tag, Bytes::new()));
        }
    }

    #[test]
    fn permission_sets() {
        let p = Permissions::new(Some(vec![3, 1, 2, 1]), None);
        assert_eq!(
            (1..=4).map(|t| p.may_publish(t)).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        assert!(p.may_observe(0xefff));
        let none = Permissions::new(Some(Vec::new()), Some(Vec::new()));
        assert!(!none.may_publish(0) && !none.may_observe(0));
        assert!(Permissions::ALL.may_publish(u32::MAX));
        // Tokens never reach logs through Debug.
        let debug = format!("{:?}", with_grants());
        assert!(
            !debug.contains("-key") && !debug.contains("\"m\""),
            "{debug}"
        );
        // No token configured: anyone is admitted, with every permission.
        let open = admission("");
        assert!(!open.requires_token());
        admitted(&open, "token:whatever", &[9]);
    }
}
