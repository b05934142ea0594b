"""What the operator's API returns: job entries, process records, counters; and the
checks every call shares (page bounds, keys of the wrong type)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import store
from ..boundedjson import loads as json_loads
from ..config import as_text
from ..core.payload import is_number
from ..errors import WrongType
from ..store import errors as redis_errors

_JID = re.compile(rb'"jid"\s*:\s*"([^"\\]+)"')


def check_page(offset: int, limit: int) -> None:
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a whole number >= 0, not {offset!r}")
    if not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a whole number >= 0, not {limit!r}")


@contextmanager
def checked(client: store.Client, key: str, expected: str) -> Iterator[None]:
    """A WRONGTYPE reply about ``key`` as one clear line (``WrongType``). Redis refused
    the command, so nothing was changed."""
    try:
        yield
    except store.ResponseError as exc:
        if redis_errors.classify(exc) != redis_errors.WRONGTYPE:
            raise
        try:
            actual = as_text(client.type(key))
        except store.RedisError:
            actual = "another type"
        raise WrongType(f"key {key} holds a {actual}, not a {expected}: left as it is") from None


@dataclass(frozen=True)
class JobRecord:
    """One entry of a queue, schedule, retry, dead or unsettled, as stored. ``raw`` is the
    exact bytes (what every change is checked against); an entry that is not valid JSON
    has ``readable`` False and only ``raw`` (and ``jid`` if one could be read) set."""

    raw: bytes
    source: str  # "queue:<name>", "schedule", "retry", "dead", "unsettled"
    at: float | None = None  # its score where it has one
    payload: dict[str, Any] = field(default_factory=dict)
    readable: bool = True
    # The shard it was read from (the queue layout on a cluster), so a change goes to the
    # keys it was read in; None in one namespace. Not part of its identity.
    shard: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, raw: bytes | str, source: str, at: float | None = None, shard: str | None = None) -> JobRecord:
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        try:
            value = json_loads(data)
        except (ValueError, UnicodeDecodeError):
            value = None
        if not isinstance(value, dict):
            match = _JID.search(data)
            jid = {"jid": match.group(1).decode(errors="replace")} if match else {}
            return cls(data, source, at, jid, readable=False, shard=shard)
        return cls(data, source, at, value, shard=shard)

    def _get(self, name: str) -> Any:
        return self.payload.get(name)

    # Each field as its type or none: an entry written by anything else may carry any
    # JSON there, and a page or a table must still show it.
    def _text(self, name: str) -> str | None:
        value = self._get(name)
        return value if isinstance(value, str) else None

    def _number(self, name: str) -> float | None:
        value = self._get(name)
        return value if is_number(value) else None

    @property
    def jid(self) -> str | None:
        return self._text("jid")

    @property
    def job_class(self) -> str | None:
        """The job's name (``module.qualname``): the payload's ``class``."""
        return self._text("class")

    @property
    def is_job(self) -> bool:
        """A job object that can be run again (a bad-payload dead entry is not)."""
        return self.readable and isinstance(self.job_class, str)

    @property
    def args(self) -> list[Any]:
        value = self._get("args")
        return value if isinstance(value, list) else []

    @property
    def kwargs(self) -> dict[str, Any]:
        value = self._get("kwargs")
        return value if isinstance(value, dict) else {}

    @property
    def queue(self) -> str | None:
        return self._text("queue")

    @property
    def retry_count(self) -> int:
        """The runs that failed (the payload's ``retry_count``: a failure counts its run)."""
        value = self._number("retry_count")
        return int(value) if value is not None else 0

    @property
    def retries(self) -> int:
        """The retries it had so far: every failed run but the first was one (a job in
        retry after its first failure has had none yet)."""
        return max(self.retry_count - 1, 0)

    @property
    def error_class(self) -> str | None:
        return self._text("error_class")

    @property
    def error_message(self) -> str | None:
        return self._text("error_message")

    @property
    def error_traceback(self) -> str | None:
        return self._text("error_traceback")

    @property
    def failed_at(self) -> float | None:
        return self._number("failed_at")

    @property
    def enqueued_at(self) -> float | None:
        return self._number("enqueued_at")

    @property
    def raw_payload(self) -> str:
        """The entry as text: for an unreadable entry, all there is to show."""
        return self._text("raw_payload") or self.raw.decode("utf-8", errors="replace")

    def matches(self, job_class: str | None, error_class: str | None, queue: str | None) -> bool:
        return (
            (job_class is None or self.job_class == job_class)
            and (error_class is None or self.error_class == error_class)
            and (queue is None or self.queue == queue)
        )


@dataclass(frozen=True)
class RunningJob:
    jid: str | None
    job_class: str | None
    queue: str | None
    run_at: float | None
    progress: float | None = None  # its last current_job().progress(...), 0-1
    progress_message: str | None = None


@dataclass(frozen=True)
class ProcessRecord:
    identity: str
    kind: str  # master | child | worker
    host: str
    pid: int
    queues: list[str]
    started_at: float | None
    last_beat: float | None
    busy: int
    rss: int
    running: RunningJob | None
    state: str = ""  # a master or single-process worker: "", "quiet" or "stopping"
    ppid: int = 0  # a child: its master's pid (on the same host); 0 when not known


@dataclass(frozen=True)
class Stats:
    processed: int
    failed: int
    enqueued: int  # the sum of every known queue's size
    scheduled_size: int
    retry_size: int
    dead_size: int
    unsettled_size: int
    processes: int
    busy: int
    default_latency: float


@dataclass(frozen=True)
class DayStats:
    date: str  # YYYY-MM-DD, UTC
    processed: int
    failed: int
