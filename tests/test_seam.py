"""The worker's seams: what a leaving process does with what it owes (fate.Leaving), the
requeue of a whole list (InProgressList.requeue_all), and the counters as a hook
subscriber that counts each worker's own runs exactly once."""

from __future__ import annotations

import json

import redis
from apps import core_jobs

from cogworker.core import fate
from cogworker.engine.loop import Worker


def _one(worker: Worker) -> None:
    work = worker.fetcher.fetch()
    assert work is not None
    worker.process(work)


def test_a_leaving_process_drops_owed_acks_and_parks_owed_filings(config):
    raw = json.dumps({"class": "a.b", "jid": "j1"}).encode()
    filing = fate.File(config.keys.retry, 12.0, "{}", True, 30.0, "interrupted")
    assert fate.decide(config, raw, fate.Leaving(fate.ACK)) == fate.DROP
    assert fate.decide(config, raw, fate.Leaving(fate.DROP)) == fate.DROP
    assert fate.decide(config, raw, fate.Leaving(filing)) == fate.Park(filing.record())


def test_requeue_all_gives_back_the_rest_drops_and_keeps(config):
    r = config.redis()
    for tag in "abc":
        core_jobs.record.enqueue(tag)
    w = Worker([("default", None)], identity="seam1", block_timeout=0)
    a, b, c = (w.fetcher.fetch() for _ in range(3))
    assert r.llen(config.keys.queue("default")) == 0
    done = w.fetcher.requeue_all(drop=[a.raw], keep=[b.raw])
    assert done.moved == 1 and done.buried == []
    assert r.lrange(config.keys.queue("default"), 0, -1) == [c.raw]
    assert r.lrange(config.keys.in_progress("seam1"), 0, -1) == [b.raw]


def test_a_workers_counters_count_its_own_runs_only(config):
    core_jobs.record.enqueue("ok")
    core_jobs.fail_no_retry.enqueue("bad")
    config.redis().lpush(config.keys.queue("default"), b"not json")
    w = Worker([("default", None)], identity="seam2", block_timeout=0)
    other = Worker([("default", None)], identity="seam3", block_timeout=0)
    for _ in range(3):
        _one(w)  # a success, a failure, a bad payload (buried: not a run)
    assert (w._stats.processed, w._stats.failed) == (1, 1)
    [fields] = w._stats.minutes.values()
    assert fields["count:apps.core_jobs.record"] == 1 and fields["count:apps.core_jobs.fail_no_retry"] == 1
    assert not other._stats


def test_a_failure_whose_filing_is_owed_is_counted_once(config):
    core_jobs.fail_no_retry.enqueue("owed")
    w = Worker([("default", None)], identity="seam4", block_timeout=0)
    real = w.fetcher.file

    def refusing(*args, **kwargs):
        raise redis.ConnectionError("away")

    w.fetcher.file = refusing  # the filing and then its interruption fail: owed
    _one(w)
    assert len(w.pending.filings()) == 1
    assert (w._stats.processed, w._stats.failed) == (0, 1)
    w.fetcher.file = real
    w.settle_pending()  # it lands now (its dead hook fires): not counted again
    assert len(w.pending) == 0 and config.redis().zcard(config.keys.dead) == 1
    assert (w._stats.processed, w._stats.failed) == (0, 1)
