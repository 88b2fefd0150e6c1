//! The header/body ping-pong of the evpp-vs-Boost.Asio report.
//!
//! A message is an 8-byte header, `{u32 body_size, u32 packet_count}` in network order,
//! then `body_size` bytes. The client opens every session, then (timed from here) sends
//! `{100, 1}`; each side answers a message with `packet_count + 1`, and every second message
//! the body grows by one byte ([`reply`]), until `packet_count` reaches the total (8192).
//! Metric: the wall time until every session has exchanged all its messages.
//!
//! Implementations, each a client and a server process with `T` threads:
//!
//! - `y3-transport`: y3's transport read path: [`PingPongCodec`] (a tokio-util
//!   `Decoder`/`Encoder` written like `y3_transport::FrameCodec`) under `FramedRead` /
//!   `FramedWrite` (through `y3_transport::PlainWrite`) over the split `TcpStream`, as
//!   `y3_transport::Connection` does: one read takes
//!   whatever the socket has and every complete message in it is decoded without another
//!   syscall. The codec lives here because the header is this benchmark's, not Y3's. The
//!   threads are `T` one-worker tokio runtimes with the sessions dealt round-robin (evpp's
//!   one-event-loop-per-thread model).
//! - `tokio`: the plain way: tokio's multi-thread runtime with `T` workers, `read_exact`
//!   of the header, then `read_exact` of the body (two reads, like the report's asio code),
//!   one `write_all` of header + body.
//! - `asio`: `bench/cpp/pingpong_asio.cpp`, standalone asio from Debian: `async_read` of
//!   the header, then of the body; `T` threads, one `io_context` each.

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, FramedRead, FramedWrite};
use y3_transport::PlainWrite;

/// Header length: `u32 body_size`, `u32 packet_count`, big-endian.
pub const HEADER_LEN: usize = 8;
/// Body size of the first message.
pub const FIRST_BODY: u32 = 100;
/// The report's total count per session.
pub const TOTAL_COUNT: u32 = 8192;
/// Read buffer of the y3 path.
pub const READ_BUFFER: usize = y3_transport::READ_BUFFER;

/// One message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Bytes of body after the header.
    pub body_size: u32,
    /// 1 for the first message of a session, then one more per message.
    pub packet_count: u32,
}

impl Header {
    /// The first message of a session.
    pub const FIRST: Header = Header {
        body_size: FIRST_BODY,
        packet_count: 1,
    };

    /// Parses the 8 header bytes.
    pub fn parse(b: [u8; HEADER_LEN]) -> Header {
        Header {
            body_size: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            packet_count: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// The 8 header bytes.
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&self.body_size.to_be_bytes());
        b[4..].copy_from_slice(&self.packet_count.to_be_bytes());
        b
    }
}

/// What a side does with a message it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send this reply and wait for the next message.
    Reply(Header),
    /// Send this reply, the session's last message.
    Last(Header),
    /// The message was the session's last: send nothing.
    Done,
}

/// The protocol: the answer to `received` in a session of `total` messages. The body grows
/// by one byte on every second message: message `k` (1-based) has `100 + (k - 1) / 2` bytes.
pub fn reply(received: Header, total: u32) -> Step {
    let n = received.packet_count;
    if n >= total {
        return Step::Done;
    }
    let next = Header {
        packet_count: n + 1,
        body_size: received.body_size + u32::from(n.is_multiple_of(2)),
    };
    if next.packet_count == total {
        Step::Last(next)
    } else {
        Step::Reply(next)
    }
}

/// Body size of message `k` (1-based) in every session.
pub fn body_size_of(k: u32) -> u32 {
    FIRST_BODY + (k - 1) / 2
}

/// A decoded message: its header and its body (a zero-copy slice of the read buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The header.
    pub header: Header,
    /// `header.body_size` bytes.
    pub body: Bytes,
}

/// Errors of [`PingPongCodec`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A header declared a body above the codec's limit.
    #[error("declared body {declared} exceeds limit {limit}")]
    TooLong {
        /// The declared body size.
        declared: u32,
        /// The limit.
        limit: u32,
    },
    /// The stream ended inside a message.
    #[error("stream ended inside a message: {buffered} bytes buffered")]
    Truncated {
        /// Bytes left over.
        buffered: usize,
    },
    /// Socket error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The ping-pong message codec, written like `y3_transport::FrameCodec`: the declared body
/// is checked against the limit from the header alone; a complete message is split off the
/// read buffer without copying; an incomplete one reserves at most 64 KiB ahead; an empty
/// buffer is rewound (`y3_transport::codec::rewind`).
#[derive(Debug, Clone, Copy)]
pub struct PingPongCodec {
    max_body: u32,
}

impl Default for PingPongCodec {
    fn default() -> Self {
        PingPongCodec { max_body: 1 << 20 }
    }
}

impl PingPongCodec {
    /// A codec refusing bodies above `max_body` bytes.
    pub fn new(max_body: u32) -> PingPongCodec {
        PingPongCodec { max_body }
    }
}

impl Decoder for PingPongCodec {
    type Item = Message;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        if src.is_empty() {
            y3_transport::codec::rewind(src);
            return Ok(None);
        }
        let Some(head) = src.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let mut b = [0u8; HEADER_LEN];
        b.copy_from_slice(head);
        let header = Header::parse(b);
        if header.body_size > self.max_body {
            return Err(CodecError::TooLong {
                declared: header.body_size,
                limit: self.max_body,
            });
        }
        let total = HEADER_LEN + header.body_size as usize;
        if src.len() < total {
            src.reserve((total - src.len()).min(READ_BUFFER));
            return Ok(None);
        }
        let mut frame = src.split_to(total);
        let body = frame.split_off(HEADER_LEN).freeze();
        Ok(Some(Message { header, body }))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        match self.decode(src)? {
            Some(m) => Ok(Some(m)),
            None if src.is_empty() => Ok(None),
            None => Err(CodecError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

/// Encodes a header and `body_size` filler bytes.
impl Encoder<Header> for PingPongCodec {
    type Error = CodecError;

    fn encode(&mut self, header: Header, dst: &mut BytesMut) -> Result<(), CodecError> {
        if dst.is_empty() {
            y3_transport::codec::rewind(dst);
        }
        dst.reserve(HEADER_LEN + header.body_size as usize);
        dst.put_slice(&header.to_bytes());
        dst.put_bytes(b'p', header.body_size as usize);
        Ok(())
    }
}

/// The Rust implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    /// [`PingPongCodec`] under `FramedRead`/`FramedWrite`, one one-worker runtime per
    /// thread.
    Y3,
    /// `read_exact` header, `read_exact` body on tokio's multi-thread runtime.
    Tokio,
}

impl Impl {
    /// The row name.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Y3 => "y3-transport",
            Impl::Tokio => "tokio",
        }
    }

    /// By row name.
    pub fn from_name(name: &str) -> Option<Impl> {
        [Impl::Y3, Impl::Tokio]
            .into_iter()
            .find(|i| i.name() == name)
    }
}

/// What a client prints as `result {json}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    /// From the first message to the last session's end.
    pub seconds: f64,
    /// Sessions completed.
    pub sessions: usize,
    /// Messages exchanged (both directions).
    pub messages: u64,
}

/// One y3 session; returns the last packet count (the total when complete).
async fn y3_session(stream: TcpStream, total: u32, client: bool) -> Result<u32> {
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let mut reader = FramedRead::with_capacity(r, PingPongCodec::default(), READ_BUFFER);
    let mut writer = FramedWrite::new(PlainWrite::new(w), PingPongCodec::default());
    if client {
        writer.send(Header::FIRST).await?;
    }
    let mut last = 0;
    while let Some(msg) = reader.next().await {
        let msg = msg?;
        ensure!(
            msg.body.len() == msg.header.body_size as usize,
            "body length"
        );
        last = msg.header.packet_count;
        match reply(msg.header, total) {
            Step::Done => break,
            Step::Reply(h) => writer.send(h).await?,
            Step::Last(h) => {
                writer.send(h).await?;
                last = h.packet_count;
                if client {
                    break;
                }
            }
        }
    }
    Ok(last)
}

/// One plain-tokio session: header and body in two reads.
async fn tokio_session(mut stream: TcpStream, total: u32, client: bool) -> Result<u32> {
    stream.set_nodelay(true)?;
    let mut out = Vec::with_capacity(HEADER_LEN + 8192);
    let mut body = Vec::with_capacity(8192);
    async fn write(stream: &mut TcpStream, out: &mut Vec<u8>, h: Header) -> std::io::Result<()> {
        out.clear();
        out.extend_from_slice(&h.to_bytes());
        out.resize(HEADER_LEN + h.body_size as usize, b'p');
        stream.write_all(out).await
    }
    if client {
        write(&mut stream, &mut out, Header::FIRST).await?;
    }
    let mut last = 0;
    let mut head = [0u8; HEADER_LEN];
    loop {
        match stream.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let h = Header::parse(head);
        ensure!(h.body_size <= 1 << 20, "body too long");
        body.resize(h.body_size as usize, 0);
        stream.read_exact(&mut body).await?;
        last = h.packet_count;
        match reply(h, total) {
            Step::Done => break,
            Step::Reply(h) => write(&mut stream, &mut out, h).await?,
            Step::Last(h) => {
                write(&mut stream, &mut out, h).await?;
                last = h.packet_count;
                if client {
                    break;
                }
            }
        }
    }
    Ok(last)
}

async fn session(imp: Impl, stream: TcpStream, total: u32, client: bool) -> Result<u32> {
    match imp {
        Impl::Y3 => y3_session(stream, total, client).await,
        Impl::Tokio => tokio_session(stream, total, client).await,
    }
}

/// The runtime of one y3 thread: tokio's scheduler with one worker. A current-thread
/// runtime serves woken sessions strictly in FIFO order, so at 10 000 sessions every reply
/// waited a full pass over all of them, past the peer's delayed-ACK timer: 1.99 TCP
/// segments per message instead of 1.09, and 14% more time than plain tokio. The worker's
/// LIFO slot answers the session just woken first.
fn thread_runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

/// Runs a server of `imp` with `threads` threads on `addr` until the process ends; calls
/// `ready` with the bound address once it accepts.
///
/// # Errors
/// Bind failures.
pub fn serve(
    imp: Impl,
    addr: SocketAddr,
    threads: usize,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    let threads = threads.max(1);
    let total = u32::MAX;
    match imp {
        Impl::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = crate::net::listen(addr)?;
                ready(listener.local_addr()?);
                loop {
                    let (stream, _) = listener.accept().await?;
                    tokio::spawn(async move {
                        let _ = session(imp, stream, total, false).await;
                    });
                }
            })
        }
        Impl::Y3 => {
            // One acceptor; each worker thread runs its own one-worker runtime and gets
            // the accepted connections round-robin.
            let mut workers = Vec::new();
            for _ in 0..threads {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<std::net::TcpStream>();
                std::thread::spawn(move || {
                    let rt = thread_runtime().expect("runtime");
                    rt.block_on(async move {
                        while let Some(s) = rx.recv().await {
                            if let Ok(stream) = TcpStream::from_std(s) {
                                tokio::spawn(session(imp, stream, total, false));
                            }
                        }
                    });
                });
                workers.push(tx);
            }
            let rt = thread_runtime()?;
            rt.block_on(async move {
                let listener = crate::net::listen(addr)?;
                ready(listener.local_addr()?);
                let mut next = 0;
                loop {
                    let (stream, _) = listener.accept().await?;
                    let s = stream.into_std()?;
                    workers[next % workers.len()]
                        .send(s)
                        .map_err(|_| anyhow::anyhow!("worker gone"))?;
                    next += 1;
                }
            })
        }
    }
}

fn check_sessions(results: Vec<Result<u32>>, total: u32) -> Result<usize> {
    let mut done = 0;
    for r in results {
        let last = r?;
        ensure!(last == total, "a session ended at packet {last} of {total}");
        done += 1;
    }
    Ok(done)
}

/// Runs the client of `imp`: opens `sessions` sessions to `addr` (not timed), then times
/// them all to completion; gives up after `limit`.
///
/// # Errors
/// Connection errors, a session ending early, or the time limit.
pub fn client(
    imp: Impl,
    addr: SocketAddr,
    threads: usize,
    sessions: usize,
    total: u32,
    limit: Duration,
) -> Result<ClientReport> {
    ensure!(total >= 2, "total count must be at least 2");
    let threads = threads.max(1);
    let seconds = match imp {
        Impl::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let mut streams = Vec::with_capacity(sessions);
                for _ in 0..sessions {
                    streams.push(TcpStream::connect(addr).await?);
                }
                let start = Instant::now();
                let mut set = tokio::task::JoinSet::new();
                for s in streams {
                    set.spawn(session(imp, s, total, true));
                }
                let mut results = Vec::with_capacity(sessions);
                let all = async {
                    while let Some(r) = set.join_next().await {
                        results.push(r.map_err(anyhow::Error::from).and_then(|r| r));
                    }
                };
                tokio::time::timeout(limit, all)
                    .await
                    .context("time limit reached")?;
                let seconds = start.elapsed().as_secs_f64();
                check_sessions(results, total)?;
                anyhow::Ok(seconds)
            })?
        }
        Impl::Y3 => {
            let barrier = Arc::new(Barrier::new(threads + 1));
            let mut handles = Vec::new();
            for t in 0..threads {
                let n = sessions / threads + usize::from(t < sessions % threads);
                let barrier = Arc::clone(&barrier);
                handles.push(std::thread::spawn(move || -> Result<usize> {
                    let rt = thread_runtime()?;
                    rt.block_on(async move {
                        let mut streams = Vec::with_capacity(n);
                        let mut failed = None;
                        for _ in 0..n {
                            match TcpStream::connect(addr).await {
                                Ok(s) => streams.push(s),
                                Err(e) => {
                                    failed = Some(e);
                                    break;
                                }
                            }
                        }
                        barrier.wait();
                        if let Some(e) = failed {
                            return Err(e.into());
                        }
                        let mut set = tokio::task::JoinSet::new();
                        for s in streams {
                            set.spawn(session(imp, s, total, true));
                        }
                        let mut results = Vec::with_capacity(n);
                        let all = async {
                            while let Some(r) = set.join_next().await {
                                results.push(r.map_err(anyhow::Error::from).and_then(|r| r));
                            }
                        };
                        tokio::time::timeout(limit, all)
                            .await
                            .context("time limit reached")?;
                        check_sessions(results, total)
                    })
                }));
            }
            barrier.wait();
            let start = Instant::now();
            let mut done = 0;
            for h in handles {
                done += h
                    .join()
                    .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
            }
            ensure!(done == sessions, "{done} of {sessions} sessions completed");
            start.elapsed().as_secs_f64()
        }
    };
    Ok(ClientReport {
        seconds,
        sessions,
        messages: sessions as u64 * u64::from(total),
    })
}

/// Checks the client's report against the workload.
///
/// # Errors
/// A report for another workload.
pub fn verify(report: &ClientReport, sessions: usize, total: u32) -> Result<()> {
    if report.sessions != sessions || report.messages != sessions as u64 * u64::from(total) {
        bail!(
            "client reported {} sessions / {} messages, expected {sessions} / {}",
            report.sessions,
            report.messages,
            sessions as u64 * u64::from(total)
        );
    }
    ensure!(
        report.seconds.is_finite() && report.seconds > 0.0,
        "bad time"
    );
    Ok(())
}

/// Options of the ping-pong suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Session counts (the report: 100, 1000, 10000).
    pub sessions: Vec<usize>,
    /// Thread counts of each side (the report: 1 .. cores).
    pub threads: Vec<usize>,
    /// Messages per session (the report: 8192).
    pub total: u32,
    /// Timed runs per row; the median is reported.
    pub runs: usize,
    /// Only implementations whose name contains one of these.
    pub only: Vec<String>,
    /// Time limit of one client run.
    pub limit: Duration,
    /// `--quick`.
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
    /// The binaries.
    pub programs: crate::net::Programs,
}

/// The implementations of this suite, in display order.
pub const IMPLS: [&str; 3] = ["y3-transport", "tokio", "asio"];

fn start_one(
    programs: &crate::net::Programs,
    imp: &str,
    threads: usize,
) -> Result<(crate::net::proc::Child, SocketAddr)> {
    if imp == "asio" {
        let asio = programs.asio.as_ref().context("asio program not built")?;
        let args = vec!["server".to_string(), threads.to_string()];
        let mut child = crate::net::proc::Child::spawn("asio server", asio, &args, None)?;
        let addr = child
            .expect("listening ", Duration::from_secs(30))?
            .parse()?;
        Ok((child, addr))
    } else {
        crate::net::start_server(programs, &format!("pingpong-{imp}"), threads, &[], None)
    }
}

/// One timed run: a fresh server and client of `imp`; returns the client's seconds.
///
/// # Errors
/// A process failing, the time limit, or a wrong report.
pub fn run_once(
    programs: &crate::net::Programs,
    imp: &str,
    sessions: usize,
    threads: usize,
    total: u32,
    limit: Duration,
) -> Result<f64> {
    let (mut server, addr) = start_one(programs, imp, threads)?;
    let mut client = if imp == "asio" {
        let asio = programs.asio.as_ref().context("asio program not built")?;
        let args: Vec<String> = vec![
            "client".into(),
            addr.to_string(),
            threads.to_string(),
            sessions.to_string(),
            total.to_string(),
            limit.as_secs().max(1).to_string(),
        ];
        crate::net::proc::Child::spawn("asio client", asio, &args, None)?
    } else {
        let args: Vec<String> = vec![
            format!("pingpong-{imp}"),
            "--addr".into(),
            addr.to_string(),
            "--threads".into(),
            threads.to_string(),
            "--sessions".into(),
            sessions.to_string(),
            "--total".into(),
            total.to_string(),
            "--limit-s".into(),
            limit.as_secs().max(1).to_string(),
        ];
        programs.spawn_lab(&format!("{imp} client"), "client", &args, None)?
    };
    // Connecting 10 000 sessions is not timed but takes a while: allow a minute more.
    let line = client
        .expect("result ", limit + Duration::from_secs(60))
        .with_context(|| format!("{imp} server stderr: {}", server.stderr_tail()))?;
    let report: ClientReport = serde_json::from_str(&line).context("client result")?;
    verify(&report, sessions, total)?;
    client.wait(Duration::from_secs(10))?;
    server.kill();
    Ok(report.seconds)
}

/// Runs the suite: for each session count × thread count, `runs` rounds in which every
/// implementation takes one run in turn (a noisy spell hits them alike).
///
/// # Errors
/// Only setup errors; a failing row becomes a note.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<crate::record::Results> {
    use crate::measure::median;
    use crate::record::{Dim, Metric, Record, Results};
    let mut notes = Vec::new();
    let mut impls: Vec<&str> = crate::net::wanted(&IMPLS, &opts.only);
    if opts.programs.asio.is_none() && impls.contains(&"asio") {
        impls.retain(|i| *i != "asio");
        notes.push(
            "asio skipped: bench/cpp/build/pingpong_asio not built (run bench/cpp/build.sh)".into(),
        );
    }
    let mut versions = vec![
        (
            "tokio".to_string(),
            crate::net::report::lock_version("tokio"),
        ),
        (
            "tokio-util".to_string(),
            crate::net::report::lock_version("tokio-util"),
        ),
    ];
    if let Some(asio) = opts
        .programs
        .asio
        .as_ref()
        .filter(|_| impls.contains(&"asio"))
    {
        versions.push((
            "asio".into(),
            crate::net::proc::version_of(asio, &["version"]).unwrap_or_default(),
        ));
    }
    let steps = opts.sessions.len() * opts.threads.len() * opts.runs * impls.len();
    bar.set_length(steps as u64);
    let mut records = Vec::new();
    for &sessions in &opts.sessions {
        for &threads in &opts.threads {
            let label = format!("{sessions} sessions, {threads} threads");
            let times = crate::net::rounds(
                "pingpong",
                &label,
                &impls,
                opts.runs,
                bar,
                &mut notes,
                |imp| {
                    run_once(
                        &opts.programs,
                        imp,
                        sessions,
                        threads,
                        opts.total,
                        opts.limit,
                    )
                },
            );
            for (i, imp) in impls.iter().enumerate() {
                if times[i].is_empty() {
                    continue;
                }
                let (seconds, range) = median(&times[i]);
                let messages = sessions as u64 * u64::from(opts.total);
                records.push(
                    Record::new("pingpong", imp, &format!("{sessions} sessions"))
                        .dim(Dim::Sessions, sessions)
                        .dim(Dim::Threads, threads)
                        .dim(Dim::Payload, FIRST_BODY as usize)
                        .metric(Metric::Seconds, seconds)
                        .metric(Metric::Messages, (messages) as f64)
                        .metric(Metric::MsgPerS, messages as f64 / seconds)
                        .with_spread(times[i].len(), Metric::Seconds, range),
                );
            }
        }
    }
    Ok(Results::of(
        crate::net::meta(
            "pingpong",
            &opts.command,
            opts.quick,
            "none: client and server processes share every core, as in the report \
                      (both on one machine)"
                .into(),
            versions,
        ),
        records,
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_runs_to_the_total_with_growing_bodies() {
        let total = 8192;
        let mut msg = Header::FIRST;
        let mut sent = vec![msg];
        loop {
            match reply(msg, total) {
                Step::Reply(h) => {
                    sent.push(h);
                    msg = h;
                }
                Step::Last(h) => {
                    sent.push(h);
                    assert_eq!(reply(h, total), Step::Done);
                    break;
                }
                Step::Done => unreachable!("the last message is announced"),
            }
        }
        assert_eq!(sent.len(), total as usize);
        for (i, h) in sent.iter().enumerate() {
            let k = i as u32 + 1;
            assert_eq!(h.packet_count, k);
            assert_eq!(h.body_size, body_size_of(k), "message {k}");
        }
        // 100, 100, 101, 101, 102, ...: one byte more every second message.
        let sizes: Vec<u32> = sent[..5].iter().map(|h| h.body_size).collect();
        assert_eq!(sizes, [100, 100, 101, 101, 102]);
        assert_eq!(sent.last().unwrap().body_size, 100 + 8191 / 2);
        // Even total: the server sends the last message, the client receives it.
        assert_eq!(sent.last().unwrap().packet_count % 2, 0);
    }

    #[test]
    fn header_is_network_order() {
        let h = Header {
            body_size: 0x0102_0304,
            packet_count: 7,
        };
        assert_eq!(h.to_bytes(), [1, 2, 3, 4, 0, 0, 0, 7]);
        assert_eq!(Header::parse(h.to_bytes()), h);
    }

    #[test]
    fn codec_decodes_every_split_and_batch() {
        let mut codec = PingPongCodec::default();
        let mut wire = BytesMut::new();
        let headers = [
            Header::FIRST,
            Header {
                body_size: 0,
                packet_count: 2,
            },
            Header {
                body_size: 101,
                packet_count: 3,
            },
        ];
        for h in headers {
            codec.encode(h, &mut wire).unwrap();
        }
        assert_eq!(wire.len(), 3 * HEADER_LEN + 201);
        for split in 0..=wire.len() {
            let mut buf = BytesMut::new();
            let mut out = Vec::new();
            for chunk in [&wire[..split], &wire[split..]] {
                buf.extend_from_slice(chunk);
                while let Some(m) = codec.decode(&mut buf).unwrap() {
                    assert_eq!(m.body.len(), m.header.body_size as usize);
                    out.push(m.header);
                }
            }
            assert!(codec.decode_eof(&mut buf).unwrap().is_none());
            assert_eq!(out, headers, "split at {split}");
        }
        let mut partial = BytesMut::from(&wire[..HEADER_LEN + 3]);
        assert!(codec.decode(&mut partial).unwrap().is_none());
        assert!(matches!(
            codec.decode_eof(&mut partial),
            Err(CodecError::Truncated { buffered: 11 })
        ));
    }

    #[test]
    fn codec_refuses_a_huge_body_from_the_header() {
        let mut codec = PingPongCodec::new(1000);
        let mut buf = BytesMut::from(
            &Header {
                body_size: 1001,
                packet_count: 1,
            }
            .to_bytes()[..],
        );
        assert!(matches!(
            codec.decode(&mut buf),
            Err(CodecError::TooLong {
                declared: 1001,
                limit: 1000
            })
        ));
    }

    #[test]
    fn both_rust_implementations_complete_a_small_run() {
        for imp in [Impl::Y3, Impl::Tokio] {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let addr = "127.0.0.1:0".parse().unwrap();
                let _ = serve(imp, addr, 2, |a| tx.send(a).unwrap());
            });
            let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            let report = client(imp, addr, 2, 5, 64, Duration::from_secs(20)).unwrap();
            verify(&report, 5, 64).unwrap();
            assert!(verify(&report, 6, 64).is_err());
        }
    }
}
