//! Per-second rates of counters, over a sampling window shared by every reader.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest window a rate is computed over.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Rates by counter name (per second); a name not present has no rate yet.
pub type Rates = Arc<HashMap<String, f64>>;

/// The last sample and the rates it gave.
#[derive(Debug, Default)]
pub struct Sampler {
    last: Option<(Instant, HashMap<String, u64>)>,
    rates: Rates,
}

impl Sampler {
    /// Takes `counters` as the sample at `now` if the last one is at least [`WINDOW`] old
    /// (rates: their increase since, per second), and returns the current rates.
    pub fn sample(&mut self, now: Instant, counters: Vec<(String, u64)>) -> Rates {
        match &self.last {
            Some((at, _)) if now.saturating_duration_since(*at) < WINDOW => {}
            Some((at, before)) => {
                let dt = now.saturating_duration_since(*at).as_secs_f64();
                let rates = counters
                    .iter()
                    .map(|(name, n)| {
                        let was = before.get(name).copied().unwrap_or(0);
                        (name.clone(), n.saturating_sub(was) as f64 / dt)
                    })
                    .collect();
                self.rates = Arc::new(rates);
                self.last = Some((now, counters.into_iter().collect()));
            }
            None => self.last = Some((now, counters.into_iter().collect())),
        }
        self.rates.clone()
    }
}

/// The rate of `name`, 0 before a window has passed.
pub fn rate(rates: &Rates, name: &str) -> f64 {
    rates.get(name).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_the_window() {
        let mut s = Sampler::default();
        let t0 = Instant::now();
        let r = s.sample(t0, vec![("a".into(), 10)]);
        assert_eq!(rate(&r, "a"), 0.0);
        // Within the window: the same (no) rate, no new sample.
        let r = s.sample(t0 + Duration::from_millis(500), vec![("a".into(), 15)]);
        assert_eq!(rate(&r, "a"), 0.0);
        let r = s.sample(t0 + Duration::from_secs(2), vec![("a".into(), 30)]);
        assert_eq!(rate(&r, "a"), 10.0);
    }
}
