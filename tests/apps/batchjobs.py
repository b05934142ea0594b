"""Jobs for the batch tests. Every run logs its start and end to the file named by
$PF_LOG (apps/pf_faults.py's log: the fault test pauses Redis), from inside the process
that runs it, so a test can check that a callback started only after every job of its
batch ended. Redis' ``test:fail`` names the tags that raise (``test:flaky``: once)."""

from __future__ import annotations

import os
import time

import cogworker
from cogworker.config import get_config

from .pf_faults import log

if os.environ.get("BATCH_FENCE"):  # the fault test: a dead master's lists are recovered after 6 s, not 60
    cogworker.configure(orphan_threshold=6.0, heartbeat_interval=0.5, recovery_interval=0.5)


def _r():
    return get_config().redis()


def _log(kind: str, tag: object) -> None:
    log(kind, str(tag))


@cogworker.job(retry=1)
def work(tag, seconds=0.0):
    _log("start", tag)
    if seconds:
        time.sleep(seconds)
    name = str(tag)
    if name.startswith("f") and (_r().srem("test:flaky", name) or _r().sismember("test:fail", name)):
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
    """A batch's callback: logs which fired, for which batch (file only: no Redis)."""
    job = cogworker.current_job()
    _log("cb-start", f"{name}@{job.payload.get('batch_of') if job else None}@{len(extra)}")
    _log("cb-end", name)


@cogworker.job(unique_for=60)
def unique_callback(name):
    _log("cb-start", f"{name}@unique")
