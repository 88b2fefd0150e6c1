//! The three wire dialects and the limits that guard every decode.

/// Which flavour of Y3 the bytes are in. See `spec/wire-format.md`.
///
/// ```text
///            tag                         integers                 node flag on wire
/// Golang     1 byte: N A i i i i i i     PVarInt (sign-padded)    yes (N = 0x80, A = 0x40)
/// NVarInt    1 byte: N A i i i i i i     minimal two's complement yes
/// Draft02    varint: C i i i i i i i ..  PVarInt (sign-padded)    no (schema decides)
/// ```
///
/// Lengths (signed PVarInt32) and floats (VarFloat) are the same in all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Dialect {
    /// `github.com/yomorun/y3-codec-golang` v1.7.3, the codec of YoMo v1. The default.
    #[default]
    Golang,
    /// `github.com/yomorun/y3` v1.0.5, the frame envelope of YoMo >= 1.5: integers are
    /// minimal big-endian two's complement with no continuation bits.
    NVarInt,
    /// The draft-02 specification's varint tag (continuation bit + 7 id bits, no node or
    /// array flag) so that a node can hold more than 63 keys. Opt-in; no other
    /// implementation ships it.
    Draft02,
}

impl Dialect {
    /// The largest tag id this dialect can write.
    #[inline]
    pub const fn max_tag(self) -> u32 {
        match self {
            Dialect::Golang | Dialect::NVarInt => 0x3f,
            Dialect::Draft02 => crate::tag::DRAFT02_MAX_ID,
        }
    }

    /// Whether the wire marks nodes and arrays in the tag.
    #[inline]
    pub const fn has_node_flag(self) -> bool {
        !matches!(self, Dialect::Draft02)
    }

    /// The dialect's name as the CLI and the bindings spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Dialect::Golang => "golang",
            Dialect::NVarInt => "nvarint",
            Dialect::Draft02 => "draft02",
        }
    }

    /// Parses a name produced by [`Dialect::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "golang" => Some(Dialect::Golang),
            "nvarint" => Some(Dialect::NVarInt),
            "draft02" => Some(Dialect::Draft02),
            _ => None,
        }
    }
}

/// Bounds checked against the wire before anything is allocated or recursed into.
///
/// A declared length above `max_packet_len` is rejected as soon as its header is read, and
/// a node nested deeper than `max_depth` is rejected before its children are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest declared length of any packet's value, in bytes. Default 16 MiB.
    pub max_packet_len: u64,
    /// Deepest nesting of nodes, the outermost packet being depth 1. Default 64.
    pub max_depth: u32,
}

impl Limits {
    /// The default limits: 16 MiB values, depth 64.
    pub const DEFAULT: Limits = Limits {
        max_packet_len: 16 << 20,
        max_depth: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Dialect and limits together: what every decoding entry point needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Config {
    /// The wire dialect.
    pub dialect: Dialect,
    /// The bounds.
    pub limits: Limits,
}

impl Config {
    /// The `golang` dialect with default limits.
    pub const DEFAULT: Config = Config {
        dialect: Dialect::Golang,
        limits: Limits::DEFAULT,
    };

    /// A config for `dialect` with default limits.
    pub const fn new(dialect: Dialect) -> Self {
        Config {
            dialect,
            limits: Limits::DEFAULT,
        }
    }

    /// Replaces the limits.
    pub const fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}
