//! The SDK's cost per message: a [`Source`] sends `N` frames through a router to a [`Sink`],
//! both in this process; the router runs elsewhere (`y3 serve`), so that everything this
//! process executes is the clients' work.
//!
//! ```text
//!  this process:  Source ──tcp|quic──▶ y3 serve (another process) ──▶ Sink   (N frames)
//! ```
//!
//! Run it under `valgrind --tool=callgrind` twice, with two frame counts, and the
//! difference of the instruction totals over the difference of the counts is the SDK's
//! instructions per frame, sent and received, with connection setup and teardown cancelled
//! out (`scripts/sdk-cost.sh` does exactly that). Wall time under a loaded machine is noise;
//! instruction counts are not.
//!
//! ```text
//! cargo run --release -p y3-transport --example sdk_cost -- ADDR FRAMES SIZE [tcp|quic] [THREADS]
//! ```
//!
//! `THREADS` 0 (the default) runs one current-thread runtime; more runs a multi-thread
//! runtime with that many workers (as the lab's clients do).

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use y3_transport::sdk::{ClientOptions, Sink, Source, Transport};
use y3_transport::tls::Trust;

const TAG: u32 = 0x10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sdk_cost ADDR FRAMES SIZE [tcp|quic] [THREADS]";
    let addr: SocketAddr = args.first().ok_or(usage)?.parse()?;
    let frames: u64 = args.get(1).ok_or(usage)?.parse()?;
    let size: usize = args.get(2).ok_or(usage)?.parse()?;
    let transport = match args.get(3).map_or("tcp", String::as_str) {
        "tcp" => Transport::Tcp,
        "quic" => Transport::Quic,
        other => return Err(format!("unknown transport {other:?}: {usage}").into()),
    };
    let threads: usize = args.get(4).map_or(Ok(0), |t| t.parse())?;
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    };
    rt.block_on(run(addr, transport, frames, size))
}

async fn run(
    addr: SocketAddr,
    transport: Transport,
    frames: u64,
    size: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let options = |name: &str| {
        let mut o = ClientOptions::new(addr)
            .transport(transport)
            .trust(Trust::Insecure)
            .name(name);
        o.send_queue = 4096;
        o
    };
    let mut sink = Sink::connect(options("cost-sink"), &[TAG]).await?;
    let mut source = Source::connect(options("cost-source")).await?;
    // The subscription is in place once a probe comes through.
    let probe = Bytes::from_static(b"probe");
    loop {
        source.send(TAG, probe.clone()).await?;
        source.flush().await?;
        let got = tokio::time::timeout(std::time::Duration::from_millis(20), sink.recv()).await;
        if let Ok(got) = got {
            got.ok_or("the sink ended")??;
            break;
        }
    }
    // Probes still in flight are counted out: their payload is `probe`.
    let payload = Bytes::from(vec![b'm'; size]);
    let start = Instant::now();
    let recv = async {
        let mut n = 0u64;
        while n < frames {
            let data = sink.recv().await.ok_or("the sink ended")??;
            if data.payload.len() == size && data.payload != probe {
                n += 1;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    };
    let send = async {
        for _ in 0..frames {
            source.send(TAG, payload.clone()).await?;
        }
        source.flush().await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    };
    let (sent, received) = tokio::join!(send, recv);
    sent?;
    received?;
    let elapsed = start.elapsed();
    println!(
        "frames {frames} size {size} seconds {:.3} msg/s {:.0}",
        elapsed.as_secs_f64(),
        frames as f64 / elapsed.as_secs_f64()
    );
    source.close().await?;
    sink.close().await;
    Ok(())
}
