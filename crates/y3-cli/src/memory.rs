//! The binary's allocator, and giving freed memory back to the system.
//!
//! `y3` runs on mimalloc, built to commit its arenas on demand (`.cargo/config.toml`).
//! Freed memory goes back to the OS only when the allocator gets round to purging it, and
//! an idle router (say, once an attack's connections have closed) never does. So a
//! reclaimer thread purges the shared arenas every [`EVERY`], and each runtime worker
//! purges its own heap when it goes idle ([`on_park`]). 900 connections holding 60 KiB
//! partial frames: glibc's malloc went 19 -> 137 -> 74 MiB and stayed; this goes
//! 16 -> 93 -> 19 MiB (`tests/hostile_cli.rs`, `memory_returns_after_an_attack`).
// The one unsafe call: an FFI function that takes no pointers.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The global allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often the reclaimer purges.
const EVERY: Duration = Duration::from_secs(2);

/// Starts the reclaimer thread (for long-running commands: `serve`, `demo`).
pub fn spawn_reclaimer() {
    let spawned = std::thread::Builder::new()
        .name("y3-reclaim".into())
        .spawn(|| loop {
            std::thread::sleep(EVERY);
            reclaim();
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no memory reclaimer thread: freed memory may stay resident");
    }
}

/// For the runtime's `on_thread_park`: a worker that goes idle purges its own heap's free
/// pages, at most once per [`EVERY`] (the reclaimer thread can only reach the shared
/// arenas, not the pages each worker thread holds).
pub fn on_park() {
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let due = LAST.with(|last| match last.get() {
        Some(at) if now.duration_since(at) < EVERY => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if due {
        reclaim();
    }
}

/// Returns free memory to the operating system now.
pub fn reclaim() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any
    // time; `force` makes it purge free pages at once instead of after its delay.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
