"""The status a push writes (docs/architecture.md#status-buckets): a queued job's field of
``enq:<hour>``, with the bucket's TTL sent once per bucket by a process, or a scheduled
job's own ``status:<jid>``. The rest of status and history, written as jobs run, is
``lifecycle/history.py``'s."""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

from ..config import Config
from ..keys import Keys
from ..lifecycle.history import FIELDS, HOUR, enq_ttl, hour_of, status_fields

EnqueueWrite = tuple[str, "int | None", dict[str, Any]]  # key, ttl (None: set already), fields to HSET


class _EnqTTL(NamedTuple):
    """The ``enq:<hour>`` bucket whose TTL this process sent last, and when; no TTL is due
    for it from ``start`` to ``until`` (its hour's end, or a minute after sending)."""

    url: str
    key: str
    at: float
    keys: Keys
    start: float
    until: float


_expired_enq: _EnqTTL | None = None


def writes_enqueue(config: Config, payload: dict[str, Any]) -> bool:
    return bool(config.status and payload.get("jid"))


def enqueue_fields(config: Config, payload: dict[str, Any], at: float | None) -> EnqueueWrite | None:
    """The ``queued``/``scheduled`` status of a job being pushed, for the client's pipeline,
    or None when status is off. Queued: one field of ``enq:<hour>``, whose EXPIRE is sent
    once per bucket by a process. Scheduled: its own ``status:<jid>`` (its TTL counts from
    when it is due, which may be beyond any bucket's life)."""
    if not writes_enqueue(config, payload):
        return None
    now = time.time()
    if at is not None and at > now:
        fields = dict.fromkeys(FIELDS, "")
        fields.update(status_fields(payload, "scheduled", payload.get("queue"), now), at=repr(at))
        return config.keys.status(payload["jid"]), config.status_ttl + int(at - now), fields
    return enqueue_bucket(config, [payload], now)


def enqueue_bucket(config: Config, payloads: list[dict[str, Any]], now: float) -> EnqueueWrite:
    """``enq:<hour>`` fields for jobs pushed to a queue now: jid -> [queue, class, attempt, t]."""
    key, ttl = _enq_bucket(config, now)
    t = repr(now)
    return key, ttl, {p["jid"]: _enq_record(p, t) for p in payloads}


def queued_field(config: Config, payload: dict[str, Any]) -> tuple[str, int | None, str, str] | None:
    """A single push's ``enq:<hour>`` field: (key, ttl or None, jid, record), or None when
    status is off; ``enqueue_bucket`` for one job, without its dict (asked per enqueue)."""
    jid = payload.get("jid")
    if not (config.status and jid):
        return None
    now = time.time()
    key, ttl = _enq_bucket(config, now)
    return key, ttl, jid, _enq_record(payload, repr(now))


def _enq_bucket(config: Config, now: float) -> tuple[str, int | None]:
    """The bucket of ``now``, and its TTL when this process should send it (else None)."""
    global _expired_enq
    sent = _expired_enq
    # Asked per enqueue: until the next hour or minute, the answer is the last one.
    if (
        sent is not None
        and sent.start <= now < sent.until
        and sent.keys is config.keys
        and sent.url == config.redis_url
    ):
        return sent.key, None
    hour = hour_of(now)
    key = config.keys.enq(hour)
    # Sent again after a minute too: a bucket that lost it (a FLUSHALL, a failed pipeline)
    # gets it back soon, not never.
    if sent is None or (sent.url, sent.key) != (config.redis_url, key) or now - sent.at > 60:
        _expired_enq = _EnqTTL(config.redis_url, key, now, config.keys, hour, min(now + 60, hour + HOUR))
        return key, enq_ttl(config)
    return key, None


def _enq_record(payload: dict[str, Any], t: str) -> str:
    """'[queue,class,attempt,t]'; its head is the same for every job of a kind: encoded once."""
    queue, cls = payload.get("queue") or "", payload.get("class") or ""
    try:
        head = _enq_heads[queue, cls]
    except (KeyError, TypeError):  # new, or not a name (unhashable): encoded here
        head = f"[{json.dumps(queue)},{json.dumps(cls)},"
        if isinstance(queue, str) and isinstance(cls, str) and len(_enq_heads) < 1024:
            _enq_heads[queue, cls] = head
    return f"{head}{int(payload.get('retry_count') or 0) + 1},{t}]"


_enq_heads: dict[tuple[str, str], str] = {}
