//! The process-wide budget of queued bytes: every subscriber's queue has its own byte
//! limit (`queue.max_bytes`), and all of them together stay within `limits.max_queued_bytes`,
//! however many subscribers there are. A frame that does not fit the budget is dropped
//! (counted as `memory_budget`), under either policy: `block` is lossless within the budget.
//!
//! ```text
//!  outbox push ──fits?──▶ queue ──▶ used += weight        outbox pop / clear ──▶ used -= weight
//!             └─no──▶ drop, counted `memory_budget`
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;

/// Queued bytes, router-wide, against a limit.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    used: AtomicUsize,
    /// 0: no budget.
    limit: AtomicUsize,
    /// `y3_router_queued_bytes`.
    gauge: Gauge,
}

impl Budget {
    /// The gauge to register.
    pub fn gauge(&self) -> Gauge {
        self.gauge.clone()
    }

    /// Sets the limit in bytes (0: none).
    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// Whether `weight` more bytes fit.
    pub fn fits(&self, weight: usize) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        limit == 0 || self.used.load(Ordering::Relaxed) + weight <= limit
    }

    /// Accounts a change of queued bytes from `before` to `after` (one queue's).
    pub fn changed(&self, before: usize, after: usize) {
        if after > before {
            self.used.fetch_add(after - before, Ordering::Relaxed);
            self.gauge.inc_by((after - before) as i64);
        } else if before > after {
            self.used.fetch_sub(before - after, Ordering::Relaxed);
            self.gauge.dec_by((before - after) as i64);
        }
    }

    /// Bytes queued now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_and_limits() {
        let b = Budget::default();
        assert!(b.fits(usize::MAX / 2), "no limit by default");
        b.set_limit(100);
        b.changed(0, 60);
        assert!(b.fits(40) && !b.fits(41));
        b.changed(60, 10);
        assert_eq!((b.used(), b.gauge().get()), (10, 10));
        assert!(b.fits(90));
    }
}
