"""Iterable jobs run by an in-process worker (tests/test_iterable_jobs.py)."""

from __future__ import annotations

import threading
import time

import cogworker

RAN: list[int] = []
GATE = threading.Event()  # set: the held item goes on
REACHED = threading.Event()  # set: the job waits at its held item


@cogworker.iterable_job(checkpoint_every=5)
def steps(n, hold_at=None, cursor=None):
    for i in range(0 if cursor is None else cursor + 1, n):
        if i == hold_at:
            REACHED.set()
            GATE.wait(20)
        RAN.append(i)
        yield i


@cogworker.iterable_job(seconds=0.01, retry=False)
def bad_cursor(cursor=None):
    time.sleep(0.02)
    yield {"ok": 1}
    time.sleep(0.02)
    yield object()  # JSON can't carry it: the job fails at its next checkpoint
    yield 3


@cogworker.iterable_job(seconds=0.05)
def timed(n, hold_at, cursor=None):
    """Checkpoints by time only: every 50 ms of items (30 ms each)."""
    for i in range(0 if cursor is None else cursor + 1, n):
        if i == hold_at:
            REACHED.set()
            GATE.wait(20)
        time.sleep(0.03)
        RAN.append(i)
        yield i
