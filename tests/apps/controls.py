"""Jobs for the job-controls tests (tests/test_job_controls.py): which errors are retried,
a retry asked for from inside a job, an expiry. Every run is recorded in Redis (from
inside the process that ran it) so tests count runs across processes."""

from __future__ import annotations

import os
import time

import cogworker
from cogworker.config import get_config

if os.environ.get("COGWORKER_TEST_STATUS") == "1":
    cogworker.configure(status=True, history=True)


class Transient(Exception):
    """Retried (in ``picky``'s ``retry_on``)."""


class Fatal(Transient):
    """A ``Transient``, but in ``picky``'s ``no_retry_on``: never retried."""


ERRORS: dict[str, type[Exception]] = {"transient": Transient, "fatal": Fatal, "value": ValueError}


def _r():
    return get_config().redis()


@cogworker.job(retry=5, retry_on=(Transient,), no_retry_on=Fatal)
def picky(kind):
    _r().rpush("test:ran", kind)
    raise ERRORS[kind](kind)


@cogworker.job(retry=5, no_retry_on=(KeyError,))
def no_key_errors(kind):
    _r().rpush("test:ran", kind)
    raise ERRORS[kind](kind)


@cogworker.job(retry=1)
def asks(tag, seconds, count=False):
    """Asks to run again later until it has run twice, then succeeds."""
    runs = _r().rpush(f"test:runs:{tag}", 1)
    if runs < 2:
        raise cogworker.Retry(in_=seconds, count=count)
    _r().rpush("test:ran", tag)


@cogworker.job
def record(tag):
    _r().rpush("test:ran", tag)


@cogworker.job
def guarded(tag, marker):
    """Long on its first run (a shutdown deadline interrupts it), quick after; its
    ``finally:`` writes ``marker``."""
    runs = _r().incr(f"test:runs:{tag}")
    try:
        _r().rpush("test:started", tag)
        if runs == 1:
            time.sleep(60)
    finally:
        with open(marker, "a") as out:
            out.write(f"finally {runs}\n")
    _r().rpush("test:ran", tag)


@cogworker.job
async def guarded_async(tag, marker):
    """``guarded``, as an ``async def``: its ``finally:`` runs when Shutdown cancels it."""
    import asyncio

    runs = _r().incr(f"test:runs:{tag}")
    try:
        _r().rpush("test:started", tag)
        if runs == 1:
            await asyncio.sleep(60)
    finally:
        with open(marker, "a") as out:
            out.write(f"finally {runs}\n")
    _r().rpush("test:ran", tag)
