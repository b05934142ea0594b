"""Jobs for the core tests (test_core_*). Each records its runs in Redis (``test:ran``)
so a test can count runs from Redis, across processes."""

from __future__ import annotations

import os
import signal
import time

import cogworker
from cogworker.config import get_config


def _mark(tag: str) -> None:
    get_config().redis().rpush("test:ran", tag)


@cogworker.job
def record(tag):
    _mark(f"record:{tag}")


@cogworker.job(queue="critical", retry=3, timeout=30, unique_for=600)
def charge(order_id, *, amount=None):
    _mark(f"charge:{order_id}:{amount}")


@cogworker.job(retry=2, backoff=lambda count, error: 0)
def fail_always(tag):
    _mark(f"fail_always:{tag}")
    raise ValueError(f"always {tag}")


@cogworker.job(retry=5, backoff=lambda count, error: 0)
def fail_then_pass(tag, failures):
    """Fails ``failures`` times (counted in Redis), then succeeds."""
    _mark(f"fail_then_pass:{tag}")
    if get_config().redis().incr(f"test:failures:{tag}") <= failures:
        raise KeyError(tag)


@cogworker.job(retry=0)
def fail_no_retry(tag):
    _mark(f"fail_no_retry:{tag}")
    raise ValueError(f"no retries {tag}")


def _down(depth):
    if depth:
        _down(depth - 1)
    raise ValueError(f"{depth} frames down")


@cogworker.job(retry=False)
def fail_deep(depth):
    """Raises ``depth`` frames below its own: a long traceback of the app's own frames."""
    _down(depth)


@cogworker.job(retry=False)
def fail_retry_false(tag):
    _mark(f"fail_retry_false:{tag}")
    raise RuntimeError(f"retry=False {tag}")


@cogworker.job
def fail_default_backoff(tag):
    _mark(f"fail_default_backoff:{tag}")
    raise ValueError(tag)


@cogworker.job(retry=3, backoff=lambda count, error: 123)
def fail_custom_backoff(tag):
    _mark(f"fail_custom_backoff:{tag}")
    raise ValueError(tag)


def _broken_backoff(count, error):
    raise ZeroDivisionError("backoff is broken")


@cogworker.job(retry=3, backoff=_broken_backoff)
def fail_broken_backoff(tag):
    """Its failure can't be routed (the backoff raises): the interrupt path."""
    _mark(f"fail_broken_backoff:{tag}")
    raise ValueError(f"broken backoff {tag}")


@cogworker.job
def sleepy(tag, seconds):
    _mark(f"start:{tag}")
    time.sleep(seconds)
    _mark(f"done:{tag}")


@cogworker.job
def pause_redis_after(tag):
    """Runs, then SIGSTOPs the Redis server whose pid is in ``test:redis_pid``: the ack
    that follows fails (the test resumes the server)."""
    client = get_config().redis()
    _mark(f"pause_redis_after:{tag}")
    pid = int(client.get("test:redis_pid"))
    os.kill(pid, signal.SIGSTOP)


class Custom(Exception):
    pass


@cogworker.job(retry=0)
def raise_custom(tag):
    _mark(f"raise_custom:{tag}")
    raise Custom(tag)


def plain_function(tag):
    """Not a job: a payload naming it must not run it."""
    _mark(f"plain_function:{tag}")


# In-process runs, for tests that pause or restart Redis: these jobs never touch Redis,
# so a Redis fault can't make the job itself fail.
local_started: list[str] = []
local_runs: list[str] = []


@cogworker.job
def local(tag, seconds=0.0):
    local_started.append(tag)
    time.sleep(seconds)
    local_runs.append(tag)
