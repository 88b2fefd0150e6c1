//! [`FrameError`]: why bytes could not be read (or written) as a frame. Pure, as the frame
//! module is: it names no connection and no adapter. Every variant has a stable snake_case
//! [`kind`](FrameError::kind).

use std::io;

/// Why bytes could not be read (or written) as a frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// A malformed Y3 packet: a bad header, a field overflowing its frame, bad UTF-8.
    #[error("malformed frame: {0}")]
    Decode(#[from] y3::DecodeError),
    /// A frame larger than the configured `max_frame_len`. Reported from the header alone,
    /// before any of the body is buffered.
    #[error("frame of {declared} bytes exceeds limit {limit}")]
    TooLong {
        /// The length on the wire (or of the frame being written).
        declared: u64,
        /// The limit.
        limit: u64,
    },
    /// A top-level packet that is not a known frame node.
    #[error("unknown frame type 0x{tag:02x}")]
    UnknownFrame {
        /// The packet's key.
        tag: u32,
    },
    /// A required field is absent.
    #[error("{frame} frame lacks field 0x{field:02x}")]
    MissingField {
        /// Frame type name.
        frame: &'static str,
        /// Field key.
        field: u32,
    },
    /// A field holds a value outside its range (a client type that is not one byte).
    #[error("invalid {field} in {frame} frame")]
    InvalidField {
        /// Frame type name.
        frame: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A data frame's metadata is not a msgpack string map.
    #[error(transparent)]
    Metadata(#[from] crate::metadata::MetadataError),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({buffered} bytes buffered)")]
    Truncated {
        /// Bytes of the incomplete frame that had arrived.
        buffered: u64,
    },
    /// The underlying stream failed.
    #[error("io: {0}")]
    Io(#[from] io::Error),
}

impl FrameError {
    /// The kinds of the frame layer's own variants, in variant order; a decode error
    /// reports the codec's kind ([`y3::DecodeError::KINDS`]) and a metadata error its own.
    pub const KINDS: [&'static str; 6] = [
        "too_long",
        "unknown_frame",
        "missing_field",
        "invalid_field",
        "truncated",
        "io",
    ];

    /// The stable snake_case name: the codec's kind for [`FrameError::Decode`]
    /// (`invalid_tag`, `child_overflow`, ...), else the variant's name.
    pub fn kind(&self) -> &'static str {
        match self {
            FrameError::Decode(e) => e.kind(),
            FrameError::TooLong { .. } => "too_long",
            FrameError::UnknownFrame { .. } => "unknown_frame",
            FrameError::MissingField { .. } => "missing_field",
            FrameError::InvalidField { .. } => "invalid_field",
            FrameError::Metadata(e) => e.kind(),
            FrameError::Truncated { .. } => "truncated",
            FrameError::Io(_) => "io",
        }
    }
}

impl From<FrameError> for io::Error {
    fn from(err: FrameError) -> io::Error {
        match err {
            FrameError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FrameError;

    #[test]
    fn kinds_lists_every_own_variant_in_order() {
        let own = [
            FrameError::TooLong {
                declared: 2,
                limit: 1,
            },
            FrameError::UnknownFrame { tag: 0x7f },
            FrameError::MissingField {
                frame: "data",
                field: 0x01,
            },
            FrameError::InvalidField {
                frame: "handshake",
                field: "client type",
            },
            FrameError::Truncated { buffered: 1 },
            FrameError::Io(std::io::ErrorKind::BrokenPipe.into()),
        ];
        let kinds: Vec<&str> = own.iter().map(FrameError::kind).collect();
        assert_eq!(kinds, FrameError::KINDS);
    }
}
