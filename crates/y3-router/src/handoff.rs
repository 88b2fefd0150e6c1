//! A writer's direct way out: an in-process recipient (an MQTT session's downlink) takes
//! each data frame of a connection's outbox where it lies in the writer's batch, with no
//! encoding, pipe or decoding; the connection's control frames (its handshake ack, the
//! goaway at its end) still go through its writer. Everything else about the outbox is
//! the writer's as for a socket: batches, the budget released as they are taken, the
//! ledger's `writing` and written counts, the stored acknowledgements of a batch once it
//! is handed over and flushed.
//!
//! ```text
//!  routing ─▶ outbox ─▶ write_loop ─┬─ data frame ─▶ Recipient::take (the recipient's own
//!                                   │                 queue, or its socket's buffer)
//!                                   ├─ control frame ─▶ writer (encoded) ─▶ the link
//!                                   └─ end of the batch ─▶ Recipient::batch_end (one
//!                                                          write for the batch)
//! ```

use y3_transport::Data;

/// The recipient is gone (its downlink was replaced or ended): the writer stops, and the
/// batch it was handing over and what is still queued are counted as dropped
/// (`disconnected`), as for a socket that failed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the recipient of the direct handoff is gone")]
pub(crate) struct Gone;

impl From<Gone> for y3_transport::FrameError {
    fn from(_: Gone) -> Self {
        std::io::Error::new(std::io::ErrorKind::BrokenPipe, Gone).into()
    }
}

/// Where a writer's data frames go instead of its socket.
pub(crate) trait Recipient: Send {
    /// Takes a data frame out of the writer's batch; never waits (the recipient queues it
    /// or drops it by its own counted rules).
    fn take(&mut self, data: &Data) -> Result<(), Gone>;

    /// The writer's batch is handed over (where a socket's writer flushes); never waits.
    fn batch_end(&mut self) {}
}

/// A function taking each frame is a recipient with nothing to do at a batch's end.
impl<F: FnMut(&Data) -> Result<(), Gone> + Send> Recipient for F {
    fn take(&mut self, data: &Data) -> Result<(), Gone> {
        self(data)
    }
}

/// A writer's recipient.
pub(crate) type Handoff = Box<dyn Recipient>;
