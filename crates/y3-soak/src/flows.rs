//! The load: paced sources and the sinks that check them.
//!
//! Every payload carries its sequence number and send time, so a sink sees each loss,
//! duplicate and reordering, and measures one-way latency on one clock:
//!
//! ```text
//! +----------------+-------------------------+-----------------+
//! | seq: u64 LE    | sent: u64 LE, ns since  | zero padding to |
//! |                | the soak's epoch        | the payload size|
//! +----------------+-------------------------+-----------------+
//!   0..8             8..16                     16..size
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use y3_transport::sdk::{ClientOptions, Sink, Source};

/// Ticks per second of a paced source: it sends `rate / TICKS` frames, then flushes.
const TICKS: u32 = 100;

/// What one source wrote.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Sent {
    /// Frames flushed to the connection.
    pub confirmed: u64,
    /// Frames queued when a flush failed: written or not, the source cannot know.
    pub ambiguous: u64,
    /// Reconnections.
    pub reconnects: u64,
}

/// A paced source: `rate` frames per second of `size` bytes on `tag` until `stop`.
pub async fn source(
    options: ClientOptions,
    tag: u32,
    rate: u32,
    size: usize,
    epoch: Instant,
    stop: CancellationToken,
) -> Sent {
    quiet_source(options, tag, rate, size, epoch, stop, None).await
}

/// [`source`], sending nothing while `quiet` says so (see `pausing.rs`).
pub async fn quiet_source(
    options: ClientOptions,
    tag: u32,
    rate: u32,
    size: usize,
    epoch: Instant,
    stop: CancellationToken,
    quiet: Option<Arc<crate::pausing::Quiet>>,
) -> Sent {
    let mut sent = Sent::default();
    let per_tick = rate.div_ceil(TICKS).max(1);
    let mut tick = tokio::time::interval(Duration::from_secs(1) / TICKS);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut seq = 0u64;
    let mut source: Option<Source> = None;
    while !stop.is_cancelled() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        if quiet.as_ref().is_some_and(|q| q.at(Instant::now())) {
            continue;
        }
        let s = match &mut source {
            Some(s) => s,
            None => match Source::connect(options.clone()).await {
                Ok(s) => source.insert(s),
                Err(_) => {
                    sent.reconnects += 1;
                    continue;
                }
            },
        };
        let mut pending = 0;
        let mut broken = false;
        for _ in 0..per_tick {
            if s.send(tag, payload(seq, epoch, size)).await.is_err() {
                broken = true;
                break;
            }
            seq += 1;
            pending += 1;
        }
        match s.flush().await {
            Ok(()) if !broken => sent.confirmed += pending,
            _ => {
                sent.ambiguous += pending;
                sent.reconnects += 1;
                source = None;
            }
        }
    }
    if let Some(s) = source {
        let _ = s.close().await;
    }
    sent
}

fn payload(seq: u64, epoch: Instant, size: usize) -> Bytes {
    let mut p = vec![0u8; size.max(16)];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    let ns = epoch.elapsed().as_nanos() as u64;
    p[8..16].copy_from_slice(&ns.to_le_bytes());
    Bytes::from(p)
}

/// What one sink saw.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    /// Frames received.
    pub frames: u64,
    /// Sequence numbers skipped (frames the sink never saw).
    pub missing: u64,
    /// Frames at or below a sequence number already seen (duplicates or reordering).
    pub disordered: u64,
    /// Reconnections after the connection ended.
    pub reconnects: u64,
    /// One-way latency in microseconds.
    #[serde(skip)]
    pub latency: Histogram<u64>,
}

impl Received {
    fn new() -> Received {
        Received {
            frames: 0,
            missing: 0,
            disordered: 0,
            reconnects: 0,
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        }
    }
}

/// How a sink reads.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// As fast as frames come.
    Eager,
    /// Reads for `read`, then stops reading for `stall`, over and over: a consumer the
    /// router must evict without holding anyone else back.
    Stalling {
        /// How long it reads.
        read: Duration,
        /// How long it then stops.
        stall: Duration,
    },
}

/// A sink of `tag` until `stop`, checking sequence numbers and latency.
pub async fn sink(
    options: ClientOptions,
    tag: u32,
    pace: Pace,
    epoch: Instant,
    stop: CancellationToken,
    seen: Arc<Mutex<Received>>,
) {
    let mut next = 0u64;
    let observed = [tag];
    let mut phase_start = Instant::now();
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
            if let Pace::Stalling { read, stall } = pace {
                if phase_start.elapsed() > read {
                    tokio::select! {
                        _ = tokio::time::sleep(stall) => {}
                        _ = stop.cancelled() => break 'connect,
                    }
                    phase_start = Instant::now();
                }
            }
            let got = tokio::select! {
                got = sink.recv() => got,
                _ = stop.cancelled() => break 'connect,
            };
            match got {
                Some(Ok(data)) => check(&data.payload, epoch, &mut next, &seen),
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

/// Records one received payload (sequence number and send time, see the module doc) in
/// `seen`; `next` is the sequence number expected next. Payloads under 16 bytes are not
/// the soak's and are ignored.
pub fn check(payload: &[u8], epoch: Instant, next: &mut u64, seen: &Mutex<Received>) {
    if payload.len() < 16 {
        return;
    }
    let seq = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
    let ns = u64::from_le_bytes(payload[8..16].try_into().expect("8 bytes"));
    let now = epoch.elapsed().as_nanos() as u64;
    let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
    s.frames += 1;
    if seq < *next {
        s.disordered += 1;
    } else {
        s.missing += seq - *next;
        *next = seq + 1;
    }
    let _ = s.latency.record(now.saturating_sub(ns).max(1000) / 1000);
}

/// A shared, fresh sink record.
pub fn received() -> Arc<Mutex<Received>> {
    Arc::new(Mutex::new(Received::new()))
}
