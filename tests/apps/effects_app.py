"""Jobs for test_effects: each records, from inside its run, the process it ran in and the
hooks that process has subscribed (cogworker's own and the app's), so a test can check
from Redis what each kind of process was put together with."""

from __future__ import annotations

import json
import os
import time

import cogworker
from cogworker.config import get_config
from cogworker.core import hooks


def _r():
    return get_config().redis()


def subscribed() -> dict[str, list[str]]:
    """Each event's subscribers in this process, by ``module.qualname``."""
    return {
        name: [f"{hook.__module__}.{hook.__qualname__}" for hook, _ in subs]
        for name, subs in hooks._subscribers.items()
    }


def _record(tag: str) -> None:
    _r().rpush("test:effects", json.dumps({"tag": tag, "pid": os.getpid(), "hooks": subscribed()}))


@cogworker.job(unique_for=60)
def unique_ok(tag):
    _record(tag)


@cogworker.job(unique_for=60, retry=0)
def unique_dead(tag):
    _record(tag)
    raise ValueError(f"fails for good {tag}")


@cogworker.job(retry=0)
def plain(tag):
    _record(tag)


@cogworker.job(unique_for=600, retry=0)
def unique_slow(tag, seconds):
    _record(tag)
    time.sleep(seconds)


# The app's own hook, subscribed as the README shows: it records where an orphaning was
# filed (the master's orphan recovery) and what that process had subscribed.
@hooks.subscribe("orphaned")
def on_orphaned(event: hooks.JobEvent) -> None:
    _r().rpush(
        "test:orphaned", json.dumps({"pid": os.getpid(), "jid": event.payload.get("jid"), "hooks": subscribed()})
    )
