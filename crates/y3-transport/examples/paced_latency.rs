//! One-way latency of paced frames through a router, QUIC and TCP in the same run: the probe
//! behind `y3-lab net yomo`'s paced cells, small enough to build in release beside `y3`.
//!
//! ```text
//!  thread 1: Source ──tcp|quic──▶ y3 serve (another process) ──▶ Sink :thread 2
//!            [seq u64][sent ns u64][filler]                 receipt − sent ns
//! ```
//!
//! Each client runs on its own thread with a current-thread runtime (the lab runs them as
//! processes). The source sends `COUNT` frames of `SIZE` bytes at `RATE` msg/s, paced by
//! tokio's timer (bursts of up to RATE/1000, as the lab's source); the sink reports
//! p50/p99/p999/max. `ROUNDS` rounds alternate the transports, so that their ratios are
//! taken under the same load. With `PACED_SLOW` set, the sink prints every frame that took
//! over 5 ms (sequence number, latency) to stderr: a stall at the start of a connection,
//! one after an idle time and a backlog draining look different.
//!
//! ```text
//! cargo run --release -p y3-transport --example paced_latency -- ADDR_TCP ADDR_QUIC COUNT SIZE RATE [ROUNDS]
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use y3_transport::sdk::{ClientOptions, Sink, Source, Transport};
use y3_transport::tls::Trust;

/// The tag of every frame.
const TAG: u32 = 0x33;

/// Bytes of the stamp: sequence number and send time.
const STAMP: usize = 16;

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn options(addr: SocketAddr, transport: Transport, name: &str) -> ClientOptions {
    let mut o = ClientOptions::new(addr)
        .transport(transport)
        .trust(Trust::Insecure)
        .name(name);
    o.send_queue = 4096;
    o
}

type Error = Box<dyn std::error::Error + Send + Sync>;

fn current_thread() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// One paced run; the sorted latencies in ns.
fn run(
    addr: SocketAddr,
    transport: Transport,
    count: u64,
    size: usize,
    rate: f64,
) -> Result<Vec<u64>, Error> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let sink = std::thread::spawn(move || -> Result<Vec<u64>, Error> {
        current_thread()?.block_on(async move {
            let mut sink = Sink::connect(options(addr, transport, "paced-sink"), &[TAG]).await?;
            let _ = ready_tx.send(());
            let mut latencies = Vec::with_capacity(count as usize);
            while (latencies.len() as u64) < count {
                let got = tokio::time::timeout(Duration::from_secs(20), sink.recv()).await;
                let data = got
                    .map_err(|_| "sink: nothing for 20 s")?
                    .ok_or("sink ended")??;
                let p = &data.payload;
                if p.len() >= STAMP {
                    let sent = u64::from_le_bytes(p[8..16].try_into().unwrap_or_default());
                    let seq = u64::from_le_bytes(p[..8].try_into().unwrap_or_default());
                    let latency = unix_ns().saturating_sub(sent);
                    if std::env::var_os("PACED_SLOW").is_some() && latency > 5_000_000 {
                        eprintln!("slow: seq {seq} {} µs", latency / 1000);
                    }
                    latencies.push(latency);
                }
            }
            sink.close().await;
            latencies.sort_unstable();
            Ok(latencies)
        })
    });
    ready_rx.recv()?;
    current_thread()?.block_on(async {
        let mut source = Source::connect(options(addr, transport, "paced-source")).await?;
        let start = Instant::now();
        for i in 0..count {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
            let mut p = vec![0u8; size.max(STAMP)];
            p[..8].copy_from_slice(&i.to_le_bytes());
            p[8..16].copy_from_slice(&unix_ns().to_le_bytes());
            source.send(TAG, Bytes::from(p)).await?;
        }
        source.flush().await?;
        // Stay connected until the sink has everything.
        while !sink.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        source.close().await?;
        Ok::<_, Error>(())
    })?;
    sink.join().map_err(|_| "sink panicked")?
}

fn rank(sorted: &[u64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).saturating_sub(1);
    sorted
        .get(i.min(sorted.len().saturating_sub(1)))
        .map_or(0.0, |&ns| ns as f64 / 1000.0)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: paced_latency ADDR_TCP ADDR_QUIC COUNT SIZE RATE [ROUNDS]";
    let tcp: SocketAddr = args.first().ok_or(usage)?.parse()?;
    let quic: SocketAddr = args.get(1).ok_or(usage)?.parse()?;
    let count: u64 = args.get(2).ok_or(usage)?.parse()?;
    let size: usize = args.get(3).ok_or(usage)?.parse()?;
    let rate: f64 = args.get(4).ok_or(usage)?.parse()?;
    let rounds: u32 = args.get(5).map_or(Ok(1), |r| r.parse())?;
    for round in 1..=rounds {
        for (name, addr, transport) in [
            ("tcp", tcp, Transport::Tcp),
            ("quic", quic, Transport::Quic),
        ] {
            let l = run(addr, transport, count, size, rate)?;
            println!(
                "round {round} {name:4} size {size} rate {rate}: p50 {:.0} µs p99 {:.0} µs p999 {:.0} µs max {:.0} µs",
                rank(&l, 0.5),
                rank(&l, 0.99),
                rank(&l, 0.999),
                rank(&l, 1.0)
            );
        }
    }
    Ok(())
}
