//! Observe one key in the published Y3-vs-JSON report's data sets.
//!
//! Cases C03-K02, C16-K08, C32-K16, C63-K32: a node 0x80 with keys 0x01..=N in ascending
//! order, values cycling string "a", int32 -65, uint32 128, int64 -1, uint64 max,
//! float32 0.25, float64 23 (`stress_C63_ascending` is C63). Key K is observed.
//!
//! - `oneshot`: a reused [`Observer`] fed the whole packet (the stream-function pattern).
//! - `get`: [`y3::get`], which builds a fresh observer per call.
//! - `stream7`: the same observer fed 7-byte chunks.
//! - `validate`: whole-packet validation (every header visited).
//! - `floor`: an unchecked scan that trusts every length (no bounds checks, no limits): the
//!   latency floor of walking TLVs, for the ratio the codec is judged against.
#![allow(missing_docs)]
#![allow(unsafe_code)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use y3::{Config, Observer};

#[path = "common/data.rs"]
mod data;
use data::packet;

const CASES: [(u32, u32); 4] = [(3, 2), (16, 8), (32, 16), (63, 32)];

/// The floor: walks one-byte tags and lengths with no checks at all. Only valid for these
/// data sets (every child length below 64, root length in one or two bytes).
fn floor_scan(buf: &[u8], key: u8) -> Option<&[u8]> {
    let root_head = if buf[1] & 0x80 != 0 { 3 } else { 2 };
    let mut i = root_head;
    // SAFETY: benchmark-only; the data sets above are well-formed, so every index read
    // stays inside `buf`.
    unsafe {
        while i < buf.len() {
            let tag = *buf.get_unchecked(i);
            let len = *buf.get_unchecked(i + 1) as usize;
            if tag & 0x3f == key {
                return Some(buf.get_unchecked(i + 2..i + 2 + len));
            }
            i += 2 + len;
        }
    }
    None
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("observe");
    for (n, k) in CASES {
        let buf = packet(n);
        let case = format!("C{n:02}-K{k:02}");
        let path: &[u32] = &[0, k];
        let expected = y3::get(&buf, path).unwrap().unwrap().value().to_vec();
        assert_eq!(floor_scan(&buf, k as u8).unwrap(), expected);
        group.throughput(Throughput::Bytes(buf.len() as u64));

        let mut observer = Observer::new(Config::DEFAULT, &[path]).unwrap();
        group.bench_with_input(BenchmarkId::new("oneshot", &case), &buf, |b, buf| {
            b.iter(|| {
                observer.reset();
                let fed = observer.feed(black_box(buf)).unwrap();
                black_box(fed.observed.unwrap().value().len())
            })
        });
        group.bench_with_input(BenchmarkId::new("get", &case), &buf, |b, buf| {
            b.iter(|| {
                black_box(
                    y3::get(black_box(buf), path)
                        .unwrap()
                        .unwrap()
                        .value()
                        .len(),
                )
            })
        });
        group.bench_with_input(BenchmarkId::new("stream7", &case), &buf, |b, buf| {
            b.iter(|| {
                observer.reset();
                let mut found = 0;
                for chunk in black_box(buf).chunks(7) {
                    observer
                        .feed_each(chunk, |v| found = v.value().len())
                        .unwrap();
                    if found != 0 {
                        break;
                    }
                }
                black_box(found)
            })
        });
        let mut validator = Observer::validator(Config::DEFAULT);
        group.bench_with_input(BenchmarkId::new("validate", &case), &buf, |b, buf| {
            b.iter(|| {
                validator.reset();
                validator.feed(black_box(buf)).unwrap();
                validator.finish().unwrap();
            })
        });
        group.bench_with_input(BenchmarkId::new("floor", &case), &buf, |b, buf| {
            b.iter(|| black_box(floor_scan(black_box(buf), k as u8).unwrap().len()))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
