//! Evaluating a content filter on the observe bench's data sets (C16-K08, C63-K32: a node
//! 0x00 with keys 0x01..=N, values cycling string, int32, uint32, int64, uint64, float32,
//! float64): one comparison, two comparisons, and the issue's target case (two comparisons
//! on C63-K32, ≤ 100 ns per frame).
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use y3::Filter;

#[path = "common/data.rs"]
mod data;
use data::packet;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("filter");
    // Key K's value and a float32 near it (key 6 in each cycle of 7 is float32 0.25).
    let cases = [
        (16u32, 8u32, r#"0x00/0x08 == "a""#, "0x00/0x06:f32 < 1"),
        (63, 32, "0x00/0x20 == -1", "0x00/0x22:f32 < 1"),
    ];
    for (n, k, first, second) in cases {
        let buf = packet(n);
        group.throughput(Throughput::Bytes(buf.len() as u64));
        let filters = [
            ("one", first.to_owned()),
            ("two", format!("{first} and {second}")),
        ];
        let path = [0, k];
        group.bench_with_input(
            BenchmarkId::new("get", format!("C{n}-K{k}")),
            &buf,
            |b, buf| b.iter(|| y3::get(black_box(buf), &path)),
        );
        for (name, text) in filters {
            let mut filter = Filter::parse(&text).unwrap();
            assert!(filter.evaluate(&buf).matches(), "{text}");
            group.bench_with_input(
                BenchmarkId::new(name, format!("C{n}-K{k}")),
                &buf,
                |b, buf| b.iter(|| filter.evaluate(black_box(buf))),
            );
        }
    }
    group.finish();
    c.bench_function("filter/parse_two", |b| {
        b.iter(|| Filter::parse(black_box("0x00/0x20 == -1 and 0x00/0x22:f32 < 1")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
