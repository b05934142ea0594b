"""Redis faults: the script cache flushed, Redis restarted empty, Redis paused (SIGSTOP)
mid-run and between a job's run and its ack. The worker keeps going; every job is done
exactly once; nothing is left in progress."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from apps import core_jobs
from core_util import RunningWorker, wait_for

from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.fleet.poller import Poller


@pytest.fixture(autouse=True)
def _fresh(fresh_core_jobs):
    pass


def _settled(config, worker):
    r = config.redis()
    k = config.keys
    return r.llen(k.queue("default")) == 0 and r.llen(k.in_progress(worker.identity)) == 0 and not worker.pending.items


def test_every_script_survives_script_flush(config):
    r = config.redis()
    k = config.keys
    f = Fetcher(config, "flush", [("default", None)], block_timeout=0)
    steps = [
        lambda: core_jobs.local.enqueue("a"),
        lambda: f.fetch(),
        lambda: f.give_back(r.lindex(k.in_progress("flush"), 0)),
        lambda: f.fetch(),
        lambda: f.file(r.lindex(k.in_progress("flush"), 0), k.retry, 0, "entry"),
        lambda: Poller(config).poll(),
        lambda: core_jobs.local.enqueue_in(60, "b"),
    ]
    for step in steps:
        assert r.script_flush()
        step()
    assert r.llen(k.in_progress("flush")) == 0 and r.llen(k.queue("default")) == 0
    assert r.zcard(k.retry) == 0 and r.zcard(k.dead) == 1  # "entry" isn't a job: the poller buried it
    assert r.zcard(k.schedule) == 1


def test_worker_keeps_going_across_script_flushes(config):
    r = config.redis()
    with RunningWorker() as w:
        for i in range(30):
            core_jobs.local.enqueue(i)
            if i % 5 == 0:
                r.script_flush()
        assert wait_for(lambda: len(core_jobs.local_runs) == 30)
        assert wait_for(lambda: _settled(config, w))
    assert Counter(core_jobs.local_runs) == Counter(range(30))


def test_worker_keeps_going_across_a_redis_restart(own_config, own_redis):
    config = own_config
    with RunningWorker() as w:
        for i in range(5):
            core_jobs.local.enqueue(i)
        assert wait_for(lambda: len(core_jobs.local_runs) == 5)
        own_redis.restart()  # empty, with an empty script cache
        assert own_redis.client().script_exists(*[s.sha for s in _scripts(config)]) == [False] * len(_scripts(config))
        assert wait_for(lambda: _try_enqueue(5, 10), timeout=10)
        assert wait_for(lambda: len(core_jobs.local_runs) == 10, timeout=15)
        assert wait_for(lambda: _settled(config, w))
        assert w.identity
    assert Counter(core_jobs.local_runs) == Counter(range(10))
    # The poller's script too.
    core_jobs.local.enqueue_at(time.time() - 1, "late")
    assert own_redis.client().llen(config.keys.queue("default")) == 1


def _scripts(config):
    from cogworker.store import lua

    return list(lua._registered.get(config.redis(), {}).values())


def _try_enqueue(start, stop):
    import redis

    try:
        for i in range(start, stop):
            core_jobs.local.enqueue(i)
        return True
    except redis.ConnectionError:
        return False


def test_redis_paused_mid_run(own_config, own_redis):
    """SIGSTOP while a job runs, longer than the socket timeout; then SIGCONT. The worker
    rides it out; every job is done exactly once."""
    config = own_config
    n = 12
    for i in range(n):
        core_jobs.local.enqueue(i, 0.05)
    core_jobs.local.enqueue("long", 0.5)
    for i in range(n, 2 * n):
        core_jobs.local.enqueue(i, 0.05)
    rw = RunningWorker()
    with rw as w:
        assert wait_for(lambda: "long" in core_jobs.local_started)
        own_redis.pause()
        time.sleep(config.socket_timeout + 1.5)
        own_redis.resume()
        assert wait_for(lambda: len(core_jobs.local_runs) >= 2 * n + 1, timeout=30)
        assert wait_for(lambda: _settled(config, w), timeout=10)
        assert rw.alive
    assert Counter(core_jobs.local_runs) == Counter([*range(2 * n), "long"])
    r = config.redis()
    assert r.zcard(config.keys.retry) == 0 and r.zcard(config.keys.dead) == 0


def test_redis_paused_between_run_and_ack(own_config, own_redis):
    """The job SIGSTOPs Redis as it ends: its ack fails. It is remembered, acknowledged
    once Redis is back, and never re-run."""
    config = own_config
    r = config.redis()
    r.set("test:redis_pid", own_redis.proc.pid)
    jid = core_jobs.pause_redis_after.enqueue("p")
    rw = RunningWorker()
    with rw as w:
        assert wait_for(lambda: w.pending.acks(), timeout=30)
        own_redis.resume()
        for i in range(5):
            core_jobs.local.enqueue(i)
        assert wait_for(lambda: len(core_jobs.local_runs) == 5, timeout=15)
        assert wait_for(lambda: _settled(config, w), timeout=10)
        assert rw.alive
    assert [x.decode() for x in r.lrange("test:ran", 0, -1)] == ["pause_redis_after:p"]
    assert r.llen(config.keys.queue("default")) == 0
    assert not any(jid.encode() in x for x in r.lrange(config.keys.in_progress(w.identity), 0, -1))
