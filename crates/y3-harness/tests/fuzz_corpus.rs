//! The fuzz harness (`y3_harness`) run as a stable test over the seed corpus: every vector,
//! every malformed input, prefixes and bit flips of the vectors, and deterministic
//! pseudo-random bytes. The cargo-fuzz targets in `fuzz/` call the same three functions, so a
//! crash found there is reproduced here by adding its bytes to `REGRESSIONS`.

use y3::{Config, Dialect, Packet};
use y3_harness::{self as harness, observe_header, DIALECTS, TIGHT};

/// Inputs that once broke a harness check (hex), kept as regression seeds.
const REGRESSIONS: &[&str] = &[];

fn vectors_dir() -> String {
    format!("{}/../../testdata/vectors", env!("CARGO_MANIFEST_DIR"))
}

fn load(file: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/{file}", vectors_dir());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("vector json")
}

fn unhex(text: &str) -> Vec<u8> {
    let compact: String = text.split_whitespace().collect();
    hex::decode(compact).expect("vector hex")
}

/// Every byte string in the vector files, with the dialect it was written in.
fn corpus() -> Vec<(String, usize, Vec<u8>)> {
    let mut out = Vec::new();
    for (file, dialect) in [
        ("y3-codec-golang-v1.7.3.json", 0),
        ("yomorun-y3-v1.0.5.json", 1),
    ] {
        for entry in load(file) {
            let name = entry["name"].as_str().expect("name").to_owned();
            out.push((
                name.clone(),
                dialect,
                unhex(entry["hex"].as_str().expect("hex")),
            ));
            if let Some(d2) = entry["draft02_hex"].as_str() {
                out.push((format!("{name} draft02"), 2, unhex(d2)));
            }
        }
    }
    for entry in load("malformed-behaviour.json") {
        let dialect = usize::from(entry["lib"].as_str() == Some("y3 v1.0.5"));
        let name = entry["name"].as_str().expect("name").to_owned();
        out.push((
            name,
            dialect,
            unhex(entry["input_hex"].as_str().expect("hex")),
        ));
    }
    out
}

/// Key paths (1 to 3 keys) that occur in `bytes` when read in `dialect`, at most `max`.
fn key_paths(bytes: &[u8], dialect: usize, max: usize) -> Vec<Vec<u8>> {
    fn visit(p: &Packet<'_>, prefix: &mut Vec<u8>, out: &mut Vec<Vec<u8>>, max: usize) {
        prefix.push(p.id() as u8);
        if !out.contains(prefix) && out.len() < max {
            out.push(prefix.clone());
        }
        if prefix.len() < 3 {
            if let Ok(children) = p.children() {
                for child in children.flatten() {
                    visit(&child, prefix, out, max);
                }
            }
        }
        prefix.pop();
    }
    let config = Config::new(DIALECTS[dialect]).with_limits(TIGHT);
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Ok((packet, after)) = Packet::parse_with(rest, &config) {
        if packet.id() <= 0xff {
            visit(&packet, &mut Vec::new(), &mut out, max);
        }
        if after.is_empty() {
            break;
        }
        rest = after;
    }
    if out.is_empty() {
        out.push(vec![bytes.first().map_or(0, |b| b & 0x3f)]);
    }
    out
}

fn with_header(head: [u8; harness::OBSERVE_HEADER_LEN], stream: &[u8]) -> Vec<u8> {
    let mut input = head.to_vec();
    input.extend_from_slice(stream);
    input
}

/// All three harness functions over one input, observing in `dialect` at `paths`.
fn exercise(bytes: &[u8], dialect: usize, paths: &[Vec<u8>], seed: u8) {
    harness::decode(bytes);
    harness::encode_roundtrip(bytes);
    for (i, path) in paths.iter().enumerate() {
        let validating = i % 2 == 1;
        harness::observe_split(&with_header(
            observe_header(dialect, path, validating, seed.wrapping_add(i as u8)),
            bytes,
        ));
    }
}

#[test]
fn vectors_and_malformed_inputs() {
    let corpus = corpus();
    assert!(corpus.len() > 300, "vectors found in {}", vectors_dir());
    for (name, dialect, bytes) in &corpus {
        let paths = key_paths(bytes, *dialect, 12);
        // The same bytes observed in the other dialects too.
        for d in 0..DIALECTS.len() {
            let paths = if d == *dialect {
                &paths[..]
            } else {
                &paths[..1]
            };
            exercise(bytes, d, paths, bytes.len() as u8);
        }
        assert!(!name.is_empty());
    }
}

#[test]
fn every_prefix_of_every_vector() {
    for (_, dialect, bytes) in corpus() {
        let paths = key_paths(&bytes, dialect, 2);
        let n = bytes.len();
        // All prefixes of short vectors; of the long ones (up to 16 KiB strings) the first and
        // last 48 and 64 spread between, to keep the debug-build test quick.
        let cuts: Vec<usize> = if n <= 300 {
            (0..n).collect()
        } else {
            (0..48)
                .chain((0..64).map(|i| 48 + i * (n - 96) / 64))
                .chain(n - 48..n)
                .collect()
        };
        for cut in cuts {
            let prefix = &bytes[..cut];
            harness::decode(prefix);
            for path in &paths {
                harness::observe_split(&with_header(
                    observe_header(dialect, path, false, cut as u8),
                    prefix,
                ));
            }
        }
    }
}

/// A xorshift64 generator: deterministic, no clock.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[test]
fn bit_flips_of_short_vectors() {
    let mut rng = Rng(0x005e_ed0f_f1ee);
    for (_, dialect, bytes) in corpus() {
        if bytes.is_empty() || bytes.len() > 300 {
            continue;
        }
        let paths = key_paths(&bytes, dialect, 2);
        for _ in 0..8 {
            let mut mutated = bytes.clone();
            for _ in 0..1 + rng.next() % 3 {
                let at = (rng.next() % mutated.len() as u64) as usize;
                mutated[at] ^= 1 << (rng.next() % 8);
            }
            exercise(&mutated, dialect, &paths, rng.next() as u8);
        }
    }
}

#[test]
fn pseudo_random_bytes() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for i in 0..4000 {
        let len = (rng.next() % 72) as usize;
        // Bias towards the bytes that matter: tags with flags, small and negative lengths.
        let alphabet: &[u8] = &[0x00, 0x01, 0x02, 0x11, 0x40, 0x7f, 0x80, 0x81, 0x90, 0xc0];
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let r = rng.next();
                if i % 2 == 0 {
                    r as u8
                } else {
                    alphabet[(r % alphabet.len() as u64) as usize]
                }
            })
            .collect();
        harness::decode(&bytes);
        harness::observe_split(&bytes);
        harness::encode_roundtrip(&bytes);
    }
}

/// The filter harness: every corpus entry as the payload of filters of each shape (sibling
/// paths, nested paths, top-level keys), and the corpus bytes themselves as filter text.
#[test]
fn filters_over_the_corpus() {
    const FILTERS: [&str; 6] = [
        "0x10/0x11:f32 > 1 and 0x10/0x13 == \"127.0.0.1\"",
        "0x11 == 1 or 0x12 exists",
        "0x00/0x20 == -1 and 0x00/0x22:f32 < 1",
        "0x02/0x03/0x04 == \"C\" or not 0x05 exists",
        "0x10 exists and 0x10/0x11 != 0",
        "0x11:str < \"b\" or 0x11:bool == true or 0x11:u64 >= 0",
    ];
    for (_, _, bytes) in corpus() {
        for text in FILTERS {
            let mut data = vec![text.len() as u8];
            data.extend(text.as_bytes());
            data.extend(&bytes);
            harness::filter(&data);
        }
        harness::filter(&bytes);
    }
}

#[test]
fn regressions() {
    for text in REGRESSIONS {
        let bytes = unhex(text);
        harness::decode(&bytes);
        harness::observe_split(&bytes);
        harness::encode_roundtrip(&bytes);
    }
}

#[test]
fn harness_header_layout() {
    // byte 0: golang, path of 2 keys, validating; keys 0x10 0x11; seed 7.
    assert_eq!(
        observe_header(0, &[0x10, 0x11], true, 7),
        [0x14, 0x10, 0x11, 0x00, 0x07]
    );
    assert_eq!(DIALECTS[2], Dialect::Draft02);
}
