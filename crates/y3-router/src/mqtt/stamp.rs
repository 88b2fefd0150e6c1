//! [`Stamp`]: the metadata of one connection's publishes, encoded once per topic.
//!
//! Every publish of a connection carries the same three pairs, in this order (what
//! `Metadata::from_pairs` encodes; a pair whose value is empty, such as an empty client
//! id, is left out as there):
//!
//! ```text
//!  yomo-source-id = client id      the same for the connection's life
//!  yomo-tid       = tid            ID_LEN ASCII bytes, new for each publish
//!  mqtt-topic     = topic          the same while the client publishes on one topic
//! ```
//!
//! So the map is encoded once for a topic (by `Metadata::from_pairs`, the one home of the
//! encoding), with the tid's offset found by `Metadata::get_bytes`; each publish copies
//! those bytes and writes its own tid over the first's. A publish on another topic, or a
//! tid of another length, encodes the map again. Measured with `scripts/icount-mqtt`
//! (64 B, QoS 0), `from_pairs` and the tid's UTF-8 check were about 1,240 router
//! instructions per publish.

use bytes::BytesMut;
use y3_transport::metadata::{self, Metadata};

use super::link::TOPIC_KEY;

/// A connection's publish metadata, encoded for its last topic (see the module).
#[derive(Debug, Default)]
pub(crate) struct Stamp {
    /// The topic `encoded` is for.
    topic: String,
    /// The map as `from_pairs` encoded it, with the tid it was encoded with.
    encoded: BytesMut,
    /// Where the tid's bytes start in `encoded`, and how many there are.
    tid_at: usize,
    tid_len: usize,
}

impl Stamp {
    /// The metadata of a publish on `topic` with transaction id `tid` (ASCII) from client
    /// `client_id`, which must be the same for every call on one `Stamp`.
    pub fn metadata(&mut self, client_id: &str, tid: &[u8], topic: &str) -> Metadata {
        if self.encoded.is_empty() || self.tid_len != tid.len() || self.topic != topic {
            return self.encode(client_id, tid, topic);
        }
        let mut out = BytesMut::from(&self.encoded[..]);
        out[self.tid_at..self.tid_at + self.tid_len].copy_from_slice(tid);
        Metadata::from_bytes(out.freeze())
    }

    /// Encodes the map with `from_pairs`, kept for the next publishes on `topic` when its
    /// tid is found in it (a tid that is not UTF-8, never the case, is left out of the
    /// map by `from_pairs`: then nothing is kept).
    fn encode(&mut self, client_id: &str, tid: &[u8], topic: &str) -> Metadata {
        let md = Metadata::from_pairs([
            (metadata::SOURCE_ID, client_id),
            (metadata::TID, std::str::from_utf8(tid).unwrap_or_default()),
            (TOPIC_KEY, topic),
        ]);
        self.encoded.clear();
        self.topic.clear();
        let bytes = md.as_bytes();
        if let Ok(Some(v)) = md.get_bytes(metadata::TID) {
            if v == tid {
                self.tid_at = v.as_ptr() as usize - bytes.as_ptr() as usize;
                self.tid_len = tid.len();
                self.encoded.extend_from_slice(bytes);
                self.topic.push_str(topic);
            }
        }
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(client_id: &str, tid: &[u8], topic: &str) -> Metadata {
        Metadata::from_pairs([
            (metadata::SOURCE_ID, client_id),
            (metadata::TID, std::str::from_utf8(tid).unwrap()),
            (TOPIC_KEY, topic),
        ])
    }

    #[test]
    fn each_publish_gets_the_map_from_pairs_encodes() {
        let mut tids = y3_transport::sdk::Tids::new();
        for client in ["sensor-1", "", &"c".repeat(40)] {
            let mut stamp = Stamp::default();
            for topic in ["a/b", "a/b", "a/c", &"t/".repeat(30), "a/b"] {
                for _ in 0..3 {
                    let tid = *tids.next_bytes();
                    let got = stamp.metadata(client, &tid, topic);
                    assert_eq!(got, plain(client, &tid, topic), "{client:?} {topic:?}");
                    assert_eq!(got.get(metadata::TID).unwrap().unwrap().as_bytes(), tid);
                    assert_eq!(got.get(TOPIC_KEY).unwrap(), Some(topic));
                }
            }
        }
    }

    #[test]
    fn a_tid_of_another_length_encodes_again() {
        let mut stamp = Stamp::default();
        for tid in ["tid-1", "tid-22", "t", "tid-333"] {
            let got = stamp.metadata("c", tid.as_bytes(), "x/y");
            assert_eq!(got, plain("c", tid.as_bytes(), "x/y"));
        }
    }

    #[test]
    fn a_tid_that_is_not_utf8_is_left_out_as_from_pairs_leaves_an_empty_value() {
        let mut stamp = Stamp::default();
        for _ in 0..2 {
            let got = stamp.metadata("c", &[0xff, 0xfe], "x/y");
            assert_eq!(
                got,
                Metadata::from_pairs([(metadata::SOURCE_ID, "c"), (TOPIC_KEY, "x/y")])
            );
        }
    }
}
