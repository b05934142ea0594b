"""Settlement (docs/architecture.md#fate-table; the seeds' processor.rb): a success
acknowledged once, give_back, a failure filed for a retry with the contract's fields and
backoff, then dead (trimmed to its caps), and the interrupt: a job that ran and failed but
whose filing failed, pending then filed, never run again. (Fetching: test_core_fetch.)"""

from __future__ import annotations

import json
import time

import pytest
from apps import core_jobs
from core_util import RunningWorker, push_raw, queued, ran, raw_payload, wait_for, zentries

import cogworker
from cogworker.client.jobs import default_backoff
from cogworker.core import fate
from cogworker.engine import loop as worker_module
from cogworker.engine.loop import Worker
from cogworker.fleet.poller import Poller

# -- settlement --------------------------------------------------------------------------


def test_success_is_acknowledged_and_not_rerun(config):
    r = config.redis()
    for i in range(20):
        core_jobs.record.enqueue(i)
    with RunningWorker() as w:
        assert wait_for(lambda: len(ran(r)) == 20)
        # The last ack rides on the next fetch.
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) <= 1)
    assert sorted(ran(r)) == sorted(f"record:{i}" for i in range(20))
    assert r.llen(config.keys.in_progress(w.identity)) == 0
    assert r.llen(config.keys.queue("default")) == 0
    assert r.get(config.keys.stats_processed) == b"20"


def test_give_back_puts_the_job_next_in_line(config):
    r = config.redis()
    for i in range(3):
        core_jobs.record.enqueue(i)
    w = Worker([("default", None)], identity="gb", block_timeout=0)
    work = w.fetcher.fetch()
    assert json.loads(work.raw)["args"] == [0]
    w.stop()
    w.process(work)  # stopping: handed back, not run
    assert ran(r) == []
    assert r.llen(config.keys.in_progress("gb")) == 0
    assert [p["args"] for p in queued(r, config)] == [[2], [1], [0]]  # [0] at the fetch end
    assert json.loads(w.fetcher.fetch().raw)["args"] == [0]


def test_failure_goes_to_retry_with_the_contract_fields(config):
    r = config.redis()
    jid = core_jobs.fail_custom_backoff.enqueue("x")
    with RunningWorker() as w:
        assert wait_for(lambda: r.zcard(config.keys.retry) == 1)
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0)
    [(entry, score)] = zentries(r, config.keys.retry)
    assert entry["jid"] == jid and entry["retry_count"] == 1
    assert entry["error_class"] == "ValueError" and entry["error_message"] == "x"
    assert score == pytest.approx(entry["failed_at"] + 123, abs=1)  # the job's own backoff
    assert ran(r) == ["fail_custom_backoff:x"]
    assert r.get(config.keys.stats_failed) == b"1"


def test_error_class_is_qualified(config):
    r = config.redis()
    core_jobs.raise_custom.enqueue("q")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1)
    [(entry, _)] = zentries(r, config.keys.dead)
    assert entry["error_class"] == "apps.core_jobs.Custom"
    from cogworker.client.jobs import error_class_name

    assert error_class_name(cogworker.ProcessDied()) == "cogworker.ProcessDied"
    assert error_class_name(KeyError()) == "KeyError"


def test_default_backoff_formula(config):
    for count in range(1, 8):
        samples = [default_backoff(count) for _ in range(300)]
        low = count**4 + 15
        assert all(low <= s < low + 10 * (count + 1) for s in samples)
        assert len(set(samples)) > 3  # random part
    r = config.redis()
    core_jobs.fail_default_backoff.enqueue("d")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.retry) == 1)
    [(entry, score)] = zentries(r, config.keys.retry)
    assert 16 <= score - entry["failed_at"] < 16 + 20


def test_retries_then_dead(config):
    """retry=2: the first run and two retries, then dead; each failure counted."""
    r = config.redis()
    jid = core_jobs.fail_always.enqueue("r")
    poller = Poller(config)
    with RunningWorker():
        for n in (1, 2, 3):
            assert wait_for(lambda n=n: len(ran(r)) == n and (r.zcard(config.keys.retry) or r.zcard(config.keys.dead)))
            poller.poll()
    [(entry, _)] = zentries(r, config.keys.dead)
    assert entry["jid"] == jid and entry["retry_count"] == 3
    assert ran(r) == ["fail_always:r"] * 3
    assert r.zcard(config.keys.retry) == 0
    assert wait_for(lambda: r.get(config.keys.stats_failed) == b"3")


@pytest.mark.parametrize("job", [core_jobs.fail_no_retry, core_jobs.fail_retry_false])
def test_retry_zero_or_false_goes_straight_to_dead(config, job):
    r = config.redis()
    jid = job.enqueue("z")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1)
    [(entry, _)] = zentries(r, config.keys.dead)
    assert entry["jid"] == jid and entry["retry_count"] == 1 and entry["retry"] == 0
    assert r.zcard(config.keys.retry) == 0
    assert len(ran(r)) == 1


def test_dead_is_trimmed_to_10000_entries_and_180_days(config):
    assert config.dead_max_jobs == 10_000 and config.dead_timeout == 180 * 24 * 3600
    r = config.redis()
    k = config.keys
    now = time.time()
    pipe = r.pipeline(transaction=False)
    for i in range(3):
        pipe.zadd(k.dead, {f"ancient-{i}": now - 181 * 24 * 3600})
    for chunk in range(10):
        pipe.zadd(k.dead, {f"old-{chunk}-{i}": now - 3600 + chunk * 100 + i / 1000 for i in range(1000)})
    pipe.execute()
    assert r.zcard(k.dead) == 10_003
    jid = core_jobs.fail_no_retry.enqueue("t")
    with RunningWorker():
        assert wait_for(lambda: any(jid.encode() in x for x in r.zrange(k.dead, -1, -1)))
    assert r.zcard(k.dead) == 10_000
    assert r.zscore(k.dead, "ancient-0") is None
    assert r.zscore(k.dead, "old-0-0") is None  # the oldest of the rest made room
    assert r.zscore(k.dead, "old-0-1") is not None


# -- interrupt: ran and failed, but filing the failure failed ----------------------------


def test_interrupt_when_routing_fails(config):
    """The backoff raises, so the failure can't be routed: into retry after 30 s, counted."""
    r = config.redis()
    jid = core_jobs.fail_broken_backoff.enqueue("i")
    with RunningWorker() as w:
        assert wait_for(lambda: r.zcard(config.keys.retry) == 1)
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0)
        assert not w.pending.items
    [(entry, score)] = zentries(r, config.keys.retry)
    assert entry["jid"] == jid and entry["interrupted_count"] == 1 and entry["retry_count"] == 1
    assert entry["error_class"] == "ValueError" and entry["error_message"] == "broken backoff i"
    assert score == pytest.approx(entry["failed_at"] + fate.INTERRUPT_DELAY, abs=1)
    assert ran(r) == ["fail_broken_backoff:i"]
    assert fate.MAX_INTERRUPTS == 3 and fate.INTERRUPT_DELAY == 30


@pytest.mark.parametrize("before, where, delay", [(1, "retry", 60), (2, "retry", 90), (3, "dead", None)])
def test_interrupt_delay_grows_then_dead_past_three(config, before, where, delay):
    r = config.redis()
    push_raw(config, raw_payload("fail_broken_backoff", "n", interrupted_count=before, retry_count=0))
    with RunningWorker():
        assert wait_for(lambda: r.zcard(getattr(config.keys, where)) == 1)
    [(entry, score)] = zentries(r, getattr(config.keys, where))
    assert entry["interrupted_count"] == before + 1
    if delay:
        assert score == pytest.approx(entry["failed_at"] + delay, abs=1)


def test_interrupt_without_retries_left_goes_to_dead(config):
    """A server middleware left something unserializable in the payload, so the failure
    record can't be built: the interruption is built from the payload as fetched; with
    no retries left it goes to dead."""
    r = config.redis()

    @cogworker.server_middleware.add
    def stamp(job, payload, queue, call_next):
        payload["started"] = object()
        return call_next()

    push_raw(config, raw_payload("fail_no_retry", "last", retry=2, retry_count=2))
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1)
    [(entry, _)] = zentries(r, config.keys.dead)
    assert entry["interrupted_count"] == 1 and entry["retry_count"] == 3
    assert r.zcard(config.keys.retry) == 0


@pytest.mark.parametrize("job, zset", [(core_jobs.fail_custom_backoff, "retry"), (core_jobs.fail_no_retry, "dead")])
def test_unfileable_failure_is_pending_then_filed_never_rerun(config, monkeypatch, job, zset):
    """retry/dead of the wrong type: the failure can't be filed nor interrupted. It is
    remembered, the loop goes on, and the worker's own reconcile files it once the key
    is usable again — the job is never re-run as a stray."""
    monkeypatch.setattr(worker_module, "RECONCILE_INTERVAL", 0.2)
    r = config.redis()
    key = getattr(config.keys, zset)
    r.set(key, "not a zset")
    jid = job.enqueue("p")
    with RunningWorker() as w:
        assert wait_for(lambda: len(w.pending) == 1)
        core_jobs.record.enqueue("after")  # other jobs keep running
        assert wait_for(lambda: "record:after" in ran(r))
        time.sleep(0.6)  # several reconcile passes: still pending, still not re-run
        assert r.llen(config.keys.in_progress(w.identity)) == 1
        r.delete(key)
        assert wait_for(lambda: r.zcard(key) == 1)
        assert wait_for(lambda: len(w.pending) == 0)
    [(entry, score)] = zentries(r, key)
    assert entry["jid"] == jid and entry["interrupted_count"] == 1
    assert len([x for x in ran(r) if x.endswith(":p")]) == 1
    assert r.llen(config.keys.in_progress(w.identity)) == 0
    assert r.llen(config.keys.queue("default")) == 0


def test_unfileable_failure_is_parked_in_unsettled_at_shutdown(config):
    r = config.redis()
    r.set(config.keys.dead, "wrong type")
    jid = core_jobs.fail_no_retry.enqueue("u")
    with RunningWorker() as w:
        assert wait_for(lambda: len(w.pending) == 1)
    assert r.llen(config.keys.in_progress(w.identity)) == 0
    [record] = [json.loads(x) for x in r.lrange(config.keys.unsettled, 0, -1)]
    assert record["set"] == config.keys.dead and json.loads(record["payload"])["jid"] == jid
    assert r.llen(config.keys.queue("default")) == 0
    # Any live process files it later.
    from cogworker.fleet.recovery import file_unsettled

    r.delete(config.keys.dead)
    assert file_unsettled(config) == 1
    assert [e["jid"] for e, _ in zentries(r, config.keys.dead)] == [jid]
    assert ran(r) == ["fail_no_retry:u"]
