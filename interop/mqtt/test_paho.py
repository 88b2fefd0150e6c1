"""Devices over MQTT (issue 31) with the Eclipse paho-mqtt client against `y3 serve`.

Run by scripts/test-mqtt.sh (which installs paho-mqtt into a virtual environment and builds
`y3`); Y3_BIN names the binary. YoMo's zipper has no MQTT listener, so there is no YoMo
control for these: the YoMo side of the path is in interop/yomo/mqtt_test.go.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

# `y3 serve` is started by the Python tests' one fixture (`y3_serve`: its ready file gives
# the addresses), shared from bindings/python/tests/routers.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bindings" / "python" / "tests"))
from routers import Y3_BIN, y3_serve  # noqa: E402, F401 (the fixture)

WAIT = 30.0  # generous: the machine may be loaded


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The MQTT port is fixed in the config (clients reconnect to it across restarts); the other
# listeners are the fixture's.
CONFIG = """
[auth]
token = "main"
[[auth.tokens]]
name = "sensors"
token = "sensor-key"
publish = [0x10]
observe = []
[limits]
max_metadata_bytes = 1024  # a long topic is over it (test_puback_codes_...)
[state]
persist = true
dir = "{state}"
[mqtt]
listen = "127.0.0.1:{mqtt}"
[[mqtt.publish]]
topic = "sensors/+/noise"
tag = 0x10
[[mqtt.subscribe]]
tag = 0x10
topic = "sensors/+/noise"
"""


@pytest.fixture
def router(y3_serve, tmp_path):
    """`y3 serve` with an [mqtt] listener and persisted state; restartable on the same ports
    (`stop`, `start`), its log at info level (the tests read it)."""
    assert Y3_BIN and os.access(Y3_BIN, os.X_OK), "Y3_BIN must name the y3 binary"
    config = CONFIG.format(mqtt=free_port(), state=tmp_path / "state")
    return y3_serve(config=config, rust_log="info", stop_grace=WAIT)


def mqtt_addr(router):
    """(host, port) of the router's MQTT listener, as its ready file gives it."""
    host, port = router.mqtt.rsplit(":", 1)
    return host, int(port)


def client(version, client_id="", clean=True, user="tester", password="main"):
    proto = mqtt.MQTTv5 if version == 5 else mqtt.MQTTv311
    kwargs = {} if version == 5 else {"clean_session": clean}
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=proto, **kwargs)
    c.username_pw_set(user, password)
    return c


def connect(c, router, version=4, clean=True):
    done = threading.Event()
    result = {}

    def on_connect(_c, _u, _flags, reason, _props):
        result["reason"] = reason
        done.set()

    c.on_connect = on_connect
    if version == 5:
        c.connect(*mqtt_addr(router), clean_start=clean,
                  properties=session_expiry(0 if clean else 3600))
    else:
        c.connect(*mqtt_addr(router))
    c.loop_start()
    assert done.wait(WAIT), "no CONNACK"
    return result["reason"]


def session_expiry(seconds):
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    p = Properties(PacketTypes.CONNECT)
    p.SessionExpiryInterval = seconds
    return p


class Collector:
    """Subscribes and collects (topic, payload) pairs."""

    def __init__(self, c, filt, qos=1):
        self.c, self.filt, self.qos = c, filt, qos
        self.got = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        c.on_message = self.on_message
        c.on_subscribe = lambda *_a: self.subscribed.set()

    def on_message(self, _c, _u, msg):
        with self.lock:
            self.got.append((msg.topic, msg.payload.decode()))

    def subscribe(self):
        self.subscribed.clear()
        self.c.subscribe(self.filt, qos=self.qos)
        assert self.subscribed.wait(WAIT), "no SUBACK"

    def wait_for(self, n):
        deadline = time.time() + WAIT
        while time.time() < deadline:
            with self.lock:
                if len(self.got) >= n:
                    break
            time.sleep(0.02)
        time.sleep(0.2)  # anything extra would show up now
        with self.lock:
            return list(self.got)


@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("qos", [0, 1])
def test_exact_counts(router, version, qos):
    sub = client(version)
    assert connect(sub, router, version) == 0
    col = Collector(sub, "sensors/#", qos=1)
    col.subscribe()
    pub = client(version, user="dev-7", password="sensor-key")
    assert connect(pub, router, version) == 0
    n = 500
    infos = [pub.publish("sensors/dev-7/noise", f"m{i}", qos=qos) for i in range(n)]
    for info in infos:
        info.wait_for_publish(WAIT)
        assert info.rc == 0
    got = col.wait_for(n)
    assert got == [("sensors/dev-7/noise", f"m{i}") for i in range(n)]
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("version", [4, 5])
def test_mixed_qos_publishes_arrive_in_order(router, version):
    # A connection publishes QoS 0 only (its link to the router asks for no stored
    # acknowledgements) until its first QoS 1 publish moves it to one that does: nothing
    # published before that move may arrive after a publish sent later.
    sub = client(version)
    assert connect(sub, router, version) == 0
    col = Collector(sub, "sensors/#", qos=1)
    col.subscribe()
    pub = client(version, user="dev-8", password="sensor-key")
    qos = [0] * 2000 + [1] + [i % 2 for i in range(299)]
    # paho holds back QoS 1 publishes past its in-flight window (QoS 0 ones overtake them):
    # a window over every publish here sends them in order.
    pub.max_inflight_messages_set(len(qos))
    assert connect(pub, router, version) == 0
    infos = [pub.publish("sensors/dev-8/noise", f"m{i}", qos=q) for i, q in enumerate(qos)]
    for info in infos:
        info.wait_for_publish(WAIT)
        assert info.rc == 0
    got = col.wait_for(len(qos))
    assert got == [("sensors/dev-8/noise", f"m{i}") for i in range(len(qos))]
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("version", [4, 5])
def test_wrong_password_refused(router, version):
    c = client(version, password="nope")
    reason = connect(c, router, version)
    assert reason.is_failure and "password" in str(reason).lower(), reason
    c.loop_stop()


@pytest.mark.parametrize("version", [4, 5])
def test_persistent_session_redelivers_after_reconnect(router, version):
    sub = client(version, client_id=f"persist-{version}", clean=False)
    assert connect(sub, router, version, clean=False) == 0
    col = Collector(sub, "sensors/+/noise")
    col.subscribe()
    sub.disconnect()
    sub.loop_stop()
    pub = client(version, password="sensor-key")
    assert connect(pub, router, version) == 0
    n = 100
    for i in range(n):
        pub.publish("sensors/a/noise", f"away{i}", qos=1).wait_for_publish(WAIT)
    # Back with the same id and no clean start: no SUBSCRIBE, the session has it.
    back = client(version, client_id=f"persist-{version}", clean=False)
    col2 = Collector(back, "unused")
    flags = {}
    back.on_connect = lambda _c, _u, f, _r, _p: flags.update(present=f.session_present)
    back.connect(*mqtt_addr(router), **({"clean_start": False, "properties": session_expiry(3600)} if version == 5 else {}))
    back.loop_start()
    assert col2.wait_for(n) == [("sensors/a/noise", f"away{i}") for i in range(n)]
    assert flags.get("present") is True
    for c in (pub, back):
        c.disconnect()
        c.loop_stop()


def test_router_restart_loses_nothing_pubacked(router):
    """A QoS 1 sensor publishing through a router restart (SIGTERM, drain, a new process on
    the same port): every message the router PUBACKed reached the subscriber (it reconnects
    and subscribes again, first), and the sensor's unacknowledged ones are sent again by paho
    and arrive too (at least once)."""
    sub = client(4, client_id="restart-sub")
    sub.reconnect_delay_set(min_delay=0.05, max_delay=0.1)
    col = Collector(sub, "sensors/+/noise")
    ready = threading.Event()

    def on_connect(c, _u, _f, reason, _p):
        if reason == 0:
            c.subscribe("sensors/+/noise", qos=1)

    sub.on_connect = on_connect
    sub.on_subscribe = lambda *_a: ready.set()
    sub.connect(*mqtt_addr(router))
    sub.loop_start()
    assert ready.wait(WAIT)

    pub = client(4, client_id="restart-pub", clean=False, password="sensor-key")
    # Back after the subscriber (which retries every 0.1 s): 2 s.
    pub.reconnect_delay_set(min_delay=2, max_delay=2)
    acked = set()
    lock = threading.Lock()
    mids = {}

    def on_publish(_c, _u, mid, _rc, _p):
        with lock:
            acked.add(mid)

    pub.on_publish = on_publish
    pub.connect(*mqtt_addr(router))
    pub.loop_start()
    n = 600
    for i in range(n):
        info = pub.publish("sensors/r/noise", f"r{i}", qos=1)
        with lock:
            mids[info.mid] = f"r{i}"
        if i == n // 3:
            ready.clear()
            router.stop()
            router.start()
            assert ready.wait(WAIT), "the subscriber did not come back"
        time.sleep(0.002)
    deadline = time.time() + WAIT * 2
    while time.time() < deadline:
        with lock:
            if len(acked) >= n:
                break
        time.sleep(0.05)
    with lock:
        acked_now = {mids[m] for m in acked}
    got = {p for _t, p in col.wait_for(n)}
    assert len(acked_now) == n, f"paho saw {len(acked_now)} of {n} PUBACKed"
    lost = acked_now - got
    assert not lost, f"{len(lost)} PUBACKed messages never arrived, e.g. {sorted(lost)[:5]}\n{router.log()[-3000:]}"
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("version", [4, 5])
def test_persistent_session_survives_a_router_restart(router, version):
    """A persistent subscriber away while QoS 1 messages are PUBACKed, then the router is
    restarted (SIGTERM: it saves its sessions in the state directory): back with the same
    client id and no SUBSCRIBE, it gets every one of them from the new process."""
    cid = f"restart-persist-{version}"
    sub = client(version, client_id=cid, clean=False)
    assert connect(sub, router, version, clean=False) == 0
    Collector(sub, "sensors/+/noise").subscribe()
    sub.disconnect()
    sub.loop_stop()
    pub = client(version, password="sensor-key")
    assert connect(pub, router, version) == 0
    n = 100
    for i in range(n):
        pub.publish("sensors/k/noise", f"kept{i}", qos=1).wait_for_publish(WAIT)
    pub.disconnect()
    pub.loop_stop()
    router.stop()
    assert "mqtt sessions saved" in router.log(), router.log()[-3000:]
    router.start()
    back = client(version, client_id=cid, clean=False)
    col = Collector(back, "unused")
    flags = {}
    back.on_connect = lambda _c, _u, f, _r, _p: flags.update(present=f.session_present)
    back.connect(*mqtt_addr(router), **({"clean_start": False, "properties": session_expiry(3600)} if version == 5 else {}))
    back.loop_start()
    got = col.wait_for(n)
    assert got == [("sensors/k/noise", f"kept{i}") for i in range(n)], router.log()[-3000:]
    assert flags.get("present") is True
    back.disconnect()
    back.loop_stop()


@pytest.fixture
def mosquitto(tmp_path):
    """Debian's Mosquitto on a free port, anonymous: the control for what a real broker
    answers."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "mosquitto.log", "w"))
    deadline = time.time() + WAIT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.time() < deadline and proc.poll() is None, "mosquitto did not start"
            time.sleep(0.05)
    yield ("127.0.0.1", port)
    proc.terminate()
    proc.wait(WAIT)


def puback_of(c, topic):
    """Publishes `topic` QoS 1 on the connected `c`; its PUBACK's reason code."""
    acked = {}
    done = threading.Condition()

    def on_publish(_c, _u, mid, reason, _props):
        with done:
            acked[mid] = reason
            done.notify_all()

    c.on_publish = on_publish
    info = c.publish(topic, b"x", qos=1)
    with done:
        assert done.wait_for(lambda: info.mid in acked, WAIT), "no PUBACK"
        return acked[info.mid]


@pytest.mark.parametrize("version", [4, 5])
def test_puback_codes_tell_no_subscriber_from_a_refusal(router, mosquitto, version):
    """A QoS 1 publish nobody subscribes to is a success with MQTT 5's code 0x10 "no matching
    subscribers" (as Mosquitto answers it), not a failure; one over the router's metadata
    limit (a 2,000-byte topic, over `max_metadata_bytes`) is a refusal (0x83); a routed one
    is 0x00. MQTT 3.1.1 has no reason code: each is PUBACKed all the same. The router
    counts each outcome."""
    # The control: Mosquitto's answer to a publish nobody subscribes to.
    control = client(version)
    connected = threading.Event()
    control.on_connect = lambda *_a: connected.set()
    control.connect(*mosquitto)
    control.loop_start()
    assert connected.wait(WAIT), "no CONNACK from mosquitto"
    control_nobody = puback_of(control, "sensors/a/noise")
    control.disconnect()
    control.loop_stop()
    pub = client(version, password="sensor-key")
    assert connect(pub, router, version) == 0
    publish = lambda topic: puback_of(pub, topic)  # noqa: E731

    before = router.metrics()
    nobody = publish("sensors/a/noise")
    too_long = publish(f"sensors/{'a' * 2000}/noise")
    sub = client(version)
    assert connect(sub, router, version) == 0
    col = Collector(sub, "sensors/+/noise")
    col.subscribe()
    routed = publish("sensors/b/noise")
    assert col.wait_for(1) == [("sensors/b/noise", "x")]
    assert (nobody.value, nobody.is_failure) == (control_nobody.value, False), nobody
    if version == 5:
        assert (nobody.value, nobody.is_failure) == (0x10, False), nobody
        assert (too_long.value, too_long.is_failure) == (0x83, True), too_long
        assert (routed.value, routed.is_failure) == (0x00, False), routed
    else:
        assert [r.value for r in (nobody, too_long, routed)] == [0, 0, 0]
    after = router.metrics()

    def delta(reason):
        name = f'y3_router_mqtt_pubacked_total{{reason="{reason}"}}'
        return after.get(name, 0) - before.get(name, 0)

    assert (delta("no_subscriber"), delta("refused_by_router"), delta("stored")) == (1, 1, 1)
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()


def test_each_publish_is_mapped_by_its_own_topic(router):
    """One MQTT 5 connection alternating a mapped topic and an unmapped one: each publish is
    mapped by its own topic (the router keeps the last topic's tag: a topic that changes is
    looked up again), so the unmapped ones are refused with 0x90 and the connection goes
    on, and the subscriber gets exactly the mapped ones, in order."""
    sub = client(5)
    assert connect(sub, router, 5) == 0
    col = Collector(sub, "sensors/+/noise")
    col.subscribe()
    pub = client(5, password="sensor-key")
    assert connect(pub, router, 5) == 0
    topics = ["sensors/a/noise", "elsewhere/x", "elsewhere/x", "sensors/b/noise",
              "sensors/b/noise", "elsewhere/y", "sensors/a/noise"]
    codes = [puback_of(pub, t) for t in topics]
    mapped = [t for t in topics if t.startswith("sensors/")]
    assert col.wait_for(len(mapped)) == [(t, "x") for t in mapped]
    for t, code in zip(topics, codes):
        if t.startswith("sensors/"):
            assert (code.value, code.is_failure) == (0x00, False), (t, code)
        else:
            assert (code.value, code.is_failure) == (0x90, True), (t, code)
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()
