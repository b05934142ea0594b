"""Reliable fetch and settlement (docs/architecture.md#fetch, #fate-table; the seeds' processor.rb and
reliable_fetch.rb): per-identity in-progress lists, strict and weighted order, blocking
pickup, give_back/acknowledge/interrupt, failure routing, pending settlements."""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import pytest
import redis
from apps import core_jobs
from core_util import RunningWorker, queued, ran, wait_for, zentries

import cogworker
from cogworker.client.jobs import default_backoff
from cogworker.core import fate
from cogworker.engine import loop as worker_module
from cogworker.engine.fetch.fetcher import Fetcher, Work, check_redis_version
from cogworker.engine.loop import Worker
from cogworker.fleet.poller import Poller
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


def _push_raw(config, payload):
    config.redis().lpush(config.keys.queue(payload.get("queue", "default")), json.dumps(payload))


def _payload(name, *args, **extra):
    base = {"class": f"apps.core_jobs.{name}", "args": list(args), "kwargs": {}, "jid": extra.pop("jid", "j" * 24),
            "queue": "default", "retry": 3, "created_at": time.time(), "enqueued_at": time.time()}
    base.update(extra)
    return base


@pytest.mark.parametrize("before, where, delay", [(1, "retry", 60), (2, "retry", 90), (3, "dead", None)])
def test_interrupt_delay_grows_then_dead_past_three(config, before, where, delay):
    r = config.redis()
    _push_raw(config, _payload("fail_broken_backoff", "n", interrupted_count=before, retry_count=0))
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

    _push_raw(config, _payload("fail_no_retry", "last", retry=2, retry_count=2))
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


# -- reconcile ---------------------------------------------------------------------------


def test_stray_requeued_only_on_the_second_pass(config):
    r = config.redis()
    k = config.keys
    w = Worker([("default", None)], identity="recon", block_timeout=0)
    stray = json.dumps(_payload("record", "stray", jid="s" * 24))
    r.rpush(k.in_progress("recon"), stray)
    w.reconcile()
    assert r.lrange(k.in_progress("recon"), 0, -1) == [stray.encode()]
    w.reconcile()
    assert r.llen(k.in_progress("recon")) == 0
    assert r.lrange(k.queue("default"), 0, -1) == [stray.encode()]


def test_entry_seen_once_is_not_a_stray(config):
    """A job seen stray once, then running/gone, is not requeued by a later pass."""
    r = config.redis()
    k = config.keys
    w = Worker([("default", None)], identity="recon2", block_timeout=0)
    a = json.dumps(_payload("record", "a", jid="a" * 24)).encode()
    r.rpush(k.in_progress("recon2"), a)
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
    r = config.redis()
    k = config.keys
    w = Worker([("default", None)], identity="recon3", block_timeout=0)
    done = json.dumps(_payload("record", "done", jid="d" * 24)).encode()
    r.rpush(k.in_progress("recon3"), done)
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
        stray = json.dumps(_payload("record", "lost", jid="l" * 24))
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
    raw = json.dumps(_payload("record", "m", jid="m" * 24)).encode()

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
