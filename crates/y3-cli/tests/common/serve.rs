//! The one way the CLI tests start `y3 serve`: [`Launch`] says how, [`Serve`] is the
//! running process (its addresses from its ready file, through `y3_testkit`; its metrics,
//! SIGTERM, SIGKILL, restart on the same ports); killed on drop, its directory removed.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use y3_testkit::{Ready, ServeDir};

use super::{wait, y3, WAIT};

/// How to start a `y3 serve`: loopback ports the system picks, TCP, QUIC and metrics on,
/// stderr discarded, the environment of [`y3`](super::y3).
#[derive(Debug, Clone)]
pub struct Launch {
    tcp: String,
    quic: String,
    metrics: String,
    extra: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    stderr: Option<PathBuf>,
}

impl Default for Launch {
    fn default() -> Launch {
        Launch {
            tcp: "127.0.0.1:0".into(),
            quic: "127.0.0.1:0".into(),
            metrics: "127.0.0.1:0".into(),
            extra: Vec::new(),
            env: Vec::new(),
            stderr: None,
        }
    }
}

impl Launch {
    /// The TCP listener's address (`--tcp`).
    pub fn tcp(mut self, addr: impl Into<String>) -> Launch {
        self.tcp = addr.into();
        self
    }

    /// The QUIC listener's address (`--quic`; empty: off).
    pub fn quic(mut self, addr: impl Into<String>) -> Launch {
        self.quic = addr.into();
        self
    }

    /// The metrics listener's address (`--metrics`; empty: off).
    pub fn metrics(mut self, addr: impl Into<String>) -> Launch {
        self.metrics = addr.into();
        self
    }

    /// More arguments after the listeners.
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.extra
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// One more option whose value is a path.
    pub fn arg_path(mut self, option: &str, path: impl Into<PathBuf>) -> Launch {
        self.extra.push(option.into());
        self.extra.push(path.into().into_os_string());
        self
    }

    /// An environment variable of the process.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Appends the process's stderr to `path` instead of discarding it.
    pub fn stderr_to(mut self, path: impl Into<PathBuf>) -> Launch {
        self.stderr = Some(path.into());
        self
    }

    /// Starts the process in a private directory of its own ([`y3_testkit::ServeDir`]:
    /// dev certificate, state, ready file) and waits for its ready file.
    pub fn start(self) -> Serve {
        let dir = Arc::new(ServeDir::new("cli").unwrap());
        self.start_in(dir)
    }

    /// Starts the process in `dir` and waits for its ready file.
    fn start_in(self, dir: Arc<ServeDir>) -> Serve {
        let stderr = match &self.stderr {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap(),
            ),
            None => Stdio::null(),
        };
        let mut cmd = y3();
        cmd.arg("serve")
            .args(["--tcp", &self.tcp, "--quic", &self.quic])
            .args(["--metrics", &self.metrics]);
        let mut child = dir
            .command(&mut cmd)
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let ready = match dir.wait(&mut child, WAIT) {
            Ok(ready) => ready,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("y3 serve {:?}: {e}", self.extra);
            }
        };
        Serve {
            tcp: ready.listener("tcp").expect("a TCP listener"),
            quic: ready.listener("quic"),
            metrics: ready.listener("metrics"),
            ready,
            child: Some(child),
            launch: self,
            dir,
        }
    }
}

/// A running `y3 serve`; killed on drop.
#[derive(Debug)]
pub struct Serve {
    /// The process, until stopped or killed.
    pub child: Option<Child>,
    /// The TCP listener.
    pub tcp: SocketAddr,
    /// The QUIC listener, if on.
    pub quic: Option<SocketAddr>,
    /// The metrics endpoint, if on.
    pub metrics: Option<SocketAddr>,
    /// Its ready file: every listener, the certificate.
    pub ready: Ready,
    launch: Launch,
    dir: Arc<ServeDir>,
}

impl Serve {
    /// Starts a `y3 serve` with the defaults of [`Launch`] and `extra` arguments.
    pub fn start<S: AsRef<OsStr>>(extra: &[S]) -> Serve {
        Launch::default().args(extra).start()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The certificate's SHA-256 (what `--pin` takes).
    pub fn pin(&self) -> String {
        self.ready.certificate.sha256.clone()
    }

    /// The router's private directory (its `XDG_RUNTIME_DIR` and `XDG_STATE_HOME`).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// `GET path` on the metrics endpoint, with a bearer token if given: status and the
    /// whole response.
    pub fn get(&self, path: &str, auth: Option<&str>) -> (u16, String) {
        self.try_get(path, auth)
            .unwrap_or_else(|| panic!("GET {path}: no answer"))
    }

    /// As [`get`](Serve::get); `None` when the endpoint does not answer.
    pub fn try_get(&self, path: &str, auth: Option<&str>) -> Option<(u16, String)> {
        let mut tcp = TcpStream::connect_timeout(&self.metrics?, WAIT).ok()?;
        tcp.set_read_timeout(Some(WAIT)).ok()?;
        let auth = auth.map_or(String::new(), |a| format!("Authorization: Bearer {a}\r\n"));
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).ok()?;
        let mut text = String::new();
        tcp.read_to_string(&mut text).ok()?;
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, text))
    }

    /// The metrics page (empty when the endpoint does not answer).
    pub fn metrics(&self) -> String {
        self.try_get("/metrics", None)
            .map(|(_, text)| text)
            .unwrap_or_default()
    }

    /// A metric's value, summed over its labels (0 when absent).
    pub fn metric(&self, name: &str) -> u64 {
        self.metrics()
            .lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// The router's delivery ledger (issue 26), at the end of a test that routed frames:
    /// no term below zero (`y3_router_queue_depth`, `y3_router_writing`, and the balance
    /// `y3_router_unaccounted`, which fails at once when negative) and, once what is in
    /// flight settled (at most [`WAIT`]), nothing unaccounted.
    pub fn ledger(&self) {
        let start = Instant::now();
        loop {
            let text = self.metrics();
            let value = |name: &str| -> i64 {
                let prefix = format!("{name} ");
                text.lines()
                    .find_map(|l| l.strip_prefix(prefix.as_str()))
                    .unwrap_or_else(|| panic!("no {name} in the metrics: {text}"))
                    .trim()
                    .parse()
                    .unwrap()
            };
            let terms = [
                ("y3_router_queue_depth", value("y3_router_queue_depth")),
                ("y3_router_writing", value("y3_router_writing")),
                ("y3_router_unaccounted", value("y3_router_unaccounted")),
            ];
            if let Some((name, v)) = terms.iter().find(|(_, v)| *v < 0) {
                panic!("ledger: {name} is negative ({v}): {text}");
            }
            if terms[2].1 == 0 {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "ledger: {} unaccounted: {text}",
                terms[2].1
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (at most [`WAIT`]) until the metrics page contains `needle`.
    pub fn wait_metric(&self, needle: &str) {
        let start = Instant::now();
        while !self.metrics().contains(needle) {
            assert!(start.elapsed() < WAIT, "metric {needle} never appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM (the router drains), then waits for the exit: its output.
    pub fn stop(&mut self) -> Option<Output> {
        let child = self.child.take()?;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        Some(wait(child, "y3 serve after SIGTERM"))
    }

    /// SIGKILL: no drain.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the same router again on the same TCP port and in the same directory (its
    /// state and dev certificate kept), after [`stop`](Serve::stop) or
    /// [`kill`](Serve::kill); a running one is killed first.
    pub fn restart(&mut self) {
        self.kill();
        let launch = self.launch.clone().tcp(self.tcp.to_string());
        *self = launch.start_in(Arc::clone(&self.dir));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}
