//! Devices over MQTT (issue 31), against real MQTT software: Debian's `mosquitto_pub` and
//! `mosquitto_sub` talk to the router's `[mqtt]` listener, y3 clients see the frames. A
//! missing tool fails the test (`scripts/test-mqtt.sh` installs them).
//!
//! Proven here: QoS 0 and 1 with exact counts, both protocol versions, the topic in
//! metadata `mqtt-topic`, wildcard subscriptions, a wrong password refused and counted, an
//! unmapped topic refused with its reason (0x90 under MQTT 5) and counted, persistent
//! sessions delivering what arrived while the subscriber was away, QoS 2 and hostile
//! packets closed and counted with every other client served on.

mod common;

use std::process::Stdio;
use std::time::Duration;

// A series of the router's Prometheus text (labels included), 0 when absent.
use common::series as metric;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use y3_router::config::TokenConfig;
use y3_router::mqtt::{MqttConfig, PublishMap, SubscribeMap};
use y3_router::{Router, RouterConfig, RouterHandle};
use y3_transport::sdk::{ClientOptions, Sink, Source};

/// Bounds generous enough for a loaded machine.
const WAIT: Duration = Duration::from_secs(30);

fn config() -> RouterConfig {
    let mut config = RouterConfig::ephemeral();
    config.auth.token = "main".into();
    config.auth.tokens = vec![TokenConfig {
        name: "sensors".into(),
        token: "sensor-key".into(),
        publish: Some(vec![0x10]),
        observe: Some(Vec::new()),
        ..TokenConfig::default()
    }];
    config.mqtt = MqttConfig {
        listen: "127.0.0.1:0".into(),
        publish: vec![
            PublishMap {
                topic: "sensors/+/noise".into(),
                tag: 0x10,
            },
            PublishMap {
                topic: "alerts/#".into(),
                tag: 0x20,
            },
        ],
        subscribe: vec![
            SubscribeMap {
                tag: 0x10,
                topic: "sensors/+/noise".into(),
            },
            SubscribeMap {
                tag: 0x20,
                topic: "alerts/noise".into(),
            },
        ],
        ..MqttConfig::default()
    };
    config
}

async fn start() -> RouterHandle {
    Router::start(config()).await.expect("router starts")
}

fn tool(name: &str) -> Command {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{name} is missing: install Debian's mosquitto-clients (scripts/test-mqtt.sh does)"
    );
    let mut c = Command::new(name);
    c.kill_on_drop(true);
    c
}

fn port(router: &RouterHandle) -> String {
    router.mqtt_addr().unwrap().port().to_string()
}

/// `mosquitto_pub` of each line of `lines` on `topic`, as one connection; its exit status
/// and stderr.
async fn publish(
    router: &RouterHandle,
    extra: &[&str],
    topic: &str,
    lines: &[String],
) -> (bool, String) {
    let mut child = tool("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port(router), "-t", topic, "-l"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let body = lines.join("\n") + "\n";
    stdin.write_all(body.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("mosquitto_pub ends")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`publish`], which must succeed (every message PUBACKed at QoS 1).
async fn published(router: &RouterHandle, extra: &[&str], topic: &str, lines: &[String]) {
    let (ok, err) = publish(router, extra, topic, lines).await;
    assert!(ok, "{err}");
}

/// `mosquitto_sub`'s options for the persistent session `id` (no clean session, QoS 1).
fn persistent_session(id: &str) -> [&str; 9] {
    ["-q", "1", "-c", "-i", id, "-u", "tester", "-P", "main"]
}

/// The persistent session of `options` subscribes to `sensors/+/noise`, gets one message
/// (`before`, from a sensor) and leaves: what arrives from now on is kept for it.
async fn subscribe_once_and_leave(router: &RouterHandle, options: &[&str]) {
    let first = subscriber(router, options, "sensors/+/noise", 1).await;
    published(router, SENSOR_QOS1, "sensors/a/noise", &["before".into()]).await;
    assert_eq!(lines_of(first).await, ["sensors/a/noise before"]);
}

/// A sensor's credentials (it may publish 0x10 only), at QoS 1.
const SENSOR_QOS1: &[&str] = &["-q", "1", "-u", "sensor", "-P", "sensor-key"];

/// The main token's credentials, at QoS 1.
const TESTER_QOS1: &[&str] = &["-q", "1", "-u", "tester", "-P", "main"];

/// `mosquitto_pub -m x` of one message on `topic`: exit status and all it printed.
async fn publish_one(
    router: &RouterHandle,
    extra: &[&str],
    version: &str,
    topic: &str,
) -> (bool, String) {
    let out = tool("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port(router),
            "-t",
            topic,
            "-m",
            "x",
            "-V",
            version,
        ])
        .args(extra)
        .output();
    let out = tokio::time::timeout(WAIT, out)
        .await
        .expect("mosquitto_pub ends")
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Spawns `mosquitto_sub` for `count` messages on `filter` (60 s at most), printing
/// `topic payload` lines; [`subscriber`] also waits until it is subscribed.
fn spawn_sub(
    router: &RouterHandle,
    extra: &[&str],
    filter: &str,
    count: usize,
) -> tokio::process::Child {
    tool("mosquitto_sub")
        .args(["-h", "127.0.0.1", "-p", &port(router), "-t", filter, "-v"])
        .args(["-C", &count.to_string(), "-W", "60"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts `mosquitto_sub` for `count` messages, printing `topic payload` lines; waits
/// until it is subscribed (its session appears in the router's metrics).
async fn subscriber(
    router: &RouterHandle,
    extra: &[&str],
    filter: &str,
    count: usize,
) -> tokio::process::Child {
    accepted(router, || spawn_sub(router, extra, filter, count)).await
}

/// Runs `spawn` (a client that connects and subscribes) and waits until the router has
/// accepted it (its metrics count one more MQTT connection), then gives its SUBSCRIBE,
/// which follows CONNECT at once, time to reach the downlink.
async fn accepted(
    router: &RouterHandle,
    spawn: impl FnOnce() -> tokio::process::Child,
) -> tokio::process::Child {
    let before = metric(router, "y3_router_mqtt_accepted_total");
    let child = spawn();
    wait_for(|| metric(router, "y3_router_mqtt_accepted_total") > before).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    child
}

async fn lines_of(child: tokio::process::Child) -> Vec<String> {
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("mosquitto_sub ends")
        .unwrap();
    assert!(
        out.status.success(),
        "mosquitto_sub failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_for(mut ok: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + WAIT;
    while !ok() {
        assert!(tokio::time::Instant::now() < until, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensors_reach_y3_sinks_and_mqtt_subscribers_exactly() {
    let router = start().await;
    let options = ClientOptions::new(router.tcp_addr().unwrap()).token("main");
    let mut sink = Sink::connect(options, &[0x10]).await.unwrap();
    let n = 200;
    for (version, qos) in [("mqttv311", "0"), ("mqttv311", "1"), ("mqttv5", "1")] {
        let sub = subscriber(
            &router,
            &["-q", "1", "-V", version, "-u", "tester", "-P", "main"],
            "sensors/#",
            n,
        )
        .await;
        let lines = numbered(&format!("{version}-q{qos}"), n);
        let (ok, err) = publish(
            &router,
            &["-q", qos, "-V", version, "-u", "dev-a", "-P", "sensor-key"],
            "sensors/a/noise",
            &lines,
        )
        .await;
        assert!(ok, "mosquitto_pub failed: {err}");
        let got = lines_of(sub).await;
        let want: Vec<String> = lines
            .iter()
            .map(|l| format!("sensors/a/noise {l}"))
            .collect();
        assert_eq!(
            got, want,
            "{version} QoS {qos}: every message once, in order"
        );
        for line in &lines {
            let data = tokio::time::timeout(WAIT, sink.recv())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(data.payload, line.as_bytes());
            assert_eq!(
                data.metadata.get("mqtt-topic").unwrap(),
                Some("sensors/a/noise")
            );
        }
    }
    assert_eq!(
        metric(&router, "y3_router_mqtt_published_total"),
        3 * n as u64
    );
    common::ledger(&router).await;
    let mqtt = router.stats().mqtt;
    // Every PUBLISH routed; every QoS 1 one PUBACKed as stored; every message for the
    // subscribers delivered (3 runs of n, each to one subscriber).
    assert_eq!(
        (mqtt.received, mqtt.routed, mqtt.refused),
        (3 * n as u64, 3 * n as u64, 0)
    );
    assert_eq!(
        (mqtt.qos1_routed, mqtt.acked, mqtt.awaiting),
        (2 * n as u64, 2 * n as u64, 0)
    );
    assert_eq!(
        metric(&router, "y3_router_mqtt_pubacked_total{reason=\"stored\"}"),
        2 * n as u64
    );
    assert_eq!(
        (mqtt.offered, mqtt.delivered, mqtt.held),
        (3 * n as u64, 3 * n as u64, 0)
    );
    let stats = router.shutdown().await;
    assert_eq!(stats.unaccounted(), 0, "{stats:?}");
    common::ledger_of(&stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcards_select_topics_and_y3_frames_reach_mqtt() {
    let mut config = config();
    config.listen.metrics = "127.0.0.1:0".into();
    let router = Router::start(config).await.unwrap();
    let alerts = subscriber(&router, TESTER_QOS1, "alerts/+", 3).await;
    let one_sensor = subscriber(
        &router,
        &["-q", "0", "-u", "tester", "-P", "main"],
        "sensors/b/+",
        2,
    )
    .await;
    // What /connz lists for them.
    let conns = router.mqtt_connections();
    assert_eq!(conns.len(), 2, "{conns:?}");
    assert!(conns.iter().any(|c| c.name == "tester"
        && c.remote.ip().is_loopback()
        && c.subscriptions == [("alerts/+".to_string(), 1)]));
    assert!(conns
        .iter()
        .any(|c| c.subscriptions == [("sensors/b/+".to_string(), 0)]));
    // /connz lists them under their own kind, with their sessions; the router's
    // connection gauge counts them under client_type="mqtt".
    let (code, body) = common::http_get(router.metrics_addr().unwrap(), "/connz", None).await;
    assert_eq!(code, 200, "{body}");
    let connz: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mqtt: Vec<&serde_json::Value> = connz["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "mqtt")
        .collect();
    assert_eq!(mqtt.len(), 2, "{body}");
    let alerts_conn = mqtt
        .iter()
        .find(|c| c["mqtt"]["subscriptions"][0]["filter"] == "alerts/+")
        .expect("the alerts subscriber");
    assert_eq!(alerts_conn["protocol"], "mqtt");
    assert_eq!(alerts_conn["transport"], "tcp");
    assert_eq!(alerts_conn["name"], "tester");
    assert_eq!(alerts_conn["mqtt"]["username"], "tester");
    assert_eq!(alerts_conn["mqtt"]["subscriptions"][0]["qos"], 1);
    assert_eq!(alerts_conn["mqtt"]["inflight"], 0);
    assert!(alerts_conn["remote"]
        .as_str()
        .unwrap()
        .starts_with("127.0.0.1:"));
    assert!(alerts_conn["client_id"]
        .as_str()
        .is_some_and(|id| !id.is_empty()));
    assert_eq!(
        metric(&router, "y3_router_connections{client_type=\"mqtt\"}"),
        2
    );
    // Frames of a y3 source reach MQTT subscribers under the mapped topic.
    let options = ClientOptions::new(router.tcp_addr().unwrap()).token("main");
    let mut source = Source::connect(options).await.unwrap();
    for i in 0..3 {
        source.send(0x20, format!("alert-{i}")).await.unwrap();
    }
    source.flush().await.unwrap();
    for s in ["a", "b", "c", "b"] {
        published(
            &router,
            SENSOR_QOS1,
            &format!("sensors/{s}/noise"),
            &[format!("from-{s}")],
        )
        .await;
    }
    assert_eq!(
        lines_of(alerts).await,
        [
            "alerts/noise alert-0",
            "alerts/noise alert-1",
            "alerts/noise alert-2"
        ]
    );
    assert_eq!(
        lines_of(one_sensor).await,
        ["sensors/b/noise from-b", "sensors/b/noise from-b"]
    );
    source.close().await.unwrap();
    common::ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_and_unmapped_topics_are_refused_and_counted() {
    let router = start().await;
    let line = vec!["x".to_owned()];
    for version in ["mqttv311", "mqttv5"] {
        let (ok, err) = publish(
            &router,
            &["-V", version, "-u", "tester", "-P", "wrong"],
            "sensors/a/noise",
            &line,
        )
        .await;
        assert!(!ok, "a wrong password is refused ({version})");
        assert!(
            err.to_lowercase().contains("password") || err.to_lowercase().contains("auth"),
            "{err}"
        );
    }
    assert_eq!(
        metric(
            &router,
            "y3_router_mqtt_refused_total{reason=\"bad_credentials\"}"
        ),
        2
    );
    // sensor-key may publish 0x10 only; alerts map to 0x20. MQTT 3.1.1 has no negative
    // PUBACK: the connection is closed. MQTT 5 gets PUBACK with the reason, and goes on.
    let sensor = ["-q", "1", "-u", "sensor", "-P", "sensor-key", "-d"];
    let main = ["-q", "1", "-u", "tester", "-P", "main", "-d"];
    for (version, expect) in [
        ("mqttv311", None),
        ("mqttv5", Some(("Not authorized", "Topic Name invalid"))),
    ] {
        let forbidden = publish_one(&router, &sensor, version, "alerts/x").await;
        let unmapped = publish_one(&router, &main, version, "elsewhere/x").await;
        match expect {
            None => {
                assert!(!forbidden.0, "closed: {}", forbidden.1);
                assert!(!unmapped.0, "closed: {}", unmapped.1);
            }
            Some((no, invalid)) => {
                assert!(forbidden.1.contains(no), "{}", forbidden.1);
                assert!(unmapped.1.contains(invalid), "{}", unmapped.1);
            }
        }
    }
    assert_eq!(
        metric(
            &router,
            "y3_router_mqtt_publish_refused_total{reason=\"unmapped_topic\"}"
        ),
        2
    );
    assert_eq!(
        metric(
            &router,
            "y3_router_mqtt_publish_refused_total{reason=\"not_authorized\"}"
        ),
        2
    );
    assert_eq!(metric(&router, "y3_router_mqtt_published_total"), 0);
    common::ledger(&router).await;
    router.shutdown().await;
}

/// A publish the router's own rules drop (its metadata over `limits.max_metadata_bytes`:
/// a long topic) or that nobody takes: counted where a socket client's frame is, and a
/// QoS 1 one answered by its MQTT 5 PUBACK code, the connection served on: 0x83 for the
/// refusal, 0x10 "no matching subscribers" (a success, as Mosquitto answers it) for the
/// one nobody takes, 0 once stored. MQTT 3.1.1 has no code: a PUBACK all the same. The
/// direct way in runs the read loop's drop arms, so the sender hears of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_drops_reach_the_sender_as_their_puback_codes() {
    let mut config = config();
    config.limits.max_metadata_bytes = 256;
    let router = Router::start(config).await.expect("router starts");
    let long = format!("sensors/{}/noise", "a".repeat(300));
    let main = ["-q", "1", "-u", "tester", "-P", "main", "-d"];
    // Over the metadata limit: refused by the router, the connection goes on (QoS 0 too).
    let (ok, text) = publish_one(&router, &main, "mqttv5", &long).await;
    assert!(ok && text.contains("RC:131"), "{text}");
    let (ok, text) = publish_one(&router, &["-u", "tester", "-P", "main"], "mqttv5", &long).await;
    assert!(ok, "{text}");
    // The QoS 0 client exits once it has written: the router may count it a moment later.
    wait_for(|| router.metrics().skipped("metadata_too_large") >= 2).await;
    assert_eq!(router.metrics().skipped("metadata_too_large"), 2);
    // Within it, and nobody observes 0x10: no_subscriber, MQTT 5's success code 0x10
    // (mosquitto_pub exits 0 on it); MQTT 3.1.1: PUBACK.
    let (ok, text) = publish_one(&router, &main, "mqttv5", "sensors/a/noise").await;
    assert!(ok && text.contains("RC:16"), "{text}");
    let (ok, text) = publish_one(&router, &main, "mqttv311", "sensors/a/noise").await;
    assert!(ok && text.contains("received PUBACK"), "{text}");
    assert_eq!(
        metric(&router, "y3_router_dropped_total{reason=\"no_subscriber\"}"),
        2
    );
    // With a subscriber, stored: PUBACK 0.
    let sub = subscriber(
        &router,
        &["-u", "tester", "-P", "main"],
        "sensors/+/noise",
        1,
    )
    .await;
    let (ok, text) = publish_one(&router, &main, "mqttv5", "sensors/b/noise").await;
    assert!(ok && text.contains("RC:0"), "{text}");
    assert_eq!(lines_of(sub).await, ["sensors/b/noise x"]);
    let pubacked = |reason: &str| {
        metric(
            &router,
            &format!("y3_router_mqtt_pubacked_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(pubacked("refused_by_router"), 1);
    assert_eq!(pubacked("no_subscriber"), 2);
    assert_eq!(pubacked("stored"), 1);
    assert_eq!(metric(&router, "y3_router_mqtt_published_total"), 5);
    common::ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_sessions_get_what_arrived_while_away() {
    let router = start().await;
    let persistent = persistent_session("dashboard-1");
    subscribe_once_and_leave(&router, &persistent).await;
    let away = numbered("away", 50);
    published(&router, SENSOR_QOS1, "sensors/a/noise", &away).await;
    // Back: the same client id, no clean session; no new SUBSCRIBE needed.
    let back = spawn_sub(&router, &persistent, "sensors/+/noise", 50);
    let want: Vec<String> = away
        .iter()
        .map(|l| format!("sensors/a/noise {l}"))
        .collect();
    assert_eq!(lines_of(back).await, want);
    common::ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_packets_are_closed_and_counted_and_others_served() {
    let router = start().await;
    let addr = router.mqtt_addr().unwrap();
    let close_of = |bytes: &'static [u8]| async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(bytes).await.unwrap();
        let mut buf = Vec::new();
        // The router closes (after a CONNACK or DISCONNECT, if any).
        tokio::time::timeout(WAIT, s.read_to_end(&mut buf))
            .await
            .expect("closed")
            .ok();
        buf
    };
    // A remaining length of 268435455 bytes, declared before CONNECT.
    close_of(&[0x10, 0xFF, 0xFF, 0xFF, 0x7F]).await;
    // A fifth remaining-length byte.
    close_of(&[0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]).await;
    // Something other than CONNECT first.
    close_of(&[0xC0, 0x00]).await;
    // MQTT 3.1 (level 3).
    close_of(&[
        0x10, 0x11, 0, 6, b'M', b'Q', b'I', b's', b'd', b'p', 3, 2, 0, 60, 0, 3, b'a', b'b', b'c',
    ])
    .await;
    assert_eq!(
        metric(&router, "y3_router_mqtt_closed_total{reason=\"too_large\"}"),
        1
    );
    assert_eq!(
        metric(&router, "y3_router_mqtt_closed_total{reason=\"malformed\"}"),
        1
    );
    assert_eq!(
        metric(&router, "y3_router_mqtt_closed_total{reason=\"protocol\"}"),
        1
    );
    assert_eq!(
        metric(
            &router,
            "y3_router_mqtt_closed_total{reason=\"unsupported_version\"}"
        ),
        1
    );
    // QoS 2 is refused: closed under MQTT 3.1.1 (MQTT 5 clients read "maximum QoS 1" in
    // the CONNACK and do not send it; one that does is closed with 0x9B).
    let (ok, _) = publish_one(
        &router,
        &["-q", "2", "-u", "tester", "-P", "main"],
        "mqttv311",
        "sensors/a/noise",
    )
    .await;
    assert!(!ok);
    assert_eq!(
        metric(
            &router,
            "y3_router_mqtt_closed_total{reason=\"qos_not_supported\"}"
        ),
        1
    );
    // Everyone else is served.
    let sub = subscriber(&router, TESTER_QOS1, "sensors/#", 1).await;
    published(&router, TESTER_QOS1, "sensors/z/noise", &["still".into()]).await;
    assert_eq!(lines_of(sub).await, ["sensors/z/noise still"]);
    common::ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_messages_wills_and_keep_alive() {
    let router = start().await;
    // Retained: published before anyone subscribes, received by a later subscriber.
    let (ok, err) = publish_one(
        &router,
        &["-q", "1", "-r", "-u", "sensor", "-P", "sensor-key"],
        "mqttv311",
        "sensors/r/noise",
    )
    .await;
    assert!(ok, "{err}");
    let late = subscriber(&router, TESTER_QOS1, "sensors/+/noise", 1).await;
    assert_eq!(lines_of(late).await, ["sensors/r/noise x"]);
    assert_eq!(metric(&router, "y3_router_mqtt_retained"), 1);

    // A client with a will and a 5 s keep-alive (mosquitto's least), then frozen: the router
    // closes it after 7.5 s without a packet and publishes its will.
    let before = metric(&router, "y3_router_mqtt_accepted_total");
    let watcher = subscriber(&router, TESTER_QOS1, "sensors/will/noise", 1).await;
    let frozen = tool("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port(&router),
            "-t",
            "nothing/here",
            "-k",
            "5",
        ])
        .args([
            "-u",
            "sensor",
            "-P",
            "sensor-key",
            "--will-topic",
            "sensors/will/noise",
        ])
        .args(["--will-payload", "gone", "--will-qos", "1"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Connected (and subscribed) before it freezes.
    wait_for(|| metric(&router, "y3_router_mqtt_accepted_total") >= before + 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = frozen.id().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    assert_eq!(lines_of(watcher).await, ["sensors/will/noise gone"]);
    // The will goes out before the close is counted (it may arrive first).
    let keepalive = "y3_router_mqtt_closed_total{reason=\"keepalive_timeout\"}";
    wait_for(|| metric(&router, keepalive) >= 1).await;
    assert_eq!(metric(&router, keepalive), 1);
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status();
    drop(frozen);
    common::ledger(&router).await;
    router.shutdown().await;
}

/// A plain TCP connection to the router's MQTT listener, for tests that write packets by
/// hand.
async fn raw_client(router: &RouterHandle) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(router.mqtt_addr().unwrap())
        .await
        .unwrap()
}

/// An MQTT 3.1.1 CONNECT, clean session, user "u" and password "main", from the one-letter
/// client id `client` with a keep-alive of `keep_alive` seconds.
fn raw_connect(client: u8, keep_alive: u8) -> [u8; 24] {
    [
        0x10, 22, 0, 4, b'M', b'Q', b'T', b'T', 4, 0xC2, 0, keep_alive, 0, 1, client, 0, 1, b'u',
        0, 4, b'm', b'a', b'i', b'n',
    ]
}

/// CONNECT and SUBSCRIBE in one TCP segment (as paho sends them): both answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packets_that_arrive_with_connect_are_served() {
    let router = start().await;
    let mut s = raw_client(&router).await;
    let connect = raw_connect(b'c', 60);
    let subscribe = [0x82, 8, 0, 1, 0, 3, b'a', b'/', b'b', 1];
    s.write_all(&[&connect[..], &subscribe[..]].concat())
        .await
        .unwrap();
    let mut reply = [0u8; 9];
    tokio::time::timeout(WAIT, s.read_exact(&mut reply))
        .await
        .expect("CONNACK and SUBACK")
        .unwrap();
    // CONNACK accepted, then SUBACK for packet 1 granting QoS 1.
    assert_eq!(reply, [0x20, 2, 0, 0, 0x90, 3, 0, 1, 1]);
    common::ledger(&router).await;
    router.shutdown().await;
}

/// Keep-alive is counted from the last packet: a client with a 1 s keep-alive that pings
/// every 400 ms stays connected well past 1.5 s (each ping answered), and once it goes
/// quiet the router closes it 1.5 s after its last ping, counted as a keep-alive timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_counts_from_the_last_packet() {
    let router = start().await;
    let mut s = raw_client(&router).await;
    let connect = raw_connect(b'k', 1);
    s.write_all(&connect).await.unwrap();
    let mut connack = [0u8; 4];
    tokio::time::timeout(WAIT, s.read_exact(&mut connack))
        .await
        .expect("CONNACK")
        .unwrap();
    assert_eq!(connack, [0x20, 2, 0, 0]);
    let keepalive = "y3_router_mqtt_closed_total{reason=\"keepalive_timeout\"}";
    // 4 s of pings, 400 ms apart: past the 1.5 s deadline of the first read several times.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        s.write_all(&[0xC0, 0]).await.unwrap();
        let mut pong = [0u8; 2];
        tokio::time::timeout(WAIT, s.read_exact(&mut pong))
            .await
            .expect("PINGRESP")
            .unwrap();
        assert_eq!(pong, [0xD0, 0]);
    }
    assert_eq!(metric(&router, keepalive), 0);
    // Quiet now: closed 1.5 s after the last ping (not sooner than 1 s, not much later).
    let quiet = std::time::Instant::now();
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut rest))
        .await
        .expect("closed")
        .unwrap();
    let waited = quiet.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_millis(4000),
        "closed after {waited:?}"
    );
    wait_for(|| metric(&router, keepalive) >= 1).await;
    assert_eq!(metric(&router, keepalive), 1);
    common::ledger(&router).await;
    router.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listen_serves_mosquitto_with_the_routers_certificate() {
    let mut config = config();
    config.mqtt.tls_listen = "127.0.0.1:0".into();
    let router = Router::start(config).await.unwrap();
    let tls_port = router.mqtt_tls_addr().unwrap().port().to_string();
    // The router's (dev) certificate is the CA file mosquitto checks it against.
    let ca = std::env::temp_dir().join(format!("y3-mqtt-tls-{}.pem", std::process::id()));
    router.identity().write_certificate_pem(&ca).unwrap();
    let ca = ca.to_str().unwrap().to_owned();
    let tls = ["-p", &tls_port, "--cafile", &ca];
    let n = 100;
    let sub = accepted(&router, || {
        tool("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-t", "sensors/#", "-v", "-q", "1"])
            .args([
                "-C",
                &n.to_string(),
                "-W",
                "60",
                "-u",
                "tester",
                "-P",
                "main",
            ])
            .args(tls)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    })
    .await;
    let conns = router.mqtt_connections();
    assert_eq!(conns.len(), 1, "{conns:?}");
    let lines = numbered("tls", n);
    let mut publisher = tool("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-t", "sensors/t/noise", "-l", "-q", "1"])
        .args(["-u", "dev-t", "-P", "sensor-key"])
        .args(tls)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = publisher.stdin.take().unwrap();
    stdin
        .write_all((lines.join("\n") + "\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT, publisher.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<String> = lines
        .iter()
        .map(|l| format!("sensors/t/noise {l}"))
        .collect();
    assert_eq!(lines_of(sub).await, want, "every message once, in order");
    // A client that does not speak TLS to the TLS port is refused, counted; one that does
    // not trust the certificate fails its handshake.
    let mut plain = tokio::net::TcpStream::connect(router.mqtt_tls_addr().unwrap())
        .await
        .unwrap();
    plain
        .write_all(&[0x10, 0x0C, 0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60, 0, 0])
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let _ = tokio::time::timeout(WAIT, plain.read(&mut buf)).await;
    wait_for(|| {
        metric(
            &router,
            "y3_router_mqtt_refused_total{reason=\"tls_handshake\"}",
        ) == 1
    })
    .await;
    let (ok, text) = publish_one(
        &router,
        &[
            "-p",
            &tls_port,
            "--capath",
            "/nonexistent-ca-dir",
            "-q",
            "1",
        ],
        "mqttv311",
        "sensors/t/noise",
    )
    .await;
    assert!(!ok, "an untrusted certificate must fail: {text}");
    let _ = std::fs::remove_file(&ca);
    common::ledger(&router).await;
    let stats = router.shutdown().await;
    common::ledger_of(&stats);
    assert_eq!(stats.mqtt.routed, n as u64, "{:?}", stats.mqtt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_sessions_and_retained_messages_survive_a_graceful_restart() {
    let state = std::env::temp_dir().join(format!("y3-mqtt-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let restartable = || {
        let mut c = config();
        c.state.persist = true;
        c.state.dir = state.clone();
        c
    };
    let router = Router::start(restartable()).await.unwrap();
    let persistent = persistent_session("restart-1");
    subscribe_once_and_leave(&router, &persistent).await;
    // Every one of these is PUBACKed (mosquitto_pub exits 0 only then) while the
    // subscriber is away; one retained message too.
    let away = numbered("away", 50);
    published(&router, SENSOR_QOS1, "sensors/a/noise", &away).await;
    published(
        &router,
        &["-q", "1", "-r", "-u", "tester", "-P", "main"],
        "alerts/noise",
        &["kept".into()],
    )
    .await;
    wait_for(|| router.stats().mqtt.held == 50).await;
    common::ledger(&router).await;
    let stats = router.shutdown().await;
    common::ledger_of(&stats);
    let file = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("mqtt-sessions-")
        })
        .expect("the sessions file is written at a graceful stop");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    }

    // The successor: the session is there (session present), its 50 messages come first.
    let router = Router::start(restartable()).await.unwrap();
    assert!(!file.path().exists(), "read and removed by the next start");
    assert_eq!(router.stats().mqtt.held, 50);
    let back = spawn_sub(&router, &persistent, "sensors/+/noise", 50);
    let want: Vec<String> = away
        .iter()
        .map(|l| format!("sensors/a/noise {l}"))
        .collect();
    assert_eq!(lines_of(back).await, want, "nothing PUBACKed is lost");
    // The retained message too.
    let retained = subscriber(&router, TESTER_QOS1, "alerts/noise", 1).await;
    assert_eq!(lines_of(retained).await, ["alerts/noise kept"]);
    common::ledger(&router).await;
    router.shutdown().await;
    let _ = std::fs::remove_dir_all(&state);
}

/// Log lines the router writes, captured (the session-full test reads them).
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A persistent session whose client is away keeps `max_session_queue` messages: of 250
/// QoS 1 publishes with a limit of 100, the oldest 150 are dropped, each counted
/// (`dropped_total{reason="session_full"}` and the ledger), the first logged once with the
/// session's client id, the publisher and the limit; the newest 100 reach the client
/// when it comes back, in order.
#[tokio::test]
async fn a_full_session_queue_drops_the_oldest_counted_and_logged_once() {
    let logs = Logs::default();
    let logger = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .finish();
    // A current-thread runtime: the router's tasks log on this thread.
    let _logging = tracing::subscriber::set_default(logger);
    let (limit, sent) = (100usize, 250usize);
    let mut config = config();
    config.mqtt.max_session_queue = limit;
    let router = Router::start(config).await.expect("router starts");
    let persistent = [
        "-q", "1", "-c", "-i", "slow-1", "-u", "tester", "-P", "main",
    ];
    let first = subscriber(&router, &persistent, "sensors/+/noise", 1).await;
    let sensor = [
        "-q",
        "1",
        "-i",
        "sensor-7",
        "-u",
        "sensor",
        "-P",
        "sensor-key",
    ];
    let (ok, err) = publish(&router, &sensor, "sensors/a/noise", &["before".into()]).await;
    assert!(ok, "{err}");
    assert_eq!(lines_of(first).await, ["sensors/a/noise before"]);
    let away = numbered("away", sent);
    let (ok, err) = publish(&router, &sensor, "sensors/a/noise", &away).await;
    assert!(ok, "{err}");
    let full = "y3_router_mqtt_dropped_total{reason=\"session_full\"}";
    wait_for(|| metric(&router, full) == (sent - limit) as u64).await;
    let back = tool("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port(&router),
            "-t",
            "sensors/+/noise",
        ])
        .args(["-v", "-C", &limit.to_string(), "-W", "60"])
        .args(persistent)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let want: Vec<String> = away[sent - limit..]
        .iter()
        .map(|l| format!("sensors/a/noise {l}"))
        .collect();
    assert_eq!(lines_of(back).await, want, "the newest {limit}, in order");
    common::ledger(&router).await;
    let mqtt = router.stats().mqtt;
    // Delivered, or still held by the session: `mosquitto_sub -C` leaves as soon as it
    // printed its count, some PUBACKs unsent (those stay in flight, kept for its return).
    assert_eq!(
        (
            mqtt.offered,
            mqtt.dropped,
            mqtt.delivered + mqtt.held as u64
        ),
        ((sent + 1) as u64, (sent - limit) as u64, (limit + 1) as u64)
    );
    assert_eq!(metric(&router, full), (sent - limit) as u64);
    router.shutdown().await;
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("mqtt session queue full"))
        .collect();
    assert_eq!(lines.len(), 1, "logged once per session: {text}");
    for want in [
        "client=slow-1",
        "publisher=sensor-7",
        "limit=100",
        "client_away=true",
    ] {
        assert!(lines[0].contains(want), "{want} in {}", lines[0]);
    }
    eprintln!(
        "session queue {limit}: {sent} sent while away, {} dropped (counted), {limit} delivered on return",
        sent - limit
    );
}

/// Sends 1 KiB messages on tag 0x20 (`alerts/noise`) in rounds of 16 until what the
/// router holds for the stopped subscriber shows in the memory budget's gauge while every
/// message so far was written straight (delivered, none in the session's queue): then only
/// the socket's outlet holds bytes. Returns the gauge.
async fn fill_outlet(router: &RouterHandle, source: &mut Source, sent: &mut u64) -> u64 {
    let payload = vec![b'x'; 1024];
    for _ in 0..2000 {
        for _ in 0..16 {
            source.send(0x20, payload.clone()).await.unwrap();
            *sent += 1;
        }
        let want = *sent;
        // Written (to the socket or its outlet) soon; queued (the outlet full) never, while
        // the subscriber is stopped.
        let until = tokio::time::Instant::now() + Duration::from_secs(5);
        while metric(router, "y3_router_mqtt_delivered_total") < want {
            assert!(
                tokio::time::Instant::now() < until,
                "the outlet filled without its bytes showing in the budget's gauge: {:?}",
                router.stats().mqtt
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let held = router.stats().queued_bytes;
        if held >= 16 * 1024 {
            return held;
        }
    }
    panic!("the stopped subscriber's socket never filled");
}

/// `kill -SIGNAL pid`.
fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// A subscriber that stops reading (`mosquitto_sub` stopped by SIGSTOP): the bytes the router
/// holds for its socket (written straight, past what the socket took) are charged to the
/// memory budget (`y3_router_queued_bytes`), and come back when it reads them again
/// (SIGCONT) and when it goes (SIGKILL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscribers_bytes_are_charged_to_the_budget_until_written_or_gone() {
    let router = start().await;
    let options = ClientOptions::new(router.tcp_addr().unwrap()).token("main");
    let mut source = Source::connect(options).await.unwrap();
    // What it prints goes nowhere: a pipe nobody reads would stop it once full.
    let sub = accepted(&router, || {
        tool("mosquitto_sub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port(&router),
                "-t",
                "alerts/noise",
            ])
            .args(["-u", "tester", "-P", "main"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    })
    .await;
    // The messages go to the subscriber only: no sink observes 0x20.
    let mut sent = 0u64;
    signal(&sub, "-STOP");
    let held = fill_outlet(&router, &mut source, &mut sent).await;
    assert!(held >= 16 * 1024, "{held}");
    signal(&sub, "-CONT");
    wait_for(|| router.stats().queued_bytes == 0).await;
    signal(&sub, "-STOP");
    fill_outlet(&router, &mut source, &mut sent).await;
    signal(&sub, "-KILL");
    wait_for(|| router.stats().queued_bytes == 0).await;
    let mqtt = router.stats().mqtt;
    assert_eq!((mqtt.offered, mqtt.delivered), (sent, sent));
    router.shutdown().await;
}
