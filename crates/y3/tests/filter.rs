//! Content filters (`spec/filters.md`): the semantics table over the shared vectors, the
//! error and limit tables, and the parser fuzzed.

mod common;

use std::time::{Duration, Instant};

use hex_literal::hex;
use proptest::prelude::*;
use y3::{Config, Filter, FilterLimits, Verdict};

use Verdict::{Malformed, Match, NoMatch};

/// NoiseData{Noise f32 40.0 (0x11), Time i64 1600000000000 (0x12), From "127.0.0.1"
/// (0x13)} under 0x10.
const NOISE: [u8; 25] = hex!("9017110242201206aec8bbba800013093132372e302e302e31");

fn verdict(filter: &str, payload: &[u8]) -> Verdict {
    let mut f = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
    let v = f.evaluate(payload);
    // The shared (cloning) entry point says the same, and a reused filter is stable.
    assert_eq!(f.matches(payload), v, "{filter}");
    assert_eq!(f.evaluate(payload), v, "{filter}");
    v
}

#[test]
fn semantics_table() {
    let rows: &[(&str, Verdict)] = &[
        // Floats, read as the path's type; integer and float literals alike.
        ("0x10/0x11:f32 == 40", Match),
        ("0x10/0x11:f32 == 40.0", Match),
        ("0x10/0x11:f32 > 39.999", Match),
        ("0x10/0x11:f32 > 40", NoMatch),
        ("0x10/0x11:f32 >= 40", Match),
        ("0x10/0x11:f32 < 40.5", Match),
        ("0x10/0x11:f32 <= 4e1", Match),
        ("0x10/0x11:f32 != 40", NoMatch),
        ("0x10/0x11:f32 > -inf", Match),
        ("0x10/0x11:f32 < inf", Match),
        // NaN is unordered: only != holds.
        ("0x10/0x11:f32 == nan", NoMatch),
        ("0x10/0x11:f32 != nan", Match),
        ("0x10/0x11:f32 < nan", NoMatch),
        // Integers, default i64; integer against float literal exactly.
        ("0x10/0x12 == 1600000000000", Match),
        ("0x10/0x12:i64 > 1599999999999.5", Match),
        ("0x10/0x12:i64 < 1600000000000.5", Match),
        ("0x10/0x12:u64 == 1600000000000", Match),
        ("0x10/0x12 != 0x174876e8000", NoMatch),
        ("0x10/0x12 >= -1", Match),
        // Strings, byte order; escapes.
        (r#"0x10/0x13 == "127.0.0.1""#, Match),
        (r#"0x10/0x13 != "lab""#, Match),
        (r#"0x10/0x13 < "2""#, Match),
        (r#"0x10/0x13 > "127.0.0.1""#, NoMatch),
        (r#"0x10/0x13 == "\u{31}27.0.0.1""#, Match),
        (r#"0x10/0x13 == "127.0.0.1\n""#, NoMatch),
        // Missing keys: every comparison false, != included; exists false; not inverts.
        ("0x10/0x14 == 1", NoMatch),
        ("0x10/0x14 != 1", NoMatch),
        ("0x10/0x14 exists", NoMatch),
        ("exists 0x10/0x14", NoMatch),
        ("not 0x10/0x14 exists", Match),
        ("not 0x10/0x14 == 1", Match),
        ("0x11 exists", NoMatch),
        ("0x10/0x11/0x01 exists", NoMatch),
        // Bytes that do not read as the type: false.
        ("0x10/0x13 == 5", NoMatch),
        ("0x10/0x13:bool == true", NoMatch),
        ("0x10/0x13:f32 != 1", NoMatch),
        ("0x10:str == \"x\"", NoMatch),
        // Nodes and paths under other paths of the same filter.
        ("0x10 exists", Match),
        ("exists 0x10 and 0x10/0x11:f32 == 40", Match),
        (
            "0x10/0x11:f32 == 40 and 0x10 exists and 0x10/0x13 == \"127.0.0.1\"",
            Match,
        ),
        // Logic and precedence: not > and > or.
        ("0x10/0x11:f32 > 60 or 0x10/0x13 == \"127.0.0.1\"", Match),
        ("0x10/0x11:f32 > 60 and 0x10/0x13 == \"127.0.0.1\"", NoMatch),
        ("0x10/0x11:f32 > 60 and 0x10/0x12 > 0 or true", Match),
        ("0x10/0x11:f32 > 60 and (0x10/0x12 > 0 or true)", NoMatch),
        ("not not 0x10 exists", Match),
        ("not (0x10 exists or false)", NoMatch),
        ("true", Match),
        ("false", NoMatch),
        // Decimal keys.
        ("16/17:f32 == 40", Match),
    ];
    for &(filter, want) in rows {
        assert_eq!(verdict(filter, &NOISE), want, "{filter}");
    }
}

#[test]
fn malformed_payloads_match_nothing() {
    for payload in [
        &b"not y3 at all"[..],
        &hex!("9017110242"), // truncated inside the node
        &hex!("907f"),       // negative length
        &hex!("50021234"),   // a primitive with the array flag
        &hex!("9003110542"), // child overflows its node
    ] {
        // Only what the walk reads is checked: a filter on 0x20 skips node 0x10 whole.
        if payload[0] == 0x90 && payload.len() == 5 && payload[1] == 0x03 {
            assert_eq!(verdict("0x20 exists", payload), NoMatch);
            assert_eq!(verdict("0x10/0x11 exists", payload), Malformed);
            continue;
        }
        for filter in ["0x10/0x11:f32 > 0", "not 0x10/0x11 exists", "0x20 exists"] {
            assert_eq!(
                verdict(filter, payload),
                Malformed,
                "{filter} on {payload:02x?}"
            );
        }
    }
    // An empty payload is an empty Y3 stream: no key, no match, not malformed.
    assert_eq!(verdict("0x10 exists", b""), NoMatch);
    assert_eq!(verdict("not 0x10 exists", b""), Match);
    // A filter of constants reads nothing.
    assert_eq!(verdict("true", b"not y3"), Match);
}

#[test]
fn first_occurrence_wins() {
    // Two top-level 0x11 packets: 5 then 7.
    let two = hex!("110105 110107");
    assert_eq!(verdict("0x11 == 5", &two), Match);
    assert_eq!(verdict("0x11 == 7", &two), NoMatch);
}

/// A literal that reads back as `v` exactly (Rust's shortest round-trip spelling).
fn float_literal(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// A string literal spelling `s` with escapes: quotes, backslashes, controls and every
/// non-ASCII character as `\u{..}`.
fn string_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Every scalar vector of the `golang` set: the value equals itself and orders right
/// against its neighbours, read as its type.
#[test]
fn vectors_compare_with_their_values() {
    let limits = FilterLimits {
        max_len: 1 << 16,
        ..FilterLimits::DEFAULT
    };
    let mut checked = 0;
    for v in common::golang() {
        if v.hex.is_empty() || v.json["decoded"] != "ok" || v.tag != 0x11 {
            continue;
        }
        let (ty, lit, lower, higher) = match v.ty.as_str() {
            "int32" | "int64" => {
                let n = v.json["value"].as_i64().unwrap() as i128;
                let ty = if v.ty == "int32" { "i32" } else { "i64" };
                (ty, n.to_string(), (n - 1).to_string(), (n + 1).to_string())
            }
            "uint32" | "uint64" => {
                let n = v.json["value"].as_u64().unwrap() as i128;
                let ty = if v.ty == "uint32" { "u32" } else { "u64" };
                (ty, n.to_string(), (n - 1).to_string(), (n + 1).to_string())
            }
            "float32" | "float64" => {
                let bits = u64::from_str_radix(v.json["bits"].as_str().unwrap(), 16).unwrap();
                let (ty, x) = if v.ty == "float32" {
                    ("f32", f32::from_bits(bits as u32) as f64)
                } else {
                    ("f64", f64::from_bits(bits))
                };
                if x.is_nan() {
                    let f = format!("0x11:{ty}");
                    assert_eq!(verdict(&format!("{f} == nan"), &v.bytes()), NoMatch);
                    assert_eq!(verdict(&format!("{f} != 0"), &v.bytes()), Match);
                    assert_eq!(
                        verdict(&format!("{f} > 0 or {f} <= 0"), &v.bytes()),
                        NoMatch
                    );
                    checked += 1;
                    continue;
                }
                (
                    ty,
                    float_literal(x),
                    float_literal(x - 1.0),
                    float_literal(x + 1.0),
                )
            }
            "string" => {
                // Recipe-built strings (`"value": null`) are left to the codec tests.
                let Some(s) = v.json["value"].as_str().map(str::to_owned) else {
                    continue;
                };
                (
                    "str",
                    string_literal(&s),
                    "\"\"".into(),
                    string_literal(&(s + "\u{10ffff}")),
                )
            }
            "bool" => {
                let b = v.json["value"].as_bool().unwrap();
                let bytes = v.bytes();
                let f = |text: String| Filter::parse(&text).unwrap().evaluate(&bytes);
                assert_eq!(f(format!("0x11 == {b}")), Match, "{}", v.name);
                assert_eq!(f(format!("0x11 != {b}")), NoMatch, "{}", v.name);
                assert_eq!(f(format!("0x11 == {}", !b)), NoMatch, "{}", v.name);
                checked += 1;
                continue;
            }
            _ => continue,
        };
        let bytes = v.bytes();
        let run = |op: &str, lit: &str| {
            let text = format!("0x11:{ty} {op} {lit}");
            Filter::parse_with(&text, &limits, Config::DEFAULT)
                .unwrap_or_else(|e| panic!("{}: {text}: {e}", v.name))
                .evaluate(&bytes)
        };
        let name = &v.name;
        assert_eq!(run("==", &lit), Match, "{name}");
        assert_eq!(run("!=", &lit), NoMatch, "{name}");
        assert_eq!(run("<=", &lit), Match, "{name}");
        assert_eq!(run(">=", &lit), Match, "{name}");
        assert_eq!(run("<", &lit), NoMatch, "{name}");
        assert_eq!(run(">", &lit), NoMatch, "{name}");
        // Neighbours (skipped where ±1 is absorbed by a large float).
        // Neighbours, where they are literals (inside -2^63..2^64) and differ from the
        // value (a large float absorbs ±1).
        let in_range = |l: &str| Filter::parse(&format!("0x11:{ty} > {l}")).is_ok();
        if lower != lit && in_range(&lower) {
            assert_eq!(run(">", &lower), Match, "{name} > {lower}");
        }
        if higher != lit && in_range(&higher) {
            assert_eq!(run("<", &higher), Match, "{name} < {higher}");
        }
        checked += 1;
    }
    assert!(checked >= 60, "only {checked} vectors checked");
}

/// The benchmark's data set (C63, key K32 and K07): a two-comparison filter.
#[test]
fn stress_vector() {
    let v = common::golang()
        .into_iter()
        .find(|v| v.name == "stress_C63_ascending")
        .unwrap();
    let bytes = v.bytes();
    // The cycle: key 0x20 (32) is int64 -1, 0x1f uint32 128, 0x22 float32 0.25, 0x01 "a".
    assert_eq!(
        verdict("0x00/0x20 == -1 and 0x00/0x22:f32 < 1", &bytes),
        Match
    );
    assert_eq!(
        verdict("0x00/0x1f:u64 == 128 and 0x00/0x22:f32 < 1", &bytes),
        Match
    );
    assert_eq!(
        verdict("0x00/0x20 > -1 and 0x00/0x22:f32 < 1", &bytes),
        NoMatch
    );
    assert_eq!(verdict(r#"0x00/0x01 == "a""#, &bytes), Match);
}

#[test]
fn error_table() {
    let rows: &[(&str, &str)] = &[
        ("", "filter_syntax"),
        ("0x10/0x11 >", "filter_syntax"),
        ("0x10/0x11 > 60 and", "filter_syntax"),
        ("0x10/0x11 = 60", "filter_syntax"),
        ("(0x10 exists", "filter_syntax"),
        ("0x10 exists)", "filter_syntax"),
        ("0x10//0x11 exists", "filter_syntax"),
        ("0x exists", "filter_syntax"),
        ("0x10 > 1.", "filter_syntax"),
        ("0x10 > 1e", "filter_syntax"),
        ("0x10 > abc", "filter_syntax"),
        ("0x10 exists 0x11", "filter_syntax"),
        ("0x100000000 exists", "filter_out_of_range"),
        ("0x10 > 18446744073709551616", "filter_out_of_range"),
        ("0x10 > -9223372036854775809", "filter_out_of_range"),
        (r#"0x10 == "abc"#, "filter_unterminated_string"),
        (r#"0x10 == "a\"#, "filter_unterminated_string"),
        (r#"0x10 == "a\q""#, "filter_bad_escape"),
        (r#"0x10 == "\u{d800}""#, "filter_bad_escape"),
        (r#"0x10 == "\u{110000}""#, "filter_bad_escape"),
        (r#"0x10 == "\u0041""#, "filter_bad_escape"),
        ("0x10:int > 1", "filter_unknown_type"),
        ("0x10:u8 > 1", "filter_unknown_type"),
        ("0x10:str > 1", "filter_type_mismatch"),
        ("0x10:f32 == true", "filter_type_mismatch"),
        ("0x10:bool == 1", "filter_type_mismatch"),
        ("0x10 < true", "filter_unordered"),
        ("0x10 > 60.5", "filter_untyped_float"),
        ("0x10 > nan", "filter_untyped_float"),
    ];
    for &(text, kind) in rows {
        let err = Filter::parse(text).expect_err(text);
        assert_eq!(err.kind(), kind, "{text}: {err}");
        assert!(!err.is_limit(), "{text}");
        // Messages are lowercase with numbers, no trailing period.
        let msg = err.to_string();
        assert!(!msg.ends_with('.'), "{msg}");
    }
}

fn refused_quickly(text: &str, kind: &str) {
    let start = Instant::now();
    let err = Filter::parse(text).expect_err(kind);
    assert!(
        start.elapsed() < Duration::from_millis(50),
        "{kind} took {:?}",
        start.elapsed()
    );
    assert_eq!(err.kind(), kind);
    assert!(err.is_limit());
}

#[test]
fn hostile_filters_are_refused() {
    // Huge: 1 MiB of text.
    refused_quickly(&"0x10 exists or ".repeat(70_000), "filter_too_long");
    // Deep: 17 parentheses, 17 nots, and a million of either (refused at the limit, not
    // after recursing a million times: the length check comes first, so try within it).
    refused_quickly(
        &format!("{}0x10 exists{}", "(".repeat(17), ")".repeat(17)),
        "filter_too_deep",
    );
    refused_quickly(
        &format!("{}0x10 exists", "not ".repeat(17)),
        "filter_too_deep",
    );
    refused_quickly(&"(".repeat(1000), "filter_too_deep");
    let deep = FilterLimits {
        max_len: usize::MAX,
        ..FilterLimits::DEFAULT
    };
    let err = Filter::parse_with(&"(".repeat(1 << 20), &deep, Config::DEFAULT).unwrap_err();
    assert_eq!(err.kind(), "filter_too_deep");
    // Many paths: 17 distinct; many terms: 33 on one path.
    let paths: Vec<String> = (1..=17).map(|k| format!("0x10/{k} exists")).collect();
    refused_quickly(&paths.join(" or "), "filter_too_many_paths");
    refused_quickly(
        &vec!["0x10 exists"; 33].join(" and "),
        "filter_too_many_terms",
    );
    // A path of 17 keys.
    refused_quickly(
        &format!("{} exists", vec!["1"; 17].join("/")),
        "filter_path_too_deep",
    );
    // At the limits: accepted.
    let paths: Vec<String> = (1..=16).map(|k| format!("0x10/{k} exists")).collect();
    assert!(Filter::parse(&paths.join(" or ")).is_ok());
    assert!(Filter::parse(&format!("{}0x10 exists{}", "(".repeat(16), ")".repeat(16))).is_ok());
    assert!(Filter::parse(&format!("{} exists", vec!["1"; 16].join("/"))).is_ok());
}

/// Fragments of the grammar, glued at random: mostly near-valid filters.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "0x10",
        "/",
        "0x11",
        "17",
        ":f32",
        ":i64",
        ":str",
        ":bool",
        ":u64",
        ":x",
        " ",
        "(",
        ")",
        "not ",
        " and ",
        " or ",
        "exists ",
        " exists",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "60",
        "-1",
        "1.5",
        "1e3",
        "nan",
        "-inf",
        "\"",
        "\\",
        "\\u{41}",
        "\\n",
        "a",
        "true",
        "false",
        "0x",
        "é",
        "18446744073709551616",
    ])
}

/// Payloads near the common shape: NoiseData, the stress vector, their concatenations,
/// with bytes overwritten at random.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    let stress = common::golang()
        .into_iter()
        .find(|v| v.name == "stress_C63_ascending")
        .unwrap()
        .bytes();
    let bases = vec![
        NOISE.to_vec(),
        stress.clone(),
        [NOISE.to_vec(), NOISE.to_vec()].concat(),
        [hex!("9003 110105").to_vec(), NOISE.to_vec()].concat(),
        [stress, NOISE.to_vec()].concat(),
        hex!("110105 120107 1303616263").to_vec(),
    ];
    (
        prop::sample::select(bases),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut bytes, edits, cut)| {
            for (at, b) in edits {
                let i = at.index(bytes.len());
                bytes[i] = b;
            }
            if cut.index(8) == 0 {
                let n = cut.index(bytes.len() + 1);
                bytes.truncate(n);
            }
            bytes
        })
}

const FAST_SHAPES: [&str; 7] = [
    "0x10/0x11:f32 > 39 and 0x10/0x13 == \"127.0.0.1\"",
    "0x10/0x12 > 0 or not 0x10/0x14 exists",
    "0x10/0x11 exists",
    "0x00/0x20 == -1 and 0x00/0x22:f32 < 1",
    "0x00/0x01 == \"a\" or 0x00/0x3f exists",
    "0x11 == 5 and 0x13 == \"abc\"",
    "0x12 exists or 0x10 exists",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// The sibling scan answers what the observer alone answers, on every payload.
    #[test]
    fn fast_path_agrees_with_the_observer(bytes in payload()) {
        for text in FAST_SHAPES {
            let mut fast = Filter::parse(text).unwrap();
            let mut reference = Filter::parse(text).unwrap().without_fast_path();
            prop_assert_eq!(fast.evaluate(&bytes), reference.evaluate(&bytes), "{} on {:02x?}", text, bytes);
        }
    }

    /// The parser never panics, on glued fragments or on any string, and whatever it
    /// accepts evaluates without panicking on any payload.
    #[test]
    fn parser_never_panics(parts in prop::collection::vec(fragment(), 0..40),
                           noise in ".{0,64}",
                           payload in prop::collection::vec(any::<u8>(), 0..64)) {
        for text in [parts.concat(), noise] {
            let start = Instant::now();
            if let Ok(mut f) = Filter::parse(&text) {
                let _ = f.evaluate(&payload);
                let _ = f.evaluate(&NOISE);
                prop_assert_eq!(f.as_str(), text.as_str());
            }
            prop_assert!(start.elapsed() < Duration::from_millis(100));
        }
    }
}
