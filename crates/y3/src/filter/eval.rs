//! The compiled plan: one [`Observer`] over the filter's paths, and the evaluation of the
//! expression on the values one walk found.

use alloc::vec::Vec;
use core::cmp::Ordering;

use super::{Expr, Lit, Op, Type, Verdict, MAX_FILTER_PATHS};
use crate::fast::{self, Fast, Scanned};
use crate::tag::Header;
use crate::{Config, Observer, Packet, Tag};

/// Where each of the filter's paths is found after the walk.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The distinct paths, in the expression's slot order.
    paths: Vec<Vec<u32>>,
    /// Per path: the observer subscription holding it, and how many of its keys that
    /// subscription covers (the rest are looked up inside its value).
    lookups: Vec<(usize, usize)>,
    /// Observer subscriptions.
    subs: usize,
    config: Config,
    /// The common shape, walked without the observer: every path is one key (below 64)
    /// under the same prefix, as in `0x10/0x11 > 1 and 0x10/0x13 == "x"`.
    siblings: Option<Siblings>,
}

/// Paths that differ only in their last key: the prefix walked by [`fast::walk`], then the
/// prefix node's children scanned once for every last key.
#[derive(Debug, Clone)]
struct Siblings {
    prefix: Vec<u32>,
    /// The last key of each path, in slot order.
    keys: Vec<u8>,
}

impl Siblings {
    fn of(paths: &[Vec<u32>], config: &Config) -> Option<Siblings> {
        let first = paths.first()?;
        let prefix = &first[..first.len() - 1];
        let same = paths
            .iter()
            .all(|p| p.len() == first.len() && p.starts_with(prefix) && p[p.len() - 1] < 64);
        (same && config.dialect.has_node_flag()).then(|| Siblings {
            prefix: prefix.to_vec(),
            keys: paths.iter().map(|p| p[p.len() - 1] as u8).collect(),
        })
    }
}

/// A taken value: tag, value offset, value length, depth.
type Taken = (Tag, usize, usize, u32);

impl Plan {
    /// The plan and its observer. The observer refuses a path under another (it takes the
    /// outer one's value whole), so only paths with no proper prefix among the filter's
    /// are subscribed; a longer one is found inside its prefix's value.
    pub fn compile(paths: Vec<Vec<u32>>, config: Config) -> (Plan, Observer) {
        let mut subscribed: Vec<&[u32]> = Vec::new();
        for path in &paths {
            let covered = paths
                .iter()
                .any(|other| other.len() < path.len() && path.starts_with(other));
            if !covered {
                subscribed.push(path);
            }
        }
        let lookups = paths
            .iter()
            .map(|path| {
                // Every path starts with a subscribed one (itself at least); the shortest
                // such is unique, since subscribed paths never prefix each other.
                subscribed
                    .iter()
                    .position(|s| path.starts_with(s))
                    .map_or((0, path.len()), |i| (i, subscribed[i].len()))
            })
            .collect();
        // Paths are 1..=MAX_PATH_DEPTH keys (the parser checks), distinct and prefix-free,
        // at most MAX_FILTER_PATHS of them: `new` accepts them. A filter of constants has
        // none and walks nothing.
        let observer = if subscribed.is_empty() {
            Observer::validator(config)
        } else {
            Observer::new(config, &subscribed).unwrap_or_else(|_| Observer::validator(config))
        };
        let subs = subscribed.len();
        let siblings = Siblings::of(&paths, &config);
        (
            Plan {
                paths,
                lookups,
                subs,
                config,
                siblings,
            },
            observer,
        )
    }

    #[cfg(feature = "__harness")]
    pub fn without_siblings(&mut self) {
        self.siblings = None;
    }

    pub fn paths(&self) -> impl Iterator<Item = &[u32]> {
        self.paths.iter().map(Vec::as_slice)
    }

    pub fn evaluate(&self, expr: &Expr, observer: &mut Observer, payload: &[u8]) -> Verdict {
        let verdict = |m: bool| if m { Verdict::Match } else { Verdict::NoMatch };
        if self.subs == 0 {
            return verdict(eval(expr, &|_| None));
        }
        if let Some(sib) = &self.siblings {
            let mut found = [Scanned::default(); MAX_FILTER_PATHS];
            if let Some((got, depth)) = self.scan_siblings(sib, payload, &mut found) {
                let value = |slot: usize| {
                    (got >> slot & 1 != 0).then(|| {
                        let f = found[slot];
                        let (start, len) = (f.start as usize, f.len as usize);
                        Packet::from_parts(
                            Tag::from_byte(f.tag),
                            &payload[start..start + len],
                            f.head_len as usize,
                            depth,
                            self.config,
                        )
                    })
                };
                return verdict(eval(expr, &value));
            }
        }
        let mut values: [Option<Packet<'_>>; MAX_FILTER_PATHS] = [None; MAX_FILTER_PATHS];
        let mut taken: [Option<Taken>; MAX_FILTER_PATHS] = [None; MAX_FILTER_PATHS];
        if !self.walk(observer, payload, &mut taken) {
            return Verdict::Malformed;
        }
        for (slot, &(sub, covered)) in self.lookups.iter().enumerate() {
            let Some((tag, start, len, depth)) = taken[sub] else {
                continue;
            };
            let head_len = Header::encoded_len(tag, len, self.config.dialect);
            let packet = Packet::from_parts(
                tag,
                &payload[start..start + len],
                head_len,
                depth,
                self.config,
            );
            values[slot] = match packet.find(&self.paths[slot][covered..]) {
                Ok(found) => found,
                Err(_) => return Verdict::Malformed,
            };
        }
        verdict(eval(expr, &|slot| values[slot]))
    }

    /// The values of sibling paths by the fast walk and one scan of their parent: the bit
    /// set of the paths found and their depth. `None` when the payload is not the common
    /// case (the observer decides then, from the start: nothing here has decided anything).
    fn scan_siblings(
        &self,
        sib: &Siblings,
        payload: &[u8],
        found: &mut [Scanned; MAX_FILTER_PATHS],
    ) -> Option<(u64, u32)> {
        let limit = self.config.limits.max_packet_len;
        let (start, end, depth) = if sib.prefix.is_empty() {
            (0, payload.len(), 1)
        } else {
            match fast::walk(&sib.prefix, &self.config, payload) {
                // The parent node; a primitive there is left to the observer, which looks
                // on at its later siblings.
                Fast::Found {
                    tag,
                    start,
                    len,
                    depth,
                    ..
                } if tag.is_node() && depth < self.config.limits.max_depth as usize => {
                    (start, start + len, depth + 1)
                }
                // Complete packets without the parent: every path is missing.
                Fast::Done { .. } => return Some((0, 0)),
                _ => return None,
            }
        };
        let keys = &sib.keys;
        let got = fast::scan(payload, start, end, keys, limit, &mut found[..keys.len()])?;
        // Missing under the first parent: a later one may hold it, as the observer sees.
        if !sib.prefix.is_empty() && got.count_ones() as usize != keys.len() {
            return None;
        }
        Some((got, depth as u32))
    }

    /// One walk of `payload`: the first value of each subscription. False on a header
    /// error (the payload is not Y3).
    fn walk(
        &self,
        observer: &mut Observer,
        payload: &[u8],
        taken: &mut [Option<Taken>; MAX_FILTER_PATHS],
    ) -> bool {
        observer.reset();
        let mut missing = self.subs;
        let mut base = 0;
        loop {
            let Ok(fed) = observer.feed(&payload[base..]) else {
                return false;
            };
            let consumed = fed.consumed;
            let Some(found) = fed.observed else {
                // Everything consumed: the end of the payload.
                return observer.finish().is_ok();
            };
            // Fed in one piece, the value is borrowed from `payload` and ends where
            // consumption stopped (as in `get_with`).
            let end = base + consumed;
            let len = found.value().len();
            let slot = &mut taken[found.sub];
            if slot.is_none() {
                *slot = Some((found.tag(), end - len, len, found.depth()));
                missing -= 1;
                if missing == 0 {
                    return true;
                }
            }
            base = end;
        }
    }
}

/// Two-valued: a test on a missing or unreadable value is false. `value(slot)` is the
/// path's value.
fn eval<'a, F: Fn(usize) -> Option<Packet<'a>>>(expr: &Expr, value: &F) -> bool {
    match expr {
        Expr::Bool(b) => *b,
        Expr::And(all) => all.iter().all(|e| eval(e, value)),
        Expr::Or(all) => all.iter().any(|e| eval(e, value)),
        Expr::Not(e) => !eval(e, value),
        Expr::Exists(path) => value(*path).is_some(),
        Expr::Cmp { path, ty, op, lit } => match &value(*path) {
            None => false,
            Some(packet) => compare(packet, *ty, *op, lit),
        },
    }
}

/// A number read from the payload or written in the filter.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

fn compare(packet: &Packet<'_>, ty: Type, op: Op, lit: &Lit) -> bool {
    let ord = match (ty, lit) {
        (Type::Str, Lit::Str(want)) => match packet.str() {
            Ok(s) => Some(s.cmp(want.as_str())),
            Err(_) => return false,
        },
        (Type::Bool, Lit::Bool(want)) => match packet.bool() {
            Ok(b) => Some(b.cmp(want)),
            Err(_) => return false,
        },
        (_, Lit::Int(_) | Lit::Float(_)) => {
            let have = match ty {
                Type::I32 => packet.i32().map(|v| Num::Int(v.into())),
                Type::I64 => packet.i64().map(|v| Num::Int(v.into())),
                Type::U32 => packet.u32().map(|v| Num::Int(v.into())),
                Type::U64 => packet.u64().map(|v| Num::Int(v.into())),
                Type::F32 => packet.f32().map(|v| Num::Float(v.into())),
                Type::F64 => packet.f64().map(Num::Float),
                // The parser pairs string and bool types with their literals only.
                Type::Str | Type::Bool => return false,
            };
            let Ok(have) = have else { return false };
            let want = match lit {
                Lit::Int(i) => Num::Int(*i),
                Lit::Float(f) => Num::Float(*f),
                _ => return false,
            };
            cmp_num(have, want)
        }
        _ => return false,
    };
    apply(op, ord)
}

/// `None` is unordered (a NaN on either side): only `!=` holds, as in IEEE 754.
pub(crate) fn apply(op: Op, ord: Option<Ordering>) -> bool {
    let Some(ord) = ord else {
        return op == Op::Ne;
    };
    match op {
        Op::Eq => ord == Ordering::Equal,
        Op::Ne => ord != Ordering::Equal,
        Op::Lt => ord == Ordering::Less,
        Op::Le => ord != Ordering::Greater,
        Op::Gt => ord == Ordering::Greater,
        Op::Ge => ord != Ordering::Less,
    }
}

/// Exact numeric order of integers and floats (no rounding of either to the other).
fn cmp_num(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
        (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
        (Num::Int(a), Num::Float(b)) => cmp_int_float(a, b),
        (Num::Float(a), Num::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
    }
}

/// `i` against `f`, exactly. Integers here lie in -2^63..2^64, far inside ±2^100.
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    const BOUND: f64 = 1.2676506002282294e30; // 2^100
    if f.is_nan() {
        return None;
    }
    if f >= BOUND {
        return Some(Ordering::Less);
    }
    if f <= -BOUND {
        return Some(Ordering::Greater);
    }
    // `as` truncates toward zero; |f| < 2^100 fits i128 exactly, and the truncated value
    // (at most 53 significant bits) converts back to f64 exactly.
    let whole = f as i128;
    match i.cmp(&whole) {
        Ordering::Equal => (whole as f64).partial_cmp(&f),
        ord => Some(ord),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sibling_paths_take_the_scan() {
        let plan = |paths: &[&[u32]]| {
            Plan::compile(paths.iter().map(|p| p.to_vec()).collect(), Config::DEFAULT).0
        };
        assert!(plan(&[&[0x10, 0x11], &[0x10, 0x13]]).siblings.is_some());
        assert!(plan(&[&[0x11], &[0x13]]).siblings.is_some());
        assert!(plan(&[&[0x10, 0x11], &[0x12, 0x13]]).siblings.is_none());
        assert!(plan(&[&[0x10], &[0x10, 0x13]]).siblings.is_none());
        assert!(plan(&[&[0x10, 0x40]]).siblings.is_none());
        let nvarint = Plan::compile(vec![vec![0x11]], Config::new(crate::Dialect::NVarInt)).0;
        assert!(nvarint.siblings.is_some(), "nvarint marks nodes too");
    }

    #[test]
    fn int_float_order_is_exact() {
        use Ordering::*;
        assert_eq!(cmp_int_float(60, 60.0), Some(Equal));
        assert_eq!(cmp_int_float(60, 60.5), Some(Less));
        assert_eq!(cmp_int_float(61, 60.5), Some(Greater));
        assert_eq!(cmp_int_float(-1, -0.5), Some(Less));
        assert_eq!(cmp_int_float(0, -0.5), Some(Greater));
        assert_eq!(cmp_int_float(0, -0.0), Some(Equal));
        // 2^53 + 1 is not a float; it is above 2^53 and below 2^53 + 2.
        let big = (1i128 << 53) + 1;
        assert_eq!(cmp_int_float(big, 9007199254740992.0), Some(Greater));
        assert_eq!(cmp_int_float(big, 9007199254740994.0), Some(Less));
        assert_eq!(
            cmp_int_float(u64::MAX.into(), 1.8446744073709552e19),
            Some(Less)
        );
        assert_eq!(cmp_int_float(i64::MIN.into(), i64::MIN as f64), Some(Equal));
        assert_eq!(cmp_int_float(0, f64::INFINITY), Some(Less));
        assert_eq!(cmp_int_float(0, f64::NEG_INFINITY), Some(Greater));
        assert_eq!(cmp_int_float(0, f64::NAN), None);
    }
}
