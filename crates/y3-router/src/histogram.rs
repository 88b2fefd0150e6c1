//! The latency histogram without a lock on the hot path: each connection's writer counts
//! into its own [`LocalLatency`] and adds it to the shared [`LatencyHistogram`] once per
//! written batch (a few relaxed atomic adds); a scrape reads the atomics.
//!
//! ```text
//! bucket i (0..19): latency ≤ 10 µs · 2^i      10 µs, 20 µs, 40 µs, ... 2.6 s
//! bucket 19:        everything above (+Inf)
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Finite buckets; one more holds everything above the last bound.
const FINITE: usize = 19;

/// The first bucket's upper bound in nanoseconds.
const FIRST_NS: u64 = 10_000;

/// The bucket of a latency of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    if ns <= FIRST_NS {
        return 0;
    }
    let q = (ns - 1) / FIRST_NS;
    ((64 - q.leading_zeros()) as usize).min(FINITE)
}

/// Counts of one connection's writer, added to the shared histogram per batch.
#[derive(Debug, Default)]
pub(crate) struct LocalLatency {
    buckets: [u64; FINITE + 1],
    sum_ns: u64,
    count: u64,
}

impl LocalLatency {
    /// Counts one latency.
    pub fn observe(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)] += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.count += 1;
    }
}

/// The router-wide histogram: `y3_router_handler_latency_seconds`. Clones share counts
/// (one is registered for scrapes, one is counted into).
#[derive(Debug, Default, Clone)]
pub(crate) struct LatencyHistogram(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    buckets: [AtomicU64; FINITE + 1],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl LatencyHistogram {
    /// Adds `local`'s counts and clears it.
    pub fn merge(&self, local: &mut LocalLatency) {
        if local.count == 0 {
            return;
        }
        for (shared, n) in self.0.buckets.iter().zip(&mut local.buckets) {
            if *n > 0 {
                shared.fetch_add(*n, Ordering::Relaxed);
                *n = 0;
            }
        }
        self.0.sum_ns.fetch_add(local.sum_ns, Ordering::Relaxed);
        self.0.count.fetch_add(local.count, Ordering::Relaxed);
        local.sum_ns = 0;
        local.count = 0;
    }

    /// Latencies observed so far.
    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = self
            .0
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let bound = if i < FINITE {
                    (FIRST_NS << i) as f64 / 1e9
                } else {
                    f64::INFINITY
                };
                (bound, n.load(Ordering::Relaxed))
            })
            .collect();
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, self.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_double_from_ten_microseconds() {
        for (ns, want) in [
            (0, 0),
            (10_000, 0),
            (10_001, 1),
            (20_000, 1),
            (20_001, 2),
            (40_000, 2),
            (FIRST_NS << 18, 18),
            ((FIRST_NS << 18) + 1, 19),
            (u64::MAX, 19),
        ] {
            assert_eq!(bucket(ns), want, "{ns} ns");
        }
    }

    #[test]
    fn local_counts_merge_and_clear() {
        let shared = LatencyHistogram::default();
        let mut local = LocalLatency::default();
        local.observe(Duration::from_micros(5));
        local.observe(Duration::from_micros(30));
        local.observe(Duration::from_secs(100));
        shared.merge(&mut local);
        assert_eq!(local.count, 0);
        shared.merge(&mut local);
        assert_eq!(shared.count(), 3);
        let counts: Vec<u64> = shared
            .0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!((counts[0], counts[2], counts[FINITE]), (1, 1, 1));
    }
}
