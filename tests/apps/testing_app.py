"""Jobs for tests/test_testing.py (cogworker.testing's inline and fake modes): each run is
recorded in this process (``runs``), since those modes run jobs here, without Redis."""

from __future__ import annotations

import asyncio

import cogworker

runs: list[tuple[str, object]] = []
failures_left: dict[str, int] = {}


@cogworker.job
def add(x: int, y: int) -> int:
    runs.append(("add", (x, y)))
    return x + y


@cogworker.job
def record(items: list[int], *, tag: str = "") -> None:
    runs.append(("record", (items, tag)))


@cogworker.job(retry=3, backoff=lambda count, error: 10 * count)
def flaky(key: str) -> None:
    """Fails while ``failures_left[key]`` is above zero."""
    runs.append(("flaky", key))
    if failures_left.get(key, 0) > 0:
        failures_left[key] -= 1
        raise ValueError(f"flaky {key}")


@cogworker.job(retry=0)
def boom(tag: str) -> None:
    runs.append(("boom", tag))
    raise RuntimeError(f"boom {tag}")


@cogworker.job
def fan_out(n: int) -> None:
    """Enqueues ``n`` more jobs: in fake mode they wait for the drain, which runs them too."""
    runs.append(("fan_out", n))
    for i in range(n):
        add.enqueue(i, i)


@cogworker.job
async def nap(tag: str) -> str:
    await asyncio.sleep(0)
    runs.append(("nap", tag))
    return tag
