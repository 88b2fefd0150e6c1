//! Content filters at the router (issue 18): one source → `y3 serve` → N functions, each
//! wanting 1/N of the frames (10% with the default 10), two ways in the same run:
//!
//! - `router-filter`: each function declares `0x00/0x01 == i and 0x00/0x20 == -1` in its
//!   handshake; the router evaluates it per frame and sends only the matches;
//! - `function-filter`: the router delivers every frame to every function, which evaluates
//!   the same filter with `y3::Filter` and throws the rest away;
//! - `nats-filter` (feature `net-nats`, a `nats-server` installed): the same payloads
//!   published on one NATS subject; every subscriber receives every message and evaluates
//!   the same filter (`y3::Filter`, compiled once per subscriber).
//!
//! Payload: the codec suite's C63 data set (node 0x00, keys 0x01..=0x3f) with key 0x01 the
//! selector `i % N` and key 0x02 the send time (8 bytes), about 220 bytes. The router (or
//! nats-server) runs as a child process (`y3-lab net server router-y3`), clients in the
//! lab's process: the source on a 2-worker runtime, the N functions together on their own
//! thread (a current-thread runtime). Per variant: msg/s at the source (first send until
//! every function has its share), router CPU per frame (the child's user + system time),
//! payload bytes delivered to the functions, the source's CPU per frame (the lab process's
//! CPU less the functions' thread), the functions' CPU per frame (that thread's CPU clock
//! over the receive loops: client I/O and filter evaluation), one-way p50/p99 of the
//! matching deliveries.
//!
//! Its records and report are the lab's (`net/report/filter.rs`): `--json`, `--from`,
//! `--docs` as every suite.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cpu_time::ThreadTime;
use hdrhistogram::Histogram;
use tokio_util::bytes::Bytes;
use y3::{Dialect, Filter, Item, Value};
use y3_transport::sdk::{ClientOptions, Sink, Source};
use y3_transport::Data;

use crate::data::value_for;
use crate::net::proc::Child;
use crate::net::Programs;
use crate::record::{Dim, Metric, Record, Results};

/// The data tag.
const TAG: u32 = 0x10;

/// Options of the filter suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Functions, each wanting 1/`functions` of the frames.
    pub functions: usize,
    /// Messages the source sends.
    pub messages: u64,
    /// The lab's programs.
    pub programs: Programs,
    /// `--quick`.
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
}

/// The filter of function `i`: two comparisons, the first selecting 1/N of the frames.
pub fn filter_of(i: usize) -> String {
    format!("0x00/0x01 == {i} and 0x00/0x20 == -1")
}

/// Payload templates, one per selector, and the offset of the 8 send-time bytes.
fn templates(n: usize) -> Vec<(Vec<u8>, usize)> {
    const MARK: [u8; 8] = *b"\xa5TIME\xa5\x5a\x5a";
    (0..n)
        .map(|i| {
            let children = (1..=63)
                .filter_map(|k| match k {
                    1 => Some(Item::new(1, Value::I64(i as i64))),
                    2 => Some(Item::new(2, Value::Bytes(MARK.to_vec()))),
                    // The data sets' values (never `Missing`, so every key is there).
                    k => value_for(k).y3().map(|v| Item::new(k, v)),
                })
                .collect();
            // Keys below 64, short values: the encoder cannot fail here.
            let bytes = Item::node(0, children)
                .to_vec(Dialect::Golang)
                .unwrap_or_default();
            let at = bytes.windows(8).position(|w| w == MARK).unwrap_or(0);
            (bytes, at)
        })
        .collect()
}

fn now_ns(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Runs the three variants, one record each (implementation: the variant); `nats-filter`
/// only with the `net-nats` feature and an installed `nats-server` (otherwise a note says
/// why it is missing).
///
/// # Errors
/// Router start, connection and timeout errors.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    bar.set_length(3);
    for variant in ["router-filter", "function-filter"] {
        bar.set_message(variant);
        rows.push(rt.block_on(run_variant(opts, variant))?);
        bar.inc(1);
    }
    if !crate::net::NATS_ENABLED {
        notes.push("nats-filter skipped: built without the y3-lab feature net-nats".into());
    } else if opts.programs.nats_server.is_none() {
        notes.push(format!(
            "nats-filter skipped: {}",
            crate::net::NATS_SERVER_MISSING
        ));
    } else {
        bar.set_message("nats-filter");
        rows.push(rt.block_on(run_variant(opts, "nats-filter"))?);
    }
    bar.inc(1);
    Ok(Results::of(
        crate::net::meta(
            "filter",
            &opts.command,
            opts.quick,
            format!(
                "none: the router (or nats-server) process and the lab's process (source on \
                 2 workers, the functions on one thread) share all {} cores",
                crate::measure::cores()
            ),
            Vec::new(),
        ),
        rows,
        notes,
    ))
}

/// The case of every filter row: functions and the filter of the first, in words.
pub fn case_of(functions: usize) -> String {
    format!("{functions} functions × 1/{functions}")
}

/// Where the subscribers and the source connect.
#[derive(Clone)]
enum Endpoint {
    /// The y3 router; `filter` asks it to filter (router-side).
    Y3 { addr: SocketAddr, filter: bool },
    /// A nats-server at this `nats://` URL.
    #[cfg(feature = "net-nats")]
    Nats(String),
}

/// A function's subscription.
enum FnSub {
    Y3(Box<Sink>),
    #[cfg(feature = "net-nats")]
    Nats {
        sub: async_nats::Subscriber,
        /// Keeps the subscriber's own connection open.
        _client: async_nats::Client,
    },
}

impl FnSub {
    async fn connect(at: &Endpoint, i: usize) -> Result<FnSub> {
        match at {
            Endpoint::Y3 { addr, filter } => {
                let mut o = ClientOptions::new(*addr).name(format!("fn-{i}"));
                if *filter {
                    o = o.filter(TAG, filter_of(i));
                }
                Ok(FnSub::Y3(Box::new(Sink::connect(o, &[TAG]).await?)))
            }
            #[cfg(feature = "net-nats")]
            Endpoint::Nats(url) => {
                let c = nats_connect(url).await?;
                let sub = c.subscribe(SUBJECT).await?;
                c.flush().await?;
                Ok(FnSub::Nats { sub, _client: c })
            }
        }
    }

    /// The next payload; `None` when the subscription ended.
    async fn recv(&mut self) -> Option<Result<Bytes>> {
        match self {
            FnSub::Y3(s) => Some(s.recv().await?.map(|d| d.payload).map_err(Into::into)),
            #[cfg(feature = "net-nats")]
            FnSub::Nats { sub, .. } => {
                use futures_util::StreamExt;
                Some(Ok(sub.next().await?.payload))
            }
        }
    }

    async fn close(self) {
        match self {
            FnSub::Y3(s) => s.close().await,
            #[cfg(feature = "net-nats")]
            FnSub::Nats { .. } => {}
        }
    }
}

#[cfg(feature = "net-nats")]
const SUBJECT: &str = "bench.filter";

#[cfg(feature = "net-nats")]
async fn nats_connect(url: &str) -> Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .subscription_capacity(1 << 20)
        .connect(url)
        .await
        .map_err(|e| anyhow::anyhow!("nats connect: {e}"))
}

/// The source of any variant.
enum Src {
    Y3(Box<Source>),
    #[cfg(feature = "net-nats")]
    Nats(async_nats::Client),
}

impl Src {
    async fn connect(at: &Endpoint) -> Result<Src> {
        match at {
            Endpoint::Y3 { addr, .. } => Ok(Src::Y3(Box::new(
                Source::connect(ClientOptions::new(*addr).name("source")).await?,
            ))),
            #[cfg(feature = "net-nats")]
            Endpoint::Nats(url) => Ok(Src::Nats(nats_connect(url).await?)),
        }
    }

    async fn send(&mut self, payload: Bytes) -> Result<()> {
        match self {
            Src::Y3(s) => s.send_data(Data::new(TAG, payload)).await?,
            #[cfg(feature = "net-nats")]
            Src::Nats(c) => c.publish(SUBJECT, payload).await?,
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        match self {
            Src::Y3(s) => s.flush().await?,
            #[cfg(feature = "net-nats")]
            Src::Nats(c) => c.flush().await?,
        }
        Ok(())
    }

    async fn close(self) -> Result<()> {
        match self {
            Src::Y3(s) => s.close().await?,
            #[cfg(feature = "net-nats")]
            Src::Nats(c) => drop(c),
        }
        Ok(())
    }
}

/// What the functions' thread reports: its CPU time over the receive loops, in seconds,
/// and the latency of the matching deliveries.
type FnOut = (f64, Histogram<u64>);

/// Starts the N functions on their own thread (a current-thread runtime, so that the
/// thread's CPU clock is the functions' CPU, client I/O included); returns once all are
/// subscribed.
fn start_functions(
    at: Endpoint,
    wanted: Vec<u64>,
    bytes: Arc<AtomicU64>,
    epoch: Instant,
) -> Result<std::thread::JoinHandle<Result<FnOut>>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let handle =
        std::thread::Builder::new()
            .name("functions".into())
            .spawn(move || -> Result<FnOut> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut subs = Vec::new();
                    for i in 0..wanted.len() {
                        match FnSub::connect(&at, i).await {
                            Ok(s) => subs.push(s),
                            Err(e) => {
                                let _ = ready_tx.send(Err(anyhow::anyhow!("function {i}: {e:#}")));
                                bail!("function {i} did not connect");
                            }
                        }
                    }
                    let _ = ready_tx.send(Ok(()));
                    let cpu = ThreadTime::now();
                    let mut tasks = tokio::task::JoinSet::new();
                    for (i, (mut sub, want)) in subs.into_iter().zip(wanted).enumerate() {
                        let bytes = bytes.clone();
                        tasks.spawn(async move {
                            // Compiled once per function, evaluated per message.
                            let mut filter = Filter::parse(&filter_of(i))?;
                            let mut got = 0u64;
                            let mut local = Histogram::<u64>::new(3)?;
                            while got < want {
                                let Some(payload) = sub.recv().await else {
                                    bail!("function {i}: connection ended after {got} of {want}");
                                };
                                let payload = payload?;
                                bytes.fetch_add(payload.len() as u64, Ordering::Relaxed);
                                // The function's own check: what the router-side filter spares it.
                                if !filter.evaluate(&payload).matches() {
                                    continue;
                                }
                                got += 1;
                                if let Some(&sent) = payload
                                    .get(TIME_AT..TIME_AT + 8)
                                    .and_then(|b| <&[u8; 8]>::try_from(b).ok())
                                {
                                    let _ = local.record(
                                        now_ns(epoch).saturating_sub(u64::from_le_bytes(sent)),
                                    );
                                }
                            }
                            anyhow::Ok((sub, local))
                        });
                    }
                    let mut all = Histogram::<u64>::new(3)?;
                    let mut subs = Vec::new();
                    let collect = async {
                        while let Some(r) = tasks.join_next().await {
                            let (sub, local) = r??;
                            all.add(&local)?;
                            subs.push(sub);
                        }
                        anyhow::Ok(())
                    };
                    tokio::time::timeout(Duration::from_secs(120), collect)
                        .await
                        .context("functions did not get their share in 120 s")??;
                    let cpu = cpu.elapsed().as_secs_f64();
                    for s in subs {
                        s.close().await;
                    }
                    Ok((cpu, all))
                })
            })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => Err(e),
        Err(_) => match handle.join() {
            Ok(r) => r.and_then(|_| bail!("functions' thread ended early")),
            Err(_) => bail!("functions' thread panicked"),
        },
    }
}

/// Starts the broker of a variant: the y3 router, or nats-server for `nats-filter`.
fn start_broker(opts: &Options, variant: &str) -> Result<(Child, Endpoint)> {
    #[cfg(feature = "net-nats")]
    if variant == "nats-filter" {
        let server = opts
            .programs
            .nats_server
            .as_ref()
            .context(crate::net::NATS_SERVER_MISSING)?;
        let port = crate::net::e2e::free_port()?;
        let args: Vec<String> = vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ];
        let child = Child::spawn("nats-server", server, &args, None)?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        crate::net::e2e::wait_port(addr, Duration::from_secs(15))?;
        return Ok((child, Endpoint::Nats(format!("nats://{addr}"))));
    }
    let args = vec![
        "router-y3".to_string(),
        "--threads".into(),
        crate::measure::cores().to_string(),
    ];
    let mut child = opts
        .programs
        .spawn_lab("y3 router", "server", &args, None)?;
    let _quic = child.expect("quic ", Duration::from_secs(30))?;
    let addr = child
        .expect("listening ", Duration::from_secs(30))?
        .parse()?;
    let filter = variant == "router-filter";
    Ok((child, Endpoint::Y3 { addr, filter }))
}

async fn run_variant(opts: &Options, variant: &'static str) -> Result<Record> {
    let n = opts.functions.max(1);
    let (mut child, at) = start_broker(opts, variant)?;
    let epoch = Instant::now();
    let wanted: Vec<u64> = (0..n)
        .map(|i| (opts.messages + (n - 1 - i) as u64) / n as u64)
        .collect();
    let bytes = Arc::new(AtomicU64::new(0));
    let functions = start_functions(at.clone(), wanted, bytes.clone(), epoch)?;
    let templates = templates(n);
    let at_time = templates.first().map_or(0, |t| t.1);
    anyhow::ensure!(
        at_time == TIME_AT,
        "time bytes at {at_time}, expected {TIME_AT}"
    );
    let mut source = Src::connect(&at).await?;
    let router_cpu = child.cpu_seconds().unwrap_or(0.0);
    let lab_cpu = crate::net::proc::own_cpu_seconds().unwrap_or(0.0);
    let start = Instant::now();
    for m in 0..opts.messages {
        let (template, at) = &templates[(m % n as u64) as usize];
        let mut payload = template.clone();
        payload[*at..*at + 8].copy_from_slice(&now_ns(epoch).to_le_bytes());
        source.send(Bytes::from(payload)).await?;
    }
    source.flush().await?;
    let (fn_cpu, latency) = tokio::task::spawn_blocking(move || functions.join())
        .await?
        .map_err(|_| anyhow::anyhow!("functions' thread panicked"))??;
    let elapsed = start.elapsed().as_secs_f64();
    let router_cpu = child.cpu_seconds().unwrap_or(0.0) - router_cpu;
    let lab_cpu = crate::net::proc::own_cpu_seconds().unwrap_or(0.0) - lab_cpu;
    source.close().await?;
    child.kill();
    let per_msg = |s: f64| s * 1e9 / opts.messages.max(1) as f64;
    Ok(Record::new("filter", variant, &case_of(n))
        .dim(Dim::Subscribers, n)
        .dim(Dim::Transport, "tcp")
        .metric(Metric::Messages, opts.messages as f64)
        .metric(Metric::MsgPerS, opts.messages as f64 / elapsed)
        .metric(Metric::RouterNsPerMsg, per_msg(router_cpu))
        .metric(
            Metric::BytesToFunctions,
            bytes.load(Ordering::Relaxed) as f64,
        )
        .metric(Metric::SourceNsPerMsg, per_msg((lab_cpu - fn_cpu).max(0.0)))
        .metric(Metric::FunctionsNsPerMsg, per_msg(fn_cpu))
        .metric(Metric::P50Us, latency.value_at_quantile(0.5) as f64 / 1e3)
        .metric(Metric::P99Us, latency.value_at_quantile(0.99) as f64 / 1e3)
        .with_runs(1))
}

/// Where the send time sits in every payload (after the node header `80 81 xx`, key 0x01
/// `01 01 ii` and key 0x02's header `02 08`).
const TIME_AT: usize = 3 + 3 + 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_select_and_carry_the_time() {
        let t = templates(10);
        for (i, (bytes, at)) in t.iter().enumerate() {
            assert_eq!(*at, TIME_AT);
            assert!((200..260).contains(&bytes.len()), "{}", bytes.len());
            for j in 0..10 {
                let v = Filter::parse(&filter_of(j)).unwrap().evaluate(bytes);
                assert_eq!(v.matches(), i == j, "template {i}, filter {j}");
            }
        }
    }
}
