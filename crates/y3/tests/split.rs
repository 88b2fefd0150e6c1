//! Split-input tests: every vector fed to the observer at every split point and one byte
//! at a time must give exactly what the one-shot feed gives (values, their order, and
//! errors), like tokio-util's multi-packet and zenoh's fragmented tests.

mod common;

use y3::{Config, DecodeError, Dialect, Observer, Packet};

/// What an observer saw: `(subscription, tag id, value bytes)` in order, or the error kind.
type Outcome = Result<Vec<(usize, u32, Vec<u8>)>, &'static str>;

fn run(observer: &mut Observer, chunks: &mut dyn Iterator<Item = &[u8]>) -> Outcome {
    observer.reset();
    let mut seen = Vec::new();
    let mut step = |obs: &mut Observer, chunk: &[u8]| -> Result<(), DecodeError> {
        obs.feed_each(chunk, |v| seen.push((v.sub, v.id(), v.value().to_vec())))
    };
    for chunk in chunks {
        step(observer, chunk).map_err(|e| e.kind())?;
    }
    observer.finish().map_err(|e| e.kind())?;
    Ok(seen)
}

/// Split points to try: all of them for short inputs, a stride for long ones.
fn split_points(len: usize) -> Vec<usize> {
    if len <= 600 {
        (0..=len).collect()
    } else {
        (0..=len).step_by(61).chain([1, 2, 3, len - 1]).collect()
    }
}

fn check_splits(name: &str, bytes: &[u8], observer: &mut Observer) -> Outcome {
    let whole = run(observer, &mut [bytes].into_iter());
    for s in split_points(bytes.len()) {
        let got = run(observer, &mut [&bytes[..s], &bytes[s..]].into_iter());
        assert_eq!(got, whole, "{name}: split at {s}");
    }
    for size in [1, 2, 7] {
        let got = run(observer, &mut bytes.chunks(size));
        assert_eq!(got, whole, "{name}: {size}-byte chunks");
    }
    whole
}

/// Observers for one vector: its top-level key, the children of that key, and a validator.
fn observers(bytes: &[u8], config: Config) -> Vec<Observer> {
    let mut out = vec![Observer::validator(config)];
    let Ok((packet, _)) = Packet::parse_with(bytes, &config) else {
        return out;
    };
    out.push(Observer::new(config, &[&[packet.id()]]).unwrap());
    if let Ok(children) = packet.children() {
        let mut ids: Vec<u32> = children.filter_map(Result::ok).map(|c| c.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        let paths: Vec<Vec<u32>> = ids.iter().map(|&c| vec![packet.id(), c]).collect();
        let refs: Vec<&[u32]> = paths.iter().map(Vec::as_slice).collect();
        if !refs.is_empty() && refs.len() <= y3::MAX_SUBSCRIPTIONS {
            out.push(Observer::new(config, &refs).unwrap());
        }
    }
    out
}

fn check_file(vectors: Vec<common::Vector>, dialect: Dialect) -> usize {
    let config = Config::new(dialect);
    let mut checked = 0;
    for v in vectors.iter().filter(|v| !v.hex.is_empty()) {
        let bytes = v.bytes();
        for mut observer in observers(&bytes, config) {
            let outcome = check_splits(&v.name, &bytes, &mut observer);
            // The one-shot outcome agrees with the packet view.
            if let Ok(seen) = &outcome {
                for (_, id, value) in seen {
                    let (packet, _) = Packet::parse_with(&bytes, &config).unwrap();
                    let direct = if packet.id() == *id && packet.value() == value.as_slice() {
                        Some(packet)
                    } else {
                        packet.child(*id).unwrap()
                    };
                    assert!(
                        direct.is_some(),
                        "{}: observed key 0x{id:02x} not in the view",
                        v.name
                    );
                }
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn golang_vectors_at_every_split() {
    assert!(check_file(common::golang(), Dialect::Golang) > 250);
}

#[test]
fn nvarint_vectors_at_every_split() {
    assert!(check_file(common::nvarint(), Dialect::NVarInt) > 200);
}

/// The stress vector: the observed value and each key's value agree with one-shot `get`.
#[test]
fn stress_vector_each_key_split() {
    let v = common::golang()
        .into_iter()
        .find(|v| v.name == "stress_C63_ascending")
        .unwrap();
    let bytes = v.bytes();
    for k in [1, 2, 16, 32, 62, 63] {
        let mut observer = Observer::new(Config::DEFAULT, &[&[0, k]]).unwrap();
        let seen = check_splits("stress", &bytes, &mut observer).unwrap();
        let direct = y3::get(&bytes, &[0, k]).unwrap().unwrap();
        assert_eq!(seen, [(0, k, direct.value().to_vec())]);
    }
}

/// A socket-like stream: every valid golang vector back to back, observed by top-level key
/// in 7-byte chunks, yields each packet's value in order.
#[test]
fn many_packets_in_one_stream() {
    let mut stream = Vec::new();
    let mut expected = Vec::new();
    for v in common::golang() {
        let bytes = v.bytes();
        if v.hex.is_empty() || y3::validate_with(&bytes, &Config::DEFAULT).is_err() {
            continue;
        }
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            let (packet, tail) = Packet::parse(rest).unwrap();
            if packet.id() == 0x11 {
                expected.push((0, 0x11, packet.value().to_vec()));
            }
            rest = tail;
        }
        stream.extend_from_slice(&bytes);
    }
    let mut observer = Observer::new(Config::DEFAULT, &[&[0x11]]).unwrap();
    let whole = run(&mut observer, &mut [stream.as_slice()].into_iter()).unwrap();
    assert_eq!(whole, expected);
    assert!(expected.len() > 80);
    assert_eq!(run(&mut observer, &mut stream.chunks(7)).unwrap(), expected);
    assert_eq!(run(&mut observer, &mut stream.chunks(1)).unwrap(), expected);
}

/// Values that straddle chunks are assembled; values that lie in one chunk are borrowed.
#[test]
fn borrowed_versus_assembled() {
    let bytes = hex::decode("9017110242201206aec8bbba800013093132372e302e302e31").unwrap();
    let mut observer = Observer::new(Config::DEFAULT, &[&[0x10, 0x13]]).unwrap();
    let fed = observer.feed(&bytes).unwrap();
    assert!(!fed.observed.unwrap().assembled);
    observer.reset();
    let (a, b) = bytes.split_at(20);
    assert!(observer.feed(a).unwrap().observed.is_none());
    let v = observer.feed(b).unwrap().observed.unwrap();
    assert!(v.assembled);
    assert_eq!(v.str().unwrap(), "127.0.0.1");
    // A chunk that ends with the value's header (or its tag byte, the next one with its
    // length byte): the value itself lies in the next chunk, which lends it. The same for
    // two paths, and for the general walk alone (no skip run under a limit below 63).
    let walk_only = Config::DEFAULT.with_limits(y3::Limits {
        max_packet_len: 62,
        max_depth: 8,
    });
    for split in [16, 15] {
        for mut observer in [
            Observer::new(Config::DEFAULT, &[&[0x10, 0x13]]).unwrap(),
            Observer::new(Config::DEFAULT, &[&[0x10, 0x13], &[0x10, 0x14]]).unwrap(),
            Observer::new(walk_only, &[&[0x10, 0x13]]).unwrap(),
        ] {
            let (a, b) = bytes.split_at(split);
            assert!(observer.feed(a).unwrap().observed.is_none());
            let (c, d) = b.split_at(16 - split);
            if !c.is_empty() {
                assert!(observer.feed(c).unwrap().observed.is_none());
            }
            let fed = observer.feed(d).unwrap();
            let v = fed.observed.unwrap();
            assert!(!v.assembled, "split {split}");
            assert_eq!((fed.consumed, v.str().unwrap()), (9, "127.0.0.1"));
            assert_eq!(v.value().as_ptr(), d.as_ptr(), "split {split}");
        }
    }
}
