"""Counters and per-minute throughput (and ``attempts``, read from the job history).

Kept off the hot path: a worker adds to an in-memory ``StatsBuffer``; the buffer is
written in one pipeline at most every second (by the prefork master, which gets the
children's buffers over their pipes, or by a single-process worker itself).
"""

from __future__ import annotations

import functools
import math
import time
import weakref
from collections import defaultdict
from typing import Any

from .. import routing, store
from ..boundedjson import loads as json_loads
from ..config import Config, as_text
from ..core import hooks

THROUGHPUT_TTL = 2 * 24 * 3600
DAY_TTL = 35 * 24 * 3600  # per-day totals, for a month of history (as Sidekiq keeps)
# The duration buckets: tens of fields per class per minute (a throughput hash has a few),
# so kept 3 hours: a dashboard's last hour with room, about 100x less memory than 2 days.
DURATIONS_TTL = 3 * 3600
# The per-hour copies of both (for windows of 8, 24 and 72 hours): 72 hours and the
# current one, with an hour to spare. A class's hour has a few dozen fields at most.
HOURLY_TTL = 74 * 3600


# Job durations per class per minute, as counts in fixed log-spaced buckets (buffer
# fields ``b:<class>:<n>``, written to ``durations:<minute>`` as ``<class>:<n>``), for a
# percentile (api.class_metrics): BUCKETS_PER_DOUBLING buckets per doubling, so a
# bucket's upper edge is 2**(1/4) = 1.19x its lower one.
# Bucket n holds durations in [2**(n/4 - 3), 2**((n+1)/4 - 3)) ms: 0 holds everything
# under 0.125 ms, the last everything from about 70 minutes up.
BUCKETS_PER_DOUBLING = 4
BUCKET_FLOOR_LOG2 = -3
MAX_BUCKET = 100
# Distinct job classes counted per hour (so per minute too) by one buffer (one per master,
# or per single-process worker); runs of any further class are counted under OTHER_CLASS,
# so a stream of generated class names can't grow a minute's or an hour's hash without bound.
MAX_CLASSES_PER_MINUTE = 200
OTHER_CLASS = "(other)"


def bucket_of(ms: float) -> int:
    if not ms > _FLOOR_MS:
        return 0
    n = int(BUCKETS_PER_DOUBLING * (_log2(ms) - BUCKET_FLOOR_LOG2))  # positive here: int() is floor
    return n if n < MAX_BUCKET else MAX_BUCKET


_FLOOR_MS = 2.0**BUCKET_FLOOR_LOG2
_log2 = math.log2
_time = time.time


def bucket_upper_ms(n: int) -> float:
    """The upper edge of bucket ``n`` (ms)."""
    return float(2 ** ((n + 1) / BUCKETS_PER_DOUBLING + BUCKET_FLOOR_LOG2))


def day_of(minute: int) -> str:
    """The UTC day (YYYY-MM-DD) a throughput minute belongs to."""
    return time.strftime("%Y-%m-%d", time.gmtime(minute * 60))


class StatsBuffer:
    def __init__(self) -> None:
        # hour (minute // 60) -> the classes counted in it (kept across flushes: the cap is
        # per hour, so an hour's hash has no more classes than a minute's)
        self.classes: dict[int, set[str]] = {}
        # job class -> its field names: (ms, count, failed, one per duration bucket)
        self._names: dict[str, tuple[str, str, str, tuple[str, ...]]] = {}
        self.clear()

    def clear(self) -> None:
        self.processed = 0
        self.failed = 0
        # minute -> field -> amount; fields: processed, failed, ms:<class>, count:<class>,
        # failed:<class>, b:<class>:<bucket>
        self.minutes: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        # The minute being counted, its fields, and its classes' names (as capped): what a
        # run of the same minute needs, without the lookups above (this is per job).
        self._minute = -1
        self._fields: dict[str, float] = {}
        self._current: dict[str, tuple[str, str, str, tuple[str, ...]]] = {}

    def __bool__(self) -> bool:
        return bool(self.processed or self.failed or self.minutes)

    def record(self, job_class: str, ok: bool, ms: float, now: float | None = None) -> None:
        minute = int((now or _time()) // 60)
        names = self._current.get(job_class) if minute == self._minute else None
        if names is None:
            names = self._enter(minute, job_class)
        fields = self._fields
        if ok:
            self.processed += 1
            fields["processed"] += 1
        else:
            self.failed += 1
            fields["failed"] += 1
            fields[names[2]] += 1
        fields[names[0]] += ms
        fields[names[1]] += 1
        # bucket_of(ms), inline (per job):
        n = int(BUCKETS_PER_DOUBLING * (_log2(ms) - BUCKET_FLOOR_LOG2)) if ms > _FLOOR_MS else 0
        fields[names[3][n if n < MAX_BUCKET else MAX_BUCKET]] += 1

    def _enter(self, minute: int, job_class: str) -> tuple[str, str, str, tuple[str, ...]]:
        """The first run of a class in a minute (or of a minute): the minute's fields, and
        the class's names under the minute's cap."""
        if minute != self._minute:
            self._minute, self._current = minute, {}
        self._fields = self.minutes[minute]
        names = self._current[job_class] = self._field_names(self.capped(minute, job_class))
        return names

    def _field_names(self, job_class: str) -> tuple[str, str, str, tuple[str, ...]]:
        # Built once per class (this is on every job's path); as many as the cap allows.
        names = self._names.get(job_class)
        if names is None:
            if len(self._names) > 4 * MAX_CLASSES_PER_MINUTE:
                self._names.clear()
            buckets = tuple(f"b:{job_class}:{n}" for n in range(MAX_BUCKET + 1))
            names = self._names[job_class] = (f"ms:{job_class}", f"count:{job_class}", f"failed:{job_class}", buckets)
        return names

    def capped(self, minute: int, job_class: str) -> str:
        """The class as counted: itself, or OTHER_CLASS once the hour has its fill."""
        hour = minute // 60
        seen = self.classes.get(hour)
        if seen is None:
            for old in [h for h in self.classes if h < hour - 1]:
                del self.classes[old]  # hours long flushed
            seen = self.classes[hour] = set()
        if job_class in seen:
            return job_class
        if len(seen) >= MAX_CLASSES_PER_MINUTE:
            return OTHER_CLASS
        seen.add(job_class)
        return job_class

    def take(self) -> dict[str, Any]:
        """A plain, picklable snapshot (for the pipe to the master); clears the buffer."""
        snap = {
            "processed": self.processed,
            "failed": self.failed,
            "minutes": {m: dict(f) for m, f in self.minutes.items()},
        }
        self.clear()
        return snap

    def merge(self, snap: dict[str, Any]) -> None:
        self.processed += snap["processed"]
        self.failed += snap["failed"]
        for minute, fields in snap["minutes"].items():
            mine = self.minutes[minute]
            for field, amount in fields.items():
                mine[self._capped_field(minute, field)] += amount

    def _capped_field(self, minute: int, field: str) -> str:
        # A child's field, under this buffer's cap (the master's: one cap per master).
        kind, _, rest = field.partition(":")
        if not rest:
            return field  # processed, failed
        if kind == "b":
            job_class, _, bucket = rest.rpartition(":")
            return f"b:{self.capped(minute, job_class)}:{bucket}"
        return f"{kind}:{self.capped(minute, rest)}"


def flush(config: Config, snap: dict[str, Any]) -> None:
    """Write a snapshot in one round trip. Raises on a Redis error: the caller keeps it.
    The counters are the fleet's (a worker of one part writes them there too: a split
    layout, docs/architecture.md#cluster-layout)."""
    config = config.fleet
    keys = config.keys
    pipe = store.pipeline(config.redis())
    if snap["processed"]:
        pipe.incrby(keys.stats_processed, snap["processed"])
    if snap["failed"]:
        pipe.incrby(keys.stats_failed, snap["failed"])
    for minute, fields in snap["minutes"].items():
        _add_fields(pipe, fields, (keys.throughput(minute), THROUGHPUT_TTL), (keys.durations(minute), DURATIONS_TTL))
        _add_fields(
            pipe,
            fields,
            (keys.throughput_hour(minute // 60), HOURLY_TTL),
            (keys.durations_hour(minute // 60), HOURLY_TTL),
        )
        for kind in ("processed", "failed"):
            if fields.get(kind):
                day_key = keys.stats_day(kind, day_of(minute))
                pipe.incrby(day_key, int(fields[kind]))
                pipe.expire(day_key, DAY_TTL)
    pipe.execute()


def _add_fields(pipe: Any, fields: dict[str, float], counts: tuple[str, int], buckets: tuple[str, int]) -> None:
    """A minute's fields added to a throughput hash and a durations hash (a minute's or
    an hour's), each given with its TTL."""
    (key, ttl), (durations, durations_ttl) = counts, buckets
    bucketed = False
    for field, amount in fields.items():
        if field.startswith("ms:"):
            pipe.hincrbyfloat(key, field, round(amount, 3))
        elif field.startswith("b:"):
            pipe.hincrby(durations, field[2:], int(amount))
            bucketed = True
        else:
            pipe.hincrby(key, field, int(amount))
    pipe.expire(key, ttl)
    if bucketed:
        pipe.expire(durations, durations_ttl)


def throughput(config: Config, minute: int) -> dict[str, float]:
    """One minute's counts and total ms per job class (for a UI or a test)."""
    config = config.fleet
    raw = config.redis().hgetall(config.keys.throughput(minute))
    return {as_text(k): float(v) for k, v in raw.items()}


def attempts(config: Config, jid: str) -> list[dict[str, Any]]:
    """The job's failed runs, and a success that followed failures, as the attempts log
    had them (``attempt``, ``outcome``: retrying/dead/succeeded, ``at``, ``error_class``,
    ``error_message``). Read from the job's history (``history:<jid>``), which absorbed
    the old ``attempts:<jid>`` log."""
    found = []
    # A split layout keeps a job's history in its queue's part: the first part that has
    # one is the job's (a jid is one job's).
    listed: list[Any] = []
    for part in routing.all_parts(config):
        listed = part.redis().lrange(part.keys.history(jid), 0, -1)
        if listed:
            break
    for raw in listed:
        try:
            entry = json_loads(raw)
        except ValueError:
            continue  # an unreadable entry is skipped, as api.history skips it
        if not isinstance(entry, dict):
            continue
        went = entry.get("went")
        if went in ("retrying", "dead") or (went == "succeeded" and (entry.get("attempt") or 1) > 1):
            found.append(
                {
                    "attempt": entry.get("attempt"),
                    "outcome": went,
                    "at": entry.get("ended_at"),
                    "error_class": entry.get("error_class"),
                    "error_message": entry.get("error_message"),
                }
            )
    return found


# -- the counters, as a hook subscriber: each worker counts its own runs ----------------------

# identity -> a weak reference to its buffer (a plain dict: ``_count`` looks it up per job,
# and WeakValueDictionary.get is Python code).
_counting: dict[str, weakref.ref[StatsBuffer]] = {}


def counting(identity: str) -> StatsBuffer:
    """The buffer that ``identity``'s own runs are counted into: a ``succeeded`` as
    processed, a ``retrying``/``dead`` of a run (its event has the run's duration) as
    failed. Held by the worker; forgotten with it (two workers of one identity in one
    process share it: each run is still counted once)."""
    ref = _counting.get(identity)
    buffer = ref() if ref is not None else None
    if buffer is None:
        buffer = StatsBuffer()
        _counting[identity] = weakref.ref(buffer, functools.partial(_forget, identity))
    return buffer


def _forget(identity: str, gone: weakref.ref[StatsBuffer]) -> None:
    if _counting.get(identity) is gone:  # not a newer buffer of the same identity
        _counting.pop(identity, None)


def _count(event: hooks.JobEvent) -> None:
    if event.duration is None or event.identity is None:
        return  # not a run of this process's (a burial, a requeue, a filing for a gone process)
    if event.reason == "requested":
        return  # the job asked to run again later (cogworker.Retry): neither processed nor failed
    ref = _counting.get(event.identity)
    buffer = ref() if ref is not None else None
    if buffer is not None:
        buffer.record(event.payload.get("class") or "?", event.name == "succeeded", event.duration * 1000)


def subscribers() -> list[hooks.Subscription]:
    """The counters' hook, for a process to install (``hooks.install``)."""
    return [hooks.Subscription(("succeeded", "retrying", "dead"), _count)]
