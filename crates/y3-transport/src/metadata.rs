//! [`Metadata`]: the string map a data frame carries, msgpack-encoded as YoMo writes it.
//!
//! The bytes stay as they arrived ([`Bytes`], no copy); lookups walk them in place, and a
//! new map is only built when the router must change one (a merge, a removed key).
//!
//! ```text
//! map    = fixmap 0x80|n (n < 16) | map16 0xde n:u16 | map32 0xdf n:u32    then n pairs
//!          (nil 0xc0, and the empty field itself, read as the empty map)
//! pair   = key str | value str
//! str    = fixstr 0xa0|len (len < 32) | str8 0xd9 len:u8 | str16 0xda len:u16
//!          | str32 0xdb len:u32                                           then len bytes
//!          (bin8 0xc4, bin16 0xc5, bin32 0xc6 read the same; nil 0xc0 is the empty string)
//! all lengths big-endian; a string's bytes are any bytes (UTF-8 or not)
//!
//! {"yomo-tid": "tid-0001"}:
//!   81  a8 79 6f 6d 6f 2d 74 69 64  a8 74 69 64 2d 30 30 30 31
//!   map  "yomo-tid"                  "tid-0001"
//! ```
//!
//! Every length is checked against the bytes present before it is used, so hostile input
//! can make a walk fail but never allocate or read out of bounds.
//!
//! A string is bytes, as YoMo's Go SDK and zipper read it (Go strings are bytes; its
//! msgpack decoder reads str, bin and nil as a string): the map is valid whatever bytes
//! its strings hold, and the router compares and forwards them as bytes
//! ([`Metadata::iter_bytes`], [`Metadata::get_bytes`]). The `&str` accessors
//! ([`Metadata::iter`], [`Metadata::get`], [`Metadata::to_map`]) read UTF-8 only: a string
//! that is not is `string is not UTF-8` from them, never a panic.

use std::collections::BTreeMap;
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

/// Metadata key: the source's client id, without its reconnect suffix.
pub const SOURCE_ID: &str = "yomo-source-id";
/// Metadata key: the transaction id, one per message written by a source.
pub const TID: &str = "yomo-tid";
/// Metadata key: route only to the stream functions whose wanted target equals this value.
pub const TARGET: &str = "yomo-target";
/// Metadata key: the wanted target of the connection that sent the frame (set by routers).
pub const WANTED_TARGET: &str = "yomo-wanted-target";

/// Pairs up to which [`Metadata::from_pairs`] finds repeated keys by comparing each with
/// the later ones rather than through a hash map.
const FEW_PAIRS: usize = 16;

/// Why bytes are not a msgpack string map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad metadata at byte {offset}: {what}")]
pub struct MetadataError {
    /// Offset of the offending byte.
    pub offset: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl MetadataError {
    /// The stable snake_case kind.
    pub const fn kind(&self) -> &'static str {
        "bad_metadata"
    }
}

/// A data frame's metadata: msgpack `map[string]string`, kept as its encoded bytes.
///
/// # Examples
///
/// ```
/// use y3_transport::metadata::Metadata;
///
/// let md = Metadata::from_pairs([("yomo-tid", "tid-0001")]);
/// assert_eq!(md.as_bytes()[0], 0x81);
/// assert_eq!(md.get("yomo-tid")?, Some("tid-0001"));
/// assert_eq!(md.get("other")?, None);
/// # Ok::<(), y3_transport::metadata::MetadataError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Metadata(Bytes);

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for entry in self.iter_bytes() {
            match entry {
                Ok((k, v)) => map.entry(&String::from_utf8_lossy(k), &String::from_utf8_lossy(v)),
                Err(e) => map.entry(&"<error>", &e.what),
            };
        }
        map.finish()
    }
}

impl Metadata {
    /// The empty map (zero bytes on the wire).
    pub const fn empty() -> Metadata {
        Metadata(Bytes::new())
    }

    /// Wraps encoded bytes as they arrived; nothing is checked until they are read
    /// (see [`Metadata::validate`]).
    pub const fn from_bytes(bytes: Bytes) -> Metadata {
        Metadata(bytes)
    }

    /// Encodes `pairs` in the order given. Pairs with an empty value are left out, as
    /// YoMo's `Set("")` deletes a key; a key repeated keeps its last value.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Metadata {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        // Each key's last occurrence decides. For a frame's usual handful a rescan of the
        // later keys (at most FEW_PAIRS² / 2 comparisons) is cheaper than hashing; past
        // that, a hash map keeps it linear.
        let last: Option<std::collections::HashMap<&str, usize>> =
            (pairs.len() > FEW_PAIRS).then(|| {
                pairs
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (*k, i))
                    .collect()
            });
        let is_last = |i: usize, k: &str| match &last {
            Some(last) => last[k] == i,
            None => !pairs[i + 1..].iter().any(|p| p.0 == k),
        };
        let kept: Vec<(&[u8], &[u8])> = pairs
            .iter()
            .enumerate()
            .filter(|(i, (k, v))| !v.is_empty() && is_last(*i, k))
            .map(|(_, (k, v))| (k.as_bytes(), v.as_bytes()))
            .collect();
        Metadata::encode(&kept)
    }

    fn encode(pairs: &[(&[u8], &[u8])]) -> Metadata {
        if pairs.is_empty() {
            return Metadata::empty();
        }
        let len = map_head_len(pairs.len())
            + pairs
                .iter()
                .map(|(k, v)| str_len(k.len()) + str_len(v.len()))
                .sum::<usize>();
        let mut out = BytesMut::with_capacity(len);
        put_map_head(&mut out, pairs.len());
        for (k, v) in pairs {
            put_str(&mut out, k);
            put_str(&mut out, v);
        }
        Metadata(out.freeze())
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Whether the encoding is empty (the empty map as YoMo writes it).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Walks the pairs in wire order.
    pub fn iter(&self) -> Entries<'_> {
        Entries::new(&self.0)
    }

    /// Walks the pairs in wire order as bytes: the map checked as [`Metadata::iter`]
    /// checks it (the same errors at the same offsets), but its strings taken as the bytes
    /// they are, UTF-8 or not, as YoMo reads them. The router compares keys and forwards
    /// values this way.
    pub fn iter_bytes(&self) -> ByteEntries<'_> {
        ByteEntries(Entries::new(&self.0))
    }

    /// Checks the whole map, returning its number of pairs (strings that are not UTF-8
    /// are valid: they are bytes).
    ///
    /// # Errors
    /// [`MetadataError`] for anything that is not a msgpack string map, or trailing bytes.
    pub fn validate(&self) -> Result<usize, MetadataError> {
        let mut n = 0;
        for entry in self.iter_bytes() {
            entry?;
            n += 1;
        }
        Ok(n)
    }

    /// The value of `key` (the last one, if repeated), walking the map in place.
    ///
    /// # Errors
    /// As [`Metadata::validate`]: the whole map is walked; and `string is not UTF-8` if
    /// the value is not (read it with [`Metadata::get_bytes`]). Other pairs may hold any
    /// bytes.
    pub fn get(&self, key: &str) -> Result<Option<&str>, MetadataError> {
        let map = self.0.as_ref();
        self.get_bytes(key)?
            .map(|v| {
                std::str::from_utf8(v).map_err(|_| MetadataError {
                    offset: v.as_ptr() as usize - map.as_ptr() as usize,
                    what: "string is not UTF-8",
                })
            })
            .transpose()
    }

    /// The value of `key` as bytes (the last one, if repeated), UTF-8 or not.
    ///
    /// # Errors
    /// As [`Metadata::validate`]: the whole map is walked.
    pub fn get_bytes(&self, key: &str) -> Result<Option<&[u8]>, MetadataError> {
        let mut found = None;
        for entry in self.iter_bytes() {
            let (k, v) = entry?;
            if k == key.as_bytes() {
                found = Some(v);
            }
        }
        Ok(found)
    }

    /// The values of `keys` as bytes (the last one of each, if repeated), found in one walk
    /// of the whole map, which is checked as [`Metadata::validate`] checks it. A router
    /// reads `yomo-tid`, `yomo-target` and `yomo-wanted-target` of every frame this way.
    ///
    /// A map of a fixmap head and fixstr strings only (what YoMo's and y3's clients write:
    /// under 16 pairs, strings under 32 bytes) is walked by a loop of its own, one marker
    /// and one bounds check per string; anything else, malformed maps included, takes
    /// [`Metadata::iter_bytes`]'s walk, so the errors are its errors, at its offsets.
    ///
    /// # Errors
    /// As [`Metadata::validate`].
    pub fn find<const N: usize>(
        &self,
        keys: [&[u8]; N],
    ) -> Result<[Option<&[u8]>; N], MetadataError> {
        if let Some(found) = find_fixed(&self.0, keys) {
            return Ok(found);
        }
        let mut found = [None; N];
        for entry in self.iter_bytes() {
            let (k, v) = entry?;
            if let Some(i) = keys.iter().position(|key| *key == k) {
                found[i] = Some(v);
            }
        }
        Ok(found)
    }

    /// The map, decoded.
    ///
    /// # Errors
    /// As [`Metadata::validate`].
    pub fn to_map(&self) -> Result<BTreeMap<String, String>, MetadataError> {
        let mut map = BTreeMap::new();
        for entry in self.iter() {
            let (k, v) = entry?;
            map.insert(k.to_owned(), v.to_owned());
        }
        Ok(map)
    }

    /// A copy with `key` set to `value` (an empty value removes it), the other pairs
    /// kept in order.
    ///
    /// # Errors
    /// As [`Metadata::validate`].
    pub fn with(&self, key: &str, value: &str) -> Result<Metadata, MetadataError> {
        self.edit(&[(key, value)], &[])
    }

    /// A copy without `key`.
    ///
    /// # Errors
    /// As [`Metadata::validate`].
    pub fn without(&self, key: &str) -> Result<Metadata, MetadataError> {
        self.edit(&[], &[key])
    }

    /// A copy with `set` merged over the pairs (empty values remove keys) and the keys in
    /// `remove` left out: one walk, one encoding. Linear in the map (a repeated key keeps
    /// its last value, found through a hash map, never by rescanning the pairs kept).
    ///
    /// # Errors
    /// As [`Metadata::validate`].
    /// The pairs kept are copied as bytes: a string that is not UTF-8 stays as it was.
    pub fn edit(&self, set: &[(&str, &str)], remove: &[&str]) -> Result<Metadata, MetadataError> {
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
        // Where each key's last occurrence is in `pairs`: earlier ones are left out.
        let mut last: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
        for entry in self.iter_bytes() {
            let (k, v) = entry?;
            if remove.iter().any(|r| r.as_bytes() == k)
                || set.iter().any(|(s, _)| s.as_bytes() == k)
            {
                continue;
            }
            last.insert(k, pairs.len());
            pairs.push((k, v));
        }
        if last.len() < pairs.len() {
            let mut i = 0;
            pairs.retain(|(k, _)| {
                i += 1;
                last.get(k) == Some(&(i - 1))
            });
        }
        pairs.extend(
            set.iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.as_bytes(), v.as_bytes())),
        );
        Ok(Metadata::encode(&pairs))
    }

    /// Checks the map's size against `limits` without walking it: its encoded length,
    /// then the pair count its head declares (a lying count is caught by the walk that
    /// follows). Constant time, so a frame over a limit costs no more than reading it.
    ///
    /// # Errors
    /// [`MetadataTooLarge`] over either limit.
    pub fn check_size(&self, limits: MetadataLimits) -> Result<(), MetadataTooLarge> {
        if self.0.len() > limits.max_bytes {
            return Err(MetadataTooLarge::Bytes {
                len: self.0.len(),
                limit: limits.max_bytes,
            });
        }
        // A head that is not a map is left to the walk (`bad_metadata`).
        let declared = Entries::new(&self.0).left;
        if declared > limits.max_entries as u64 {
            return Err(MetadataTooLarge::Entries {
                count: declared,
                limit: limits.max_entries,
            });
        }
        Ok(())
    }
}

/// Bounds on a frame's metadata (the router's `[limits]` holds the values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataLimits {
    /// Most encoded bytes.
    pub max_bytes: usize,
    /// Most pairs.
    pub max_entries: usize,
}

/// Metadata over a [`MetadataLimits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MetadataTooLarge {
    /// More encoded bytes than allowed.
    #[error("metadata of {len} bytes is over the limit of {limit}")]
    Bytes {
        /// Encoded length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// More pairs than allowed.
    #[error("metadata of {count} pairs is over the limit of {limit}")]
    Entries {
        /// Pairs the map's head declares.
        count: u64,
        /// The limit.
        limit: usize,
    },
}

impl MetadataTooLarge {
    /// The stable snake_case kind.
    pub const fn kind(&self) -> &'static str {
        "metadata_too_large"
    }
}

impl From<Bytes> for Metadata {
    fn from(bytes: Bytes) -> Metadata {
        Metadata(bytes)
    }
}

/// The pairs of a [`Metadata`], borrowed from its bytes. Yields an error once, then stops.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    buf: &'a [u8],
    pos: usize,
    left: u64,
    pending: Option<MetadataError>,
    done: bool,
}

impl<'a> Entries<'a> {
    fn new(buf: &'a [u8]) -> Entries<'a> {
        let mut entries = Entries {
            buf,
            pos: 0,
            left: 0,
            pending: None,
            done: false,
        };
        match entries.map_head() {
            Ok(n) => entries.left = n,
            Err(e) => entries.pending = Some(e),
        }
        entries
    }

    fn err(&self, what: &'static str) -> MetadataError {
        MetadataError {
            offset: self.pos,
            what,
        }
    }

    /// Reads `n` big-endian bytes as a length.
    fn be(&mut self, n: usize) -> Result<u64, MetadataError> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or(self.err("truncated length"))?;
        self.pos += n;
        Ok(bytes.iter().fold(0u64, |acc, &b| acc << 8 | b as u64))
    }

    fn map_head(&mut self) -> Result<u64, MetadataError> {
        let Some(&marker) = self.buf.first() else {
            return Ok(0);
        };
        let n = match marker {
            0x80..=0x8f => (marker & 0x0f) as u64,
            0xde | 0xdf => {
                self.pos = 1;
                self.be(if marker == 0xde { 2 } else { 4 })?
            }
            0xc0 => 0,
            _ => return Err(self.err("not a map")),
        };
        self.pos = self.pos.max(1);
        // Each pair takes at least two bytes: a count beyond that is a lie, caught here
        // rather than after walking the rest.
        if n > (self.buf.len() - self.pos) as u64 / 2 {
            return Err(self.err("more pairs than bytes"));
        }
        Ok(n)
    }

    /// The next string's bytes, whatever they are (str, bin, or nil as the empty string,
    /// as YoMo's msgpack decoder reads a string).
    fn str_bytes(&mut self) -> Result<&'a [u8], MetadataError> {
        let marker = *self.buf.get(self.pos).ok_or(self.err("truncated"))?;
        let len = match marker {
            0xa0..=0xbf => {
                self.pos += 1;
                (marker & 0x1f) as u64
            }
            0xc0 => {
                self.pos += 1;
                0
            }
            0xd9..=0xdb => {
                self.pos += 1;
                self.be(1 << (marker - 0xd9))?
            }
            0xc4..=0xc6 => {
                self.pos += 1;
                self.be(1 << (marker - 0xc4))?
            }
            _ => return Err(self.err("not a string")),
        };
        if len > (self.buf.len() - self.pos) as u64 {
            return Err(self.err("string longer than the map"));
        }
        let bytes = &self.buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(bytes)
    }

    fn str(&mut self) -> Result<&'a str, MetadataError> {
        let bytes = self.str_bytes()?;
        std::str::from_utf8(bytes).map_err(|_| MetadataError {
            // Where the string's bytes begin, as `str_bytes` reports it.
            offset: bytes.as_ptr() as usize - self.buf.as_ptr() as usize,
            what: "string is not UTF-8",
        })
    }

    /// The next pair, its strings read by `str`; `None` past the last (an error once, then
    /// `None`).
    fn pair<T>(
        &mut self,
        mut str: impl FnMut(&mut Self) -> Result<T, MetadataError>,
    ) -> Option<Result<(T, T), MetadataError>> {
        if self.done {
            return None;
        }
        let item = match self.pending.take() {
            Some(e) => Err(e),
            None if self.left == 0 => {
                self.done = true;
                if self.pos < self.buf.len() {
                    return Some(Err(self.err("trailing bytes after the map")));
                }
                return None;
            }
            None => {
                self.left -= 1;
                str(self).and_then(|k| Ok((k, str(self)?)))
            }
        };
        if item.is_err() {
            self.done = true;
        }
        Some(item)
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<(&'a str, &'a str), MetadataError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.pair(Entries::str)
    }
}

/// The pairs of a [`Metadata`] as bytes ([`Metadata::iter_bytes`]): the map checked as
/// [`Entries`] checks it, its strings any bytes. Yields an error once, then stops.
#[derive(Debug, Clone)]
pub struct ByteEntries<'a>(Entries<'a>);

impl<'a> Iterator for ByteEntries<'a> {
    type Item = Result<(&'a [u8], &'a [u8]), MetadataError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.pair(Entries::str_bytes)
    }
}

/// [`Metadata::find`] for a map of a fixmap head and fixstr strings only, all of it valid:
/// `None` at the first byte that is anything else (another marker, a string past the end,
/// bytes after the last pair), for the general walk to judge. The empty map is valid.
///
/// ```text
///   8n | a0|len key | a0|len value | ...  (n < 16 pairs, len < 32)
/// ```
#[inline]
fn find_fixed<'a, const N: usize>(
    buf: &'a [u8],
    keys: [&[u8]; N],
) -> Option<[Option<&'a [u8]>; N]> {
    let mut found = [None; N];
    let Some((&head, mut rest)) = buf.split_first() else {
        return Some(found);
    };
    if head & 0xf0 != 0x80 {
        return None;
    }
    // One string: its fixstr marker, then its bytes, which must be there.
    let string = |rest: &mut &'a [u8]| -> Option<&'a [u8]> {
        let (&marker, tail) = rest.split_first()?;
        if marker & 0xe0 != 0xa0 {
            return None;
        }
        let (bytes, tail) = tail.split_at_checked((marker & 0x1f) as usize)?;
        *rest = tail;
        Some(bytes)
    };
    for _ in 0..head & 0x0f {
        let k = string(&mut rest)?;
        let v = string(&mut rest)?;
        if let Some(i) = keys.iter().position(|key| *key == k) {
            found[i] = Some(v);
        }
    }
    rest.is_empty().then_some(found)
}

fn map_head_len(n: usize) -> usize {
    match n {
        0..=15 => 1,
        16..=0xffff => 3,
        _ => 5,
    }
}

fn str_len(n: usize) -> usize {
    n + match n {
        0..=31 => 1,
        32..=0xff => 2,
        0x100..=0xffff => 3,
        _ => 5,
    }
}

fn put_map_head(out: &mut BytesMut, n: usize) {
    match n {
        0..=15 => out.put_u8(0x80 | n as u8),
        16..=0xffff => {
            out.put_u8(0xde);
            out.put_u16(n as u16);
        }
        _ => {
            out.put_u8(0xdf);
            out.put_u32(n as u32);
        }
    }
}

fn put_str(out: &mut BytesMut, s: &[u8]) {
    let n = s.len();
    match n {
        0..=31 => out.put_u8(0xa0 | n as u8),
        32..=0xff => {
            out.put_u8(0xd9);
            out.put_u8(n as u8);
        }
        0x100..=0xffff => {
            out.put_u8(0xda);
            out.put_u16(n as u16);
        }
        _ => {
            out.put_u8(0xdb);
            out.put_u32(n as u32);
        }
    }
    out.put_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn md(bytes: &[u8]) -> Metadata {
        Metadata::from_bytes(Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn yomo_encoding() {
        let m = Metadata::from_pairs([("yomo-tid", "tid-0001")]);
        assert_eq!(
            &m.as_bytes()[..],
            hex!("81 a8 796f6d6f2d746964 a8 7469642d30303031")
        );
        assert_eq!(Metadata::from_pairs([]).as_bytes().len(), 0);
        assert_eq!(Metadata::from_pairs([("k", "")]).as_bytes().len(), 0);
    }

    #[test]
    fn every_length_form_roundtrips() {
        let long = |n| "x".repeat(n);
        let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        for len in [0usize, 1, 31, 32, 255, 256, 65_535, 65_536] {
            let v = long(len.max(1));
            let mut pairs: Vec<(&str, &str)> = vec![("a", &v)];
            if len > 100 {
                pairs.extend(keys.iter().map(|k| (k.as_str(), "v")));
            }
            let m = Metadata::from_pairs(pairs.iter().copied());
            let map = m.to_map().unwrap();
            assert_eq!(map.len(), pairs.len());
            assert_eq!(map["a"], v);
            assert_eq!(m.validate().unwrap(), pairs.len());
        }
    }

    #[test]
    fn other_encoders_forms_are_read() {
        // map16 with str8 key and str16 value, and nil as the empty map.
        let m = md(&hex!("de0001 d90161 da000162"));
        assert_eq!(m.get("a").unwrap(), Some("b"));
        assert_eq!(md(&hex!("c0")).validate().unwrap(), 0);
        assert_eq!(md(&hex!("80")).validate().unwrap(), 0);
        // A repeated key: the last one wins.
        assert_eq!(
            md(&hex!("82 a161 a131 a161 a132")).get("a").unwrap(),
            Some("2")
        );
    }

    #[test]
    fn hostile_maps_fail_without_allocating() {
        for (bytes, what) in [
            (&hex!("a3 616263")[..], "not a map"),
            (&hex!("df ffffffff a161")[..], "more pairs than bytes"),
            (&hex!("81 db ffffffff 61")[..], "string longer than the map"),
            (&hex!("81 a161 05")[..], "not a string"),
            (&hex!("81 a161")[..], "truncated"),
            (&hex!("80 00")[..], "trailing bytes after the map"),
            (&hex!("de00")[..], "truncated length"),
        ] {
            let err = md(bytes).validate().unwrap_err();
            assert_eq!(err.what, what, "{bytes:02x?}");
            assert_eq!(err.kind(), "bad_metadata");
        }
    }

    /// `find` (its fixstr loop, or the general walk) agrees with `get_bytes` on every
    /// map: valid ones of every form, repeated keys, and each malformed one (the same
    /// error at the same offset), including every truncation of a fixstr map.
    #[test]
    fn find_agrees_with_the_general_walk() {
        let keys: [&[u8]; 3] = [b"yomo-tid", b"yomo-target", b"a"];
        let fixed = hex!("83 a8 796f6d6f2d746964 a3 746964 a1 61 a1 31 a1 61 a1 32");
        let mut maps: Vec<Vec<u8>> = (0..=fixed.len()).map(|n| fixed[..n].to_vec()).collect();
        maps.extend(
            [
                &hex!("")[..],
                &hex!("80")[..],
                &hex!("c0")[..],
                &hex!("80 00")[..],
                &hex!("81 a161 a131 00")[..],
                &hex!("de0001 d90161 da000162")[..],
                &hex!("81 a161 c0")[..],
                &hex!("81 a161 c40162")[..],
                &hex!("8f a161")[..],
                &hex!("81 a161 05")[..],
                &hex!("81 bf 61")[..],
                &hex!("a3 616263")[..],
            ]
            .map(<[u8]>::to_vec),
        );
        for bytes in maps {
            let m = md(&bytes);
            let general = keys.map(|k| m.get_bytes(std::str::from_utf8(k).unwrap()));
            match m.find(keys) {
                Ok(found) => {
                    for (f, g) in found.iter().zip(general) {
                        assert_eq!(Ok(*f), g, "{bytes:02x?}");
                    }
                }
                Err(e) => assert_eq!(Err(e), general[0], "{bytes:02x?}"),
            }
        }
        let m = md(&fixed);
        assert_eq!(
            m.find(keys).unwrap(),
            [Some(&b"tid"[..]), None, Some(&b"2"[..])]
        );
    }

    /// YoMo's decoder reads any bytes, bin and nil as a string: so does the map; the
    /// `&str` accessors refuse what is not UTF-8 (typed, no panic), the bytes ones read it.
    #[test]
    fn strings_are_bytes_as_yomo_reads_them() {
        let m = md(&hex!(
            "83 a1ff a2 61fe a8 796f6d6f2d746964 c4 02 ff00 c0 a161"
        ));
        assert_eq!(m.validate().unwrap(), 3);
        let pairs: Vec<_> = m.iter_bytes().map(Result::unwrap).collect();
        let want: [(&[u8], &[u8]); 3] =
            [(b"\xff", b"a\xfe"), (b"yomo-tid", b"\xff\x00"), (b"", b"a")];
        assert_eq!(pairs, want);
        assert_eq!(m.get_bytes(TID).unwrap(), Some(&b"\xff\x00"[..]));
        let err = m.get(TID).unwrap_err();
        assert_eq!((err.what, err.offset), ("string is not UTF-8", 17));
        assert_eq!(m.get("").unwrap(), Some("a"));
        assert_eq!(
            m.iter().next().unwrap().unwrap_err().what,
            "string is not UTF-8"
        );
        assert_eq!(m.to_map().unwrap_err().kind(), "bad_metadata");
        // Edits keep such strings as they are.
        let e = m.edit(&[(WANTED_TARGET, "w")], &[""]).unwrap();
        assert_eq!(e.get_bytes(TID).unwrap(), Some(&b"\xff\x00"[..]));
        assert_eq!(e.iter_bytes().next().unwrap().unwrap().0, b"\xff");
        assert_eq!(e.validate().unwrap(), 3);
        assert!(format!("{m:?}").contains("yomo-tid"));
        // bin16 and bin32 lengths, and one that overruns.
        assert_eq!(
            md(&hex!("81 c50001 61 c600000001 62")).get("a").unwrap(),
            Some("b")
        );
        let err = md(&hex!("81 a161 c6ffffffff")).validate().unwrap_err();
        assert_eq!(err.what, "string longer than the map");
        // Other types are still not strings.
        for bytes in [
            &hex!("81 a161 01")[..],
            &hex!("81 c3 a161")[..],
            &hex!("81 a161 90")[..],
        ] {
            assert_eq!(md(bytes).validate().unwrap_err().what, "not a string");
        }
    }

    #[test]
    fn the_byte_walk_checks_as_the_str_walk() {
        // Long strings too: ASCII but for one (valid or invalid) sequence past a word.
        let long = |tail: &[u8]| {
            let mut v = vec![0x81, 0xd9, 40 + tail.len() as u8];
            v.extend(std::iter::repeat_n(b'x', 40));
            v.extend(tail);
            v.push(0xa0);
            v
        };
        let (euro, cut) = (long(&hex!("e282ac")), long(&hex!("e282")));
        let cases: [&[u8]; 11] = [
            &hex!("81 a8 796f6d6f2d746964 a8 7469642d30303031"),
            &hex!("82 a1c3a9 a3 68c3a9 a161 a0"),
            &hex!("81 a1ff a161"),
            &hex!("81 a161 a3 61ff61"),
            &hex!("81 a9 616263646566676880 a161"),
            &hex!("81 a161"),
            &hex!("a3 616263"),
            &hex!("80 00"),
            &hex!("de0001 d90161 da000162"),
            &euro,
            &cut,
        ];
        for bytes in cases {
            let m = md(bytes);
            let strs: Vec<_> = m
                .iter()
                .map(|e| e.map(|(k, v)| (k.as_bytes(), v.as_bytes())))
                .collect();
            let raw: Vec<_> = m.iter_bytes().collect();
            // Strings that are not UTF-8 are bytes to the one, errors to the other;
            // everything else reads the same.
            let not_utf8 = strs
                .iter()
                .any(|e| e.is_err_and(|e| e.what == "string is not UTF-8"));
            if not_utf8 {
                let utf8_err = |e: &Result<_, MetadataError>| {
                    e.is_err_and(|e| e.what == "string is not UTF-8")
                };
                assert!(!raw.iter().any(utf8_err), "{bytes:02x?}");
            } else {
                assert_eq!(raw, strs, "{bytes:02x?}");
            }
        }
    }

    #[test]
    fn edits() {
        let m = Metadata::from_pairs([("a", "1"), (TARGET, "t"), ("b", "2")]);
        let m2 = m
            .edit(&[(WANTED_TARGET, "w"), ("a", "9")], &[TARGET])
            .unwrap();
        let pairs: Vec<_> = m2.iter().map(Result::unwrap).collect();
        assert_eq!(pairs, [("b", "2"), (WANTED_TARGET, "w"), ("a", "9")]);
        assert!(m.without("a").unwrap().get("a").unwrap().is_none());
        assert_eq!(m.with("a", "").unwrap().validate().unwrap(), 2);
        assert!(Metadata::empty().with("a", "").unwrap().is_empty());
    }

    #[test]
    fn repeated_keys_keep_their_last_value_in_its_place() {
        let m = md(&hex!("84 a161 a131 a162 a132 a161 a133 a163 a134"));
        let e = m.edit(&[], &["c"]).unwrap();
        let pairs: Vec<_> = e.iter().map(Result::unwrap).collect();
        assert_eq!(pairs, [("b", "2"), ("a", "3")]);
        let m = Metadata::from_pairs([("a", "1"), ("b", "2"), ("a", "3"), ("b", "")]);
        let pairs: Vec<_> = m.iter().map(Result::unwrap).collect();
        assert_eq!(pairs, [("a", "3")]);
        // Past FEW_PAIRS (the hash map's way) the same rule: the same pairs, padded.
        let pad: Vec<String> = (0..FEW_PAIRS).map(|i| format!("p{i}")).collect();
        let mut long = vec![("a", "1"), ("b", "2"), ("a", "3"), ("b", "")];
        long.extend(pad.iter().map(|k| (k.as_str(), "v")));
        let m = Metadata::from_pairs(long);
        let pairs: Vec<_> = m.iter().map(Result::unwrap).take(2).collect();
        assert_eq!(pairs, [("a", "3"), ("p0", "v")]);
        assert_eq!(m.iter().count(), 1 + FEW_PAIRS);
    }

    fn many(n: usize) -> Metadata {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        Metadata::from_pairs(keys.iter().map(|k| (k.as_str(), "v")))
    }

    /// The issue's probe: 100k keys took 14.3 s of CPU per edit (quadratic). Linear work
    /// makes 10× the keys cost about 10× the time; quadratic would be 100×. The best of
    /// three runs of each is compared, with room for a loaded machine (bound 35×).
    #[test]
    fn edit_is_linear_in_the_keys() {
        let best = |m: &Metadata| {
            (0..3)
                .map(|_| {
                    let t = std::time::Instant::now();
                    let e = m.edit(&[(WANTED_TARGET, "w")], &[TARGET]).unwrap();
                    assert_eq!(e.get(WANTED_TARGET).unwrap(), Some("w"));
                    t.elapsed()
                })
                .min()
                .unwrap()
        };
        let (small, large) = (many(10_000), many(100_000));
        let (t_small, t_large) = (best(&small), best(&large));
        let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-9);
        eprintln!("edit: 10k keys {t_small:?}, 100k keys {t_large:?}, ratio {ratio:.1}");
        assert!(ratio < 35.0, "edit scales worse than linearly: {ratio:.1}x");
        assert!(t_large < std::time::Duration::from_secs(2), "{t_large:?}");
    }

    #[test]
    fn size_limits_are_checked_without_a_walk() {
        let limits = MetadataLimits {
            max_bytes: 64 << 10,
            max_entries: 1024,
        };
        assert_eq!(many(1024).check_size(limits), Ok(()));
        assert_eq!(
            many(1025).check_size(limits),
            Err(MetadataTooLarge::Entries {
                count: 1025,
                limit: 1024
            })
        );
        let big = many(100_000);
        let err = big.check_size(limits).unwrap_err();
        assert!(
            matches!(err, MetadataTooLarge::Bytes { limit: 65536, .. }),
            "{err}"
        );
        assert_eq!(err.kind(), "metadata_too_large");
        // Not a map: left to the walk.
        assert_eq!(md(&hex!("a3 616263")).check_size(limits), Ok(()));
    }
}
