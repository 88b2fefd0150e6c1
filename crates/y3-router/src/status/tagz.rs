//! `GET /tagz`: every tag seen or observed: publishers, subscribers, counts, drops, rates,
//! filters.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::rates::rate;
use super::Status;

/// The `/tagz` document.
pub(super) fn tagz(s: &Status) -> Value {
    let rates = s.sample();
    let conns = s.connections.snapshot();
    // label → (totals, publishers, subscribers, filters → subscribers)
    #[derive(Default)]
    struct Tag {
        totals: [u64; 5],
        publishers: Vec<Value>,
        subscribers: Vec<Value>,
        filters: BTreeMap<String, (u32, u64)>,
    }
    let mut tags: BTreeMap<String, Tag> = BTreeMap::new();
    let label = |t: u32| format!("0x{t:02x}");
    for (tag, totals) in s.metrics.tag_totals() {
        tags.entry(tag).or_default().totals = totals;
    }
    for c in &conns {
        let who = json!({"id": c.id, "name": c.name, "kind": c.kind});
        for &t in &c.published {
            tags.entry(label(t))
                .or_default()
                .publishers
                .push(who.clone());
        }
        for &t in &c.observed {
            tags.entry(label(t))
                .or_default()
                .subscribers
                .push(who.clone());
        }
        for (t, f) in &c.filters {
            let entry = tags.entry(label(*t)).or_default();
            entry.filters.entry(f.clone()).or_insert((*t, 0)).1 += 1;
        }
    }
    let list: Vec<Value> = tags
        .into_iter()
        .map(|(name, t)| {
            let key = |what: &str| format!("tag {name} {what}");
            let filters: Vec<Value> = t
                .filters
                .iter()
                .map(|(text, &(tag, subscribers))| {
                    let st = s.metrics.filter_stats(tag, text).unwrap_or_default();
                    json!({
                        "filter": text,
                        "subscribers": subscribers,
                        "matched": st.matched,
                        "withheld": st.withheld,
                        "malformed": st.malformed,
                    })
                })
                .collect();
            json!({
                "tag": name,
                "publishers": t.publishers,
                "subscribers": t.subscribers,
                "frames_in": t.totals[0],
                "bytes_in": t.totals[1],
                "frames_out": t.totals[2],
                "bytes_out": t.totals[3],
                "dropped": t.totals[4],
                "rate_in": rate(&rates, &key("fi")),
                "rate_out": rate(&rates, &key("fo")),
                "bytes_rate_in": rate(&rates, &key("bi")),
                "bytes_rate_out": rate(&rates, &key("bo")),
                "filters": filters,
            })
        })
        .collect();
    json!({ "num_tags": list.len(), "tags": list })
}
