//! `[filters]`: limits on content filters, and filters attached to functions by name.

use serde::{Deserialize, Serialize};

/// `[filters]`: limits on content filters, and filters attached by function name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FiltersConfig {
    /// Longest filter text in bytes.
    pub max_len: usize,
    /// Deepest nesting of parentheses and `not`.
    pub max_depth: usize,
    /// Most distinct key paths in one filter (at most [`y3::filter::MAX_FILTER_PATHS`]).
    pub max_paths: usize,
    /// Most comparisons and `exists` tests in one filter.
    pub max_terms: usize,
    /// Filters for functions by name (`[[filters.attach]]`); none by default.
    pub attach: Vec<AttachConfig>,
}

impl Default for FiltersConfig {
    fn default() -> Self {
        let d = y3::FilterLimits::DEFAULT;
        FiltersConfig {
            max_len: d.max_len,
            max_depth: d.max_depth,
            max_paths: d.max_paths,
            max_terms: d.max_terms,
            attach: Vec::new(),
        }
    }
}

impl FiltersConfig {
    /// The limits every filter is compiled under.
    pub fn limits(&self) -> y3::FilterLimits {
        y3::FilterLimits {
            max_len: self.max_len,
            max_depth: self.max_depth,
            max_paths: self.max_paths,
            max_terms: self.max_terms,
        }
    }
}

/// `[[filters.attach]]`: a content filter for the stream functions named `function`, on
/// tag `tag` (applied when such a function observes the tag).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachConfig {
    /// The function's handshake name.
    pub function: String,
    /// The observed tag the filter applies to.
    pub tag: u32,
    /// The filter (`spec/filters.md`).
    pub filter: String,
}
