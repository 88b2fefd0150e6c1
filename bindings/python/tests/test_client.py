"""The asyncio clients (y3.Source, y3.StreamFunction, y3.Sink) against `y3 serve` and
against YoMo v1.22.0's own zipper and stream function: exact counts through Go and Python
functions, every transport, reconnection after a restart, refusals as typed errors,
cancellation without leaked connections, a raising handler, backpressure."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import routers
import y3
from routers import Y3Router, YomoRelay, YomoZipper, needs_y3, needs_yomo, until_routed

PAYLOAD = 64


def message(i: int) -> bytes:
    """A 64-byte payload carrying its sequence number."""
    return b"m" + i.to_bytes(4, "big") + bytes(PAYLOAD - 5)


def seq(payload: bytes) -> int | None:
    return int.from_bytes(payload[1:5], "big") if payload[:1] == b"m" else None


class Collector:
    """Runs a sink in a task, keeping every numbered message and counting probes."""

    def __init__(self, sink: y3.Sink) -> None:
        self.sink, self.seqs, self.probes, self.frames = sink, [], 0, []  # type: ignore[var-annotated]
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for frame in self.sink:
            n = seq(frame.payload)
            if n is None:
                self.probes += 1
            else:
                self.seqs.append(n)
                self.frames.append(frame)

    async def wait_for(self, n: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.seqs) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.wait([self.task])


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


# --- Python source → Go function (YoMo's own) → Python sink ----------------------------


@needs_yomo
def test_python_source_through_a_go_function_to_a_python_sink(router: Y3Router | YomoZipper, tmp_path: Path) -> None:
    n = 2000
    relay = YomoRelay(router, tmp_path, observe=0x33, emit=0x34)

    async def main() -> None:
        opts = router.options()
        async with y3.Sink(router.addr, [0x34], name="py-sink", **opts) as sink, y3.Source(router.addr, name="py-source", **opts) as source:
            got = Collector(sink)
            await until_routed(lambda: source.send(0x33, b"probe"), lambda: got.probes > 0)
            for i in range(n):
                await source.send(0x33, message(i))
            await source.flush()
            await got.wait_for(n)
            await asyncio.sleep(0.3)  # nothing more may come
            await got.stop()
            assert sorted(got.seqs) == list(range(n)), f"{len(got.seqs)} of {n}"
            # YoMo's function keeps the source's metadata on what it emits.
            assert {f.source_id for f in got.frames} == {source.id}
            assert len({f.tid for f in got.frames}) == n

    try:
        run(main())
    finally:
        report = relay.stop()
    assert report.get("relayed", 0) >= n, report


# --- Python source → Python function → Python sink -------------------------------------


def test_python_function_with_a_raising_handler(router: Y3Router | YomoZipper, caplog: pytest.LogCaptureFixture) -> None:
    n = 500

    def handler(frame: y3.Frame) -> tuple[int, bytes] | None:
        i = seq(frame.payload)
        if i is not None and i % 10 == 7:
            raise ValueError(f"bad reading {i}")
        return 0x21, frame.payload

    async def main() -> y3.StreamFunction:
        opts = router.options()
        async with y3.Sink(router.addr, [0x21], **opts) as sink, y3.Source(router.addr, **opts) as source, y3.StreamFunction(
            router.addr, [0x20], handler, name="py-sfn", **opts
        ) as sfn:
            got = Collector(sink)
            await until_routed(lambda: source.send(0x20, b"probe"), lambda: got.probes > 0)
            for i in range(n):
                await source.send(0x20, message(i), metadata={"batch": "one"})
            await got.wait_for(n - n // 10)
            await asyncio.sleep(0.3)
            await got.stop()
            assert sorted(got.seqs) == [i for i in range(n) if i % 10 != 7]
            assert all(f.metadata["batch"] == "one" for f in got.frames)
            # Hops are y3's extension field; YoMo's zipper does not carry it.
            assert {f.hops for f in got.frames} == {1 if router.kind == "y3" else 0}
            return sfn

    with caplog.at_level("ERROR", logger="y3"):
        sfn = run(main())
    assert sfn.errors == n // 10
    assert sfn.emitted == sfn.handled - n // 10
    assert "bad reading 7" in caplog.text


# --- transports and trust ---------------------------------------------------------------


@needs_y3
@pytest.mark.parametrize(
    "transport,trust",
    [("tcp", None), ("tls", "pin"), ("tls", "ca"), ("quic", "pin"), ("quic", "ca"), ("quic", "insecure")],
)
def test_every_transport(y3_serve: Callable[..., Y3Router], transport: str, trust: str | None) -> None:
    router, n = y3_serve(tcp_tls=transport == "tls"), 300
    opts: dict[str, Any] = {"transport": transport}
    if trust == "pin":
        opts["pin"] = router.pin
    elif trust == "ca":
        opts["ca"] = router.tmp / "dev-cert.pem"
    elif trust == "insecure":
        opts["insecure"] = True

    async def main() -> None:
        addr = router.quic if transport == "quic" else router.tcp
        async with y3.Sink(addr, [0x40], **opts) as sink, y3.Source(addr, **opts) as source:
            got = Collector(sink)
            for i in range(n):
                await source.send(0x40, message(i))
            await got.wait_for(n)
            await got.stop()
            assert sorted(got.seqs) == list(range(n))

    try:
        run(main())
    finally:
        router.stop()


@needs_y3
def test_tls_needs_a_trust_setting(y3_router: Y3Router) -> None:
    async def main() -> None:
        await y3.Source(y3_router.quic, transport="quic").connect()

    with pytest.raises(y3.TransportError) as e:
        run(main())
    assert e.value.kind == "config" and not e.value.retryable


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="transport"):
        y3.Source("127.0.0.1:1", transport="udp")
    with pytest.raises(ValueError, match="exclude"):
        y3.Source("127.0.0.1:1", transport="quic", pin="00" * 32, insecure=True)
    with pytest.raises(y3.TransportError) as e:
        y3.Source("127.0.0.1:1", transport="quic", pin="xyz")
    assert e.value.kind == "config"


def test_nothing_listening_gives_up() -> None:
    async def main() -> None:
        await y3.Source("127.0.0.1:9", backoff=y3.Backoff(initial=0.01, max=0.02, attempts=3)).connect()

    with pytest.raises(y3.TransportError) as e:
        run(main())
    assert e.value.kind == "gave_up" and e.value.attempts == 3 and not e.value.retryable


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["y3", "yomo"])
def test_wrong_token_is_a_typed_refusal(kind: str, tmp_path: Path, y3_serve: Callable[..., Y3Router]) -> None:
    if kind == "y3" and not routers.Y3_BIN or kind == "yomo" and not routers.YOMO_PEER:
        pytest.skip(f"no {kind} router")
    router: Y3Router | YomoZipper = y3_serve(token="secret") if kind == "y3" else YomoZipper(tmp_path, token="secret")
    # YoMo's zipper refuses with a RejectedFrame that carries no code: kind "rejected".
    expected = "unauthorized" if kind == "y3" else "rejected"
    wrong = dict(router.options(), token="wrong")

    async def refused(client: Any) -> y3.TransportError:
        try:
            if isinstance(client, y3.StreamFunction):
                await client.run()
            else:
                await client.connect()
        except y3.TransportError as e:
            return e
        raise AssertionError(f"{client!r} connected with a wrong token")

    async def main() -> None:
        for client in (
            y3.Source(router.addr, **wrong),
            y3.Sink(router.addr, [0x10], **wrong),
            y3.StreamFunction(router.addr, [0x10], lambda f: None, **wrong),
        ):
            e = await refused(client)
            assert e.kind == expected, e
            assert not e.retryable
            if kind == "y3":
                assert "secret" not in str(e) and "wrong" not in str(e)  # YoMo echoes it
        async with y3.Source(router.addr, **router.options()) as ok:
            await ok.send(0x10, b"right token")

    try:
        run(main())
    finally:
        router.stop()


# --- reconnection -----------------------------------------------------------------------


@needs_y3
def test_reconnect_after_a_router_restart(y3_router: Y3Router) -> None:
    """With the default attempts (forever) both clients outlive a 2 s outage, ~30
    attempts at these delays (the old default gave up after 10), and no send raises."""
    router = y3_router
    assert y3.Backoff().attempts is None
    # The restarted router has a new dev certificate: a pin would (rightly) refuse it.
    opts: dict[str, Any] = {"transport": "quic", "insecure": True, "backoff": y3.Backoff(initial=0.02, max=0.1)}

    async def main() -> None:
        async with y3.Sink(router.addr, [0x50], **opts) as sink, y3.Source(router.addr, **opts) as source:
            got = Collector(sink)
            for i in range(10):
                await source.send(0x50, message(i))
            await got.wait_for(10)
            assert sorted(got.seqs) == list(range(10))

            router.stop()  # the old one drained and said `shutting_down`
            await asyncio.sleep(2)  # the outage
            router.start()  # same ports

            async def probe() -> None:
                await source.send(0x50, b"probe")  # waits out the outage; never raises

            probes = got.probes
            await until_routed(probe, lambda: got.probes > probes, timeout=20)
            for i in range(100, 200):
                await source.send(0x50, message(i))
            await got.wait_for(110)
            await asyncio.sleep(0.2)
            await got.stop()
            assert sorted(got.seqs) == list(range(10)) + list(range(100, 200))

    run(main())


def test_a_limited_client_gives_up_naming_the_address_and_the_cause() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"

    async def main() -> None:
        with pytest.raises(y3.TransportError) as caught:
            async with y3.Source(addr, backoff=y3.Backoff(initial=0.01, max=0.01, attempts=2)):
                pass
        e = caught.value
        assert e.kind == "gave_up" and e.details["attempts"] == 2 and e.details["addr"] == addr, e
        for part in (addr, "after 2 attempts", "refused", "running"):
            assert part in str(e), (part, str(e))

    run(main())


# --- cancellation -----------------------------------------------------------------------


@needs_y3
def test_cancelling_a_task_mid_send_leaks_no_connection(y3_router: Y3Router) -> None:
    router = y3_router
    opts = dict(router.options(), send_queue=1)
    big = bytes(256 * 1024)

    async def with_context(started: asyncio.Event) -> None:
        async with y3.Source(router.addr, **opts) as source:
            while True:
                started.set()
                await source.send(0x60, big)

    async def bare(started: asyncio.Event) -> None:
        source = await y3.Source(router.addr, **opts).connect()
        while True:
            started.set()
            await source.send(0x60, big)

    async def sink_task(started: asyncio.Event) -> None:
        async with y3.Sink(router.addr, [0x61], **opts) as sink:
            started.set()
            async for _ in sink:
                pass

    async def main() -> None:
        await router.wait_connections(0)
        for body in (with_context, bare, sink_task):
            started = asyncio.Event()
            task = asyncio.ensure_future(body(started))
            await started.wait()
            await router.wait_connections(1)
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.wait([task])
            assert task.cancelled()
            # `bare` never closed its source: dropping the last reference (the finished
            # task's traceback holds its frame) closes the connection.
            del task
            gc.collect()
            await router.wait_connections(0, timeout=10)

    run(main())


# --- backpressure -----------------------------------------------------------------------


@needs_y3
def test_a_slow_handler_slows_its_input(y3_router: Y3Router) -> None:
    """One frame at a time in Python, in order; the rest waits upstream (the QUIC receive
    window, the router's queue for this subscriber), not in the bridge."""
    router, n, size = y3_router, 48, 256 * 1024
    state: dict[str, Any] = {"inside": 0, "most": 0, "order": []}

    async def slow(frame: y3.Frame) -> None:
        state["inside"] += 1
        state["most"] = max(state["most"], state["inside"])
        state["order"].append(seq(frame.payload))
        await asyncio.sleep(0.03)
        state["inside"] -= 1

    async def main() -> y3.StreamFunction:
        opts = router.options()
        async with y3.StreamFunction(router.addr, [0x70], slow, **opts) as sfn:
            await router.wait_connections(1, "stream_function")
            async with y3.Source(router.addr, **opts) as source:
                for i in range(n):
                    await source.send(0x70, message(i) + bytes(size))
            handled = sfn.handled
            while sfn.handled < n:
                await asyncio.sleep(0.02)
            state["handled_when_sent"] = handled
            return sfn

    sfn = run(main())
    assert state["most"] == 1
    assert state["order"] == list(range(n))
    assert sfn.errors == 0
    assert state["handled_when_sent"] < n // 2, state


@needs_y3
def test_closing_a_sink_ends_an_iteration_in_another_task(y3_router: Y3Router) -> None:
    async def main() -> None:
        sink = await y3.Sink(y3_router.addr, [0x80], **y3_router.options()).connect()
        got: list[y3.Frame] = []

        async def iterate() -> None:
            async for frame in sink:
                got.append(frame)

        task = asyncio.ensure_future(iterate())
        await asyncio.sleep(0.2)  # waiting for a frame that never comes
        await asyncio.wait_for(sink.close(), 5)
        await asyncio.wait_for(task, 5)
        assert got == []
        await y3_router.wait_connections(0)

    run(main())


def test_targets_metadata_and_buffers(router: Y3Router | YomoZipper) -> None:
    """A targeted frame reaches only the sink wanting its target, an untargeted one every
    sink (YoMo's rule); `metadata` travels; bytearray and memoryview payloads work."""

    async def main() -> None:
        opts = router.options()
        async with y3.Sink(router.addr, [0x90], wanted_target="a", **opts) as a, y3.Sink(
            router.addr, [0x90], **opts
        ) as plain, y3.Source(router.addr, **opts) as source:
            got_a, got_plain = Collector(a), Collector(plain)
            await until_routed(lambda: source.send(0x90, b"probe"), lambda: got_plain.probes > 0)
            await source.send(0x90, message(1), target="a", metadata={"k": "v"})
            await source.send(0x90, bytearray(message(2)), target="nobody")
            await source.send(0x90, memoryview(message(3)))
            await got_a.wait_for(2)
            await got_plain.wait_for(1)
            await asyncio.sleep(0.3)
            await got_a.stop()
            await got_plain.stop()
            assert got_a.seqs == [1, 3] and got_a.frames[0].metadata["k"] == "v"
            assert got_a.frames[0].metadata["yomo-target"] == "a"
            assert got_plain.seqs == [3] and got_plain.frames[0].payload == message(3)

    run(main())


@needs_y3
def test_a_process_exits_cleanly_with_clients_left_open(y3_router: Y3Router) -> None:
    """Clients never closed, a stream function still running, frames in flight: the
    interpreter exits with status 0, no tokio thread entering it while it finalizes."""
    import subprocess
    import sys

    script = f"""
import asyncio, y3
async def main():
    sink = await y3.Sink({y3_router.tcp!r}, [0xa0]).connect()
    sfn = y3.StreamFunction({y3_router.tcp!r}, [0xa0], lambda f: (0xa1, f.payload))
    task = asyncio.ensure_future(sfn.run())
    source = await y3.Source({y3_router.tcp!r}).connect()
    for i in range(2000):
        await source.send(0xa0, b"x" * 64)
    await anext(sink)
asyncio.run(main())
print("done")
"""
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr[-2000:]
        assert "Fatal" not in p.stderr, p.stderr[-2000:]


# --- Router-side content filters ------------------------------------------------------


def test_a_filtered_sink_gets_exactly_the_matches(y3_router: Y3Router) -> None:
    """`where=` declares a content filter the router evaluates (spec/filters.md): of 40
    readings, the sink receives exactly the 13 loud ones, in order; a filter the router
    refuses is the typed error `bad_filter`."""

    def reading(noise: float) -> bytes:
        return y3.encode({"tag": 0x10, "node": [{"tag": 0x11, "float32": noise}]})

    levels = [float(30 + (i * 7) % 50) for i in range(40)]
    loud = [n for n in levels if n > 60]

    async def main() -> None:
        where = "0x10/0x11:f32 > 60"
        async with y3.Sink(y3_router.addr, [0x10], where=where, **y3_router.options()) as sink:
            async with y3.Source(y3_router.addr, **y3_router.options()) as source:
                for noise in levels:
                    await source.send(0x10, reading(noise))
            got = []
            async for frame in sink:
                got.append(y3.get(frame.payload, [0x10, 0x11], as_="float32"))
                if len(got) == len(loud):
                    break
            assert got == loud
            # Nothing else was let through: a probe that matches arrives next.
            async with y3.Source(y3_router.addr, **y3_router.options()) as source:
                await source.send(0x10, reading(99.0))
            frame = await asyncio.wait_for(anext(sink), 5)
            assert y3.get(frame.payload, [0x10, 0x11], as_="float32") == 99.0
        with pytest.raises(y3.TransportError) as refused:
            await y3.Sink(y3_router.addr, [0x10], where="0x10/0x11 >", **y3_router.options()).connect()
        assert refused.value.kind == "bad_filter"

    run(main())
