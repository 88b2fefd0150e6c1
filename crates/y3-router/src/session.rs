//! One connection's protocol state, sans-IO in quinn's `Connection` style: frames and
//! timeouts go in through `handle_*(now, ..)`, decisions come out as [`Event`]s. The server
//! loop owns the socket and acts on the events; these tests drive the machine directly.
//!
//! ```text
//!   AwaitHandshake ──handshake ok──▶ Open ──goaway / close──▶ Closed
//!        │  (deadline)                 │
//!        └──timeout, bad frame,        └──malformed or misplaced frame──▶ Closed
//!           refused handshake              (goaway protocol_error)
//!           ──▶ Closed (goaway code)
//! ```

use std::time::Instant;

use y3_transport::frame::{Accepted, Data, Frame, Goaway, GoawayCode, Handshake, Role, VERSION};
use y3_transport::FrameError;

use crate::table::SessionId;

/// What a handshake must satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Required token; empty: none.
    pub token: String,
    /// Most observed tags.
    pub max_observed_tags: usize,
    /// Longest name in bytes.
    pub max_name_len: usize,
    /// Hop limit for data frames.
    pub max_hops: u32,
}

impl Admission {
    /// Checks a handshake.
    ///
    /// # Errors
    /// The goaway to answer with: `version_mismatch`, `unauthorized` or `bad_handshake`.
    pub fn check(&self, hello: &Handshake) -> Result<(), Goaway> {
        if hello.version != VERSION {
            return Err(Goaway::new(
                GoawayCode::VersionMismatch,
                format!("this router speaks version {VERSION}"),
            ));
        }
        if !constant_time_eq(hello.token.as_bytes(), self.token.as_bytes()) {
            return Err(Goaway::new(GoawayCode::Unauthorized, "wrong token"));
        }
        if hello.name.len() > self.max_name_len {
            return Err(Goaway::new(GoawayCode::BadHandshake, "name too long"));
        }
        if hello.observed.len() > self.max_observed_tags {
            return Err(Goaway::new(
                GoawayCode::BadHandshake,
                format!("observes more than {} tags", self.max_observed_tags),
            ));
        }
        match hello.role {
            Role::Source if !hello.observed.is_empty() => Err(Goaway::new(
                GoawayCode::BadHandshake,
                "sources observe no tags",
            )),
            Role::StreamFunction | Role::Sink if hello.observed.is_empty() => Err(Goaway::new(
                GoawayCode::BadHandshake,
                "functions and sinks observe at least one tag",
            )),
            _ => Ok(()),
        }
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
    /// Role.
    pub role: Role,
    /// Name.
    pub name: String,
    /// Observed tags.
    pub observed: Vec<u32>,
}

/// Why a data frame was not routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Its hop count exceeds the limit (a function loop).
    Loop,
}

/// A decision of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake is accepted: send `accepted`, subscribe the peer.
    Admitted(Accepted, Peer),
    /// Route this data frame.
    Route(Data),
    /// Drop this data frame (and count it).
    Drop(Data, DropReason),
    /// Send this control frame back.
    Reply(Frame),
    /// Send this goaway and close. The session is over.
    Close(Goaway),
    /// The client said goodbye; close quietly.
    Left,
    /// Nothing to do.
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    AwaitHandshake { deadline: Instant },
    Open(Role),
    Closed,
}

/// The protocol state machine of one connection.
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    state: State,
    admission: std::sync::Arc<Admission>,
}

impl Session {
    /// A new session that must complete its handshake by `deadline`.
    pub fn new(id: SessionId, deadline: Instant, admission: std::sync::Arc<Admission>) -> Self {
        Session {
            id,
            state: State::AwaitHandshake { deadline },
            admission,
        }
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The peer's role once admitted.
    pub fn role(&self) -> Option<Role> {
        match self.state {
            State::Open(role) => Some(role),
            _ => None,
        }
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// When [`Session::handle_timeout`] must be called, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::AwaitHandshake { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// Time has passed.
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
        self.state = State::Closed;
        Event::Close(Goaway::new(GoawayCode::ProtocolError, error.to_string()))
    }

    /// A frame arrived.
    pub fn handle_frame(&mut self, now: Instant, frame: Frame) -> Event {
        match (&self.state, frame) {
            (State::Closed, _) => Event::Nothing,
            (State::AwaitHandshake { deadline }, _) if now >= *deadline => self.handle_timeout(now),
            (State::AwaitHandshake { .. }, Frame::Handshake(hello)) => {
                match self.admission.check(&hello) {
                    Ok(()) => {
                        self.state = State::Open(hello.role);
                        Event::Admitted(
                            Accepted {
                                version: VERSION,
                                session: self.id,
                            },
                            Peer {
                                role: hello.role,
                                name: hello.name,
                                observed: hello.observed,
                            },
                        )
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
                    format!("expected a handshake, got {}", other.name()),
                ))
            }
            (State::Open(role), Frame::Data(data)) => {
                if !role.sends() {
                    self.state = State::Closed;
                    return Event::Close(Goaway::new(
                        GoawayCode::ProtocolError,
                        "sinks do not send data",
                    ));
                }
                if data.hops > self.admission.max_hops {
                    return Event::Drop(data, DropReason::Loop);
                }
                Event::Route(data)
            }
            (State::Open(_), Frame::Ping(nonce)) => Event::Reply(Frame::Pong(nonce)),
            (State::Open(_), Frame::Pong(_)) => Event::Nothing,
            (State::Open(_), Frame::Goaway(_)) => {
                self.state = State::Closed;
                Event::Left
            }
            (State::Open(_), other) => {
                self.state = State::Closed;
                Event::Close(Goaway::new(
                    GoawayCode::ProtocolError,
                    format!("unexpected {} frame", other.name()),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn admission(token: &str) -> Arc<Admission> {
        Arc::new(Admission {
            token: token.into(),
            max_observed_tags: 4,
            max_name_len: 16,
            max_hops: 2,
        })
    }

    fn hello(role: Role, token: &str, observed: &[u32]) -> Frame {
        Frame::Handshake(Handshake {
            version: VERSION,
            role,
            name: "n".into(),
            token: token.into(),
            observed: observed.to_vec(),
        })
    }

    fn code(event: Event) -> GoawayCode {
        match event {
            Event::Close(g) => g.code,
            other => panic!("expected close, got {other:?}"),
        }
    }

    #[test]
    fn handshake_then_route() {
        let now = Instant::now();
        let mut s = Session::new(5, now + Duration::from_secs(1), admission("t"));
        assert_eq!(s.poll_timeout(), Some(now + Duration::from_secs(1)));
        let Event::Admitted(accepted, peer) = s.handle_frame(now, hello(Role::Source, "t", &[]))
        else {
            panic!()
        };
        assert_eq!(accepted.session, 5);
        assert_eq!(peer.role, Role::Source);
        assert_eq!(s.poll_timeout(), None);
        let data = y3_transport::Data::new(0x10, 1, &b"x"[..]);
        assert_eq!(
            s.handle_frame(now, Frame::Data(data.clone())),
            Event::Route(data)
        );
        assert_eq!(
            s.handle_frame(now, Frame::Ping(9)),
            Event::Reply(Frame::Pong(9))
        );
        assert_eq!(
            s.handle_frame(now, Frame::Goaway(Goaway::new(GoawayCode::Normal, ""))),
            Event::Left
        );
        assert!(s.is_closed());
    }

    #[test]
    fn refusals() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let new = || Session::new(1, later, admission("secret"));
        let wrong = new().handle_frame(now, hello(Role::Source, "guess", &[]));
        assert_eq!(code(wrong), GoawayCode::Unauthorized);
        let sink_without_tags = new().handle_frame(now, hello(Role::Sink, "secret", &[]));
        assert_eq!(code(sink_without_tags), GoawayCode::BadHandshake);
        let too_many = new().handle_frame(now, hello(Role::Sink, "secret", &[1, 2, 3, 4, 5]));
        assert_eq!(code(too_many), GoawayCode::BadHandshake);
        let data_first = new().handle_frame(now, Frame::Ping(1));
        assert_eq!(code(data_first), GoawayCode::ProtocolError);
        let mut late = new();
        assert_eq!(late.handle_timeout(now), Event::Nothing);
        assert_eq!(
            code(late.handle_timeout(later)),
            GoawayCode::HandshakeTimeout
        );
        let mut old = new();
        let Frame::Handshake(mut h) = hello(Role::Source, "secret", &[]) else {
            panic!()
        };
        h.version = 9;
        assert_eq!(
            code(old.handle_frame(now, Frame::Handshake(h))),
            GoawayCode::VersionMismatch
        );
    }

    #[test]
    fn sinks_may_not_send_and_loops_are_dropped() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let mut sink = Session::new(1, later, admission(""));
        sink.handle_frame(now, hello(Role::Sink, "", &[0x10]));
        let data = y3_transport::Data::new(0x10, 1, &b"x"[..]);
        assert_eq!(
            code(sink.handle_frame(now, Frame::Data(data.clone()))),
            GoawayCode::ProtocolError
        );
        let mut f = Session::new(2, later, admission(""));
        f.handle_frame(now, hello(Role::StreamFunction, "", &[0x10]));
        let looped = y3_transport::Data { hops: 3, ..data };
        assert!(matches!(
            f.handle_frame(now, Frame::Data(looped)),
            Event::Drop(_, DropReason::Loop)
        ));
        let err = FrameError::UnknownFrame { tag: 1 };
        assert_eq!(code(f.handle_error(&err)), GoawayCode::ProtocolError);
        assert_eq!(f.handle_error(&err), Event::Nothing);
    }
}
