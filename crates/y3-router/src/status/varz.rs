//! `GET /varz`: the server at a glance (NATS's `/varz`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{json, Value};

use super::rates::rate;
use super::{git_commit, unix_seconds, ProcessStats, Status, VERSION};

/// The `/varz` document.
pub(super) fn varz(s: &Status) -> Value {
    let stats = s.metrics.stats();
    let rates = s.sample();
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    for (_, [_, bi, _, bo, _]) in s.metrics.tag_totals() {
        bytes_in += bi;
        bytes_out += bo;
    }
    let sorted = |m: &std::collections::HashMap<&'static str, u64>| -> BTreeMap<&'static str, u64> {
        m.iter().map(|(k, v)| (*k, *v)).collect()
    };
    let addr = |a: Option<std::net::SocketAddr>| a.map(|a| a.to_string());
    let process = ProcessStats::read().map(|p| {
        json!({
            "pid": std::process::id(),
            "rss_bytes": p.rss_bytes,
            "cpu_seconds": p.cpu_seconds,
            "open_fds": p.open_fds,
            "start_time_seconds": p.start_time_seconds,
        })
    });
    let mesh: Vec<Value> = s
        .config
        .mesh
        .downstream
        .iter()
        .map(|d| {
            let st = s.metrics.downstream_stats(&d.name).unwrap_or_default();
            json!({
                "name": d.name,
                "addr": d.addr,
                "connected": st.connected,
                "connects": st.connects,
                "frames": st.frames,
                "dropped": st.dropped,
            })
        })
        .collect();
    let federation = s.config.federation.enabled().then(|| {
        let f = &s.metrics.federation;
        json!({
            "name": s.config.federation.name,
            "urls": s.config.federation.urls,
            "connected": f.connected.get() > 0,
            "published": f.published.get(),
            "received": f.received.get(),
            "held": f.held.get(),
            "duplicates": f.duplicates.get(),
            "subscriptions": f.subscriptions.get(),
            "remote_interest": f.remote_interest.get(),
        })
    });
    let evictions: BTreeMap<String, u64> = s.metrics.evictions().into_iter().collect();
    json!({
        "server": "y3",
        "server_name": s.config.mesh.name,
        "version": VERSION,
        "git_commit": git_commit(),
        "start_time_seconds": unix_seconds(s.started),
        "now_seconds": unix_seconds(SystemTime::now()),
        "uptime_seconds": s.started_at.elapsed().as_secs_f64(),
        "process": process,
        "listen": {
            "tcp": addr(s.addrs[0]),
            "quic": addr(s.addrs[1]),
            "metrics": addr(s.addrs[2]),
        },
        "queue_policy": s.config.queue.policy.name(),
        "connections": stats.connections,
        "total_connections": s.connections.total(),
        "frames_in": stats.frames_in,
        "frames_out": stats.frames_out,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "rates": {
            "frames_in": rate(&rates, "frames_in"),
            "frames_out": rate(&rates, "frames_out"),
            "drops": rate(&rates, "drops"),
            "window_seconds": rates.window_seconds,
        },
        "queued": stats.queued,
        "queued_bytes": stats.queued_bytes,
        "max_queued_bytes": s.config.limits.max_queued_bytes,
        "dropped": sorted(&stats.dropped),
        "rejected": sorted(&stats.rejected),
        "protocol_errors": sorted(&stats.protocol_errors),
        "skipped_too_long": s.metrics.skipped("too_long"),
        "evictions": evictions,
        "self_loops": stats.self_loops,
        "ledger": {
            "deliveries": stats.deliveries,
            "written": stats.frames_out,
            "forwarded": stats.forwarded,
            "dropped": stats.total_drops(),
            "queued": stats.queued,
            "unaccounted": stats.unaccounted(),
        },
        "mesh": mesh,
        "federation": federation,
    })
}
