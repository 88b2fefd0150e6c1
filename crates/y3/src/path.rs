//! Key paths: their syntax, their limits and the set an observer holds.

use alloc::vec::Vec;

/// Longest key path an observer accepts.
pub const MAX_PATH_DEPTH: usize = 16;

/// Most subscriptions one observer holds.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// Why a set of key paths cannot be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// A path has no keys.
    #[error("empty key path")]
    Empty,
    /// A path is longer than [`MAX_PATH_DEPTH`].
    #[error("key path of {len} keys exceeds {max}")]
    TooDeep {
        /// Keys in the path.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// More than [`MAX_SUBSCRIPTIONS`] paths, or none.
    #[error("{count} subscriptions, expected 1..={max}")]
    Count {
        /// Paths given.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// One path is a prefix of (or equal to) another.
    #[error("path {shorter} is a prefix of path {longer}")]
    Overlap {
        /// Index of the shorter path.
        shorter: usize,
        /// Index of the longer path.
        longer: usize,
    },
    /// A path string is not `0x10/0x11`-style keys.
    #[error("invalid key in path at byte {at}")]
    Syntax {
        /// Byte offset of the bad key.
        at: usize,
    },
}

impl PathError {
    /// The stable snake_case name of this error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Empty => "empty_path",
            Self::TooDeep { .. } => "path_too_deep",
            Self::Count { .. } => "path_count",
            Self::Overlap { .. } => "path_overlap",
            Self::Syntax { .. } => "path_syntax",
        }
    }
}

/// Parses a key path such as `0x10/0x11` or `16/17` (hex with `0x`, else decimal).
///
/// # Errors
/// [`PathError::Syntax`], [`PathError::Empty`], [`PathError::TooDeep`].
///
/// ```
/// assert_eq!(y3::parse_path("0x10/0x11").unwrap(), [0x10, 0x11]);
/// assert!(y3::parse_path("0x10//1").is_err());
/// ```
pub fn parse_path(text: &str) -> Result<Vec<u32>, PathError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(PathError::Empty);
    }
    let mut keys = Vec::new();
    let mut at = 0;
    for part in text.split('/') {
        let key = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16)
        } else {
            part.parse::<u32>()
        };
        keys.push(key.map_err(|_| PathError::Syntax { at })?);
        at += part.len() + 1;
    }
    if keys.len() > MAX_PATH_DEPTH {
        return Err(PathError::TooDeep {
            len: keys.len(),
            max: MAX_PATH_DEPTH,
        });
    }
    Ok(keys)
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Path {
    pub(crate) ids: [u32; MAX_PATH_DEPTH],
    pub(crate) len: usize,
}

/// The subscribed paths: the first in place, so that a one-path observer (every
/// [`get`](crate::get)) is built without allocating.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paths {
    pub(crate) first: Option<Path>,
    pub(crate) more: Vec<Path>,
}

impl Paths {
    pub(crate) fn push(&mut self, path: Path) {
        if self.first.is_none() {
            self.first = Some(path);
        } else {
            self.more.push(path);
        }
    }

    /// Path `i`; `i` comes from an `active` bit, so it is below the number of paths.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> &Path {
        match (&self.first, i) {
            (Some(first), 0) => first,
            _ => &self.more[i - 1],
        }
    }
}
