//! Unit tests of the observer.

use super::*;
use hex_literal::hex;

fn observe_all(obs: &mut Observer, chunks: &[&[u8]]) -> Result<Vec<(usize, Vec<u8>)>, DecodeError> {
    let mut out = Vec::new();
    for chunk in chunks {
        obs.feed_each(chunk, |v| out.push((v.sub, v.value().to_vec())))?;
    }
    obs.finish()?;
    Ok(out)
}

#[test]
fn nested_path_one_shot_and_split() {
    let buf = hex!("810802017f8303040143");
    for split in 0..=buf.len() {
        let mut obs =
            Observer::new(Config::DEFAULT, &[&[0x01, 0x03, 0x04], &[0x01, 0x02]]).unwrap();
        let got = observe_all(&mut obs, &[&buf[..split], &buf[split..]]).unwrap();
        assert_eq!(
            got,
            [(1, hex!("7f").to_vec()), (0, b"C".to_vec())],
            "split {split}"
        );
    }
}

#[test]
fn many_packets_in_a_row() {
    let one = hex!("9006110101120161");
    let stream: Vec<u8> = one.iter().chain(&one).chain(&one).copied().collect();
    let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x12]]).unwrap();
    let got = observe_all(&mut obs, &[&stream]).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(obs.packets(), 3);
}

#[test]
fn packets_in_a_header_split_at_the_top_level() {
    // The packet whose header is split is not counted yet: none before it, one before
    // the second.
    let one = hex!("9006110101120161");
    let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x13]]).unwrap();
    assert_eq!(obs.feed(&one[..1]).unwrap().consumed, 1);
    assert_eq!(obs.packets(), 0);
    obs.feed_each(&one[1..], |_| {}).unwrap();
    obs.feed_each(&one[..1], |_| {}).unwrap();
    assert_eq!(obs.packets(), 1);
    obs.feed_each(&one[1..4], |_| {}).unwrap();
    assert_eq!(obs.packets(), 1);
    obs.feed_each(&one[4..], |_| {}).unwrap();
    assert_eq!((obs.packets(), obs.finish()), (2, Ok(())));
}

#[test]
fn does_not_match_tag_bytes_inside_values() {
    // The reference's Subscribe(0x10) finds `10 01 07` inside the value of 0x02.
    let buf = hex!("81 08 02 03 10 01 07 10 01 05");
    let mut obs = Observer::new(Config::DEFAULT, &[&[0x01, 0x10]]).unwrap();
    let got = observe_all(&mut obs, &[&buf]).unwrap();
    assert_eq!(got, [(0, vec![0x05])]);
}

#[test]
fn truncation_is_an_error_only_at_finish() {
    let buf = hex!("9006110101120161");
    let mut obs = Observer::new(Config::DEFAULT, &[&[0x10, 0x12]]).unwrap();
    let fed = obs.feed(&buf[..5]).unwrap();
    assert_eq!((fed.consumed, fed.observed.is_none()), (5, true));
    assert_eq!(obs.finish(), Err(DecodeError::UnexpectedEnd { needed: 3 }));
}

#[test]
fn child_overflow_and_truncated_header() {
    let mut obs = Observer::validator(Config::DEFAULT);
    assert_eq!(
        obs.feed(&hex!("8103110501")).unwrap_err(),
        DecodeError::ChildOverflow {
            declared: 5,
            available: 1
        }
    );
    let mut obs = Observer::validator(Config::DEFAULT);
    assert_eq!(
        obs.feed(&hex!("810111")).unwrap_err(),
        DecodeError::TruncatedHeader { available: 1 }
    );
    let mut obs = Observer::validator(Config::DEFAULT);
    assert_eq!(obs.feed(&hex!("8101")).unwrap().consumed, 2);
    assert_eq!(
        obs.feed(&hex!("11")).unwrap_err(),
        DecodeError::TruncatedHeader { available: 1 }
    );
}

#[test]
fn depth_limit_holds_in_every_chunking() {
    // Node 0x01 { node 0x02 { 0x03 = "x" } } under a depth limit of 2: the inner node
    // may not be entered, whole or in chunks of any size.
    let buf = hex!("81058203030178");
    let config = Config::DEFAULT.with_limits(crate::Limits {
        max_packet_len: 1 << 10,
        max_depth: 2,
    });
    for size in 1..=buf.len() {
        let mut obs = Observer::new(config, &[&[0x01, 0x02, 0x03]]).unwrap();
        let got = buf
            .chunks(size)
            .try_for_each(|chunk| obs.feed_each(chunk, |_| panic!("no value")));
        assert_eq!(
            got,
            Err(DecodeError::TooDeep { limit: 2 }),
            "chunks of {size}"
        );
    }
}

#[test]
fn overlapping_paths_are_refused() {
    let err = Observer::new(Config::DEFAULT, &[&[0x10], &[0x10, 0x11]]).unwrap_err();
    assert_eq!(
        err,
        PathError::Overlap {
            shorter: 0,
            longer: 1
        }
    );
    assert_eq!(
        Observer::new(Config::DEFAULT, &[&[1], &[1]])
            .unwrap_err()
            .kind(),
        "path_overlap"
    );
}

#[test]
fn a_taken_value_keeps_its_header_length_at_every_split() {
    // Node 0x10 { 0x11 = 1 byte, 0x12 = 70 bytes (a two-byte length) }: the value taken
    // whole or across chunks (borrowed after a header that ends a chunk, or assembled)
    // reports the header it had, as `encoded_len`.
    let mut buf = hex!("90 80 4c 11 01 07 12 80 46").to_vec();
    buf.extend(core::iter::repeat_n(0xab, 70));
    for path in [[0x10, 0x11], [0x10, 0x12]] {
        let want = if path[1] == 0x11 { 3 } else { 73 };
        for a in 0..=buf.len() {
            for b in a..=buf.len() {
                let mut obs = Observer::new(Config::DEFAULT, &[&path]).unwrap();
                let mut seen = Vec::new();
                for chunk in [&buf[..a], &buf[a..b], &buf[b..]] {
                    obs.feed_each(chunk, |v| seen.push(v.encoded_len()))
                        .unwrap();
                }
                assert_eq!(seen, [want], "path {path:x?}, chunks at {a} and {b}");
            }
        }
    }
}
