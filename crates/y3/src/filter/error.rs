//! Why a filter is refused: typed, with byte offsets into the filter text and the limit
//! that was crossed.

/// Why a filter expression cannot be compiled.
///
/// Every variant has a stable snake_case [`kind`](FilterError::kind) (the rejection a
/// router sends names it); `at` is a byte offset into the filter text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// The text is longer than [`FilterLimits::max_len`](super::FilterLimits).
    #[error("filter of {len} bytes exceeds {max}")]
    TooLong {
        /// Bytes in the filter text.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Parentheses and `not`s nest deeper than
    /// [`FilterLimits::max_depth`](super::FilterLimits).
    #[error("filter nests deeper than {max} at byte {at}")]
    TooDeep {
        /// Where the limit was crossed.
        at: usize,
        /// The limit.
        max: usize,
    },
    /// More distinct key paths than [`FilterLimits::max_paths`](super::FilterLimits).
    #[error("filter reads more than {max} key paths (byte {at})")]
    TooManyPaths {
        /// Where the path over the limit starts.
        at: usize,
        /// The limit.
        max: usize,
    },
    /// More comparisons and `exists` tests than
    /// [`FilterLimits::max_terms`](super::FilterLimits).
    #[error("filter has more than {max} terms (byte {at})")]
    TooManyTerms {
        /// Where the term over the limit starts.
        at: usize,
        /// The limit.
        max: usize,
    },
    /// A key path longer than [`MAX_PATH_DEPTH`](crate::MAX_PATH_DEPTH) keys.
    #[error("key path at byte {at} exceeds {max} keys")]
    PathTooDeep {
        /// Where the path starts.
        at: usize,
        /// The limit.
        max: usize,
    },
    /// Something else was expected here.
    #[error("expected {expected} at byte {at}")]
    Syntax {
        /// Where.
        at: usize,
        /// What the grammar wanted (`"key path"`, `")"`, `"comparison operator"`, ...).
        expected: &'static str,
    },
    /// A key or number does not fit its type (a key above `u32::MAX`, an integer outside
    /// `-2^63..2^64`).
    #[error("number out of range at byte {at}")]
    OutOfRange {
        /// Where the number starts.
        at: usize,
    },
    /// An unknown escape in a string literal (`\q`), or a `\u{..}` that is not a scalar.
    #[error("invalid escape at byte {at}")]
    BadEscape {
        /// Where the escape starts.
        at: usize,
    },
    /// A string literal without its closing quote.
    #[error("unterminated string starting at byte {at}")]
    UnterminatedString {
        /// Where the string starts.
        at: usize,
    },
    /// A type suffix that is not one of `i32 i64 u32 u64 f32 f64 str bool`.
    #[error("unknown type at byte {at}")]
    UnknownType {
        /// Where the type name starts.
        at: usize,
    },
    /// The literal cannot be compared with the path's type (`0x11:str == 5`).
    #[error("literal at byte {at} does not match the path's type")]
    TypeMismatch {
        /// Where the literal starts.
        at: usize,
    },
    /// `<`, `<=`, `>`, `>=` on booleans.
    #[error("booleans have no order (byte {at})")]
    Unordered {
        /// Where the operator is.
        at: usize,
    },
    /// A float literal compared with a path of no declared type: Y3 writes float32 and
    /// float64 with their trailing zero bytes dropped, so the bytes alone cannot say which
    /// it is. Write `0x11:f32` or `0x11:f64`.
    #[error("float literal at byte {at} needs a typed path (:f32 or :f64)")]
    UntypedFloat {
        /// Where the literal starts.
        at: usize,
    },
}

impl FilterError {
    /// The stable snake_case name of this error.
    ///
    /// ```
    /// let err = y3::Filter::parse("0x10/0x11 >").unwrap_err();
    /// assert_eq!(err.kind(), "filter_syntax");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TooLong { .. } => "filter_too_long",
            Self::TooDeep { .. } => "filter_too_deep",
            Self::TooManyPaths { .. } => "filter_too_many_paths",
            Self::TooManyTerms { .. } => "filter_too_many_terms",
            Self::PathTooDeep { .. } => "filter_path_too_deep",
            Self::Syntax { .. } => "filter_syntax",
            Self::OutOfRange { .. } => "filter_out_of_range",
            Self::BadEscape { .. } => "filter_bad_escape",
            Self::UnterminatedString { .. } => "filter_unterminated_string",
            Self::UnknownType { .. } => "filter_unknown_type",
            Self::TypeMismatch { .. } => "filter_type_mismatch",
            Self::Unordered { .. } => "filter_unordered",
            Self::UntypedFloat { .. } => "filter_untyped_float",
        }
    }

    /// Whether the filter was refused for crossing a limit (as opposed to being invalid).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            Self::TooLong { .. }
                | Self::TooDeep { .. }
                | Self::TooManyPaths { .. }
                | Self::TooManyTerms { .. }
                | Self::PathTooDeep { .. }
        )
    }
}
