//! The router's final metrics (Prometheus text, `y3 serve --final-metrics`), read into the
//! totals the ledger needs.
//!
//! ```text
//! y3_router_frames_in_total{tag="0x10"} 60000     -> frames_in[0x10]
//! y3_router_dropped_total{reason="no_subscriber"} 3 -> dropped["no_subscriber"]
//! y3_router_deliveries_total 120000                -> deliveries
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

/// One router lifetime's totals, from its final metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Data frames read, by tag label (`0x10`).
    pub frames_in: BTreeMap<String, u64>,
    /// Data frames written to subscribers, by tag label.
    pub frames_out: BTreeMap<String, u64>,
    /// Drops by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Refused handshakes by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Malformed input by kind.
    pub protocol_errors: BTreeMap<String, u64>,
    /// Slow consumers evicted, by client name.
    pub evictions: BTreeMap<String, u64>,
    /// Deliveries owed by routing.
    pub deliveries: u64,
    /// Frames still queued at exit.
    pub queued: u64,
    /// Frames written to downstream zippers.
    pub forwarded: u64,
}

impl Totals {
    /// Reads the Prometheus text format; unknown series are ignored.
    pub fn parse(text: &str) -> Totals {
        let mut t = Totals::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let value = value as u64;
            let (name, label) = match series.split_once('{') {
                Some((name, rest)) => (name, label_value(rest)),
                None => (series, None),
            };
            let into = match name {
                "y3_router_frames_in_total" => &mut t.frames_in,
                "y3_router_frames_out_total" => &mut t.frames_out,
                "y3_router_dropped_total" => &mut t.dropped,
                "y3_router_rejected_total" => &mut t.rejected,
                "y3_router_protocol_errors_total" => &mut t.protocol_errors,
                "y3_router_evictions_total" => &mut t.evictions,
                "y3_router_deliveries_total" => {
                    t.deliveries = value;
                    continue;
                }
                "y3_router_queue_depth" => {
                    t.queued = value;
                    continue;
                }
                "y3_router_mesh_frames_total" => {
                    t.forwarded += value;
                    continue;
                }
                _ => continue,
            };
            if let Some(label) = label {
                *into.entry(label).or_default() += value;
            }
        }
        t
    }

    /// Deliveries owed that were neither written, dropped and counted, nor still queued.
    pub fn unaccounted(&self) -> i64 {
        let out: u64 = self.frames_out.values().sum();
        let dropped: u64 = self.dropped.values().sum();
        self.deliveries as i64 - (out + dropped + self.queued + self.forwarded) as i64
    }

    /// Frames read on `tag`.
    pub fn tag_in(&self, tag: u32) -> u64 {
        self.frames_in.get(&tag_label(tag)).copied().unwrap_or(0)
    }

    /// Frames written on `tag`.
    pub fn tag_out(&self, tag: u32) -> u64 {
        self.frames_out.get(&tag_label(tag)).copied().unwrap_or(0)
    }
}

/// The router's label for a tag.
fn tag_label(tag: u32) -> String {
    format!("0x{tag:02x}")
}

/// The value of the first label in `k="v",...}`.
fn label_value(rest: &str) -> Option<String> {
    let (_, after) = rest.split_once("=\"")?;
    let (value, _) = after.split_once('"')?;
    Some(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_series_the_ledger_needs() {
        let text = "# HELP y3_router_deliveries Deliveries.\n\
                    # TYPE y3_router_deliveries counter\n\
                    y3_router_deliveries_total 10\n\
                    y3_router_frames_in_total{tag=\"0x10\"} 9\n\
                    y3_router_frames_out_total{tag=\"0x10\"} 7\n\
                    y3_router_dropped_total{reason=\"no_subscriber\"} 2\n\
                    y3_router_dropped_total{reason=\"loop\"} 0\n\
                    y3_router_queue_depth 1\n\
                    y3_router_evictions_total{client=\"slow\"} 3\n";
        let t = Totals::parse(text);
        assert_eq!(t.deliveries, 10);
        assert_eq!((t.tag_in(0x10), t.tag_out(0x10), t.tag_in(0x11)), (9, 7, 0));
        assert_eq!(t.dropped["no_subscriber"], 2);
        assert_eq!(t.evictions["slow"], 3);
        assert_eq!(t.unaccounted(), 0);
    }
}
