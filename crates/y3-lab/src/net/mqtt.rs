//! `y3-lab net mqtt` (issue 31's benchmark): MQTT publish → subscribe through three
//! brokers, with one client program for all (rumqttc, in this process).
//!
//! ```text
//!  rumqttc publisher ─PUBLISH lab/t─▶ broker ─PUBLISH lab/t─▶ rumqttc subscriber
//!  brokers: y3 serve [mqtt] (lab/t → tag 0x10 → lab/t) | mosquitto (Debian) |
//!           nats-server's MQTT listener (JetStream on, as it requires)
//! ```
//!
//! Per broker, payload size and QoS: **flat out**, `messages` published as fast as the
//! client goes (QoS 1: rumqttc's window of 100 in flight), msg/s = messages received over
//! first publish to last receipt (a broker that drops delivers fewer: noted);
//! **paced**, `paced` messages at `rate` msg/s, one-way latency p50/p99 (receipt minus the
//! stamp in the payload, both on this process's clock). Every broker runs on the same
//! machine as the client, unpinned; each row is the median of `runs` runs.
//!
//! **End to end** (`e2e` cases, QoS 0): sensor → router → a YoMo v1.22.0 stream function
//! (`yomo-peer sfn`, the real SDK, relaying tag 0x30 as 0x31) → MQTT subscriber, paced
//! latency and flat-out msg/s like the rest:
//!
//! ```text
//!  y3:       pub lab/in ─▶ y3 [mqtt] ─ 0x30 ─▶ sfn ─ 0x31 ─▶ y3 [mqtt] ─▶ sub lab/out
//!  baseline: pub lab/in ─▶ mosquitto ─▶ mqtt-bridge (paho + YoMo source) ─ 0x30 ─▶ YoMo's
//!            zipper ─▶ sfn ─ 0x31 ─▶ zipper ─▶ mqtt-bridge (YoMo sfn + paho) ─▶ mosquitto
//!            ─▶ sub lab/out
//! ```
//!
//! `mqtt-bridge` and `yomo-peer` are built from `interop/yomo` (`go build`).
//!
//! Every socket runs without Nagle's delay, as a latency-minded deployment sets it: the
//! client (`TCP_NODELAY`), Mosquitto (`set_tcp_nodelay true`; Debian's default is off,
//! which holds a 1 KiB QoS 0 delivery for the subscriber's delayed ACK, 15 ms at p50),
//! nats-server and the Go programs (Go's default), y3 (its listener sets it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};

use crate::measure::median;
use crate::net::proc::{self, Child};
use crate::net::{Load, Programs};
use crate::record::{Dim, Metric, Record, Results};

/// Client ids of one lab process are `lab-pub-N`, `lab-sub-N`.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The brokers, in display order.
pub const BROKERS: [&str; 3] = ["y3", "mosquitto", "nats-mqtt"];

/// The end-to-end baseline's row: Mosquitto, the bridge process and YoMo's zipper.
pub const E2E_BASELINE: &str = "mosquitto+bridge+yomo";

/// The end-to-end path's topics and tags (`y3 serve`'s mapping, the bridge's flags).
const E2E_IN: &str = "lab/in";
const E2E_OUT: &str = "lab/out";
const E2E_IN_TAG: &str = "0x30";
const E2E_OUT_TAG: &str = "0x31";

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Payload sizes (at least 8: the stamp).
    pub sizes: Vec<usize>,
    /// QoS levels (0, 1).
    pub qos: Vec<u8>,
    /// Messages, pacing, runs.
    pub load: Load,
    /// Only brokers whose name contains one of these.
    pub only: Vec<String>,
    /// The command line.
    pub command: String,
    /// `--quick`.
    pub quick: bool,
    /// The lab's programs.
    pub programs: Programs,
    /// The Go module with `cmd/yomo-peer` and `cmd/mqtt-bridge` (`interop/yomo`); `None`:
    /// no end-to-end cases.
    pub yomo_dir: Option<PathBuf>,
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
struct Run {
    rate: f64,
    received: u64,
    p50_us: f64,
    p99_us: f64,
}

/// A running broker.
struct Broker {
    port: u16,
    /// y3's QUIC listener (YoMo clients), when the broker is y3.
    quic: Option<u16>,
    child: Child,
    _dir: PathBuf,
    /// `y3 serve`'s own directory (ready file, state), removed on drop; unused by the others.
    _serve_dir: y3_testkit::ServeDir,
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn scratch(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("y3-lab-mqtt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn start(name: &str, programs: &Programs) -> Result<Broker> {
    let port = free_port()?;
    let dir = scratch(name)?;
    let mut quic = None;
    let (program, args): (PathBuf, Vec<String>) = match name {
        "y3" => {
            let config = dir.join("y3.toml");
            quic = Some(free_port()?);
            std::fs::write(
                &config,
                format!(
                    "[listen]\ntcp = \"127.0.0.1:{}\"\nquic = \"127.0.0.1:{}\"\nmetrics = \"\"\n[state]\npersist = false\n\
                     [mqtt]\nlisten = \"127.0.0.1:{port}\"\n[[mqtt.publish]]\ntopic = \"lab/t\"\ntag = 0x10\n\
                     [[mqtt.subscribe]]\ntag = 0x10\ntopic = \"lab/t\"\n\
                     [[mqtt.publish]]\ntopic = \"{E2E_IN}\"\ntag = {E2E_IN_TAG}\n\
                     [[mqtt.subscribe]]\ntag = {E2E_OUT_TAG}\ntopic = \"{E2E_OUT}\"\n",
                    free_port()?,
                    quic.unwrap_or_default(),
                ),
            )?;
            (
                programs.y3.clone(),
                vec!["serve".into(), "-c".into(), config.display().to_string()],
            )
        }
        "mosquitto" => {
            let config = dir.join("mosquitto.conf");
            std::fs::write(
                &config,
                format!(
                    "listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 1000000\n\
                     max_inflight_messages 100\npersistence false\nset_tcp_nodelay true\n"
                ),
            )?;
            let bin = proc::which("mosquitto")
                .or_else(|| Some(PathBuf::from("/usr/sbin/mosquitto")).filter(|p| p.exists()))
                .ok_or_else(|| anyhow!("mosquitto is not installed (apt-get install mosquitto)"))?;
            (bin, vec!["-c".into(), config.display().to_string()])
        }
        "nats-mqtt" => {
            let config = dir.join("nats.conf");
            std::fs::write(
                &config,
                format!(
                    "listen: \"127.0.0.1:{}\"\nserver_name: \"y3-lab\"\n\
                     jetstream {{ store_dir: \"{}\" }}\nmqtt {{ listen: \"127.0.0.1:{port}\" }}\n",
                    free_port()?,
                    dir.join("js").display()
                ),
            )?;
            let bin = std::env::var_os("NATS_SERVER_BIN")
                .map(PathBuf::from)
                .or_else(|| {
                    Some(PathBuf::from("target/tools/bin/nats-server")).filter(|p| p.exists())
                })
                .or_else(|| proc::which("nats-server"))
                .ok_or_else(|| {
                    anyhow!("nats-server not found (NATS_SERVER_BIN, target/tools/bin)")
                })?;
            (bin, vec!["-c".into(), config.display().to_string()])
        }
        other => bail!("unknown broker {other}"),
    };
    let serve_dir = y3_testkit::ServeDir::new("lab-mqtt")?;
    let child = if name == "y3" {
        Child::serve(
            name,
            &program,
            &[],
            &args,
            &serve_dir,
            Duration::from_secs(20),
        )?
        .0
    } else {
        Child::spawn(name, &program, &args, None)?
    };
    // Every broker: its MQTT port accepts.
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > until {
            bail!("{name} did not listen on {port}: {}", child.stderr_tail());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Broker {
        port,
        quic,
        child,
        _dir: dir,
        _serve_dir: serve_dir,
    })
}

/// `go build -o target/NAME ./cmd/NAME` in the Go module `module`.
fn go_build(module: &std::path::Path, name: &str) -> Result<PathBuf> {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let out = std::env::current_dir()?.join(target).join(name);
    let status = std::process::Command::new("go")
        .current_dir(module)
        .args(["build", "-o"])
        .arg(&out)
        .arg(format!("./cmd/{name}"))
        .status()
        .with_context(|| format!("go build ./cmd/{name}: cannot start go"))?;
    if !status.success() {
        bail!(
            "go build ./cmd/{name} in {} failed ({status})",
            module.display()
        );
    }
    Ok(out)
}

/// What the end-to-end path runs beside a broker: YoMo's zipper (baseline), the stream
/// function, the bridge (baseline). Killed when dropped.
struct E2ePath(Vec<Child>);

impl Drop for E2ePath {
    fn drop(&mut self) {
        for c in self.0.iter_mut().rev() {
            c.kill();
        }
    }
}

/// Starts the end-to-end path beside `b` (y3, or mosquitto for the baseline).
fn start_e2e(b: &Broker, yomo_peer: &std::path::Path, bridge: &std::path::Path) -> Result<E2ePath> {
    let wait = Duration::from_secs(30);
    let mut path = E2ePath(Vec::new());
    let sfn_args = |addr: &str| -> Vec<String> {
        [
            "sfn",
            "--addr",
            addr,
            "--observe",
            E2E_IN_TAG,
            "--emit",
            E2E_OUT_TAG,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let zipper = match b.quic {
        Some(quic) => format!("127.0.0.1:{quic}"),
        None => {
            let args = ["zipper", "--addr", "127.0.0.1:0"].map(str::to_owned);
            let mut z = Child::spawn("yomo-zipper", yomo_peer, &args, None)?;
            let addr = z.expect("{\"listening\":\"", wait)?;
            path.0.push(z);
            addr.trim_end_matches("\"}").to_owned()
        }
    };
    let mut sfn = Child::spawn("yomo-sfn", yomo_peer, &sfn_args(&zipper), None)?;
    sfn.expect("{\"connected\"", wait)?;
    path.0.push(sfn);
    if b.quic.is_none() {
        let args = [
            "--mqtt".to_owned(),
            format!("127.0.0.1:{}", b.port),
            "--zipper".to_owned(),
            zipper,
            "--in-topic".to_owned(),
            E2E_IN.to_owned(),
            "--out-topic".to_owned(),
            E2E_OUT.to_owned(),
            "--in-tag".to_owned(),
            E2E_IN_TAG.to_owned(),
            "--out-tag".to_owned(),
            E2E_OUT_TAG.to_owned(),
        ];
        let mut bridge = Child::spawn("mqtt-bridge", bridge, &args, None)?;
        bridge.expect("{\"connected\"", wait)?;
        path.0.push(bridge);
    }
    // The function's subscription settles.
    std::thread::sleep(Duration::from_millis(300));
    Ok(path)
}

fn qos_of(q: u8) -> QoS {
    if q == 0 {
        QoS::AtMostOnce
    } else {
        QoS::AtLeastOnce
    }
}

/// One client connection, its event loop driven by a task; incoming publishes go to `tx`.
async fn connect(
    id: &str,
    port: u16,
    tx: Option<tokio::sync::mpsc::UnboundedSender<(Instant, bytes::Bytes)>>,
) -> Result<(
    AsyncClient,
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
)> {
    let mut options = MqttOptions::new(id, "127.0.0.1", port);
    options.set_keep_alive(Duration::from_secs(30));
    options.set_max_packet_size(1 << 20, 1 << 20);
    options.set_inflight(100);
    let (client, mut eventloop) = AsyncClient::new(options, 10_000);
    // TCP_NODELAY, as Go's and paho's clients set it: rumqttc leaves Nagle on, which holds
    // a QoS 0 publish (nothing comes back to carry the ACK) for the broker's delayed ACK,
    // tens of milliseconds, whichever broker it is.
    let mut network = eventloop.network_options();
    network.set_tcp_nodelay(true);
    eventloop.set_network_options(network);
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut ready_tx = Some(ready_tx);
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    if let Some(r) = ready_tx.take() {
                        let _ = r.send(());
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(_))) => {}
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    if let Some(tx) = &tx {
                        let _ = tx.send((Instant::now(), p.payload));
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    Ok((client, task, ready))
}

/// Publishes `n` messages of `size` bytes at `rate` (0: flat out); returns the run's figures.
async fn one_run(
    port: u16,
    (in_topic, out_topic): (&str, &str),
    size: usize,
    qos: u8,
    n: u64,
    rate: u64,
    epoch: Instant,
) -> Result<Run> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let tag = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (sub, sub_task, ready) = connect(&format!("lab-sub-{tag}"), port, Some(tx)).await?;
    tokio::time::timeout(Duration::from_secs(10), ready).await??;
    sub.subscribe(out_topic, qos_of(qos)).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (publisher, pub_task, ready) = connect(&format!("lab-pub-{tag}"), port, None).await?;
    tokio::time::timeout(Duration::from_secs(10), ready).await??;
    let started = Instant::now();
    let interval = (rate > 0).then(|| Duration::from_secs_f64(1.0 / rate as f64));
    let mut payload = vec![0u8; size.max(8)];
    for i in 0..n {
        if let Some(step) = interval {
            let at = started + step * i as u32;
            tokio::time::sleep_until(at.into()).await;
        }
        let stamp = epoch.elapsed().as_nanos() as u64;
        payload[..8].copy_from_slice(&stamp.to_le_bytes());
        publisher
            .publish(in_topic, qos_of(qos), false, payload.clone())
            .await?;
    }
    let mut latencies = Vec::with_capacity(n as usize);
    let mut last = started;
    let idle = Duration::from_secs(3);
    while (latencies.len() as u64) < n {
        match tokio::time::timeout(idle, rx.recv()).await {
            Ok(Some((at, p))) => {
                let stamp = u64::from_le_bytes(p[..8].try_into().unwrap_or_default());
                let sent = epoch + Duration::from_nanos(stamp);
                latencies.push(at.saturating_duration_since(sent).as_secs_f64() * 1e6);
                last = at;
            }
            _ => break,
        }
    }
    let _ = publisher.disconnect().await;
    let _ = sub.disconnect().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    pub_task.abort();
    sub_task.abort();
    let received = latencies.len() as u64;
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        if latencies.is_empty() {
            f64::NAN
        } else {
            latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1]
        }
    };
    let elapsed = last
        .saturating_duration_since(started)
        .as_secs_f64()
        .max(1e-9);
    Ok(Run {
        rate: received as f64 / elapsed,
        received,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
    })
}

/// One cell: a broker's port, the topics (publish, subscribe), payload size and QoS.
struct Cell<'a> {
    rt: &'a tokio::runtime::Runtime,
    opts: &'a Options,
    epoch: Instant,
    port: u16,
    topics: (&'a str, &'a str),
    size: usize,
    qos: u8,
    /// The processes that carry the messages (the broker; the end-to-end path's too):
    /// their CPU time per message is noted beside the client's.
    servers: Vec<u32>,
}

/// User + system CPU seconds of `pids` together (0 for one that is gone).
fn cpu_of(pids: &[u32]) -> f64 {
    pids.iter().filter_map(|&p| proc::cpu_seconds(p)).sum()
}

impl Cell<'_> {
    /// The cell's record for `row`: `runs` flat-out and paced runs, medians; failures
    /// and losses become notes.
    fn measure(&self, row: &str, case: &str, notes: &mut Vec<String>) -> Option<Record> {
        let (opts, rt) = (self.opts, self.rt);
        let mut flat = Vec::new();
        let mut paced = Vec::new();
        // CPU µs per message of the flat-out runs: the servers', the client's (this
        // process: rumqttc's publisher and subscriber).
        let (mut server_cpu, mut client_cpu) = (Vec::new(), Vec::new());
        for _ in 0..opts.load.runs {
            let run = |n, rate| {
                rt.block_on(one_run(
                    self.port,
                    self.topics,
                    self.size,
                    self.qos,
                    n,
                    rate,
                    self.epoch,
                ))
            };
            let before = (
                cpu_of(&self.servers),
                proc::own_cpu_seconds().unwrap_or(0.0),
            );
            match run(opts.load.messages, 0) {
                Ok(r) => {
                    let per = |s: f64| s * 1e6 / r.received.max(1) as f64;
                    server_cpu.push(per(cpu_of(&self.servers) - before.0));
                    client_cpu.push(per(proc::own_cpu_seconds().unwrap_or(0.0) - before.1));
                    flat.push(r);
                }
                Err(e) => notes.push(format!("{row}, {case}, flat out: {e:#}")),
            }
            match run(opts.load.paced, opts.load.rate) {
                Ok(r) => paced.push(r),
                Err(e) => notes.push(format!("{row}, {case}, paced: {e:#}")),
            }
        }
        if flat.is_empty() || paced.is_empty() {
            return None;
        }
        notes.push(format!(
            "{row}, {case}: CPU per message flat out (median) {:.1} µs in the broker{}, {:.1} µs in the client (rumqttc publisher + subscriber)",
            median(&server_cpu).0,
            if self.servers.len() > 1 { " and the processes of its path" } else { "" },
            median(&client_cpu).0,
        ));
        let lost = flat
            .iter()
            .map(|r| opts.load.messages - r.received.min(opts.load.messages))
            .max()
            .unwrap_or(0);
        if lost > 0 {
            notes.push(format!(
                "{row}, {case}: delivered {lost} fewer than the {} published in the flat-out run (dropped on the way)",
                opts.load.messages
            ));
        }
        let med = |f: &dyn Fn(&Run) -> f64, runs: &[Run]| {
            median(&runs.iter().map(f).collect::<Vec<_>>()).0
        };
        Some(
            Record::new("mqtt", row, case)
                .dim(Dim::Payload, self.size)
                .dim(Dim::Mode, format!("qos{}", self.qos))
                .dim(Dim::Rate, opts.load.rate as usize)
                .dim(Dim::Paced, opts.load.paced as usize)
                .metric(Metric::Messages, opts.load.messages as f64)
                .metric(Metric::MsgPerS, med(&|r| r.rate, &flat))
                .metric(Metric::P50Us, med(&|r| r.p50_us, &paced))
                .metric(Metric::P99Us, med(&|r| r.p99_us, &paced))
                .with_runs(flat.len()),
        )
    }
}

/// Runs the suite.
///
/// # Errors
/// Setup errors; a broker that fails becomes a note.
pub fn run(opts: &Options, bar: &indicatif::ProgressBar) -> Result<Results> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let epoch = Instant::now();
    let mut records = Vec::new();
    let mut notes = Vec::new();
    let load_before = load_average();
    let brokers: Vec<&str> = BROKERS
        .iter()
        .copied()
        .filter(|b| opts.only.is_empty() || opts.only.iter().any(|o| b.contains(o.as_str())))
        .collect();
    let go = |name: &str| -> Result<PathBuf> {
        let dir = opts
            .yomo_dir
            .as_ref()
            .ok_or_else(|| anyhow!("no --yomo-dir"))?;
        go_build(dir, name)
    };
    let e2e_programs = match opts.yomo_dir {
        None => None,
        Some(_) => match go("yomo-peer").and_then(|p| Ok((p, go("mqtt-bridge")?))) {
            Ok(programs) => Some(programs),
            Err(e) => {
                notes.push(format!("end-to-end cases not run: {e:#}"));
                None
            }
        },
    };
    for broker in brokers {
        let mut b = match start(broker, &opts.programs) {
            Ok(b) => b,
            Err(e) => {
                notes.push(format!("{broker}: {e:#}"));
                continue;
            }
        };
        for &size in &opts.sizes {
            for &qos in &opts.qos {
                let case = format!("{size} B, QoS {qos}");
                bar.set_message(format!("mqtt {broker}: {case}"));
                let topics = ("lab/t", "lab/t");
                let cell = Cell {
                    rt: &rt,
                    opts,
                    epoch,
                    port: b.port,
                    topics,
                    size,
                    qos,
                    servers: vec![b.child.pid()],
                };
                if let Some(r) = cell.measure(broker, &case, &mut notes) {
                    records.push(r);
                }
                bar.inc(1);
            }
        }
        // The end-to-end path: y3 alone, or Mosquitto with the bridge and YoMo's zipper.
        let e2e_row = match broker {
            "y3" => Some("y3"),
            "mosquitto" => Some(E2E_BASELINE),
            _ => None,
        };
        if let (Some(row), Some((yomo_peer, bridge))) = (e2e_row, &e2e_programs) {
            bar.set_message(format!("mqtt {row}: end to end"));
            match start_e2e(&b, yomo_peer, bridge) {
                Ok(path) => {
                    let servers: Vec<u32> = std::iter::once(b.child.pid())
                        .chain(path.0.iter().map(Child::pid))
                        .collect();
                    for &size in &opts.sizes {
                        let case = format!("e2e {size} B, QoS 0");
                        let topics = (E2E_IN, E2E_OUT);
                        let cell = Cell {
                            rt: &rt,
                            opts,
                            epoch,
                            port: b.port,
                            topics,
                            size,
                            qos: 0,
                            servers: servers.clone(),
                        };
                        if let Some(r) = cell.measure(row, &case, &mut notes) {
                            records.push(r);
                        }
                    }
                }
                Err(e) => notes.push(format!("{row}, end to end: {e:#}")),
            }
        }
        b.child.kill();
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    let versions = vec![
        (
            "rumqttc".to_string(),
            crate::net::report::lock_version("rumqttc"),
        ),
        (
            "mosquitto".to_string(),
            proc::which("mosquitto")
                .or_else(|| Some(PathBuf::from("/usr/sbin/mosquitto")))
                .and_then(|p| proc::version_of(&p, &["-h"]))
                .unwrap_or_default(),
        ),
    ];
    notes.push(format!(
        "host load (1-minute average) {} at the start, {} at the end, on {} cores: other \
         work shared the machine, so absolute figures are low; the brokers ran one after \
         another in the same run, so the ratios compare them under similar load",
        load_before,
        load_average(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    Ok(Results::of(
        crate::net::meta(
            "mqtt",
            &opts.command,
            opts.quick,
            "none: the brokers and the client process share every core".to_string(),
            versions,
        ),
        records,
        notes,
    ))
}

/// The host's 1-minute load average (`/proc/loadavg`), or `?`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
