"""api.redis_info / api.throughput / api.class_metrics, from the workers' batched stats
flush (per-minute ``throughput:<minute>`` hashes with duration buckets), against a real
redis-server; and through a real prefork master (children -> master -> one flush)."""

from __future__ import annotations

import math
import random
import time

import pytest
import redis
from apps import pf
from prefork_harness import wait_for

from cogworker import api
from cogworker.lifecycle import stats


def test_redis_info(config, redis_server):
    info = api.redis_info()
    server = redis_server.client().info("server")
    assert info.version == server["redis_version"]
    assert info.connected_clients >= 1 and info.uptime_seconds >= 0
    assert info.used_memory_human[-1] in "BKMG"


def test_bucket_edges():
    assert stats.bucket_of(0) == 0 and stats.bucket_of(0.05) == 0 and stats.bucket_of(1e12) == stats.MAX_BUCKET
    for ms in (0.2, 1.0, 3.7, 120.0, 9_999.0):
        n = stats.bucket_of(ms)
        assert stats.bucket_upper_ms(n - 1) <= ms < stats.bucket_upper_ms(n)
        assert stats.bucket_upper_ms(n) / stats.bucket_upper_ms(n - 1) == pytest.approx(2**0.25)


def test_class_metrics_avg_and_p95_within_the_bucket_resolution(config):
    rng = random.Random(7)
    durations = {
        "a.fast": [rng.uniform(0.5, 3.0) for _ in range(400)],
        "b.slow": [rng.lognormvariate(5, 1) for _ in range(300)],
    }
    buffer = stats.StatsBuffer()
    now = time.time()
    for job_class, values in durations.items():
        for i, ms in enumerate(values):
            buffer.record(job_class, ok=i % 10 != 0, ms=ms, now=now - (i % 3) * 60)  # over three minutes
    stats.flush(config, buffer.take())
    by_class = {m.job_class: m for m in api.class_metrics(minutes=5)}
    assert set(by_class) == set(durations)
    for job_class, values in durations.items():
        m = by_class[job_class]
        assert (m.processed, m.failed) == (len(values) - math.ceil(len(values) / 10), math.ceil(len(values) / 10))
        assert m.avg_ms == pytest.approx(sum(values) / len(values), rel=1e-3)
        true_p95 = sorted(values)[math.ceil(0.95 * len(values)) - 1]
        assert true_p95 <= m.p95_ms <= true_p95 * 2**0.25 + 1e-9
    assert [m.job_class for m in api.class_metrics()] == ["a.fast", "b.slow"]  # busiest first
    # A minute outside the window is left out.
    assert {m.job_class: m.processed + m.failed for m in api.class_metrics(minutes=1)}["a.fast"] < 400


def test_throughput_per_minute(config):
    buffer = stats.StatsBuffer()
    now = time.time()
    for _ in range(3):
        buffer.record("x.y", True, 1.0, now=now)
    buffer.record("x.y", False, 1.0, now=now - 120)
    stats.flush(config, buffer.take())
    rows = api.throughput(5)
    assert len(rows) == 5 and all(r.minute % 60 == 0 for r in rows)
    assert rows[-1].minute == int(now // 60) * 60  # oldest first, the current minute last
    assert [(r.processed, r.failed) for r in rows] == [(0, 0), (0, 0), (0, 1), (0, 0), (3, 0)]
    for bad in (0, -1, 10**6, 1.5, True):
        with pytest.raises(ValueError, match="minutes must be"):
            api.throughput(bad)
        with pytest.raises(ValueError, match="minutes must be"):
            api.class_metrics(bad)


def test_classes_per_minute_are_capped(config):
    buffer = stats.StatsBuffer()
    child = stats.StatsBuffer()
    now = time.time()
    for i in range(stats.MAX_CLASSES_PER_MINUTE + 50):
        child.record(f"gen.c{i}", True, 2.0, now=now)
    buffer.merge(child.take())  # the master's buffer keeps the cap too
    for i in range(10):
        buffer.record(f"gen.more{i}", False, 2.0, now=now)
    stats.flush(config, buffer.take())
    found = {m.job_class: m for m in api.class_metrics(1)}
    assert len(found) == stats.MAX_CLASSES_PER_MINUTE + 1
    other = found[stats.OTHER_CLASS]
    assert (other.processed, other.failed) == (50, 10) and other.p95_ms is not None
    assert sum(m.processed + m.failed for m in found.values()) == stats.MAX_CLASSES_PER_MINUTE + 60


def test_flush_is_one_round_trip(config, monkeypatch):
    buffer = stats.StatsBuffer()
    for i in range(500):
        buffer.record(f"k.c{i % 20}", i % 7 != 0, float(i), now=time.time() - (i % 2) * 60)
    config.redis().ping()  # connected before counting
    sends = []
    real = redis.connection.AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        sends.append(1)
        return real(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    stats.flush(config, buffer.take())
    monkeypatch.undo()
    assert len(sends) == 1
    assert sum(m.processed + m.failed for m in api.class_metrics(2)) == 500


def test_class_metrics_from_a_real_master(own_config, masters):
    m = masters(procs=2)
    m.wait_children(2)
    pf.slow.enqueue_many([(f"s{i}", 0.2) for i in range(4)])
    pf.fail.enqueue_many([(f"f{i}",) for i in range(3)])
    pf.record.enqueue_many([(f"r{i}",) for i in range(20)])

    def metrics():
        found = {c.job_class: c for c in api.class_metrics(5)}
        return found if sum(c.processed + c.failed for c in found.values()) == 27 else None

    found = wait_for(metrics, 30, what="27 runs counted")
    slow, fail, rec = found["apps.pf.slow"], found["apps.pf.fail"], found["apps.pf.record"]
    assert (slow.processed, slow.failed, fail.processed, fail.failed, rec.processed) == (4, 0, 0, 3, 20)
    assert slow.avg_ms >= 200 and 200 <= slow.p95_ms <= 2000
    assert rec.p95_ms < slow.p95_ms
    assert sum(r.processed for r in api.throughput(5)) == 24 and sum(r.failed for r in api.throughput(5)) == 3


def test_duration_buckets_live_hours_and_p95_covers_only_them(config):
    from cogworker.api.metrics import P95_MINUTES

    buffer = stats.StatsBuffer()
    now = time.time()
    old = now - (P95_MINUTES + 10) * 60
    for _ in range(50):
        buffer.record("o.ld", True, 5000.0, now=old)  # slow, long ago
    buffer.record("o.ld", True, 1.0, now=now)
    stats.flush(config, buffer.take())
    r = config.redis()
    for minute in (int(old // 60), int(now // 60)):
        assert 0 < r.ttl(config.keys.durations(minute)) <= stats.DURATIONS_TTL
        assert r.ttl(config.keys.throughput(minute)) > stats.DURATIONS_TTL
    (m,) = api.class_metrics(minutes=P95_MINUTES + 20)
    assert m.processed == 51 and m.avg_ms > 4000  # counts and average over every minute asked for
    assert m.p95_ms < 2  # p95 from the minutes whose buckets are kept
