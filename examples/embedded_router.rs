//! A router embedded in your own program: the operator's defaults, its own listeners, its
//! statistics, and a graceful stop. Runs until Ctrl-C, or for the seconds given.
//!
//! ```sh
//! cargo run -p y3-examples --bin embedded-router          # until Ctrl-C
//! cargo run -p y3-examples --bin embedded-router -- 2     # two seconds
//! ```

use std::time::Duration;

use y3_router::{Router, RouterConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: Option<u64> = std::env::args().nth(1).map(|s| s.parse()).transpose()?;
    let mut config = RouterConfig::default();
    // Free ports, so that the example runs beside a `y3 serve` on the defaults.
    config.listen.tcp = "127.0.0.1:0".into();
    config.listen.quic = "127.0.0.1:0".into();
    config.listen.metrics = "127.0.0.1:0".into();
    config.tls.dev_cert_out = Default::default();
    let router = Router::start(config).await?;
    println!(
        "tcp {:?}, quic {:?}, metrics {:?}",
        router.tcp_addr(),
        router.quic_addr(),
        router.metrics_addr()
    );
    println!(
        "clients pin the dev certificate: --pin {}",
        y3_transport::tls::fingerprint_hex(&router.identity().fingerprint())
    );
    match seconds {
        Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
        None => tokio::signal::ctrl_c().await?,
    }
    let stats = router.shutdown().await;
    println!(
        "stopped: {} frames in, {} out, {} dropped, {} unaccounted",
        stats.frames_in,
        stats.frames_out,
        stats.total_drops(),
        stats.unaccounted()
    );
    Ok(())
}
