//! The QUIC clients a restarted router resets at once, even those that send nothing.
//!
//! A stateless reset is sent in answer to a packet, but a client that only receives (a sink)
//! sends its next packet when its keep-alive comes due, up to 2.5 s after a crash with
//! YoMo's quic-go. So a router with a state directory also keeps, in a file, where each
//! client last sent from and the connection ID it addressed us with, as seen on the socket
//! ([`Watched`]); its successor reads the file before it serves and sends each of them the
//! stateless reset of that ID: the client recognises the token (HMAC of the ID under the
//! same reset key) and reconnects at once.
//!
//! ```text
//!  file: one line per client   <ip:port> <connection id, hex>
//!  reset datagram:             0x40|r (1 B) | 24 random bytes | token = HMAC(reset key, ID)[..16]
//! ```
//!
//! A client silent for [`FORGET_AFTER`] is forgotten; the file is rewritten (to a fresh file
//! renamed over it) at most every [`WRITE_EVERY`], when something changed.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, IoSliceMut, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// How often the file is brought up to date (when something changed).
pub const WRITE_EVERY: Duration = Duration::from_millis(100);

/// A client not heard from for this long is forgotten: twice the idle timeout, after which
/// its connection is gone anyway.
pub const FORGET_AFTER: Duration = Duration::from_secs(10);

/// Connection IDs the router's generator issues: 8 bytes (quinn's hashed generator).
pub const CID_LEN: usize = 8;

/// Most clients remembered (a bound on the file and the memory).
pub const MAX_PEERS: usize = 100_000;

type Cid = [u8; CID_LEN];

/// The clients seen on one socket: address → (the connection ID they addressed, the tick
/// they were last seen at).
#[derive(Debug)]
pub(crate) struct PeerLog {
    path: PathBuf,
    seen: Mutex<HashMap<SocketAddr, (Cid, u64)>>,
    /// Incremented every [`WRITE_EVERY`]: a coarse clock the receive path reads cheaply.
    tick: AtomicU64,
    changed: AtomicBool,
}

impl PeerLog {
    pub(crate) fn new(path: PathBuf) -> PeerLog {
        PeerLog {
            path,
            seen: Mutex::new(HashMap::new()),
            tick: AtomicU64::new(0),
            changed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, (Cid, u64)>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes the short-header datagrams of one receive.
    fn note(&self, bufs: &[IoSliceMut<'_>], meta: &[RecvMeta]) {
        let tick = self.tick.load(Ordering::Relaxed);
        let mut seen = None;
        // Datagrams of one receive mostly come from one client: look each client up once.
        let mut last: Option<(SocketAddr, Cid)> = None;
        for (buf, meta) in bufs.iter().zip(meta) {
            let len = meta.len.min(meta.stride.max(1)).min(buf.len());
            let dgram = &buf[..len];
            // Short header: form bit clear, fixed bit set; then our connection ID.
            if dgram.len() < 1 + CID_LEN || dgram[0] & 0xc0 != 0x40 {
                continue;
            }
            let mut cid = [0u8; CID_LEN];
            cid.copy_from_slice(&dgram[1..1 + CID_LEN]);
            if last == Some((meta.addr, cid)) {
                continue;
            }
            last = Some((meta.addr, cid));
            let seen = seen.get_or_insert_with(|| self.lock());
            let room = seen.len() < MAX_PEERS;
            match seen.get_mut(&meta.addr) {
                Some(entry) if entry.0 == cid => entry.1 = tick,
                Some(entry) => {
                    *entry = (cid, tick);
                    self.changed.store(true, Ordering::Relaxed);
                }
                None if room => {
                    seen.insert(meta.addr, (cid, tick));
                    self.changed.store(true, Ordering::Relaxed);
                }
                None => {}
            }
        }
    }

    /// Advances the clock, forgets the silent, and rewrites the file if anything changed.
    fn flush(&self) -> io::Result<()> {
        let tick = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let forget = (FORGET_AFTER.as_millis() / WRITE_EVERY.as_millis()) as u64;
        let text = {
            let mut seen = self.lock();
            let before = seen.len();
            seen.retain(|_, (_, at)| tick.saturating_sub(*at) <= forget);
            if seen.len() != before {
                self.changed.store(true, Ordering::Relaxed);
            }
            if !self.changed.swap(false, Ordering::Relaxed) {
                return Ok(());
            }
            let mut text = String::with_capacity(seen.len() * 40);
            for (addr, (cid, _)) in seen.iter() {
                text.push_str(&addr.to_string());
                text.push(' ');
                for b in cid {
                    text.push_str(&format!("{b:02x}"));
                }
                text.push('\n');
            }
            text
        };
        write_private(&self.path, text.as_bytes())
    }

    /// Keeps the file up to date until the log is dropped.
    pub(crate) fn spawn_writer(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let log = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(WRITE_EVERY);
            loop {
                every.tick().await;
                let Some(log) = log.upgrade() else { return };
                if let Err(e) = log.flush() {
                    tracing::warn!(path = %log.path.display(), error = %e, "cannot keep the QUIC peers file");
                }
            }
        })
    }
}

/// Writes `bytes` to a fresh 0600 file beside `path`, then renames it over `path`.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Reads the clients a predecessor kept in `path` (a missing file: none) and removes the file.
pub(crate) fn take(path: &Path) -> Vec<(SocketAddr, Cid)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) => return Vec::new(),
    };
    let _ = std::fs::remove_file(path);
    text.lines()
        .filter_map(|line| {
            let (addr, hex) = line.split_once(' ')?;
            let addr = addr.parse().ok()?;
            if hex.len() != 2 * CID_LEN {
                return None;
            }
            let mut cid = [0u8; CID_LEN];
            for (i, b) in cid.iter_mut().enumerate() {
                *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some((addr, cid))
        })
        .take(MAX_PEERS)
        .collect()
}

/// Sends each client its stateless reset from `socket` (the router's, before it serves):
/// the token is what quinn derives for that connection ID under `reset_key`.
pub(crate) fn reset_all(
    socket: &UdpSocket,
    reset_key: &ring::hmac::Key,
    peers: &[(SocketAddr, Cid)],
) {
    let rng = ring::rand::SystemRandom::new();
    for (addr, cid) in peers {
        let mut dgram = [0u8; 1 + 24 + 16];
        let _ = ring::rand::SecureRandom::fill(&rng, &mut dgram[..25]);
        dgram[0] = 0x40 | (dgram[0] & 0x3f);
        let token = ring::hmac::sign(reset_key, cid);
        dgram[25..].copy_from_slice(&token.as_ref()[..16]);
        let _ = socket.send_to(&dgram, addr);
    }
}

/// A UDP socket that notes, on the way in, who addresses which connection ID.
pub(crate) struct Watched {
    pub(crate) inner: Arc<dyn AsyncUdpSocket>,
    pub(crate) log: Arc<PeerLog>,
}

impl fmt::Debug for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl AsyncUdpSocket for Watched {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = &polled {
            self.log.note(&bufs[..*n], &meta[..*n]);
        }
        polled
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("y3-peers-{name}-{}", std::process::id()))
    }

    #[test]
    fn the_file_round_trips_forgets_the_silent_and_is_taken_once() {
        let path = temp("roundtrip");
        let _ = std::fs::remove_file(&path);
        let log = PeerLog::new(path.clone());
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "[::1]:5000".parse().unwrap();
        log.lock().insert(a, ([1, 2, 3, 4, 5, 6, 7, 8], 0));
        log.lock().insert(b, ([0xff; CID_LEN], 0));
        log.changed.store(true, Ordering::Relaxed);
        log.flush().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let mut got = take(&path);
        got.sort();
        assert_eq!(got, [(a, [1, 2, 3, 4, 5, 6, 7, 8]), (b, [0xff; CID_LEN])]);
        assert!(take(&path).is_empty(), "taken once");
        // Silent past FORGET_AFTER: forgotten, and the file says so.
        let ticks = FORGET_AFTER.as_millis() / WRITE_EVERY.as_millis() + 1;
        for _ in 0..ticks {
            log.flush().unwrap();
        }
        assert!(log.lock().is_empty());
        assert!(take(&path).is_empty());
        // Lines that are not ours are skipped.
        std::fs::write(
            &path,
            "nonsense\n127.0.0.1:1 0102\n127.0.0.1:2 0102030405060708\n",
        )
        .unwrap();
        assert_eq!(take(&path).len(), 1);
    }

    #[test]
    fn short_header_datagrams_are_noted_by_address_long_headers_are_not() {
        let log = PeerLog::new(temp("note"));
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:4001".parse().unwrap();
        let short = |cid: u8| {
            let mut d = vec![0x41, cid, cid, cid, cid, cid, cid, cid, cid];
            d.extend_from_slice(&[0; 20]);
            d
        };
        let long = vec![0xc3; 40];
        let mut datagrams = [short(1), short(1), long, short(2)];
        let meta = |addr, len| RecvMeta {
            addr,
            len,
            stride: len,
            ..RecvMeta::default()
        };
        let metas = [
            meta(a, datagrams[0].len()),
            meta(a, datagrams[1].len()),
            meta(b, datagrams[2].len()),
            meta(b, datagrams[3].len()),
        ];
        let bufs: Vec<IoSliceMut<'_>> = datagrams
            .iter_mut()
            .map(|d| IoSliceMut::new(&mut d[..]))
            .collect();
        log.note(&bufs, &metas);
        let seen = log.lock().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[&a].0, [1; CID_LEN]);
        assert_eq!(seen[&b].0, [2; CID_LEN]);
        assert!(log.changed.load(Ordering::Relaxed));
    }

    #[test]
    fn a_reset_carries_the_token_quinn_derives_for_the_connection_id() {
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &[9; 32]);
        let cid = [7u8; CID_LEN];
        reset_all(&server, &key, &[(client.local_addr().unwrap(), cid)]);
        let mut buf = [0u8; 128];
        let (n, from) = client.recv_from(&mut buf).unwrap();
        assert_eq!(from, server.local_addr().unwrap());
        assert_eq!(n, 41);
        // A short header: form bit clear, fixed bit set.
        assert_eq!(buf[0] & 0xc0, 0x40);
        // quinn's ResetToken::new: the first 16 bytes of the key's signature of the ID.
        let token = ring::hmac::sign(&key, &cid);
        assert_eq!(&buf[n - 16..n], &token.as_ref()[..16]);
    }
}
