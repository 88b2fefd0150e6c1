//! A stream function writing many outputs per input, and one to a target, through an
//! embedded router (YoMo's `ctx.Write` in a loop and `ctx.WriteWithTarget`).
//!
//! The source sends batches on tag 0x40, each a list of readings one per line; the
//! splitter writes every reading on tag 0x41 and the whole batch, on tag 0x42, to the
//! function wanting target "audit" only. Another function wanting target "other" gets
//! nothing.
//!
//! ```sh
//! cargo run -p y3-examples --bin fan-out
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use y3_router::{Router, RouterConfig};
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction, Writer};
use y3_transport::Data;

const BATCHES: u32 = 0x40;
const READINGS: u32 = 0x41;
const AUDIT: u32 = 0x42;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A router on free loopback ports: TCP only, no metrics listener.
    let mut config = RouterConfig::default();
    config.listen.tcp = "127.0.0.1:0".into();
    config.listen.quic = String::new();
    config.listen.metrics = String::new();
    config.tls.dev_cert_out = Default::default();
    let router = Router::start(config).await?;
    let addr = router.tcp_addr().expect("TCP is on");
    println!("router on {addr}");

    let mut readings =
        Sink::connect(ClientOptions::new(addr).name("readings"), &[READINGS]).await?;
    // Functions wanting a target: only outputs written to that target reach them.
    let audited = Arc::new(AtomicUsize::new(0));
    let mut auditors = Vec::new();
    for (target, count) in [("audit", audited.clone()), ("other", Arc::default())] {
        let options = ClientOptions::new(addr).name(target).wanted_target(target);
        let function = StreamFunction::new(options, &[AUDIT]);
        auditors.push((
            count.clone(),
            tokio::spawn(function.run(move |_| {
                count.fetch_add(1, Ordering::Relaxed);
                async { None }
            })),
        ));
    }
    let splitter = StreamFunction::new(ClientOptions::new(addr).name("splitter"), &[BATCHES]);
    let running = tokio::spawn(
        splitter.run_with_writer(|data: Data, out: Writer| async move {
            for line in data.payload.split(|b| *b == b'\n') {
                if let Err(e) = out.write(READINGS, line.to_vec()).await {
                    eprintln!("splitter: {e}"); // the connection is gone
                    return;
                }
            }
            if let Err(e) = out.write_with_target(AUDIT, data.payload, "audit").await {
                eprintln!("splitter: {e}");
            }
        }),
    );
    // Give the functions a moment to subscribe before the source sends.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut source = Source::connect(ClientOptions::new(addr).name("meter")).await?;
    let batches: Vec<String> = (0..3)
        .map(|b| {
            let lines: Vec<String> = (0..10).map(|i| format!("reading {b}-{i}")).collect();
            lines.join("\n")
        })
        .collect();
    for batch in &batches {
        source.send(BATCHES, batch.clone().into_bytes()).await?;
    }
    source.flush().await?;

    let want = batches.len() * 10;
    for _ in 0..want {
        tokio::time::timeout(Duration::from_secs(5), readings.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("sink closed"))??;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    println!("{want} readings from {} batches", batches.len());
    let counts: Vec<usize> = auditors
        .iter()
        .map(|(count, _)| count.load(Ordering::Relaxed))
        .collect();
    println!("audit got {} batches, other got {}", counts[0], counts[1]);
    anyhow::ensure!(audited.load(Ordering::Relaxed) == batches.len() && counts[1] == 0);

    source.close().await?;
    readings.close().await;
    running.abort();
    for (_, task) in auditors {
        task.abort();
    }
    router.shutdown().await;
    Ok(())
}
