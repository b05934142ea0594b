"""Jobs for the periodic/unique tests. Each records its run in Redis, so tests can check
runs across processes from Redis alone."""

from __future__ import annotations

import json
import time

import cogworker
from cogworker.config import get_config


def _r():
    return get_config().redis()


@cogworker.job
def tick(tag):
    _r().rpush("test:cron_ran", tag)


@cogworker.job(retry=0)
def slow(tag, seconds):
    """Records when it ran: [start, end] per run, to check runs never overlap."""
    start = time.time()
    time.sleep(seconds)
    _r().rpush("test:cron_runs", json.dumps([tag, start, time.time()]))


@cogworker.job(timeout=10)
def probe(pjid):
    """Records, from inside the run, what its entry's running lock looks like."""
    key = get_config().keys.periodic_running(pjid)
    _r().rpush("test:probe", json.dumps([(_r().get(key) or b"").decode(), _r().ttl(key)]))


@cogworker.job(retry=0)
def fail_dead(tag):
    raise ValueError(f"fails for good {tag}")


@cogworker.job(retry=1, backoff=lambda count, error: 100)
def fail_retry(tag):
    raise ValueError(f"fails, retried in 100 s {tag}")


# -- unique jobs ---------------------------------------------------------------------------------


def _own_lock(name, tag):
    """This run's lock as seen from inside it: [value, ttl]."""
    from cogworker.lifecycle import unique

    key = get_config().keys.unique(unique.digest({"class": name, "queue": "default", "args": [tag], "kwargs": {}}))
    return [(_r().get(key) or b"").decode(), _r().ttl(key)]


@cogworker.job(unique_for=60)
def u_ok(tag):
    _r().rpush("test:unique", json.dumps(["u_ok", tag, _own_lock(u_ok.name, tag)]))


@cogworker.job(unique_for=60, unique_until="start")
def u_start(tag):
    _r().rpush("test:unique", json.dumps(["u_start", tag, _own_lock(u_start.name, tag)]))


@cogworker.job(unique_for=60, retry=0)
def u_dead(tag):
    raise ValueError(f"fails for good {tag}")


@cogworker.job(unique_for=5, retry=3, backoff=lambda count, error: 100)
def u_retry(tag):
    raise ValueError(f"retried in 100 s {tag}")
