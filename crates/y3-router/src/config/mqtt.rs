//! `[mqtt]`: the MQTT listener, its limits, and the mapping between MQTT topics and data tags.
//!
//! ```toml
//! [mqtt]
//! listen = "127.0.0.1:1883"   # "" (the default): no MQTT listener
//! tls_listen = "127.0.0.1:8883" # MQTT over TLS 1.3 with the router's certificate ([tls], or
//!                             # the dev certificate) and its client CA policy; "": none
//! max_packet_bytes = 1048576  # an MQTT packet's remaining length, at most (checked from
//!                             # the fixed header, before anything is buffered)
//! max_subscriptions = 64      # topic filters one session may hold
//! max_session_queue = 10000   # messages kept for one session (offline or in flight); past
//!                             # it the oldest is dropped (counted: mqtt_dropped "session_full",
//!                             # logged once per session); Mosquitto's default is 1000
//! max_inflight = 256          # QoS 1 messages sent to one client and not yet acknowledged
//!                             # (fewer if its MQTT 5 CONNECT says a smaller Receive Maximum)
//! receive_maximum = 1024      # QoS 1 publishes a client may have unacknowledged (MQTT 5:
//!                             # announced in CONNACK, one past it closes with 0x93)
//! max_sessions = 10000        # persistent sessions kept; past it a new one is refused
//! max_retained = 1024         # retained messages kept (one per topic); past it refused, counted
//! max_retained_bytes = 1048576 # their payloads together
//! max_saved_bytes = 67108864  # payload bytes of persistent sessions written to the state
//!                             # directory at a graceful stop (past it: not saved, counted)
//!
//! [[mqtt.publish]]            # a publish whose topic matches `topic` goes out under `tag`
//! topic = "sensors/+/noise"   # (the first mapping that matches); none: refused (0x90)
//! tag = 0x10
//!
//! [[mqtt.subscribe]]          # frames of `tag` reach MQTT subscribers as `topic`; with
//! tag = 0x20                  # wildcards, as the frame's `mqtt-topic` when that matches it
//! topic = "alerts/noise"
//! ```
//!
//! Credentials: an MQTT client's password is a token of `[auth]` (the main one or one of
//! `[[auth.tokens]]`, whose `publish`/`observe` lists then bound what it may publish and
//! which mapped tags it may subscribe to); its user name is its name in logs.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::error::RouterError;

/// `[mqtt]`: see the module docs for the TOML and the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MqttConfig {
    /// The MQTT (plain TCP) listener; empty: none.
    pub listen: String,
    /// The MQTT over TLS listener (the router's certificate); empty: none.
    pub tls_listen: String,
    /// Longest MQTT packet (its remaining length), bytes.
    pub max_packet_bytes: usize,
    /// Topic filters one session may hold.
    pub max_subscriptions: usize,
    /// Messages kept for one session, queued or in flight.
    pub max_session_queue: usize,
    /// QoS 1 messages in flight to one client.
    pub max_inflight: usize,
    /// QoS 1 publishes one client may have unacknowledged (MQTT 5's Receive Maximum).
    pub receive_maximum: u16,
    /// Persistent sessions kept.
    pub max_sessions: usize,
    /// Retained messages kept.
    pub max_retained: usize,
    /// Bytes of retained payloads kept together.
    pub max_retained_bytes: usize,
    /// Payload bytes of persistent sessions saved at a graceful stop (`saved.rs`).
    pub max_saved_bytes: usize,
    /// Topic filters → tags, for publishes.
    pub publish: Vec<PublishMap>,
    /// Tags → topics, for subscribers.
    pub subscribe: Vec<SubscribeMap>,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            listen: String::new(),
            tls_listen: String::new(),
            max_packet_bytes: 1024 * 1024,
            max_subscriptions: 64,
            max_session_queue: 10_000,
            max_inflight: 256,
            receive_maximum: 1024,
            max_sessions: 10_000,
            max_retained: 1024,
            max_retained_bytes: 1024 * 1024,
            max_saved_bytes: 64 * 1024 * 1024,
            publish: Vec::new(),
            subscribe: Vec::new(),
        }
    }
}

/// `[[mqtt.publish]]`: publishes on topics matching `topic` become frames of `tag`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishMap {
    /// An MQTT topic filter (`+` and `#` allowed).
    pub topic: String,
    /// The data tag.
    pub tag: u32,
}

/// `[[mqtt.subscribe]]`: frames of `tag` reach MQTT subscribers as `topic`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeMap {
    /// The data tag.
    pub tag: u32,
    /// A topic, or a filter: then the frame's `mqtt-topic` metadata, when it matches.
    pub topic: String,
}

impl MqttConfig {
    /// The listener's address, or `None` when off.
    ///
    /// # Errors
    /// [`RouterError::Config`] for an address that does not parse, a mapping topic that is
    /// not a valid filter, or a zero limit.
    pub fn validate(&self) -> Result<Option<SocketAddr>, RouterError> {
        let bad = |field, problem| Err(RouterError::Config { field, problem });
        for m in &self.publish {
            if !rumqttc::mqttbytes::valid_filter(&m.topic) {
                return bad("mqtt.publish.topic", "not a valid MQTT topic filter");
            }
        }
        for m in &self.subscribe {
            if !rumqttc::mqttbytes::valid_filter(&m.topic) {
                return bad("mqtt.subscribe.topic", "not a valid MQTT topic filter");
            }
        }
        if self.max_packet_bytes == 0
            || self.max_session_queue == 0
            || self.max_inflight == 0
            || self.receive_maximum == 0
            || self.max_subscriptions == 0
        {
            return bad("mqtt", "limits must be above 0");
        }
        if self.max_inflight > usize::from(u16::MAX) {
            return bad("mqtt.max_inflight", "at most 65535 (packet ids)");
        }
        self.tls_addr()?;
        if self.listen.is_empty() {
            return Ok(None);
        }
        match self.listen.parse() {
            Ok(addr) => Ok(Some(addr)),
            Err(_) => bad("mqtt.listen", "not a socket address (host:port)"),
        }
    }

    /// The TLS listener's address, or `None` when off.
    ///
    /// # Errors
    /// [`RouterError::Config`] for an address that does not parse.
    pub fn tls_addr(&self) -> Result<Option<SocketAddr>, RouterError> {
        if self.tls_listen.is_empty() {
            return Ok(None);
        }
        match self.tls_listen.parse() {
            Ok(addr) => Ok(Some(addr)),
            Err(_) => Err(RouterError::Config {
                field: "mqtt.tls_listen",
                problem: "not a socket address (host:port)",
            }),
        }
    }

    /// The tag a publish on `topic` goes out under: the first mapping that matches.
    pub fn tag_of(&self, topic: &str) -> Option<u32> {
        self.publish
            .iter()
            .find(|m| topic_matches(topic, &m.topic))
            .map(|m| m.tag)
    }

    /// The topic a frame of `tag` whose `mqtt-topic` metadata is `origin` reaches MQTT
    /// subscribers as, for each subscribe mapping of `tag`.
    pub fn topics_of<'a>(
        &'a self,
        tag: u32,
        origin: Option<&'a str>,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.subscribe
            .iter()
            .filter(move |m| m.tag == tag)
            .filter_map(move |m| {
                if rumqttc::mqttbytes::has_wildcards(&m.topic) {
                    origin.filter(|o| topic_matches(o, &m.topic))
                } else {
                    Some(m.topic.as_str())
                }
            })
    }

    /// The tags whose mapped topics a subscription to `filter` may receive.
    pub fn tags_for_filter(&self, filter: &str) -> Vec<u32> {
        let mut tags: Vec<u32> = self
            .subscribe
            .iter()
            .filter(|m| filters_overlap(filter, &m.topic))
            .map(|m| m.tag)
            .collect();
        tags.sort_unstable();
        tags.dedup();
        tags
    }
}

/// Whether `topic` matches the topic filter `filter`, by MQTT's rules as rumqttc's
/// `mqttbytes::matches` applies them (a topic that starts with `$` matches no filter;
/// `a/#` matches `a`), without allocating or searching by `str` patterns: it runs for
/// every message published and delivered.
///
/// ```text
///  topic  sensors/a/noise     levels split at '/', compared one by one:
///  filter sensors/+/noise     '+' takes any one level, '#' the rest (and none)
/// ```
pub(crate) fn topic_matches(topic: &str, filter: &str) -> bool {
    if topic.starts_with('$') {
        return false;
    }
    let (mut topic, mut filter) = (Some(topic.as_bytes()), filter.as_bytes());
    loop {
        let (f, more) = next_level(filter);
        if f == b"#" {
            return true;
        }
        let Some(t) = topic else { return false };
        let (level, after) = next_level(t);
        if level == b"#" || (f != b"+" && f != level) {
            return false;
        }
        topic = after;
        match more {
            Some(rest) => filter = rest,
            None => return topic.is_none(),
        }
    }
}

/// The first level of `name` and what follows its `/` (`None`: it was the last).
fn next_level(name: &[u8]) -> (&[u8], Option<&[u8]>) {
    match name.iter().position(|&b| b == b'/') {
        Some(i) => (&name[..i], Some(&name[i + 1..])),
        None => (name, None),
    }
}

/// Whether some topic matches both filters (a topic is a filter without wildcards).
pub(crate) fn filters_overlap(a: &str, b: &str) -> bool {
    let (mut x, mut y) = (a.split('/'), b.split('/'));
    loop {
        match (x.next(), y.next()) {
            (Some("#"), _) | (_, Some("#")) => return true,
            (None, None) => return true,
            (Some(p), Some(q)) => {
                if p != "+" && q != "+" && p != q {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same verdict as rumqttc's `matches` on every pair of a corpus of topics and
    /// filters (levels empty, `+`, `#`, `$`, prefixes, trailing slashes).
    #[test]
    fn topic_matches_agrees_with_rumqttc() {
        let levels = ["", "a", "b", "ab", "+", "#", "$SYS"];
        let mut names = vec![String::new()];
        for _ in 0..3 {
            let mut longer = Vec::new();
            for n in &names {
                for l in levels {
                    longer.push(if n.is_empty() {
                        l.to_string()
                    } else {
                        format!("{n}/{l}")
                    });
                }
            }
            names.extend(longer);
        }
        names.sort();
        names.dedup();
        let mut checked = 0;
        for topic in &names {
            for filter in &names {
                assert_eq!(
                    topic_matches(topic, filter),
                    rumqttc::mqttbytes::matches(topic, filter),
                    "{topic:?} {filter:?}"
                );
                checked += 1;
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    fn config() -> MqttConfig {
        toml::from_str(
            r#"
            listen = "127.0.0.1:0"
            [[publish]]
            topic = "sensors/+/noise"
            tag = 0x10
            [[subscribe]]
            tag = 0x20
            topic = "alerts/noise"
            [[subscribe]]
            tag = 0x10
            topic = "sensors/+/noise"
            "#,
        )
        .unwrap()
    }

    #[test]
    fn maps_topics_to_tags_and_back() {
        let c = config();
        assert!(c.validate().unwrap().is_some());
        assert_eq!(c.tag_of("sensors/a/noise"), Some(0x10));
        assert_eq!(c.tag_of("sensors/a/b/noise"), None);
        assert_eq!(c.tag_of("other"), None);
        assert_eq!(
            c.topics_of(0x20, None).collect::<Vec<_>>(),
            ["alerts/noise"]
        );
        assert_eq!(
            c.topics_of(0x10, Some("sensors/x/noise"))
                .collect::<Vec<_>>(),
            ["sensors/x/noise"]
        );
        assert_eq!(c.topics_of(0x10, Some("elsewhere")).count(), 0);
        assert_eq!(c.tags_for_filter("#"), [0x10, 0x20]);
        assert_eq!(c.tags_for_filter("alerts/+"), [0x20]);
        assert_eq!(c.tags_for_filter("sensors/k/noise"), [0x10]);
        assert!(c.tags_for_filter("nothing/here").is_empty());
    }

    #[test]
    fn refuses_bad_filters_and_addresses() {
        let mut c = config();
        c.publish[0].topic = "a/#/b".into();
        assert!(c.validate().is_err());
        let mut c = config();
        c.listen = "nope".into();
        assert!(c.validate().is_err());
        assert_eq!(MqttConfig::default().validate().unwrap(), None);
    }
}
