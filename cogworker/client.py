"""Enqueueing: single, bulk (pipelined), scheduled, and by name; the client chain runs here."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from . import unique
from .config import get_config
from .jobs import JobOptions, build_payload, dumps, registry, to_epoch
from .middleware import client_middleware


def _write(pipe: Any, payload: dict[str, Any], encoded: str, at: float | None) -> None:
    keys = get_config().keys
    if at is not None and at > time.time():
        pipe.zadd(keys.schedule, {encoded: at})
    else:
        pipe.lpush(keys.queue(payload["queue"]), encoded)
        pipe.sadd(keys.queues, payload["queue"])


def push(payload: dict[str, Any], at: float | None = None) -> str | None:
    """Write one job (to its queue, or to ``schedule`` when ``at`` is in the future).

    Returns its jid, or None when a client middleware or a held unique lock dropped it.
    Serialization happens before anything is written: a bad argument writes nothing.
    """
    dumps(payload)  # refuse bad arguments before any middleware or Redis sees them

    def final() -> str | None:
        if at is not None and at > time.time():
            payload["at"] = at
        if payload.get("unique_for"):
            unique.prepare(payload)
        encoded = dumps(payload)
        client = get_config().redis()
        if payload.get("unique_for"):
            return unique.push(client, payload, encoded, at)
        pipe = client.pipeline(transaction=False)
        _write(pipe, payload, encoded, at)
        pipe.execute()
        return payload["jid"]

    return client_middleware.invoke((payload,), final)


def push_many(payloads: Sequence[dict[str, Any]]) -> list[str | None]:
    """Bulk: one pipeline for all of them (unique jobs are pushed one by one)."""
    encoded = [dumps(p) for p in payloads]  # all refused before any is written
    jids: list[str | None] = []
    client = get_config().redis()
    pipe = client.pipeline(transaction=False)
    for payload, raw in zip(payloads, encoded, strict=True):
        if len(client_middleware) or payload.get("unique_for"):  # their own path, one by one
            jids.append(push(payload))
            continue
        _write(pipe, payload, raw, None)
        jids.append(payload["jid"])
    pipe.execute()
    return jids


def enqueue(name: str, *args: Any, **kwargs: Any) -> str | None:
    """Enqueue by job name, without importing the job's code.

    A registered job's options apply; otherwise the defaults (queue ``default``).
    """
    if not isinstance(name, str) or not name:
        raise TypeError("enqueue takes the job name as a non-empty string")
    known = registry.get(name)
    opts = known.opts if known is not None else JobOptions()
    return push(build_payload(name, args, kwargs, opts))


def enqueue_at(name: str, when: Any, *args: Any, **kwargs: Any) -> str | None:
    known = registry.get(name)
    opts = known.opts if known is not None else JobOptions()
    return push(build_payload(name, args, kwargs, opts), at=to_epoch(when))
