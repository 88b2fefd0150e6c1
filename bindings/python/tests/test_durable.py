"""y3.DurableSource against real `y3 serve` processes federated through a real nats-server
with JetStream: its router SIGKILLed mid-stream and restarted on the same ports, the source
writes again what was not stored, and a sink on another router (a durable tag) gets every
frame exactly once.

nats-server comes from NATS_SERVER_BIN (scripts/test.sh installs it), else
target/tools/bin/nats-server at the repository root, else the PATH; without it the test is
skipped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from routers import Y3Router, needs_y3

import y3


def _nats_server() -> str:
    env = os.environ.get("NATS_SERVER_BIN", "")
    if env:
        return env
    tools = ROOT / "target" / "tools" / "bin" / "nats-server"
    if tools.exists():
        return str(tools)
    return shutil.which("nats-server") or ""


NATS_SERVER = _nats_server()
needs_nats = pytest.mark.skipif(not NATS_SERVER, reason="nats-server not found (NATS_SERVER_BIN; scripts/test.sh installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nats-server did not start"
                time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


TAG = 0x71


def _federated(url: str, name: str) -> str:
    return (
        f'[federation]\nurls = ["{url}"]\nname = "{name}"\ndurable_tags = [{TAG}]\n'
        "[federation.stream]\nreplicas = 1\nack_wait_ms = 1000\n"
    )


@needs_y3
@needs_nats
def test_durable_source_resends_what_a_killed_router_had_not_stored(nats_url: str, y3_serve: Callable[..., Y3Router]) -> None:
    a = y3_serve(config=_federated(nats_url, "a"))
    c = y3_serve(config=_federated(nats_url, "c"))
    n = 3000

    async def main() -> tuple[Counter[int], int]:
        seen: Counter[int] = Counter()
        async with y3.Sink(c.addr, [TAG], name="durable-sink", **c.options()) as sink:
            deadline = time.monotonic() + 10
            while sum(v for k, v in c.metrics().items() if k.startswith("y3_router_federation_subscriptions")) < 1:
                assert time.monotonic() < deadline, "no durable consumer on C"
                await asyncio.sleep(0.05)

            async def receive() -> None:
                while len(seen) < n:
                    try:
                        frame = await asyncio.wait_for(anext(sink), 5.0)
                    except (TimeoutError, StopAsyncIteration):
                        return
                    seen[int(frame.payload)] += 1

            receiving = asyncio.ensure_future(receive())
            backoff = y3.Backoff(initial=0.05, max=0.3, attempts=60)
            # TCP: the restarted router makes itself a new certificate, which a pin would refuse.
            source = y3.DurableSource(a.tcp, name="durable-source", backoff=backoff, transport="tcp")
            async with source:

                async def kill_and_restart() -> bool:
                    await asyncio.sleep(0.15)
                    finished = sending.done()
                    a.kill()  # no drain: what A had read and not stored is lost there
                    await asyncio.sleep(0.2)
                    await asyncio.to_thread(a.start)
                    return finished

                async def send() -> None:
                    for i in range(n):
                        await source.send(TAG, str(i).encode())
                        if i % 100 == 99:
                            await asyncio.sleep(0.005)

                sending = asyncio.ensure_future(send())
                chaos = asyncio.ensure_future(kill_and_restart())
                await sending
                assert await source.wait_stored(20.0), "the source's frames were not all stored"
                assert not await chaos, "the source had finished before A was killed"
                resent = source.resent
            await receiving
            await asyncio.sleep(0.3)  # a second copy would come now
            while True:
                try:
                    frame = await asyncio.wait_for(anext(sink), 0.2)
                except (TimeoutError, StopAsyncIteration):
                    break
                seen[int(frame.payload)] += 1
        return seen, resent

    try:
        seen, resent = asyncio.run(asyncio.wait_for(main(), 90))
    finally:
        a.stop()
        c.stop()
    missing = [i for i in range(n) if i not in seen]
    twice = [i for i, k in seen.items() if k > 1]
    print(f"router killed: the source wrote {resent} again; {len(seen)} distinct, missing {len(missing)}, twice {len(twice)}")
    assert (missing[:10], twice[:10]) == ([], [])


@needs_y3
def test_durable_function_and_source_through_one_router(y3_serve: Callable[..., Y3Router]) -> None:
    """Without a federation every frame is stored once routed: a durable function's
    outputs and a durable source's frames are all acknowledged, and all arrive."""
    router = y3_serve()
    n = 500

    async def main() -> tuple[list[bytes], bool]:
        async def relay(frame: y3.Frame) -> tuple[int, bytes]:
            return 0x73, frame.payload

        async with (
            y3.Sink(router.addr, [0x73], name="sink", **router.options()) as sink,
            y3.StreamFunction(router.addr, [0x72], relay, name="relay", durable=True, **router.options()),
        ):
            await router.wait_connections(2, "stream_function")
            async with y3.DurableSource(router.addr, name="meter", **router.options()) as source:
                for i in range(n):
                    await source.send(0x72, str(i).encode())
                stored = await source.wait_stored(10.0)
            got = [(await asyncio.wait_for(anext(sink), 10.0)).payload for _ in range(n)]
        return got, stored

    try:
        got, stored = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        router.stop()
    assert stored
    assert got == [str(i).encode() for i in range(n)]


@needs_y3
def test_durable_source_learns_which_frames_the_router_refused(y3_serve: Callable[..., Y3Router]) -> None:
    """A frame over the router's ``max_frame_len`` is refused, not stored: the source
    counts and lists it (tag, yomo-tid, reason), does not send it again, and ``close``
    returns ``False``; the sink gets the others once each."""
    router = y3_serve(config="[limits]\nmax_frame_len = 1024\n")

    async def main() -> tuple[list[bytes], int, list[tuple[int, str, str]], bool, int]:
        async with y3.Sink(router.addr, [0x74], name="refused-sink", **router.options()) as sink:
            await router.wait_connections(1, "stream_function")
            source = await y3.DurableSource(router.addr, name="refused-source", **router.options()).connect()
            for i in range(5):
                data = bytes(4096) if i == 2 else str(i).encode()
                await source.send(0x74, data, metadata={"yomo-tid": f"tid-{i}"})
            assert await source.wait_stored(10.0)
            refused, refusals, resent = source.refused, source.refusals, source.resent
            closed = await source.close(5.0)
            got = [(await asyncio.wait_for(anext(sink), 10.0)).payload for _ in range(4)]
            try:
                extra = await asyncio.wait_for(anext(sink), 0.3)
                got.append(extra.payload)
            except (TimeoutError, StopAsyncIteration):
                pass
        return got, refused, refusals, closed, resent

    try:
        got, refused, refusals, closed, resent = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        router.stop()
    assert got == [b"0", b"1", b"3", b"4"]
    assert (refused, refusals, resent) == (1, [(0x74, "tid-2", "too_long")], 0)
    assert closed is False
