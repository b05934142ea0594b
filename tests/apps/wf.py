"""Jobs for the workflow tests (results, chains, groups, chords). Every run logs its start
and end (jid, pid, time) in Redis, from inside the process that runs it, so a test can
check for runs lost or run twice at once. ``WF_KILL``: a child SIGKILLs itself right
before (``before``) or right after (``after``) a job's completion script, for the jids
a test put in ``test:kill``."""

from __future__ import annotations

import os
import signal
import time

import cogworker
from cogworker.config import get_config
from cogworker.core.inprogress import InProgressList


def _r():
    return get_config().redis()


def _log(kind: str, tag: object) -> None:
    _r().rpush("test:log", f"{kind}|{tag}|{os.getpid()}|{time.time()!r}")


@cogworker.job(results=True)
def add(x, y):
    _log("start", f"add:{x}:{y}")
    _log("end", f"add:{x}:{y}")
    return x + y


@cogworker.job(results=True, retry=0)
def boom(x):
    raise ValueError(f"boom {x}")


@cogworker.job(results=True)
def slow_add(x, y, seconds=0.05):
    _log("start", f"slow_add:{x}:{y}")
    time.sleep(seconds)
    _log("end", f"slow_add:{x}:{y}")
    return x + y


@cogworker.job(results=True)
def total(values, extra=0):
    _r().rpush("test:total", repr(values))
    return sum(values) + extra


@cogworker.job
def member(i, seconds=0.0):
    """A chord member that logs its start and end; retried once where test:flaky names it."""
    _log("start", i)
    if seconds:
        time.sleep(seconds)
    if _r().srem("test:flaky", str(i)):
        _log("end", i)
        raise RuntimeError(f"flaky {i}")
    _log("end", i)
    return i * i


@cogworker.job(results=True)
def unkeepable():
    return object()


@cogworker.job(results=True)
def nothing():
    return None


_complete = InProgressList.complete


def _marked(done, after: bool) -> bool:  # type: ignore[no-untyped-def]
    """Whether the test asked to kill around this completion (each mark once): by jid,
    ``m<index>`` for a group member, ``v<value>`` by its result, ``last`` for the member
    whose completion fires the chord (before: the counter says it is the last one left;
    after: the group says it fired the callback)."""
    r = _r()
    marks = [done.jid, f"v{done.value}"]
    if done.group:
        marks.append(f"m{done.member}")
        group = r.hgetall(get_config().keys.group(done.group))
        if (group.get(b"fired_by") == done.jid.encode()) if after else group.get(b"left") == b"1":
            marks.append("last")
    return any(r.srem("test:kill", mark) for mark in marks)


def _killing_complete(self, raw, done):  # type: ignore[no-untyped-def]
    # Only a child's own completion (it beats for itself); the master settling for a dead
    # child is never killed.
    kill = os.environ.get("WF_KILL")
    if kill == "before" and self.beat_as and _marked(done, after=False):
        _log("kill", done.jid)
        os.kill(os.getpid(), signal.SIGKILL)
    reply = _complete(self, raw, done)
    if kill == "after" and self.beat_as and _marked(done, after=True):
        _log("kill", done.jid)
        os.kill(os.getpid(), signal.SIGKILL)
    return reply


InProgressList.complete = _killing_complete  # type: ignore[method-assign]


@cogworker.job(results=True)
async def async_add(x, y):
    import asyncio

    await asyncio.sleep(0.01)
    return x + y
