//! Source → stream function → sink through an embedded router, all in one process.
//!
//! The source sends noise readings on tag 0x33; the function forwards the loud ones
//! (noise > 60) on tag 0x34; the sink prints them.
//!
//! ```sh
//! cargo run -p y3-examples --bin pipeline
//! ```

use std::time::Duration;

use y3_router::{Router, RouterConfig};
use y3_transport::sdk::{ClientOptions, Sink, Source, StreamFunction};

const READINGS: u32 = 0x33;
const ALERTS: u32 = 0x34;

/// A reading: node 0x10 holding the noise level under key 0x11.
#[derive(Debug, Default, PartialEq, y3::Message)]
struct Reading {
    #[y3(tag = 0x11)]
    noise: f32,
}

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

    let mut sink = Sink::connect(ClientOptions::new(addr).name("alerts"), &[ALERTS]).await?;
    let function = StreamFunction::new(ClientOptions::new(addr).name("loud"), &[READINGS]);
    let running = tokio::spawn(function.run(|data| async move {
        let noise = y3::get(&data.payload, &[0x10, 0x11]).ok()??.f32().ok()?;
        (noise > 60.0).then_some((ALERTS, data.payload))
    }));
    // Give the function a moment to subscribe before the source sends.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut source = Source::connect(ClientOptions::new(addr).name("meter")).await?;
    let levels = [35.0f32, 72.5, 41.0, 88.0, 60.0, 61.5];
    for noise in levels {
        let packet = y3::typed::to_packet(0x10, &Reading { noise }, y3::Dialect::Golang)?;
        source.send(READINGS, packet).await?;
    }
    source.flush().await?;

    let loud = levels.iter().filter(|&&n| n > 60.0).count();
    for _ in 0..loud {
        let data = tokio::time::timeout(Duration::from_secs(5), sink.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("sink closed"))??;
        let noise = y3::get(&data.payload, &[0x10, 0x11])?
            .ok_or_else(|| anyhow::anyhow!("no noise"))?
            .f32()?;
        println!(
            "alert: noise {noise} (tid {:?})",
            data.metadata.get("yomo-tid").ok().flatten()
        );
    }
    println!("{loud} of {} readings were loud", levels.len());

    source.close().await?;
    sink.close().await;
    running.abort();
    router.shutdown().await;
    Ok(())
}
