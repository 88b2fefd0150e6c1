//! `[limits]` and `[shutdown]`: what clients may do, and how long a shutdown drains.

use serde::{Deserialize, Serialize};

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest frame body accepted. A longer frame is skipped as its bytes arrive (never
    /// buffered), counted (`y3_router_skipped_frames_total{reason="too_long"}`) and logged;
    /// the connection stays up. An accepted frame is buffered whole: a connection holds at
    /// most one partial frame, charged to `max_queued_bytes` as it arrives (a handshake to
    /// `max_unauthenticated_bytes`), so partial frames and queued ones together are bounded
    /// by it.
    pub max_frame_len: usize,
    /// Most simultaneous connections.
    pub max_connections: usize,
    /// Time a new connection has to send its handshake.
    pub handshake_timeout_ms: u64,
    /// A frame must arrive whole within this long of its first bytes, or the connection is
    /// closed (a client stalling or trickling mid-frame must not hold memory forever): cut
    /// between one and one and a half times this long after those bytes (the router looks
    /// again every half timeout while idle; tests/hostile.rs measures it).
    pub frame_stall_timeout_ms: u64,
    /// Data frames with more hops than this are dropped (function loops).
    pub max_hops: u32,
    /// The router's memory budget (0: none): the bytes it holds for clients — queued frames,
    /// each charged once however many queues hold it, a slot per queued frame, and partial
    /// frames as they arrive (before and after the handshake). When a frame finds it full,
    /// the subscribers that took nothing for their block timeout are evicted, largest
    /// backlog first, all in one pass (`budget.rs`); a reading `block` subscriber's
    /// publisher then waits rather than lose a frame (dropped as `memory_budget` only after
    /// the write deadline), a `drop_oldest` one's frame is dropped (counted); a partial
    /// frame that would grow past it is cut. 512 MiB: eight subscribers paused at their
    /// 64 MiB with nothing shared, far more when they share a tag.
    pub max_queued_bytes: usize,
    /// Longest handshake frame, in bytes: the codec refuses a longer one from its header
    /// (`too_long`), before buffering any of it. 64 KiB: a real handshake (names, token,
    /// up to `max_observed_tags` tags) is a few KiB at most.
    pub max_handshake_len: usize,
    /// Bytes of partial handshakes held at once, all connections together (also counted in
    /// the memory budget); a handshake that would grow past it is cut, counted in
    /// `y3_router_budget_actions_total{action="cut_partial_handshake"}`. 16 MiB: 256
    /// handshakes of the largest size at once, thousands of real ones; 1,000 clients each
    /// trickling a large handshake hold no more than this.
    pub max_unauthenticated_bytes: usize,
    /// Times one message (`yomo-tid`) may come back to a stream function whose own output
    /// led to it — a turn around a loop: a function observing a tag it writes, a ring of
    /// functions — before further such deliveries are dropped, counted as `loop` (see
    /// `journeys.rs`). Fan-out is not a loop: a function may write any number of outputs
    /// per input, and each reaches every function and sink downstream. 0: no returns.
    pub max_loop_returns: u32,
    /// Most tags one client may observe (YoMo sets no limit; this bounds the routing
    /// table a handshake can grow).
    pub max_observed_tags: usize,
    /// Longest client name, id or wanted target, in bytes.
    pub max_name_len: usize,
    /// Most encoded bytes of a data frame's metadata (YoMo's apps carry a few short
    /// pairs: a tid, a source id, a target). A frame over it is refused before its
    /// metadata is walked: counted (`y3_router_skipped_frames_total{reason=
    /// "metadata_too_large"}`), logged once per connection, reported to a client that wants
    /// stored acknowledgements (refused, `metadata_too_large`); the connection stays up.
    pub max_metadata_bytes: usize,
    /// Most pairs in a data frame's metadata; over it, as over `max_metadata_bytes`.
    pub max_metadata_entries: usize,
}

impl LimitsConfig {
    /// The metadata limits, as the session checks them.
    pub fn metadata(&self) -> y3_transport::metadata::MetadataLimits {
        y3_transport::metadata::MetadataLimits {
            max_bytes: self.max_metadata_bytes,
            max_entries: self.max_metadata_entries,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_frame_len: y3_transport::DEFAULT_MAX_FRAME_LEN,
            max_connections: 10_000,
            handshake_timeout_ms: 5000,
            frame_stall_timeout_ms: 30_000,
            max_hops: 8,
            max_loop_returns: 8,
            max_queued_bytes: 512 << 20,
            max_handshake_len: 64 << 10,
            max_unauthenticated_bytes: 16 << 20,
            max_observed_tags: 1024,
            max_name_len: 1024,
            max_metadata_bytes: 64 << 10,
            max_metadata_entries: 1024,
        }
    }
}

/// `[shutdown]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Longest a graceful shutdown may take.
    pub drain_timeout_ms: u64,
    /// How long the router must see no traffic to call the pipelines drained.
    pub quiet_ms: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            drain_timeout_ms: 5000,
            quiet_ms: 100,
        }
    }
}
