#!/usr/bin/env python3
"""A stream function writing many outputs per input, and one to a target: YoMo's
``ctx.Write`` in a loop and ``ctx.WriteWithTarget``, on the Rust SDK.

It observes batches under tag 0x40, each a list of readings one per line, writes every
line under tag 0x41 (each keeps the batch's metadata, its ``yomo-tid`` included) and the
whole batch under tag 0x42 to the functions wanting target ``audit`` only. Against
``y3 serve``::

    y3 serve &
    python examples/python/splitter.py --addr 127.0.0.1:9000 &
    y3 observe --tag 0x41 &
    echo '{"payload_hex": "610a620a63"}' | y3 send --tag 0x40     # "a\\nb\\nc"

Stop with Ctrl-C; a summary (batches handled, lines written) is printed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import y3

BATCHES, LINES, AUDIT = 0x40, 0x41, 0x42


async def split(frame: y3.Frame, out: y3.Writer) -> None:
    """Writes every line, then the batch for ``audit``; each write waits for room."""
    for line in frame.payload.split(b"\n"):
        await out.write(LINES, line)
    await out.write_with_target(AUDIT, frame.payload, "audit")


async def run(addr: str, stop: asyncio.Event, **options: object) -> y3.StreamFunction:
    """Runs the splitter until ``stop`` is set."""
    async with y3.StreamFunction(addr, [BATCHES], split, name="splitter", **options) as sfn:
        await stop.wait()
    return sfn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:9000")
    args = parser.parse_args()

    async def serve() -> y3.StreamFunction:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        return await run(args.addr, stop)

    sfn = asyncio.run(serve())
    print(f"{sfn.handled} batches, {sfn.emitted} outputs, {sfn.errors} errors")


if __name__ == "__main__":
    main()
