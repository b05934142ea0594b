"""Per-job keys written outside the status flush are bounded by count as well as by age
(docs/architecture.md#retention): progress records, cancel marks, checkpoints and kept
results each keep at most ``status_max`` (plus a group of a hundredth, trimmed at once),
through an index the writing script trims; batch records at most the index's 10,000. Real
redis-server, real scripts, real workers where jobs run; the index's clock injected where
the order of writes matters."""

from __future__ import annotations

import time
from typing import Any

import pytest
from apps import core_jobs
from core_util import RunningWorker, wait_for

import cogworker
from cogworker import api
from cogworker.client import batches as client_batches
from cogworker.core import current
from cogworker.core.inprogress import InProgressList

MAX = 1000
BOUND = MAX + MAX // 100  # the count bound, with its trimming group
FLOOD = 5000


@pytest.fixture
def config(config):
    return cogworker.configure(status_max=MAX)


def count(config: Any, prefix: str) -> int:
    return sum(1 for _ in config.redis().scan_iter(match=prefix + "*", count=1000))


@cogworker.job(results=True)
def reporting(i):
    cogworker.current_job().progress(0.5, f"half of {i}")
    return i


def test_a_flood_of_jobs_leaves_at_most_status_max_progress_records_and_results(config):
    r = config.redis()
    reporting.enqueue_many([(i,) for i in range(FLOOD)])
    with RunningWorker():
        assert wait_for(lambda: r.llen(config.keys.queue("default")) == 0, 120)
        assert wait_for(lambda: int(r.get(config.keys.stats_processed) or 0) >= FLOOD, 30)
    progress, results = (
        count(config, config.keys.progress_prefix),
        count(config, config.keys.workflow_prefix + "result:"),
    )
    assert MAX <= progress <= BOUND, f"{progress} progress records after {FLOOD} jobs"
    assert MAX <= results <= BOUND, f"{results} results after {FLOOD} jobs"
    assert r.zcard(config.keys.retained_progress) == progress
    assert r.zcard(config.keys.retained_results) == results
    # The newest are the ones kept.
    assert api.progress(max(api_jids(r, config))) is not None


def api_jids(r: Any, config: Any) -> list[str]:
    return [
        k.decode()[len(config.keys.progress_prefix) :] for k in r.scan_iter(match=config.keys.progress_prefix + "*")
    ]


def test_a_flood_of_cancels_leaves_at_most_status_max_marks(config):
    r = config.redis()
    jids = core_jobs.record.enqueue_many([(i,) for i in range(FLOOD)])
    for jid in jids:
        assert api.cancel(jid)
    marks = count(config, config.keys.cancelled_prefix)
    assert MAX <= marks <= BOUND, f"{marks} cancel marks after {FLOOD} cancels"
    assert r.zcard(config.keys.retained_cancelled) == marks
    assert api.cancelled(jids[-1]) is not None and api.cancelled(jids[0]) is None  # the oldest went
    assert int(r.get(config.keys.stats_cancelled)) == FLOOD


def test_a_flood_of_iterable_jobs_leaves_at_most_status_max_checkpoints(config):
    lst = InProgressList(config, "w1")
    for i in range(FLOOD):
        lst.checkpoint(f"it{i}", '{"at": 3}', 3, state="finished", ttl=3600)
    kept = count(config, config.keys.checkpoint_prefix)
    assert MAX <= kept <= BOUND, f"{kept} checkpoints after {FLOOD} iterable jobs"
    assert config.redis().exists(config.keys.checkpoint(f"it{FLOOD - 1}"))
    assert not config.redis().exists(config.keys.checkpoint("it0"))


def test_the_oldest_write_goes_first_with_injected_time(config, monkeypatch):
    """The index orders keys by their last write: a record written again is kept over one
    written once, later by name but earlier in time."""
    clock = [1_000_000.0]
    monkeypatch.setattr(current, "clock", lambda: clock[0])
    writers = {i: current.progress_writer(config, f"p{i}") for i in range(BOUND + 1)}
    for i in range(BOUND):
        writers[i]('{"fraction": 0.1}')
        clock[0] += 1
    writers[0]('{"fraction": 0.2}')  # p0 again, now the newest
    clock[0] += 1
    writers[BOUND]('{"fraction": 0.1}')  # one over the bound: the oldest group goes
    r = config.redis()
    assert r.exists(config.keys.progress("p0")) and r.exists(config.keys.progress(f"p{BOUND}"))
    assert not r.exists(config.keys.progress("p1"))
    assert r.zcard(config.keys.retained_progress) == MAX
    assert count(config, config.keys.progress_prefix) == MAX


def test_by_age_the_keys_and_their_indexes_still_expire(config):
    cogworker.configure(status_ttl=1)
    config = cogworker.get_config()
    r = config.redis()
    current.progress_writer(config, "a1")('{"fraction": 0.1}')
    jid = core_jobs.record.enqueue(1)
    assert api.cancel(jid)
    InProgressList(config, "w1").checkpoint("it1", "1", 1, state="finished", ttl=1)
    indexes = [config.keys.retained_progress, config.keys.retained_cancelled, config.keys.retained_checkpoints]
    assert all(r.exists(k) for k in indexes)
    assert all(0 < r.ttl(k) <= 1 for k in indexes)
    assert wait_for(
        lambda: (
            not any(
                r.exists(k)
                for k in [
                    *indexes,
                    config.keys.progress("a1"),
                    config.keys.cancelled(jid),
                    config.keys.checkpoint("it1"),
                ]
            )
        ),
        10,
    )


@cogworker.job(results=True, result_ttl=1)
def brief(i):
    return i


def test_a_result_and_its_index_expire_by_age(config):
    r = config.redis()
    jid = brief.enqueue(1)
    with RunningWorker():
        assert cogworker.result(jid, timeout=20) == 1
    assert 0 < r.ttl(config.keys.retained_results) <= 2
    assert wait_for(lambda: not r.exists(config.keys.result(jid)) and not r.exists(config.keys.retained_results), 10)


def test_abandoned_batches_leave_no_more_records_than_the_index(config):
    now = time.time()
    bids = []
    for i in range(12_000):  # opened and never closed, nor joined
        b = cogworker.batch()
        b.open(now=now + i * 0.001)
        bids.append(b.bid)
    records = count(config, config.keys.workflow_prefix + "batch:")
    assert api.batch_count() == client_batches.MAX_BATCHES == 10_000
    assert records == 10_000, f"{records} batch records for an index of 10,000"
    assert api.batch(bids[-1]) is not None and api.batch(bids[0]) is None
