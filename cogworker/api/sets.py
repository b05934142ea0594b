"""The sorted sets an operator works on: schedule, retry and dead.

Every change is one script (or one command) that checks the entry is still in the set
it was read from, so it is safe under a running fleet: a ``retry`` racing the poller
moves the job once. Finding a jid scans the set in Redis (``ZSCAN`` with a ``MATCH``
pattern, chunk by chunk), never loading it into Python (docs/architecture.md#operator-api).

In the queue layout on a cluster, a set of the fleet's config is every part's set of
that name: sizes summed, pages merged by score, a change sent to the part the entry was
read in (``JobRecord.shard``); a part's own config is that part's set alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import routing
from ..config import Config, get_config
from ..core.payload import priority_of
from ..errors import BadPayload
from ..transitions import operator
from ..transitions.declare import Declared
from .records import JobRecord, check_page, checked

CHUNK = 500  # entries per script call of retry_all / clear: a few ms of Redis each
SCAN_COUNT = 5000  # entries ZSCAN looks at per call when finding a jid
DEFAULT_QUEUE = "default"  # for a job whose payload names no queue (as the poller does)


def glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class JobSet:
    """One sorted set of job entries (score: when it runs, or when it died)."""

    name = ""
    newest_first = False

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or get_config()
        self.client = self.config.redis()
        self.key: str = getattr(self.config.keys, self.name)
        self.merged = routing.merged(self.config)

    def parts(self) -> list[JobSet]:
        """The set in each part (this set itself outside the queue layout)."""
        if not self.merged:
            return [self]
        return [type(self)(part) for part in routing.all_parts(self.config)]

    def _part(self, record: JobRecord) -> JobSet:
        """The set ``record`` was read from: its part's, else its queue's part's."""
        if not self.merged:
            return self
        part = (
            routing.named(self.config, record.shard)
            if record.shard
            else routing.holder(self.config, record.queue or DEFAULT_QUEUE)
        )
        return type(self)(part)

    def _parse(self, raw: Any, score: Any) -> JobRecord:
        return JobRecord.parse(raw, self.name, float(score), routing.name_of(self.config))

    def _checked(self) -> Any:
        return checked(self.client, self.key, "sorted set")

    def size(self) -> int:
        if self.merged:
            return sum(part.size() for part in self.parts())
        with self._checked():
            return int(self.client.zcard(self.key))

    def jobs(self, offset: int = 0, limit: int = 25) -> list[JobRecord]:
        """A page: soonest first (dead: newest first). Costs O(limit), whatever the size
        (over parts: each part's first ``offset + limit``, merged)."""
        check_page(offset, limit)
        if limit == 0:
            return []
        if self.merged:
            pages = [part.jobs(0, offset + limit) for part in self.parts()]
            return routing.merge_pages(pages, lambda r: r.at or 0.0, self.newest_first, offset, limit)
        with self._checked():
            rows = self.client.zrange(self.key, offset, offset + limit - 1, desc=self.newest_first, withscores=True)
        return [self._parse(raw, score) for raw, score in rows]  # type: ignore[str-unpack]

    def _scan(self, needle: str) -> Any:
        """Entries containing ``needle``, as (raw, score), in chunks: Redis does the matching."""
        cursor = 0
        pattern = f"*{glob_escape(needle)}*"
        while True:
            with self._checked():
                cursor, rows = self.client.zscan(self.key, cursor, match=pattern, count=SCAN_COUNT)
            yield from rows
            if int(cursor) == 0:
                return

    def find(self, jid: str) -> JobRecord | None:
        if not jid:
            return None
        if self.merged:
            return routing.first(self.parts(), lambda part: part.find(jid))
        for raw, score in self._scan(jid):
            record = self._parse(raw, score)
            if record.jid == jid:
                return record
        return None

    def containing(self, needle: str) -> list[JobRecord]:
        """Every entry whose bytes contain ``needle`` (a workflow's id: its jobs), each once."""
        if self.merged:
            return [record for part in self.parts() for record in part.containing(needle)]
        found = {raw: self._parse(raw, score) for raw, score in self._scan(needle)} if needle else {}
        return list(found.values())  # ZSCAN may return an entry twice

    def filter(
        self, job_class: str | None = None, error_class: str | None = None, queue: str | None = None, limit: int = 100
    ) -> list[JobRecord]:
        """Entries matching every criterion given, in the page order, at most ``limit``."""
        check_page(0, limit)
        needle = job_class or error_class or queue
        if needle is None:
            return self.jobs(0, limit)
        if self.merged:
            pages = [part.filter(job_class, error_class, queue, limit) for part in self.parts()]
            return routing.merge_pages(pages, lambda r: r.at or 0.0, self.newest_first, 0, limit)
        found: dict[bytes, JobRecord] = {}
        for raw, score in self._scan(needle):
            record = self._parse(raw, score)
            if record.matches(job_class, error_class, queue):
                found[record.raw] = record  # ZSCAN may return an entry twice
                if len(found) >= limit:
                    break
        return sorted(found.values(), key=lambda r: r.at or 0.0, reverse=self.newest_first)

    def _record(self, jid_or_record: str | JobRecord) -> JobRecord | None:
        if isinstance(jid_or_record, JobRecord):
            return jid_or_record
        return self.find(jid_or_record)

    def _move(self, mode: str, record: JobRecord, dest: str = "", arg: Any = "") -> bool:
        if self.merged:
            raise AssertionError("a move is made in one part's set (JobSet._part)")
        keys = self.config.keys
        with self._checked():
            return operator.api_move(
                self.client,
                zset=self.key,
                dest=dest or self.key,
                queues=keys.queues,
                wake=keys.wake,
                mode=mode,
                entry=record.raw,
                arg=arg,
            )

    def delete(self, jid_or_record: str | JobRecord) -> bool:
        """Removes the entry (by jid, or a record as read: an unreadable entry too).
        False if it is not there (any more)."""
        record = self._record(jid_or_record)
        return record is not None and self._part(record)._move("delete", record)

    def retry(self, jid_or_record: str | JobRecord) -> bool:
        """Onto its queue now, as it is (``retry_count`` kept). False if it is gone."""
        record = self._record(jid_or_record)
        if record is None:
            return False
        if not record.is_job:
            raise BadPayload(f"entry in {self.key} is not a job (it can only be deleted): {record.raw[:80]!r}")
        queue = record.queue or DEFAULT_QUEUE
        part = self._part(record)  # the job's own part: its queue lives there
        target = part.config.keys.job_queue(queue, priority_of(record.payload))  # its level's, as the poller's
        return part._move("retry", record, target, queue)

    def retry_all(self, progress: Callable[[int], None] | None = None) -> int:
        """Every job of the set onto its queue now, CHUNK per script call; entries that are
        not jobs stay. ``progress(n)`` hears how many each chunk moved. Returns how many."""
        if self.merged:
            return sum(part.retry_all(progress) for part in self.parts())
        keys = self.config.keys
        moved = skipped = 0
        declared: list[Declared] = []  # the last chunk's lists: the next chunk's are mostly the same
        budget = self.size() + CHUNK  # entries arriving meanwhile can't keep it going forever
        while budget > 0:
            with self._checked():
                m, s, read, declared = operator.api_retry_chunk(
                    self.client,
                    keys,
                    zset=self.key,
                    queues=keys.queues,
                    wake=keys.wake,
                    declared=declared[-2 * CHUNK :],
                    skip=skipped,
                    chunk=CHUNK,
                    default_queue=DEFAULT_QUEUE,
                )
            moved, skipped, budget = moved + m, skipped + s, budget - read
            if progress is not None:
                progress(m)
            if read < CHUNK:
                break
        return moved

    def clear(self, progress: Callable[[int], None] | None = None) -> int:
        """Removes every entry, CHUNK per command; ``progress(n)`` hears each chunk's
        count. Returns how many."""
        if self.merged:
            return sum(part.clear(progress) for part in self.parts())
        removed = 0
        budget = self.size() + CHUNK
        while budget > 0:
            with self._checked():
                n = int(self.client.zremrangebyrank(self.key, 0, CHUNK - 1))
            removed, budget = removed + n, budget - CHUNK
            if progress is not None:
                progress(n)
            if n < CHUNK:
                break
        return removed


class _Killable(JobSet):
    def kill(self, jid_or_record: str | JobRecord) -> bool:
        """Into dead now, as it is. False if it is gone."""
        record = self._record(jid_or_record)
        if record is None:
            return False
        part = self._part(record)
        return part._move("kill", record, part.config.keys.dead, repr(time.time()))


class ScheduledSet(_Killable):
    name = "schedule"


class RetrySet(_Killable):
    name = "retry"


class DeadSet(JobSet):
    name = "dead"
    newest_first = True
