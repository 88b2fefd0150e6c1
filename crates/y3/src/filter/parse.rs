//! The filter parser: recursive descent over the text, bounded by [`FilterLimits`].
//!
//! Recursion happens only at `(` and `not`, and each counts against
//! [`FilterLimits::max_depth`]; `and`/`or` chains are loops. Every step consumes input, so
//! time is linear in the text (itself bounded by [`FilterLimits::max_len`]).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Expr, FilterError, FilterLimits, Lit, Op, Type};
use crate::MAX_PATH_DEPTH;

/// What parsing produced: the expression and its distinct key paths (indexed by the
/// expression's path slots).
pub(crate) struct Parsed {
    pub expr: Expr,
    pub paths: Vec<Vec<u32>>,
}

pub(crate) fn parse(text: &str, limits: &FilterLimits) -> Result<Parsed, FilterError> {
    if text.len() > limits.max_len {
        return Err(FilterError::TooLong {
            len: text.len(),
            max: limits.max_len,
        });
    }
    let mut p = Parser {
        src: text.as_bytes(),
        pos: 0,
        depth: 0,
        terms: 0,
        limits,
        paths: Vec::new(),
    };
    let expr = p.or()?;
    p.ws();
    if p.pos != p.src.len() {
        return Err(p.syntax("`and`, `or` or the end"));
    }
    Ok(Parsed {
        expr,
        paths: p.paths,
    })
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    terms: usize,
    limits: &'a FilterLimits,
    paths: Vec<Vec<u32>>,
}

impl Parser<'_> {
    fn syntax(&self, expected: &'static str) -> FilterError {
        FilterError::Syntax {
            at: self.pos,
            expected,
        }
    }

    fn ws(&mut self) {
        while self.src.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Consumes keyword `word` if it stands here as a whole word.
    fn keyword(&mut self, word: &str) -> bool {
        self.ws();
        let end = self.pos + word.len();
        if self.src.get(self.pos..end) == Some(word.as_bytes())
            && !self
                .src
                .get(end)
                .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos = end;
            return true;
        }
        false
    }

    fn enter(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(FilterError::TooDeep {
                at: self.pos,
                max: self.limits.max_depth,
            });
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let first = self.and()?;
        if !self.keyword("or") {
            return Ok(first);
        }
        let mut all = alloc::vec![first, self.and()?];
        while self.keyword("or") {
            all.push(self.and()?);
        }
        Ok(Expr::Or(all))
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let first = self.unary()?;
        if !self.keyword("and") {
            return Ok(first);
        }
        let mut all = alloc::vec![first, self.unary()?];
        while self.keyword("and") {
            all.push(self.unary()?);
        }
        Ok(Expr::And(all))
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        if self.keyword("not") {
            self.enter()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.ws();
        if self.peek() == Some(b'(') {
            self.enter()?;
            self.pos += 1;
            let inner = self.or()?;
            self.ws();
            if self.peek() != Some(b')') {
                return Err(self.syntax("`)`"));
            }
            self.pos += 1;
            self.depth -= 1;
            return Ok(inner);
        }
        if self.keyword("true") {
            return Ok(Expr::Bool(true));
        }
        if self.keyword("false") {
            return Ok(Expr::Bool(false));
        }
        self.term()
    }

    /// `exists PATH`, `PATH exists` or `PATH OP LITERAL`.
    fn term(&mut self) -> Result<Expr, FilterError> {
        self.ws();
        let at = self.pos;
        self.terms += 1;
        if self.terms > self.limits.max_terms {
            return Err(FilterError::TooManyTerms {
                at,
                max: self.limits.max_terms,
            });
        }
        if self.keyword("exists") {
            let (slot, _) = self.path()?;
            return Ok(Expr::Exists(slot));
        }
        let (slot, ty) = self.path()?;
        if self.keyword("exists") {
            return Ok(Expr::Exists(slot));
        }
        self.ws();
        let op_at = self.pos;
        let op = self.op()?;
        self.ws();
        let lit_at = self.pos;
        let lit = self.literal()?;
        let ty = match (ty, &lit) {
            (Some(ty), lit) => ty.accepts(lit, lit_at)?,
            (None, Lit::Int(_)) => Type::I64,
            (None, Lit::Float(_)) => return Err(FilterError::UntypedFloat { at: lit_at }),
            (None, Lit::Str(_)) => Type::Str,
            (None, Lit::Bool(_)) => Type::Bool,
        };
        if ty == Type::Bool && !matches!(op, Op::Eq | Op::Ne) {
            return Err(FilterError::Unordered { at: op_at });
        }
        Ok(Expr::Cmp {
            path: slot,
            ty,
            op,
            lit,
        })
    }

    fn op(&mut self) -> Result<Op, FilterError> {
        let two = self.src.get(self.pos..self.pos + 2);
        let (op, len) = match (two, self.peek()) {
            (Some(b"=="), _) => (Op::Eq, 2),
            (Some(b"!="), _) => (Op::Ne, 2),
            (Some(b"<="), _) => (Op::Le, 2),
            (Some(b">="), _) => (Op::Ge, 2),
            (_, Some(b'<')) => (Op::Lt, 1),
            (_, Some(b'>')) => (Op::Gt, 1),
            _ => return Err(self.syntax("a comparison operator or `exists`")),
        };
        self.pos += len;
        Ok(op)
    }

    /// A key path with an optional `:type`; returns its slot among the distinct paths.
    fn path(&mut self) -> Result<(usize, Option<Type>), FilterError> {
        self.ws();
        let at = self.pos;
        let mut keys = Vec::new();
        loop {
            let key_at = self.pos;
            let key = self.unsigned()?.ok_or_else(|| self.syntax("a key path"))?;
            let key = u32::try_from(key).map_err(|_| FilterError::OutOfRange { at: key_at })?;
            keys.push(key);
            if keys.len() > MAX_PATH_DEPTH {
                return Err(FilterError::PathTooDeep {
                    at,
                    max: MAX_PATH_DEPTH,
                });
            }
            if self.peek() != Some(b'/') {
                break;
            }
            self.pos += 1;
        }
        let ty = if self.peek() == Some(b':') {
            self.pos += 1;
            let ty_at = self.pos;
            let end = self.src[ty_at..]
                .iter()
                .position(|b| !b.is_ascii_alphanumeric())
                .map_or(self.src.len(), |n| ty_at + n);
            self.pos = end;
            Some(match &self.src[ty_at..end] {
                b"i32" => Type::I32,
                b"i64" => Type::I64,
                b"u32" => Type::U32,
                b"u64" => Type::U64,
                b"f32" => Type::F32,
                b"f64" => Type::F64,
                b"str" => Type::Str,
                b"bool" => Type::Bool,
                _ => return Err(FilterError::UnknownType { at: ty_at }),
            })
        } else {
            None
        };
        let slot = match self.paths.iter().position(|p| *p == keys) {
            Some(slot) => slot,
            None => {
                if self.paths.len() == self.limits.max_paths {
                    return Err(FilterError::TooManyPaths {
                        at,
                        max: self.limits.max_paths,
                    });
                }
                self.paths.push(keys);
                self.paths.len() - 1
            }
        };
        Ok((slot, ty))
    }

    /// An unsigned integer, `0x` hex or decimal; `None` when no digit stands here.
    fn unsigned(&mut self) -> Result<Option<u128>, FilterError> {
        let at = self.pos;
        let (radix, start) = match self.src.get(at..at + 2) {
            Some(b"0x" | b"0X") => (16, at + 2),
            _ => (10, at),
        };
        let end = self.src[start..]
            .iter()
            .position(|b| !b.is_ascii_hexdigit() || (radix == 10 && !b.is_ascii_digit()))
            .map_or(self.src.len(), |n| start + n);
        if end == start {
            return if radix == 16 {
                Err(FilterError::Syntax {
                    at: start,
                    expected: "hex digits",
                })
            } else {
                Ok(None)
            };
        }
        // The digits are ASCII, so this slice is valid UTF-8.
        let digits = core::str::from_utf8(&self.src[start..end]).unwrap_or_default();
        let value =
            u128::from_str_radix(digits, radix).map_err(|_| FilterError::OutOfRange { at })?;
        self.pos = end;
        Ok(Some(value))
    }

    fn literal(&mut self) -> Result<Lit, FilterError> {
        let at = self.pos;
        if self.peek() == Some(b'"') {
            return self.string().map(Lit::Str);
        }
        if self.keyword("true") {
            return Ok(Lit::Bool(true));
        }
        if self.keyword("false") {
            return Ok(Lit::Bool(false));
        }
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        if self.keyword("nan") {
            return Ok(Lit::Float(f64::NAN));
        }
        if self.keyword("inf") {
            return Ok(Lit::Float(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }));
        }
        let hex = matches!(self.src.get(self.pos..self.pos + 2), Some(b"0x" | b"0X"));
        let digits_at = self.pos;
        let Some(int) = self.unsigned()? else {
            self.pos = at;
            return Err(self.syntax("a literal: number, string, true or false"));
        };
        let fraction = !hex && self.peek() == Some(b'.');
        let exponent = !hex && matches!(self.peek(), Some(b'e' | b'E'));
        if fraction || exponent {
            self.pos = digits_at;
            return self.float(at, negative);
        }
        // Integers range over -2^63..2^64, the union of i64 and u64.
        let value = if negative {
            -(int as i128)
        } else {
            int as i128
        };
        if int > u64::MAX as u128 || value < i64::MIN as i128 {
            return Err(FilterError::OutOfRange { at });
        }
        Ok(Lit::Int(value))
    }

    /// `digits [. digits] [e [+-] digits]`, from `self.pos` (after any sign).
    fn float(&mut self, at: usize, negative: bool) -> Result<Lit, FilterError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.pos += 1;
            }
            p.pos > from
        };
        digits(self);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.syntax("digits after `.`"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.syntax("exponent digits"));
            }
        }
        // ASCII digits, `.`, `e` and signs: valid UTF-8 and a valid Rust float.
        let text = core::str::from_utf8(&self.src[start..self.pos]).unwrap_or_default();
        let value: f64 = text.parse().map_err(|_| FilterError::OutOfRange { at })?;
        Ok(Lit::Float(if negative { -value } else { value }))
    }

    /// A `"..."` string with escapes `\" \\ \n \r \t \0 \u{HEX}`.
    fn string(&mut self) -> Result<String, FilterError> {
        let at = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let Some(stop) = rest.iter().position(|&b| b == b'"' || b == b'\\') else {
                return Err(FilterError::UnterminatedString { at });
            };
            // The text came in as `&str` and `"`/`\` are ASCII, so this is a char boundary.
            out.push_str(core::str::from_utf8(&rest[..stop]).unwrap_or_default());
            self.pos += stop;
            if rest[stop] == b'"' {
                self.pos += 1;
                return Ok(out);
            }
            let esc_at = self.pos;
            let bad = FilterError::BadEscape { at: esc_at };
            let c = match self.src.get(self.pos + 1) {
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'n') => '\n',
                Some(b'r') => '\r',
                Some(b't') => '\t',
                Some(b'0') => '\0',
                Some(b'u') => {
                    if self.src.get(self.pos + 2) != Some(&b'{') {
                        return Err(bad);
                    }
                    let hex_at = self.pos + 3;
                    let close = self.src[hex_at..]
                        .iter()
                        .take(7)
                        .position(|&b| b == b'}')
                        .ok_or(bad)?;
                    let hex =
                        core::str::from_utf8(&self.src[hex_at..hex_at + close]).map_err(|_| bad)?;
                    let code = u32::from_str_radix(hex, 16).map_err(|_| bad)?;
                    let c = char::from_u32(code).ok_or(bad)?;
                    // `\u{` + hex + `}` minus the two bytes stepped over below.
                    self.pos += 2 + close;
                    c
                }
                None => return Err(FilterError::UnterminatedString { at }),
                Some(_) => return Err(bad),
            };
            out.push(c);
            self.pos += 2;
        }
    }
}

impl Type {
    /// `self` if a literal like `lit` can be compared with it.
    fn accepts(self, lit: &Lit, at: usize) -> Result<Type, FilterError> {
        let ok = matches!(
            (self, lit),
            (
                Type::I32 | Type::I64 | Type::U32 | Type::U64 | Type::F32 | Type::F64,
                Lit::Int(_) | Lit::Float(_)
            ) | (Type::Str, Lit::Str(_))
                | (Type::Bool, Lit::Bool(_))
        );
        if ok {
            Ok(self)
        } else {
            Err(FilterError::TypeMismatch { at })
        }
    }
}
