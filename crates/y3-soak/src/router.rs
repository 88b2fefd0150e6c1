//! `y3 serve` as a child process: started on fixed ports with a fixed certificate (so
//! clients find it again after a restart), sampled for RSS, stopped with SIGTERM, and read
//! back through its final metrics.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use y3_testkit::{ServeDir, READY_WAIT};

use crate::prom::Totals;

/// Where and how the router is started, the same for every lifetime.
#[derive(Debug, Clone)]
pub struct RouterSpec {
    /// The `y3` binary.
    pub bin: PathBuf,
    /// The TOML config written for it.
    pub config: PathBuf,
    /// Working directory for its files.
    pub dir: PathBuf,
    /// TCP listener.
    pub tcp: SocketAddr,
    /// QUIC listener.
    pub quic: SocketAddr,
}

impl RouterSpec {
    /// Picks free loopback ports and writes the config: the operator's defaults, plus a
    /// fixed certificate and a 2 s frame-stall timeout (so partial frames are cut within
    /// the run).
    pub fn prepare(bin: PathBuf, dir: &Path, cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let tcp = free_port(false)?;
        let quic = free_port(true)?;
        let metrics = free_port(false)?;
        let config = dir.join("router.toml");
        let text = format!(
            "[listen]\ntcp = \"{tcp}\"\nquic = \"{quic}\"\nmetrics = \"{metrics}\"\n\n\
             [tls]\ncert = \"{}\"\nkey = \"{}\"\ndev_cert_out = \"\"\n\n\
             [limits]\nframe_stall_timeout_ms = 2000\n",
            cert.display(),
            key.display()
        );
        std::fs::write(&config, text)?;
        Ok(RouterSpec {
            bin,
            config,
            dir: dir.to_owned(),
            tcp,
            quic,
        })
    }

    /// Starts lifetime `n` and waits (at most [`READY_WAIT`]) for its ready file.
    pub fn start(&self, n: usize) -> anyhow::Result<RouterProcess> {
        let final_metrics = self.dir.join(format!("final-metrics-{n}.txt"));
        let _ = std::fs::remove_file(&final_metrics);
        let log = std::fs::File::create(self.dir.join(format!("router-{n}.log")))?;
        // The soak's directory is the router's (kept: its logs and metrics are read after).
        let serve_dir = ServeDir::keep(&self.dir)?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--final-metrics")
            .arg(&final_metrics);
        let mut child = serve_dir
            .command(&mut cmd)
            .env("RUST_LOG", "warn")
            .env_remove("Y3_TOKEN")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        if let Err(e) = serve_dir.wait(&mut child, READY_WAIT) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("router lifetime {n} did not become ready: {e}");
        }
        Ok(RouterProcess {
            child,
            final_metrics,
            started: Instant::now(),
        })
    }
}

/// One running router lifetime.
#[derive(Debug)]
pub struct RouterProcess {
    child: Child,
    final_metrics: PathBuf,
    started: Instant,
}

impl RouterProcess {
    /// Resident set size in bytes (`VmRSS`), if readable.
    pub fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// Stops the router gracefully (SIGTERM: drain, then exit) and returns its totals.
    pub fn stop(mut self) -> anyhow::Result<(Totals, Duration)> {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()?;
        if !status.success() {
            bail!("kill -TERM failed");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("router exited with {status}");
                }
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("router did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&self.final_metrics)
            .with_context(|| format!("reading {}", self.final_metrics.display()))?;
        Ok((Totals::parse(&text), self.started.elapsed()))
    }
}

impl Drop for RouterProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A loopback port free now (the router binds it right after).
fn free_port(udp: bool) -> anyhow::Result<SocketAddr> {
    Ok(if udp {
        std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?
    } else {
        std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?
    })
}
