//! The pausing sink: a consumer that stops reading for 1–5 s at random (a GC pause, a
//! network blip, a process stopped and resumed), under the router's default `block`
//! policy, which must lose none of its frames and never be evicted.
//!
//! Router restarts lose in-flight frames by design (counted as `disconnected`; the healthy
//! flows account for them), so this flow is kept quiet around them: its source sends
//! nothing, and its sink starts no pause, from [`QUIET_BEFORE`] before a restart (or the
//! end of the run) to [`QUIET_AFTER`] after it. Any frame it misses is then a frame the
//! pauses cost.
//!
//! ```text
//!  time ─────────────────────────────────────────── restart ──────────────▶
//!  source  ▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮▮ quiet   │  quiet ▮▮▮▮▮▮▮▮▮
//!  sink    read ▏pause 1–5 s▕ read ▏pause▕ read ─── (no pause) ─── read ──────
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use y3_transport::sdk::{ClientOptions, Sink};

use crate::flows::{self, Received};

/// No sending and no new pause from this long before a restart or the end of the run...
pub const QUIET_BEFORE: Duration = Duration::from_secs(8);
/// ...until this long after a restart (the sink has reconnected by then).
pub const QUIET_AFTER: Duration = Duration::from_secs(3);
/// Shortest and longest pause.
pub const PAUSE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(5));
/// Shortest and longest stretch of reading between two pauses.
pub const READ: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(4));

/// When the pausing flow must be quiet: around router restarts and at the end.
#[derive(Debug)]
pub struct Quiet {
    state: Mutex<Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    /// The next restart (or the end of the run, whichever is sooner).
    next: Instant,
    /// When the last restart finished (the new router listens).
    restarted: Option<Instant>,
}

impl Quiet {
    /// Quiet before `next` (the first restart or the end).
    pub fn new(next: Instant) -> Quiet {
        Quiet {
            state: Mutex::new(Window {
                next,
                restarted: None,
            }),
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A restart just finished; the next one (or the end) is at `next`.
    pub fn restarted(&self, next: Instant) {
        let mut w = self.window();
        w.restarted = Some(Instant::now());
        w.next = next;
    }

    /// Whether `at` falls in a quiet window.
    pub fn at(&self, at: Instant) -> bool {
        let w = *self.window();
        at + QUIET_BEFORE >= w.next || w.restarted.is_some_and(|r| at < r + QUIET_AFTER)
    }
}

/// What the pauses were.
#[derive(Debug, Default, Serialize)]
pub struct Pauses {
    /// Pauses taken.
    pub count: AtomicU64,
    /// Their total length, ms.
    pub total_ms: AtomicU64,
    /// The longest, ms.
    pub longest_ms: AtomicU64,
}

/// xorshift64: reproducible randomness, no dependency.
struct Rng(u64);

impl Rng {
    fn between(&mut self, (lo, hi): (Duration, Duration)) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let span = (hi - lo).as_millis() as u64 + 1;
        lo + Duration::from_millis(self.0 % span)
    }
}

/// The pausing sink of `tag` until `stop`: reads for [`READ`], then takes nothing for
/// [`PAUSE`] (both at random), over and over, outside the quiet windows. Checks sequence
/// numbers as [`flows::sink`] does.
pub async fn sink(
    options: ClientOptions,
    tag: u32,
    epoch: Instant,
    quiet: Arc<Quiet>,
    stop: CancellationToken,
    seen: Arc<Mutex<Received>>,
    pauses: Arc<Pauses>,
) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut next = 0u64;
    let observed = [tag];
    let mut pause_at = Instant::now() + rng.between(READ);
    'connect: while !stop.is_cancelled() {
        let mut sink = tokio::select! {
            s = Sink::connect(options.clone(), &observed) => match s {
                Ok(s) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue 'connect;
                }
            },
            _ = stop.cancelled() => break,
        };
        loop {
            let now = Instant::now();
            if now >= pause_at {
                let pause = rng.between(PAUSE);
                if !quiet.at(now) && !quiet.at(now + pause) {
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.cancelled() => break 'connect,
                    }
                    let ms = pause.as_millis() as u64;
                    pauses.count.fetch_add(1, Ordering::Relaxed);
                    pauses.total_ms.fetch_add(ms, Ordering::Relaxed);
                    pauses.longest_ms.fetch_max(ms, Ordering::Relaxed);
                }
                pause_at = Instant::now() + rng.between(READ);
            }
            let got = tokio::select! {
                got = sink.recv() => got,
                _ = tokio::time::sleep_until(pause_at.into()) => continue,
                _ = stop.cancelled() => break 'connect,
            };
            match got {
                Some(Ok(data)) => flows::check(&data.payload, epoch, &mut next, &seen),
                Some(Err(_)) | None => {
                    seen.lock().unwrap_or_else(|e| e.into_inner()).reconnects += 1;
                    sink.close().await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue 'connect;
                }
            }
        }
    }
}
