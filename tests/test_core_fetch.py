"""Reliable fetch (docs/architecture.md#fetch; the seeds' reliable_fetch.rb): per-identity
in-progress lists, strict and weighted order, blocking pickup, the Redis version check,
reconciling pending settlements and strays, and every move writing its destination first.
(Settling what was fetched: test_core_settlement.)"""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import pytest
import redis
from apps import core_jobs
from core_util import RunningWorker, ran, raw_payload, wait_for

import cogworker
from cogworker.core import fate
from cogworker.engine import loop as worker_module
from cogworker.engine.fetch.fetcher import Fetcher, Work, check_redis_version
from cogworker.engine.loop import Worker
from cogworker.launch.queues import parse_queues
from cogworker.store.wakewait import WakeWait


def fetcher(config, identity="id-a", queues=(("default", None),), block=0.0):
    return Fetcher(config, identity, list(queues), block_timeout=block)


# -- fetch -------------------------------------------------------------------------------


def test_each_identity_has_its_own_in_progress_list(config):
    r = config.redis()
    k = config.keys
    core_jobs.record.enqueue(1)
    core_jobs.record.enqueue(2)
    a, b = fetcher(config, "host:1:aa"), fetcher(config, "host:2:bb")
    wa, wb = a.fetch(), b.fetch()
    assert json.loads(wa.raw)["args"] == [1] and json.loads(wb.raw)["args"] == [2]
    assert r.lrange(k.in_progress("host:1:aa"), 0, -1) == [wa.raw]
    assert r.lrange(k.in_progress("host:2:bb"), 0, -1) == [wb.raw]
    assert r.llen(k.queue("default")) == 0
    assert a.fetch() is None
    # The next fetch acknowledges the previous job in the same round trip.
    core_jobs.record.enqueue(3)
    wa2 = a.fetch(ack=wa.raw)
    assert r.lrange(k.in_progress("host:1:aa"), 0, -1) == [wa2.raw]


def test_strict_order(config):
    r = config.redis()
    for q in ("low", "mid", "high"):
        core_jobs.record.options(queue=q).enqueue(q)
    f = fetcher(config, queues=parse_queues(["high", "mid", "low"]))
    got = [f.fetch().queue for _ in range(3)]
    assert got == ["high", "mid", "low"]
    assert r.llen(config.keys.in_progress("id-a")) == 3


def test_weighted_random_order(config):
    random.seed(7)
    f = fetcher(config, queues=parse_queues(["a,3", "b,1"]))
    firsts = Counter(f.order()[0] for _ in range(4000))
    assert 0.70 < firsts["a"] / 4000 < 0.80  # weight 3 of 4
    assert all(sorted(f.order()) == ["a", "b"] for _ in range(50))
    # And fetch follows it: with both queues full, both get served.
    for i in range(200):
        core_jobs.record.options(queue="a").enqueue(i)
        core_jobs.record.options(queue="b").enqueue(i)
    served = Counter(f.fetch().queue for _ in range(100))
    assert served["a"] > served["b"] > 5
    with pytest.raises(cogworker.ConfigurationError):
        parse_queues(["a,3", "b"])


def test_idle_worker_blocks_and_picks_up_at_once(config, monkeypatch, caplog):
    """A block on the wake stream, not a sleep-poll (and never a BLMOVE, which would take
    a job without reading the paused set): a job pushed while the worker blocks is taken
    well before the block timeout ends."""
    r = config.redis()
    blocking = []
    real_wait = WakeWait.wait  # the XREAD BLOCK, on a connection a stop can cut short

    def spy(self, *args, **kwargs):
        blocking.append(time.monotonic())
        return real_wait(self, *args, **kwargs)

    monkeypatch.setattr(WakeWait, "wait", spy)
    monkeypatch.setattr(redis.Redis, "blmove", lambda *a, **kw: pytest.fail("BLMOVE skips the paused set"))
    block = 4.0
    with RunningWorker(block_timeout=block):
        for i in range(3):
            assert wait_for(lambda n=len(blocking): len(blocking) > n)
            # Inside the XREAD; the first time idle for longer than the socket timeout.
            time.sleep(config.socket_timeout + 0.5 if i == 0 else 0.05)
            pushed = time.monotonic()
            core_jobs.record.enqueue(i)
            assert wait_for(lambda i=i: f"record:{i}" in ran(r), timeout=block)
            assert time.monotonic() - pushed < block / 2
    # Blocking longer than the socket timeout must not read as Redis being away.
    assert not [rec for rec in caplog.records if "unavailable" in rec.getMessage()]


def test_idle_worker_of_several_queues_picks_up_from_any(config, caplog):
    """Several queues: an idle worker wakes for a push to any of them, well before the
    block timeout, and idling longer than the socket timeout is not an outage."""
    r = config.redis()
    block = 4.0
    with RunningWorker(queues=[("a", None), ("b", None), ("c", None)], block_timeout=block):
        time.sleep(config.socket_timeout + 0.5)
        for q in ["c", "b", "a"]:
            pushed = time.monotonic()
            core_jobs.record.options(queue=q).enqueue(q)
            assert wait_for(lambda q=q: f"record:{q}" in ran(r), timeout=block)
            assert time.monotonic() - pushed < block / 2
            time.sleep(0.1)
    assert not [rec for rec in caplog.records if "unavailable" in rec.getMessage()]


def test_old_redis_refused_at_start(config, monkeypatch):
    real_info = redis.Redis.info

    def old_info(self, section=None, *args, **kwargs):
        reply = real_info(self, section, *args, **kwargs)
        reply["redis_version"] = "6.0.16"
        return reply

    monkeypatch.setattr(redis.Redis, "info", old_info)
    with pytest.raises(cogworker.RedisVersionError, match="6.2"):
        check_redis_version(config.redis())
    core_jobs.record.enqueue("never")
    w = Worker([("default", None)], block_timeout=0.1)
    with pytest.raises(cogworker.RedisVersionError, match=r"6\.0\.16.*6\.2"):
        w.run()
    assert config.redis().llen(config.keys.queue("default")) == 1  # nothing fetched
    for ok in ("6.2.0", "7.0.15", "7.2.4"):
        monkeypatch.setattr(redis.Redis, "info", lambda self, *a, v=ok, **kw: {"redis_version": v})
        check_redis_version(config.redis())


# -- reconcile ---------------------------------------------------------------------------


def listed_in(config, identity, tag, letter):
    """A worker of ``identity`` (not running) and a job ``record(tag)`` on its in-progress
    list as a fetch leaves one (its jid ``letter`` * 24); the raw entry."""
    w = Worker([("default", None)], identity=identity, block_timeout=0)
    raw = json.dumps(raw_payload("record", tag, jid=letter * 24)).encode()
    config.redis().rpush(config.keys.in_progress(identity), raw)
    return w, raw


def test_stray_requeued_only_on_the_second_pass(config):
    r, k = config.redis(), config.keys
    w, stray = listed_in(config, "recon", "stray", "s")
    w.reconcile()
    assert r.lrange(k.in_progress("recon"), 0, -1) == [stray]
    w.reconcile()
    assert r.llen(k.in_progress("recon")) == 0
    assert r.lrange(k.queue("default"), 0, -1) == [stray]


def test_entry_seen_once_is_not_a_stray(config):
    """A job seen stray once, then running/gone, is not requeued by a later pass."""
    r, k = config.redis(), config.keys
    w, a = listed_in(config, "recon2", "a", "a")
    w.reconcile()
    w.current = Work(a, "default")  # now it is running
    w.reconcile()
    w.reconcile()
    assert r.lrange(k.in_progress("recon2"), 0, -1) == [a]
    w.current = None
    w.ack_due = a  # finished, its ack riding on the next fetch
    w.reconcile()
    w.reconcile()
    assert r.lrange(k.in_progress("recon2"), 0, -1) == [a]


def test_pending_ack_is_settled_by_reconcile_not_rerun(config):
    r, k = config.redis(), config.keys
    w, done = listed_in(config, "recon3", "done", "d")
    w.pending.add(done, fate.ACK)
    for _ in range(3):
        w.reconcile()
    assert r.llen(k.in_progress("recon3")) == 0
    assert r.llen(k.queue("default")) == 0
    assert len(w.pending) == 0


def test_reconcile_runs_in_the_loop(config, monkeypatch):
    monkeypatch.setattr(worker_module, "RECONCILE_INTERVAL", 0.1)
    r = config.redis()
    with RunningWorker() as w:
        stray = json.dumps(raw_payload("record", "lost", jid="l" * 24))
        r.rpush(config.keys.in_progress(w.identity), stray)
        assert wait_for(lambda: ran(r) == ["record:lost"])
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0)


# -- every move: destination written first, source removed second ------------------------


def test_a_move_whose_destination_fails_loses_nothing(config):
    """Each move script, with its destination of the wrong type: the script stops at the
    write, and the job is still at its source."""
    r = config.redis()
    k = config.keys
    f = fetcher(config, "mv")
    raw = json.dumps(raw_payload("record", "m", jid="m" * 24)).encode()

    def on_list():
        r.delete(k.in_progress("mv"))
        r.rpush(k.in_progress("mv"), raw)

    on_list()
    r.set(k.queue("default"), "x")
    with pytest.raises(redis.ResponseError):
        f.give_back(raw)
    assert r.lrange(k.in_progress("mv"), 0, -1) == [raw]
    r.delete(k.queue("default"))

    for zset in (k.retry, k.dead):
        r.set(zset, "x")
        with pytest.raises(redis.ResponseError):
            f.file(raw, zset, time.time(), "{}")
        assert r.lrange(k.in_progress("mv"), 0, -1) == [raw]
        r.delete(zset)

    r.set(k.unsettled, "x")
    with pytest.raises(redis.ResponseError):
        f.park_unsettled(raw, "{}")
    assert r.lrange(k.in_progress("mv"), 0, -1) == [raw]
    r.delete(k.unsettled)

    # fetch: the in-progress list of the wrong type leaves the job on its queue.
    r.delete(k.in_progress("mv"))
    r.set(k.in_progress("mv"), "x")
    r.lpush(k.queue("default"), raw)
    assert f.fetch() is None
    assert r.lrange(k.queue("default"), 0, -1) == [raw]
    r.delete(k.in_progress("mv"))

    # the whole-list requeue: a job whose queue is unusable stays on the list.
    r.delete(k.queue("default"))
    on_list()
    r.set(k.queue("default"), "x")
    from cogworker.fleet.recovery import requeue_in_progress

    requeue_in_progress(config, "mv")
    assert r.lrange(k.in_progress("mv"), 0, -1) == [raw]
    r.delete(k.queue("default"))
    assert requeue_in_progress(config, "mv") == 1
    assert r.lrange(k.queue("default"), 0, -1) == [raw]
