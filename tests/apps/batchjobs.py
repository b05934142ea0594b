"""Jobs for the batch tests. Every run logs its start and end (kind, tag, pid, time) in
``test:log``, from inside the process that runs it, so a test can check that a callback
started only after every job of its batch ended. ``test:fail`` names the tags that raise
(``test:flaky``: once)."""

from __future__ import annotations

import os
import time

import cogworker
from cogworker.config import get_config


def _r():
    return get_config().redis()


def _log(kind: str, tag: object) -> None:
    _r().rpush("test:log", f"{kind}|{tag}|{os.getpid()}|{time.time()!r}")


@cogworker.job(retry=1)
def work(tag, seconds=0.0):
    _log("start", tag)
    if seconds:
        time.sleep(seconds)
    if _r().srem("test:flaky", str(tag)) or _r().sismember("test:fail", str(tag)):
        _log("end", tag)
        raise RuntimeError(f"failed {tag}")
    _log("end", tag)
    return tag


@cogworker.job(retry=0)
def doomed(tag):
    _log("start", tag)
    _log("end", tag)
    raise ValueError(f"doomed {tag}")


@cogworker.job
def spawner(tag, more):
    """Adds ``more`` jobs to its own batch while it runs."""
    _log("start", tag)
    job = cogworker.current_job()
    assert job is not None and job.batch is not None
    with job.batch:
        for i in range(more):
            work.enqueue(f"{tag}.{i}", 0.05)
    time.sleep(0.1)
    _log("end", tag)


@cogworker.job
def callback(name, *extra):
    """A batch's callback: logs which fired, and for which batch."""
    job = cogworker.current_job()
    _log("cb-start", name)
    _r().rpush("test:callbacks", f"{name}|{job.payload.get('batch_of') if job else None}|{extra!r}")
    _log("cb-end", name)


@cogworker.job(unique_for=60)
def unique_callback(name):
    _r().rpush("test:callbacks", f"{name}|unique")
