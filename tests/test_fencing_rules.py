"""The fencing rules, one at a time, against a real redis-server: a fenced identity is
refused by every script it runs; orphan recovery declares a process dead only after
watching its beat stay unchanged for the threshold, with Redis answering throughout."""

from __future__ import annotations

import json
import time

import pytest
import redis
from core_util import RunningWorker, wait_for

import cogworker
from cogworker.core import heartbeat
from cogworker.engine.fetch.fetcher import Fetcher, Work
from cogworker.engine.loop import Worker
from cogworker.errors import ConfigurationError, Fenced
from cogworker.fleet.recovery import OrphanRecovery, requeue_dead, requeue_in_progress
from cogworker.store import lua

ME = "host:1:me"


def job(tag: str) -> bytes:
    return json.dumps(
        {
            "class": "apps.core_jobs.record",
            "args": [tag],
            "kwargs": {},
            "jid": f"jid-{tag}",
            "queue": "default",
            "retry": 25,
        }
    ).encode()


def short(**extra: float) -> cogworker.Config:
    """Liveness in seconds instead of a minute (keeps the Redis URL)."""
    return cogworker.configure(orphan_threshold=1.0, heartbeat_interval=0.2, recovery_interval=0.1, **extra)


def beat_of(config: cogworker.Config, identity: str) -> bytes | None:
    return config.redis().hget(config.keys.last_beat, identity)


def test_every_script_of_a_fenced_identity_is_refused(config):
    r = config.redis()
    k = config.keys
    mine, queued = job("mine"), job("queued")
    r.lpush(k.in_progress(ME), mine)
    r.lpush(k.queue("default"), queued)
    r.hset(k.ahead, ME, 7)
    r.hset(k.last_beat, ME, "1.000000")
    r.set(k.fenced(ME), 1)
    f = Fetcher(config, ME, [("default", None)])

    def refused(call, *args):
        with pytest.raises(Fenced) as caught:
            call(*args)
        assert caught.value.identity == ME

    refused(f.fetch)
    refused(f.fetch, mine)  # the ack riding on it is refused too
    ahead = f.send_ahead(8, mine)
    refused(f.read_ahead, ahead)
    refused(f.acknowledge, mine)
    refused(f.file, mine, k.retry, time.time(), "{}")
    refused(f.give_back, mine)
    refused(f.park_unsettled, mine, "{}")
    refused(f.claim_ahead, 7)
    refused(f.return_ahead, 7)
    refused(f.confirm)
    refused(requeue_in_progress, config, ME)  # its own requeue as it stops
    # take-over: refused for a fenced taker; nothing to take from a fenced owner
    r.lpush(k.in_progress("host:1:sib"), job("sib"))
    r.hset(k.ahead, "host:1:sib", 3)
    refused(f.take_ahead, "host:1:sib", 3)
    other = Fetcher(config, "host:1:other", [("default", None)])
    r.set(k.fenced("host:1:sib"), 1)
    assert other.take_ahead("host:1:sib", 3) is None
    assert r.llen(k.in_progress("host:1:sib")) == 1
    # the beat: skipped and named
    record = heartbeat.BeatRecord(ME, "child", 1, ["default"])
    live = heartbeat.BeatRecord("host:1:live", "child", 2, ["default"])
    assert heartbeat.beat(config, [record, live]).refused == [ME]
    assert r.exists(k.process("host:1:live")) and not r.exists(k.process(ME))
    # nothing moved, nothing beat
    assert r.lrange(k.in_progress(ME), 0, -1) == [mine]
    assert r.lrange(k.queue("default"), 0, -1) == [queued]
    assert r.zcard(k.retry) == 0 and r.llen(k.unsettled) == 0
    assert beat_of(config, ME) == b"1.000000"
    assert f.fenced
    # a confirm that finds a job on a fenced list keeps the list registered for recovery
    assert r.sismember(k.in_progress_identities, ME)


def test_scripts_refresh_the_beat_by_redis_time(config):
    r = config.redis()
    k = config.keys
    f = Fetcher(config, ME, [("default", None)])
    r.lpush(k.queue("default"), job("a"), job("b"))
    seen = []
    work = f.fetch()
    seen.append(beat_of(config, ME))
    f.acknowledge(work.raw)
    seen.append(beat_of(config, ME))
    work = f.fetch()
    f.file(work.raw, k.retry, time.time(), "{}")
    seen.append(beat_of(config, ME))
    f.confirm()
    seen.append(beat_of(config, ME))
    now = float(r.time()[0])
    assert all(b is not None and abs(float(b) - now) < 5 for b in seen)
    assert len(set(seen)) == len(seen)  # every one changed it
    # a process acting for a gone identity doesn't make it look alive
    r.hset(k.last_beat, "host:2:gone", "1.000000")
    r.lpush(k.in_progress("host:2:gone"), job("c"))
    Fetcher(config, "host:2:gone", [], beats=False).file(job("c"), k.retry, time.time(), "{}")
    assert beat_of(config, "host:2:gone") == b"1.000000"


def test_requeue_refuses_if_the_beat_changed_since_observed(config):
    r = config.redis()
    k = config.keys
    r.lpush(k.in_progress("host:3:x"), job("x"))
    r.hset(k.last_beat, "host:3:x", "100.000001")
    assert requeue_dead(config, "host:3:x", "100.000000") == (-1, False)
    assert requeue_dead(config, "host:3:x", "none") == (-1, False)
    r.set(k.process("host:3:x"), 1)  # a process key still there: alive too
    assert requeue_dead(config, "host:3:x", "100.000001") == (-1, False)
    assert r.llen(k.in_progress("host:3:x")) == 1 and not r.exists(k.fenced("host:3:x"))
    r.delete(k.process("host:3:x"))
    assert requeue_dead(config, "host:3:x", "100.000001") == (1, True)
    assert r.exists(k.fenced("host:3:x")) and 0 < r.ttl(k.fenced("host:3:x")) <= 7 * 24 * 3600
    assert r.llen(k.queue("default")) == 1
    # already fenced: a leftover moves, it doesn't fence again
    r.lpush(k.in_progress("host:3:x"), job("late"))
    assert requeue_dead(config, "host:3:x", "100.000001") == (1, False)
    # no beat at all is observed as "none"
    r.lpush(k.in_progress("host:3:y"), job("y"))
    assert requeue_dead(config, "host:3:y", "none") == (1, True)
    # a master reclaiming its reaped child fences it in the same step
    r.lpush(k.in_progress("host:3:z"), job("z"))
    assert requeue_in_progress(config, "host:3:z", fence=True) == 1
    assert r.exists(k.fenced("host:3:z"))
    assert requeue_in_progress(config, "host:3:empty", fence=True) == 0  # a clean exit: no tombstone
    assert not r.exists(k.fenced("host:3:empty"))


def _register(config, identity, beat="5.000000", tag="j"):
    r = config.redis()
    r.lpush(config.keys.in_progress(identity), job(tag))
    r.sadd(config.keys.in_progress_identities, identity)
    if beat is not None:
        r.hset(config.keys.last_beat, identity, beat)


def _run_until(rec, predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rec.run()
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_dead_only_after_its_beat_stayed_unchanged_for_the_threshold(config):
    cfg = short()
    r = cfg.redis()
    _register(cfg, "host:4:dead", beat="5.000000", tag="d")  # an ancient beat: no head start
    _register(cfg, "host:4:none", beat=None, tag="n")
    _register(cfg, "host:4:live", beat="5.000000", tag="l")
    rec = OrphanRecovery(cfg)
    first = time.monotonic()
    assert rec.run() == 0
    assert rec.next_delay() <= rec.interval
    moved, moved_at = 0, None
    while time.monotonic() - first < 2.5:
        r.hset(cfg.keys.last_beat, "host:4:live", repr(time.time()))  # it keeps beating
        moved += rec.run()
        if moved and moved_at is None:
            moved_at = time.monotonic() - first
        time.sleep(0.1)
    assert moved == 2
    assert cfg.orphan_threshold <= moved_at < cfg.orphan_threshold + 0.5
    assert r.llen(cfg.keys.queue("default")) == 2
    assert r.exists(cfg.keys.fenced("host:4:dead")) and r.exists(cfg.keys.fenced("host:4:none"))
    assert r.llen(cfg.keys.in_progress("host:4:live")) == 1 and not r.exists(cfg.keys.fenced("host:4:live"))


def test_a_stall_of_the_recovering_process_restarts_the_observation(config):
    cfg = short()
    r = cfg.redis()
    _register(cfg, "host:5:x")
    rec = OrphanRecovery(cfg)
    rec.run()
    seen_at = rec.seen["host:5:x"][1]
    time.sleep(cfg.orphan_threshold + 0.2)  # frozen (no pass) for longer than the threshold
    assert rec.run() == 0  # the gap restarts the watch instead of maturing it
    assert rec.seen["host:5:x"][1] > seen_at
    assert r.llen(cfg.keys.in_progress("host:5:x")) == 1
    assert _run_until(rec, lambda: r.llen(cfg.keys.in_progress("host:5:x")) == 0, 3)


def test_a_redis_error_restarts_the_observation(own_config, own_redis):
    cfg = short(socket_timeout=0.5)
    r = cfg.redis()
    _register(cfg, "host:6:x")
    rec = OrphanRecovery(cfg)
    rec.run()
    time.sleep(0.6)
    rec.run()
    own_redis.pause()
    try:
        with pytest.raises((redis.TimeoutError, redis.ConnectionError)):
            rec.run()
        assert rec.seen == {}
    finally:
        own_redis.resume()
    assert rec.run() == 0  # more than the threshold since first seen, but Redis didn't answer in between
    assert r.llen(cfg.keys.in_progress("host:6:x")) == 1
    assert _run_until(rec, lambda: r.llen(cfg.keys.in_progress("host:6:x")) == 0, 3)


def test_leftover_on_a_fenced_list_is_requeued_then_the_identity_forgotten(config):
    cfg = short()
    r = cfg.redis()
    k = cfg.keys
    _register(cfg, "host:7:x", tag="first")
    rec = OrphanRecovery(cfg)
    assert _run_until(rec, lambda: r.exists(k.fenced("host:7:x")), 3)
    assert r.sismember(k.in_progress_identities, "host:7:x")  # still watched
    r.lpush(k.in_progress("host:7:x"), job("late"))  # a blocking move sent before the fence lands
    assert _run_until(rec, lambda: not r.sismember(k.in_progress_identities, "host:7:x"), 3)
    assert sorted(json.loads(x)["jid"] for x in r.lrange(k.queue("default"), 0, -1)) == ["jid-first", "jid-late"]
    assert r.llen(k.in_progress("host:7:x")) == 0


def test_a_job_landed_on_a_fenced_list_is_never_started_nor_lost(config):
    from apps import core_jobs  # noqa: F401  (the job class)

    cfg = short()
    r = cfg.redis()
    k = cfg.keys
    w = Worker([("default", None)], config=cfg, identity="host:8:x")
    r.set(k.fenced("host:8:x"), 1)
    raw = job("blmoved")
    r.lpush(k.in_progress("host:8:x"), raw)  # as a BLMOVE sent before a freeze would
    assert w.fetcher.lease_left() < 0  # nothing confirmed lately: it must ask first
    with pytest.raises(Fenced):
        w.process(Work(raw, "default"))
    assert r.llen("test:ran") == 0
    assert r.lrange(k.in_progress("host:8:x"), 0, -1) == [raw]
    assert r.sismember(k.in_progress_identities, "host:8:x")
    rec = OrphanRecovery(cfg)
    assert _run_until(rec, lambda: r.llen(k.queue("default")) == 1, 3)


def test_no_blocking_move_once_the_lease_ran_out(config, monkeypatch):
    """Frozen between the fetch script and the BLMOVE: the fetch script checks again first."""
    from cogworker.core import inprogress
    from cogworker.engine.fetch import fetcher as fetch

    f = Fetcher(config, ME, [("default", None)], block_timeout=0.5)
    ticks = iter(range(0, 10_000, 1000))
    monkeypatch.setattr(fetch, "clock", lambda: float(next(ticks)))  # each look is 1000 s later
    monkeypatch.setattr(inprogress, "clock", lambda: float(next(ticks)))  # the lease lives on the list
    monkeypatch.setattr(f.client, "blmove", lambda *a, **kw: pytest.fail("BLMOVE after the lease ran out"))
    assert f.fetch() is None


def test_a_fresh_lease_costs_no_round_trip(config, monkeypatch):
    from apps import core_jobs

    calls = []
    real = lua.run

    def spy(client, name, *args, **kwargs):
        calls.append(name)
        return real(client, name, *args, **kwargs)

    monkeypatch.setattr(lua, "run", spy)
    core_jobs.record.enqueue_many([(i,) for i in range(20)])
    with RunningWorker():
        assert wait_for(lambda: config.redis().llen("test:ran") == 20)
    assert "confirm" not in calls
    assert calls.count("fetch") <= 20 + 10  # one fetch per job (plus the idle ones)


def test_liveness_settings_are_checked():
    with pytest.raises(ConfigurationError, match="orphan_threshold"):
        cogworker.Config(orphan_threshold=10, heartbeat_interval=5)
    with pytest.raises(ConfigurationError, match="recovery_interval"):
        cogworker.Config(recovery_interval=0)


def test_an_identity_fenced_by_someone_else_is_watched_a_threshold_before_it_is_forgotten(config):
    cfg = short()
    r = cfg.redis()
    k = cfg.keys
    r.sadd(k.in_progress_identities, "host:9:x")
    r.hset(k.last_beat, "host:9:x", "5.000000")
    rec = OrphanRecovery(cfg)
    rec.run()
    first = rec.seen["host:9:x"][1]
    while heartbeat.clock() < first + cfg.orphan_threshold - 0.2:
        time.sleep(0.1)
        rec.run()
    assert rec.seen["host:9:x"][1] == first  # about to mature
    r.set(k.fenced("host:9:x"), 1, ex=7 * 24 * 3600)  # another master fenced it just now
    time.sleep(0.25)
    rec.run()  # matured here, but the fence is too young to forget the list
    assert rec.seen["host:9:x"][1] > first
    assert r.sismember(k.in_progress_identities, "host:9:x")
    assert _run_until(rec, lambda: not r.sismember(k.in_progress_identities, "host:9:x"), 3)


def test_an_identity_found_alive_or_unrecoverable_is_not_asked_again_on_every_pass(config):
    """A beat that stays unchanged while the process key says alive (or whose list can't be
    requeued) is watched afresh: the next pass is an interval away, not a busy loop."""
    cfg = short()
    r = cfg.redis()
    k = cfg.keys
    _register(cfg, "host:8:alive")
    r.hset(k.process("host:8:alive"), "pid", 8)  # a process key without a TTL: alive
    r.set(k.in_progress("host:9:broken"), "not a list")
    r.sadd(k.in_progress_identities, "host:9:broken")
    r.hset(k.last_beat, "host:9:broken", "5.000000")
    rec = OrphanRecovery(cfg)
    rec.run()
    time.sleep(cfg.orphan_threshold + 0.05)
    rec.last_read = time.monotonic()  # as if passes had run all along (no gap restart)
    assert rec.run() == 0
    assert rec.next_delay() >= rec.interval * 0.8 - 0.01
    assert r.llen(k.in_progress("host:8:alive")) == 1 and not r.exists(k.fenced("host:8:alive"))
