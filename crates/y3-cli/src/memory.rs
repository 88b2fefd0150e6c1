//! The binary's allocator, and giving freed memory back to the system.
//!
//! `y3` runs on mimalloc, built to commit its arenas on demand (`.cargo/config.toml`).
//! While the router works, mimalloc returns pages freed for longer than its purge delay by
//! itself. An idle router (say, once an attack's connections have closed) never gets round
//! to it. So a reclaimer thread looks at the runtime every [`EVERY`]: when its workers were
//! busy for less than 1/[`IDLE_SHARE`] of that time, it purges the shared arenas and wakes
//! the workers, and each worker purges its own heap as it parks again ([`on_park`]). 900
//! connections holding 60 KiB partial frames: glibc's malloc went 19 -> 137 -> 74 MiB and
//! stayed; this goes 16 -> 93 -> 17 MiB (`tests/hostile_cli.rs`, `memory_returns_after_an_attack`;
//! with the reclaimer off it stays at 98 MiB).
//!
//! A working router is not purged by force: a forced purge decommits pages that the next
//! messages commit again, a burst of `madvise`/`mprotect` calls that took 0.35-4 ms each on
//! a 2-core VM, every 2 s, in the middle of a paced MQTT run.
// The one unsafe call: an FFI function that takes no pointers.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The global allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often the reclaimer looks at the runtime.
const EVERY: Duration = Duration::from_secs(2);

/// The runtime counts as idle over a period when its workers together were busy for less
/// than 1/`IDLE_SHARE` of it (20 ms in 2 s; a router at 2,000 msg/s is busy for more).
const IDLE_SHARE: u32 = 100;

/// Bumped by the reclaimer each time it purges; a worker purges its own heap when it parks
/// and finds a number it has not purged for ([`on_park`]).
static PURGES: AtomicU64 = AtomicU64::new(0);

/// Starts the reclaimer thread (for long-running commands: `serve`): every [`EVERY`], if the
/// runtime was idle ([`IDLE_SHARE`]), it purges the shared arenas, then wakes the runtime's
/// workers with one empty task each, so that each parks again and purges its own heap
/// ([`on_park`]).
pub fn spawn_reclaimer(runtime: tokio::runtime::Handle) {
    let spawned = std::thread::Builder::new()
        .name("y3-reclaim".into())
        .spawn(move || {
            let mut busy_before = busy(&runtime);
            loop {
                std::thread::sleep(EVERY);
                let busy_now = busy(&runtime);
                let idle = busy_now.saturating_sub(busy_before) < EVERY / IDLE_SHARE;
                busy_before = busy_now;
                if idle {
                    PURGES.fetch_add(1, Ordering::Relaxed);
                    reclaim();
                    for _ in 0..runtime.metrics().num_workers() {
                        runtime.spawn(async {});
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no memory reclaimer thread: freed memory may stay resident");
    }
}

/// The time the runtime's workers have spent busy since it started, all together.
fn busy(runtime: &tokio::runtime::Handle) -> Duration {
    let metrics = runtime.metrics();
    (0..metrics.num_workers())
        .map(|w| metrics.worker_total_busy_duration(w))
        .sum()
}

/// For the runtime's `on_thread_park`: a worker that parks after the reclaimer purged purges
/// its own heap's free pages, once per purge (the reclaimer thread can only reach the shared
/// arenas, not the pages each worker thread holds).
pub fn on_park() {
    thread_local! {
        static DONE: Cell<u64> = const { Cell::new(0) };
    }
    let wanted = PURGES.load(Ordering::Relaxed);
    if DONE.with(|done| done.replace(wanted)) != wanted {
        reclaim();
    }
}

/// Returns free memory to the operating system now.
pub fn reclaim() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any
    // time; `force` makes it purge free pages at once instead of after its delay.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
