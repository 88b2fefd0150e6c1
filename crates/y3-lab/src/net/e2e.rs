//! Publish → route → subscribe on loopback: y3's router against NATS and Zenoh.
//!
//! For each implementation and case (payload size × subscriber count), on a fresh broker:
//!
//! 1. every subscriber subscribes; probe messages go out every 10 ms until each subscriber
//!    has seen one (subscriptions have propagated);
//! 2. a warm-up of 2% of the messages;
//! 3. **flat out**: the publisher sends `messages` as fast as it can; msg/s is that count
//!    over the time from the first publish to the moment the last subscriber has received
//!    all of them (every subscriber receives every message);
//! 4. **paced** at `rate` msg/s: one-way latency, publish call → subscriber receive, of
//!    every delivery, in one hdrhistogram.
//!
//! Payload: `[send time ns u64 LE][phase u32 LE]` then filler. Brokers run as child
//! processes (`y3 serve` as it ships, with its allocator — the release build next to the
//! lab's binary —, `nats-server`, `y3-lab net server zenoh-router`); publisher and
//! subscribers share the lab's process (one tokio runtime). Over the flat-out run the lab
//! reads the broker's CPU time (its threads' `/proc/PID/task/*/schedstat`,
//! [`crate::net::proc::cpu_seconds`]) and its own ([`crate::net::proc::own_cpu_seconds`]):
//! broker and clients CPU per message sit beside msg/s, and a case whose
//! clients took more CPU per message than the broker is marked client-bound (dimension
//! `bound`: `clients`), since the clients share the cores with the broker.
//! Rows: `y3-router-tcp`, `y3-router-quic`, `nats`, `zenoh-router` (clients through a
//! Zenoh router), `zenoh-p2p` (subscribers connect straight to the publisher's peer).
//! NATS and Zenoh need the `net-nats` / `net-zenoh` features.
//!
//! The same engine (paced sends, stamped payloads, subscriber tasks counting each phase,
//! the warm-up / flat-out / paced sequence, the medians) runs the `pipeline` suite
//! ([`Topology::Pipeline`]): source → a `y3` router in this process → a stream function
//! (re-tagging each frame, payload unchanged) → sink, over TCP, QUIC or TLS; rows
//! `y3-pipeline-TRANSPORT`, cases by payload size, and the flat-out run's latency
//! ("loaded": mostly queueing) and the paced run's maximum recorded too.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use tokio::sync::{mpsc, oneshot};
use tokio_util::bytes::Bytes;
use y3_transport::sdk::{ClientOptions, Sink, Source, Transport};
use y3_transport::tls::Trust;

use crate::net::proc::Child;
use crate::record::{Dim, Metric, Record, Results};

/// The Y3 data tag, NATS subject and Zenoh key the benchmark publishes on.
const TAG: u32 = 0x10;
/// The tag the pipeline's stream function emits (and its sink observes).
const TAG_OUT: u32 = 0x11;
#[cfg(feature = "net-nats")]
const SUBJECT: &str = "bench.data";
#[cfg(feature = "net-zenoh")]
const KEY: &str = "bench/data";

/// The implementations, in display order.
pub const IMPLS: [&str; 5] = [
    "y3-router-tcp",
    "y3-router-quic",
    "nats",
    "zenoh-router",
    "zenoh-p2p",
];

/// What the messages go through.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Topology {
    /// Publisher → a broker process → subscribers (the `e2e` suite).
    #[default]
    Broker,
    /// Source → router in this process → stream function → sink (the `pipeline` suite),
    /// over each of these transports (`tcp`, `quic`, `tls`), with this many runtime
    /// workers (default one per core).
    Pipeline {
        /// `tcp`, `quic`, `tls`.
        transports: Vec<String>,
        /// Runtime worker threads.
        threads: Option<usize>,
    },
}

/// Options of the e2e and pipeline suites.
#[derive(Debug, Clone)]
pub struct Options {
    /// Broker (e2e) or in-process pipeline.
    pub topology: Topology,
    /// Payload sizes (at least 16 bytes).
    pub sizes: Vec<usize>,
    /// Subscriber counts (the pipeline has one sink).
    pub subs: Vec<usize>,
    /// Messages, pacing and runs.
    pub load: crate::net::Load,
    /// Only implementations whose name contains one of these.
    pub only: Vec<String>,
    /// `--quick`.
    pub quick: bool,
    /// The command line.
    pub command: String,
    /// The binaries.
    pub programs: crate::net::Programs,
}

fn payload(size: usize, phase: u32, epoch: Instant) -> Bytes {
    let mut v = vec![b'm'; size.max(16)];
    let ns = epoch.elapsed().as_nanos() as u64;
    v[..8].copy_from_slice(&ns.to_le_bytes());
    v[8..12].copy_from_slice(&phase.to_le_bytes());
    Bytes::from(v)
}

fn parse(head: &[u8]) -> Option<(u64, u32)> {
    let ns = u64::from_le_bytes(head.get(..8)?.try_into().ok()?);
    let phase = u32::from_le_bytes(head.get(8..12)?.try_into().ok()?);
    Some((ns, phase))
}

/// A publisher of any implementation.
enum Pub {
    Y3(Box<Source>),
    #[cfg(feature = "net-nats")]
    Nats(async_nats::Client),
    #[cfg(feature = "net-zenoh")]
    Zenoh(zenoh::pubsub::Publisher<'static>, zenoh::Session),
}

impl Pub {
    async fn send(&mut self, payload: Bytes) -> Result<()> {
        match self {
            Pub::Y3(s) => {
                s.send(TAG, payload).await?;
            }
            #[cfg(feature = "net-nats")]
            Pub::Nats(c) => c.publish(SUBJECT, payload).await?,
            #[cfg(feature = "net-zenoh")]
            Pub::Zenoh(p, _) => p.put(payload.to_vec()).await.map_err(|e| anyhow!(e))?,
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        match self {
            Pub::Y3(s) => s.flush().await?,
            #[cfg(feature = "net-nats")]
            Pub::Nats(c) => c.flush().await?,
            #[cfg(feature = "net-zenoh")]
            Pub::Zenoh(..) => {}
        }
        Ok(())
    }

    async fn close(self) {
        match self {
            Pub::Y3(s) => {
                let _ = s.close().await;
            }
            #[cfg(feature = "net-nats")]
            Pub::Nats(c) => drop(c),
            #[cfg(feature = "net-zenoh")]
            Pub::Zenoh(p, s) => {
                let _ = p.undeclare().await;
                let _ = s.close().await;
            }
        }
    }
}

/// A subscriber of any implementation.
enum Sub {
    Y3(Box<Sink>),
    #[cfg(feature = "net-nats")]
    Nats {
        sub: async_nats::Subscriber,
        /// Keeps the subscriber's own connection open.
        _client: async_nats::Client,
    },
    #[cfg(feature = "net-zenoh")]
    Zenoh {
        sub: zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
        /// Keeps the subscriber's own session open.
        _session: zenoh::Session,
    },
}

impl Sub {
    /// The next message's `(send ns, phase)`; `None` when the subscription ended.
    async fn recv(&mut self) -> Option<(u64, u32)> {
        match self {
            Sub::Y3(s) => {
                let d = s.recv().await?.ok()?;
                parse(&d.payload)
            }
            #[cfg(feature = "net-nats")]
            Sub::Nats { sub: s, .. } => {
                use futures_util::StreamExt;
                let m = s.next().await?;
                parse(&m.payload)
            }
            #[cfg(feature = "net-zenoh")]
            Sub::Zenoh { sub: s, .. } => {
                let sample = s.recv_async().await.ok()?;
                let bytes = sample.payload().to_bytes();
                parse(&bytes)
            }
        }
    }
}

/// What a subscriber task is asked to count.
struct Phase {
    id: u32,
    n: u64,
    done: oneshot::Sender<(Instant, Histogram<u64>)>,
}

/// Runs one subscriber: marks itself ready on the first probe (phase 0), then counts the
/// messages of each phase it is given.
async fn subscriber(
    mut sub: Sub,
    mut phases: mpsc::UnboundedReceiver<Phase>,
    ready: Arc<AtomicUsize>,
    epoch: Instant,
) {
    let mut probed = false;
    let mut current: Option<(Phase, u64, Histogram<u64>)> = None;
    loop {
        tokio::select! {
            biased;
            p = phases.recv() => match p {
                Some(p) => {
                    let hist = crate::net::latency_histogram();
                    current = Some((p, 0, hist));
                }
                None => return,
            },
            m = sub.recv() => {
                let Some((sent, phase)) = m else { return };
                if phase == 0 && !probed {
                    probed = true;
                    ready.fetch_add(1, Ordering::SeqCst);
                }
                let now = epoch.elapsed().as_nanos() as u64;
                if let Some((p, count, hist)) = current.as_mut() {
                    if p.id == phase {
                        hist.saturating_record(now.saturating_sub(sent).max(1));
                        *count += 1;
                        if *count == p.n {
                            if let Some((p, _, hist)) = current.take() {
                                let _ = p.done.send((Instant::now(), hist));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Connected clients of one case.
struct Clients {
    publisher: Pub,
    phases: Vec<mpsc::UnboundedSender<Phase>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ready: Arc<AtomicUsize>,
    epoch: Instant,
    next_phase: u32,
}

impl Clients {
    fn new(publisher: Pub, subs: Vec<Sub>, epoch: Instant) -> Clients {
        let ready = Arc::new(AtomicUsize::new(0));
        let mut phases = Vec::new();
        let mut tasks = Vec::new();
        for s in subs {
            let (tx, rx) = mpsc::unbounded_channel();
            phases.push(tx);
            tasks.push(tokio::spawn(subscriber(s, rx, Arc::clone(&ready), epoch)));
        }
        Clients {
            publisher,
            phases,
            tasks,
            ready,
            epoch,
            next_phase: 1,
        }
    }

    /// Probes until every subscriber has seen a message.
    async fn wait_ready(&mut self, size: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.ready.load(Ordering::SeqCst) < self.phases.len() {
            if Instant::now() > deadline {
                bail!(
                    "only {} of {} subscribers saw a probe within 15 s",
                    self.ready.load(Ordering::SeqCst),
                    self.phases.len()
                );
            }
            self.publisher.send(payload(size, 0, self.epoch)).await?;
            self.publisher.flush().await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Publishes `n` messages (paced at `rate` if given); returns the time until the last
    /// subscriber had all of them, and the merged latency histogram.
    async fn phase(
        &mut self,
        n: u64,
        size: usize,
        rate: Option<u64>,
        limit: Duration,
    ) -> Result<(Duration, Histogram<u64>)> {
        let id = self.next_phase;
        self.next_phase += 1;
        let mut done = Vec::new();
        for tx in &self.phases {
            let (dtx, drx) = oneshot::channel();
            tx.send(Phase { id, n, done: dtx })
                .map_err(|_| anyhow!("a subscriber ended"))?;
            done.push(drx);
        }
        let start = Instant::now();
        let epoch = self.epoch;
        let publisher = &mut self.publisher;
        let send = async {
            for i in 0..n {
                crate::net::pace(start, i, rate.map_or(0.0, |r| r as f64)).await;
                publisher.send(payload(size, id, epoch)).await?;
            }
            publisher.flush().await?;
            anyhow::Ok(())
        };
        let recv = async {
            let mut hist = crate::net::latency_histogram();
            let mut last = start;
            for d in done {
                let (at, h) = d.await.map_err(|_| anyhow!("a subscriber ended"))?;
                last = last.max(at);
                hist.add(h)?;
            }
            anyhow::Ok((last - start, hist))
        };
        let (sent, received) = tokio::time::timeout(limit, async { tokio::join!(send, recv) })
            .await
            .map_err(|_| {
                anyhow!("not every subscriber received {n} messages within {limit:.0?}")
            })?;
        sent?;
        received
    }

    async fn close(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.publisher.close().await;
    }
}

/// A free 127.0.0.1 port (bound then released: peers that need a port number up front).
pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A broker child process and where its clients connect.
struct Broker {
    child: Option<Child>,
    addr: SocketAddr,
    quic: Option<SocketAddr>,
    /// `y3 serve`'s private directory (its ready file and dev certificate), removed with
    /// the broker.
    dir: Option<y3_testkit::ServeDir>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        // The process first, then its directory.
        drop(self.child.take());
        drop(self.dir.take());
    }
}

fn start_broker(opts: &Options, imp: &str) -> Result<Broker> {
    match imp {
        "y3-router-tcp" | "y3-router-quic" => {
            let y3 = &opts.programs.y3;
            if !y3.is_file() {
                bail!(
                    "{} not found: the y3 rows run `y3 serve` as it ships (cargo build \
                     --release -p y3-cli)",
                    y3.display()
                );
            }
            let dir = y3_testkit::ServeDir::new("lab-e2e")?;
            let args: Vec<String> = vec![
                "serve".into(),
                "--tcp".into(),
                "127.0.0.1:0".into(),
                "--quic".into(),
                "127.0.0.1:0".into(),
                "--metrics".into(),
                String::new(),
                "--dev-cert-out".into(),
                dir.path().join("dev-cert.pem").display().to_string(),
            ];
            let (child, ready) = Child::serve(
                "y3 serve",
                y3,
                &["RUST_LOG=warn"],
                &args,
                &dir,
                Duration::from_secs(30),
            )?;
            Ok(Broker {
                child: Some(child),
                addr: ready.listener("tcp").context("y3 serve: no TCP listener")?,
                quic: Some(
                    ready
                        .listener("quic")
                        .context("y3 serve: no QUIC listener")?,
                ),
                dir: Some(dir),
            })
        }
        "nats" => {
            let server = opts
                .programs
                .nats_server
                .as_ref()
                .context(crate::net::NATS_SERVER_MISSING)?;
            let port = free_port()?;
            let args: Vec<String> = vec![
                "-a".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
            ];
            let child = Child::spawn("nats-server", server, &args, None)?;
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
            wait_port(addr, Duration::from_secs(15))?;
            Ok(Broker {
                child: Some(child),
                addr,
                quic: None,
                dir: None,
            })
        }
        "zenoh-router" => {
            let port = free_port()?;
            let args: Vec<String> = vec![
                "zenoh-router".into(),
                "--addr".into(),
                format!("127.0.0.1:{port}"),
            ];
            let mut child = opts
                .programs
                .spawn_lab("zenoh router", "server", &args, None)?;
            let addr = child
                .expect("listening ", Duration::from_secs(30))?
                .parse()?;
            Ok(Broker {
                child: Some(child),
                addr,
                quic: None,
                dir: None,
            })
        }
        "zenoh-p2p" => Ok(Broker {
            child: None,
            addr: format!("127.0.0.1:{}", free_port()?).parse()?,
            quic: None,
            dir: None,
        }),
        other => bail!("unknown implementation {other:?}"),
    }
}

pub(crate) fn wait_port(addr: SocketAddr, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("nothing listens on {addr} after {timeout:.0?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(feature = "net-zenoh")]
fn zenoh_config(
    mode: &str,
    listen: Option<SocketAddr>,
    connect: Option<SocketAddr>,
) -> Result<zenoh::Config> {
    let mut c = zenoh::Config::default();
    let set = |c: &mut zenoh::Config, k: &str, v: String| {
        c.insert_json5(k, &v)
            .map_err(|e| anyhow!("zenoh config {k}: {e}"))
    };
    set(&mut c, "mode", format!("\"{mode}\""))?;
    set(&mut c, "scouting/multicast/enabled", "false".into())?;
    set(
        &mut c,
        "listen/endpoints",
        match listen {
            Some(a) => format!("[\"tcp/{a}\"]"),
            None => "[]".into(),
        },
    )?;
    if let Some(a) = connect {
        set(&mut c, "connect/endpoints", format!("[\"tcp/{a}\"]"))?;
    }
    Ok(c)
}

#[cfg(feature = "net-zenoh")]
async fn zenoh_open(
    mode: &str,
    listen: Option<SocketAddr>,
    connect: Option<SocketAddr>,
) -> Result<zenoh::Session> {
    zenoh::open(zenoh_config(mode, listen, connect)?)
        .await
        .map_err(|e| anyhow!("zenoh open: {e}"))
}

async fn connect_clients(
    imp: &str,
    broker: &Broker,
    subs: usize,
    epoch: Instant,
) -> Result<Clients> {
    match imp {
        "y3-router-tcp" | "y3-router-quic" => {
            let (addr, kind) = if imp == "y3-router-quic" {
                (broker.quic.context("no QUIC listener")?, Transport::Quic)
            } else {
                (broker.addr, Transport::Tcp)
            };
            let options = |name: &str| {
                let mut o = ClientOptions::new(addr)
                    .transport(kind)
                    .trust(Trust::Insecure)
                    .name(name);
                o.send_queue = 4096;
                o
            };
            let mut sinks = Vec::new();
            for i in 0..subs {
                sinks.push(Sub::Y3(Box::new(
                    Sink::connect(options(&format!("bench-sub-{i}")), &[TAG]).await?,
                )));
            }
            let source = Source::connect(options("bench-pub")).await?;
            Ok(Clients::new(Pub::Y3(Box::new(source)), sinks, epoch))
        }
        #[cfg(feature = "net-nats")]
        "nats" => {
            let url = format!("nats://{}", broker.addr);
            let connect = || async {
                async_nats::ConnectOptions::new()
                    .subscription_capacity(1 << 20)
                    .connect(url.as_str())
                    .await
                    .map_err(|e| anyhow!("nats connect: {e}"))
            };
            let mut list = Vec::new();
            for _ in 0..subs {
                let c = connect().await?;
                let s = c.subscribe(SUBJECT).await?;
                c.flush().await?;
                list.push(Sub::Nats { sub: s, _client: c });
            }
            let publisher = connect().await?;
            Ok(Clients::new(Pub::Nats(publisher), list, epoch))
        }
        #[cfg(feature = "net-zenoh")]
        "zenoh-router" | "zenoh-p2p" => {
            let p2p = imp == "zenoh-p2p";
            // P2P: the publisher's peer listens, each subscriber's peer connects to it.
            let pub_session = if p2p {
                zenoh_open("peer", Some(broker.addr), None).await?
            } else {
                zenoh_open("client", None, Some(broker.addr)).await?
            };
            let mut list = Vec::new();
            for _ in 0..subs {
                let s = if p2p {
                    zenoh_open("peer", None, Some(broker.addr)).await?
                } else {
                    zenoh_open("client", None, Some(broker.addr)).await?
                };
                let sub = s
                    .declare_subscriber(KEY)
                    .await
                    .map_err(|e| anyhow!("zenoh subscribe: {e}"))?;
                list.push(Sub::Zenoh { sub, _session: s });
            }
            let publisher = pub_session
                .declare_publisher(KEY)
                .congestion_control(zenoh::qos::CongestionControl::Block)
                .await
                .map_err(|e| anyhow!("zenoh publisher: {e}"))?;
            Ok(Clients::new(
                Pub::Zenoh(publisher, pub_session),
                list,
                epoch,
            ))
        }
        other => bail!("{other} is not compiled in (feature net-nats / net-zenoh)"),
    }
}

/// One case's result.
struct CaseResult {
    seconds: f64,
    loaded_msgs: u64,
    loaded: Histogram<u64>,
    paced: Histogram<u64>,
    /// The broker's CPU per message over the flat-out run, ns (none without a process).
    broker_ns: Option<f64>,
    /// The clients' (this process's) CPU per message over the flat-out run, ns.
    clients_ns: Option<f64>,
}

/// One case on connected clients: probes until every subscriber is ready, a warm-up of
/// 2% of the messages, the flat-out run, then the paced run.
///
/// `broker_cpu` reads the broker's CPU seconds so far (`None`: not measured); the clients'
/// are this process's.
async fn run_case(
    opts: &Options,
    mut clients: Clients,
    size: usize,
    broker_cpu: &(dyn Fn() -> Option<f64> + Sync),
) -> Result<CaseResult> {
    let result = async {
        clients.wait_ready(size).await?;
        let warm = (opts.load.messages / 50).max(100);
        clients
            .phase(warm, size, None, Duration::from_secs(60))
            .await?;
        let (broker0, clients0) = (broker_cpu(), crate::net::proc::own_cpu_seconds());
        let (elapsed, loaded) = clients
            .phase(opts.load.messages, size, None, Duration::from_secs(120))
            .await?;
        // CPU seconds from `before` to `after` as ns per message.
        let per_msg = |before: Option<f64>, after: Option<f64>| {
            let n = opts.load.messages.max(1) as f64;
            before.zip(after).map(|(a, b)| (b - a).max(0.0) * 1e9 / n)
        };
        let broker_ns = per_msg(broker0, broker_cpu());
        let clients_ns = per_msg(clients0, crate::net::proc::own_cpu_seconds());
        let limit = Duration::from_secs_f64(opts.load.paced as f64 / opts.load.rate as f64 + 30.0);
        let (_, paced) = clients
            .phase(opts.load.paced, size, Some(opts.load.rate), limit)
            .await?;
        anyhow::Ok(CaseResult {
            seconds: elapsed.as_secs_f64(),
            loaded_msgs: opts.load.messages,
            loaded,
            paced,
            broker_ns,
            clients_ns,
        })
    }
    .await;
    clients.close().await;
    result
}

/// One pipeline case: a fresh router in this process, its function, sink and source.
async fn run_pipeline_case(opts: &Options, transport: &str, size: usize) -> Result<CaseResult> {
    let mut config = y3_router::RouterConfig::ephemeral();
    config.listen.tcp_tls = transport == "tls";
    let router = y3_router::Router::start(config).await?;
    let (addr, kind) = match transport {
        "tcp" => (router.tcp_addr(), Transport::Tcp),
        "tls" => (router.tcp_addr(), Transport::TcpTls),
        "quic" => (router.quic_addr(), Transport::Quic),
        other => bail!("unknown transport {other:?} (tcp, quic, tls)"),
    };
    let addr = addr.context("listener missing")?;
    let options = |name: &str| {
        let mut o = ClientOptions::new(addr)
            .transport(kind)
            .trust(router.trust())
            .name(name);
        o.send_queue = 4096;
        o
    };
    let function = y3_transport::sdk::StreamFunction::new(options("bench-function"), &[TAG]);
    let function = tokio::spawn(async move {
        let _ = function
            .run(|d| async move { Some((TAG_OUT, d.payload)) })
            .await;
    });
    let sink = Sink::connect(options("bench-sink"), &[TAG_OUT]).await?;
    let ready = Instant::now();
    while router.stats().connections < 2 && ready.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let source = Source::connect(options("bench-source")).await?;
    let mut clients = Clients::new(
        Pub::Y3(Box::new(source)),
        vec![Sub::Y3(Box::new(sink))],
        Instant::now(),
    );
    clients.tasks.push(function);
    // The router runs in this process: no separate CPU figures.
    let result = run_case(opts, clients, size, &|| None).await;
    router.shutdown().await;
    result
}

/// Runs the suite: `e2e` or, with [`Topology::Pipeline`], `pipeline`.
///
/// # Errors
/// Setup errors only; failing rows become notes.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    if opts.sizes.iter().any(|&s| s < 16) {
        bail!("payload sizes must be at least 16 bytes (send time and phase)");
    }
    if let Topology::Pipeline {
        transports,
        threads,
    } = &opts.topology
    {
        return run_pipeline(opts, transports, *threads, bar);
    }
    let mut notes = Vec::new();
    let mut impls: Vec<&str> = crate::net::wanted(&IMPLS, &opts.only);
    if !crate::net::NATS_ENABLED && impls.contains(&"nats") {
        impls.retain(|i| *i != "nats");
        notes.push("nats skipped: built without the y3-lab feature net-nats".into());
    }
    if crate::net::NATS_ENABLED && impls.contains(&"nats") && opts.programs.nats_server.is_none() {
        impls.retain(|i| *i != "nats");
        notes.push(format!("nats skipped: {}", crate::net::NATS_SERVER_MISSING));
    }
    if !crate::net::ZENOH_ENABLED && impls.iter().any(|i| i.starts_with("zenoh")) {
        impls.retain(|i| !i.starts_with("zenoh"));
        notes.push("zenoh skipped: built without the y3-lab feature net-zenoh".into());
    }
    let mut versions = Vec::new();
    if impls.contains(&"nats") {
        if let Some(s) = &opts.programs.nats_server {
            versions.push((
                "nats-server".to_string(),
                crate::net::proc::version_of(s, &["--version"]).unwrap_or_default(),
            ));
        }
        versions.push((
            "async-nats".into(),
            crate::net::report::lock_version("async-nats"),
        ));
    }
    if impls.iter().any(|i| i.starts_with("zenoh")) {
        versions.push(("zenoh".into(), crate::net::report::lock_version("zenoh")));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::measure::cores())
        .enable_all()
        .build()?;
    let mut cases = Vec::new();
    for &size in &opts.sizes {
        for &subs in &opts.subs {
            cases.push((size, subs));
        }
    }
    let runs = opts.load.runs.max(1);
    bar.set_length((cases.len() * impls.len() * runs) as u64);
    let mut records = Vec::new();
    for &(size, subs) in &cases {
        let case = format!("{size} B × {subs} sub");
        let got = crate::net::rounds("e2e", &case, &impls, runs, bar, &mut notes, |imp| {
            let broker = start_broker(opts, imp)?;
            // The broker process's CPU time so far (none without a process of its own).
            let pid = broker.child.as_ref().map(Child::pid);
            let broker_cpu = move || pid.and_then(crate::net::proc::cpu_seconds);
            let r = rt.block_on(async {
                let clients = connect_clients(imp, &broker, subs, Instant::now()).await?;
                run_case(opts, clients, size, &broker_cpu).await
            });
            drop(broker);
            r
        });
        for (i, imp) in impls.iter().enumerate() {
            if got[i].is_empty() {
                continue;
            }
            records.push(
                case_record("e2e", imp, &case, &got[i])
                    .dim(Dim::Payload, size)
                    .dim(Dim::Subscribers, subs),
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(Results::of(
        crate::net::meta(
            "e2e",
            &opts.command,
            opts.quick,
            format!(
                "none: brokers (y3 router and nats-server with {} threads, Zenoh router) and the \
                 client process share every core",
                crate::measure::cores()
            ),
            versions,
        ),
        records,
        notes,
    ))
}

/// The record of one row in one case: the medians over its runs of msg/s (flat out), the
/// flat-out time and the paced run's p50/p99/p999 latency.
fn case_record(suite: &str, imp: &str, case: &str, got: &[CaseResult]) -> Record {
    let med = |f: &dyn Fn(&CaseResult) -> f64| {
        crate::measure::median(&got.iter().map(f).collect::<Vec<_>>())
    };
    let us = |q: f64| Some(med(&|r| r.paced.value_at_quantile(q) as f64 / 1e3).0);
    let (rate, range) = med(&|r| r.loaded_msgs as f64 / r.seconds);
    let cpu = |f: &dyn Fn(&CaseResult) -> Option<f64>| {
        let v: Vec<f64> = got.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| crate::measure::median(&v).0)
    };
    let broker = cpu(&|r| r.broker_ns);
    let clients = cpu(&|r| r.clients_ns);
    let bound = match (broker, clients) {
        (Some(b), Some(c)) if c > b => "clients",
        (Some(_), Some(_)) => "broker",
        _ => "",
    };
    Record::new(suite, imp, case)
        .dim(Dim::Bound, bound)
        .metric_opt(Metric::RouterNsPerMsg, broker)
        .metric_opt(Metric::ClientsNsPerMsg, clients)
        .metric(Metric::Seconds, med(&|r| r.seconds).0)
        .metric(
            Metric::Messages,
            got.first().map_or(0, |r| r.loaded_msgs) as f64,
        )
        .metric(Metric::MsgPerS, rate)
        .metric_opt(Metric::P50Us, us(0.5))
        .metric_opt(Metric::P99Us, us(0.99))
        .metric_opt(Metric::P999Us, us(0.999))
        .with_spread(got.len(), Metric::MsgPerS, range)
}

/// The pipeline suite: every transport × size, each transport in turn every round.
fn run_pipeline(
    opts: &Options,
    transports: &[String],
    threads: Option<usize>,
    bar: &indicatif::ProgressBar,
) -> Result<Results> {
    let mut notes = Vec::new();
    let rows: Vec<String> = transports
        .iter()
        .map(|t| format!("y3-pipeline-{t}"))
        .collect();
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let workers = threads.unwrap_or_else(crate::measure::cores).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let runs = opts.load.runs.max(1);
    bar.set_length((opts.sizes.len() * rows.len() * runs) as u64);
    let mut records = Vec::new();
    for &size in &opts.sizes {
        let case = format!("{size} B");
        let got = crate::net::rounds("pipeline", &case, &rows, runs, bar, &mut notes, |row| {
            let transport = row.trim_start_matches("y3-pipeline-");
            rt.block_on(run_pipeline_case(opts, transport, size))
        });
        for (i, row) in rows.iter().enumerate() {
            if got[i].is_empty() {
                continue;
            }
            let med = |f: &dyn Fn(&CaseResult) -> f64| {
                crate::measure::median(&got[i].iter().map(f).collect::<Vec<_>>()).0
            };
            let loaded = |q: f64| med(&|r| r.loaded.value_at_quantile(q) as f64 / 1e3);
            records.push(
                case_record("pipeline", row, &case, &got[i])
                    .dim(Dim::Payload, size)
                    .dim(Dim::Subscribers, 1usize)
                    .dim(Dim::Transport, &transports[i][..])
                    .dim(Dim::Threads, workers)
                    .dim(Dim::Rate, opts.load.rate)
                    .dim(Dim::Paced, opts.load.paced)
                    .metric(Metric::MaxUs, med(&|r| r.paced.max() as f64 / 1e3))
                    .metric(Metric::LoadedP50Us, loaded(0.5))
                    .metric(Metric::LoadedP99Us, loaded(0.99)),
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(Results::of(
        crate::net::meta(
            "pipeline",
            &opts.command,
            opts.quick,
            format!(
                "none: router, function, source and sink in this one process, a runtime of \
                 {workers} worker threads on {} cores",
                crate::measure::cores()
            ),
            Vec::new(),
        ),
        records,
        notes,
    ))
}

/// Runs a broker of this suite (`router-y3`, `zenoh-router`) until the process ends.
///
/// # Errors
/// Unknown kinds, start failures.
pub fn serve(kind: &str, addr: SocketAddr, threads: usize) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    match kind {
        "router-y3" => rt.block_on(async {
            let router = y3_router::Router::start(y3_router::RouterConfig::ephemeral()).await?;
            let quic = router.quic_addr().context("no QUIC listener")?;
            let tcp = router.tcp_addr().context("no TCP listener")?;
            {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                writeln!(out, "quic {quic}")?;
                out.flush()?;
            }
            crate::net::announce(tcp);
            std::future::pending::<()>().await;
            drop(router);
            Ok(())
        }),
        #[cfg(feature = "net-zenoh")]
        "zenoh-router" => rt.block_on(async {
            let session = zenoh_open("router", Some(addr), None).await?;
            crate::net::announce(addr);
            std::future::pending::<()>().await;
            drop(session);
            Ok(())
        }),
        other => {
            let _ = addr;
            bail!("unknown lab server {other:?} (or not compiled in: feature net-zenoh)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_carries_time_and_phase() {
        let epoch = Instant::now();
        let p = payload(64, 7, epoch);
        assert_eq!(p.len(), 64);
        let (ns, phase) = parse(&p).unwrap();
        assert_eq!(phase, 7);
        assert!(ns < 10_000_000_000);
        assert_eq!(payload(3, 1, epoch).len(), 16);
        assert!(parse(&[0u8; 5]).is_none());
    }

    #[test]
    fn y3_router_in_process_fans_out_to_every_subscriber() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let router = y3_router::Router::start(y3_router::RouterConfig::ephemeral())
                .await
                .unwrap();
            let broker = Broker {
                child: None,
                addr: router.tcp_addr().unwrap(),
                quic: router.quic_addr(),
                dir: None,
            };
            let epoch = Instant::now();
            let mut c = connect_clients("y3-router-tcp", &broker, 3, epoch)
                .await
                .unwrap();
            c.wait_ready(64).await.unwrap();
            let (d, h) = c
                .phase(500, 64, None, Duration::from_secs(30))
                .await
                .unwrap();
            assert!(d > Duration::ZERO);
            assert_eq!(h.len(), 1500, "every subscriber got every message");
            let (_, h) = c
                .phase(50, 64, Some(5000), Duration::from_secs(30))
                .await
                .unwrap();
            assert_eq!(h.len(), 150);
            c.close().await;
            router.shutdown().await;
        });
    }
}
