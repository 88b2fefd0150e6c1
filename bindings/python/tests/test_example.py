"""examples/python/noise_alert.py, run as its docstring says: against `y3 serve`, the
readings sent by the Rust client `y3 send`, the alerts taken by a Python sink."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import subprocess
import sys
from typing import Any
from pathlib import Path

import pytest
import y3
from routers import Y3_BIN, Y3Router, needs_y3

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "python" / "noise_alert.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("noise_alert", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def router(y3_router: Y3Router) -> Y3Router:
    """This file's tests take conftest's `y3_router` by this name."""
    return y3_router


def test_the_sensor_is_the_demos() -> None:
    # `y3 demo`'s first readings: 71.2 (loud), 45.0, 51.4, 46.2, 61.6 (loud).
    noises = [r["node"][0]["float32"] for r in load_example().readings(5)]
    assert noises == [71.2, 45.0, 51.4, 46.2, 61.6]


@needs_y3
@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_noise_alert_against_y3_serve(router: Y3Router, transport: str) -> None:
    example, n = load_example(), 200
    loud = [r["node"][0]["float32"] for r in example.readings(n) if r["node"][0]["float32"] > 60.0]
    addr = router.tcp if transport == "tcp" else router.quic
    trust = [] if transport == "tcp" else ["--pin", router.pin]
    sfn = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--addr", addr, "--transport", transport, *trust, "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
    )

    async def main() -> list[tuple[float, float]]:
        opts: dict[str, Any] = {"transport": transport, "pin": router.pin} if transport == "quic" else {}
        async with y3.Sink(addr, [0x20], **opts) as sink:
            await router.wait_connections(2, "stream_function")
            sensor = subprocess.Popen([sys.executable, str(EXAMPLE), "--readings", str(n)], stdout=subprocess.PIPE)
            send = subprocess.run(
                [Y3_BIN, "send", "--addr", addr, "--transport", transport, *trust, "--tag", "0x10"],
                stdin=sensor.stdout,
                capture_output=True,
                text=True,
                timeout=30,
            )
            sensor.wait()
            assert send.returncode == 0, send.stderr
            alerts = []
            async for frame in sink:
                alerts.append(tuple(y3.decode(frame.payload, {"tag": 0x20, "node": [{"tag": 0x21, "type": "float32"}, {"tag": 0x22, "type": "float32"}]}).values()))
                if len(alerts) == len(loud):
                    return alerts
        raise AssertionError("the sink ended")

    try:
        alerts = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        sfn.send_signal(signal.SIGINT)
        out, _ = sfn.communicate(timeout=10)
    assert [a[0] for a in alerts] == pytest.approx(loud, abs=1e-4)
    assert {a[1] for a in alerts} == {60.0}
    assert sfn.returncode == 0, out
    assert f"{n} readings, {len(loud)} alerts, 0 errors" in out
