"""A stream function writing any number of outputs per input, and to a target, as YoMo's
``ctx.Write`` / ``ctx.WriteWithTarget`` do: returned as a list, yielded by an async
generator, or written through a :class:`y3.Writer`; against `y3 serve` and YoMo v1.22.0's
own zipper. Exact counts: 3 inputs × 300 outputs, every one once, each with its input's
``yomo-tid``; the targeted output reaches only the function wanting its target.

On `y3 serve`'s defaults the fan-out needs the router to cap loops per cycle rather than
deliveries per ``yomo-tid`` (``limits.max_deliveries_per_message``, 128 before).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import y3
from routers import Y3Router, YomoZipper, needs_y3, until_routed

INPUTS, FAN_OUT = 3, 300
IN, OUT, TARGETED, FROM_A, FROM_B = 0x40, 0x41, 0x42, 0x47, 0x48


def num(n: int) -> bytes:
    return n.to_bytes(4, "big")


def fanned(frame: y3.Frame) -> list[tuple[int, bytes]]:
    i = int.from_bytes(frame.payload, "big")
    return [(OUT, num(i * 1000 + k)) for k in range(FAN_OUT)]


def as_list(frame: y3.Frame) -> Any:
    if frame.payload == b"probe":
        return [(OUT, b"probe"), (TARGETED, b"probe", "a"), (TARGETED, b"probe", "b")]
    return [*fanned(frame), (TARGETED, frame.payload, "a")]


async def as_async_generator(frame: y3.Frame) -> AsyncIterator[Any]:
    for out in as_list(frame):
        yield out


async def through_writer(frame: y3.Frame, out: y3.Writer) -> None:
    for tag, data, *target in as_list(frame):
        if target:
            await out.write_with_target(tag, data, target[0])
        else:
            await out.write(tag, data)


HANDLERS = {"list": as_list, "async_generator": as_async_generator, "writer": through_writer}


async def fan_out(router: Y3Router | YomoZipper, handler: Any, durable: bool = False) -> y3.StreamFunction:
    opts = router.options()

    def relay(emit: int) -> Any:
        return lambda frame: (emit, frame.payload)

    async with y3.Sink(router.addr, [OUT, FROM_A, FROM_B], name="sink", **opts) as sink, y3.StreamFunction(
        router.addr, [TARGETED], relay(FROM_A), name="relay-a", wanted_target="a", **opts
    ), y3.StreamFunction(
        router.addr, [TARGETED], relay(FROM_B), name="relay-b", wanted_target="b", **opts
    ), y3.StreamFunction(
        router.addr, [IN], handler, name="splitter", durable=durable, **opts
    ) as splitter, y3.Source(router.addr, name="source", **opts) as source:
        probed: set[int] = set()
        got: dict[int, list[y3.Frame]] = {OUT: [], FROM_A: [], FROM_B: []}

        async def collect() -> None:
            async for frame in sink:
                if frame.payload == b"probe":
                    probed.add(frame.tag)
                else:
                    got[frame.tag].append(frame)

        task = asyncio.ensure_future(collect())
        await until_routed(lambda: source.send(IN, b"probe"), lambda: len(probed) == 3)
        tids = {}
        for i in range(INPUTS):
            await source.send(IN, num(i))
        await source.flush()
        want = INPUTS * (FAN_OUT + 1)
        for _ in range(2000):
            if sum(len(v) for v in got.values()) >= want:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # nothing more may come
        task.cancel()
        await asyncio.wait([task])

        outs = [int.from_bytes(f.payload, "big") for f in got[OUT]]
        assert sorted(outs) == [i * 1000 + k for i in range(INPUTS) for k in range(FAN_OUT)], len(outs)
        assert sorted(int.from_bytes(f.payload, "big") for f in got[FROM_A]) == list(range(INPUTS))
        assert got[FROM_B] == []
        # Every output carries its input's yomo-tid (and the source's id), no target.
        for f in got[OUT]:
            tids.setdefault(int.from_bytes(f.payload, "big") // 1000, set()).add(f.tid)
            assert f.source_id == source.id
            assert "yomo-target" not in f.metadata
        assert all(len(t) == 1 for t in tids.values()) and len({t.pop() for t in tids.values()}) == INPUTS
        return splitter


@pytest.mark.parametrize("style", HANDLERS)
def test_300_outputs_per_input_and_one_to_a_target(router: Y3Router | YomoZipper, style: str) -> None:
    splitter = asyncio.run(asyncio.wait_for(fan_out(router, HANDLERS[style]), 60))
    assert splitter.errors == 0 and splitter.unwritten == 0
    # A probe gets 3 outputs, an input 301.
    assert splitter.emitted == 3 * (splitter.handled - INPUTS) + INPUTS * (FAN_OUT + 1)


@needs_y3
def test_a_durable_function_writes_300_outputs_per_input(y3_serve: Callable[..., Y3Router]) -> None:
    router = y3_serve()
    try:
        splitter = asyncio.run(asyncio.wait_for(fan_out(router, through_writer, durable=True), 60))
    finally:
        router.stop()
    assert splitter.errors == 0


@needs_y3
def test_a_write_after_the_function_stopped_raises(y3_serve: Callable[..., Y3Router]) -> None:
    router = y3_serve()
    kept: list[y3.Writer] = []

    def keep(frame: y3.Frame, out: y3.Writer) -> None:
        kept.append(out)

    async def main() -> None:
        opts = router.options()
        fn = y3.StreamFunction(router.addr, [IN], keep, name="keeper", **opts)
        async with fn, y3.Source(router.addr, **opts) as source:
            await until_routed(lambda: source.send(IN, b"probe"), lambda: bool(kept))
            await kept[0].write(OUT, b"live")
        with pytest.raises(y3.TransportError) as e:
            await kept[0].write(OUT, b"late")
        assert e.value.kind == "closed"
        with pytest.raises(y3.TransportError):
            await kept[0].write_with_target(OUT, b"late", "t")

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        router.stop()


def test_a_bad_output_is_a_handler_error() -> None:
    with pytest.raises(TypeError):
        y3._client._output((OUT, "text"))
    with pytest.raises(TypeError):
        y3._client._output((OUT, b"x", 5))
    assert y3._client._output((OUT, b"x")) == (OUT, b"x", "")
    assert y3._client._output((OUT, b"x", "t")) == (OUT, b"x", "t")


@needs_y3
def test_the_splitter_example(y3_serve: Callable[..., Y3Router]) -> None:
    """examples/python/splitter.py: every line of every batch, each batch to "audit" once."""
    path = Path(__file__).resolve().parents[3] / "examples" / "python" / "splitter.py"
    spec = importlib.util.spec_from_file_location("splitter", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    router = y3_serve()
    batches = [b"\n".join(f"{b}-{i}".encode() for i in range(100)) for b in range(2)]

    async def main() -> tuple[list[bytes], list[bytes], y3.StreamFunction]:
        audited: list[bytes] = []
        stop, opts = asyncio.Event(), router.options()
        splitter = asyncio.ensure_future(example.run(router.addr, stop, **opts))
        async with y3.Sink(router.addr, [example.LINES], **opts) as sink, y3.StreamFunction(
            router.addr, [example.AUDIT], lambda frame: audited.append(frame.payload), wanted_target="audit", **opts
        ), y3.Source(router.addr, **opts) as source:
            lines: list[bytes] = []
            probes: list[bytes] = []

            async def collect() -> None:
                async for frame in sink:
                    (probes if frame.payload == b"probe" else lines).append(frame.payload)

            task = asyncio.ensure_future(collect())
            await until_routed(
                lambda: source.send(example.BATCHES, b"probe"), lambda: bool(probes) and b"probe" in audited
            )
            for batch in batches:
                await source.send(example.BATCHES, batch)
            for _ in range(2000):
                if len(lines) >= 200:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # nothing more may come
            task.cancel()
            await asyncio.wait([task])
        stop.set()
        return lines, [a for a in audited if a != b"probe"], await splitter

    try:
        lines, audited, sfn = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        router.stop()
    assert sorted(lines) == sorted(line for batch in batches for line in batch.split(b"\n"))
    assert sorted(audited) == sorted(batches)
    # A probe gets 2 outputs (its line, the audit copy), a batch 101.
    assert sfn.errors == 0 and sfn.emitted == 2 * (sfn.handled - 2) + 2 * 101
