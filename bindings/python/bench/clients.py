#!/usr/bin/env python3
"""Python clients through `y3 serve`, next to the Rust clients: 64-byte messages, one sink.

    bindings/python/.venv/bin/python bindings/python/bench/clients.py [--y3 target/release/y3]

Measured, each against a fresh `y3 serve` (a release build: pass --y3, or Y3_BIN):

- ``python``: a Python `y3.Source` → router → a Python `y3.Sink` in another process.
  Flat out: msg/s from the first send to the last arrival. Paced (``--rate``): one-way
  latency p50/p99, from the send time written into each payload (CLOCK_MONOTONIC, shared
  by the processes of one machine) to its arrival in the sink's `async for`.
- ``go → python sink`` (with ``--yomo-peer`` or YOMO_PEER): YoMo's Go source flat out
  into the Python sink over QUIC. On a 2-core machine YoMo's source is the limit (about
  57 k msg/s with no sink at all); the ``sink msg/s`` column of the ``python`` row (the
  rate at which the sink drains what arrived, first to last frame) is the sink's.
- ``rust``: the network lab's own e2e case for the Rust SDK's Source and Sink
  (``y3-lab net e2e --only y3-router-tcp --sizes 64 --subs 1``, the same message counts
  and rate; pass --lab, or Y3_LAB), whose router is a separate process too.

Prints one table and the ratios python / rust. A script beside the lab (``y3-lab``): it
runs the lab's e2e case and reads its JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import y3

TAG = 0x33
SIZE = 64
ROOT = Path(__file__).resolve().parents[3]


def stamp(seq: int, phase: int) -> bytes:
    # phase (1) + seq (4) + monotonic send time in ns (8), padded to SIZE.
    return bytes([phase]) + seq.to_bytes(4, "big") + time.monotonic_ns().to_bytes(8, "big") + bytes(SIZE - 13)


# --- the sink process ----------------------------------------------------------------------


async def sink_role(addr: str, transport: str, count: int, paced: int) -> None:
    """Prints `ready`, then one JSON line per phase: the flat-out phase (`count` frames of
    any kind) and the paced phase (`paced` frames of phase 2)."""
    opts = {"transport": transport, "insecure": True} if transport != "tcp" else {}
    async with y3.Sink(addr, [TAG], name="py-bench-sink", batch=1024, **opts) as sink:
        print("ready", flush=True)
        n, first, last = 0, 0.0, 0.0
        while n < count:
            batch = await sink.recv_batch()
            if batch is None:
                break
            now = time.perf_counter()
            if n == 0:
                first = now
            n += len(batch)
            last = now
        print(json.dumps({"phase": "flat", "received": n, "seconds": last - first}), flush=True)
        if paced:
            lat: list[float] = []
            async for frame in sink:
                now = time.monotonic_ns()
                p = frame.payload
                if p[0] == 2:
                    lat.append((now - int.from_bytes(p[5:13], "big")) / 1000)
                    if len(lat) == paced:
                        break
            lat.sort()
            print(json.dumps({"phase": "paced", "received": len(lat), "p50_us": pct(lat, 50), "p99_us": pct(lat, 99)}), flush=True)


def pct(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-p / 100 * len(sorted_values) // 1))))
    return sorted_values[rank - 1]


# --- the orchestrator ----------------------------------------------------------------------


class Router:
    def __init__(self, y3_bin: str, tmp: Path) -> None:
        ready = tmp / "ready.json"  # `y3 serve --ready-file` (docs/operations.md, "The ready file")
        args = [y3_bin, "serve", "--tcp", "127.0.0.1:0", "--quic", "127.0.0.1:0", "--metrics", "", "--dev-cert-out", str(tmp / "cert.pem"), "--ready-file", str(ready)]
        ready.unlink(missing_ok=True)
        env = dict(os.environ, Y3_TOKEN="", XDG_RUNTIME_DIR=str(tmp), XDG_STATE_HOME=str(tmp))
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("y3 serve did not start")
            time.sleep(0.005)
        listeners = json.loads(ready.read_text())["listeners"]
        self.tcp, self.quic = listeners["tcp"], listeners["quic"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def start_sink(addr: str, transport: str, count: int, paced: int) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--role", "sink", "--addr", addr, "--transport", transport, "--count", str(count), "--paced", str(paced)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("the sink did not start")
    time.sleep(0.2)
    return proc


def sink_result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    result: dict[str, Any] = json.loads(proc.stdout.readline())
    return result


async def python_source(addr: str, messages: int, paced: int, rate: int) -> float:
    async with y3.Source(addr, name="py-bench-source", send_queue=4096) as source:
        start = time.perf_counter()
        for i in range(messages):
            await source.send(TAG, stamp(i, 1))
        await source.flush()
        sent = time.perf_counter() - start
        await asyncio.sleep(0.5)
        begin = time.perf_counter()
        for i in range(paced):
            due = begin + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await source.send(TAG, stamp(i, 2))
        await source.flush()
    return sent


def run_python(y3_bin: str, tmp: Path, messages: int, paced: int, rate: int) -> dict[str, float]:
    router = Router(y3_bin, tmp)
    try:
        sink = start_sink(router.tcp, "tcp", messages, paced)
        start = time.perf_counter()
        asyncio.run(python_source(router.tcp, messages, 0, rate))
        flat = sink_result(sink)
        total = time.perf_counter() - start
        asyncio.run(python_source(router.tcp, 0, paced, rate))
        lat = sink_result(sink)
        sink.wait(30)
    finally:
        router.stop()
    return {
        "msg_per_s": messages / total if flat["received"] == messages else float("nan"),
        "sink_msg_per_s": messages / float(flat["seconds"]) if flat["seconds"] else float("nan"),
        "p50_us": float(lat["p50_us"]),
        "p99_us": float(lat["p99_us"]),
    }


def run_go_into_python(y3_bin: str, yomo_peer: str, tmp: Path, messages: int) -> float:
    router = Router(y3_bin, tmp)
    try:
        sink = start_sink(router.quic, "quic", messages, 0)
        src = subprocess.run(
            [yomo_peer, "source", "--addr", router.quic, "--tag", hex(TAG), "--count", str(messages), "--size", str(SIZE)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if src.returncode != 0:
            raise SystemExit(f"yomo-peer source failed: {src.stdout[-500:]}")
        flat = sink_result(sink)
        sink.wait(30)
    finally:
        router.stop()
    return messages / float(flat["seconds"]) if flat["received"] == messages and flat["seconds"] else float("nan")


def run_rust(lab_bin: str, tmp: Path, messages: int, paced: int, rate: int) -> dict[str, float]:
    out = tmp / "rust.json"
    args = [lab_bin, "net", "e2e", "--only", "y3-router-tcp", "--sizes", str(SIZE), "--subs", "1",
            "--messages", str(messages), "--paced", str(paced), "--rate", str(rate), "--runs", "1",
            "--json", str(out), "--out", str(tmp / "lab")]  # fmt: skip
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    rec = next(r for r in json.loads(out.read_text())["records"] if r["impl"] == "y3-router-tcp")
    # A lab record keeps its figures under `metrics` (crates/y3-lab/src/record.rs).
    m = rec["metrics"]
    return {"msg_per_s": m["msg_per_s"], "p50_us": m.get("p50_us", float("nan")), "p99_us": m.get("p99_us", float("nan"))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--y3", default=os.environ.get("Y3_BIN") or str(ROOT / "target" / "release" / "y3"))
    p.add_argument("--lab", default=os.environ.get("Y3_LAB") or str(ROOT / "target" / "release" / "y3-lab"))
    p.add_argument("--yomo-peer", default=os.environ.get("YOMO_PEER", ""))
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--paced", type=int, default=5_000)
    p.add_argument("--rate", type=int, default=5_000)
    p.add_argument("--runs", type=int, default=3, help="medians of this many runs")
    p.add_argument("--no-rust", action="store_true")
    p.add_argument("--smoke", action="store_true",
                   help="seconds, tiny counts (1 run, 2,000 messages, 200 paced): the test command's check that it still runs")
    p.add_argument("--role", choices=["sink"], help=argparse.SUPPRESS)
    p.add_argument("--addr", help=argparse.SUPPRESS)
    p.add_argument("--transport", default="tcp", help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.smoke:
        args.runs, args.messages, args.paced, args.rate = 1, 2_000, 200, 2_000
    if args.role == "sink":
        asyncio.run(sink_role(args.addr, args.transport, args.count, args.paced))
        return 0

    rows: dict[str, list[dict[str, float]]] = {"python": [], "go → python sink": [], "rust": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for run in range(args.runs):
            rows["python"].append(run_python(args.y3, tmp, args.messages, args.paced, args.rate))
            if args.yomo_peer:
                rows["go → python sink"].append({"sink_msg_per_s": run_go_into_python(args.y3, args.yomo_peer, tmp, args.messages)})
            if not args.no_rust:
                rows["rust"].append(run_rust(args.lab, tmp, args.messages, args.paced, args.rate))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)

    def med(name: str, key: str) -> float:
        values = [r[key] for r in rows[name] if key in r]
        return statistics.median(values) if values else float("nan")

    print(f"64 B, 1 sink, TCP unless noted; {args.messages} messages flat out, {args.paced} paced at {args.rate} msg/s; medians of {args.runs} runs")
    print(f"{'clients':<26}{'msg/s':>12}{'sink msg/s':>12}{'p50 µs':>10}{'p99 µs':>10}")
    for name in rows:
        if rows[name]:
            print(f"{name:<26}{med(name, 'msg_per_s'):>12,.0f}{med(name, 'sink_msg_per_s'):>12,.0f}{med(name, 'p50_us'):>10.0f}{med(name, 'p99_us'):>10.0f}")
    if rows["rust"]:
        print(f"python / rust: msg/s {med('python', 'msg_per_s') / med('rust', 'msg_per_s'):.2f}×, p50 {med('python', 'p50_us') / med('rust', 'p50_us'):.2f}×, p99 {med('python', 'p99_us') / med('rust', 'p99_us'):.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
