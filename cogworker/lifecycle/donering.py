"""The done ring: where a worker files its first-try successes, the common path's status
and history (docs/architecture.md#status-buckets, #retention).

Each success is one field of a ``done:<hour>:<seq>`` bucket: jid -> ``[queue, class,
attempt, started_at, ended_at, identity]``. A flush files them in two round trips, once a
second, never on a job's path: ``done_room.lua`` reserves their room in the ring (and drops
its oldest buckets), then one pipeline of plain commands writes the records and deletes
the jobs' ``enq:`` fields. The records never enter Lua: there each cost about three times
its ``HSET`` (bench/README.md, the status flush). A process dying between the two loses
that second's records, as a lost flush always did; the room it reserved stays empty.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ..config import Config
from ..keys import Keys
from ..store import guard, pipes
from ..transitions import call, declare, retention
from ..transitions.declare import Declared

HOUR = 3600
# A first-try success for the done ring: jid, queue, class, attempt, started_at, ended_at,
# identity, enqueued_at (which names its enq:<hour> field, deleted as it is done).
Done = tuple[str, str, str, int, "float | None", float, "str | None", Any]


def done_ttl(config: Config) -> int:
    """A ``done:`` record serves as status and history entry: kept as long as the longer."""
    return max(config.status_ttl, config.history_ttl) + HOUR


def keep_seconds(config: Config) -> int:
    """How long a finished job's status and history are retained at most (the age bound)."""
    return max(config.status_ttl, config.history_ttl)


def bucket_size(config: Config) -> int:
    """Successes per ``done:`` bucket: a tenth of ``status_max``, so that the ring keeps
    between ``status_max`` and 1.1 x ``status_max`` of them."""
    return max(1, config.status_max // 10)


def enq_spec(enqueued_at: Any) -> int:
    """Which ``enq:`` bucket holds the job's field: its push's hour, a moment after its
    ``enqueued_at`` (the payload is built first), so in the last minute of an hour that one
    and the next (minus the hour); 0 when unknown."""
    if type(enqueued_at) is not float and (type(enqueued_at) is not int):
        return 0
    hour = int(enqueued_at // HOUR) * HOUR
    return hour if enqueued_at - hour <= HOUR - 60 else -hour


def enq_buckets(spec: int) -> tuple[int, ...]:
    """The hours whose ``enq:`` buckets a spec names."""
    return () if spec == 0 else (spec,) if spec > 0 else (-spec, -spec + HOUR)


def file_done(config: Config, done: list[Done], now: float) -> None:
    """Files ``done`` (in their order) in the ring's buckets and drops their ``enq:`` fields."""
    if not done:
        return
    client, k = config.redis(), config.keys
    size = bucket_size(config)
    spans, used = retention.done_room(
        client,
        k,
        ring=k.done_ring,
        fill=k.done_fill,
        declared=_guess(k, now, len(done), size),
        n=len(done),
        now=repr(now),
        size=size,
        status_max=config.status_max,
        keep=keep_seconds(config),
    )
    _remember(k, used, spans, config.status_max // size)
    commands: list[tuple[Any, ...]] = []
    at, ttl = 0, done_ttl(config)
    for name, count in spans:
        part = done[at : at + count]
        at += count
        fields: list[str] = []
        for d in part:
            fields += (d[0], _record(d))
        commands += [("HSET", name, *fields), ("EXPIRE", name, ttl)]
    gone: dict[int, list[str]] = {}
    for d in done:
        gone.setdefault(enq_spec(d[7]), []).append(d[0])
    for spec, jids in gone.items():
        commands += [("HDEL", k.enq(hour), *jids) for hour in enq_buckets(spec)]
    # One write, packed by hiredis (redis-py's pipeline packs each argument in Python).
    # Best-effort as the flush is: a key of the wrong type fails its own command only.
    for reply in pipes.send(client, *commands):
        if isinstance(reply, Exception):
            guard.handle("filing first-try successes", reply)


# The ring's buckets this process last saw, per ring (a namespace's): given again to the
# next reservation with those it may open, the next in sequence, so that a flush takes
# one call, as when the script named them itself (a bucket it wasn't given costs a second).
_seen: dict[str, list[Declared]] = {}


def _seq(bucket: Declared) -> int:
    return int(str(bucket.name).rsplit(":", 1)[1])  # "done:<hour>:<seq>"


def _guess(k: Keys, now: float, n: int, size: int) -> list[Declared]:
    seen = _seen.get(k.done_ring, [])
    if not seen:
        return []
    top, hour = max(map(_seq, seen)), int(now // HOUR) * HOUR
    known = {str(b.name) for b in seen}
    fresh = [name for i in range(1, n // size + 2) if (name := f"done:{hour}:{top + i}") not in known]
    return [*seen, *declare.declare(k, fresh)]


def _remember(k: Keys, used: list[Declared], spans: list[tuple[Any, int]], buckets: int) -> None:
    """Keeps the buckets given that the ring may still hold: the head (the last span's)
    and those up to a few ring lengths before it in sequence."""
    filled = {call.text(name) for name, _ in spans}
    heads = [_seq(b) for b in used if call.text(b.key) in filled]
    if not heads:
        return
    top = max(heads)
    _seen[k.done_ring] = [b for b in used if top - 4 * buckets - 16 < _seq(b) <= top]


def _record(done: Done) -> str:
    _, queue, job_class, attempt, started_at, ended_at, identity, _ = done
    return (
        f"[{_js(queue)},{_js(job_class)},{attempt},{'null' if started_at is None else repr(started_at)},"
        f"{ended_at!r},{_js(identity)}]"
    )


@functools.lru_cache(maxsize=256)
def _js(text: str | None) -> str:
    """A JSON string (or null); queues, classes and identities repeat: cached."""
    return json.dumps(text)
