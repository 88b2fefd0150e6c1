//! Content filters: a predicate over key paths of a Y3 payload, parsed once and evaluated
//! with one walk of the payload.
//!
//! ```text
//!   "0x10/0x11:f32 > 60 and 0x10/0x13 != \"lab\""
//!        │ parse once (bounded by FilterLimits)
//!        ▼
//!   expression tree + distinct paths [0x10/0x11, 0x10/0x13]
//!        │ compile: one Observer subscribed to the paths (a path under another is
//!        │ looked up inside the outer one's value)
//!        ▼
//!   evaluate(payload): one observer walk, first value per path ─▶ Match / NoMatch / Malformed
//! ```
//!
//! The grammar and the typing rules are specified in `spec/filters.md`. In short: Y3
//! primitives are untyped bytes, so a path's bytes are read as the type after its `:`
//! (`i32 i64 u32 u64 f32 f64 str bool`) or, without one, as `i64` for an integer literal, UTF-8 for
//! a string literal and a bool for `true`/`false` (a float literal needs a typed path).
//! A comparison whose path is missing, or whose bytes do not read as its type, is false.
//! A payload that is not Y3 matches nothing ([`Verdict::Malformed`]).
//!
//! Like the rest of the crate, this module does no IO and reads no clock.

mod error;
mod eval;
mod parse;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

pub use error::FilterError;

use crate::{Config, Observer};

/// Bounds on what a filter may ask for; over any of them the filter is refused with a
/// [`FilterError`] whose [`is_limit`](FilterError::is_limit) is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterLimits {
    /// Longest filter text, in bytes. Default 1024.
    pub max_len: usize,
    /// Deepest nesting of parentheses and `not`. Default 16.
    pub max_depth: usize,
    /// Most distinct key paths (each is one subscription of the walk). Default 16.
    pub max_paths: usize,
    /// Most comparisons and `exists` tests. Default 32.
    pub max_terms: usize,
}

impl FilterLimits {
    /// The default limits.
    pub const DEFAULT: FilterLimits = FilterLimits {
        max_len: 1024,
        max_depth: 16,
        max_paths: 16,
        max_terms: 32,
    };
}

impl Default for FilterLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The hard ceiling on [`FilterLimits::max_paths`]: the evaluator keeps one slot per path
/// on the stack.
pub const MAX_FILTER_PATHS: usize = 16;

/// How a path's bytes are read for a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Str,
    Bool,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A literal on the right of a comparison. Integers span `-2^63..2^64`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

/// The parsed expression; paths are slots into [`Filter`]'s distinct paths.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Bool(bool),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
    Exists(usize),
    Cmp {
        path: usize,
        ty: Type,
        op: Op,
        lit: Lit,
    },
}

/// What a filter says about one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The payload matches: deliver it.
    Match,
    /// The payload is Y3 and does not match: withhold it.
    NoMatch,
    /// The payload is not Y3 (a header error on the walk): withhold it, and count it; it
    /// is never an error for its sender.
    Malformed,
}

impl Verdict {
    /// Whether the payload is delivered.
    pub fn matches(self) -> bool {
        self == Verdict::Match
    }

    /// The snake_case name used in metrics.
    pub fn kind(self) -> &'static str {
        match self {
            Verdict::Match => "matched",
            Verdict::NoMatch => "withheld",
            Verdict::Malformed => "malformed",
        }
    }
}

/// A compiled content filter.
///
/// Cloning copies its observer, so each clone evaluates independently (one per
/// connection, no lock).
///
/// # Examples
///
/// ```
/// use y3::{Filter, Verdict};
///
/// // NoiseData{Noise f32 40.0 (0x11), Time i64 (0x12), From "127.0.0.1" (0x13)} under 0x10.
/// let buf = hex_literal::hex!("9017110242201206aec8bbba800013093132372e302e302e31");
/// let mut loud = Filter::parse("0x10/0x11:f32 > 60")?;
/// assert_eq!(loud.evaluate(&buf), Verdict::NoMatch);
/// let mut local = Filter::parse(r#"0x10/0x11:f32 >= 40 and 0x10/0x13 == "127.0.0.1""#)?;
/// assert_eq!(local.evaluate(&buf), Verdict::Match);
/// assert_eq!(local.evaluate(b"not y3"), Verdict::Malformed);
/// # Ok::<(), y3::FilterError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Filter {
    text: String,
    expr: Expr,
    plan: eval::Plan,
    observer: Observer,
}

impl Filter {
    /// Parses and compiles `text` with the default limits and the `golang` dialect.
    ///
    /// # Errors
    /// A [`FilterError`] for invalid text or text over [`FilterLimits::DEFAULT`].
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        Filter::parse_with(text, &FilterLimits::DEFAULT, Config::DEFAULT)
    }

    /// Parses and compiles `text` under `limits`, for payloads in `config`'s dialect.
    ///
    /// # Errors
    /// As [`Filter::parse`].
    pub fn parse_with(
        text: &str,
        limits: &FilterLimits,
        config: Config,
    ) -> Result<Filter, FilterError> {
        let limits = FilterLimits {
            max_paths: limits.max_paths.min(MAX_FILTER_PATHS),
            ..*limits
        };
        let parsed = parse::parse(text, &limits)?;
        let (plan, observer) = eval::Plan::compile(parsed.paths, config);
        Ok(Filter {
            text: text.into(),
            expr: parsed.expr,
            plan,
            observer,
        })
    }

    /// The same filter evaluated by the observer alone (no sibling scan): the reference
    /// the tests compare the fast path against.
    #[cfg(feature = "__harness")]
    #[doc(hidden)]
    pub fn without_fast_path(mut self) -> Filter {
        self.plan.without_siblings();
        self.observer = self.observer.without_fast_path();
        self
    }

    /// The filter's text, as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The distinct key paths the filter reads, in order of first use.
    pub fn paths(&self) -> impl Iterator<Item = &[u32]> {
        self.plan.paths()
    }

    /// Evaluates the filter on one complete payload: one walk that stops once every path
    /// has been found (bytes after that are not looked at).
    pub fn evaluate(&mut self, payload: &[u8]) -> Verdict {
        self.plan.evaluate(&self.expr, &mut self.observer, payload)
    }

    /// [`Filter::evaluate`] on a copy of the observer, for a shared filter.
    pub fn matches(&self, payload: &[u8]) -> Verdict {
        self.plan
            .evaluate(&self.expr, &mut self.observer.clone(), payload)
    }
}

impl core::fmt::Display for Filter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for Filter {
    fn eq(&self, other: &Filter) -> bool {
        self.text == other.text
    }
}

impl Eq for Filter {}

impl core::str::FromStr for Filter {
    type Err = FilterError;

    fn from_str(text: &str) -> Result<Filter, FilterError> {
        Filter::parse(text)
    }
}
