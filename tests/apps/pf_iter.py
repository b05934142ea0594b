"""Iterable jobs for tests/test_iterable_prefork.py. Every job start and end, and every
item's start and end, is one line (one ``os.write``, O_APPEND) of the file named by
$PF_LOG: ``<event> <tag> <pid> <time>``."""

from __future__ import annotations

import asyncio
import os
import time

import cogworker
from apps.pf_log import events, log

ITEMS = int(os.environ.get("PF_ITEMS", "1000"))
DELAY = float(os.environ.get("PF_ITEM_DELAY", "0.002"))
EVERY = int(os.environ.get("PF_EVERY", "20"))
if os.environ.get("PF_FENCE"):  # the fencing test: a process is declared dead after 6 s of an unchanged beat
    cogworker.configure(orphan_threshold=6.0, heartbeat_interval=0.5, recovery_interval=0.5)


@cogworker.iterable_job(checkpoint_every=EVERY, queue="default")
def walk(tag, cursor=None):
    log("job-start", f"{tag}@{cursor}")
    for i in range(0 if cursor is None else cursor + 1, ITEMS):
        log("item-start", f"{tag}:{i}")
        time.sleep(DELAY)
        log("item-end", f"{tag}:{i}")
        yield i
    log("job-end", tag)


@cogworker.iterable_job(checkpoint_every=EVERY)
async def awalk(tag, cursor=None):
    log("job-start", f"{tag}@{cursor}")
    for i in range(0 if cursor is None else cursor + 1, ITEMS):
        log("item-start", f"{tag}:{i}")
        await asyncio.sleep(DELAY)
        log("item-end", f"{tag}:{i}")
        yield i
    log("job-end", tag)


@cogworker.iterable_job(checkpoint_every=EVERY, retry=2, backoff=lambda count, error: 0)
def flaky(tag, fail_at, cursor=None):
    """Raises at item ``fail_at`` on its first run only (its log says whether it did)."""
    log("job-start", f"{tag}@{cursor}")
    for i in range(0 if cursor is None else cursor + 1, ITEMS):
        log("item-start", f"{tag}:{i}")
        if i == fail_at and not any(e == "raised" and t == tag for e, t, _, _ in events(os.environ["PF_LOG"])):
            log("raised", tag)
            raise RuntimeError(f"item {i} failed")
        log("item-end", f"{tag}:{i}")
        yield i
    log("job-end", tag)


@cogworker.job
def plain(tag):
    log("job-start", tag)
    log("job-end", tag)


@cogworker.iterable_job(checkpoint_every=EVERY)
def doomed(tag, at, cursor=None):
    """SIGKILLs its own process at item ``at``, on every run: each run after the first
    resumes at the same checkpoint and dies there again."""
    import signal

    log("job-start", f"{tag}@{cursor}")
    for i in range(0 if cursor is None else cursor + 1, ITEMS):
        if i == at:
            os.kill(os.getpid(), signal.SIGKILL)
        log("item-end", f"{tag}:{i}")
        yield i
    log("job-end", tag)
