"""Helpers for the Sentinel tests (and the cluster tests, which run the same app): a
deployment fixture (skipped, with the reason, only when no sentinel binary is on PATH), the
run log of apps.sentinel_app, an enqueue that a failover may refuse, an async enqueue on a
loop of its own, a /metrics scrape that may not answer yet, and a master's clean stop."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from apps import sentinel_app
from metrics_util import scrape

import cogworker
from cogworker.testing.sentinel import Sentinels, sentinel_command

PASSWORD = "s3ntinel-pw-zq"


@pytest.fixture
def sentinels() -> Iterator[Sentinels]:
    """A master, a replica and 3 sentinels of this test's own (password-protected)."""
    if sentinel_command() is None:
        pytest.skip("no redis-sentinel (nor redis-server --sentinel) on PATH: apt-get install redis-sentinel")
    deployment = Sentinels(password=PASSWORD).start()
    yield deployment
    deployment.cleanup()


@pytest.fixture
def sentinel_config(sentinels: Sentinels) -> Iterator[cogworker.Config]:
    cogworker.config._config = None  # from the defaults (wait_replicas 0), not an earlier test's
    yield cogworker.configure(redis_url=sentinels.url(), namespace="cogworker")
    cogworker.config._config = None  # no later test may find this deployment's URL


def runs(log: Path) -> tuple[Counter[str], Counter[str]]:
    """How many times each tag started and ended."""
    started: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    if log.exists():
        for line in log.read_text().splitlines():
            event, tag = line.split()[:2]
            (started if event == "start" else ended)[tag] += 1
    return started, ended


def try_enqueue(tag: str, *args: Any) -> Any:
    """``logged.enqueue(tag, *args)``, or None while Redis refuses it (a failover)."""
    try:
        return sentinel_app.logged.enqueue(tag, *args)
    except cogworker.store.ConnectionError:
        return None


async def enqueue_async(tag: str) -> Any:
    """``logged.enqueue_async(tag)`` on this loop, its async client closed after."""
    from cogworker.client import aio

    try:
        return await sentinel_app.logged.enqueue_async(tag)
    finally:
        await aio.aclose()


def scraped(port: int) -> Any:
    """What /metrics on ``port`` says, or None while nothing answers there."""
    try:
        return scrape(port)
    except OSError:
        return None


def finish(master: Any) -> str:
    """Stops ``master`` (TERM, then whatever is left) and returns its log."""
    try:
        if master.alive():
            master.signal(signal.SIGTERM)
            master.wait_exit()
        return master.output()
    finally:
        master.stop()
