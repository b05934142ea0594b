"""Unique jobs: one lock per (job, queue, arguments), owned by the jid that took it.

The lock is ``unique:<digest>`` = jid, SET NX with a TTL. It is only ever deleted or
extended by its owner (compare-and-delete/extend scripts), so a job can't free a lock a
later duplicate took after this one's expired.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

import redis

from . import hooks, lua
from .config import Config, get_config


def digest(payload: dict[str, Any]) -> str:
    canonical = json.dumps([payload["class"], payload["queue"], payload.get("args", []),
                            payload.get("kwargs", {})], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def lock_ttl(payload: dict[str, Any], extra: float = 0.0) -> int:
    return max(1, math.ceil(float(payload["unique_for"]) + max(0.0, extra)))


def prepare(payload: dict[str, Any]) -> None:
    """Stamp the digest into a unique job's payload, so every later step can find its lock."""
    payload["unique_digest"] = digest(payload)


def push(client: redis.Redis, payload: dict[str, Any], encoded: str, at: float | None) -> str | None:
    keys = get_config().keys
    scheduled = at is not None and at > time.time()
    target = keys.schedule if scheduled else keys.queue(payload["queue"])
    ttl = lock_ttl(payload, (at - time.time()) if scheduled and at else 0.0)
    pushed = lua.run(client, "unique_push", [keys.unique(payload["unique_digest"]), target, keys.queues],
                     [payload["jid"], ttl, encoded, repr(at) if scheduled else "", payload["queue"]])
    return payload["jid"] if pushed == 1 else None


def holds(payload: dict[str, Any]) -> bool:
    return bool(payload.get("unique_digest")) and payload.get("unique_for") is not None


def release(client: Any, payload: dict[str, Any]) -> None:
    """Free the lock if this job owns it (success, start, or a terminal failure)."""
    if holds(payload):
        lua.run(client, "release_lock", [get_config().keys.unique(payload["unique_digest"])],
                [payload["jid"]])


def extend(client: Any, payload: dict[str, Any], delay: float) -> None:
    """Keep the lock across a retry's wait: the job isn't done, so no duplicate yet."""
    if holds(payload):
        lua.run(client, "extend_lock", [get_config().keys.unique(payload["unique_digest"])],
                [payload["jid"], lock_ttl(payload, delay)])


# -- the locks a running job holds: its unique lock, and its periodic entry's running lock --
# Called by the worker (and recovery) as best-effort steps: they never change a job's fate.

def on_start(config: Config, payload: dict[str, Any]) -> None:
    """The job starts: ``unique_until="start"`` frees its lock; a periodic entry's running
    lock switches from the queued TTL to one that covers the run."""
    if payload.get("unique_until") == "start":
        release(config.redis(), payload)
    if payload.get("periodic_pjid"):
        from . import cron

        cron.extend_running_lock(config, payload["periodic_pjid"], payload["jid"], cron.running_ttl(payload))


def on_success(config: Config, payload: dict[str, Any]) -> None:
    if payload.get("unique_until", "success") == "success":
        release(config.redis(), payload)
    if payload.get("periodic_pjid"):
        from . import cron

        cron.release_running_lock(config, payload["periodic_pjid"], payload["jid"])


def after_filing(config: Config, payload: dict[str, Any], retrying: bool, delay: float) -> None:
    """The job's failure is filed: a retry keeps both locks over its wait (no duplicate
    and no overlapping slot while it isn't done); dead frees them."""
    pjid, jid = payload.get("periodic_pjid"), payload.get("jid")
    from . import cron

    if retrying:
        extend(config.redis(), payload, delay)
        if pjid and jid:
            cron.extend_running_lock(config, pjid, jid, delay + cron.QUEUED_TTL)
        return
    if payload.get("unique_until", "success") == "success":
        release(config.redis(), payload)
    if pjid and jid:
        cron.release_running_lock(config, pjid, jid)


# -- as hook subscribers: the locks follow the job's transitions -----------------------------

def _on_started(event: hooks.JobEvent) -> None:
    payload = event.payload
    if payload.get("unique_until") == "start" or payload.get("periodic_pjid"):
        on_start(event.config or get_config(), payload)


def _on_succeeded(event: hooks.JobEvent) -> None:
    if event.payload.get("unique_digest") or event.payload.get("periodic_pjid"):
        on_success(event.config or get_config(), event.payload)


def _on_filed(event: hooks.JobEvent) -> None:
    payload = event.payload
    if payload.get("unique_digest") or payload.get("periodic_pjid"):
        after_filing(event.config or get_config(), payload, event.name == "retrying", event.delay or 0.0)


hooks.subscribe("started", _on_started)
hooks.subscribe("succeeded", _on_succeeded)
hooks.subscribe(("retrying", "dead"), _on_filed)
