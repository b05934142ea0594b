"""Jobs that stop Redis in the middle of the next step (tests/test_redis_pause_mid_step.py).
``gate`` SIGSTOPs the Redis server whose pid is in $PF_REDIS_PID as it ends, so the next
script its child sends (the rate-limit acquire of a job fetched ahead, a result's
completion) is in flight while Redis is stopped; the test sends SIGCONT a few seconds
later. Every start and end is a line of $PF_LOG (apps.pf_log), not of Redis."""

from __future__ import annotations

import os
import signal
import time

import cogworker
from apps.pf_log import log

# Timeouts shorter than the pause: every command sent while Redis is stopped times out.
cogworker.configure(socket_timeout=1.0, heartbeat_interval=0.3, orphan_threshold=20.0, recovery_interval=0.5)


def _pause_redis(tag: str) -> None:
    log("pausing", tag)
    os.kill(int(os.environ["PF_REDIS_PID"]), signal.SIGSTOP)


@cogworker.job
def gate(tag):
    """Ends by stopping Redis: what its child sends next meets a stopped server. It first
    lets the look-ahead fetch its child sent as it started come back (with the next job),
    so that job's acquire, not that fetch, is the next thing to wait on Redis."""
    log("start", tag)
    time.sleep(0.5)
    log("end", tag)
    _pause_redis(tag)


@cogworker.job(limits=[cogworker.Concurrency("paused", 1)])
def limited(tag, seconds=0.05):
    log("start", tag)
    time.sleep(seconds)
    log("end", tag)


@cogworker.job(results=True)
def kept(tag, pause=False):
    """Its result is kept; with ``pause`` it stops Redis as it returns: its completion
    script (the ack with the result) is the next thing sent."""
    log("start", tag)
    log("end", tag)
    if pause:
        _pause_redis(tag)
    return f"value of {tag}"
