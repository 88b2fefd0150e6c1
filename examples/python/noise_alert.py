#!/usr/bin/env python3
"""The `y3 demo` stream function in Python: noise alerts.

It observes readings under tag 0x10, YoMo's example
``NoiseData{Noise f32 0x11, Time i64 0x12, From string 0x13}``, reads only the noise field
(``y3.get`` walks the headers to 0x10/0x11 and decodes nothing else), and above the
threshold emits ``Alert{Noise f32 0x21, Threshold f32 0x22}`` under tag 0x20, as
``crates/y3-cli/src/demo.rs`` does. The alert keeps the reading's metadata (its
``yomo-tid``), so a sink can match alerts to readings.

Against ``y3 serve``, with the Rust client ``y3 send`` as the noise sensor (this script
prints the demo's deterministic readings as typed JSON lines for it) and ``y3 observe``
as the sink::

    y3 serve &
    python examples/python/noise_alert.py --addr 127.0.0.1:9000 &
    y3 observe --tag 0x20 --path 0x20/0x21 --as float32 &
    python examples/python/noise_alert.py --readings 40 --interval-ms 50 | y3 send --tag 0x10

Over QUIC, pin the certificate ``y3 serve`` prints: ``--transport quic --pin HEX``. The
token comes from ``Y3_TOKEN``, as for the ``y3`` clients. Stop with Ctrl-C; a summary
(readings handled, alerts emitted, handler errors) is printed on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import struct
import sys
import time
from typing import Any

import y3

READINGS = 0x10
ALERTS = 0x20


class Sensor:
    """The demo's deterministic noise sensor: a quiet room with occasional loud moments
    (the same 64-bit LCG and constants as `Sensor` in crates/y3-cli/src/demo.rs)."""

    def __init__(self, seed: int = 0x5933_2021) -> None:
        self.state = seed

    def _unit(self) -> float:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % 2**64
        return (self.state >> 40) / float(1 << 24)

    def read(self) -> float:
        # f32 arithmetic, step by step, as in Rust; Rust's round() is half away from zero.
        base = _f32(42.0 + _f32(10.0 * self._unit()))
        spike = _f32(30.0 * self._unit()) if self._unit() < 0.3 else 0.0
        tenths = _f32(_f32(base + spike) * 10.0)
        return _f32(math.floor(tenths + 0.5) / 10.0)


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def readings(n: int, sensor: str = "noise-sensor-1") -> list[dict[str, object]]:
    """`n` readings as typed items (what `y3.encode` and `y3 send` take)."""
    s, out = Sensor(), []
    for _ in range(n):
        out.append(
            {
                "tag": READINGS,
                "node": [
                    {"tag": 0x11, "float32": round(s.read(), 1)},
                    {"tag": 0x12, "int64": int(time.time() * 1000)},
                    {"tag": 0x13, "string": sensor},
                ],
            }
        )
    return out


def alert_of(payload: bytes, threshold: float) -> bytes | None:
    """The function's work: the noise field alone, and an Alert packet above `threshold`."""
    noise = y3.get(payload, [READINGS, 0x11], as_="float32")
    if noise is None or noise <= threshold:
        return None
    return y3.encode({"tag": ALERTS, "node": [{"tag": 0x21, "float32": noise}, {"tag": 0x22, "float32": threshold}]})


async def serve(args: argparse.Namespace) -> int:
    threshold = args.threshold

    async def handler(frame: y3.Frame) -> tuple[int, bytes] | None:
        alert = alert_of(frame.payload, threshold)
        if alert is None:
            return None
        if not args.quiet:
            noise = y3.get(alert, "0x20/0x21", as_="float32")
            print(f"ALERT  tid {frame.tid}  {noise:.1f} dB > {threshold:.1f} dB", flush=True)
        return ALERTS, alert

    options: dict[str, Any] = {"transport": args.transport, "name": "noise-alert"}
    if args.pin:
        options["pin"] = args.pin
    if args.ca:
        options["ca"] = args.ca
    if args.insecure:
        options["insecure"] = True
    if os.environ.get("Y3_TOKEN"):
        options["token"] = os.environ["Y3_TOKEN"].strip()
    sfn = y3.StreamFunction(args.addr, [READINGS], handler, **options)
    run = asyncio.ensure_future(sfn.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, sfn.stop)
    print(f"noise-alert: observing 0x{READINGS:02x} at {args.addr} ({args.transport}), alerts above {threshold:.1f} dB", flush=True)
    try:
        await run
    except y3.TransportError as e:
        print(f"noise-alert: {e}", file=sys.stderr)
        return 1
    finally:
        print(f"noise-alert: {sfn.handled} readings, {sfn.emitted} alerts, {sfn.errors} errors", flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="127.0.0.1:9000", help="router address (default %(default)s)")
    p.add_argument("--transport", choices=["tcp", "tls", "quic"], default="tcp")
    p.add_argument("--pin", help="SHA-256 fingerprint of the router's certificate (TLS, QUIC)")
    p.add_argument("--ca", help="PEM file of the router's certificate or CA")
    p.add_argument("--insecure", action="store_true", help="accept any certificate (development)")
    p.add_argument("--threshold", type=float, default=60.0, help="alert above this many dB (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.add_argument("--readings", type=int, metavar="N", help="print N readings as typed JSON lines for `y3 send`, and exit")
    p.add_argument("--interval-ms", type=int, default=0, help="with --readings: pause between lines")
    args = p.parse_args()
    if args.readings is not None:
        for item in readings(args.readings):
            print(json.dumps(item), flush=True)
            if args.interval_ms:
                time.sleep(args.interval_ms / 1000)
        return 0
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
