"""Every key a script touches is one it was given in KEYS (docs/architecture.md#transitions),
watched on a real server: MONITOR lists each command a script runs right after the
EVALSHA that ran it, and COMMAND GETKEYS names the keys of each. The scripts that once
built keys from data only Redis held (a due entry's queue, a requeued job's queue and
unique lock, the job a freed slot promotes, a slot holder's fence, the batches the index
trims) are driven through the paths that reach those keys.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from declared_util import ARG, undeclared, unescape, watched

import cogworker
from cogworker.core.current import progress_writer
from cogworker.core.limits import Resolved
from cogworker.engine.limiting import Limiter
from cogworker.fleet import recovery
from cogworker.fleet.poller import Poller
from cogworker.keys import Keys
from cogworker.lifecycle import donering, history
from cogworker.store import lua
from cogworker.transitions import batches, declare, limits, settle


def _job(jid: str, queue: str = "default", **extra: Any) -> bytes:
    payload = {"class": "apps.core_jobs.record", "args": [jid], "kwargs": {}, "jid": jid, "queue": queue}
    payload.update(extra)
    return json.dumps(payload).encode()


def test_poll_due_touches_only_declared_keys(own_config: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    now = time.time()
    r.zadd(k.schedule, {_job("a1", "alpha"): now - 5, _job("b1", "beta", priority=5): now - 4, _job("d1", ""): now - 3})
    r.zadd(k.retry, {_job("c1", "gamma", priority=-3): now - 2})
    lines = watched(own_config, lambda: Poller(own_config).poll())
    assert undeclared(r, lines) == []
    assert r.llen(k.queue("alpha")) == 1 and r.llen(k.job_queue("beta", 5)) == 1
    assert r.llen(k.job_queue("gamma", -3)) == 1 and r.llen(k.queue("default")) == 1


def test_requeue_touches_only_declared_keys(own_config: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    dead_one = "host:1:dead"
    unique = _job("u1", "alpha", unique_digest="d1g", unique_for=60)
    resumable = _job("i1", "beta", priority=2)
    r.set(k.unique("d1g"), "u1")
    r.hset(k.checkpoint("i1"), mapping={"done": 5})
    r.set(k.orphanings("p1"), 1)
    r.rpush(k.in_progress(dead_one), unique, resumable, _job("p1"), b"not json")
    lines = watched(own_config, lambda: recovery.requeue_dead(own_config, dead_one, "none"))
    assert undeclared(r, lines) == []
    assert r.llen(k.in_progress(dead_one)) == 0
    assert r.llen(k.queue("alpha")) == 1 and r.llen(k.job_queue("beta", 2)) == 1 and r.llen(k.queue("default")) == 2
    assert r.ttl(k.unique("d1g")) > 0  # the lock renewed: its key was reached
    assert r.get(k.orphanings("p1")) == b"2"
    assert r.hget(k.checkpoint("i1"), "orphaned_done") == b"5"


def _limiter(k: Any, name: str) -> tuple[limits.Held, tuple[str, str, str, str]]:
    record, slots, starts, waiting = k.limit_keys(name)
    return limits.Held(record, slots, waiting), (record, slots, starts, waiting)


def test_limit_release_touches_only_declared_keys(own_config: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    me = "host:2:me"
    held, _ = _limiter(k, "api")
    parked = _job("w1", "beta", priority=7, unique_digest="d2g", unique_for=30)
    r.zadd(held.slots, {f"{me}\tj1": time.time()})
    r.zadd(k.schedule, {parked: time.time() + 100})
    r.zadd(held.waiting, {_job("gone"): time.time(), parked: time.time() + 1})  # the first one left schedule
    r.set(k.unique("d2g"), "w1")

    def release() -> None:
        got = limits.limit_release(
            r,
            k,
            fence=k.fenced(me),
            last_beat=k.last_beat,
            schedule=k.schedule,
            wake=k.wake,
            held=[held],
            declared=[],
            identity=me,
            jid="j1",
            default_queue="default",
            held_for="1.5",
        )
        assert got.released == 1

    lines = watched(own_config, release)
    assert undeclared(r, lines) == []
    assert r.lrange(k.job_queue("beta", 7), 0, -1) == [parked] and r.zcard(k.schedule) == 0
    assert r.ttl(k.unique("d2g")) > 0


def test_limit_acquire_touches_only_declared_keys(own_config: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    me, other, fenced = "host:3:me", "host:4:alive", "host:5:fenced"
    _, (record, slots, starts, waiting) = _limiter(k, "db")
    job = _job("j2")
    r.rpush(k.in_progress(me), job)
    r.hset(k.last_beat, other, "1")
    r.set(k.fenced(fenced), "1")
    r.zadd(slots, {f"{other}\tx": time.time(), f"{fenced}\ty": time.time()})

    def acquire() -> None:
        got = limits.limit_acquire(
            r,
            k,
            fence=k.fenced(me),
            last_beat=k.last_beat,
            in_progress=k.in_progress(me),
            schedule=k.schedule,
            limits=k.limits,
            limits_over=k.limits_over,
            limiters=[limits.LimitArgs(record, slots, starts, waiting, "concurrency", "db", 2, "0")],
            declared=[],
            identity=me,
            job=job,
            jid="j2",
            now="",
            jitter="0.5",
        )
        assert got.state == 1  # the fenced holder's slot was freed for it

    lines = watched(own_config, acquire)
    assert undeclared(r, lines) == []
    assert r.zscore(slots, f"{fenced}\ty") is None


def test_batch_open_touches_only_declared_keys(own_config: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    now = time.time()
    for i, bid in enumerate(["old", "b1", "b2"]):
        r.zadd(k.batches, {bid: now - 1000 if bid == "old" else now - 10 + i})
        r.hset(k.batch(bid), "open", "1")
        r.hset(k.batch_jobs(bid), "j", "pending")

    def open_one() -> None:
        assert batches.batch_open(
            r,
            k,
            record=k.batch("b3"),
            index=k.batches,
            created=k.stats_batches,
            declared=[],
            bid="b3",
            now=repr(now),
            ttl=3600,
            most=2,
            oldest=repr(now - 100),
            fields=["description", "x"],
        )

    lines = watched(own_config, open_one)
    assert undeclared(r, lines) == []
    assert r.zrange(k.batches, 0, -1) == [b"b2", b"b3"]
    assert not r.exists(k.batch("old"), k.batch_jobs("old"), k.batch("b1"), k.batch_jobs("b1"))


def test_done_room_touches_only_declared_keys(own_config: Any) -> None:
    config = cogworker.configure(status=True, history=True, status_max=20)  # buckets of 2
    r, k = config.redis(), config.keys
    t = time.time()

    def flushes() -> None:  # new buckets opened, then the oldest dropped
        for call in range(15):
            donering.file_done(config, [(f"j{call}-{i}", "default", "C", 1, t, t, "w1", t) for i in range(3)], t)

    lines = watched(config, flushes)
    assert undeclared(r, lines) == []
    ring = r.lrange(k.done_ring, 0, -1)
    assert 20 <= sum(r.hlen(name) for name in ring) <= 22 and len(ring) < 15


def _checkpoint(config: Any, jid: str, done: int) -> bool:
    k = config.keys
    return settle.checkpoint(
        config.redis(),
        k,
        checkpoint=k.checkpoint(jid),
        fence=k.fenced("host:10:me"),
        last_beat=k.last_beat,
        index=k.retained_checkpoints,
        declared=[],
        done=done,
        cursor="1",
        ttl=600,
        identity="host:10:me",
        now=repr(time.time()),
        state="running",
        keep=config.status_max,
    )


def _suspend(config: Any, jid: str) -> bool:
    k, job = config.keys, _job(jid, unique_digest=f"d-{jid}", unique_for=60)
    config.redis().rpush(k.in_progress("host:10:me"), job)
    config.redis().set(k.unique(f"d-{jid}"), jid)
    return settle.suspend(
        config.redis(),
        k,
        in_progress=k.in_progress("host:10:me"),
        fence=k.fenced("host:10:me"),
        checkpoint=k.checkpoint(jid),
        last_beat=k.last_beat,
        index=k.retained_checkpoints,
        queue=k.queue("default"),
        wake=k.wake,
        lock=[k.unique(f"d-{jid}")],
        declared=[],
        job=job,
        entry=job,
        done=3,
        cursor="3",
        ttl=600,
        identity="host:10:me",
        now=repr(time.time()),
        keep=config.status_max,
    )


def test_progress_checkpoints_and_suspends_shed_only_declared_keys(own_config: Any, monkeypatch: Any) -> None:
    """Past status_max, a progress record's or a checkpoint's write trims its index (one
    group of keys at a time, _retain.lua): each key shed is asked for and declared."""
    config = cogworker.configure(status_max=3)
    r, k = config.redis(), config.keys
    calls = _calls(monkeypatch, "progress")

    def writes() -> None:
        for i in range(8):
            progress_writer(config, f"p{i}")('{"fraction": 0.5}')
            assert _checkpoint(config, f"c{i}", 1) and _suspend(config, f"s{i}")

    lines = watched(config, writes)
    assert undeclared(r, lines) == []
    assert not r.exists(k.progress("p0"), k.checkpoint("c0")) and r.exists(k.progress("p7"), k.checkpoint("s7")) == 2
    assert r.zcard(k.retained_progress) <= 4 and r.zcard(k.retained_checkpoints) <= 4
    assert r.llen(k.queue("default")) == 8 and r.ttl(k.unique("d-s7")) > 0  # the lock after the declared keys
    assert len(calls) > 8  # a write that sheds asks once for what it sheds


def _flush(config: Any, jids: list[str], t: float, state: str = "succeeded") -> None:
    """One status flush: each job's row and history entry, their enq: fields gone."""
    rows = [(jid, 3600, t, True, [state, 1, "default", "C", "w1", t, t, "", ""]) for jid in jids]
    entries = [(jid, json.dumps({"state": state})) for jid in jids]
    history._run(config, rows, entries, False, {-int(t // 3600) * 3600: jids}, "", t)


def test_status_flush_touches_only_declared_keys(own_config: Any) -> None:
    config = cogworker.configure(status=True, history=True, status_max=5, status_max_failed=5)
    r, k = config.redis(), config.keys
    t = time.time()
    hour = int(t // 3600) * 3600
    r.hset(k.enq(hour), mapping={"a0": "x", "a1": "x"})
    r.hset(k.enq(hour + 3600), "a2", "x")

    def flushes() -> None:  # past status_max: the oldest shed, with their status: and history: keys
        for call in range(4):
            _flush(config, [f"a{3 * call + i}" for i in range(3)], t + call)
        _flush(config, ["a0"], t + 5, "dead")  # a success retried, now dead: it moves sets

    lines = watched(config, flushes)
    assert undeclared(r, lines) == []
    assert r.zcard(k.retained_succeeded) == 5 and r.zrange(k.retained_failed, 0, -1) == [b"a0"]
    kept = {m.decode() for m in r.zrange(k.retained_succeeded, 0, -1)}
    assert kept == {f"a{i}" for i in range(7, 12)}
    assert not r.exists(*(key for i in range(1, 7) for key in (k.status(f"a{i}"), k.history(f"a{i}"))))
    assert r.exists(k.status("a0"), k.status("a11")) == 2
    assert not r.exists(k.enq(hour), k.enq(hour + 3600))


def test_a_status_flush_in_the_steady_state_takes_one_call(own_config: Any, monkeypatch: Any) -> None:
    """The keys given are those of the jobs the last flush said the next may shed."""
    config = cogworker.configure(status=True, history=True, status_max=5, status_max_failed=5)
    monkeypatch.setattr(history, "_hints", {})
    calls, per = _calls(monkeypatch, "status_flush"), []
    t = time.time()
    for call in range(10):
        calls.clear()
        _flush(config, [f"j{3 * call + i}" for i in range(3)], t + call)
        per.append(len(calls))
    assert per == [1] * 10
    assert config.redis().zcard(config.keys.retained_succeeded) == 5


def test_a_release_promoting_from_a_queue_seen_takes_one_call(own_config: Any, monkeypatch: Any) -> None:
    """A release gives the lists of the jobs promoted lately: a waiter of the same queue
    then goes back in the release's one call."""
    r, k = own_config.redis(), own_config.keys
    limiter = Limiter(own_config, "host:6:me")
    held, _ = _limiter(k, "api")
    calls, per = _calls(monkeypatch, "limit_release"), []
    for i in range(4):
        parked = _job(f"w{i}", "beta", priority=3)
        r.zadd(held.slots, {f"host:6:me\tj{i}": time.time()})
        r.zadd(k.schedule, {parked: time.time() + 100})
        r.zadd(held.waiting, {parked: time.time()})
        calls.clear()
        assert limiter._release(_job(f"j{i}"), ["api"], 1.0) == 1
        per.append(len(calls))
    assert per == [2, 1, 1, 1]
    assert r.llen(k.job_queue("beta", 3)) == 4


def test_an_acquire_at_a_full_limiter_of_holders_seen_takes_one_call(own_config: Any, monkeypatch: Any) -> None:
    """An acquire gives the fences of the holders it saw lately: while the same processes
    hold a full limiter's slots, each acquire (parked here) takes one call."""
    r, k = own_config.redis(), own_config.keys
    me, holders = "host:7:me", ["host:8:a", "host:9:b"]
    limiter = Limiter(own_config, me)
    _, (_, slots, _, _) = _limiter(k, "db")
    for who in holders:
        r.hset(k.last_beat, who, "1")
        r.zadd(slots, {f"{who}\tx": time.time()})
    calls, per = _calls(monkeypatch, "limit_acquire"), []
    for i in range(4):
        job = _job(f"p{i}")
        r.rpush(k.in_progress(me), job)
        calls.clear()
        assert limiter._acquire(job, json.loads(job), [Resolved("concurrency", "db", 2, 0.0)]).state == 0
        per.append(len(calls))
    assert per == [2, 1, 1, 1]
    assert r.zcard(k.schedule) == 4 and r.llen(k.in_progress(me)) == 0


def _calls(monkeypatch: Any, script: str) -> list[str]:
    calls: list[str] = []
    real = lua.run

    def spy(client: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if name == script:
            calls.append(name)
        return real(client, name, *args, **kwargs)

    monkeypatch.setattr(lua, "run", spy)
    return calls


def test_a_flush_in_the_steady_state_takes_one_call(own_config: Any, monkeypatch: Any) -> None:
    """The buckets given are those last seen and the next in sequence: only the first
    flush (nothing seen yet) asks for keys, as the script that named them took one call."""
    config = cogworker.configure(status=True, history=True, status_max=20)
    monkeypatch.setattr(donering, "_seen", {})  # what an earlier test's flushes saw
    calls, per = _calls(monkeypatch, "done_room"), []
    t = time.time()
    for call in range(30):  # buckets of 2: a new one every flush, the oldest dropped
        calls.clear()
        donering.file_done(config, [(f"j{call}-{i}", "default", "C", 1, t, t, "w1", t) for i in range(3)], t)
        per.append(len(calls))
    assert per == [2] + [1] * 29


def test_a_poll_in_the_steady_state_takes_one_call(own_config: Any, monkeypatch: Any) -> None:
    r, k = own_config.redis(), own_config.keys
    calls, per, poller = _calls(monkeypatch, "poll_due"), [], Poller(own_config)
    for i in range(5):
        r.zadd(k.schedule, {_job(f"a{i}", "alpha"): 1, _job(f"b{i}", "beta", priority=5): 2})
        calls.clear()
        poller.next_at = 0
        assert poller.poll() == 2
        per.append(len(calls))
    assert per == [3, 2, 2, 2, 2]  # schedule's (the first poll asks for its lists), then retry's


def test_the_watch_catches_an_undeclared_key(own_config: Any) -> None:
    """The check above fails for a script that touches a key it wasn't given."""
    r = own_config.redis()
    lines = watched(
        own_config, lambda: r.eval("redis.call('SET', KEYS[1], 1); return redis.call('GET', 'other')", 1, "k")
    )
    assert [line.split()[-1] for line in undeclared(r, lines)] == ["other"]


def test_a_name_gives_the_key_keys_py_names() -> None:
    k = Keys("ns")
    assert k.declared("queue:low 5") == k.job_queue("low", 5) and k.declared("unique:d1") == k.unique("d1")
    assert k.declared("orphanings:j") == k.orphanings("j") and k.declared("checkpoint:j") == k.checkpoint("j")
    assert k.declared("status:j") == k.status("j") and k.declared("history:j") == k.history("j")
    assert k.declared("fenced:host:1") == k.fenced("host:1") and k.declared("batch:x") == k.batch("x")
    assert k.declared("batch_jobs:x") == k.batch_jobs("x") and k.declared("done:3600:4") == k.done(3600, 4)
    assert k.declared("enq:7200") == k.enq(7200) and k.declared("queue:a:b") == k.queue("a:b")
    assert k.declared("result:j") == k.result("j") and k.declared(f"key:{k.unique('d')}") == k.unique("d")
    for bad in ("queue", "z:x", "done:x", "q:x"):
        with pytest.raises(ValueError):
            k.declared(bad)


def test_a_payload_declares_what_settling_it_dead_writes() -> None:
    k = Keys("ns")
    got = declare.of_entry(k, b'{"jid": "j", "wf": {"ttl": 5, "last": "l", "b": "b-1"}}')
    assert [d.name for d in got] == [
        "result:j",
        "result_wait:j",
        "result:l",
        "result_wait:l",
        "batch:b-1",
        "batch_jobs:b-1",
    ]
    assert [d.key for d in got] == [k.result("j"), k.result_wait("j"), k.result("l"), k.result_wait("l")] + [
        k.batch("b-1"),
        k.batch_jobs("b-1"),
    ]
    # A wf in its arguments is no workflow of its own.
    assert declare.of_entry(k, b'{"jid": "j", "args": [{"wf": {"g": "x"}}]}') == []


def test_unescape_reads_what_monitor_quotes() -> None:
    assert unescape(b'a\\"b\\x00\\\\c\\t') == b'a"b\x00\\c\t'
    assert ARG.findall(b'"q 5" "x\\"y"') == [b"q 5", b'x\\"y']
