//! The JSON status endpoints (`/varz`, `/connz`, `/tagz`), the process and build metrics in
//! `/metrics`, and the dashboard's page, against a router carrying real traffic (SDK clients
//! over TCP and QUIC).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{eventually, http_get, options, router, within};
use serde_json::Value;
use y3_transport::sdk::{Sink, Source, Transport};

const TOKEN: &str = "st4tus";

/// [`http_get`] with `Authorization: Bearer TOKEN` when a token is given.
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    http_get(addr, path, token.map(|t| format!("Bearer {t}")).as_deref()).await
}

async fn json(addr: SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path, Some(TOKEN)).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {list:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_show_connections_tags_rates_and_the_process() {
    // What the `y3` binary sets from its build script.
    y3_router::status::set_git_commit("0123456789ab");
    let router = router(|c| {
        c.listen.metrics = "127.0.0.1:0".into();
        c.listen.metrics_token = TOKEN.into();
    })
    .await;
    let addr = router.metrics_addr().unwrap();

    // The token guards the JSON endpoints as it guards /metrics; the page is open.
    for path in ["/varz", "/connz", "/tagz", "/metrics"] {
        assert_eq!(get(addr, path, None).await.0, 401, "{path}");
        assert_eq!(get(addr, path, Some("wrong")).await.0, 401, "{path}");
    }
    let (status, page) = get(addr, "/dashboard", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>y3 router</title>") && page.contains("/connz"));
    assert_eq!(get(addr, "/", None).await.0, 200);

    let mut sink = Sink::connect(options(&router, Transport::Quic, "status-sink"), &[0x10])
        .await
        .unwrap();
    let mut source = Source::connect(options(&router, Transport::Tcp, "status-source"))
        .await
        .unwrap();
    let first = json(addr, "/varz").await;
    for i in 0..50u32 {
        source.send(0x10, i.to_be_bytes().to_vec()).await.unwrap();
    }
    source.flush().await.unwrap();
    for _ in 0..50 {
        within("a frame", sink.recv()).await.unwrap().unwrap();
    }
    // A full rate window later, with traffic in it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for i in 0..50u32 {
        source.send(0x10, i.to_be_bytes().to_vec()).await.unwrap();
    }
    source.flush().await.unwrap();
    for _ in 0..50 {
        within("a frame", sink.recv()).await.unwrap().unwrap();
    }

    let varz = json(addr, "/varz").await;
    assert_eq!(varz["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(varz["git_commit"], "0123456789ab");
    assert!(varz["uptime_seconds"].as_f64().unwrap() > 1.0, "{varz:#}");
    assert!(
        varz["process"]["rss_bytes"].as_u64().unwrap() > 1 << 20,
        "{varz:#}"
    );
    assert!(varz["process"]["open_fds"].as_u64().unwrap() >= 3);
    assert_eq!(varz["frames_in"], 100);
    assert_eq!(varz["frames_out"], 100);
    assert_eq!(varz["bytes_in"], 400);
    assert_eq!(varz["connections"], 2);
    assert_eq!(varz["total_connections"], 2);
    assert!(
        varz["rates"]["frames_in"].as_f64().unwrap() > 0.0,
        "{first:#}\n{varz:#}"
    );
    assert_eq!(varz["ledger"]["deliveries"], 100);
    assert_eq!(varz["ledger"]["unaccounted"], 0);
    assert_eq!(varz["dropped"]["queue_full"], 0);
    assert_eq!(varz["listen"]["metrics"], addr.to_string());

    let connz = json(addr, "/connz").await;
    assert_eq!(connz["total"], 2);
    let conns = &connz["connections"];
    let src = by_name(conns, "status-source");
    assert_eq!(src["kind"], "source");
    assert_eq!(src["protocol"], "y3");
    assert_eq!(src["transport"], "tcp");
    assert_eq!(src["frames_in"], 100);
    assert_eq!(src["bytes_in"], 400);
    assert_eq!(src["published"], serde_json::json!(["0x10"]));
    assert!(src["remote"].as_str().unwrap().starts_with("127.0.0.1:"));
    let snk = by_name(conns, "status-sink");
    assert_eq!(snk["kind"], "sink");
    assert_eq!(snk["transport"], "quic");
    assert_eq!(snk["observed"], serde_json::json!(["0x10"]));
    assert_eq!(snk["frames_out"], 100);
    assert_eq!(snk["drops"], 0);
    assert_eq!(snk["queued_frames"], 0);

    // Paging and sorting, as NATS's ?limit=&offset=&sort=.
    let page = json(addr, "/connz?sort=frames_in&limit=1").await;
    assert_eq!(
        (page["total"].clone(), page["num_connections"].clone()),
        (2.into(), 1.into())
    );
    assert_eq!(page["connections"][0]["name"], "status-source");
    let page = json(addr, "/connz?sort=name&limit=1&offset=1").await;
    assert_eq!(page["connections"][0]["name"], "status-source");

    let tagz = json(addr, "/tagz").await;
    let tag = tagz["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "0x10")
        .unwrap_or_else(|| panic!("{tagz:#}"));
    assert_eq!(tag["frames_in"], 100);
    assert_eq!(tag["frames_out"], 100);
    by_name(&tag["publishers"], "status-source");
    by_name(&tag["subscribers"], "status-sink");

    let (_, metrics) = get(addr, "/metrics", Some(TOKEN)).await;
    for needle in [
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "process_start_time_seconds ",
        &format!(
            "y3_build_info{{version=\"{}\",git=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            varz["git_commit"].as_str().unwrap()
        ),
        "y3_router_frames_in_total{tag=\"0x10\"} 100",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from\n{metrics}");
    }

    // A closed connection leaves the list.
    source.close().await.unwrap();
    let mut left = None;
    within("the source to leave /connz", async {
        loop {
            let connz = json(addr, "/connz").await;
            if connz["total"] == 1 {
                left = Some(connz);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(left.unwrap()["connections"][0]["name"], "status-sink");
    eventually("stats settle", || router.stats().unaccounted() == 0).await;
    router.shutdown().await;
}
