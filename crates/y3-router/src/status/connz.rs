//! `GET /connz`: every connection (NATS's `/connz`), paged and sorted.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::rates::{rate, Rates};
use super::{unix_seconds, ConnectionSnapshot, Status};

/// Connections listed when no `limit` is given (NATS's default too).
pub(super) const DEFAULT_LIMIT: usize = 1024;

/// `?limit=&offset=&sort=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Query {
    pub limit: usize,
    pub offset: usize,
    pub sort: String,
}

impl Query {
    /// Parses a query string; unknown keys and unparsable numbers are ignored.
    pub fn parse(query: &str) -> Query {
        let mut q = Query {
            limit: DEFAULT_LIMIT,
            offset: 0,
            sort: "id".to_owned(),
        };
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "limit" => q.limit = value.parse().unwrap_or(q.limit),
                "offset" => q.offset = value.parse().unwrap_or(q.offset),
                "sort" if !value.is_empty() => q.sort = value.to_owned(),
                _ => {}
            }
        }
        q
    }
}

fn tag_list(tags: &[u32]) -> Vec<String> {
    tags.iter().map(|t| format!("0x{t:02x}")).collect()
}

fn one(c: &ConnectionSnapshot, rates: &Rates, evictions: u64) -> Value {
    let key = |what: &str| format!("conn {} {what}", c.id);
    let mut v = json!({
        "id": c.id,
        "name": c.name,
        "client_id": c.client_id,
        "kind": c.kind,
        "protocol": c.protocol,
        "transport": c.transport,
        "remote": c.remote.map(|a| a.to_string()),
        "since_seconds": unix_seconds(c.since),
        "uptime_seconds": SystemTime::now().duration_since(c.since).map_or(0.0, |d| d.as_secs_f64()),
        "observed": tag_list(&c.observed),
        "published": tag_list(&c.published),
        "filters": c.filters.iter().map(|(t, f)| json!({"tag": format!("0x{t:02x}"), "filter": f})).collect::<Vec<_>>(),
        "frames_in": c.frames_in,
        "bytes_in": c.bytes_in,
        "frames_out": c.frames_out,
        "bytes_out": c.bytes_out,
        "rate_in": rate(rates, &key("fi")),
        "rate_out": rate(rates, &key("fo")),
        "bytes_rate_in": rate(rates, &key("bi")),
        "bytes_rate_out": rate(rates, &key("bo")),
        "queued_frames": c.queue.frames,
        "queued_bytes": c.queue.bytes,
        "drops": c.queue.dropped,
        "evictions": evictions,
    });
    if let (Some(m), Some(o)) = (&c.mqtt, v.as_object_mut()) {
        o.insert(
            "mqtt".to_owned(),
            json!({
                "version": m.version,
                "username": m.username,
                "subscriptions": m.subscriptions.iter().map(|(f, q)| json!({"filter": f, "qos": q})).collect::<Vec<_>>(),
                "inflight": m.inflight,
                "awaiting_puback": m.awaiting_puback,
            }),
        );
    }
    v
}

/// The `/connz` document.
pub(super) fn connz(s: &Status, q: &Query) -> Value {
    let rates = s.sample();
    let mut all = s.connections.snapshot();
    let r = |c: &ConnectionSnapshot, what: &str| rate(&rates, &format!("conn {} {what}", c.id));
    // Largest first, ties by id; id, name and since ascending.
    match q.sort.as_str() {
        "name" => all.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id))),
        "since" => all.sort_by_key(|c| (c.since, c.id)),
        "frames_in" => all.sort_by_key(|c| (std::cmp::Reverse(c.frames_in), c.id)),
        "frames_out" => all.sort_by_key(|c| (std::cmp::Reverse(c.frames_out), c.id)),
        "bytes_in" => all.sort_by_key(|c| (std::cmp::Reverse(c.bytes_in), c.id)),
        "bytes_out" => all.sort_by_key(|c| (std::cmp::Reverse(c.bytes_out), c.id)),
        "queued" => all.sort_by_key(|c| (std::cmp::Reverse(c.queue.bytes), c.id)),
        "drops" => all.sort_by_key(|c| (std::cmp::Reverse(c.queue.dropped), c.id)),
        "rate_in" | "rate_out" => {
            let what = if q.sort == "rate_in" { "fi" } else { "fo" };
            all.sort_by(|a, b| r(b, what).total_cmp(&r(a, what)).then(a.id.cmp(&b.id)))
        }
        _ => {}
    }
    let evictions = s.metrics.evictions();
    let total = all.len();
    let page: Vec<Value> = all
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|c| {
            let name: String = c.name.chars().take(64).collect();
            let n = evictions
                .iter()
                .find(|(e, _)| *e == name)
                .map_or(0, |e| e.1);
            one(c, &rates, n)
        })
        .collect();
    json!({
        "now_seconds": unix_seconds(SystemTime::now()),
        "total": total,
        "offset": q.offset,
        "limit": q.limit,
        "sort": q.sort,
        "num_connections": page.len(),
        "connections": page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query() {
        assert_eq!(
            Query::parse("limit=2&offset=1&sort=bytes_in&x=y"),
            Query {
                limit: 2,
                offset: 1,
                sort: "bytes_in".into()
            }
        );
        assert_eq!(Query::parse("limit=abc").limit, DEFAULT_LIMIT);
    }
}
