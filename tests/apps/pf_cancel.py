"""Jobs for the cancel and progress tests (tests/test_cancel.py). Each start, end and
cancel seen is one line of the file named by $PF_LOG (``apps.pf_faults.log``), written
from the child, so a test can tell what ran, when and where."""

from __future__ import annotations

import asyncio
import time

import cogworker
from apps.pf_faults import log

# Beats every 0.3 s: a running job hears of its cancel within about that.
cogworker.configure(heartbeat_interval=0.3, orphan_threshold=5.0, status=True, history=True)


@cogworker.job
def polls(tag, seconds):
    """Sync: polls current_job().cancelled, and stops when told."""
    log("start", tag)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cogworker.current_job().cancelled:
            log("cancelled", tag)
            return
        time.sleep(0.01)
    log("end", tag)


@cogworker.job
async def awaits(tag, seconds):
    """Async: gets CancelledError at its await."""
    log("start", tag)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        log("cancelled", tag)
        raise
    log("end", tag)


@cogworker.job
def brief(tag, seconds=0.0):
    log("start", tag)
    if seconds:
        time.sleep(seconds)
    log("end", tag)


@cogworker.job
def lingers(tag, seconds):
    """Hears of its cancel, then goes on for ``seconds`` (a clean-up its child is killed in)."""
    log("start", tag)
    while not cogworker.current_job().cancelled:
        time.sleep(0.01)
    log("told", tag)
    time.sleep(seconds)
    log("end", tag)


@cogworker.job(retry=5, backoff=lambda count, error: 3600)
def fails(tag):
    log("start", tag)
    raise RuntimeError("fails on purpose")


@cogworker.job
def reports(tag, calls, pause):
    """Calls progress() ``calls`` times in a tight loop, stalls ``pause`` s half-way (for a
    test to read it while it runs), and ends at 1.0."""
    job = cogworker.current_job()
    log("start", tag)
    for i in range(calls):
        job.progress(i / calls, f"row {i}/{calls}")
        if i == calls // 2:
            log("half", tag)
            time.sleep(pause)
    job.progress(1.0, "done")
    log("end", tag)


@cogworker.iterable_job(checkpoint_every=10)
def walks(tag, cursor=None):
    """An iterable job: a cancel stops it at its next yield."""
    log("start", tag)
    i = cursor or 0
    while i < 100_000:
        time.sleep(0.01)
        i += 1
        yield i
    log("end", tag)
