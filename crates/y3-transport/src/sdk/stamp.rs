//! [`Stamp`]: the metadata a source puts on each frame, as YoMo's sources do
//! (`core.NewMetadata(clientID, id.New())`): its own id and a fresh transaction id.
//!
//! The map is encoded once per source with a placeholder tid as its last value; each
//! frame's copy is that template with the next tid ([`Tids`]) written over the placeholder,
//! in a buffer reused from frame to frame (its bytes are free again once the frame is
//! encoded), so stamping a frame allocates nothing.
//!
//! ```text
//!  82  ae "yomo-source-id"  b5 <21-char client id>  a8 "yomo-tid"  b5 <21-char tid>
//!  map                                                                └ rewritten per frame
//! ```

use bytes::{Bytes, BytesMut};

use super::id::{Tids, ID_LEN};
use crate::metadata::{self, Metadata};

/// Stamps a source's frames (see the module doc).
#[derive(Debug)]
pub(crate) struct Stamp {
    /// `{yomo-source-id: ID, yomo-tid: PLACEHOLDER}`, the tid's bytes last.
    template: Bytes,
    /// Where each frame's copy is made; what a sent frame's copy took is reclaimed.
    arena: BytesMut,
    tids: Tids,
}

impl Stamp {
    /// Stamps for the source whose id is `source_id`.
    pub fn new(source_id: &str) -> Stamp {
        let placeholder = "A".repeat(ID_LEN);
        let template = Metadata::from_pairs([
            (metadata::SOURCE_ID, source_id),
            (metadata::TID, placeholder.as_str()),
        ])
        .as_bytes()
        .clone();
        debug_assert!(template.ends_with(placeholder.as_bytes()));
        Stamp {
            template,
            arena: BytesMut::new(),
            tids: Tids::new(),
        }
    }

    /// The next frame's metadata: this source's id and a fresh tid.
    pub fn next(&mut self) -> Metadata {
        let len = self.template.len();
        if self.arena.capacity() < len {
            // Takes the buffer back when no earlier frame's copy is still alive, and
            // allocates (room for 64 copies) only when one is.
            self.arena.reserve(64 * len);
        }
        self.arena.extend_from_slice(&self.template);
        let tid = self.tids.next_bytes();
        self.arena[len - ID_LEN..].copy_from_slice(tid);
        Metadata::from_bytes(self.arena.split().freeze())
    }

    /// The next frame's metadata with `yomo-target` = `target` (built in full: targeted
    /// sends are the rare kind). An empty target is left out, as a plain send.
    pub fn with_target(&mut self, source_id: &str, target: &str) -> Metadata {
        Metadata::from_pairs([
            (metadata::SOURCE_ID, source_id),
            (metadata::TARGET, target),
            (metadata::TID, self.tids.next()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stamp_is_yomos_map_with_a_fresh_tid() {
        let mut stamp = Stamp::new("SRC-ID");
        let mut tids = std::collections::HashSet::new();
        let kept: Vec<Metadata> = (0..200).map(|_| stamp.next()).collect();
        for md in &kept {
            assert_eq!(md.get(metadata::SOURCE_ID).unwrap(), Some("SRC-ID"));
            let tid = md.get(metadata::TID).unwrap().unwrap();
            assert_eq!(tid.len(), ID_LEN);
            assert!(tids.insert(tid.to_owned()), "tid {tid} repeated");
            assert_eq!(md.to_map().unwrap().len(), 2);
        }
        // Frames dropped as soon as they are made (encoded and sent) reuse the buffer.
        for _ in 0..1000 {
            let md = stamp.next();
            assert!(tids.insert(md.get(metadata::TID).unwrap().unwrap().to_owned()));
        }
        let md = stamp.with_target("SRC-ID", "fn-b");
        assert_eq!(md.get(metadata::TARGET).unwrap(), Some("fn-b"));
        assert!(tids.insert(md.get(metadata::TID).unwrap().unwrap().to_owned()));
        assert_eq!(stamp.with_target("SRC-ID", "").to_map().unwrap().len(), 2);
    }
}
