//! `y3 demo`: the whole data plane in one process, with nothing to configure.
//!
//! ```text
//!  noise-sensor-1 ──0x10 NoiseData──▶ router ──▶ noise-alert (observes 0x10/0x11 only)
//!                                        ▲ │            │ noise > threshold
//!  alert-printer ◀──0x20 Alert───────────┘ │            │ (emits 0x20)
//!  loud-recorder ◀──0x10, only noise > threshold: a router-side filter
//! ```
//!
//! The recorder declares the content filter `0x10/0x11:f32 > threshold` in its handshake
//! (`spec/filters.md`); the router evaluates it per reading and never sends it the quiet
//! ones. The summary reports how many frames the filter kept off the wire.
//!
//! The reading is YoMo's example `NoiseData{Noise f32 0x11, Time i64 0x12, From string
//! 0x13}` under key 0x10, written with `#[derive(y3::Message)]`. The stream function pulls
//! the noise value out with the streaming [`y3::Observer`] without decoding the rest.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Args;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use y3::typed::Message;
use y3::{Config, Dialect, Observer};
use y3_router::{Router, RouterConfig, RouterHandle};
use y3_transport::metadata::{self, Metadata};
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Transport};
use y3_transport::Data;

use crate::send::TransportArg;

/// Data tag of readings.
pub const READINGS: u32 = 0x10;
/// Data tag of alerts.
pub const ALERTS: u32 = 0x20;

/// A noise reading, as in YoMo's example.
#[derive(Debug, Default, Clone, PartialEq, y3::Message)]
pub struct NoiseData {
    /// Sound level in dB.
    #[y3(tag = 0x11)]
    pub noise: f32,
    /// Unix time in milliseconds.
    #[y3(tag = 0x12)]
    pub time: i64,
    /// The sensor.
    #[y3(tag = 0x13)]
    pub from: String,
}

/// What the stream function emits.
#[derive(Debug, Default, Clone, PartialEq, y3::Message)]
pub struct Alert {
    /// The reading's noise.
    #[y3(tag = 0x21)]
    pub noise: f32,
    /// The threshold it crossed.
    #[y3(tag = 0x22)]
    pub threshold: f32,
}

/// Options of `y3 demo`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Run a router, a noise sensor, a stream function and a sink in one process",
    long_about = "Start an embedded router, then a source emitting noise-sensor readings as Y3
(NoiseData{Noise f32 0x11, Time i64 0x12, From string 0x13} under 0x10), a stream function
that observes only the noise field with the y3 observer and emits an alert above a
threshold, and a sink printing the alerts with their end-to-end latency. Stops by itself
after --readings readings and prints a summary. Nothing to configure, nothing external.",
    after_help = "Examples:
  y3 demo
  y3 demo --readings 200 --interval-ms 10 --threshold 55 --transport tcp"
)]
pub struct DemoArgs {
    /// Readings to send.
    #[arg(long, default_value_t = 40)]
    pub readings: u64,
    /// Milliseconds between readings.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub interval_ms: u64,
    /// Alert threshold in dB.
    #[arg(long, default_value_t = 60.0)]
    pub threshold: f32,
    /// Transport between the clients and the router.
    #[arg(long, value_enum, default_value_t = TransportArg::Quic)]
    pub transport: TransportArg,
    /// Print only the summary.
    #[arg(long)]
    pub quiet: bool,
}

/// A deterministic noise sensor: a quiet room with occasional loud moments.
struct Sensor(u64);

impl Sensor {
    fn next_unit(&mut self) -> f32 {
        // 64-bit LCG (Knuth's MMIX constants); the top 24 bits are uniform enough here.
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }

    fn read(&mut self) -> f32 {
        let base = 42.0 + 10.0 * self.next_unit();
        let spike = if self.next_unit() < 0.3 {
            30.0 * self.next_unit()
        } else {
            0.0
        };
        ((base + spike) * 10.0).round() / 10.0
    }
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The stream function's work: the noise field alone, via the observer.
fn noise_of(observer: &mut Observer, payload: &[u8]) -> Option<f32> {
    observer.reset();
    let fed = observer.feed(payload).ok()?;
    fed.observed?.f32().ok()
}

/// Percentile of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Runs `y3 demo`.
///
/// # Errors
/// Router start and connection errors.
pub fn run(args: &DemoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    crate::logging::init("warn", y3_router::config::LogFormat::Text)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(demo(args, out))
}

/// The demo, phase by phase: the embedded router and the banner; the stream function,
/// the alert printer and the loud recorder subscribed; the sensor's readings sent while
/// lines print; the last alerts awaited; the router shut down; the summary.
async fn demo(args: &DemoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut config = RouterConfig::ephemeral();
    config.shutdown.drain_timeout_ms = 2000;
    config.shutdown.quiet_ms = 20;
    let router = Router::start(config).await?;
    let clients = Clients::of(&router, args.transport)?;
    let loud_filter = format!("0x10/0x11:f32 > {}", args.threshold);
    banner(out, args, clients.addr, &loud_filter)?;

    // Who sent what when, for the latency of each alert.
    let sent_at: SentAt = Arc::default();
    let (lines, mut printed) = mpsc::unbounded_channel::<String>();
    let (function, stop_function) = spawn_function(&clients, args.threshold)?;
    let printer = Printer::spawn(&clients, &sent_at, &lines, args.quiet).await?;
    let (recorder_task, recorded) = spawn_recorder(&clients, &loud_filter).await?;
    // Wait until the function and sinks are subscribed before the first reading.
    let started = Instant::now();
    while router.stats().connections < 3 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut source_task = spawn_source(&clients, args, &sent_at, &lines);
    drop(lines);
    let loud = loop {
        tokio::select! {
            Some(line) = printed.recv() => {
                writeln!(out, "{line}")?;
                out.flush()?;
            }
            result = &mut source_task => break result??,
        }
    };
    let elapsed = started.elapsed();
    // Give the last alerts time to arrive (bounded), then stop everything.
    let deadline = Instant::now() + Duration::from_secs(3);
    // The function gets every reading, the printer every alert, the recorder every loud one.
    while router.stats().frames_out < args.readings + 2 * loud && Instant::now() < deadline {
        while let Ok(line) = printed.try_recv() {
            writeln!(out, "{line}")?;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_function.send(());
    let _ = tokio::time::timeout(Duration::from_secs(3), function).await;
    let filtered = router
        .metrics()
        .filter_stats(READINGS, &loud_filter)
        .unwrap_or_default();
    let stats = router.shutdown().await;
    printer.task.abort();
    recorder_task.abort();
    let mut latencies = printer
        .latencies
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    while let Ok(line) = printed.try_recv() {
        writeln!(out, "{line}")?;
    }
    latencies.sort();
    let summary = Summary {
        elapsed,
        loud,
        latencies,
        recorded: recorded.load(Ordering::Relaxed),
        filtered,
        stats,
    };
    summary.write(out, args)
}

/// When each reading (by number) was sent, for the latency of its alert.
type SentAt = Arc<Mutex<HashMap<u64, Instant>>>;

/// How the demo's clients reach the embedded router.
struct Clients {
    addr: std::net::SocketAddr,
    transport: Transport,
    trust: y3_transport::tls::Trust,
}

impl Clients {
    /// The router's listener for `transport` (QUIC, else TCP) and its certificate.
    fn of(router: &RouterHandle, transport: TransportArg) -> anyhow::Result<Clients> {
        let transport: Transport = transport.into();
        let addr = match transport {
            Transport::Quic => router.quic_addr(),
            _ => router.tcp_addr(),
        }
        .ok_or_else(|| anyhow::anyhow!("listener missing"))?;
        Ok(Clients {
            addr,
            transport,
            trust: router.trust(),
        })
    }

    /// The options of client `name`.
    fn options(&self, name: &str) -> ClientOptions {
        ClientOptions::new(self.addr)
            .transport(self.transport)
            .trust(self.trust.clone())
            .name(name)
    }
}

/// Prints who takes part: the router's address, the source, the function and both sinks.
fn banner(
    out: &mut dyn Write,
    args: &DemoArgs,
    addr: std::net::SocketAddr,
    loud_filter: &str,
) -> anyhow::Result<()> {
    let transport_name = match args.transport {
        TransportArg::Tcp => "TCP",
        TransportArg::Tls => "TLS over TCP",
        TransportArg::Quic => "QUIC",
    };
    let threshold = args.threshold;
    writeln!(
        out,
        "y3 demo: embedded router on {transport_name} {addr}\n  \
         source    noise-sensor-1  sends NoiseData{{Noise f32 0x11, Time i64 0x12, From string 0x13}} under tag 0x{READINGS:02x}\n  \
         function  noise-alert     observes only 0x10/0x11 (the noise field), emits tag 0x{ALERTS:02x} above {threshold:.1} dB\n  \
         sink      alert-printer   observes tag 0x{ALERTS:02x} and prints end-to-end latency\n  \
         sink      loud-recorder   observes tag 0x{READINGS:02x} with the router-side filter `{loud_filter}`\n"
    )?;
    out.flush()?;
    Ok(())
}

/// The stream function's task (it ends with the function's last transport error, if any).
type FunctionTask = JoinHandle<Result<(), y3_transport::TransportError>>;

/// Starts the stream function `noise-alert`: observes the noise field of each reading and
/// emits an alert above `threshold`, until the returned sender fires.
fn spawn_function(
    clients: &Clients,
    threshold: f32,
) -> anyhow::Result<(FunctionTask, oneshot::Sender<()>)> {
    let (stop_function, stopped) = oneshot::channel::<()>();
    let mut observer = Observer::new(Config::DEFAULT, &[&[0x10, 0x11]])?;
    let f = StreamFunction::new(clients.options("noise-alert"), &[READINGS]);
    let task = tokio::spawn(f.run_until(
        move |data| {
            let alert = noise_of(&mut observer, &data.payload)
                .filter(|&noise| noise > threshold)
                .and_then(|noise| {
                    Alert { noise, threshold }
                        .to_packet(ALERTS, Dialect::Golang)
                        .ok()
                })
                .map(|packet| (ALERTS, Bytes::from(packet)));
            async move { alert }
        },
        async move {
            let _ = stopped.await;
        },
    ));
    Ok((task, stop_function))
}

/// The sink `alert-printer`: each alert's end-to-end latency, printed unless quiet.
struct Printer {
    task: JoinHandle<()>,
    latencies: Arc<Mutex<Vec<Duration>>>,
}

impl Printer {
    /// Subscribes the printer to the alerts; it prints on `lines`.
    async fn spawn(
        clients: &Clients,
        sent_at: &SentAt,
        lines: &mpsc::UnboundedSender<String>,
        quiet: bool,
    ) -> anyhow::Result<Printer> {
        let mut sink = Sink::connect(clients.options("alert-printer"), &[ALERTS]).await?;
        let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let (sent_at, lines) = (sent_at.clone(), lines.clone());
        let all = latencies.clone();
        let task = tokio::spawn(async move {
            while let Some(Ok(data)) = sink.recv().await {
                let now = Instant::now();
                // The reading's number travels as its transaction id: the function keeps
                // the metadata of the reading on the alert.
                let id = reading_number(&data);
                let sent = sent_at.lock().ok().and_then(|mut m| m.remove(&id));
                let latency = sent.map(|t| now - t).unwrap_or_default();
                if let Ok(mut all) = all.lock() {
                    all.push(latency);
                }
                let alert = y3::decode(&data.payload)
                    .ok()
                    .and_then(|p| Alert::from_packet(&p).ok())
                    .unwrap_or_default();
                if !quiet {
                    let _ = lines.send(format!(
                        "  ALERT   #{:<4} {:.1} dB > {:.1} dB   end-to-end {}",
                        id,
                        alert.noise,
                        alert.threshold,
                        ms(latency)
                    ));
                }
            }
        });
        Ok(Printer { task, latencies })
    }
}

/// The sink `loud-recorder`: only loud readings reach it, filtered by the router with
/// `loud_filter`; it counts them.
async fn spawn_recorder(
    clients: &Clients,
    loud_filter: &str,
) -> anyhow::Result<(JoinHandle<()>, Arc<AtomicU64>)> {
    let recorded = Arc::new(AtomicU64::new(0));
    let opts = clients
        .options("loud-recorder")
        .filter(READINGS, loud_filter.to_owned());
    let mut recorder = Sink::connect(opts, &[READINGS]).await?;
    let count = recorded.clone();
    let task = tokio::spawn(async move {
        // Every reading it gets is loud: the router checked (the pipeline test counts).
        while let Some(Ok(_)) = recorder.recv().await {
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok((task, recorded))
}

/// The source `noise-sensor-1`: `args.readings` readings, one per interval, each numbered
/// by its transaction id; prints each (unless quiet) and ends with how many were loud.
fn spawn_source(
    clients: &Clients,
    args: &DemoArgs,
    sent_at: &SentAt,
    lines: &mpsc::UnboundedSender<String>,
) -> JoinHandle<anyhow::Result<u64>> {
    let (sent_at, lines) = (sent_at.clone(), lines.clone());
    let (readings, interval, quiet) = (args.readings, args.interval_ms, args.quiet);
    let threshold = args.threshold;
    let opts = clients.options("noise-sensor-1");
    tokio::spawn(async move {
        let mut source = Source::connect(opts).await?;
        let mut sensor = Sensor(0x5933_2021);
        let mut loud = 0u64;
        let mut ticker = tokio::time::interval(Duration::from_millis(interval.max(1)));
        for i in 0..readings {
            ticker.tick().await;
            let reading = NoiseData {
                noise: sensor.read(),
                time: unix_ms(),
                from: "noise-sensor-1".into(),
            };
            let payload = reading.to_packet(READINGS, Dialect::Golang)?;
            if reading.noise > threshold {
                loud += 1;
            }
            // Transaction ids are ours to choose: 1, 2, 3...; record the send time
            // first so that even the fastest alert finds it, and print before the
            // alert can.
            let id = i + 1;
            if !quiet {
                let mark = if reading.noise > threshold {
                    "  (loud)"
                } else {
                    ""
                };
                let _ = lines.send(format!("reading #{id:<4} {:>5.1} dB{mark}", reading.noise));
            }
            if let Ok(mut map) = sent_at.lock() {
                map.insert(id, Instant::now());
            }
            let tid = id.to_string();
            let md =
                Metadata::from_pairs([(metadata::SOURCE_ID, source.id()), (metadata::TID, &tid)]);
            source
                .send_data(Data::new(READINGS, payload).with_metadata(md))
                .await?;
            source.flush().await?;
        }
        source.close().await?;
        anyhow::Ok(loud)
    })
}

/// What the demo's summary reports.
struct Summary {
    /// From the first reading to the source's end.
    elapsed: Duration,
    /// Readings above the threshold.
    loud: u64,
    /// Each alert's end-to-end latency, sorted.
    latencies: Vec<Duration>,
    /// Readings the loud recorder received.
    recorded: u64,
    /// The recorder's filter, as the router counted it.
    filtered: y3_router::metrics::FilterStats,
    /// The router's totals at shutdown.
    stats: y3_router::Stats,
}

impl Summary {
    /// Writes the summary: readings and alerts, latency percentiles, the filter's work and
    /// the router's frames.
    fn write(&self, out: &mut dyn Write, args: &DemoArgs) -> anyhow::Result<()> {
        let (sent_total, loud, threshold) = (args.readings, self.loud, args.threshold);
        let (latencies, filtered, stats) = (&self.latencies, &self.filtered, &self.stats);
        let received = latencies.len() as u64;
        writeln!(
            out,
            "\nsummary: {sent_total} readings sent in {:.1} s, {loud} above {threshold:.1} dB, {received} alerts received ({} missing)",
            self.elapsed.as_secs_f64(),
            loud.saturating_sub(received)
        )?;
        if received > 0 {
            writeln!(
                out,
                "         end-to-end latency (source → router → function → router → sink): p50 {}, p99 {}, max {}",
                ms(percentile(latencies, 50.0)),
                ms(percentile(latencies, 99.0)),
                ms(*latencies.last().unwrap_or(&Duration::ZERO)),
            )?;
        }
        writeln!(
            out,
            "         loud-recorder: {} loud readings received; its router-side filter kept {} of {} readings off the wire",
            self.recorded,
            filtered.withheld,
            filtered.matched + filtered.withheld,
        )?;
        writeln!(
            out,
            "         router: {} frames in, {} frames out, {} dropped",
            stats.frames_in,
            stats.frames_out,
            stats.total_drops()
        )?;
        out.flush()?;
        Ok(())
    }
}

/// The reading number an alert carries as its `yomo-tid` (0 when absent).
fn reading_number(data: &Data) -> u64 {
    data.metadata
        .get(metadata::TID)
        .ok()
        .flatten()
        .and_then(|tid| tid.parse().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_reads_only_the_noise_field() {
        let reading = NoiseData {
            noise: 40.0,
            time: 1600000000000,
            from: "127.0.0.1".into(),
        };
        let payload = reading.to_packet(READINGS, Dialect::Golang).unwrap();
        // YoMo's example bytes.
        assert_eq!(
            hex::encode(&payload),
            "9017110242201206aec8bbba800013093132372e302e302e31"
        );
        let mut observer = Observer::new(Config::DEFAULT, &[&[0x10, 0x11]]).unwrap();
        assert_eq!(noise_of(&mut observer, &payload), Some(40.0));
        assert_eq!(noise_of(&mut observer, &payload), Some(40.0), "reusable");
        assert_eq!(noise_of(&mut observer, b"\x01\x7f"), None);
    }

    #[test]
    fn sensor_is_deterministic_and_plausible() {
        let mut a = Sensor(1);
        let mut b = Sensor(1);
        for _ in 0..100 {
            let v = a.read();
            assert_eq!(v, b.read());
            assert!((42.0..=82.0).contains(&v), "{v}");
        }
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&sorted, 99.0), Duration::from_millis(99));
    }
}
