"""Jobs for the observability tests (tests/test_metrics.py, test_obs_logs.py, test_health.py):
every outcome /metrics counts, on short timeouts."""

from __future__ import annotations

import os
import time

import cogworker
from cogworker.config import get_config

if os.environ.get("OBS_HEARTBEAT"):  # the health tests' masters beat fast (never set in the pytest process)
    cogworker.configure(heartbeat_interval=float(os.environ["OBS_HEARTBEAT"]))


def _r():
    return get_config().redis()


@cogworker.job
def ok(tag):
    _r().rpush("test:ran", tag)


@cogworker.job(queue="other")
def elsewhere(tag):
    _r().rpush("test:ran", tag)


@cogworker.job(retry=0)
def boom(tag):
    raise ValueError(f"boom {tag}")


@cogworker.job(retry=1, backoff=lambda count, error: 3600)
def flaky(tag):
    raise RuntimeError(f"flaky {tag}")


@cogworker.job(timeout=0.3, retry=0)
def soft(tag):
    time.sleep(5)  # its soft timeout (JobTimeout) ends it


@cogworker.job(timeout=0.3, retry=0)
def stubborn(tag):
    """Ignores its soft timeout: only the master's hard timeout ends it."""
    _r().rpush("test:started", f"{tag}:{os.getpid()}")
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            time.sleep(0.05)
        except cogworker.JobTimeout:
            pass


@cogworker.job
def hang(tag):
    """Its first run hangs (for a test to SIGKILL its child); a rerun succeeds at once.
    Counted before it says it started: a kill that followed "started" could otherwise land
    before the count, and the rerun, counted first, would hang."""
    first = _r().incr(f"test:runs:{tag}") == 1
    _r().rpush("test:started", f"{tag}:{os.getpid()}")
    if first:
        time.sleep(60)
