//! The network lab: `y3-lab net pingpong|echo|e2e|yomo|pipeline|filter|federation`.
//!
//! Three published workloads, reproduced with real peers in the same run, and YoMo's own
//! software against y3's router:
//!
//! - [`pingpong`]: the evpp-vs-Boost.Asio header/body ping-pong (total wall time per
//!   session count and thread count): y3's transport read path, plain tokio, and a
//!   standalone-asio C++ program (`bench/cpp`).
//! - [`echo`]: the monoio-vs-tokio echo server (QPS, p50/p99/p999, server CPU% per
//!   connection count and message size): y3's transport on tokio and on monoio, plain tokio,
//!   plain monoio.
//! - [`e2e`]: publish → route → subscribe on loopback: y3's router (TCP, QUIC) against
//!   NATS (`nats-server` + `async-nats`) and Zenoh (routed and peer-to-peer); the same
//!   engine runs the `pipeline` suite (source → router → stream function → sink in this
//!   one process over TCP, QUIC or TLS, formerly `y3 bench e2e`).
//! - [`yomo`]: source → sink and source → relay → sink on YoMo v1.22's wire protocol: YoMo's
//!   zipper and `y3 serve` driven by YoMo's own Go clients (`interop/yomo`'s `yomo-peer`),
//!   then `y3 serve` driven by y3's clients over QUIC and TCP (msg/s, router CPU per
//!   routed frame, paced one-way latency).
//! - [`federation`]: source and sink on two routers, y3's federated through `nats-server`
//!   and YoMo's zippers linked by YoMo's mesh, next to one router (msg/s, paced one-way
//!   latency, CPU per message), on the yomo suite's processes.
//!
//! Every server and client is a child process ([`proc::Child`], killed on drop) started by
//! the lab on 127.0.0.1: the lab's own binary with the hidden `y3-lab net server|client`
//! commands, `bench/cpp/build/pingpong_asio`, `nats-server`, `y3 serve`, `yomo-peer`. Every
//! load run is bounded in time. The heavy peers (monoio, async-nats, zenoh) are compiled in with the `net-peers`
//! feature; without it their rows are skipped with a note.

pub mod e2e;
pub mod echo;
pub mod federation;
pub mod filter;
pub mod mqtt;
pub mod nats_hop;
pub mod pingpong;
pub mod proc;
pub mod quic;
#[cfg(feature = "net-s2n-quic")]
mod quic_s2n;
pub mod report;
pub mod suites;
pub mod y3_build;
pub mod yomo;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;

/// Whether monoio is compiled in (feature `net-monoio`).
pub const MONOIO_ENABLED: bool = cfg!(feature = "net-monoio");
/// Whether async-nats is compiled in (feature `net-nats`).
pub const NATS_ENABLED: bool = cfg!(feature = "net-nats");
/// Whether zenoh is compiled in (feature `net-zenoh`).
pub const ZENOH_ENABLED: bool = cfg!(feature = "net-zenoh");
/// Whether the `s2n-quic` row of `net quic` is compiled in (feature `net-s2n-quic`).
pub const S2N_QUIC_ENABLED: bool = cfg!(feature = "net-s2n-quic");

/// A tokio listener on `addr` with a deep accept backlog (10 000 sessions connect at once).
///
/// # Errors
/// Bind failures.
pub fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(8192)
}

/// Runs `runs` rounds of one measuring point; each round runs every implementation once,
/// in order, so that a noisy spell hits them alike. An implementation whose run fails is
/// not run again at this point, and its error becomes a note (`"{imp}, {label}: …"`).
/// Returns each implementation's results, in the order of `impls`.
pub fn rounds<T>(
    suite: &str,
    label: &str,
    impls: &[&str],
    runs: usize,
    bar: &indicatif::ProgressBar,
    notes: &mut Vec<String>,
    mut run: impl FnMut(&str) -> Result<T>,
) -> Vec<Vec<T>> {
    let mut got: Vec<Vec<T>> = impls.iter().map(|_| Vec::new()).collect();
    let mut failed = vec![false; impls.len()];
    for round in 0..runs {
        for (i, imp) in impls.iter().enumerate() {
            bar.set_message(format!("{suite} {imp}: {label}, run {}/{runs}", round + 1));
            if !failed[i] {
                match run(imp) {
                    Ok(r) => got[i].push(r),
                    Err(e) => {
                        failed[i] = true;
                        notes.push(format!("{imp}, {label}: {e:#}"));
                    }
                }
            }
            bar.inc(1);
        }
    }
    got
}

/// The load of the suites that run flat out, then paced (e2e, yomo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Messages of the flat-out run.
    pub messages: u64,
    /// Messages of the paced run.
    pub paced: u64,
    /// Rate of the paced run, msg/s (at least 1).
    pub rate: u64,
    /// Runs per case; every metric is the median over them.
    pub runs: usize,
}

/// What every suite's runner needs to start its processes.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The lab binary itself (`y3-lab`): its hidden `net server|client` commands.
    pub lab: PathBuf,
    /// The product binary `y3` (`y3 serve`), next to the lab binary when built with it.
    pub y3: PathBuf,
    /// `bench/cpp/build/pingpong_asio`, when built.
    pub asio: Option<PathBuf>,
    /// `nats-server`, when installed.
    pub nats_server: Option<PathBuf>,
}

impl Programs {
    /// The lab binary `lab`, the `y3` next to it, plus whatever peers are found
    /// (`bench/cpp/build`; nats-server as [`find_nats_server`] finds it).
    pub fn find(lab: PathBuf, asio: Option<PathBuf>) -> Programs {
        let asio = asio
            .or_else(|| Some(PathBuf::from("bench/cpp/build/pingpong_asio")))
            .filter(|p| p.is_file());
        let nats_server = find_nats_server();
        let y3 = lab.with_file_name(format!("y3{}", std::env::consts::EXE_SUFFIX));
        Programs {
            lab,
            y3,
            asio,
            nats_server,
        }
    }

    /// The same lab binary with the asio program at `asio` (or the default place).
    pub fn with_asio(&self, asio: Option<PathBuf>) -> Programs {
        Programs::find(self.lab.clone(), asio)
    }

    /// Starts a lab child, `y3-lab net ROLE ARGS...` (`ROLE` is `server` or `client`).
    ///
    /// # Errors
    /// When the process cannot be started.
    pub fn spawn_lab(
        &self,
        name: &str,
        role: &str,
        args: &[String],
        cpus: Option<&str>,
    ) -> Result<proc::Child> {
        let mut all = vec!["net".to_string(), role.to_string()];
        all.extend(args.iter().cloned());
        proc::Child::spawn(name, &self.lab, &all, cpus)
    }
}

/// What the lab says when [`find_nats_server`] finds none.
pub const NATS_SERVER_MISSING: &str =
    "nats-server not found (NATS_SERVER_BIN, target/tools/bin, PATH; scripts/test.sh installs it)";

/// `nats-server`: `NATS_SERVER_BIN`, else `target/tools/bin` (where `scripts/test.sh`
/// installs it), else `PATH`, else Debian's `/usr/sbin`.
pub fn find_nats_server() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("NATS_SERVER_BIN") {
        return Some(bin.into());
    }
    let tools = PathBuf::from("target/tools/bin/nats-server");
    if tools.is_file() {
        return Some(tools);
    }
    proc::which("nats-server").or_else(|| {
        let p = PathBuf::from("/usr/sbin/nats-server");
        p.is_file().then_some(p)
    })
}

/// Starts a lab server child (`y3-lab net server KIND --threads T ...`) and waits
/// for its `listening ADDR` line.
///
/// # Errors
/// The child failing to start or to listen within 30 s.
pub fn start_server(
    programs: &Programs,
    kind: &str,
    threads: usize,
    extra: &[String],
    cpus: Option<&str>,
) -> Result<(proc::Child, SocketAddr)> {
    let mut args = vec![kind.to_string(), "--threads".into(), threads.to_string()];
    args.extend(extra.iter().cloned());
    let mut child = programs.spawn_lab(kind, "server", &args, cpus)?;
    let addr = child
        .expect("listening ", std::time::Duration::from_secs(30))?
        .parse()?;
    Ok((child, addr))
}

/// Waits until message `i` of a run paced at `rate` msg/s that started at `start` is due:
/// the one pacing of every paced send in the lab (the e2e and pipeline publisher, y3's
/// YoMo source). A rate of 0 or less is flat out (no wait).
pub async fn pace(start: std::time::Instant, i: u64, rate: f64) {
    if rate > 0.0 {
        let due = start + std::time::Duration::from_secs_f64(i as f64 / rate);
        if due > std::time::Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
    }
}

/// An empty one-way latency histogram in nanoseconds, 1 ns to 120 s, 3 significant
/// digits: every paced send records into one of these.
pub fn latency_histogram() -> hdrhistogram::Histogram<u64> {
    // Bounds that hdrhistogram accepts (low ≥ 1, high ≥ 2 × low, sigfig ≤ 5): cannot fail.
    hdrhistogram::Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid bounds")
}

/// Runs until the parent closes our stdin (or dies), then exits the process: servers
/// started by the lab never outlive it.
pub fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let mut sink = [0u8; 64];
        loop {
            match std::io::Read::read(&mut std::io::stdin(), &mut sink) {
                Ok(0) | Err(_) => std::process::exit(0),
                Ok(_) => {}
            }
        }
    });
}

/// Prints `listening ADDR` on stdout (flushed): the line the lab waits for.
pub fn announce(addr: SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening {addr}");
    let _ = out.flush();
}

/// Runs lab server `kind` (`pingpong-IMPL`, `echo-IMPL`, ...) on `addr` until the process
/// ends, printing `listening ADDR` once it accepts.
///
/// # Errors
/// Unknown kinds, bind failures.
pub fn serve(kind: &str, addr: SocketAddr, threads: usize) -> Result<()> {
    if let Some(imp) = kind.strip_prefix("pingpong-") {
        let imp = pingpong::Impl::from_name(imp)
            .ok_or_else(|| anyhow::anyhow!("unknown ping-pong server {imp:?}"))?;
        return pingpong::serve(imp, addr, threads, announce);
    }
    if let Some(imp) = kind.strip_prefix("echo-") {
        return echo::serve(imp, addr, threads, announce);
    }
    e2e::serve(kind, addr, threads)
}

/// The rows of `all` that `--only` keeps (all when it names none).
pub fn wanted<'a>(all: &[&'a str], only: &[String]) -> Vec<&'a str> {
    all.iter()
        .copied()
        .filter(|i| only.is_empty() || only.iter().any(|o| i.contains(o.as_str())))
        .collect()
}

/// The host's 1-minute load average (`/proc/loadavg`), or `?`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The note that says how busy the host was over a run (`before`: [`load_average`] at its
/// start): on a shared machine absolute figures are low, and only the interleaved rows'
/// ratios compare like with like.
pub fn load_note(before: &str) -> String {
    format!(
        "host load (1-minute average) {before} at the start, {} at the end, on {} cores: \
         other work shared the machine, so absolute figures are low; the rows ran \
         interleaved in the same run, so their ratios compare them under similar load",
        load_average(),
        crate::measure::cores()
    )
}

/// The metadata of a network run of `suite` on this machine, stamped now: pinning in words
/// and every peer's version.
pub fn meta(
    suite: &str,
    command: &str,
    quick: bool,
    pinning: String,
    versions: Vec<(String, String)>,
) -> crate::record::Meta {
    crate::record::Meta {
        pinning,
        versions,
        ..crate::record::Meta::now(suite, command, quick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_interleave_and_stop_running_what_failed() {
        let bar = indicatif::ProgressBar::hidden();
        let mut notes = Vec::new();
        let mut order = Vec::new();
        let got = rounds("s", "case", &["a", "b", "c"], 3, &bar, &mut notes, |imp| {
            order.push(imp.to_string());
            match (imp, order.len()) {
                ("b", 5) => anyhow::bail!("broke"),
                _ => Ok(order.len()),
            }
        });
        // Round 1: a b c; round 2: a b(fails) c; round 3: a c.
        assert_eq!(order, ["a", "b", "c", "a", "b", "c", "a", "c"]);
        assert_eq!(got, [vec![1, 4, 7], vec![2], vec![3, 6, 8]]);
        assert_eq!(notes, ["b, case: broke"]);
        assert_eq!(bar.position(), 9, "every slot counts on the bar");
    }
}
