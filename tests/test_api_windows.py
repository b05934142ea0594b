"""api.window_metrics / api.class_window: per job class over 1 h, 8 h, 24 h and 72 h, from
the per-minute and per-hour hashes the batched stats flush writes, against a real
redis-server."""

from __future__ import annotations

import math
import random
import time

import pytest

from cogworker import api
from cogworker.lifecycle import stats


def record(config, runs: list[tuple[str, bool, float, float]]) -> float:
    """(class, ok, ms, seconds ago) runs, through a buffer and one flush, as a worker does;
    returns the time they were counted back from."""
    buffer = stats.StatsBuffer()
    now = time.time()
    for job_class, ok, ms, ago in runs:
        buffer.record(job_class, ok, ms, now=now - ago)
    stats.flush(config, buffer.take())
    return now


def test_each_window_counts_what_ran_within_it(config):
    now = record(
        config,
        [("a.job", True, 5.0, 10)] * 4
        + [("a.job", False, 5.0, 10)]
        + [("a.job", True, 5.0, 3 * 3600)] * 3
        + [("a.job", True, 5.0, 20 * 3600)] * 2
        + [("a.job", True, 5.0, 50 * 3600)]
        + [("a.job", True, 5.0, 80 * 3600)] * 7
        + [("b.job", True, 1.0, 6 * 3600)],
    )
    runs = {
        name: {s.job_class: (s.processed, s.failed) for s in api.window_metrics(name).classes} for name in api.WINDOWS
    }
    assert runs["1h"] == {"a.job": (4, 1)}
    assert runs["8h"] == {"a.job": (7, 1), "b.job": (1, 0)}
    assert runs["24h"] == {"a.job": (9, 1), "b.job": (1, 0)}
    assert runs["72h"] == {"a.job": (10, 1), "b.job": (1, 0)}  # 80 h ago: outside every window
    one = api.window_metrics("1h")
    assert len(one.window.starts) == 60 and one.window.step == 60
    # 10 s ago is this minute, or the one before in a minute's first 10 s: its column, by its start.
    column = one.window.starts.index(int((now - 10) // 60) * 60)
    assert column >= len(one.window.starts) - 2
    assert one.processed["a.job"][column] == 4 and one.failed["a.job"][column] == 1
    assert sum(one.processed["a.job"]) == 4
    day = api.window_metrics("24h")
    assert len(day.window.starts) == 24 and day.window.step == 3600
    assert day.window.starts[-1] == int(time.time() // 3600) * 3600  # the current hour last
    assert day.processed["a.job"][-4] == 3 and sum(day.processed["b.job"]) == 1
    with pytest.raises(ValueError, match="window must be one of 1h, 8h, 24h, 72h, not '2h'"):
        api.window_metrics("2h")


def test_percentiles_and_the_histogram_within_the_bucket_resolution(config):
    rng = random.Random(3)
    values = [rng.lognormvariate(3, 1.2) for _ in range(2000)]
    record(config, [("c.job", i % 20 != 0, ms, (i % 300) * 36) for i, ms in enumerate(values)])  # over 3 hours
    summary = api.class_window("c.job", "8h").summary
    assert summary is not None and summary.runs == 2000 and summary.failed == 100
    assert summary.avg_ms == pytest.approx(sum(values) / len(values), rel=1e-3)
    assert summary.total_ms == pytest.approx(sum(values), rel=1e-3)
    ordered = sorted(values)
    for q, got in ((50, summary.p50_ms), (95, summary.p95_ms), (99, summary.p99_ms)):
        true = ordered[math.ceil(q / 100 * len(values)) - 1]
        assert true <= got <= true * 2**0.25 + 1e-9, q
    detail = api.class_window("c.job", "8h")
    assert sum(bar.runs for bar in detail.histogram) == 2000
    for bar in detail.histogram:
        assert bar.runs == sum(1 for v in values if bar.low_ms <= v < bar.high_ms)
        assert bar.high_ms == pytest.approx(2 * bar.low_ms)
    assert detail.histogram[0].runs and detail.histogram[-1].runs
    assert sum(detail.processed) == 1900 and sum(detail.failed) == 100 and len(detail.processed) == 8
    nothing = api.class_window("no.such", "1h")
    assert nothing.summary is None and nothing.histogram == [] and sum(nothing.processed) == 0


def test_an_hour_holds_at_most_the_class_cap_and_expires(config):
    now = time.time()
    minute0 = int(now // 3600) * 60  # the current hour's first minute
    buffer = stats.StatsBuffer()
    for i in range(stats.MAX_CLASSES_PER_MINUTE + 50):  # new classes spread over the hour's minutes
        buffer.record(f"gen.c{i}", True, 1.0, now=(minute0 + i % 60) * 60 + 1)
    stats.flush(config, buffer.take())
    hour = config.keys.throughput_hour(int(now // 3600))
    fields = [f.decode() for f in config.redis().hkeys(hour)]
    classes = {f.split(":", 1)[1] for f in fields if f.startswith("count:")}
    assert len(classes) == stats.MAX_CLASSES_PER_MINUTE + 1 and stats.OTHER_CLASS in classes
    for key in (hour, config.keys.durations_hour(int(now // 3600))):
        assert 0 < config.redis().ttl(key) <= stats.HOURLY_TTL
