//! A zero-copy view of one packet in a complete buffer.
//!
//! ```text
//! +-----+--------+---------------------------+
//! | tag | length | value (length bytes)      |   primitive: the scalar's bytes
//! +-----+--------+---------------------------+   node: child packets, back to back
//! ```
//!
//! Parsing reads only the header; children are parsed as they are iterated, each header
//! through [`Header::parse`], the same parser the streaming [`Observer`](crate::Observer)
//! uses. Every length is checked against the enclosing node and the limits before it is
//! used to slice.

use crate::tag::{short_head, Header};
use crate::{scalar, Config, DecodeError, Dialect, Tag};

/// One packet borrowed from a buffer: tag, value bytes and typed accessors.
///
/// # Examples
///
/// ```
/// // Node 0x10 { int32 0x11 = 1, string 0x12 = "a" }
/// let buf = [0x90, 0x06, 0x11, 0x01, 0x01, 0x12, 0x01, 0x61];
/// let packet = y3::decode(&buf)?;
/// assert_eq!(packet.tag(), y3::Tag::node(0x10));
/// assert_eq!(packet.child(0x12)?.unwrap().str()?, "a");
/// let ids: Vec<u32> = packet.children()?.map(|c| c.map(|c| c.id())).collect::<Result<_, _>>()?;
/// assert_eq!(ids, [0x11, 0x12]);
/// # Ok::<(), y3::DecodeError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
// A fixed, aligned layout: views are copied out of `Observer::feed` on every observed value,
// and a compiler-chosen layout with odd-offset tails made those copies stall on
// store-to-load forwarding.
#[repr(C)]
pub struct Packet<'a> {
    tag: Tag,
    value: &'a [u8],
    // u32, not u8: a byte here puts `config` at an odd offset, and copying the view then
    // mixes store and load widths (a store-forwarding stall on every observed value).
    head_len: u32,
    depth: u32,
    config: Config,
}

impl<'a> Packet<'a> {
    /// Parses the first packet of `buf` in the `golang` dialect, returning it and the bytes
    /// after it. Only the header is read; see [`decode`](crate::decode) for a full check.
    ///
    /// # Errors
    /// [`DecodeError::UnexpectedEnd`] when `buf` ends inside the packet, and the header
    /// errors of [`Header::parse`].
    pub fn parse(buf: &'a [u8]) -> Result<(Packet<'a>, &'a [u8]), DecodeError> {
        Self::parse_with(buf, &Config::DEFAULT)
    }

    /// [`Packet::parse`] with a dialect and limits.
    ///
    /// # Errors
    /// As [`Packet::parse`].
    pub fn parse_with(
        buf: &'a [u8],
        config: &Config,
    ) -> Result<(Packet<'a>, &'a [u8]), DecodeError> {
        let Some(h) = Header::parse(buf, config)? else {
            return Err(DecodeError::UnexpectedEnd { needed: 1 });
        };
        let rest = &buf[h.head_len..];
        // `h.len` is at most `i32::MAX` (checked by the length parser), so it fits in usize.
        let len = h.len as usize;
        if rest.len() < len {
            return Err(DecodeError::UnexpectedEnd {
                needed: (len - rest.len()) as u64,
            });
        }
        let (value, rest) = rest.split_at(len);
        Ok((
            Packet::from_parts(h.tag, value, h.head_len, 1, *config),
            rest,
        ))
    }

    pub(crate) fn from_parts(
        tag: Tag,
        value: &'a [u8],
        head_len: usize,
        depth: u32,
        config: Config,
    ) -> Self {
        Packet {
            tag,
            value,
            head_len: head_len as u32,
            depth,
            config,
        }
    }

    /// A view of a value whose header was read elsewhere (by an [`Observer`](crate::Observer)).
    pub fn from_value(tag: Tag, value: &'a [u8], config: Config) -> Self {
        let head_len = crate::tag::Header::encoded_len(tag, value.len(), config.dialect);
        Packet::from_parts(tag, value, head_len, 1, config)
    }

    /// As [`from_value`](Packet::from_value), for a value whose header the caller parsed
    /// and measured (`head_len` bytes, as [`Header::parse`](crate::tag::Header::parse)
    /// gave it): the header's length is not worked out again (a frame decoder, per frame).
    pub fn from_parsed(tag: Tag, value: &'a [u8], head_len: usize, config: Config) -> Self {
        Packet::from_parts(tag, value, head_len, 1, config)
    }

    /// The tag.
    #[inline]
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// The key (seq id).
    #[inline]
    pub fn id(&self) -> u32 {
        self.tag.id()
    }

    /// Whether the tag marks a node. Always false in `draft02`, where the wire does not say.
    #[inline]
    pub fn is_node(&self) -> bool {
        self.tag.is_node()
    }

    /// Whether the tag marks an array node.
    #[inline]
    pub fn is_array(&self) -> bool {
        self.tag.is_array()
    }

    /// The raw value bytes (for a node, its children back to back).
    #[inline]
    pub fn value(&self) -> &'a [u8] {
        self.value
    }

    /// Bytes the whole packet occupies on the wire, header included.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        self.head_len as usize + self.value.len()
    }

    /// Nesting depth: 1 for a packet parsed from a buffer, 2 for its children, and so on.
    #[inline]
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The dialect and limits this view reads with.
    #[inline]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Iterates the child packets.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] when the tag marks a primitive (never in `draft02`, where
    /// any value may be read as children), [`DecodeError::TooDeep`] past the depth limit.
    /// The iterator itself yields an error for a malformed child and then stops.
    #[inline]
    pub fn children(&self) -> Result<Children<'a>, DecodeError> {
        if self.config.dialect.has_node_flag() && !self.tag.is_node() {
            return Err(DecodeError::WrongType {
                expected: "node",
                tag: self.tag.id(),
            });
        }
        if self.depth >= self.config.limits.max_depth {
            return Err(DecodeError::TooDeep {
                limit: self.config.limits.max_depth,
            });
        }
        Ok(Children {
            rest: self.value,
            depth: self.depth + 1,
            config: self.config,
        })
    }

    /// The first child with key `id`, if any.
    ///
    /// # Errors
    /// As [`Packet::children`], plus any malformed child met before the match.
    pub fn child(&self, id: u32) -> Result<Option<Packet<'a>>, DecodeError> {
        for child in self.children()? {
            let child = child?;
            if child.id() == id {
                return Ok(Some(child));
            }
        }
        Ok(None)
    }

    /// Follows a key path below this packet (`[0x11, 0x21]`: child 0x11, then its child 0x21).
    ///
    /// # Errors
    /// As [`Packet::child`] at each step.
    pub fn find(&self, path: &[u32]) -> Result<Option<Packet<'a>>, DecodeError> {
        let mut at = *self;
        for &id in path {
            match at.child(id)? {
                Some(next) => at = next,
                None => return Ok(None),
            }
        }
        Ok(Some(at))
    }

    #[inline]
    fn primitive(&self) -> Result<&'a [u8], DecodeError> {
        if self.tag.is_node() {
            return Err(DecodeError::WrongType {
                expected: "primitive",
                tag: self.tag.id(),
            });
        }
        Ok(self.value)
    }

    #[inline]
    fn dialect(&self) -> Dialect {
        self.config.dialect
    }

    /// The value as `int32`.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node, and the integer errors of [`scalar::read_i32`].
    #[inline]
    pub fn i32(&self) -> Result<i32, DecodeError> {
        scalar::read_i32(self.dialect(), self.primitive()?)
    }

    /// The value as `int64`.
    ///
    /// # Errors
    /// As [`Packet::i32`].
    #[inline]
    pub fn i64(&self) -> Result<i64, DecodeError> {
        scalar::read_i64(self.dialect(), self.primitive()?)
    }

    /// The value as `uint32` (written as the int32 with the same bits).
    ///
    /// # Errors
    /// As [`Packet::i32`].
    #[inline]
    pub fn u32(&self) -> Result<u32, DecodeError> {
        scalar::read_u32(self.dialect(), self.primitive()?)
    }

    /// The value as `uint64` (written as the int64 with the same bits).
    ///
    /// # Errors
    /// As [`Packet::i32`].
    #[inline]
    pub fn u64(&self) -> Result<u64, DecodeError> {
        scalar::read_u64(self.dialect(), self.primitive()?)
    }

    /// The value as VarFloat `float32`.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node, [`DecodeError::InvalidLength`] outside 1..=4.
    #[inline]
    pub fn f32(&self) -> Result<f32, DecodeError> {
        scalar::read_f32(self.primitive()?)
    }

    /// The value as VarFloat `float64`.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node, [`DecodeError::InvalidLength`] outside 1..=8.
    #[inline]
    pub fn f64(&self) -> Result<f64, DecodeError> {
        scalar::read_f64(self.primitive()?)
    }

    /// The value as `bool` (integer 0 or 1).
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node, [`DecodeError::InvalidBool`] for other integers.
    #[inline]
    pub fn bool(&self) -> Result<bool, DecodeError> {
        scalar::read_bool(self.dialect(), self.primitive()?)
    }

    /// The value as a borrowed UTF-8 string.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node, [`DecodeError::InvalidUtf8`].
    #[inline]
    pub fn str(&self) -> Result<&'a str, DecodeError> {
        scalar::read_str(self.primitive()?)
    }

    /// The value as borrowed bytes.
    ///
    /// # Errors
    /// [`DecodeError::WrongType`] for a node.
    #[inline]
    pub fn bytes(&self) -> Result<&'a [u8], DecodeError> {
        self.primitive()
    }
}

impl core::fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Packet")
            .field("tag", &self.tag)
            .field("len", &self.value.len())
            .field("depth", &self.depth)
            .finish()
    }
}

/// Iterator over the children of a node, parsed lazily. Stops after the first error.
#[derive(Debug, Clone)]
pub struct Children<'a> {
    rest: &'a [u8],
    depth: u32,
    config: Config,
}

impl<'a> Children<'a> {
    /// The usual child: a short header (`tag::short_head`: a valid tag byte, a length of
    /// one or two groups) whose value lies in the node and within the limit. It passes
    /// every check [`next_child`](Children::next_child) makes, so it is read here, inlined
    /// into the caller's loop, without them; `None` leaves anything else to `next_child`.
    #[inline(always)]
    fn next_short(&mut self) -> Option<Packet<'a>> {
        let (tag, len, head_len, after) = short_head(self.rest)?;
        if len > after.len()
            || !self.config.dialect.has_node_flag()
            || len as u64 > self.config.limits.max_packet_len
        {
            return None;
        }
        let (value, rest) = after.split_at(len);
        self.rest = rest;
        Some(Packet::from_parts(
            Tag::from_byte(tag),
            value,
            head_len,
            self.depth,
            self.config,
        ))
    }

    #[inline(never)]
    fn next_child(&mut self) -> Result<Packet<'a>, DecodeError> {
        let available = self.rest.len() as u64;
        let Some(h) = Header::parse(self.rest, &self.config)? else {
            return Err(DecodeError::TruncatedHeader { available });
        };
        let after = &self.rest[h.head_len..];
        // `h.len` is at most `i32::MAX`, so it fits in usize.
        let len = h.len as usize;
        if after.len() < len {
            return Err(DecodeError::ChildOverflow {
                declared: h.len,
                available: after.len() as u64,
            });
        }
        let (value, rest) = after.split_at(len);
        self.rest = rest;
        Ok(Packet::from_parts(
            h.tag,
            value,
            h.head_len,
            self.depth,
            self.config,
        ))
    }
}

impl<'a> Iterator for Children<'a> {
    type Item = Result<Packet<'a>, DecodeError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        if let Some(child) = self.next_short() {
            return Some(Ok(child));
        }
        let child = self.next_child();
        if child.is_err() {
            self.rest = &[];
        }
        Some(child)
    }
}

impl core::iter::FusedIterator for Children<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    #[test]
    fn nested_access() {
        // Node 0x01 { int32 0x02 = -1, Node 0x03 { string 0x04 = "C" } }
        let buf = hex!("810802017f8303040143");
        let (p, rest) = Packet::parse(&buf).unwrap();
        assert!(rest.is_empty());
        assert_eq!(p.child(0x02).unwrap().unwrap().i32(), Ok(-1));
        assert_eq!(p.find(&[0x03, 0x04]).unwrap().unwrap().str(), Ok("C"));
        assert_eq!(p.find(&[0x03, 0x05]).unwrap(), None);
        assert_eq!(p.i32().unwrap_err().kind(), "wrong_type");
    }

    #[test]
    fn malformed_children() {
        let (p, _) = Packet::parse(&hex!("810111")).unwrap();
        let err = p.children().unwrap().next().unwrap().unwrap_err();
        assert_eq!(err, DecodeError::TruncatedHeader { available: 1 });
        let (p, _) = Packet::parse(&hex!("81031105 01")).unwrap();
        let err = p.children().unwrap().next().unwrap().unwrap_err();
        assert_eq!(
            err,
            DecodeError::ChildOverflow {
                declared: 5,
                available: 1
            }
        );
        assert_eq!(
            Packet::parse(&hex!("8105110101")).unwrap_err(),
            DecodeError::UnexpectedEnd { needed: 2 }
        );
    }

    #[test]
    fn short_children_still_meet_a_small_length_limit() {
        // A one-byte length (read by the short path) above a limit under 63.
        let config = Config::DEFAULT.with_limits(crate::Limits {
            max_packet_len: 4,
            max_depth: 8,
        });
        let node = Packet::from_value(Tag::node(1), &hex!("0204aabbccdd 0305aabbccddee"), config);
        let mut children = node.children().unwrap();
        assert_eq!(children.next().unwrap().unwrap().value(), hex!("aabbccdd"));
        assert_eq!(
            children.next().unwrap().unwrap_err(),
            DecodeError::TooLong {
                declared: 5,
                limit: 4
            }
        );
        assert!(children.next().is_none());
        // The array flag without the node flag, with a one-byte length.
        let node = Packet::from_value(Tag::node(1), &hex!("4201aa"), Config::DEFAULT);
        let err = node.children().unwrap().next().unwrap().unwrap_err();
        assert_eq!(err.kind(), "invalid_tag");
    }

    #[test]
    fn depth_limit() {
        let config = Config::DEFAULT.with_limits(crate::Limits {
            max_packet_len: 64,
            max_depth: 2,
        });
        let buf = hex!("810a82058303040105050178");
        let (p, _) = Packet::parse_with(&buf, &config).unwrap();
        let inner = p.child(0x02).unwrap().unwrap();
        assert_eq!(
            inner.children().unwrap_err(),
            DecodeError::TooDeep { limit: 2 }
        );
    }
}
