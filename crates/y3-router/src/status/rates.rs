//! Per-second rates of counters, over a sampling window shared by every reader.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest window a rate is computed over.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The rates of one window.
#[derive(Debug, Default)]
pub struct RateSet {
    /// Per second, by counter name.
    pub per_second: HashMap<String, f64>,
    /// The window they were measured over, seconds (0: none yet).
    pub window_seconds: f64,
}

/// The rates of the last window (shared).
pub type Rates = Arc<RateSet>;

/// The last sample and the rates it gave.
#[derive(Debug)]
pub struct Sampler {
    /// When the last sample was taken, and its counters (a counter it lacks was 0).
    last: (Instant, HashMap<String, u64>),
    rates: Rates,
}

impl Sampler {
    /// A sampler whose first window starts at `start` with every counter at 0 (a router's
    /// counters start at 0), so the first request already reads a rate.
    pub fn new(start: Instant) -> Sampler {
        Sampler {
            last: (start, HashMap::new()),
            rates: Rates::default(),
        }
    }

    /// Takes `counters` as the sample at `now` if the last one is at least [`WINDOW`] old
    /// (rates: their increase since, per second), and returns the current rates. A window
    /// is as long as the time between requests: a poller every second reads the last
    /// second, a first request the time since the start.
    pub fn sample(&mut self, now: Instant, counters: Vec<(String, u64)>) -> Rates {
        let (at, before) = &self.last;
        let dt = now.saturating_duration_since(*at);
        if dt >= WINDOW {
            let secs = dt.as_secs_f64();
            let per_second = counters
                .iter()
                .map(|(name, n)| {
                    let was = before.get(name).copied().unwrap_or(0);
                    (name.clone(), n.saturating_sub(was) as f64 / secs)
                })
                .collect();
            self.rates = Arc::new(RateSet {
                per_second,
                window_seconds: secs,
            });
            self.last = (now, counters.into_iter().collect());
        }
        self.rates.clone()
    }
}

/// The rate of `name`, 0 before a window has passed.
pub fn rate(rates: &Rates, name: &str) -> f64 {
    rates.per_second.get(name).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_the_window() {
        let t0 = Instant::now();
        let mut s = Sampler::new(t0);
        // Within the first window: no rate yet.
        let r = s.sample(t0 + Duration::from_millis(500), vec![("a".into(), 10)]);
        assert_eq!((rate(&r, "a"), r.window_seconds), (0.0, 0.0));
        // The first window runs from the start, where every counter was 0.
        let r = s.sample(t0 + Duration::from_secs(2), vec![("a".into(), 10)]);
        assert_eq!((rate(&r, "a"), r.window_seconds), (5.0, 2.0));
        // Within the window: the same rates, no new sample.
        let r = s.sample(t0 + Duration::from_millis(2500), vec![("a".into(), 15)]);
        assert_eq!(rate(&r, "a"), 5.0);
        let r = s.sample(t0 + Duration::from_secs(4), vec![("a".into(), 30)]);
        assert_eq!((rate(&r, "a"), r.window_seconds), (10.0, 2.0));
    }
}
