"""Helpers for the Sentinel tests: a deployment fixture (skipped, with the reason, only
when no sentinel binary is on PATH) and the run log of apps.sentinel_app."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

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
