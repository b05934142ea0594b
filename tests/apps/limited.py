"""Jobs with fleet-wide rate limits, for tests/test_limits*.py. Each run logs its start and
end to $PF_LOG (apps.pf_faults.log: one O_APPEND write per line)."""

from __future__ import annotations

import time

import cogworker
from apps.pf_faults import events, log


@cogworker.job(limits=[cogworker.Concurrency("k", 3)])
def conc(tag, seconds=0.05):
    log("start", tag)
    time.sleep(seconds)
    log("end", tag)


@cogworker.job(limits=[cogworker.Concurrency(lambda user, tag, **kw: f"user:{user}", 1)])
def per_user(user, tag, seconds=0.1):
    log("start", tag)
    time.sleep(seconds)
    log("end", tag)


@cogworker.job(limits=[cogworker.Window("w", 20, per=2)])
def windowed(tag):
    log("start", tag)
    log("end", tag)


@cogworker.job
def free(tag):
    log("start", tag)
    log("end", tag)


@cogworker.job(limits=[cogworker.Concurrency("solo", 1)])
def solo(tag, first_seconds=60.0):
    """Long on its first run (to be killed holding its slot), short on a re-run."""
    import os

    first = not any(e[1] == tag and e[0] == "start" for e in events(os.environ.get("PF_LOG", "")))
    log("start", tag)
    time.sleep(first_seconds if first else 0.1)
    log("end", tag)


@cogworker.job(limits=[cogworker.Concurrency(lambda tag: 1 / 0, 1)])
def bad_key(tag):
    log("start", tag)


@cogworker.job(limits=[cogworker.Concurrency("one", 1)])
def one_at_a_time(tag, seconds=1.0):
    log("start", tag)
    time.sleep(seconds)
    log("end", tag)
