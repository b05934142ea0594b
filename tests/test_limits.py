"""Rate limits' scripts and bounds against a real redis-server (docs/architecture.md#limits):
the lease of a slot (a fenced holder can't release another's), release once, parking and
promotion, the declared API's bad input, and every key bounded by count and age (an
injected clock)."""

from __future__ import annotations

import json
import time

import pytest

import cogworker
from cogworker.core.limits import Concurrency, LimitKeyError, Window, resolve
from cogworker.engine.limiting import Limiter
from cogworker.errors import ConfigurationError, Fenced


def job_raw(jid, queue="default", args=()):
    return json.dumps(
        {"class": "apps.limited.conc", "args": list(args), "kwargs": {}, "jid": jid, "queue": queue, "retry": 25}
    ).encode()


def holder(config, identity, clock=None):
    r = config.redis()
    r.hset(config.keys.last_beat, identity, time.time())  # registered, as a worker's startup does
    return Limiter(config, identity, clock)


def listed(config, limiter, raw):
    config.redis().lpush(config.keys.in_progress(limiter.identity), raw)
    return raw


def payload_of(raw):
    return json.loads(raw)


ONE = (Concurrency("one", 1),)


def test_a_fenced_holder_cannot_release_a_slot_another_holds(own_config):
    r, keys = own_config.redis(), own_config.keys
    a, b = holder(own_config, "host:1:aaaa"), holder(own_config, "host:2:bbbb")
    raw = listed(own_config, a, job_raw("j1"))
    assert a.acquire(raw, payload_of(raw), ONE).admitted
    # a is declared dead: whoever requeued its list fenced it; the job runs again in b.
    r.set(keys.fenced(a.identity), "x")
    listed(own_config, b, raw)
    assert b.acquire(raw, payload_of(raw), ONE).admitted  # a's slot freed with its lease
    _, held, _, _ = keys.limit_keys("one")
    assert r.zrange(held, 0, -1) == [b"host:2:bbbb\tj1"]
    with pytest.raises(Fenced):
        a.release(raw)
    assert r.zrange(held, 0, -1) == [b"host:2:bbbb\tj1"]  # b still holds it
    assert b.release(raw) == 1
    assert b.release(raw) == 0  # released once: nothing held any more, nothing sent
    assert r.zcard(held) == 0


def test_a_slot_released_twice_by_script_frees_and_promotes_once(own_config):
    r, keys = own_config.redis(), own_config.keys
    a, b = holder(own_config, "h:1:a"), holder(own_config, "h:2:b")
    first, second, third = job_raw("j1"), job_raw("j2"), job_raw("j3")
    listed(own_config, a, first)
    assert a.acquire(first, payload_of(first), ONE).admitted
    for raw in (second, third):
        listed(own_config, b, raw)
        said = b.acquire(raw, payload_of(raw), ONE)
        assert not said.admitted and said.listed and said.limiter == "one" and said.due > time.time()
    # Parked: off b's list, in schedule, counted, waiting in order.
    assert r.llen(keys.in_progress(b.identity)) == 0
    assert r.zcard(keys.schedule) == 2
    record, held, _, waiting = keys.limit_keys("one")
    assert int(r.hget(record, "over")) == 2 and int(r.get(keys.limits_over)) == 2
    assert r.zrange(waiting, 0, -1) == [second, third]
    twice = dict(a.held)
    assert a.release(first) == 1
    assert r.lrange(keys.queue("default"), 0, -1) == [second]  # the first waiter, at the fetch end
    assert r.zrange(keys.schedule, 0, -1) == [third]
    a.held.update(twice)  # the same release again (a retry that had landed): frees nothing, promotes nobody
    assert a.release(first) == 0
    assert r.lrange(keys.queue("default"), 0, -1) == [second] and r.zcard(keys.schedule) == 1
    assert r.zcard(held) == 0


def test_a_job_not_on_the_list_is_not_parked(own_config):
    a, b = holder(own_config, "h:1:a"), holder(own_config, "h:2:b")
    raw = listed(own_config, a, job_raw("j1"))
    assert a.acquire(raw, payload_of(raw), ONE).admitted
    other = job_raw("j2")  # never listed for b (taken, requeued elsewhere)
    said = b.acquire(other, payload_of(other), ONE)
    assert not said.admitted and not said.listed
    assert own_config.redis().zcard(own_config.keys.schedule) == 0


def test_a_window_parks_until_its_oldest_start_leaves_it(own_config):
    clock = [1_000_000.0]
    a = holder(own_config, "h:1:a", lambda: clock[0])
    limit = (Window("w", 2, per=10),)
    raws = [listed(own_config, a, job_raw(f"j{i}")) for i in range(4)]
    assert a.acquire(raws[0], payload_of(raws[0]), limit).admitted
    clock[0] += 3
    assert a.acquire(raws[1], payload_of(raws[1]), limit).admitted
    said = a.acquire(raws[2], payload_of(raws[2]), limit)
    assert not said.admitted and 1_000_010.0 <= said.due <= 1_000_010.0 + 2.0  # the window's reset, jittered
    said = a.acquire(raws[3], payload_of(raws[3]), limit)  # the second waiter: when the second start leaves
    assert not said.admitted and 1_000_013.0 <= said.due <= 1_000_015.0
    clock[0] = 1_000_010.0
    again = listed(own_config, a, raws[2])
    assert a.acquire(again, payload_of(again), limit).admitted


def test_everything_per_limiter_is_bounded_by_count_and_age(own_config):
    r, keys = own_config.redis(), own_config.keys
    clock = [2_000_000.0]
    a = holder(own_config, "h:1:a", lambda: clock[0])
    # Window starts: never more than n kept, none older than the window.
    limit = (Window("w", 5, per=60),)
    for i in range(12):
        raw = listed(own_config, a, job_raw(f"w{i}"))
        a.acquire(raw, payload_of(raw), limit)
        clock[0] += 1
    record, held, starts, waiting = keys.limit_keys("w")
    assert r.zcard(starts) == 5 and r.zcard(waiting) == 7
    assert 0 < r.ttl(starts) <= 61 and 0 < r.ttl(record) <= 7 * 24 * 3600 and 0 < r.ttl(waiting)
    clock[0] += 3600  # an hour on: the waiting entries are long past due (the poller moved them)
    raw = listed(own_config, a, job_raw("late"))
    assert a.acquire(raw, payload_of(raw), limit).admitted
    assert r.zcard(waiting) == 0 and r.zcard(starts) == 1
    # Held slots: one per holder; a holder gone (deregistered) frees its slot.
    conc = (Concurrency("c", 2),)
    for name in ("h:7:x", "h:8:y"):
        h = holder(own_config, name, lambda: clock[0])
        raw = listed(own_config, h, job_raw(name))
        assert h.acquire(raw, payload_of(raw), conc).admitted
    r.hdel(keys.last_beat, "h:7:x")  # forget.lua deregistered it (its list was empty)
    raw = listed(own_config, a, job_raw("third"))
    assert a.acquire(raw, payload_of(raw), conc).admitted
    _, held, _, _ = keys.limit_keys("c")
    assert r.zcard(held) == 2 and 0 < r.ttl(held)
    # The limiters listed: at most 1,000 (the least recently used dropped), none unused for 7 days.
    for i in range(1005):
        raw = listed(own_config, a, job_raw(f"n{i}"))
        a.acquire(raw, payload_of(raw), (Concurrency(f"n{i}", 1),))
        a.release(raw)
        clock[0] += 0.001
    assert r.zcard(keys.limits) == 1000
    assert r.zscore(keys.limits, "n0") is None and r.zscore(keys.limits, "n1004") is not None
    clock[0] += 8 * 24 * 3600
    raw = listed(own_config, a, job_raw("week"))
    a.acquire(raw, payload_of(raw), (Concurrency("fresh", 1),))
    assert r.zrange(keys.limits, 0, -1) == [b"fresh"]


def test_the_declared_api_and_its_bad_input():
    assert cogworker.Concurrency("stripe", 5).n == 5 and cogworker.Window("geo", 100, per=60).per == 60
    key = Concurrency(lambda user_id, **kw: f"user:{user_id}", 1)
    assert [x.name for x in resolve((key,), {"args": [7], "kwargs": {"full": True}})] == ["user:7"]
    for bad in (
        lambda: Concurrency("", 1),
        lambda: Concurrency("a b", 1),
        lambda: Concurrency("k", 0),
        lambda: Concurrency("k", True),
        lambda: Concurrency(3, 1),
        lambda: Window("k", 1, per=0),
        lambda: Window("k", 1, per=float("nan")),
        lambda: cogworker.job(limits=["k"]),
        lambda: cogworker.job(limits=3),
    ):
        with pytest.raises(ConfigurationError) as caught:
            bad()
        assert "\n" not in str(caught.value)
    with pytest.raises(LimitKeyError, match="raised ZeroDivisionError"):
        resolve((Concurrency(lambda x: 1 / x, 1),), {"args": [0]})
    with pytest.raises(LimitKeyError, match="non-empty string"):
        resolve((Concurrency(lambda x: None, 1),), {"args": [0]})
    job = cogworker.job(limits=[cogworker.Concurrency("x", 2)])(lambda: None)
    assert job.opts.limits == (Concurrency("x", 2),)
    assert cogworker.job(lambda: None).opts.limits == ()
