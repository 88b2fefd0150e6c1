"""Routers and peers for the client tests: `y3 serve` (Y3_BIN; its addresses and pin from
its ready file) and YoMo v1.22's own zipper and stream function (`yomo-peer`, YOMO_PEER),
each a child process on free loopback ports, stopped by the fixture that started it.

`scripts/python-test.sh` builds both and exports their paths; run alone, pytest skips the
tests whose program is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Y3_BIN = os.environ.get("Y3_BIN", "")
YOMO_PEER = os.environ.get("YOMO_PEER", "")

needs_y3 = pytest.mark.skipif(not Y3_BIN, reason="Y3_BIN is not set (scripts/python-test.sh builds y3)")
needs_yomo = pytest.mark.skipif(not YOMO_PEER, reason="YOMO_PEER is not set (scripts/python-test.sh builds it with go)")


def _stop(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


READY_FILE = "ready.json"
"""The ready file's name in a router's directory (`y3 serve --ready-file`)."""


def wait_ready(proc: subprocess.Popen[Any], path: Path, stderr: Callable[[], str], timeout: float = 20.0) -> dict[str, Any]:
    """Waits for `y3 serve`'s ready file at `path` (docs/operations.md, "The ready file"):
    one JSON document written atomically once every listener is bound. Raises when the
    process exits first (with `stderr()`) or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ready: dict[str, Any] = json.loads(path.read_text())
            if ready["pid"] == proc.pid:
                return ready
        except FileNotFoundError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"y3 serve exited ({proc.returncode}) before it was ready: {stderr()}")
        time.sleep(0.005)
    raise RuntimeError(f"y3 serve wrote no ready file within {timeout} s: {stderr()}")


class Y3Router:
    """`y3 serve` on free ports (kept across :meth:`restart`), its metrics on another, in
    the directory `tmp` (its ready file, log, dev certificate and state): where every test
    gets one, through the `y3_serve` fixture (conftest.py)."""

    kind = "y3"

    def __init__(
        self,
        tmp: Path,
        *,
        token: str | None = None,
        policy: str | None = None,
        tcp_tls: bool = False,
        config: str | None = None,
        rust_log: str = "warn",
        stop_grace: float = 5.0,
    ) -> None:
        tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.tmp, self.token, self.policy, self.tcp_tls = tmp, token, policy, tcp_tls
        # Its log's level (RUST_LOG), and how long a stop waits after SIGTERM (the drain,
        # saved state) before SIGKILL.
        self.rust_log, self.stop_grace = rust_log, stop_grace
        self.config: Path | None = None
        if config is not None:
            self.config = tmp / "y3-serve.toml"
            self.config.write_text(config)
        self.tcp = self.quic = "127.0.0.1:0"
        # The MQTT listener's address ("" when the config has none): the config's
        # `[mqtt] listen`, which keeps its port across restarts only when it names one.
        self.mqtt = ""
        self.metrics_url = ""
        self.pin = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        args = [
            Y3_BIN, "serve", "--tcp", self.tcp, "--quic", self.quic, "--metrics", "127.0.0.1:0",
            "--dev-cert-out", str(self.tmp / "dev-cert.pem"),
        ]  # fmt: skip
        if self.tcp_tls:
            args.append("--tcp-tls")
        if self.policy:
            args += ["--policy", self.policy]
        if self.config is not None:
            args += ["--config", str(self.config)]
        env = dict(os.environ, RUST_LOG=self.rust_log)
        env.pop("Y3_TOKEN", None)
        if self.token:
            env["Y3_TOKEN"] = self.token  # not on the command line
        ready_file = self.tmp / READY_FILE
        ready_file.unlink(missing_ok=True)
        args += ["--ready-file", str(ready_file)]
        # Its dev certificate and state stay in its directory, out of ~/.cache and ~/.local.
        env["XDG_RUNTIME_DIR"] = env["XDG_STATE_HOME"] = str(self.tmp)
        with open(self.tmp / "y3-serve.log", "a") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)
        ready = wait_ready(self.proc, ready_file, lambda: (self.tmp / "y3-serve.log").read_text()[-2000:])
        listeners = ready["listeners"]
        self.tcp, self.quic = listeners["tcp"], listeners["quic"]
        self.mqtt = listeners.get("mqtt", "")
        self.metrics_url = f"http://{listeners['metrics']}/metrics"
        self.pin = ready["certificate"]["sha256"]

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc, self.stop_grace)
            self.proc = None

    def log(self) -> str:
        """Its log so far (stderr, every lifetime)."""
        return (self.tmp / "y3-serve.log").read_text()

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL: no drain; whatever the router held is lost with it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    @property
    def addr(self) -> str:
        return self.quic

    def options(self) -> dict[str, Any]:
        """Client options of the default transport of these tests (QUIC, pinned)."""
        opts: dict[str, Any] = {"transport": "quic", "pin": self.pin}
        if self.token:
            opts["token"] = self.token
        return opts

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def connections(self, client_type: str | None = None) -> int:
        total = 0.0
        for name, value in self.metrics().items():
            if name.startswith("y3_router_connections{") and (client_type is None or f'"{client_type}"' in name):
                total += value
        return int(total)

    async def wait_connections(self, n: int, client_type: str | None = None, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while (got := self.connections(client_type)) != n:
            if time.monotonic() > deadline:
                raise AssertionError(f"{got} {client_type or ''} connections, expected {n}")
            await asyncio.sleep(0.02)


@pytest.fixture
def y3_serve(tmp_path: Path) -> Iterator[Callable[..., Y3Router]]:
    """Starts `y3 serve` for one test: each call (keyword arguments as
    :class:`Y3Router` takes them) is a router in its own directory under `tmp_path`, its
    addresses and pin read from its ready file; all are stopped at teardown. conftest.py
    and interop/mqtt/test_paho.py take it from here.
    """
    started: list[Y3Router] = []

    def start(**kwargs: Any) -> Y3Router:
        router = Y3Router(tmp_path / f"y3-serve-{len(started)}", **kwargs)
        started.append(router)
        return router

    yield start
    for router in started:
        router.stop()


class YomoZipper:
    """YoMo v1.22.0's own zipper (`yomo-peer zipper`), QUIC only, self-signed."""

    kind = "yomo"

    def __init__(self, tmp: Path, *, token: str | None = None) -> None:
        self.token = token
        args = [YOMO_PEER, "zipper", "--addr", "127.0.0.1:0"]
        if token:
            args += ["--token", token]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(tmp / "yomo.log", "a"), text=True)
        assert self.proc.stdout is not None
        first = json.loads(self.proc.stdout.readline() or "{}")
        if "listening" not in first:
            raise RuntimeError(f"yomo-peer zipper: {first}")
        self.addr: str = first["listening"]

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"transport": "quic", "insecure": True}
        if self.token:
            opts["token"] = self.token
        return opts

    def stop(self) -> None:
        _stop(self.proc)


class YomoRelay:
    """A YoMo stream function (`yomo-peer sfn`) relaying `observe` to `emit`, until stopped."""

    def __init__(self, router: Y3Router | YomoZipper, tmp: Path, observe: int, emit: int) -> None:
        args = [YOMO_PEER, "sfn", "--addr", router.addr, "--observe", hex(observe), "--emit", hex(emit), "--name", "go-relay"]
        if router.token:
            args += ["--token", router.token]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(tmp / "yomo-sfn.log", "a"), text=True)
        assert self.proc.stdout is not None
        first = json.loads(self.proc.stdout.readline() or "{}")
        if "connected" not in first:
            raise RuntimeError(f"yomo-peer sfn: {first}")

    def stop(self) -> dict[str, Any]:
        _stop(self.proc)
        assert self.proc.stdout is not None
        lines = [json.loads(line) for line in self.proc.stdout.read().splitlines() if line.strip()]
        return lines[-1] if lines else {}


async def until_routed(send: Callable[[], Awaitable[None]], received: Callable[[], bool], timeout: float = 10.0) -> None:
    """Sends probes until one arrives: the path source → ... → sink is up."""
    deadline = time.monotonic() + timeout
    while not received():
        if time.monotonic() > deadline:
            raise AssertionError("nothing arrived")
        await send()
        await asyncio.sleep(0.05)
