//! Typed errors with numeric context and stable snake_case kinds.
//!
//! Every variant has a [`kind`](DecodeError::kind) string that never changes between releases.
//! The Go and Python implementations report the same kinds for the same inputs, and the
//! negative vectors in `testdata/vectors/` name them. Messages are for humans and may change.

/// Why bytes could not be read as Y3.
///
/// The decoder never returns an error merely because input is incomplete while streaming:
/// "need more bytes" is reported as `Ok(None)`-style states by [`Observer::feed`]. Truncation
/// becomes [`DecodeError::UnexpectedEnd`] only at [`Observer::finish`] or in one-shot calls
/// over a complete buffer.
///
/// [`Observer::feed`]: crate::Observer::feed
/// [`Observer::finish`]: crate::Observer::finish
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a packet.
    #[error("unexpected end of input: needed {needed} more bytes")]
    UnexpectedEnd {
        /// Bytes still missing (at least 1 when the missing part is a header).
        needed: u64,
    },
    /// A declared length is larger than [`Limits::max_packet_len`](crate::Limits).
    #[error("declared length {declared} exceeds limit {limit}")]
    TooLong {
        /// The length on the wire.
        declared: u64,
        /// The configured limit.
        limit: u64,
    },
    /// Nodes are nested deeper than [`Limits::max_depth`](crate::Limits).
    #[error("nesting depth exceeds limit {limit}")]
    TooDeep {
        /// The configured limit.
        limit: u32,
    },
    /// A length field decoded to a negative number (lengths are signed PVarInt32).
    #[error("negative length {declared}")]
    NegativeLength {
        /// The decoded (negative) length.
        declared: i64,
    },
    /// A varint does not fit the type it is read as, or is longer than the format allows.
    #[error("varint of {len} bytes overflows {bits} bits")]
    VarintOverflow {
        /// Bytes the varint occupies (or had consumed when it overflowed).
        len: u32,
        /// Width of the target type.
        bits: u32,
    },
    /// A PVarInt value ends with its continuation bit set (no terminating group).
    #[error("varint in a {len}-byte value has no terminating byte")]
    VarintUnterminated {
        /// Length of the value that holds the varint.
        len: u32,
    },
    /// A child packet declares more bytes than its parent node has left.
    #[error("child length {declared} overflows its node ({available} bytes left)")]
    ChildOverflow {
        /// Bytes the child declares (header excluded).
        declared: u64,
        /// Bytes left in the parent after the child's header.
        available: u64,
    },
    /// A child's header runs past the end of its node.
    #[error("child header truncated by the end of its node ({available} bytes left)")]
    TruncatedHeader {
        /// Bytes the node had left where the header began.
        available: u64,
    },
    /// A tag that this dialect cannot carry, such as a primitive with the array flag
    /// (`0x40..=0x7f` in the `golang` and `nvarint` dialects).
    #[error("invalid tag 0x{tag:02x}")]
    InvalidTag {
        /// The tag as read (the raw byte for one-byte tags).
        tag: u32,
    },
    /// A string value is not valid UTF-8.
    #[error("invalid utf-8 after {valid_up_to} bytes")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: u32,
    },
    /// A value has a length its type cannot have (an empty integer, a 5-byte float32).
    #[error("value length {len} outside {min}..={max}")]
    InvalidLength {
        /// The value's length.
        len: u64,
        /// Smallest valid length.
        min: u32,
        /// Largest valid length.
        max: u32,
    },
    /// A bool value is neither 0 nor 1.
    #[error("bool value {value} is neither 0 nor 1")]
    InvalidBool {
        /// The integer read.
        value: i64,
    },
    /// The packet is of the wrong kind for the access (children of a primitive, an integer
    /// out of a node).
    #[error("expected {expected}, found tag 0x{tag:02x}")]
    WrongType {
        /// What the access needed: `"node"`, `"primitive"`, `"array"`.
        expected: &'static str,
        /// The tag found.
        tag: u32,
    },
    /// A fixed-size collection received a different number of elements.
    #[error("expected {expected} elements, found {found}")]
    WrongCount {
        /// Elements the type holds.
        expected: u32,
        /// Elements on the wire.
        found: u32,
    },
    /// Bytes follow a packet where exactly one packet was expected.
    #[error("{count} trailing bytes after the packet")]
    TrailingBytes {
        /// How many.
        count: u64,
    },
}

impl DecodeError {
    /// Every [`kind`](DecodeError::kind), in variant order: the one list of the decode
    /// error kinds (the router's protocol-error metrics and the vectors' coverage check,
    /// which the Go and Python tests read from `testdata/vectors/`, take it from here).
    pub const KINDS: [&'static str; 15] = [
        "unexpected_end",
        "too_long",
        "too_deep",
        "negative_length",
        "varint_overflow",
        "varint_unterminated",
        "child_overflow",
        "truncated_header",
        "invalid_tag",
        "invalid_utf8",
        "invalid_length",
        "invalid_bool",
        "wrong_type",
        "wrong_count",
        "trailing_bytes",
    ];

    /// The stable snake_case name of this error, shared with the Go and Python bindings.
    ///
    /// ```
    /// let err = y3::decode(&[0x11, 0x7f]).unwrap_err();
    /// assert_eq!(err.kind(), "negative_length");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnexpectedEnd { .. } => "unexpected_end",
            Self::TooLong { .. } => "too_long",
            Self::TooDeep { .. } => "too_deep",
            Self::NegativeLength { .. } => "negative_length",
            Self::VarintOverflow { .. } => "varint_overflow",
            Self::VarintUnterminated { .. } => "varint_unterminated",
            Self::ChildOverflow { .. } => "child_overflow",
            Self::TruncatedHeader { .. } => "truncated_header",
            Self::InvalidTag { .. } => "invalid_tag",
            Self::InvalidUtf8 { .. } => "invalid_utf8",
            Self::InvalidLength { .. } => "invalid_length",
            Self::InvalidBool { .. } => "invalid_bool",
            Self::WrongType { .. } => "wrong_type",
            Self::WrongCount { .. } => "wrong_count",
            Self::TrailingBytes { .. } => "trailing_bytes",
        }
    }
}

/// Why a value could not be written as Y3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The tag id cannot be written in this dialect (`0x40..` in `golang`, above 2^28-1 in
    /// `draft02`).
    #[error("tag 0x{tag:02x} exceeds the dialect's maximum 0x{max:02x}")]
    InvalidTag {
        /// The requested tag id.
        tag: u32,
        /// The largest id the dialect carries.
        max: u32,
    },
    /// The key is reserved by the reference `Marshal` API (`0x01..=0x0f`, signals).
    #[error("tag 0x{tag:02x} is reserved")]
    ReservedTag {
        /// The requested tag id.
        tag: u32,
    },
    /// A value is longer than a signed 32-bit length can say.
    #[error("value length {len} exceeds {limit}")]
    TooLong {
        /// The value's length.
        len: u64,
        /// The largest encodable length.
        limit: u64,
    },
    /// The destination buffer has no room for the packet.
    #[error("buffer too small: required {required}, remaining {remaining}")]
    BufferTooSmall {
        /// Bytes the packet needs.
        required: u64,
        /// Bytes the buffer has left.
        remaining: u64,
    },
}

impl EncodeError {
    /// The stable snake_case name of this error, shared with the Go and Python bindings.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidTag { .. } => "invalid_tag",
            Self::ReservedTag { .. } => "reserved_tag",
            Self::TooLong { .. } => "too_long",
            Self::BufferTooSmall { .. } => "buffer_too_small",
        }
    }
}

#[cfg(feature = "std")]
impl From<DecodeError> for std::io::Error {
    fn from(err: DecodeError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, err)
    }
}

#[cfg(feature = "std")]
impl From<EncodeError> for std::io::Error {
    fn from(err: EncodeError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, err)
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeError;

    #[test]
    fn kinds_lists_every_variant_in_order() {
        let every = [
            DecodeError::UnexpectedEnd { needed: 1 },
            DecodeError::TooLong {
                declared: 2,
                limit: 1,
            },
            DecodeError::TooDeep { limit: 1 },
            DecodeError::NegativeLength { declared: -1 },
            DecodeError::VarintOverflow { len: 1, bits: 1 },
            DecodeError::VarintUnterminated { len: 1 },
            DecodeError::ChildOverflow {
                declared: 2,
                available: 1,
            },
            DecodeError::TruncatedHeader { available: 1 },
            DecodeError::InvalidTag { tag: 0x80 },
            DecodeError::InvalidUtf8 { valid_up_to: 0 },
            DecodeError::InvalidLength {
                len: 9,
                min: 1,
                max: 8,
            },
            DecodeError::InvalidBool { value: 2 },
            DecodeError::WrongType {
                expected: "int32",
                tag: 0x10,
            },
            DecodeError::WrongCount {
                expected: 2,
                found: 1,
            },
            DecodeError::TrailingBytes { count: 1 },
        ];
        let kinds = every.map(|e| e.kind());
        assert_eq!(kinds, DecodeError::KINDS);
    }
}
