"""The done ring's room (done_room.lua, docs/architecture.md#retention): first-try successes
are filed with plain commands into the room a script reserved, so flushes that race each
other never fill a bucket past its size, and what the reservations leave (``done_fill``)
goes with the buckets. Real redis-server; the writes' clock injected."""

from __future__ import annotations

import time

import pytest

import cogworker
from cogworker import api
from cogworker.client import status as status_enqueue
from cogworker.lifecycle import donering, history
from cogworker.store import lua
from cogworker.transitions.declare import declare, needs


@pytest.fixture
def config(config):
    status_enqueue._expired_enq = None  # the session's Redis was emptied: this process's memory is stale
    return cogworker.configure(status=True, history=True, status_max=20)  # buckets of 2


def done(jids, t):
    return [(j, "default", "C", 1, t - 0.2, t, "w1", t - 1) for j in jids]


def reserve(config, n, t, run=lua.run):
    k = config.keys
    given = []  # the buckets the script asks for (declare.run_declared's loop, on the runner given)
    while True:
        spans = run(
            config.redis(),
            "done_room",
            [k.done_ring, k.done_fill, *(b.key for b in given)],
            [n, repr(t), donering.bucket_size(config), config.status_max, donering.keep_seconds(config)]
            + [b.name for b in given],
        )
        if needs(spans) is None:
            break
        given += declare(k, needs(spans))
    return [(name.decode(), int(count)) for name, count in zip(spans[::2], spans[1::2], strict=True)]


def test_two_reservations_before_either_writes_share_no_room(config):
    t = time.time()
    first, second = reserve(config, 3, t), reserve(config, 3, t)
    assert [c for _, c in first] == [2, 1] and [c for _, c in second] == [1, 2]
    assert first[1][0] == second[0][0]  # the bucket the first left room in
    assert len({name for name, _ in first + second}) == 3


def test_racing_flushes_fill_no_bucket_past_its_size(config, monkeypatch):
    t = time.time()
    r = config.redis()
    real = lua.run
    late: list[tuple[str, int]] = []

    def race(client, name, keys, args, pipe=None):  # another flush reserves between this one's two steps
        spans = real(client, name, keys, args, pipe)
        if not late and needs(spans) is None:  # after the reservation, not a call that asked for keys
            late.extend(reserve(config, 3, t, real))
            history._write_pending(config, [], [], True, done(["x1", "x2", "x3"], t))
        return spans

    monkeypatch.setattr(lua, "run", race)
    history._write_pending(config, [], [], True, done(["a1", "a2", "a3"], t))
    sizes = [r.hlen(name) for name in r.lrange(config.keys.done_ring, 0, -1)]
    assert max(sizes) <= 2
    assert sum(sizes) == 6  # the racing flush's own reservation (3) stayed empty room
    for jid in ("a1", "a2", "a3", "x1", "x2", "x3"):
        assert api.status(jid).state == "succeeded"


def test_the_fill_counts_go_with_the_buckets(config):
    r = config.redis()
    t = time.time()
    for call in range(30):
        history._write_pending(config, [], [], True, done([f"j{call}-{n}" for n in range(3)], t))
    ring = r.lrange(config.keys.done_ring, 0, -1)
    assert 20 <= sum(r.hlen(name) for name in ring) <= 22  # status_max, whole buckets
    assert set(r.hkeys(config.keys.done_fill)) == set(ring)
    assert len(list(r.scan_iter(config.keys.done_prefix + "*"))) == len(ring)


def test_a_bucket_from_before_the_fill_counts_is_measured_by_its_length(config):
    r = config.redis()
    t = time.time()
    old = config.keys.done(history.hour_of(t), 7)
    r.hset(old, "legacy", "[]")  # a bucket filed before done_fill existed: one record, room for one
    r.lpush(config.keys.done_ring, old)
    history._write_pending(config, [], [], True, done(["n1", "n2"], t))
    assert r.hlen(old) == 2 and r.hget(old, "n1") is not None
    assert r.lindex(config.keys.done_ring, 0).decode() == config.keys.done(history.hour_of(t), 8)
