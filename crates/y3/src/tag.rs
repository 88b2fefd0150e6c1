//! Tags and packet headers: the one header parser every reader in this crate uses.
//!
//! ```text
//! golang / nvarint tag, one byte:          draft02 tag, 1..=4 bytes:
//!
//!   7   6   5 4 3 2 1 0                      7   6 5 4 3 2 1 0
//! +---+---+-------------+                  +---+-------------+
//! | N | A |   seq id    |                  | C |  id bits    | ...
//! +---+---+-------------+                  +---+-------------+
//!   N = 0x80 node, A = 0x40 array            C = continuation, big-endian groups
//!
//! header = tag, then the value length as signed PVarInt32 (1..=5 bytes)
//! ```
//!
//! See `spec/wire-format.md` sections "Tag" and "Length".

use crate::{varint, Config, DecodeError, Dialect, EncodeError};

/// Largest id a draft-02 tag carries: four 7-bit groups.
pub const DRAFT02_MAX_ID: u32 = (1 << 28) - 1;

/// Bytes a draft-02 tag may take.
const DRAFT02_TAG_BYTES: usize = 4;

/// Longest header any dialect produces: a 4-byte tag and a 5-byte length.
pub const MAX_HEADER_LEN: usize = DRAFT02_TAG_BYTES + varint::MAX_LEN_BYTES;

const NODE: u8 = 0x80;
const ARRAY: u8 = 0x40;

/// A packet's key and kind.
///
/// In the one-byte dialects the kind travels in the tag byte (node flag `0x80`, array flag
/// `0x40`). In `draft02` nothing on the wire says whether a value is a node; a [`Tag`] read
/// from draft-02 bytes is always primitive, and the schema (a key path, a typed struct)
/// decides whether to descend.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag {
    id: u32,
    flags: u8,
}

impl Tag {
    /// The tag of a one-byte-dialect tag byte already checked not to carry the array flag
    /// alone.
    #[inline(always)]
    pub(crate) const fn from_byte(b: u8) -> Tag {
        Tag {
            id: (b & 0x3f) as u32,
            flags: b & (NODE | ARRAY),
        }
    }

    /// A primitive (leaf) tag with key `id`.
    #[inline]
    pub const fn primitive(id: u32) -> Tag {
        Tag { id, flags: 0 }
    }

    /// A node tag with key `id`: its value is a sequence of packets.
    #[inline]
    pub const fn node(id: u32) -> Tag {
        Tag { id, flags: NODE }
    }

    /// An array tag with key `id`: a node whose children are elements with key 0.
    #[inline]
    pub const fn array(id: u32) -> Tag {
        Tag {
            id,
            flags: NODE | ARRAY,
        }
    }

    /// The key (seq id).
    #[inline]
    pub const fn id(self) -> u32 {
        self.id
    }

    /// Whether the value is a sequence of packets.
    #[inline]
    pub const fn is_node(self) -> bool {
        self.flags & NODE != 0
    }

    /// Whether the node is an array (slice) node.
    #[inline]
    pub const fn is_array(self) -> bool {
        self.flags & ARRAY != 0
    }

    /// The tag byte of the one-byte dialects (`flags | id`); `None` when the id exceeds 0x3f.
    #[inline]
    pub const fn byte(self) -> Option<u8> {
        if self.id <= 0x3f {
            Some(self.flags | self.id as u8)
        } else {
            None
        }
    }

    /// Bytes the tag takes in `dialect`.
    #[inline]
    pub const fn encoded_len(self, dialect: Dialect) -> usize {
        match dialect {
            Dialect::Golang | Dialect::NVarInt => 1,
            Dialect::Draft02 => varint::uvarint_len(self.id),
        }
    }

    /// Checks that `dialect` can carry this tag.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`] for ids above [`Dialect::max_tag`].
    pub const fn check(self, dialect: Dialect) -> Result<(), EncodeError> {
        let max = dialect.max_tag();
        if self.id > max {
            return Err(EncodeError::InvalidTag { tag: self.id, max });
        }
        Ok(())
    }
}

impl core::fmt::Debug for Tag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kind = match (self.is_node(), self.is_array()) {
            (true, true) => "array",
            (true, false) => "node",
            _ => "primitive",
        };
        write!(f, "Tag({kind} 0x{:02x})", self.id)
    }
}

/// A parsed packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The tag.
    pub tag: Tag,
    /// Declared value length, already checked against the limit.
    pub len: u64,
    /// Bytes the tag and length took.
    pub head_len: usize,
}

impl Header {
    /// Parses a header from the start of `buf`.
    ///
    /// Returns `Ok(None)` when `buf` ends inside the header: that is not an error, the
    /// caller feeds more bytes. The declared length is checked against
    /// `config.limits.max_packet_len` here, before any caller can act on it.
    ///
    /// # Errors
    /// [`DecodeError::InvalidTag`] for a one-byte primitive tag with the array flag,
    /// [`DecodeError::NegativeLength`], [`DecodeError::VarintOverflow`],
    /// [`DecodeError::TooLong`].
    #[inline(always)]
    pub fn parse(buf: &[u8], config: &Config) -> Result<Option<Header>, DecodeError> {
        let (tag, tag_len) = match config.dialect {
            Dialect::Golang | Dialect::NVarInt => {
                let Some(&b) = buf.first() else {
                    return Ok(None);
                };
                // An array flag without the node flag has no meaning; the reference reads
                // 0x51 as key 0x11 and loses the bit. We refuse it.
                if b & (NODE | ARRAY) == ARRAY {
                    return Err(DecodeError::InvalidTag { tag: b as u32 });
                }
                (
                    Tag {
                        id: (b & 0x3f) as u32,
                        flags: b & (NODE | ARRAY),
                    },
                    1,
                )
            }
            Dialect::Draft02 => match varint::uvarint_read(buf, DRAFT02_TAG_BYTES)? {
                Some((id, n)) => (Tag::primitive(id), n),
                None => return Ok(None),
            },
        };
        let Some((len, len_len)) = varint::length_read(&buf[tag_len..])? else {
            return Ok(None);
        };
        if len > config.limits.max_packet_len {
            return Err(DecodeError::TooLong {
                declared: len,
                limit: config.limits.max_packet_len,
            });
        }
        Ok(Some(Header {
            tag,
            len,
            head_len: tag_len + len_len,
        }))
    }

    /// Writes the header for `tag` and a value of `len` bytes into `out`, returning the bytes
    /// used.
    ///
    /// # Errors
    /// [`EncodeError::InvalidTag`] when the dialect cannot carry the tag,
    /// [`EncodeError::TooLong`] when `len` exceeds `i32::MAX`.
    pub fn write(
        tag: Tag,
        len: usize,
        dialect: Dialect,
        out: &mut [u8; MAX_HEADER_LEN + 1],
    ) -> Result<usize, EncodeError> {
        tag.check(dialect)?;
        if len > i32::MAX as usize {
            return Err(EncodeError::TooLong {
                len: len as u64,
                limit: i32::MAX as u64,
            });
        }
        let mut scratch = [0u8; 10];
        let tag_len = match dialect {
            Dialect::Golang | Dialect::NVarInt => {
                out[0] = tag.flags | tag.id as u8;
                1
            }
            Dialect::Draft02 => {
                let n = varint::uvarint_write(tag.id, &mut scratch);
                out[..n].copy_from_slice(&scratch[..n]);
                n
            }
        };
        let n = varint::pvarint_write(len as i64, &mut scratch);
        out[tag_len..tag_len + n].copy_from_slice(&scratch[..n]);
        Ok(tag_len + n)
    }

    /// Bytes the header for `tag` and a `len`-byte value takes in `dialect`.
    #[inline]
    pub const fn encoded_len(tag: Tag, len: usize, dialect: Dialect) -> usize {
        tag.encoded_len(dialect) + varint::pvarint_len(len as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    #[test]
    fn one_byte_tags() {
        let c = Config::DEFAULT;
        let h = Header::parse(&hex!("9006"), &c).unwrap().unwrap();
        assert_eq!((h.tag, h.len, h.head_len), (Tag::node(0x10), 6, 2));
        let h = Header::parse(&hex!("d000"), &c).unwrap().unwrap();
        assert_eq!(h.tag, Tag::array(0x10));
        assert_eq!(
            Header::parse(&hex!("5101"), &c),
            Err(DecodeError::InvalidTag { tag: 0x51 })
        );
        assert_eq!(Header::parse(&hex!("11"), &c), Ok(None));
        assert_eq!(Header::parse(&hex!("1180"), &c), Ok(None));
    }

    #[test]
    fn limit_is_checked_on_the_header() {
        let c = Config::DEFAULT.with_limits(crate::Limits {
            max_packet_len: 100,
            max_depth: 4,
        });
        assert_eq!(
            Header::parse(&hex!("118100"), &c),
            Err(DecodeError::TooLong {
                declared: 128,
                limit: 100
            })
        );
    }

    #[test]
    fn draft02_tags() {
        let c = Config::new(Dialect::Draft02);
        let mut out = [0; MAX_HEADER_LEN + 1];
        let n = Header::write(Tag::primitive(300), 64, Dialect::Draft02, &mut out).unwrap();
        assert_eq!(&out[..n], hex!("822c8040"));
        let h = Header::parse(&out[..n], &c).unwrap().unwrap();
        assert_eq!((h.tag.id(), h.len, h.head_len), (300, 64, 4));
        assert_eq!(
            Header::encoded_len(Tag::primitive(300), 64, Dialect::Draft02),
            4
        );
    }

    #[test]
    fn write_refuses_wide_tags_in_one_byte_dialects() {
        let mut out = [0; MAX_HEADER_LEN + 1];
        let err = Header::write(Tag::primitive(0x40), 1, Dialect::Golang, &mut out).unwrap_err();
        assert_eq!(
            err,
            EncodeError::InvalidTag {
                tag: 0x40,
                max: 0x3f
            }
        );
    }
}
