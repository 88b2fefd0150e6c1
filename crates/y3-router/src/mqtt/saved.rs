//! Persistent sessions across a router restart: at a graceful stop (SIGTERM, `shutdown`)
//! the router writes its persistent MQTT sessions (subscriptions, queued and unacknowledged
//! QoS 1 messages) and its retained messages into the state directory; its successor reads
//! the file, removes it, and serves the sessions to their clients when they come back.
//!
//! ```text
//!  <state dir>/mqtt-sessions-<listen>   0600, written at a graceful stop (temp + rename),
//!                                       read and removed by the next start
//!
//!  file     := "y3mqtt1\n" u32 sessions session* u32 retained retained*
//!  session  := str client_id  u32 expiry_secs (u32::MAX: never)
//!              u16 subs (str filter, u8 qos)*  u32 messages message*
//!  message  := str topic  u8 qos  u8 flags (1 retain, 2 dup)  bytes payload
//!  retained := str topic  u32 tag  bytes payload
//!  str      := u16 length, UTF-8      bytes := u32 length, bytes      (big-endian)
//! ```
//!
//! Bounded by `mqtt.max_saved_bytes` of payloads: messages past it are not written,
//! counted as dropped (`not_saved`), logged once. A SIGKILLed router writes nothing: its
//! successor starts with the sessions of the last graceful stop only if no start came in
//! between (the file is removed when read). A restored session has no downlink until its
//! client reconnects (its credentials open it): frames routed in between do not reach it.
//! The QoS 1 messages in flight when the router stopped are sent again, flagged dup.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::packet::Publish;

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"y3mqtt1\n";

/// One saved session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SavedSession {
    /// Its client id.
    pub client_id: String,
    /// Seconds it outlives its client (MQTT 5's expiry); `None`: forever.
    pub expiry_secs: Option<u32>,
    /// Its topic filters and granted QoS.
    pub subscriptions: Vec<(String, u8)>,
    /// Its messages, in flight first (flagged dup) then queued.
    pub messages: Vec<Publish>,
}

/// What a file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Saved {
    /// The persistent sessions.
    pub sessions: Vec<SavedSession>,
    /// The retained messages: topic, tag, payload.
    pub retained: Vec<(String, u32, Bytes)>,
}

/// The file of the MQTT listener configured as `listen` in `dir`.
pub(crate) fn path(dir: &Path, listen: &str) -> PathBuf {
    let name: String = listen
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    dir.join(format!("mqtt-sessions-{name}"))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Topics, filters and client ids are MQTT strings: 65,535 bytes at most.
    let s = &s.as_bytes()[..s.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

impl Saved {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(self.sessions.len() as u32).to_be_bytes());
        for s in &self.sessions {
            put_str(&mut out, &s.client_id);
            out.extend_from_slice(&s.expiry_secs.unwrap_or(u32::MAX).to_be_bytes());
            out.extend_from_slice(&(s.subscriptions.len() as u16).to_be_bytes());
            for (filter, qos) in &s.subscriptions {
                put_str(&mut out, filter);
                out.push(*qos);
            }
            out.extend_from_slice(&(s.messages.len() as u32).to_be_bytes());
            for m in &s.messages {
                put_str(&mut out, &m.topic);
                out.push(m.qos);
                out.push(u8::from(m.retain) | (u8::from(m.dup) << 1));
                put_bytes(&mut out, &m.payload);
            }
        }
        out.extend_from_slice(&(self.retained.len() as u32).to_be_bytes());
        for (topic, tag, payload) in &self.retained {
            put_str(&mut out, topic);
            out.extend_from_slice(&tag.to_be_bytes());
            put_bytes(&mut out, payload);
        }
        out
    }

    /// Reads a file's bytes; every length is checked against what is left (a count
    /// reserves nothing), so a damaged file is an error, never a large allocation.
    pub fn decode(bytes: &[u8]) -> Result<Saved, &'static str> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err("not an MQTT sessions file");
        }
        let mut saved = Saved::default();
        for _ in 0..r.u32()? {
            let client_id = r.string()?;
            let expiry = r.u32()?;
            let mut subscriptions = Vec::new();
            for _ in 0..r.u16()? {
                let filter = r.string()?;
                subscriptions.push((filter, r.u8()?.min(1)));
            }
            let mut messages = Vec::new();
            for _ in 0..r.u32()? {
                let topic = r.string()?;
                let qos = r.u8()?.min(1);
                let flags = r.u8()?;
                let len = r.u32()? as usize;
                messages.push(Publish {
                    topic,
                    qos,
                    pkid: 0,
                    retain: flags & 1 != 0,
                    dup: flags & 2 != 0,
                    payload: Bytes::copy_from_slice(r.take(len)?),
                });
            }
            saved.sessions.push(SavedSession {
                client_id,
                expiry_secs: (expiry != u32::MAX).then_some(expiry),
                subscriptions,
                messages,
            });
        }
        for _ in 0..r.u32()? {
            let topic = r.string()?;
            let tag = r.u32()?;
            let len = r.u32()? as usize;
            saved
                .retained
                .push((topic, tag, Bytes::copy_from_slice(r.take(len)?)));
        }
        if !r.0.is_empty() {
            return Err("bytes after the end");
        }
        Ok(saved)
    }

    /// Writes the file (0600) through a temporary name, synced, then renamed over `path`.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(&self.encode())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    }

    /// Reads and removes the file at `path`; `Ok(None)` when there is none. A file larger
    /// than `max_bytes` is refused unread.
    pub fn take(path: &Path, max_bytes: u64) -> io::Result<Option<Saved>> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !meta.is_file() || meta.len() > max_bytes {
            return Err(io::Error::other(
                "not a plain file, or larger than mqtt.max_saved_bytes allows",
            ));
        }
        let bytes = std::fs::read(path)?;
        std::fs::remove_file(path)?;
        Saved::decode(&bytes).map(Some).map_err(io::Error::other)
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.0.len() {
            return Err("truncated");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Result<String, &'static str> {
        let len = usize::from(self.u16()?);
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "a string is not UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let saved = Saved {
            sessions: vec![SavedSession {
                client_id: "dash".into(),
                expiry_secs: Some(60),
                subscriptions: vec![("sensors/#".into(), 1)],
                messages: vec![Publish {
                    topic: "sensors/a/noise".into(),
                    qos: 1,
                    pkid: 0,
                    retain: false,
                    dup: true,
                    payload: Bytes::from_static(b"x"),
                }],
            }],
            retained: vec![("alerts/noise".into(), 0x20, Bytes::from_static(b"r"))],
        };
        let bytes = saved.encode();
        assert_eq!(Saved::decode(&bytes), Ok(saved));
        for cut in 0..bytes.len() {
            assert!(Saved::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A huge count with nothing behind it: an error, no allocation.
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Saved::decode(&huge).is_err());
    }
}
