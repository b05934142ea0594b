"""Queues, for an operator: sizes, latency, pages, find/delete/clear, and pause.

A pause is fleet-wide: the queue's name in the ``paused`` set, which every fetch script
reads in the same step as its move (docs/architecture.md#operator-api). In the queue layout
on a cluster a queue's keys (and its pause) are its shard's: ``config.shard(name)``."""

from __future__ import annotations

import time
from typing import Any

from ..config import Config, as_text, get_config
from ..errors import NotFound
from ..names import check_queue_name, shown
from ..store import lua
from . import shards
from .records import JobRecord, check_page, checked

FIND_CHUNK = 1000  # list entries the find script reads per call


class Queue:
    """A queue by its name, which must keep the naming rule (``names.py``); the queues
    already in Redis are all listed (``queues()``), those that break it too."""

    def __init__(self, name: str, config: Config | None = None) -> None:
        check_queue_name(name)
        self._set(name, config)

    @classmethod
    def known(cls, name: str, config: Config | None = None) -> Queue:
        """A queue found in Redis, whatever its name: it can be shown (escaped) and
        operated on, never refused for a name written before the rule or by another client."""
        found = cls.__new__(cls)
        found._set(name, config)
        return found

    def _set(self, name: str, config: Config | None) -> None:
        self.name = name
        base = config or get_config()
        # A shard's config is kept as given: the queue was found in that shard's keys.
        self.config = base.shard(name) if base.shard_name is None else base
        self.client = self.config.redis()
        self.key = self.config.keys.queue(name)

    @property
    def shown(self) -> str:
        """The name for a page or a table: escaped if it breaks the rule."""
        return shown(self.name)

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Queue) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def _checked(self) -> Any:
        return checked(self.client, self.key, "list")

    def size(self) -> int:
        with self._checked():
            return int(self.client.llen(self.key))

    def latency(self) -> float:
        """Seconds the next job to run (the oldest) has waited; 0.0 if empty."""
        with self._checked():
            raw = self.client.lindex(self.key, -1)
        if raw is None:
            return 0.0
        enqueued = JobRecord.parse(raw, "").enqueued_at
        if not isinstance(enqueued, (int, float)):
            return 0.0
        return max(0.0, time.time() - float(enqueued))

    def jobs(self, offset: int = 0, limit: int = 25) -> list[JobRecord]:
        """A page, the next to run first (fetch takes from the list's right end)."""
        check_page(offset, limit)
        if limit == 0:
            return []
        with self._checked():
            rows = self.client.lrange(self.key, -(offset + limit), -(offset + 1))
        return [JobRecord.parse(raw, f"queue:{self.name}", shard=self.config.shard_name) for raw in reversed(rows)]

    def find(self, jid: str) -> JobRecord | None:
        """Scanned in Redis from the head (where pushes land), one chunk per call: a push
        or a fetch meanwhile shifts entries away from the scan, never past it."""
        start = 0
        while jid and start >= 0:
            with self._checked():
                index, raw, start = lua.run(self.client, "api_list_find", [self.key], [start, FIND_CHUNK, jid])
            if int(index) >= 0:
                record = JobRecord.parse(raw, f"queue:{self.name}", shard=self.config.shard_name)
                if record.jid == jid:
                    return record
            start = int(start)
        return None

    def delete(self, jid_or_record: str | JobRecord) -> bool:
        record = jid_or_record if isinstance(jid_or_record, JobRecord) else self.find(jid_or_record)
        if record is None:
            return False
        with self._checked():
            return int(self.client.lrem(self.key, 1, record.raw)) == 1  # type: ignore[arg-type]

    def clear(self) -> int:
        """Empties the queue; returns how many jobs it held. UNLINK frees the list in the
        background: O(1) for Redis's main thread whatever the length."""
        with self._checked():
            return int(lua.run(self.client, "api_clear_list", [self.key], []))

    def pause(self) -> None:
        """From the moment this returns, no worker takes a job off this queue (jobs already
        fetched, at most one looked-ahead job per prefork child, still run)."""
        with checked(self.client, self.config.keys.paused, "set"):
            self.client.sadd(self.config.keys.paused, self.name)

    def resume(self) -> None:
        with checked(self.client, self.config.keys.paused, "set"):
            self.client.srem(self.config.keys.paused, self.name)
        self.client.xadd(self.config.keys.wake, {"w": 1}, maxlen=100, approximate=True)  # idle workers look again

    def paused(self) -> bool:
        with checked(self.client, self.config.keys.paused, "set"):
            return bool(self.client.sismember(self.config.keys.paused, self.name))


def queue_names(config: Config | None = None) -> list[str]:
    """Every known queue: the ones jobs were pushed to, and the paused ones (of every shard)."""
    config = config or get_config()
    if shards.merged(config):
        return sorted({name for part in shards.parts(config) for name in queue_names(part)})
    client = config.redis()
    with checked(client, config.keys.queues, "set"):
        names = {as_text(n) for n in client.smembers(config.keys.queues)}
    with checked(client, config.keys.paused, "set"):
        names |= {as_text(n) for n in client.smembers(config.keys.paused)}
    return sorted(names)


def queues(config: Config | None = None) -> list[Queue]:
    """Every known queue, each bound to the shard that listed it (the queue layout)."""
    config = config or get_config()
    if shards.merged(config):
        found = {q.name: q for part in shards.parts(config) for q in queues(part)}
        return [found[name] for name in sorted(found)]
    return [Queue.known(name, config) for name in queue_names(config)]


def queue(name: str, config: Config | None = None) -> Queue:
    """A known queue; ``NotFound`` for a name no job was ever pushed to. A name that
    breaks the rule is taken only if Redis knows it (else ``ConfigurationError``)."""
    if isinstance(name, str) and name in queue_names(config):
        return Queue.known(name, config)
    found = Queue(name, config)
    if not found.client.exists(found.key):
        raise NotFound(f"no queue named {name!r}")  # a name that keeps the rule: repr shows it as it is
    return found
