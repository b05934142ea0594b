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

from .. import store
from ..config import get_config
from ..core import hooks
from ..core.payload import parse_payload, priority_of
from ..keys import Keys
from ..transitions import call
from ..transitions import push as push_scripts


def digest(payload: dict[str, Any]) -> str:
    canonical = json.dumps(
        [payload["class"], payload["queue"], payload.get("args", []), payload.get("kwargs", {})],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def lock_ttl(payload: dict[str, Any], extra: float = 0.0) -> int:
    return max(1, math.ceil(float(payload["unique_for"]) + max(0.0, extra)))


def prepare(payload: dict[str, Any]) -> None:
    """Stamp the digest into a unique job's payload, so every later step can find its lock."""
    payload["unique_digest"] = digest(payload)


def push(
    client: store.Client, payload: dict[str, Any], encoded: str, at: float | None, keys: Keys | None = None
) -> str | None:
    pushed = call.run(client, push_call(payload, encoded, at, keys))
    return payload["jid"] if pushed == 1 else None


def push_call(payload: dict[str, Any], encoded: str, at: float | None, keys: Keys | None = None) -> call.Call:
    """The keys and arguments of ``unique_push.lua`` for this job (the sync and the
    async client send the same); ``keys``: its part's (a split layout: the lock is
    the part's), else the configured namespace's."""
    keys = keys or get_config().keys
    scheduled = at is not None and at > time.time()
    target = keys.schedule if scheduled else keys.job_queue(payload["queue"], priority_of(payload))
    ttl = lock_ttl(payload, (at - time.time()) if scheduled and at else 0.0)
    return push_scripts.unique_push(
        lock=keys.unique(payload["unique_digest"]),
        target=target,
        queues=keys.queues,
        jid=payload["jid"],
        ttl=ttl,
        payload=encoded,
        at=repr(at) if scheduled else "",
        queue=payload["queue"],
    )


def holds(payload: dict[str, Any]) -> bool:
    return bool(payload.get("unique_digest")) and payload.get("unique_for") is not None


def release(client: Any, payload: dict[str, Any], keys: Keys | None = None) -> None:
    """Free the lock if this job owns it (success, start, or a terminal failure);
    ``keys``: the client's (a part's, in a split layout)."""
    if holds(payload):
        call.run(client, release_call(payload, keys or get_config().keys))


def release_call(payload: dict[str, Any], keys: Keys) -> call.Call:
    """``release_lock.lua``'s call for this job's lock: compare-and-delete, so it may be
    sent more than once (a release riding on a fetch whose reply was lost, the master's
    for a dead child's success)."""
    return push_scripts.release_lock_call(lock=keys.unique(payload["unique_digest"]), owner=payload["jid"])


def releases_on_success(payload: dict[str, Any]) -> bool:
    """A success frees this job's lock (``unique_until="success"``, the default)."""
    return holds(payload) and payload.get("unique_until", "success") == "success"


def release_dropped(client: Any, keys: Keys, dropped: list[bytes]) -> int:
    """A dead child's finished jobs whose acks its master wrote for it (dropped from its
    list): their locks, released as the child would have (its release rode with the ack,
    held for a fetch it never sent). Compare-and-delete: a release that did land, or a
    lock a later duplicate took, is left as it is. Returns how many it deleted."""
    calls = []
    for raw in dropped:
        payload, _ = parse_payload(raw)
        if payload is not None and releases_on_success(payload):
            calls.append(release_call(payload, keys))
    return sum(int(call.run(client, c)) for c in push_scripts.merged(calls))


def extend(client: Any, payload: dict[str, Any], delay: float, keys: Keys | None = None) -> None:
    """Keep the lock across a retry's wait: the job isn't done, so no duplicate yet."""
    if holds(payload):
        push_scripts.extend_lock(
            client,
            lock=(keys or get_config().keys).unique(payload["unique_digest"]),
            owner=payload["jid"],
            ttl=lock_ttl(payload, delay),
        )


# -- as hook subscribers: the lock follows the job's transitions ------------------------------
# Best-effort steps after the write that made the transition: they never change a job's fate.
# (A periodic entry's running lock follows the same events, in cron/claims.py.)


def _on_started(event: hooks.JobEvent) -> None:
    """``unique_until="start"``: the job starts, so a duplicate may be enqueued now."""
    if event.payload.get("unique_until") == "start":
        config = event.config or get_config()  # a worker's: its part's, in a split layout
        release(config.redis(), event.payload, config.keys)


def _on_succeeded(event: hooks.JobEvent) -> None:
    """The release rides on the worker's next fetch, with the job's ack, where it has one
    (``event.later``; a child that dies first has its master release it, as it drops the
    ack: ``prefork/master.py``); otherwise it is its own round trip."""
    if releases_on_success(event.payload):
        config = event.config or get_config()
        if event.later is not None:
            event.later(release_call(event.payload, config.keys))
        else:
            release(config.redis(), event.payload, config.keys)


def _on_filed(event: hooks.JobEvent) -> None:
    """A retry keeps the lock over its wait (no duplicate while the job isn't done); dead frees it."""
    payload = event.payload
    if not payload.get("unique_digest"):
        return
    config = event.config or get_config()
    client = config.redis()
    if event.name == "retrying":
        extend(client, payload, event.delay or 0.0, config.keys)
    elif payload.get("unique_until", "success") == "success":
        release(client, payload, config.keys)


def subscribers() -> list[hooks.Subscription]:
    """The lock's hooks, for a process to install (``hooks.install``). A key filter, asked
    without a Python call per job; ``_on_started`` itself checks for "start"."""
    return [
        hooks.Subscription(("started",), _on_started, when="unique_until"),
        hooks.Subscription(("succeeded",), _on_succeeded, when="unique_digest"),
        hooks.Subscription(("retrying", "dead"), _on_filed, when="unique_digest"),
    ]
