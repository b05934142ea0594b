"""Attempts (a per-jid record with a TTL) and throughput (per-minute processed/failed
counts and total ms per job class); both off the hot path: the worker buffers stats and
flushes them at most once a second."""

from __future__ import annotations

import time

import redis
from apps import core_jobs
from core_util import RunningWorker, ran, wait_for

from cogworker.engine.loop import Reporter, Worker
from cogworker.fleet.poller import Poller
from cogworker.lifecycle import stats


def test_attempts_of_a_job_that_dies(config):
    r = config.redis()
    jid = core_jobs.fail_always.enqueue("a")  # retry=2, backoff 0
    poller = Poller(config)
    with RunningWorker():
        for n in (1, 2, 3):
            assert wait_for(lambda n=n: len(stats.attempts(config, jid)) == n)
            poller.poll()
    log = stats.attempts(config, jid)
    assert [a["attempt"] for a in log] == [1, 2, 3]
    assert [a["outcome"] for a in log] == ["retrying", "retrying", "dead"]
    assert all(a["error_class"] == "ValueError" and a["error_message"] == "always a" for a in log)
    assert all(abs(a["at"] - time.time()) < 60 for a in log)
    ttl = r.ttl(config.keys.history(jid))
    assert 0 < ttl <= config.history_ttl


def test_attempts_of_a_job_that_recovers(config):
    jid = core_jobs.fail_then_pass.enqueue("b", 1)
    poller = Poller(config)
    with RunningWorker():
        assert wait_for(lambda: len(stats.attempts(config, jid)) == 1)
        poller.poll()
        assert wait_for(lambda: len(stats.attempts(config, jid)) == 2)
    first, second = stats.attempts(config, jid)
    assert (first["attempt"], first["outcome"], first["error_class"]) == (1, "retrying", "KeyError")
    assert (second["attempt"], second["outcome"], second["error_class"]) == (2, "succeeded", None)


def test_a_job_that_just_succeeds_writes_no_attempts(config):
    r = config.redis()
    jid = core_jobs.record.enqueue("c")
    with RunningWorker():
        assert wait_for(lambda: ran(r) == ["record:c"])
    assert stats.attempts(config, jid) == []


def test_throughput_per_minute_and_class(config):
    r = config.redis()
    for i in range(4):
        core_jobs.record.enqueue(i)
    core_jobs.sleepy.enqueue("s", 0.2)
    core_jobs.fail_no_retry.enqueue("f")
    minute = int(time.time() // 60)
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 7)  # sleepy marks twice
    assert r.get(config.keys.stats_processed) == b"5" and r.get(config.keys.stats_failed) == b"1"
    # The jobs may straddle a minute boundary: add up the minutes they touched.
    total: dict[str, float] = {}
    for m in (minute, minute + 1):
        for field, value in stats.throughput(config, m).items():
            total[field] = total.get(field, 0) + value
        if r.exists(config.keys.throughput(m)):
            assert 0 < r.ttl(config.keys.throughput(m)) <= stats.THROUGHPUT_TTL
    assert total["processed"] == 5 and total["failed"] == 1
    assert total["count:apps.core_jobs.record"] == 4
    assert total["count:apps.core_jobs.sleepy"] == 1 and total["ms:apps.core_jobs.sleepy"] >= 200
    assert total["count:apps.core_jobs.fail_no_retry"] == 1


class Recording(Reporter):
    def __init__(self, config):
        super().__init__(config)
        self.flushes: list[tuple[float, int]] = []

    def stats(self, snap):
        self.flushes.append((time.monotonic(), snap["processed"] + snap["failed"]))
        super().stats(snap)


def test_stats_are_buffered_and_flushed_at_most_once_a_second(config, monkeypatch):
    r = config.redis()
    calls = []
    real_flush = stats.flush
    monkeypatch.setattr(stats, "flush", lambda cfg, snap: (calls.append(1), real_flush(cfg, snap)))
    reporter = Recording(config)
    n = 300
    with RunningWorker(reporter=reporter):
        for i in range(n):
            core_jobs.record.enqueue(i)
            if i % 50 == 0:
                time.sleep(0.3)
        assert wait_for(lambda: len(ran(r)) == n)
    assert sum(count for _, count in reporter.flushes) == n
    assert len(calls) == len(reporter.flushes) < n / 10
    # Each flush at least a second after the one before, but the last (at stop).
    gaps = [b - a for (a, _), (b, _) in zip(reporter.flushes, reporter.flushes[1:-1], strict=False)]
    assert all(gap >= 0.95 for gap in gaps), gaps
    assert r.get(config.keys.stats_processed) == str(n).encode()


def test_an_undelivered_flush_is_kept_for_the_next(config):
    class Flaky(Reporter):
        fail = True

        def stats(self, snap):
            if self.fail:
                self.fail = False
                raise redis.ConnectionError("away")
            super().stats(snap)

    r = config.redis()
    w = Worker([("default", None)], reporter=Flaky(config))
    w._stats.record("a.b", True, 5.0)
    w._stats.record("a.b", False, 7.0)
    w.flush_stats()
    assert r.get(config.keys.stats_processed) is None
    w._stats.record("a.b", True, 1.0)
    w.flush_stats()
    assert r.get(config.keys.stats_processed) == b"2" and r.get(config.keys.stats_failed) == b"1"


def test_a_flush_that_partly_applied_is_not_counted_twice(config):
    """One counter key of the wrong type: the rest of the pipeline went through, so
    retrying the whole batch would count those twice."""
    r = config.redis()
    w = Worker([("default", None)])
    w._stats.record("a.b", True, 5.0)
    w._stats.record("a.b", False, 7.0)
    r.set(config.keys.stats_processed, "not a number")
    w.flush_stats()
    r.delete(config.keys.stats_processed)
    w._stats.record("a.b", True, 1.0)
    w.flush_stats()
    assert r.get(config.keys.stats_failed) == b"1"
    assert r.get(config.keys.stats_processed) == b"1"
    minute = stats.throughput(config, int(time.time() // 60)) or stats.throughput(config, int(time.time() // 60) - 1)
    assert minute["failed"] == 1 and minute["count:a.b"] == 3
