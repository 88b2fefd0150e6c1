//! The echo suite of the monoio-vs-tokio-vs-glommio report.
//!
//! A load client opens C connections; each sends a fixed-size message and waits for its
//! echo, repeatedly, for a fixed time after a warm-up. Reported: QPS (round trips per
//! second), p50/p99/p999 round-trip latency, and the server's CPU over the timed window.
//! The server is pinned to one set of cores and the client to another (`taskset`).
//!
//! The message is one y3 data frame of exactly the message size ([`message`]), so the y3
//! servers do real transport work: `echo-y3-tokio` decodes each frame with
//! `y3_transport::FrameCodec` under `FramedRead` and re-encodes it through `FramedWrite`
//! (every complete frame of a read is fed, then one flush), and `echo-y3-monoio` runs the
//! same codec over monoio's owned-buffer reads and writes (io_uring, with the legacy epoll
//! driver as fallback). The plain servers copy the bytes back: `echo-tokio` (tokio
//! read/write_all) and `echo-monoio` / `echo-monoio-legacy` (monoio's own echo loop).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};
use y3_transport::{Connection, Data, Frame, FrameCodec, TransportKind};

use crate::measure::median;
use crate::record::{Dim, Metric, Record, Results};

/// Read buffer of every server (as `y3_transport::stream::READ_BUFFER`).
pub const READ_BUFFER: usize = 64 * 1024;

/// The servers, in display order.
pub const IMPLS: [&str; 5] = ["y3-tokio", "tokio", "y3-monoio", "monoio", "monoio-legacy"];

/// One y3 data frame of exactly `size` encoded bytes.
///
/// # Errors
/// Sizes no frame can have (below the smallest data frame).
pub fn message(size: usize) -> Result<Bytes> {
    let codec = FrameCodec::default();
    for payload in (0..=size).rev() {
        let frame = Frame::Data(Data::new(0x10, vec![b'e'; payload]));
        if frame.encoded_len() == size {
            let mut buf = BytesMut::new();
            let mut c = codec;
            c.encode(frame, &mut buf)?;
            return Ok(buf.freeze());
        }
        if frame.encoded_len() < size {
            break;
        }
    }
    anyhow::bail!("no y3 data frame is exactly {size} bytes")
}

fn runtime_current() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// One y3 echo connection, framed exactly as `y3_transport::tcp` frames a connection
/// ([`Connection::new`]): decode every complete frame of a read, feed its echo, flush once.
async fn y3_conn(stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    let (r, w) = stream.into_split();
    let Connection {
        mut reader,
        mut writer,
        ..
    } = Connection::new(r, w, FrameCodec::default(), TransportKind::Tcp, None);
    while let Some(frame) = reader.next().await {
        writer.feed(frame?).await?;
        let mut codec = *reader.decoder();
        while let Some(frame) = codec.decode(reader.read_buffer_mut())? {
            writer.feed(frame).await?;
        }
        writer.flush().await?;
    }
    Ok(())
}

/// One plain tokio echo connection.
async fn tokio_conn(mut stream: TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; READ_BUFFER];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).await?;
    }
}

/// Runs a tokio echo server (`y3` or plain) with `threads` threads until the process ends.
///
/// # Errors
/// Bind failures.
pub fn serve_tokio(
    y3: bool,
    addr: SocketAddr,
    threads: usize,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    let threads = threads.max(1);
    if threads == 1 {
        let rt = runtime_current()?;
        return rt.block_on(async move {
            let listener = crate::net::listen(addr)?;
            ready(listener.local_addr()?);
            loop {
                let (stream, _) = listener.accept().await?;
                if y3 {
                    tokio::spawn(y3_conn(stream));
                } else {
                    tokio::spawn(tokio_conn(stream));
                }
            }
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = crate::net::listen(addr)?;
        ready(listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            if y3 {
                tokio::spawn(y3_conn(stream));
            } else {
                tokio::spawn(tokio_conn(stream));
            }
        }
    })
}

#[cfg(feature = "net-monoio")]
mod mono {
    //! The monoio servers: one runtime per thread, `SO_REUSEPORT` listeners on one port.

    use std::net::SocketAddr;

    use anyhow::Result;
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    use monoio::net::{ListenerOpts, TcpListener, TcpStream};
    use tokio_util::bytes::BytesMut;
    use tokio_util::codec::{Decoder, Encoder};
    use y3_transport::FrameCodec;

    use super::READ_BUFFER;

    /// Which monoio driver.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Driver {
        /// io_uring when the kernel has it, else epoll.
        Fusion,
        /// epoll only.
        Legacy,
    }

    async fn plain(mut stream: TcpStream) -> Result<()> {
        stream.set_nodelay(true)?;
        let mut buf = vec![0u8; READ_BUFFER];
        loop {
            let (res, b) = stream.read(buf).await;
            let n = res?;
            if n == 0 {
                return Ok(());
            }
            let (res, b) = stream.write_all(monoio::buf::IoBuf::slice(b, 0..n)).await;
            res?;
            buf = b.into_inner();
        }
    }

    async fn y3(mut stream: TcpStream) -> Result<()> {
        stream.set_nodelay(true)?;
        let mut codec = FrameCodec::default();
        let mut buf = vec![0u8; READ_BUFFER];
        let mut input = BytesMut::with_capacity(READ_BUFFER);
        let mut output = Vec::with_capacity(READ_BUFFER);
        let mut out = BytesMut::with_capacity(READ_BUFFER);
        loop {
            let (res, b) = stream.read(buf).await;
            buf = b;
            let n = res?;
            if n == 0 {
                return Ok(());
            }
            input.extend_from_slice(&buf[..n]);
            while let Some(frame) = codec.decode(&mut input)? {
                codec.encode(frame, &mut out)?;
            }
            if !out.is_empty() {
                output.clear();
                output.extend_from_slice(&out);
                out.clear();
                let (res, o) = stream.write_all(output).await;
                output = o;
                res?;
            }
        }
    }

    async fn accept_loop(listener: TcpListener, y3_codec: bool) {
        while let Ok((stream, _)) = listener.accept().await {
            if y3_codec {
                monoio::spawn(y3(stream));
            } else {
                monoio::spawn(plain(stream));
            }
        }
    }

    /// Binds `addr` with `SO_REUSEPORT` on this thread's runtime, reports the bound address,
    /// then accepts until the process ends.
    async fn bind_and_serve(
        addr: SocketAddr,
        y3_codec: bool,
        bound: std::sync::mpsc::Sender<std::io::Result<SocketAddr>>,
    ) {
        let opts = ListenerOpts::default().reuse_port(true).backlog(8192);
        match TcpListener::bind_with_config(addr, &opts) {
            Ok(listener) => {
                let _ = bound.send(listener.local_addr());
                accept_loop(listener, y3_codec).await;
            }
            Err(e) => {
                let _ = bound.send(Err(e));
            }
        }
    }

    fn run_on(
        driver: Driver,
        addr: SocketAddr,
        y3_codec: bool,
        bound: std::sync::mpsc::Sender<std::io::Result<SocketAddr>>,
    ) -> Result<()> {
        match driver {
            Driver::Fusion => {
                let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new()
                    .enable_timer()
                    .build()?;
                rt.block_on(bind_and_serve(addr, y3_codec, bound));
            }
            Driver::Legacy => {
                let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                    .enable_timer()
                    .build()?;
                rt.block_on(bind_and_serve(addr, y3_codec, bound));
            }
        }
        Ok(())
    }

    /// Runs a monoio echo server until the process ends: one runtime per thread, each with
    /// its own `SO_REUSEPORT` listener on the first one's port.
    pub fn serve(
        driver: Driver,
        y3_codec: bool,
        addr: SocketAddr,
        threads: usize,
        ready: impl FnOnce(SocketAddr),
    ) -> Result<()> {
        let mut handles = Vec::new();
        let mut port = addr;
        for i in 0..threads.max(1) {
            let (tx, rx) = std::sync::mpsc::channel();
            handles.push(std::thread::spawn(move || {
                run_on(driver, port, y3_codec, tx)
            }));
            let got = rx
                .recv()
                .map_err(|_| anyhow::anyhow!("monoio thread {i} ended before binding"))??;
            port = got;
        }
        ready(port);
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("monoio thread panicked"))??;
        }
        Ok(())
    }

    /// Whether io_uring is usable here.
    pub fn uring() -> bool {
        monoio::utils::detect_uring()
    }
}

/// Runs echo server `imp` until the process ends.
///
/// # Errors
/// Unknown or not compiled-in servers, bind failures.
pub fn serve(
    imp: &str,
    addr: SocketAddr,
    threads: usize,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    match imp {
        "y3-tokio" => serve_tokio(true, addr, threads, ready),
        "tokio" => serve_tokio(false, addr, threads, ready),
        #[cfg(feature = "net-monoio")]
        "y3-monoio" => mono::serve(mono::Driver::Fusion, true, addr, threads, ready),
        #[cfg(feature = "net-monoio")]
        "monoio" => mono::serve(mono::Driver::Fusion, false, addr, threads, ready),
        #[cfg(feature = "net-monoio")]
        "monoio-legacy" => mono::serve(mono::Driver::Legacy, false, addr, threads, ready),
        other => {
            anyhow::bail!("echo server {other:?} unknown or not compiled in (feature net-monoio)")
        }
    }
}

/// The load of one client run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Connections.
    pub conns: usize,
    /// Message size in bytes.
    pub size: usize,
    /// Timed seconds.
    pub seconds: f64,
    /// Warm-up seconds before the timed window.
    pub warmup: f64,
}

/// What the client prints as `result {json}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EchoReport {
    /// Round trips completed inside the timed window.
    pub requests: u64,
    /// The timed window, seconds.
    pub seconds: f64,
    /// Round-trip latency percentiles, µs.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// See `p50_us`.
    pub p999_us: f64,
}

impl EchoReport {
    /// Round trips per second.
    pub fn qps(&self) -> f64 {
        self.requests as f64 / self.seconds
    }
}

/// The load client: `conns` connections on one current-thread runtime; `measuring` is
/// called when the timed window opens.
///
/// # Errors
/// Connection errors, a wrong echo, or the time limit.
pub fn client(
    addr: SocketAddr,
    load: &Load,
    limit: Duration,
    measuring: impl FnOnce() + Send + 'static,
) -> Result<EchoReport> {
    ensure!(load.conns > 0 && load.seconds > 0.0, "empty load");
    let msg = message(load.size)?;
    let load = *load;
    let rt = runtime_current()?;
    rt.block_on(async move {
        let mut streams = Vec::with_capacity(load.conns);
        for _ in 0..load.conns {
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            streams.push(s);
        }
        let start = Instant::now();
        let measure_at = start + Duration::from_secs_f64(load.warmup.max(0.0));
        let end_at = measure_at + Duration::from_secs_f64(load.seconds);
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_at.into()).await;
            measuring();
        });
        let mut set = tokio::task::JoinSet::new();
        for mut s in streams {
            let msg = msg.clone();
            set.spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
                let mut buf = vec![0u8; msg.len()];
                let mut count = 0u64;
                loop {
                    let t0 = Instant::now();
                    if t0 >= end_at {
                        break;
                    }
                    s.write_all(&msg).await?;
                    s.read_exact(&mut buf).await?;
                    let t1 = Instant::now();
                    if t0 >= measure_at && t1 <= end_at {
                        hist.saturating_record((t1 - t0).as_nanos() as u64);
                        count += 1;
                    }
                }
                ensure!(buf[..] == msg[..], "echo differs from the message");
                anyhow::Ok((count, hist))
            });
        }
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
        let mut requests = 0;
        let all = async {
            while let Some(r) = set.join_next().await {
                let (count, h) = r??;
                requests += count;
                hist.add(h)?;
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(limit, all)
            .await
            .context("time limit reached")??;
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
        Ok(EchoReport {
            requests,
            seconds: load.seconds,
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
        })
    })
}

/// monoio's version, and a note on its driver.
#[cfg(feature = "net-monoio")]
fn monoio_info(notes: &mut Vec<String>) -> Vec<(String, String)> {
    notes.push(if mono::uring() {
        "io_uring available: y3-monoio and monoio ran on io_uring (monoio-legacy on epoll)".into()
    } else {
        "io_uring unavailable: y3-monoio and monoio fell back to epoll".into()
    });
    vec![("monoio".into(), crate::net::report::lock_version("monoio"))]
}

#[cfg(not(feature = "net-monoio"))]
fn monoio_info(_notes: &mut Vec<String>) -> Vec<(String, String)> {
    Vec::new()
}

/// Options of the echo suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Connection counts (the report: 80, 250).
    pub conns: Vec<usize>,
    /// Message sizes (the report: 100 B, 1 KiB).
    pub sizes: Vec<usize>,
    /// The peak sweep's connection counts, when asked for (at the first size).
    pub peak: Option<Vec<usize>>,
    /// Timed seconds per point.
    pub seconds: f64,
    /// Warm-up seconds per point.
    pub warmup: f64,
    /// Runs per point; every metric is the median over them.
    pub runs: usize,
    /// Server threads.
    pub server_threads: usize,
    /// `taskset` core list of the server.
    pub server_cpus: String,
    /// `taskset` core list of the client.
    pub client_cpus: String,
    /// Only implementations whose name contains one of these.
    pub only: Vec<String>,
    /// `--quick`.
    pub quick: bool,
    /// The command line.
    pub command: String,
    /// The binaries.
    pub programs: crate::net::Programs,
}

/// One point: a fresh server of `imp`, one client run; the report and the server's CPU %.
///
/// # Errors
/// A process failing or the time limit.
pub fn run_once(opts: &Options, imp: &str, conns: usize, size: usize) -> Result<(EchoReport, f64)> {
    let (mut server, addr) = crate::net::start_server(
        &opts.programs,
        &format!("echo-{imp}"),
        opts.server_threads,
        &[],
        Some(&opts.server_cpus),
    )?;
    let limit = Duration::from_secs_f64(opts.seconds + opts.warmup + 60.0);
    let args: Vec<String> = vec![
        "echo".into(),
        "--addr".into(),
        addr.to_string(),
        "--sessions".into(),
        conns.to_string(),
        "--size".into(),
        size.to_string(),
        "--seconds".into(),
        opts.seconds.to_string(),
        "--warmup".into(),
        opts.warmup.to_string(),
        "--limit-s".into(),
        limit.as_secs().to_string(),
    ];
    let mut client =
        opts.programs
            .spawn_lab("echo client", "client", &args, Some(&opts.client_cpus))?;
    client.expect("measuring", limit)?;
    let (cpu0, t0) = (server.cpu_seconds(), Instant::now());
    let line = client
        .expect("result ", limit)
        .with_context(|| format!("{imp} server stderr: {}", server.stderr_tail()))?;
    let (cpu1, t1) = (server.cpu_seconds(), Instant::now());
    let report: EchoReport = serde_json::from_str(&line)?;
    client.wait(Duration::from_secs(10))?;
    server.kill();
    ensure!(report.requests > 0, "no round trip completed");
    let cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) => (b - a) / (t1 - t0).as_secs_f64() * 100.0,
        _ => f64::NAN,
    };
    Ok((report, cpu))
}

/// The record of one server at one point: the median of each metric over `runs`.
fn echo_record(
    imp: &str,
    case: &str,
    conns: usize,
    size: usize,
    opts: &Options,
    runs: &[(EchoReport, f64)],
) -> Option<Record> {
    let first = runs.first()?;
    let med =
        |f: &dyn Fn(&(EchoReport, f64)) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let (qps, range) = med(&|r| r.0.qps());
    let cpu: Vec<f64> = runs.iter().map(|r| r.1).filter(|c| c.is_finite()).collect();
    Some(
        Record::new("echo", imp, case)
            .dim(Dim::Sessions, conns)
            .dim(Dim::Threads, opts.server_threads)
            .dim(Dim::Payload, size)
            .metric(Metric::Seconds, first.0.seconds)
            .metric(
                Metric::Messages,
                (med(&|r| r.0.requests as f64).0 as u64) as f64,
            )
            .metric(Metric::MsgPerS, qps)
            .metric_opt(Metric::P50Us, Some(med(&|r| r.0.p50_us).0))
            .metric_opt(Metric::P99Us, Some(med(&|r| r.0.p99_us).0))
            .metric_opt(Metric::P999Us, Some(med(&|r| r.0.p999_us).0))
            .metric_opt(
                Metric::ServerCpuPct,
                (!cpu.is_empty()).then(|| median(&cpu).0),
            )
            .with_spread(runs.len(), Metric::MsgPerS, range),
    )
}

/// Runs the suite: every size × connection count (then the peak sweep), each server in
/// turn on the same point.
///
/// # Errors
/// Setup errors only; failing points become notes.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    let mut notes = Vec::new();
    let mut impls: Vec<&str> = crate::net::wanted(&IMPLS, &opts.only);
    if !crate::net::MONOIO_ENABLED && impls.iter().any(|i| i.contains("monoio")) {
        impls.retain(|i| !i.contains("monoio"));
        notes.push("monoio servers skipped: built without the y3-lab feature net-monoio".into());
    }
    let mut versions = vec![(
        "tokio".to_string(),
        crate::net::report::lock_version("tokio"),
    )];
    if impls.iter().any(|i| i.contains("monoio")) {
        versions.extend(monoio_info(&mut notes));
    }
    if !crate::net::proc::has_taskset() {
        notes.push("taskset not found: server and client were not pinned".into());
    }
    let mut points: Vec<(String, usize, usize)> = Vec::new();
    for &size in &opts.sizes {
        for &c in &opts.conns {
            points.push((format!("{size} B"), c, size));
        }
    }
    if let (Some(peak), Some(&size)) = (&opts.peak, opts.sizes.first()) {
        for &c in peak {
            points.push((format!("peak {size} B"), c, size));
        }
    }
    let runs = opts.runs.max(1);
    bar.set_length((points.len() * impls.len() * runs) as u64);
    let mut records = Vec::new();
    for (case, conns, size) in &points {
        let label = format!("{case}, {conns} conns");
        let got = crate::net::rounds("echo", &label, &impls, runs, bar, &mut notes, |imp| {
            run_once(opts, imp, *conns, *size)
        });
        for (i, imp) in impls.iter().enumerate() {
            if let Some(record) = echo_record(imp, case, *conns, *size, opts, &got[i]) {
                records.push(record);
            }
        }
    }
    Ok(Results::of(
        crate::net::meta(
            "echo",
            &opts.command,
            opts.quick,
            format!(
                "server on core(s) {} ({} thread(s)), load client on core(s) {} (taskset)",
                opts.server_cpus, opts.server_threads, opts.client_cpus
            ),
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
    fn messages_are_single_frames_of_the_exact_size() {
        for size in [100, 1024, 16, 300] {
            let m = message(size).unwrap();
            assert_eq!(m.len(), size);
            let mut buf = BytesMut::from(&m[..]);
            let mut codec = FrameCodec::default();
            assert!(matches!(
                codec.decode(&mut buf).unwrap(),
                Some(Frame::Data(_))
            ));
            assert!(buf.is_empty());
        }
        assert!(message(2).is_err());
    }

    #[test]
    fn tokio_servers_echo_under_the_load_client() {
        for y3 in [true, false] {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = serve_tokio(y3, "127.0.0.1:0".parse().unwrap(), 1, |a| {
                    tx.send(a).unwrap()
                });
            });
            let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
            let load = Load {
                conns: 4,
                size: 100,
                seconds: 0.2,
                warmup: 0.05,
            };
            let (mtx, mrx) = std::sync::mpsc::channel();
            let r = client(addr, &load, Duration::from_secs(20), move || {
                mtx.send(()).unwrap();
            })
            .unwrap();
            assert!(mrx.try_recv().is_ok(), "measuring was announced");
            assert!(r.requests > 0 && r.p50_us > 0.0 && r.p99_us >= r.p50_us);
        }
    }
}
