"""The examples in the client docstrings (y3._client), run as doctests against a `y3 serve`
started here: `ADDR` is its TCP address; `wait_subscribed(n)` polls its metrics."""

from __future__ import annotations

import asyncio
import doctest

import pytest
import y3
import y3._client
from routers import Y3Router, needs_y3


@pytest.fixture
def router(y3_router: Y3Router) -> Y3Router:
    """This file's tests take conftest's `y3_router` by this name."""
    return y3_router


@needs_y3
def test_client_docstrings(router: Y3Router, monkeypatch: pytest.MonkeyPatch) -> None:
    # The examples connect over plain TCP (the default transport) to the router's TCP port.
    async def wait_subscribed(n: int) -> None:
        """Until the router counts `n` stream functions and sinks (from its metrics)."""
        await router.wait_connections(n, "stream_function")

    globs = {"asyncio": asyncio, "y3": y3, "ADDR": router.tcp, "wait_subscribed": wait_subscribed}
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in finder.find(y3._client, "y3._client", globs=globs) if t.examples]
    assert len(tests) >= 4, [t.name for t in tests]
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 12, result
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed (see stdout)"
