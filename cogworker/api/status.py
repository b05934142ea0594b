"""A job's status and history, as the hook subscribers of ``cogworker.lifecycle.history`` wrote
them: ``status(jid)`` and ``history(jid)``. A worker's writes are buffered and land about
a second after the transition; a job pushed to a queue or ``schedule`` has its status at once.
Each merges the job's own keys with its records in the buckets of the common path
(``enq:<hour>``, the done ring's ``done:<hour>:<seq>``; docs/architecture.md#status-buckets),
in two pipelines (the ring's names, then its buckets). In the queue layout on a cluster
those keys are in the job's part: each part is asked in turn, the first that knows the
job answers."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from .. import routing, store
from ..boundedjson import loads as json_loads
from ..config import Config, as_text, count, get_config, number
from ..lifecycle.donering import keep_seconds
from ..lifecycle.history import HOUR, hour_of

STATES = ("queued", "scheduled", "running", "retrying", "succeeded", "dead", "cancelled", "expired")
# What a job with no record reads as: its status and history were trimmed by retention
# (docs/architecture.md#retention) or expired, or it never existed: Redis can't tell which.
NOT_RETAINED = "not_retained"


@dataclass(frozen=True)
class Retention:
    """What is kept of finished jobs (``Config.status_max``, ``status_max_failed``, the
    longer of ``status_ttl``/``history_ttl``) and of dead ones in the dead set."""

    succeeded: int
    failed: int
    seconds: int
    dead_max: int
    dead_seconds: float

    def describe(self) -> str:
        """One line, for the command and the web UI: why a job can read as not retained."""
        return (
            f"status and history are retained for the last {self.succeeded:,} successes and the last "
            f"{self.failed:,} failed (dead) jobs, each at most {_span(self.seconds)}; the dead set keeps "
            f"{self.dead_max:,} entries, at most {_span(self.dead_seconds)}"
        )


def _span(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        days = int(seconds // 86400)
        return f"{days} day{'s' if days > 1 else ''}" if days != 1 else "24 h"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"


def retention(config: Config | None = None) -> Retention:
    """The retention rules in force for ``config`` (the process's config by default)."""
    config = config or get_config()
    return Retention(
        succeeded=config.status_max,
        failed=config.status_max_failed,
        seconds=keep_seconds(config),
        dead_max=config.dead_max_jobs,
        dead_seconds=config.dead_timeout,
    )


def state(jid: str, config: Config | None = None, now: float | None = None) -> str:
    """The job's last known state (one of ``STATES``), or ``NOT_RETAINED`` when no status
    of it is kept; never ``queued`` for a finished job whose record was trimmed (its
    ``enq:`` field is deleted as it finishes)."""
    found = status(jid, config, now)
    return found.state if found is not None else NOT_RETAINED


@dataclass(frozen=True)
class JobStatus:
    """``state``: one of ``STATES``; ``attempt``: the execution it is about (1 = the first;
    for queued/scheduled the next one); ``identity``/``started_at``: while running;
    ``at``: when a retrying or scheduled job is due; ``reason``: why it went to retry/dead;
    ``cursor``/``items_done``: an iterable job's last checkpoint (its cursor, and how many
    items it has done over all its runs), None for any other job."""

    jid: str
    state: str
    updated_at: float
    attempt: int
    queue: str | None
    job_class: str | None = None
    identity: str | None = None
    started_at: float | None = None
    at: float | None = None
    error_class: str | None = None
    reason: str | None = None
    cursor: Any = None
    items_done: int | None = None
    progress: float | None = None  # the last ``current_job().progress``: 0-1
    progress_message: str | None = None


@dataclass(frozen=True)
class Attempt:
    """One execution: ``outcome`` succeeded, failed, orphaned, interrupted, timed_out, suspended
    or cancelled; ``went``: where the job went after it (succeeded, retrying, dead, queued, cancelled)."""

    attempt: int
    started_at: float | None
    ended_at: float
    outcome: str
    identity: str | None
    queue: str | None = None
    went: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None


@dataclass(frozen=True)
class Progress:
    """A job's last reported progress: ``fraction`` 0-1, ``message``, ``at`` (epoch s)."""

    fraction: float
    message: str
    at: float


def parse_progress(raw: Any) -> Progress | None:
    """``progress:<jid>``'s value, or None (absent, unreadable)."""
    data = json_object(raw)
    if data is None:
        return None
    try:
        return Progress(float(data["fraction"]), str(data.get("message") or ""), float(data.get("at") or 0))
    except (KeyError, TypeError, ValueError):
        return None


def json_object(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, (bytes, str)):
        return None
    try:
        value = json_loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _hours(ttl: int, now: float) -> list[int]:
    """The buckets a record kept ``ttl`` seconds may still be in, newest first."""
    newest = hour_of(now)
    return [newest - k * HOUR for k in range(math.ceil(ttl / HOUR) + 1)]


def _bucket_reads(config: Config, jid: str, kind: str, ttl: int, now: float) -> list[Any]:
    return [(getattr(config.keys, kind)(hour), jid) for hour in _hours(ttl, now)]


def _done_records(config: Config, jid: str, ring: Any) -> list[Any]:
    """The job's field in every bucket of the done ring (its names, read first): one pipeline."""
    names = [n for n in ring if isinstance(n, bytes)] if isinstance(ring, list) else []
    if not names:
        return []
    pipe = store.pipeline(config.redis())
    for name in names:
        pipe.hget(name, jid)
    return [r for r in pipe.execute(raise_on_error=False) if isinstance(r, bytes)]


def status(jid: str, config: Config | None = None, now: float | None = None) -> JobStatus | None:
    """The job's last known status, or None when none is retained (trimmed by retention,
    expired, an unknown jid, or status turned off: ``state`` says ``NOT_RETAINED``): the
    newest of its ``status:<jid>`` hash, its ``enq:`` record and its ``done:`` record;
    ``cancelled`` whenever its cancel mark is there (final: ``api.cancel`` took it off
    wherever it was, so nothing later about it is a new run). With its last progress."""
    config = config or get_config()
    when = time.time() if now is None else now
    return routing.first(routing.parts(config), lambda part: _status_in(jid, part, when))


def _status_in(jid: str, config: Config, now: float) -> JobStatus | None:
    """``status`` in one namespace (or part): two pipelines."""
    pipe = store.pipeline(config.redis())
    pipe.get(config.keys.cancelled(jid))
    pipe.get(config.keys.progress(jid))
    pipe.hgetall(config.keys.status(jid))
    pipe.hgetall(config.keys.checkpoint(jid))
    pipe.lrange(config.keys.done_ring, 0, -1)
    reads = _bucket_reads(config, jid, "enq", config.status_ttl, now)
    for key, field in reads:
        pipe.hget(key, field)
    mark, progress, raw, saved, ring, *records = pipe.execute(raise_on_error=False)
    found = [_from_hash(jid, raw)] if isinstance(raw, dict) and raw else []
    parsed = [_from_record(jid, False, record) for record in records] + [
        _from_record(jid, True, record) for record in _done_records(config, jid, ring)
    ]
    found += [p for p in parsed if p is not None and p.updated_at >= now - config.status_ttl]
    newest = _cancelled(jid, mark, max(found, key=lambda s: s.updated_at) if found else None)
    if newest is None:
        return None
    shown = parse_progress(progress)
    if shown is not None:
        newest = dataclasses.replace(newest, progress=shown.fraction, progress_message=shown.message or None)
    saved_at = _checkpoint(saved)
    return dataclasses.replace(newest, cursor=saved_at[0], items_done=saved_at[1]) if saved_at else newest


def _cancelled(jid: str, mark: Any, newest: JobStatus | None) -> JobStatus | None:
    data = json_object(mark)
    if data is None:
        return newest
    at = number(data.get("at")) or 0.0
    queue = data.get("queue") if isinstance(data.get("queue"), str) else None
    job_class = data.get("class") if isinstance(data.get("class"), str) else None
    was = data.get("was") if isinstance(data.get("was"), str) else None
    identity = data.get("identity") if isinstance(data.get("identity"), str) else None
    if newest is not None:  # what it was doing is over: no due time, no process unless it was running
        return dataclasses.replace(
            newest,
            state="cancelled",
            updated_at=max(at, newest.updated_at),
            reason=was,
            at=None,
            identity=identity,
            started_at=newest.started_at if identity else None,
            queue=newest.queue or queue,
            job_class=newest.job_class or job_class,
        )
    return JobStatus(
        jid=jid,
        state="cancelled",
        updated_at=at,
        attempt=0,
        queue=queue,
        job_class=job_class,
        reason=was,
        identity=identity,
    )


def _checkpoint(raw: Any) -> tuple[Any, int] | None:
    """An iterable job's checkpoint hash (docs/architecture.md#iterable) as (cursor, items
    done); None if absent or unreadable."""
    if not isinstance(raw, dict) or not raw:
        return None
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    try:
        return json_loads(fields["cursor"]), int(fields["done"])
    except (KeyError, ValueError, TypeError):
        return None


def _from_hash(jid: str, raw: dict[Any, Any]) -> JobStatus:
    fields = {as_text(k): as_text(v) for k, v in raw.items()}
    return JobStatus(
        jid=jid,
        state=fields.get("state", "?"),
        updated_at=number(fields.get("updated_at"), 0.0),
        attempt=count(fields.get("attempt")),
        queue=fields.get("queue") or None,
        job_class=fields.get("class") or None,
        identity=fields.get("identity") or None,
        started_at=number(fields.get("started_at")),
        at=number(fields.get("at")),
        error_class=fields.get("error_class") or None,
        reason=fields.get("reason") or None,
    )


def _from_record(jid: str, done: bool, raw: Any) -> JobStatus | None:
    """An ``enq:`` record ([queue, class, attempt, t]) or a ``done:`` one ([queue, class,
    attempt, started_at, ended_at, identity]) as a status; None if absent or unreadable."""
    try:
        data = json_loads(raw) if isinstance(raw, (bytes, str)) else None
        if data is None:
            return None
        if done:
            return JobStatus(
                jid=jid,
                state="succeeded",
                updated_at=float(data[4]),
                attempt=int(data[2]),
                queue=data[0] or None,
                job_class=data[1] or None,
            )
        return JobStatus(
            jid=jid,
            state="queued",
            updated_at=float(data[3]),
            attempt=int(data[2]),
            queue=data[0] or None,
            job_class=data[1] or None,
        )
    except (ValueError, IndexError, TypeError, KeyError):  # KeyError: an object, not a record's array
        return None


def history(jid: str, config: Config | None = None, now: float | None = None) -> list[Attempt]:
    """The job's executions, oldest first (at most ``history_max``); [] if none is known:
    its ``history:<jid>`` entries and its ``done:`` records, without
    duplicates. An entry that isn't readable is skipped."""
    config = config or get_config()
    when = time.time() if now is None else now
    return routing.first(routing.parts(config), lambda part: _history_in(jid, part, when) or None) or []


def _history_in(jid: str, config: Config, now: float) -> list[Attempt]:
    """``history`` in one namespace (or part): two pipelines."""
    pipe = store.pipeline(config.redis())
    pipe.lrange(config.keys.history(jid), 0, -1)
    pipe.lrange(config.keys.done_ring, 0, -1)
    listed, ring = pipe.execute(raise_on_error=False)
    records = _done_records(config, jid, ring)
    # The same execution read twice (a flush retried, a record in both places) has the
    # same times to the microsecond; two executions can end in the same millisecond.
    found: dict[tuple[int, str, float | None, float], Attempt] = {}
    oldest = now - config.history_ttl  # a bucket outlives its oldest records by up to an hour
    for entry in [_entry(raw) for raw in (listed if isinstance(listed, list) else [])] + [
        e for e in (_done_entry(raw) for raw in records) if e is not None and e.ended_at >= oldest
    ]:
        if entry is not None:
            started = None if entry.started_at is None else round(entry.started_at, 6)
            found.setdefault((entry.attempt, entry.outcome, started, round(entry.ended_at, 6)), entry)
    return sorted(found.values(), key=lambda a: a.ended_at)[-config.history_max :]


def _done_entry(raw: Any) -> Attempt | None:
    try:
        data = json_loads(raw) if isinstance(raw, (bytes, str)) else None
        if data is None:
            return None
        return Attempt(
            attempt=int(data[2]),
            started_at=number(data[3]),
            ended_at=float(data[4]),
            outcome="succeeded",
            identity=data[5],
            queue=data[0] or None,
            went="succeeded",
        )
    except (ValueError, IndexError, TypeError, KeyError):  # KeyError: an object, not a record's array
        return None


def _entry(raw: bytes | str) -> Attempt | None:
    try:
        data: dict[str, Any] = json_loads(raw)
        return Attempt(
            attempt=int(data.get("attempt") or 0),
            started_at=number(data.get("started_at")),
            ended_at=float(data["ended_at"]),
            outcome=str(data["outcome"]),
            identity=data.get("identity"),
            queue=data.get("queue"),
            went=data.get("went"),
            error_class=data.get("error_class"),
            error_message=data.get("error_message"),
            traceback=data.get("traceback"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
