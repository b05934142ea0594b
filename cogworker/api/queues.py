"""Queues, for an operator: sizes, latency, pages, find/delete/clear, and pause.

A pause is fleet-wide: the queue's name in the ``paused`` set, which every fetch script
reads in the same step as its move (docs/architecture.md#operator-api). In the queue layout
on a cluster a queue's keys (and its pause) are its part's: ``routing.holder(config, name)``.

A queue's waiting jobs are its own list's and its priority levels' (docs/architecture.md#priorities):
every read here takes them together, in fetch order (the highest level first, the queue's
own list, then the levels below 0), and its size counts them all."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .. import routing
from ..config import Config, as_text, get_config
from ..errors import NotFound
from ..keys import level_name, split_level
from ..names import check_queue_name, shown
from ..store import ResponseError
from ..transitions import operator
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
        # A part's config is kept as given: the queue was found in that part's keys.
        self.config = routing.holder(base, name) if routing.name_of(base) is None else base
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

    def lists(self) -> list[str]:
        """The keys of the lists its jobs wait on, in fetch order: its levels above 0 from
        the highest, its own, its levels below 0 (only its own when none is in use)."""
        levels = self.config.keys.levels
        with checked(self.client, levels, "set"):
            members = self.client.smembers(levels)
        ps = sorted(
            (p for queue, p in (split_level(as_text(m)) for m in members) if queue == self.name and p),
            reverse=True,
        )
        keys = self.config.keys
        return [
            *(keys.queue(level_name(self.name, p)) for p in ps if p > 0),
            self.key,
            *(keys.queue(level_name(self.name, p)) for p in ps if p < 0),
        ]

    def _lengths(self) -> list[tuple[str, int]]:
        lists = self.lists()
        with self._checked():
            pipe = self.client.pipeline(transaction=False)
            for key in lists:
                pipe.llen(key)
            return list(zip(lists, (int(n) for n in pipe.execute()), strict=True))

    def size(self) -> int:
        """Its waiting jobs, every level's counted."""
        return sum(n for _, n in self._lengths())

    def latency(self) -> float:
        """Seconds the next job to run (the oldest of the first list in fetch order that
        has one) has waited; 0.0 if empty."""
        first = next((key for key, n in self._lengths() if n), None)
        if first is None:
            return 0.0
        with self._checked():
            raw = self.client.lindex(first, -1)
        if raw is None:
            return 0.0
        enqueued = JobRecord.parse(raw, "").enqueued_at
        if not isinstance(enqueued, (int, float)):
            return 0.0
        return max(0.0, time.time() - float(enqueued))

    def jobs(self, offset: int = 0, limit: int = 25) -> list[JobRecord]:
        """A page, in fetch order, the next to run first (fetch takes from each list's
        right end, and the lists one after the other)."""
        check_page(offset, limit)
        if limit == 0:
            return []
        rows: list[Any] = []
        for key, n in self._lengths():
            if offset >= n:
                offset -= n
                continue
            want = limit - len(rows)
            with self._checked():
                got = self.client.lrange(key, -(offset + want), -(offset + 1))
            rows += reversed(got)
            offset = 0
            if len(rows) >= limit:
                break
        return [JobRecord.parse(raw, f"queue:{self.name}", shard=routing.name_of(self.config)) for raw in rows[:limit]]

    def find(self, jid: str) -> JobRecord | None:
        """Scanned in Redis from the head (where pushes land), one chunk per call: a push
        or a fetch meanwhile shifts entries away from the scan, never past it."""
        for record in self._scan(jid):  # a match may be in another job's arguments: scanned on
            if record.jid == jid:
                return record
        return None

    def containing(self, needle: str) -> Iterator[JobRecord]:
        """Every entry whose bytes contain ``needle`` (a workflow's id: its jobs), scanned in
        Redis from the head as ``find`` scans."""
        return self._scan(needle)

    def _scan(self, needle: str) -> Iterator[JobRecord]:
        """The entries containing ``needle``, each list's in turn, in fetch order."""
        for key in self.lists() if needle else ():
            start = 0
            while start >= 0:
                with self._checked():
                    index, raw, start = operator.api_list_find(
                        self.client, list=key, start=start, count=FIND_CHUNK, needle=needle
                    )
                if int(index) >= 0:
                    yield JobRecord.parse(raw, f"queue:{self.name}", shard=routing.name_of(self.config))
                start = int(start)

    def delete(self, jid_or_record: str | JobRecord) -> bool:
        record = jid_or_record if isinstance(jid_or_record, JobRecord) else self.find(jid_or_record)
        if record is None:
            return False
        with self._checked():
            return any(int(self.client.lrem(key, 1, record.raw)) == 1 for key in self.lists())  # type: ignore[arg-type]

    def clear(self) -> int:
        """Empties the queue, its levels too; returns how many jobs they held. UNLINK frees
        each list in the background: O(1) for Redis's main thread whatever the length."""
        with self._checked():
            return sum(operator.api_clear_list(self.client, queue=key) for key in self.lists())

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
    """Every known queue: the ones jobs were pushed to, and the paused ones (of every part)."""
    config = config or get_config()
    if routing.merged(config):
        return sorted({name for part in routing.parts(config) for name in queue_names(part)})
    client = config.redis()
    with checked(client, config.keys.queues, "set"):
        names = {as_text(n) for n in client.smembers(config.keys.queues)}
    with checked(client, config.keys.paused, "set"):
        names |= {as_text(n) for n in client.smembers(config.keys.paused)}
    return sorted(names)


def with_levels(config: Config, names: list[str]) -> list[str]:
    """``names`` and the names of their priority levels in use (in one part), so a sum
    of their lists' lengths counts every waiting job. A levels set of the wrong type: none."""
    client = config.redis()
    try:
        members = client.smembers(config.keys.levels)
    except ResponseError:
        return names
    wanted = set(names)
    return [*names, *(name for name in map(as_text, members) if split_level(name)[0] in wanted)]


def queues(config: Config | None = None) -> list[Queue]:
    """Every known queue, each bound to the part that listed it (the queue layout)."""
    config = config or get_config()
    if routing.merged(config):
        found = {q.name: q for part in routing.parts(config) for q in queues(part)}
        return [found[name] for name in sorted(found)]
    return [Queue.known(name, config) for name in queue_names(config)]


def queue(name: str, config: Config | None = None) -> Queue:
    """A known queue; ``NotFound`` for a name no job was ever pushed to. A name that
    breaks the rule is taken only if Redis knows it (else ``ConfigurationError``)."""
    if isinstance(name, str) and name in queue_names(config):
        return Queue.known(name, config)
    found = Queue(name, config)
    if not found.client.exists(*found.lists()):
        raise NotFound(f"no queue named {name!r}")  # a name that keeps the rule: repr shows it as it is
    return found
