"""Async jobs for the prefork tests: every start and end is recorded in Redis from inside
the child, so tests can check for loss and for two runs of one job at once."""

from __future__ import annotations

import asyncio
import os
import time

import cogworker
from cogworker.config import get_config


def _r():
    return get_config().redis()


def started(tag):
    _r().rpush("test:started", f"{tag}:{os.getpid()}:{time.time()}")


def done(tag):
    _r().rpush("test:done", f"{tag}:{os.getpid()}:{time.time()}")


@cogworker.job
async def a_sleep(tag, seconds):
    started(tag)
    await asyncio.sleep(seconds)
    done(tag)


@cogworker.job(retry=1, backoff=lambda count, error: 0)
async def a_fail(tag):
    started(tag)
    await asyncio.sleep(0.01)
    raise ValueError(f"failed {tag}")


@cogworker.job(timeout=0.5, retry=0)
async def a_soft(tag):
    started(tag)
    try:
        await asyncio.sleep(30)
    except cogworker.JobTimeout:
        _r().rpush("test:caught", f"{tag}:{os.getpid()}")
        raise


@cogworker.job(timeout=0.3, retry=0)
async def a_ignores(tag):
    """Swallows JobTimeout and sleeps on: the loop cancels it (the process lives on)."""
    started(tag)
    for _ in range(100):
        try:
            await asyncio.sleep(30)
        except cogworker.JobTimeout:
            _r().rpush("test:caught", f"{tag}:{os.getpid()}")


@cogworker.job(timeout=0.3, retry=0)
async def a_blocked(tag):
    """A sync call blocks the loop: only the master's hard-timeout kill ends it."""
    started(tag)
    time.sleep(60)


@cogworker.job(unique_for=60)
async def a_unique(tag, seconds):
    started(tag)
    await asyncio.sleep(seconds)
    done(tag)


async def _body(tag):
    await asyncio.sleep(0.01)
    done(tag)
    return tag


@cogworker.job
def returns_coroutine(tag):
    started(tag)
    return _body(tag)


@cogworker.job
def sync_sleep(tag, seconds):
    started(tag)
    time.sleep(seconds)
    done(tag)


def around(job, payload, queue, call_next):
    if payload["class"].endswith(".a_sleep") and str(payload["args"][0]).startswith("mw"):
        _r().rpush("test:mw", f"before:{payload['args'][0]}")
        result = call_next()
        _r().rpush("test:mw", f"after:{payload['args'][0]}")
        return result
    return call_next()


@cogworker.job
async def tracked(tag, seconds):
    """Records its start with the orphanings counted for it so far (the test maps tags to
    jids in ``test:jids``), then its end."""
    r = _r()
    jid = r.hget("test:jids", tag)
    count = r.get(get_config().keys.orphanings(jid.decode())) if jid else None
    r.rpush("test:started", f"{tag}:{os.getpid()}:{time.time()}:{int(count or 0)}")
    await asyncio.sleep(seconds)
    done(tag)


@cogworker.job(timeout=0.3, retry=0)
def sync_stuck(tag):
    started(tag)
    time.sleep(60)


@cogworker.job(timeout=0.5, retry=0)
def sync_soft(tag):
    """A sync job in Python code (short sleeps): JobTimeout lands in it, in any thread."""
    started(tag)
    try:
        for _ in range(400):
            time.sleep(0.05)
    except cogworker.JobTimeout:
        _r().rpush("test:caught", f"{tag}:{os.getpid()}")
        raise
    done(tag)


@cogworker.job(retry=0)
async def a_exits(tag):
    """SystemExit inside a coroutine: asyncio lets it out of the loop; the job fails, the loop goes on."""
    started(tag)
    await asyncio.sleep(0.01)
    raise SystemExit(3)


# Only when a test asks: with a server middleware installed, async jobs run through the
# pool's chain; without one (the default here), they start as tasks at once.
if os.environ.get("PF_ASYNC_MIDDLEWARE") == "1":
    cogworker.server_middleware.add(around)
