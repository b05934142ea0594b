"""Per job class metrics over a chosen window (1 h, 8 h, 24 h, 72 h), as Sidekiq 7's
Metrics tab shows them: executions and failures per step of the window, execution time
percentiles (p50, p95, p99), and a histogram of execution times, from what the workers'
gathered stats flush already writes (docs/architecture.md#operator-api).

The last hour reads the per-minute hashes (``throughput:<minute>``, ``durations:<minute>``):
60 steps of a minute. Longer windows read the per-hour copies (``throughput_h:<hour>``,
``durations_h:<hour>``, kept 74 hours): a step of an hour, so a 72-hour window is 72
hashes and 72 bucket hashes, one round trip, whatever the number of jobs."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..config import Config, as_text, get_config
from ..lifecycle.stats import BUCKETS_PER_DOUBLING, MAX_BUCKET, bucket_upper_ms
from .metrics import _add, _Tally, _text

WINDOWS = {"1h": 1, "8h": 8, "24h": 24, "72h": 72}  # name -> hours
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Period:
    name: str  # "1h", "8h", "24h" or "72h"
    step: int  # seconds per step: 60 (the last hour) or 3600
    starts: list[int]  # each step's start (epoch seconds), oldest first, the current (partial) one last


@dataclass(frozen=True)
class ClassSummary:
    job_class: str
    processed: int  # runs that succeeded
    failed: int  # runs that raised
    total_ms: float
    avg_ms: float | None
    # Each the upper edge of the bucket holding that percentile: never below the true
    # value, at most 2**(1/4) (19%) above it. None: no duration recorded.
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    @property
    def runs(self) -> int:
        return self.processed + self.failed


@dataclass(frozen=True)
class Bar:
    """A histogram bar: runs that took from ``low_ms`` up to ``high_ms`` (one doubling)."""

    low_ms: float
    high_ms: float
    runs: int


@dataclass(frozen=True)
class ClassWindow:
    """One job class over a window: its summary, runs per step, and its histogram."""

    window: Period
    summary: ClassSummary | None  # None: it ran in no step of the window
    processed: list[int]  # per step, as window.starts
    failed: list[int]
    histogram: list[Bar]  # from the fastest doubling to the slowest one with a run


@dataclass(frozen=True)
class WindowMetrics:
    window: Period
    classes: list[ClassSummary]  # busiest first
    processed: dict[str, list[int]]  # per class, per step
    failed: dict[str, list[int]]


def window(name: str = "1h", now: float | None = None) -> Period:
    """The steps of a window; ValueError (one line) for a name not in WINDOWS."""
    hours = WINDOWS.get(name)
    if hours is None:
        raise ValueError(f"window must be one of {', '.join(WINDOWS)}, not {name!r}")
    step = 60 if hours == 1 else 3600
    count = 60 if hours == 1 else hours
    last = int((time.time() if now is None else now) // step)
    return Period(name, step, [(last - count + 1 + i) * step for i in range(count)])


def _read(win: Period, config: Config, job_class: str | None = None) -> list[dict[str, str]]:
    """Each step's fields (a throughput hash with its buckets as ``b:<class>:<n>``), one
    round trip: every class's (HGETALL), or only ``job_class``'s (HMGET of its 104 fields,
    so a class's page costs the same however many other classes ran)."""
    keys = config.keys
    names = _class_fields(job_class) if job_class is not None else None
    pipe = config.redis().pipeline(transaction=False)
    for start in win.starts:
        pair = (
            (keys.throughput(start // 60), keys.durations(start // 60))
            if win.step == 60
            else (keys.throughput_hour(start // 3600), keys.durations_hour(start // 3600))
        )
        for key, fields in zip(pair, names or (None, None), strict=True):
            if fields is None:
                pipe.hgetall(key)
            else:
                pipe.hmget(key, fields)
    replies = pipe.execute(raise_on_error=False)
    found = []
    for i in range(len(win.starts)):
        counts, buckets = (_fields(replies[2 * i + j], names[j] if names else None) for j in (0, 1))
        counts.update({"b:" + name: value for name, value in buckets.items()})
        found.append(counts)
    return found


def _class_fields(job_class: str) -> tuple[list[str], list[str]]:
    return (
        [f"count:{job_class}", f"failed:{job_class}", f"ms:{job_class}"],
        [f"{job_class}:{n}" for n in range(MAX_BUCKET + 1)],
    )


def _fields(reply: Any, names: list[str] | None) -> dict[str, str]:
    """An HGETALL reply, or an HMGET one paired with the names asked for (missing: left out)."""
    if names is None:
        return _text(reply)
    if not isinstance(reply, list):
        return {}  # an error (a key of another type): as empty
    return {name: as_text(value) for name, value in zip(names, reply, strict=True) if value is not None}


def _step_tallies(win: Period, config: Config, job_class: str | None = None) -> list[dict[str, _Tally]]:
    steps = []
    for fields in _read(win, config, job_class):
        tallies: dict[str, _Tally] = defaultdict(_Tally)
        for name, value in fields.items():
            _add(tallies, name, value)
        steps.append(tallies)
    return steps


def _total(steps: list[dict[str, _Tally]], job_class: str) -> _Tally:
    total = _Tally()
    for tallies in steps:
        one = tallies.get(job_class)
        if one is not None:
            total.runs, total.failed, total.ms = total.runs + one.runs, total.failed + one.failed, total.ms + one.ms
            for n, count in one.buckets.items():
                total.buckets[n] += count
    return total


def percentile_ms(buckets: dict[int, int], q: float) -> float | None:
    """The upper edge of the bucket holding the ``q``-th percentile (0 < q <= 100)."""
    total = sum(buckets.values())
    if total <= 0:
        return None
    rank, seen = math.ceil(q / 100 * total), 0
    for n in sorted(buckets):
        seen += buckets[n]
        if seen >= rank:
            return bucket_upper_ms(n)
    return None


def _summary(job_class: str, t: _Tally) -> ClassSummary:
    p50, p95, p99 = (percentile_ms(t.buckets, q) for q in PERCENTILES)
    return ClassSummary(
        job_class, max(0, t.runs - t.failed), t.failed, t.ms, t.ms / t.runs if t.runs else None, p50, p95, p99
    )


def window_metrics(name: str = "1h", config: Config | None = None) -> WindowMetrics:
    """Every job class that ran in the window: summaries (busiest first) and runs per step."""
    win = window(name)
    steps = _step_tallies(win, (config or get_config()).fleet)
    names = {job_class for tallies in steps for job_class, t in tallies.items() if t.runs}
    classes = sorted((_summary(c, _total(steps, c)) for c in names), key=lambda s: (-s.runs, s.job_class))
    processed = {c: [max(0, s[c].runs - s[c].failed) if c in s else 0 for s in steps] for c in names}
    failed = {c: [s[c].failed if c in s else 0 for s in steps] for c in names}
    return WindowMetrics(win, classes, processed, failed)


def class_window(job_class: str, name: str = "1h", config: Config | None = None) -> ClassWindow:
    """One class over the window: its summary, runs per step, and its histogram by doubling."""
    win = window(name)
    steps = _step_tallies(win, (config or get_config()).fleet, job_class)
    total = _total(steps, job_class)
    processed = [max(0, s[job_class].runs - s[job_class].failed) if job_class in s else 0 for s in steps]
    failed = [s[job_class].failed if job_class in s else 0 for s in steps]
    return ClassWindow(
        win, _summary(job_class, total) if total.runs else None, processed, failed, histogram(total.buckets)
    )


def histogram(buckets: dict[int, int]) -> list[Bar]:
    """The fine buckets (4 per doubling) summed per doubling, from the fastest doubling
    with a run to the slowest (the empty ones between kept, so the bars read as a scale)."""
    per: dict[int, int] = defaultdict(int)
    for n, count in buckets.items():
        if count > 0:
            per[n // BUCKETS_PER_DOUBLING] += count
    if not per:
        return []
    low, high = min(per), max(per)
    return [
        Bar(
            bucket_upper_ms(d * BUCKETS_PER_DOUBLING - 1) if d else 0.0,
            bucket_upper_ms(d * BUCKETS_PER_DOUBLING + BUCKETS_PER_DOUBLING - 1),
            per.get(d, 0),
        )
        for d in range(low, high + 1)
    ]
