"""Jobs for the prefork tests. Every run is recorded in Redis (from inside the child) so
tests can count runs across processes."""

from __future__ import annotations

import os
import signal
import time

import cogworker
from cogworker.config import get_config

if os.environ.get("COGWORKER_TEST_STATUS") == "1":  # status and history (on by default), explicitly
    cogworker.configure(status=True, history=True)


def _r():
    return get_config().redis()


@cogworker.job
def record(tag):
    _r().rpush("test:ran", tag)


@cogworker.job
def slow(tag, seconds):
    _r().rpush("test:started", f"{tag}:{os.getpid()}:{time.time()}")
    time.sleep(seconds)
    _r().rpush("test:done", tag)


@cogworker.job
def suicide(tag):
    _r().rpush("test:started", f"{tag}:{os.getpid()}")
    os.kill(os.getpid(), signal.SIGKILL)


@cogworker.job(retry=0)
def fail(tag):
    _r().rpush("test:ran", tag)
    raise ValueError(f"failed {tag}")


_hoard = []


@cogworker.job
def hog(tag, mb):
    _hoard.append(bytearray(mb * 1024 * 1024))
    _r().rpush("test:ran", f"{tag}:{os.getpid()}")


@cogworker.job(timeout=0.5, retry=0)
def stubborn(tag):
    """Ignores its soft timeout: only the master's hard timeout ends it."""
    _r().rpush("test:started", f"{tag}:{os.getpid()}")
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            time.sleep(0.1)
        except cogworker.JobTimeout:
            _r().rpush("test:soft_timeout", tag)


@cogworker.job(timeout=0.5, retry=0)
def overrun(tag):
    _r().rpush("test:started", tag)
    time.sleep(10)
