//! Fuzz and corpus harness: checks that hold for every input, shared by the cargo-fuzz
//! targets in `fuzz/fuzz_targets/` and the stable `tests/fuzz_corpus.rs`.
//!
//! A `publish = false` crate beside the codec (it reaches the codec's skip runs through the
//! hidden, test-only `__harness` feature). Every function takes arbitrary bytes and panics only when an invariant of the codec breaks:
//!
//! - [`decode`]: the one-shot entry points, the packet view and every typed accessor, for all
//!   three dialects with tight [`Limits`], never panic and agree with each other.
//! - [`observe_split`]: the streaming [`Observer`] gives the same values and the same error
//!   whether its input arrives in one piece, one byte at a time or in uneven chunks, and agrees
//!   with [`y3::get_with`] and [`Packet::find`].
//! - [`encode_roundtrip`]: an [`Item`] tree built with `arbitrary` encodes to exactly
//!   [`Item::encoded_len`] bytes, decodes back to itself and every one of its paths can be
//!   observed.

use arbitrary::{Arbitrary, Unstructured};

use y3::tag::{Header, DRAFT02_MAX_ID};
use y3::{
    decode_with, get_with, validate_with, Config, DecodeError, Dialect, EncodeError, Item, Limits,
    Observer, Packet, Tag, Value, MAX_PATH_DEPTH,
};

/// Small limits so that the fuzzer reaches the depth and length checks with short inputs.
pub const TIGHT: Limits = Limits {
    max_packet_len: 1 << 12,
    max_depth: 8,
};

/// Every dialect, in the order the harness byte selectors use.
pub const DIALECTS: [Dialect; 3] = [Dialect::Golang, Dialect::NVarInt, Dialect::Draft02];

/// Bytes at the start of an [`observe_split`] input that choose what to observe and how.
pub const OBSERVE_HEADER_LEN: usize = 5;

/// Builds the control header of an [`observe_split`] input.
///
/// `dialect` indexes [`DIALECTS`], `path` holds 1 to 3 keys (one byte each; masked to 6 bits
/// in the one-byte dialects), `validating` enables whole-tree validation and `chunk_seed`
/// drives the uneven chunking.
pub fn observe_header(
    dialect: usize,
    path: &[u8],
    validating: bool,
    chunk_seed: u8,
) -> [u8; OBSERVE_HEADER_LEN] {
    assert!((1..=3).contains(&path.len()), "path of 1 to 3 keys");
    let mut head = [0u8; OBSERVE_HEADER_LEN];
    head[0] = (dialect % 3) as u8 | (((path.len() - 1) as u8) << 2) | (u8::from(validating) << 4);
    head[1..1 + path.len()].copy_from_slice(path);
    head[4] = chunk_seed;
    head
}

/// Runs every decoding entry point and accessor over `data` in all three dialects.
///
/// # Panics
/// When two readers disagree: [`y3::decode_with`] against [`Packet::parse_with`] plus a
/// walk of the tree, [`y3::validate_with`] against the same walk over a stream, or two
/// typed accessors against each other.
pub fn decode(data: &[u8]) {
    for dialect in DIALECTS {
        decode_in(data, &Config::new(dialect).with_limits(TIGHT));
    }
}

fn decode_in(data: &[u8], config: &Config) {
    let flagged = config.dialect.has_node_flag();

    // One packet, whole tree checked.
    let decoded = decode_with(data, config);
    let expected = match Packet::parse_with(data, config) {
        Err(e) => Err(e),
        Ok((_, rest)) if !rest.is_empty() => Err(DecodeError::TrailingBytes {
            count: rest.len() as u64,
        }),
        Ok((packet, _)) => walk(&packet).map(|()| packet),
    };
    if flagged {
        assert_eq!(decoded, expected, "decode_with vs parse + walk");
    } else {
        // draft02 cannot see nodes, so only the top-level packet is checked.
        let top_only = match Packet::parse_with(data, config) {
            Err(e) => Err(e),
            Ok((_, rest)) if !rest.is_empty() => Err(DecodeError::TrailingBytes {
                count: rest.len() as u64,
            }),
            Ok((packet, _)) => Ok(packet),
        };
        assert_eq!(decoded, top_only, "draft02 decode_with vs parse");
        if let Ok(packet) = &expected {
            // The walk found nothing wrong either way.
            let _ = walk(packet);
        }
    }
    if let Ok(packet) = decoded {
        assert_eq!(packet.encoded_len(), data.len());
        assert_eq!(packet.depth(), 1);
    }

    // A stream of packets, every header checked.
    let validated = validate_with(data, config);
    let mut rest = data;
    let mut stream = Ok(());
    let mut exact = true;
    while !rest.is_empty() {
        match Packet::parse_with(rest, config) {
            Ok((packet, after)) => {
                assert_eq!(packet.encoded_len(), rest.len() - after.len());
                rest = after;
                if flagged {
                    if let Err(e) = walk(&packet) {
                        stream = Err(e);
                        break;
                    }
                } else {
                    let _ = walk(&packet);
                }
            }
            Err(e) => {
                // A node cut short may hold a malformed child that the streaming walk meets
                // before it notices the truncation; the view cannot look inside it.
                exact = !matches!(e, DecodeError::UnexpectedEnd { .. })
                    || !flagged
                    || rest[0] & 0x80 == 0;
                stream = Err(e);
                break;
            }
        }
    }
    if exact {
        assert_eq!(validated, stream, "validate_with vs parse + walk");
    } else {
        assert!(
            validated.is_err(),
            "validate_with accepted a truncated stream"
        );
    }
}

/// Reads `packet` every way there is and descends into its children.
///
/// Returns the first error of the tree walk: a malformed child or the depth limit. Value
/// accessor errors are expected (the types are not on the wire) and checked for consistency
/// instead. Recursion is bounded by [`Limits::max_depth`], which [`Packet::children`] checks.
fn walk(packet: &Packet<'_>) -> Result<(), DecodeError> {
    accessors(packet);
    let config = *packet.config();
    if config.dialect.has_node_flag() && !packet.is_node() {
        assert_eq!(
            packet.children().map(|_| ()).unwrap_err().kind(),
            "wrong_type"
        );
        return Ok(());
    }
    let mut consumed = 0;
    for child in packet.children()? {
        let child = child?;
        assert_eq!(child.depth(), packet.depth() + 1);
        consumed += child.encoded_len();
        walk(&child)?;
    }
    assert_eq!(consumed, packet.value().len(), "children cover the node");
    Ok(())
}

/// Every typed accessor, and the relations between them.
fn accessors(packet: &Packet<'_>) {
    let (i32v, i64v) = (packet.i32(), packet.i64());
    let (u32v, u64v) = (packet.u32(), packet.u64());
    let (f32v, f64v) = (packet.f32(), packet.f64());
    let (boolv, strv, bytesv) = (packet.bool(), packet.str(), packet.bytes());
    let _ = (
        packet.id(),
        packet.tag(),
        packet.is_array(),
        packet.encoded_len(),
    );
    if packet.is_node() {
        for kind in [
            i32v.map(drop),
            i64v.map(drop),
            u32v.map(drop),
            u64v.map(drop),
            f32v.map(drop),
            f64v.map(drop),
            boolv.map(drop),
            strv.map(drop),
            bytesv.map(drop),
        ] {
            assert_eq!(kind.unwrap_err().kind(), "wrong_type");
        }
        return;
    }
    let value = packet.value();
    assert_eq!(bytesv, Ok(value));
    assert_eq!(strv.is_ok(), core::str::from_utf8(value).is_ok());
    assert_eq!(f32v.is_ok(), (1..=4).contains(&value.len()));
    assert_eq!(f64v.is_ok(), (1..=8).contains(&value.len()));
    if let Ok(v) = i32v {
        assert_eq!(i64v, Ok(v as i64), "i32 and i64 agree");
        assert_eq!(u32v, Ok(v as u32), "u32 has the i32's bits");
    }
    match i64v {
        Ok(v) => {
            assert_eq!(u64v, Ok(v as u64), "u64 has the i64's bits");
            assert_eq!(i32v.is_ok(), i32::try_from(v).is_ok());
            match boolv {
                Ok(b) => assert_eq!(v, b as i64),
                Err(e) => assert_eq!(e, DecodeError::InvalidBool { value: v }),
            }
        }
        Err(e) => {
            assert_eq!(u64v, Err(e));
            assert!(i32v.is_err() && u32v.is_err() && boolv.is_err());
        }
    }
}

/// One value an observer handed out.
type Seen = (usize, Tag, Vec<u8>, u32, usize);

/// What one observer run saw: the values in order and how the stream ended.
#[derive(Debug, PartialEq)]
struct Run {
    values: Vec<Seen>,
    outcome: Result<(), DecodeError>,
    /// Position and completed packets after a clean end.
    end: Option<(u64, u64)>,
}

fn seen(v: &y3::Observed<'_>) -> Seen {
    (
        v.sub,
        v.tag(),
        v.value().to_vec(),
        v.depth(),
        v.encoded_len(),
    )
}

/// Feeds `chunks` through `observer` with a hand-written `feed` loop, checking what every
/// call reports, then finishes.
fn run_chunks<'c>(observer: &mut Observer, chunks: impl Iterator<Item = &'c [u8]>) -> Run {
    let mut values = Vec::new();
    for chunk in chunks {
        let mut input = chunk;
        loop {
            match observer.feed(input) {
                Ok(fed) => {
                    assert!(fed.consumed <= input.len());
                    let Some(v) = fed.observed else {
                        assert_eq!(fed.consumed, input.len(), "nothing observed, all consumed");
                        break;
                    };
                    values.push(seen(&v));
                    input = &input[fed.consumed..];
                }
                Err(e) => {
                    return Run {
                        values,
                        outcome: Err(e),
                        end: None,
                    }
                }
            }
        }
    }
    let outcome = observer.finish();
    let end = outcome
        .is_ok()
        .then(|| (observer.position(), observer.packets()));
    Run {
        values,
        outcome,
        end,
    }
}

/// Feeds `chunks` through `observer` and records what a caller can read after every
/// `feed`: its answer, the position, the packets completed and what `finish` would say
/// (an error ends the trace).
pub fn trace_chunks<'c>(
    observer: &mut Observer,
    chunks: impl Iterator<Item = &'c [u8]>,
) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in chunks {
        let mut input = chunk;
        loop {
            let fed = match observer.feed(input) {
                Ok(fed) => fed,
                Err(e) => {
                    out.push(format!("{e:?}"));
                    return out;
                }
            };
            // Lent or assembled too: the same chunks must give the same answer.
            let value = fed.observed.as_ref().map(|v| (seen(v), v.assembled));
            let consumed = fed.consumed;
            out.push(format!(
                "{consumed} {value:?} at {} packets {} finish {:?}",
                observer.position(),
                observer.packets(),
                observer.finish()
            ));
            input = &input[consumed..];
            if value.is_none() {
                break;
            }
        }
    }
    out
}

/// A tiny deterministic generator for chunk sizes.
struct XorShift(u32);

impl XorShift {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
}

/// Splits `data` into chunks of 0 to 16 bytes chosen by `seed`.
fn uneven_chunks(data: &[u8], seed: u8) -> Vec<&[u8]> {
    let mut rng = XorShift((0x9e37_79b9 ^ ((seed as u32) << 8)) | 1);
    let mut chunks = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let n = (rng.next() % 17) as usize;
        let (chunk, after) = rest.split_at(n.min(rest.len()));
        chunks.push(chunk);
        rest = after;
    }
    chunks
}

/// Observes one key path in a stream fed whole, byte by byte and in uneven chunks.
///
/// Input layout ([`observe_header`] builds the first five bytes):
///
/// ```text
/// byte 0: bits 0-1 dialect (0 golang, 1 nvarint, 2 draft02, 3 golang)
///         bits 2-3 path length - 1 (3 means 1), bit 4 validating
/// bytes 1-3: keys (masked to 0x3f in the one-byte dialects)
/// byte 4: chunk-size seed
/// rest:   the stream
/// ```
///
/// # Panics
/// When the chunked runs see other values or another error than the one-shot run, or the
/// one-shot run disagrees with [`y3::get_with`] or [`Packet::find`].
pub fn observe_split(data: &[u8]) {
    let Some((head, stream)) = data.split_first_chunk::<OBSERVE_HEADER_LEN>() else {
        return;
    };
    let dialect = DIALECTS[(head[0] & 3) as usize % 3];
    let path_len = match (head[0] >> 2) & 3 {
        3 => 1,
        n => n as usize + 1,
    };
    let validating = head[0] & 0x10 != 0;
    let mask = if dialect.has_node_flag() { 0x3f } else { 0xff };
    let mut path = [0u32; 3];
    for (key, byte) in path.iter_mut().zip(&head[1..4]) {
        *key = (byte & mask) as u32;
    }
    let path = &path[..path_len];
    let config = Config::new(dialect).with_limits(TIGHT);
    let base = Observer::new(config, &[path])
        .expect("1 to 3 keys is a valid path")
        .validating(validating);

    let mut observer = base.clone();
    let whole = run_chunks(&mut observer, core::iter::once(stream));
    assert!(
        whole.values.iter().all(|v| v.3 as usize == path_len),
        "a value is observed at the depth of its path"
    );
    if let Some((position, _)) = whole.end {
        assert_eq!(position, stream.len() as u64);
    }

    skip_run(data);

    // The general machine alone (the fast path answers one-shot input or leaves it alone).
    let mut general = base.clone().without_fast_path();
    assert_eq!(
        whole,
        run_chunks(&mut general, core::iter::once(stream)),
        "fast path vs the general machine"
    );

    // Validation by the one walker (`validate_with`: whole packets, every header checked)
    // against a validator observer without fast path, whole, in 1-byte and in uneven
    // chunks: the same outcome.
    if validating {
        let by_walker = validate_with(stream, &config);
        let mut general = Observer::validator(config).without_fast_path();
        let chunks = uneven_chunks(stream, head[4]);
        for chunking in [vec![stream], stream.chunks(1).collect(), chunks] {
            general.reset();
            assert_eq!(
                by_walker,
                run_chunks(&mut general, chunking.iter().copied()).outcome,
                "validate_with vs the general machine, chunks {chunking:?}"
            );
        }
    }

    // The same observer, reset (possibly after an error), fed one byte at a time.
    observer.reset();
    let bytes = run_chunks(&mut observer, stream.chunks(1));
    assert_eq!(whole, bytes, "one-shot vs 1-byte chunks");

    observer.reset();
    let chunks = uneven_chunks(stream, head[4]);
    let uneven = run_chunks(&mut observer, chunks.iter().copied());
    assert_eq!(whole, uneven, "one-shot vs uneven chunks {chunks:?}");

    // After every feed (whole, in 7-byte and in uneven chunks), the machine reads as the
    // general machine without any skip run reads: the header parser on every header.
    let mut reference = base.clone().without_skip_runs();
    let size = 1 + head[4] as usize % 8;
    for chunking in [vec![stream], stream.chunks(size).collect(), chunks] {
        observer.reset();
        reference.reset();
        assert_eq!(
            trace_chunks(&mut observer, chunking.iter().copied()),
            trace_chunks(&mut reference, chunking.iter().copied()),
            "skip runs vs the header parser, chunks {chunking:?}"
        );
    }

    // `feed_each` is the convenience loop over `feed`.
    let mut each = base.clone();
    let mut values = Vec::new();
    let outcome = each
        .feed_each(stream, |v| values.push(seen(&v)))
        .and_then(|()| each.finish());
    assert_eq!((&values, &outcome), (&whole.values, &whole.outcome));

    // `get` is the first match of the same machine.
    if !validating {
        let got = get_with(stream, path, &config);
        match (whole.values.first(), got) {
            (Some(first), Ok(Some(p))) => {
                assert_eq!((first.1, first.2.as_slice()), (p.tag(), p.value()));
            }
            (None, Ok(None)) => assert_eq!(whole.outcome, Ok(()), "get found nothing"),
            (None, Err(e)) => assert_eq!(whole.outcome, Err(e), "get failed alike"),
            (first, got) => panic!("observer saw {first:?}, get_with said {got:?}"),
        }
    }

    // A single valid packet: the view's navigation finds the same first value.
    if let Ok(packet) = decode_with(stream, &config) {
        if packet.id() == path[0] {
            if let Ok(Some(found)) = packet.find(&path[1..]) {
                let first = whole
                    .values
                    .first()
                    .expect("find matched, observer did not");
                assert_eq!((first.1, first.2.as_slice()), (found.tag(), found.value()));
            }
        }
    }
}

/// The vector skip run against its scalar reference (`src/skip.rs`), from every start
/// offset of the first 80 and for a key read from the input.
///
/// # Panics
/// When the two stop at different offsets.
pub fn skip_run(data: &[u8]) {
    let Some((&key, node)) = data.split_first() else {
        return;
    };
    // Mostly small keys (they occur in the data); sometimes one that matches nothing.
    let want = if key & 0x80 != 0 {
        64 + key as u32
    } else {
        (key & 0x3f) as u32
    };
    for s in 0..node.len().min(80) {
        let scalar = y3::__skip::run_scalar(node, s, want);
        if let Some(vector) = y3::__skip::run_vector(node, s, want) {
            assert_eq!(vector, scalar, "skip run from {s} for key {want}");
        }
        assert_eq!(y3::__skip::run(node, s, want), scalar);
    }
    // The key-set run: a few keys from the input's first byte (none, one, several).
    let keys = match key % 3 {
        0 => 0,
        1 => 1u64 << (key & 0x3f),
        _ => (1u64 << (key & 0x3f)) | (1 << ((key >> 2) & 0x3f)) | (1 << 17),
    };
    for s in 0..node.len().min(80) {
        let scalar = y3::__skip::run_scalar_keys(node, s, keys);
        if let Some(vector) = y3::__skip::run_vector_keys(node, s, keys) {
            assert_eq!(vector, scalar, "skip run from {s} for keys {keys:#x}");
        }
        assert_eq!(y3::__skip::run_keys(node, s, keys), scalar);
        // One key as a set is the one-key run.
        if key % 3 == 1 {
            assert_eq!(scalar, y3::__skip::run_scalar(node, s, (key & 0x3f) as u32));
        }
    }
}

/// A leaf value as `arbitrary` builds it.
#[derive(Debug, Arbitrary)]
enum Leaf {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(u32),
    F64(u64),
    Bool(bool),
    Str(String),
    Bytes(Vec<u8>),
}

/// Bounds of a generated tree.
const MAX_GEN_DEPTH: u32 = 5;
const MAX_GEN_ITEMS: usize = 48;
const MAX_GEN_BYTES: usize = 40;

fn gen_id(u: &mut Unstructured<'_>, dialect: Dialect) -> arbitrary::Result<u32> {
    // Mostly a handful of keys, so that siblings and paths collide.
    let small = u.ratio(3, 4)?;
    let max = if small { 3 } else { dialect.max_tag() };
    let id: u32 = u.arbitrary()?;
    Ok(match (dialect, small) {
        (Dialect::Draft02, false) => match id % 3 {
            0 => (id >> 2) & 0x7f,
            1 => (id >> 2) & 0x3fff,
            _ => (id >> 2) & DRAFT02_MAX_ID,
        },
        _ => id % (max + 1),
    })
}

fn gen_item(
    u: &mut Unstructured<'_>,
    dialect: Dialect,
    depth: u32,
    budget: &mut usize,
) -> arbitrary::Result<Item> {
    let id = gen_id(u, dialect)?;
    *budget = budget.saturating_sub(1);
    let kind: u8 = u.int_in_range(0..=9)?;
    if kind >= 8 && depth < MAX_GEN_DEPTH && *budget > 0 {
        let count: u8 = u.int_in_range(0..=4)?;
        let mut children = Vec::new();
        for _ in 0..count {
            if *budget == 0 {
                break;
            }
            children.push(gen_item(u, dialect, depth + 1, budget)?);
        }
        return Ok(if kind == 8 {
            Item::node(id, children)
        } else {
            Item::array(id, children)
        });
    }
    let value = match Leaf::arbitrary(u)? {
        Leaf::I32(v) => Value::I32(v),
        Leaf::I64(v) => Value::I64(v),
        Leaf::U32(v) => Value::U32(v),
        Leaf::U64(v) => Value::U64(v),
        Leaf::F32(bits) => Value::F32(f32::from_bits(bits)),
        Leaf::F64(bits) => Value::F64(f64::from_bits(bits)),
        Leaf::Bool(v) => Value::Bool(v),
        Leaf::Str(mut s) => {
            let mut end = s.len().min(MAX_GEN_BYTES);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            Value::Str(s)
        }
        Leaf::Bytes(mut b) => {
            b.truncate(MAX_GEN_BYTES);
            Value::Bytes(b)
        }
    };
    Ok(Item::new(id, value))
}

/// Structural equality with floats compared by their bits (NaN payloads included).
fn same_item(a: &Item, b: &Item) -> bool {
    a.id == b.id
        && match (&a.value, &b.value) {
            (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
            (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
            (Value::Node(x), Value::Node(y)) | (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_item(a, b))
            }
            (x, y) => x == y,
        }
}

/// Every item of the tree with its key path, in stream (depth-first) order.
fn paths<'i>(item: &'i Item, prefix: &mut Vec<u32>, out: &mut Vec<(Vec<u32>, &'i Item)>) {
    prefix.push(item.id);
    out.push((prefix.clone(), item));
    if let Value::Node(children) | Value::Array(children) = &item.value {
        for child in children {
            paths(child, prefix, out);
        }
    }
    prefix.pop();
}

/// The value bytes `item` is written with.
fn value_bytes(item: &Item, dialect: Dialect) -> Vec<u8> {
    let mut all = item.to_vec(dialect).expect("checked tree");
    all.drain(..all.len() - item.value_len(dialect));
    all
}

/// Builds an [`Item`] tree from `data`, encodes it and reads it back every way.
///
/// The first byte picks the dialect; the rest drives `arbitrary`. Trees are at most
/// 5 levels and 48 items deep and wide, keys mostly from a small set so that paths collide.
///
/// # Panics
/// When [`Item::encoded_len`] differs from the bytes written, the decoded tree differs from
/// the original (floats by bits), a key path is observed with other values than the tree
/// holds there, or an out-of-range key is written.
pub fn encode_roundtrip(data: &[u8]) {
    let Some((&select, rest)) = data.split_first() else {
        return;
    };
    let dialect = DIALECTS[(select & 3) as usize % 3];
    let mut u = Unstructured::new(rest);
    let mut budget = MAX_GEN_ITEMS;
    let Ok(item) = gen_item(&mut u, dialect, 1, &mut budget) else {
        return;
    };

    assert_eq!(item.check(dialect), Ok(()));
    let len = item.encoded_len(dialect);
    let mut bytes = Vec::new();
    item.encode(dialect, &mut bytes)
        .expect("a checked tree encodes");
    assert_eq!(bytes.len(), len, "encoded_len vs bytes written");
    assert_eq!(item.to_vec(dialect).as_deref(), Ok(bytes.as_slice()));

    // A buffer one byte short is left untouched.
    let mut short = [0xa5u8; 512];
    if len <= short.len() {
        let mut dst = &mut short[..len - 1];
        assert_eq!(
            item.encode(dialect, &mut dst),
            Err(EncodeError::BufferTooSmall {
                required: len as u64,
                remaining: (len - 1) as u64,
            })
        );
        assert!(short.iter().all(|&b| b == 0xa5), "nothing written on error");
    }

    // A key one past the dialect's maximum is refused and nothing is written.
    if select & 4 != 0 {
        let mut wide = item.clone();
        wide.id = dialect.max_tag() + 1;
        let mut out = Vec::new();
        assert_eq!(
            wide.encode(dialect, &mut out).map_err(|e| e.kind()),
            Err("invalid_tag")
        );
        assert!(out.is_empty());
    }

    let config = Config::new(dialect);
    let packet = decode_with(&bytes, &config).expect("encoded bytes decode");
    assert_eq!(packet.encoded_len(), len);
    let read = Item::read_like(&packet, &item.value).expect("decoded like the schema");
    assert!(same_item(&read, &item), "{read:?} != {item:?}");

    // Every key path is observed with exactly the items the tree holds there, in order.
    let mut all = Vec::new();
    paths(&item, &mut Vec::new(), &mut all);
    let mut done: Vec<&[u32]> = Vec::new();
    for (path, _) in &all {
        if done.contains(&path.as_slice()) || path.len() > MAX_PATH_DEPTH {
            continue;
        }
        done.push(path);
        // Without node flags the observer enters whatever a path prefix names; a primitive
        // there would be read as children, which the schema forbids.
        let ambiguous = !dialect.has_node_flag()
            && all.iter().any(|(p, it)| {
                p.len() < path.len()
                    && path.starts_with(p)
                    && !matches!(it.value, Value::Node(_) | Value::Array(_))
            });
        if ambiguous {
            continue;
        }
        let expected: Vec<(u32, Option<Tag>, Vec<u8>)> = all
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, it)| {
                let tag = dialect.has_node_flag().then(|| it.tag());
                (it.id, tag, value_bytes(it, dialect))
            })
            .collect();
        let mut observer = Observer::new(config, &[path]).expect("a valid path");
        let mut got = Vec::new();
        let fed = observer.feed_each(&bytes, |v| {
            let tag = dialect.has_node_flag().then(|| v.tag());
            got.push((v.id(), tag, v.value().to_vec()));
        });
        assert_eq!(fed.and_then(|()| observer.finish()), Ok(()));
        assert_eq!(got, expected, "observing {path:x?}");
    }

    // The header of the top-level packet is what `Header::encoded_len` says.
    assert_eq!(
        Header::encoded_len(item.tag(), item.value_len(dialect), dialect) + item.value_len(dialect),
        len
    );
}

/// Content filters (`src/filter/`): the first byte says how many of the following bytes are
/// the filter text (lossy UTF-8), the rest is the payload. Parsing never panics; a filter
/// that compiles evaluates the payload to the same verdict with its fast path and with the
/// observer alone, and again after a reuse.
///
/// # Panics
/// When the two evaluations differ.
pub fn filter(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n as usize).min(rest.len());
    let (text, payload) = rest.split_at(n);
    let text = String::from_utf8_lossy(text);
    let Ok(mut fast) = y3::Filter::parse(&text) else {
        return;
    };
    let mut reference = fast.clone().without_fast_path();
    let verdict = fast.evaluate(payload);
    assert_eq!(verdict, reference.evaluate(payload), "filter {text:?}");
    assert_eq!(verdict, fast.evaluate(payload), "filter {text:?} reused");
}
