//! One established client connection: handshake done, a writer task writing what its
//! senders queued in its [`Outbox`], a batch per write.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::outbox::Outbox;
use super::{ClientOptions, Transport};
use crate::frame::{ClientType, Frame, Goaway, GoawayCode, Handshake};
use crate::stream::{BoxWrite, FrameReader, Guard};
use crate::{tls, Connection, FrameCodec, TransportError};

/// How long a closing client waits for the router to acknowledge its last frames.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// The next frame from the router, as `reader.next()`; frames over this client's
/// `max_frame_len` that the codec skipped on the way are logged (never silent). One
/// already complete in the read buffer is decoded where it lies ([`crate::next_buffered`]:
/// frames that arrived together are not moved through the stream adapters one by one).
pub(crate) async fn next(reader: &mut FrameReader) -> Option<Result<Frame, crate::FrameError>> {
    if let Some(frame) = crate::next_buffered(reader) {
        if let Some(skipped) = reader.decoder_mut().take_skipped() {
            warn_skipped(skipped, reader.decoder().max_frame_len());
        }
        return Some(frame);
    }
    loop {
        match crate::next_or_skipped(reader).await {
            crate::Next::Frame(frame) => {
                if let Some(skipped) = reader.decoder_mut().take_skipped() {
                    warn_skipped(skipped, reader.decoder().max_frame_len());
                }
                return frame;
            }
            crate::Next::Skipped(skipped) => {
                warn_skipped(skipped, reader.decoder().max_frame_len());
            }
        }
    }
}

fn warn_skipped(skipped: crate::Skipped, limit: usize) {
    tracing::warn!(
        frames = skipped.frames,
        bytes = skipped.bytes,
        last_len = skipped.last_len,
        limit,
        "skipped frames from the router over this client's max_frame_len"
    );
}

/// An established connection: its read half and the handle of its writer task.
pub(crate) struct Link {
    pub reader: FrameReader,
    pub tx: LinkTx,
}

/// The sending side of a [`Link`].
pub(crate) struct LinkTx {
    /// Where senders queue frames for the writer task.
    pub out: Outbox,
    /// Cancel to make the writer flush what it has, shut its half down and stop.
    pub stop: CancellationToken,
    pub writer: JoinHandle<Result<(), TransportError>>,
}

/// Who a client is across its connections: its type, observed tags and YoMo-style id,
/// whose `-N` suffix counts the connections made.
#[derive(Debug, Clone)]
pub(crate) struct Hello {
    client_type: ClientType,
    observed: Vec<u32>,
    /// The id without its suffix (what sources put in `yomo-source-id`).
    pub id: String,
    connections: u32,
    /// Ask the router for stored acknowledgements (`DurableSource`).
    pub wants_acks: bool,
}

impl Hello {
    pub fn new(client_type: ClientType, observed: &[u32]) -> Hello {
        Hello {
            client_type,
            observed: observed.to_vec(),
            id: super::new_id(),
            connections: 0,
            wants_acks: false,
        }
    }

    /// The handshake of the next connection.
    pub fn next(&mut self, options: &ClientOptions) -> Handshake {
        let id = format!("{}-{}", self.id, self.connections);
        self.connections += 1;
        let mut hello = Handshake::new(self.client_type, options.name.clone(), id)
            .credential(&options.credential);
        hello.observed.clone_from(&self.observed);
        hello.wants_acks = self.wants_acks;
        if self.client_type.receives() {
            hello.wanted_target.clone_from(&options.wanted_target);
            hello.filters.clone_from(&options.filters);
        }
        hello
    }
}

impl Link {
    /// Connects, handshakes and starts the writer task.
    pub async fn connect(
        options: &ClientOptions,
        hello: &mut Hello,
    ) -> Result<Link, TransportError> {
        let conn = handshake(options, hello.next(options)).await?;
        let out = Outbox::new(options.send_queue, options.max_frame_len);
        let stop = CancellationToken::new();
        // The handshake was flushed: the framed writer holds nothing, and from here on
        // frames are encoded by their senders into the outbox.
        let io = conn.writer.into_inner();
        let writer = tokio::spawn(write_loop(io, out.clone(), stop.clone(), conn.guard));
        Ok(Link {
            reader: conn.reader,
            tx: LinkTx { out, stop, writer },
        })
    }

    /// Connects with backoff: retryable failures are retried up to `backoff.attempts`
    /// times (forever by default); refusals are returned at once. The first failure and
    /// every `WARN_EVERY`th after it are logged at warn with the address and the cause.
    pub async fn connect_with_backoff(
        options: &ClientOptions,
        hello: &mut Hello,
    ) -> Result<Link, TransportError> {
        let attempts = options.backoff.attempts.max(1);
        let mut attempt: u32 = 0;
        loop {
            match Link::connect(options, hello).await {
                Ok(link) => {
                    if attempt > 0 {
                        tracing::info!(addr = %options.addr, attempts = attempt + 1, "connected to the router");
                    }
                    return Ok(link);
                }
                Err(e) if e.is_retryable() => {
                    attempt = attempt.saturating_add(1);
                    let transport = options.transport.name();
                    if attempt >= attempts {
                        let error = TransportError::GaveUp {
                            attempts,
                            addr: options.addr,
                            transport,
                            last: Box::new(e),
                        };
                        tracing::warn!(%error, "giving up connecting");
                        return Err(error);
                    }
                    let delay = options.backoff.delay(attempt - 1);
                    if attempt % WARN_EVERY == 1 {
                        tracing::warn!(
                            addr = %options.addr,
                            transport,
                            error = %e,
                            attempt,
                            ?delay,
                            "cannot reach the router; retrying (is it running there?)"
                        );
                    } else {
                        tracing::debug!(error = %e, attempt, ?delay, "connect failed; retrying");
                    }
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Failed connection attempts between two warnings (the first failure always warns).
pub(crate) const WARN_EVERY: u32 = 20;

/// Connects to `options.addr` over `options.transport`, sends `hello` and waits for the
/// router's ack: the connection, ready for data frames, or the refusal as a typed error
/// (the connection then closed with YoMo's code 0x13).
pub(crate) async fn handshake(
    options: &ClientOptions,
    hello: Handshake,
) -> Result<Connection, TransportError> {
    let codec = FrameCodec::new(options.max_frame_len);
    let mut conn = match options.transport {
        #[cfg(feature = "tcp")]
        Transport::Tcp => {
            crate::tcp::connect_with(options.addr, None, codec, options.recv_buffer).await?
        }
        #[cfg(feature = "tcp")]
        Transport::TcpTls => {
            let tls = (
                options.tls_config()?,
                tls::server_name(&options.server_name)?,
            );
            crate::tcp::connect_with(options.addr, Some(tls), codec, options.recv_buffer).await?
        }
        #[cfg(feature = "quic")]
        Transport::Quic => {
            let config = options.tls_config()?;
            crate::quic::connect(options.addr, config, &options.server_name, codec).await?
        }
        #[allow(unreachable_patterns)]
        _ => {
            return Err(TransportError::Config(
                "this transport is not compiled in (features tcp, quic)",
            ))
        }
    };
    conn.writer.send(Frame::Handshake(Box::new(hello))).await?;
    let answer = tokio::time::timeout(options.handshake_timeout, conn.reader.next())
        .await
        .map_err(|_| TransportError::Timeout {
            what: "the handshake answer",
        })?;
    let refused = match answer {
        Some(Ok(Frame::HandshakeAck)) => None,
        Some(Ok(Frame::Rejected(g) | Frame::Goaway(g))) => {
            tracing::warn!(code = g.code.kind(), reason = %g.reason, "router refused the handshake");
            Some(TransportError::Goaway {
                code: g.code,
                message: g.reason,
            })
        }
        Some(Ok(Frame::ConnectTo(endpoint))) => Some(TransportError::Redirected { endpoint }),
        Some(Ok(other)) => Some(TransportError::UnexpectedFrame {
            expected: "handshake_ack",
            found: other.name(),
        }),
        Some(Err(e)) => Some(e.into()),
        None => Some(TransportError::Closed),
    };
    if let Some(error) = refused {
        // As YoMo's clients do: close with 0x13 and the reason, so the router need
        // not wait for its own close.
        let reason = Goaway::new(GoawayCode::Unspecified, error.to_string());
        conn.guard.close_with(&reason);
        return Err(error);
    }
    Ok(conn)
}

impl LinkTx {
    /// Waits until everything queued so far is written.
    pub async fn flush(&self) -> Result<(), TransportError> {
        self.out.flush().await
    }

    /// Flushes, shuts the write half down, waits for the writer and the router's close.
    /// Frames queued so far are written; senders sharing the outbox (a function's
    /// [`Writer`](super::Writer)s) are refused from now on.
    pub async fn close(mut self) -> Result<(), TransportError> {
        self.out.close();
        self.stop.cancel();
        match (&mut self.writer).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::Closed),
        }
    }
}

impl Drop for LinkTx {
    /// As [`close`](LinkTx::close) without the wait: the writer writes what is queued,
    /// shuts its half down and ends; senders sharing the outbox are refused.
    fn drop(&mut self) {
        self.out.close();
        self.stop.cancel();
    }
}

/// Writes the outbox's batches until stopped, then lingers for the router's close.
async fn write_loop(
    mut io: BoxWrite,
    out: Outbox,
    stop: CancellationToken,
    guard: Guard,
) -> Result<(), TransportError> {
    let result = out.write_to(&mut io, &stop).await;
    if result.is_ok() {
        guard.linger(LINGER, None).await;
    }
    result
}
