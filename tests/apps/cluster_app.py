"""Jobs for the Redis Cluster tests. Each run appends its start and end to the file named
by $COGWORKER_TEST_LOG (the app's own keys would live in another slot than the namespace's:
a file needs no second client), one line each, as apps.sentinel_app does."""

from __future__ import annotations

import os
import time

import cogworker
from apps.sentinel_app import _log, logged  # noqa: F401 (a job of this app too)


def _started(tag: str) -> int:
    path = os.environ["COGWORKER_TEST_LOG"]
    if not os.path.exists(path):
        return 0
    with open(path) as log:
        return sum(1 for line in log if line.split()[:2] == ["start", tag])


@cogworker.job(retry=3, backoff=lambda count, error: 0.2)
def flaky(tag):
    """Fails its first attempt, then succeeds (a retry, scheduled 0.2 s later)."""
    _log("start", tag)
    if _started(tag) == 1:
        raise ValueError(f"first attempt of {tag}")
    _log("end", tag)


@cogworker.job(retry=0)
def doomed(tag):
    _log("start", tag)
    raise ValueError(f"doomed {tag}")


@cogworker.job(unique_for=60)
def once(tag):
    _log("start", tag)
    _log("end", tag)


@cogworker.job(queue="slowq")
def sleepy(tag, seconds):
    _log("start", tag)
    time.sleep(seconds)
    _log("end", tag)


@cogworker.job
def blob(tag, data):
    """A large job (its enqueue goes through a pipeline, its ack sends the payload from its own buffer)."""
    _log("start", tag)
    _log("end", f"{tag}:{len(data)}")


@cogworker.job(results=True)
def add(a, b):
    return a + b


@cogworker.job(results=True)
def total(values):
    return sum(values)


# Short liveness settings (as apps.fence_app): a process is declared dead after 6 s.
cogworker.configure(orphan_threshold=6.0, heartbeat_interval=0.5, recovery_interval=0.5)
