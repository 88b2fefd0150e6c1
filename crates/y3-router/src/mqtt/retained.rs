//! Retained messages: the last retained publish of each topic, bounded in count and bytes.

use std::collections::BTreeMap;

use bytes::Bytes;

/// The retained messages, by topic: the tag the publish went out under and its payload.
#[derive(Debug, Default)]
pub(crate) struct Retained {
    by_topic: BTreeMap<String, (u32, Bytes)>,
    bytes: usize,
}

impl Retained {
    /// Keeps `payload` for `topic` (an empty payload removes it, as MQTT says); `false`
    /// when that would pass `max` messages or `max_bytes` (nothing changes then).
    pub fn put(
        &mut self,
        topic: &str,
        tag: u32,
        payload: Bytes,
        max: usize,
        max_bytes: usize,
    ) -> bool {
        let old = self.by_topic.get(topic).map_or(0, |(_, p)| p.len());
        if payload.is_empty() {
            self.by_topic.remove(topic);
            self.bytes -= old;
            return true;
        }
        let grows = !self.by_topic.contains_key(topic);
        if (grows && self.by_topic.len() >= max) || self.bytes - old + payload.len() > max_bytes {
            return false;
        }
        self.bytes = self.bytes - old + payload.len();
        self.by_topic.insert(topic.to_owned(), (tag, payload));
        true
    }

    /// Messages kept.
    pub fn len(&self) -> usize {
        self.by_topic.len()
    }

    /// Every (topic, tag, payload).
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, &Bytes)> {
        self.by_topic
            .iter()
            .map(|(t, (tag, p))| (t.as_str(), *tag, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_cleared_by_an_empty_payload() {
        let mut r = Retained::default();
        assert!(r.put("a", 1, Bytes::from_static(b"xx"), 2, 4));
        assert!(
            r.put("a", 1, Bytes::from_static(b"yyy"), 2, 4),
            "replacing fits"
        );
        assert!(
            !r.put("b", 1, Bytes::from_static(b"zz"), 2, 4),
            "bytes over"
        );
        assert!(r.put("b", 1, Bytes::from_static(b"z"), 2, 4));
        assert!(
            !r.put("c", 1, Bytes::from_static(b"z"), 2, 100),
            "count over"
        );
        assert!(r.put("a", 1, Bytes::new(), 2, 4));
        assert_eq!(r.len(), 1);
        assert!(r.put("c", 1, Bytes::from_static(b"z"), 2, 4));
    }
}
