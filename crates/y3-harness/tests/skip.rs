//! The AVX-512 skip run (`src/skip.rs`) against its scalar reference, on chains of one-byte
//! packets long enough to cross several 64-byte windows, with every kind of stop placed
//! anywhere: the wanted key, a two-byte length, an invalid tag, a value past the end.
//! On a CPU without AVX-512 VBMI both sides are the scalar walk, and
//! `the_vector_path_is_there_or_its_skip_reported` reports the comparison as skipped.

use std::io::Write;

use proptest::prelude::*;
use y3_harness::skip_run;

/// Where the CPU lacks AVX-512 VBMI there is no vector path to compare: that is reported as
/// a skip (stderr, and a line of `$Y3_SKIP_DIR/rust.tsv`, which scripts/skips.py counts
/// and checks against scripts/declared-skips.txt), never a silent pass.
#[test]
fn the_vector_path_is_there_or_its_skip_reported() {
    if y3::__skip::run_vector(&[0u8; 80], 0, 1).is_some() {
        return;
    }
    let test = "y3-harness skip::vector_skip_run";
    let reason = "this CPU lacks AVX-512 VBMI: no vector skip run to compare with the scalar walk";
    eprintln!("SKIPPED {test}: {reason}");
    if let Some(dir) = std::env::var_os("Y3_SKIP_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::path::Path::new(&dir).join("rust.tsv"))
            .unwrap();
        f.write_all(format!("rust\t{test}\t{reason}\n").as_bytes())
            .unwrap();
    }
}

fn chain() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        prop::collection::vec((0u8..64, 0usize..12), 1..80),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(key, packets, edits, cut)| {
            let mut out = vec![key];
            for (tag, len) in packets {
                out.push(tag | if len % 5 == 0 { 0x80 } else { 0 });
                out.push(len as u8);
                out.extend(std::iter::repeat_n(0xa5, len));
            }
            for (at, byte) in edits {
                let i = 1 + at.index(out.len() - 1);
                out[i] = byte;
            }
            let keep = 1 + cut.index(out.len());
            out.truncate(keep.max(out.len() * 3 / 4));
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn vector_skip_run_agrees_with_the_scalar_walk(data in chain()) {
        skip_run(&data);
    }

    #[test]
    fn vector_skip_run_on_any_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        skip_run(&data);
    }
}
