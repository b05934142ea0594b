"""Numbers for a dashboard: Redis itself, per-minute throughput, and per job class
counts and durations (average, p95) from what the workers already record: the
per-minute ``throughput:<minute>`` hashes their gathered stats flush writes
(docs/architecture.md#operator-api)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .. import store
from ..config import Config, as_text, count, get_config, number
from ..lifecycle.stats import DURATIONS_TTL, THROUGHPUT_TTL, bucket_upper_ms

MAX_MINUTES = THROUGHPUT_TTL // 60  # what the throughput hashes are kept for (2 days)
P95_MINUTES = DURATIONS_TTL // 60 - 1  # what the duration buckets are kept for (3 hours), whole minutes


@dataclass(frozen=True)
class RedisInfo:
    version: str
    used_memory_human: str
    connected_clients: int
    uptime_seconds: int


@dataclass(frozen=True)
class MinuteStats:
    minute: int  # epoch seconds at the start of the minute (a multiple of 60)
    processed: int
    failed: int


@dataclass(frozen=True)
class ClassMetrics:
    job_class: str  # "(other)": classes past a minute's cap (stats.MAX_CLASSES_PER_MINUTE)
    processed: int  # runs that succeeded
    failed: int  # runs that raised (retried or dead)
    avg_ms: float | None
    # The upper edge of the bucket holding the 95th percentile: never below it, <= 19% above.
    # Over the last P95_MINUTES at most (the buckets' TTL), whatever ``minutes`` asked for.
    p95_ms: float | None


@dataclass
class _Tally:
    runs: int = 0
    failed: int = 0
    ms: float = 0.0
    buckets: dict[int, int] = field(default_factory=lambda: defaultdict(int))


def redis_info(config: Config | None = None) -> RedisInfo:
    config = (config or get_config()).fleet  # its node (each part may be on another)
    pipe = store.pipeline(config.redis())
    for section in ("server", "memory", "clients"):
        pipe.info(section)
    server, memory, clients = pipe.execute()
    return RedisInfo(
        version=str(server.get("redis_version", "?")),
        used_memory_human=str(memory.get("used_memory_human", "?")),
        connected_clients=count(clients.get("connected_clients")),
        uptime_seconds=count(server.get("uptime_in_seconds")),
    )


def _check_minutes(minutes: int) -> None:
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= MAX_MINUTES:
        raise ValueError(f"minutes must be a whole number from 1 to {MAX_MINUTES}, not {minutes!r}")


def _minutes(minutes: int, config: Config, durations: int = 0) -> list[tuple[int, dict[str, str]]]:
    """The last ``minutes`` throughput hashes, oldest first (the current, partial minute
    last), with the last ``durations`` minutes' buckets merged in as ``b:<class>:<n>``;
    one round trip. A missing or unreadable hash is empty."""
    now = int(time.time() // 60)
    numbers = list(range(now - minutes + 1, now + 1))
    pipe = store.pipeline(config.redis())
    for minute in numbers:
        pipe.hgetall(config.keys.throughput(minute))
    for minute in numbers[len(numbers) - durations :] if durations else []:
        pipe.hgetall(config.keys.durations(minute))
    replies = pipe.execute(raise_on_error=False)
    found = [(minute, _text(raw)) for minute, raw in zip(numbers, replies, strict=False)]
    for raw, (_, fields) in zip(replies[len(numbers) :], found[len(numbers) - durations :], strict=True):
        fields.update({"b:" + name: value for name, value in _text(raw).items()})
    return found


def _text(raw: Any) -> dict[str, str]:
    return {as_text(k): as_text(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def throughput(minutes: int = 60, config: Config | None = None) -> list[MinuteStats]:
    """Processed/failed per minute for the last ``minutes`` minutes, oldest first, the
    current (partial) minute last; minutes with nothing recorded are zeros."""
    _check_minutes(minutes)
    config = (config or get_config()).fleet  # the stats flush writes the fleet's keys
    return [
        MinuteStats(minute * 60, count(f.get("processed")), count(f.get("failed")))
        for minute, f in _minutes(minutes, config)
    ]


def class_metrics(minutes: int = 60, config: Config | None = None) -> list[ClassMetrics]:
    """Per job class over the last ``minutes`` minutes (the current one included): runs
    succeeded and failed, average and p95 duration (p95: over the last ``P95_MINUTES``
    at most); busiest first."""
    _check_minutes(minutes)
    config = (config or get_config()).fleet  # the stats flush writes the fleet's keys
    tallies: dict[str, _Tally] = defaultdict(_Tally)
    for _, fields in _minutes(minutes, config, durations=min(minutes, P95_MINUTES)):
        for name, value in fields.items():
            _add(tallies, name, value)
    found = [
        ClassMetrics(job_class, max(0, t.runs - t.failed), t.failed, t.ms / t.runs if t.runs else None, _p95(t.buckets))
        for job_class, t in tallies.items()
        if t.runs
    ]
    return sorted(found, key=lambda m: (-(m.processed + m.failed), m.job_class))


def _add(tallies: dict[str, _Tally], name: str, value: str) -> None:
    kind, _, rest = name.partition(":")
    amount = number(value)
    if amount is None:
        return  # a field someone else wrote (or a damaged one): skipped
    if kind == "count":
        tallies[rest].runs += int(amount)
    elif kind == "failed" and rest:
        tallies[rest].failed += int(amount)
    elif kind == "ms":
        tallies[rest].ms += amount
    elif kind == "b":
        job_class, _, bucket = rest.rpartition(":")
        if bucket.isdigit():
            tallies[job_class].buckets[int(bucket)] += int(amount)


def _p95(buckets: dict[int, int]) -> float | None:
    total = sum(buckets.values())
    if total <= 0:
        return None  # recorded before the buckets existed
    rank = math.ceil(0.95 * total)
    seen = 0
    for n in sorted(buckets):
        seen += buckets[n]
        if seen >= rank:
            return bucket_upper_ms(n)
    return None
