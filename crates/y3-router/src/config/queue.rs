//! `[queue]`: the bounds of a subscriber's queue and what a full one does.

use serde::{Deserialize, Serialize};

/// `[queue]`: one bounded queue per subscriber (stream function or sink; a mesh downstream's
/// queue has the same bounds and always drops the oldest).
///
/// Under `block` (the default) a subscriber that pauses loses nothing: its frames are
/// buffered up to `max_bytes` (and `capacity` frames) without holding anybody back, as
/// NATS buffers up to its 64 MiB pending limit. Past that, each publisher waits for the
/// subscriber to take a batch (backpressure, as YoMo's zipper holds a source's `Write`);
/// a subscriber that takes nothing for `block_timeout_ms` stops holding them, and its
/// frames queue on past `max_bytes`, up to twice the limits, until it takes a batch again.
/// It is evicted (`slow_consumer`: its queue counted as dropped, the client logged with
/// its name, id and address and counted in `y3_router_evictions_total`) when it has taken
/// nothing for `write_deadline_ms` while frames waited for it, or when, taking nothing,
/// it falls twice the limits behind. A publisher held by several subscribers that stopped
/// at once waits one block timeout in all (each one's clock runs from its last batch, or
/// from the push of the frame that found its queue empty, if later).
/// Queued frames also count against the router's `limits.max_queued_bytes` (a frame shared
/// by many queues once): when it is full, the subscribers that took nothing for the block
/// timeout are evicted first, largest backlog first (`memory_budget`), and a reading
/// subscriber's publisher waits rather than lose a frame. The two promises together: a
/// pause shorter than the write deadline (10 s) within 64 MiB loses nothing, and
/// subscribers that do not read cannot take the memory, or more than a block timeout, of
/// anyone else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Frames buffered per subscriber before its publishers wait. A safety bound: every
    /// frame is charged more than 64 bytes (its queue slot included), so with the default
    /// `max_bytes` the default 1,048,576 frames are never reached first.
    pub capacity: usize,
    /// Bytes buffered per subscriber before its publishers wait: payload and metadata,
    /// plus a fixed overhead per frame for its queue slot (and a pinned read buffer for
    /// frames of 8 KiB or more). 64 MiB by default, NATS's pending limit: about 25 s of
    /// 2,000 msg/s × 1 KiB.
    pub max_bytes: usize,
    /// What a full queue does.
    pub policy: Policy,
    /// Under `block`, past `max_bytes`: how long a publisher waits for the subscriber to
    /// take a batch before the subscriber counts as stalled and its frames queue past
    /// `max_bytes` without waiting. A subscriber that stopped reading therefore holds up
    /// its tag's publishers, and their other tags, at most this long per stall; one that
    /// reads, however slowly, holds them back (backpressure) and stays.
    pub block_timeout_ms: u64,
    /// Under `block`, a subscriber that takes nothing for this long while frames wait for
    /// it is evicted. 10 s (NATS's write deadline): far past a GC pause or a network blip,
    /// and short enough that a dead subscriber's backlog does not linger.
    pub write_deadline_ms: u64,
    /// A client evicted as a slow consumer that reconnects within this long is refused
    /// (`slow_consumer`, retryable; counted as `rejected{reason="held_off"}`). 0 (the
    /// default): never, so that an app that was paused, then resumed is let back in at once.
    pub evicted_backoff_ms: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 1 << 20,
            max_bytes: 64 << 20,
            policy: Policy::Block,
            block_timeout_ms: 250,
            write_deadline_ms: 10_000,
            evicted_backoff_ms: 0,
        }
    }
}

/// What a full queue does with a new frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Hold the sender back until there is room: lossless for live subscribers.
    #[default]
    Block,
    /// Drop the oldest queued frames to make room, counting each: for real-time data where
    /// only the latest matters.
    #[serde(alias = "drop-oldest")]
    DropOldest,
}

impl Policy {
    /// The snake_case name.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::Block => "block",
            Policy::DropOldest => "drop_oldest",
        }
    }
}
