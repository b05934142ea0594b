"""The fast fetch and the single push (docs/architecture.md#fetch, #enqueue): the payload
moves by plain commands, and every rule fetch.lua kept still holds. Each test tries to
make the guessed move stand where it must not: a job waiting on an earlier queue, a
paused queue, a fenced identity, scripts flushed between two fetches."""

from __future__ import annotations

import json
import time

import pytest
from apps import core_jobs

from cogworker import api
from cogworker.client import enqueue as client
from cogworker.engine.fetch import fetcher as fetch
from cogworker.engine.fetch.fetcher import MARK, Fetcher
from cogworker.errors import Fenced
from cogworker.store import lua


@pytest.fixture(autouse=True)
def fast_for_every_size(monkeypatch, request):
    """These tests attack the fast fetch itself: taken here whatever the last job's size
    (by default only after a job of FAST_MIN_BYTES or more)."""
    if "by_size" not in request.node.name:
        monkeypatch.setattr(fetch, "FAST_MIN_BYTES", 0)


def job(tag: str, queue: str = "a") -> bytes:
    return json.dumps(
        {
            "class": "apps.core_jobs.record",
            "args": [tag],
            "kwargs": {},
            "jid": tag * 24,
            "queue": queue,
            "retry": 3,
            "created_at": 1.0,
            "enqueued_at": 1.0,
        }
    ).encode()


def fetcher(config, queues=("a", "b")) -> Fetcher:
    return Fetcher(config, "host:1:fast", [(q, None) for q in queues], block_timeout=0)


def listed(config) -> list[bytes]:
    return config.redis().lrange(config.keys.in_progress("host:1:fast"), 0, -1)


def test_a_job_on_an_earlier_queue_wins_over_the_guess(config):
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("b"), job("b1", "b"), job("b2", "b"))
    assert f.fetch().raw == job("b1", "b")  # the guess is now b, and a is known empty
    lua.run(r, "push", [k.queue("a"), k.queues, k.wake], [job("a1"), "a"])  # cogworker's push wakes
    work = f.fetch()
    assert work.queue == "a" and work.raw == job("a1")
    # b's job, moved by the guess and put back, is still next at b's fetch end
    assert r.lrange(k.queue("b"), 0, -1) == [job("b2", "b")]
    assert listed(config) == [job("a1"), job("b1", "b")]
    assert f.fetch(ack=job("a1")).raw == job("b2", "b")


def test_a_paused_guess_gives_nothing(config):
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("b"), job("b1", "b"), job("b2", "b"))
    assert f.fetch().queue == "b"
    api.queue("b").pause()
    assert f.fetch() is None
    assert r.lrange(k.queue("b"), 0, -1) == [job("b2", "b")]
    assert listed(config) == [job("b1", "b")]  # no mark left behind either
    api.queue("b").resume()
    assert f.fetch().raw == job("b2", "b")


def test_a_fenced_identity_takes_nothing_in_the_fast_fetch(config):
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("a"), job("a1"), job("a2"))
    first = f.fetch()
    assert f.lease_left() > 0  # so the next fetch is the fast one
    r.set(k.fenced("host:1:fast"), 1)
    with pytest.raises(Fenced):
        f.fetch()
    assert f.fenced
    assert r.lrange(k.queue("a"), 0, -1) == [job("a2")]  # moved by the LMOVE, put back
    assert listed(config) == [first.raw]


def test_the_fast_fetch_survives_a_script_flush(config):
    """NOSCRIPT inside the MULTI: the plain commands ran; the script runs on what they left."""
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("a"), job("a1"), job("a2"), job("a3"))
    got = [f.fetch()]
    for _ in range(2):
        r.script_flush()
        got.append(f.fetch(ack=got[-1].raw))
    assert [w.raw for w in got] == [job("a1"), job("a2"), job("a3")]
    assert listed(config) == [job("a3")]
    assert MARK not in listed(config)


def test_the_look_ahead_fetch_records_its_job_only_when_it_took_one(config):
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("a"), job("a1"))
    first = f.fetch()
    ahead = f.send_ahead(5, first.raw, "a1" * 12)
    assert ahead.fast is not None
    assert f.read_ahead(ahead) is None
    assert r.hget(k.ahead, "host:1:fast") is None
    assert listed(config) == []  # the ack rode on it
    r.lpush(k.queue("b"), job("b1", "b"))
    ahead = f.send_ahead(6)
    assert f.read_ahead(ahead).raw == job("b1", "b")
    assert r.hget(k.ahead, "host:1:fast") == b"6"


def test_a_reconcile_drops_a_stray_mark(config):
    from cogworker.engine.loop import Worker

    r, k = config.redis(), config.keys
    w = Worker([("default", None)], config=config, block_timeout=0)
    r.lpush(k.in_progress(w.identity), MARK)
    w.reconcile()
    w.reconcile()  # a stray is handled when seen twice
    assert r.llen(k.in_progress(w.identity)) == 0
    assert r.llen(k.queue("default")) == 0  # not requeued as a job


def test_a_push_wakes_idle_workers_only_when_it_fills_an_empty_queue(config):
    r, k = config.redis(), config.keys
    client._backlogged.clear()
    core_jobs.record.enqueue(1)
    assert r.xlen(k.wake) == 1 and r.sismember(k.queues, "default")
    core_jobs.record.enqueue(2)  # jobs were waiting: nobody of this queue can be asleep
    assert r.xlen(k.wake) == 1
    core_jobs.record.enqueue(3)  # backlogged: a plain LPUSH
    assert r.xlen(k.wake) == 1 and r.llen(k.queue("default")) == 3
    r.delete(k.queue("default"), k.queues)  # drained behind this producer's back
    core_jobs.record.enqueue(4)  # the plain push finds it was empty: wakes, names the queue
    assert r.xlen(k.wake) == 2 and r.sismember(k.queues, "default")
    core_jobs.record.enqueue(5)
    assert r.xlen(k.wake) == 2 and r.llen(k.queue("default")) == 2


def test_a_large_job_takes_the_pipeline_and_still_wakes(config):
    r, k = config.redis(), config.keys
    client._backlogged.clear()
    big = "x" * (client.PUSH_SCRIPT_MAX + 1)
    core_jobs.record.enqueue(big)
    core_jobs.record.enqueue(big)
    assert r.xlen(k.wake) == 2 and r.llen(k.queue("default")) == 2


def test_an_idle_worker_of_several_queues_picks_up_a_push_at_once(config):
    f = Fetcher(config, "host:1:idle", [("a", None), ("default", None)], block_timeout=5.0)
    client._backlogged.clear()
    started = time.monotonic()
    import threading

    threading.Timer(0.3, lambda: core_jobs.record.enqueue("late")).start()
    work = None
    while work is None and time.monotonic() - started < 4:
        work = f.fetch()
    assert work is not None and work.queue == "default"
    assert time.monotonic() - started < 1.5  # woken by the push, not at the end of a 2.5 s block


def test_weighted_queues_with_jobs_on_both_take_from_the_first_of_each_order(config):
    """The guess is the first queue of this fetch's order that last gave a job: with
    both queues busy no move is undone, and each fetch still follows its random order."""
    r, k = config.redis(), config.keys
    f = Fetcher(config, "host:1:fast", [("a", 3), ("b", 1)], block_timeout=0)
    r.lpush(k.queue("a"), *[job(f"a{i}") for i in range(40)])
    r.lpush(k.queue("b"), *[job(f"b{i}", "b") for i in range(40)])
    orders = []
    real = f.order

    def spy():
        orders.append(real())
        return orders[-1]

    f.order = spy
    got = [f.fetch().queue for _ in range(40)]
    assert got == [o[0] for o in orders]  # always the first queue of that fetch's order
    assert 0 < got.count("b") < got.count("a")


def test_the_fast_fetch_is_taken_by_size(config):
    """A small last job's fetch goes through fetch.lua (fewer Redis commands); a large
    one's through the fast fetch (a MULTI: no payload enters Lua)."""
    r, k = config.redis(), config.keys
    f = fetcher(config)
    big = json.dumps({**json.loads(job("c1")), "args": ["x" * fetch.FAST_MIN_BYTES]}).encode()
    r.lpush(k.queue("a"), job("a1"), big, job("a2"))

    def fetched_by_multi(*ack):
        r.config_resetstat()
        work = f.fetch(*ack)
        return work, "cmdstat_exec" in r.info("commandstats")

    first, multi = fetched_by_multi()
    assert first.raw == job("a1") and not multi  # nothing acked: fetch.lua
    second, multi = fetched_by_multi(first.raw, "a1" * 12)
    assert second.raw == big and not multi  # a small ack: fetch.lua
    third, multi = fetched_by_multi(second.raw, "c1" * 12)
    assert third.raw == job("a2") and multi  # a large ack: the fast fetch
    assert listed(config) == [job("a2")]


def test_an_empty_entry_is_fetched_as_itself(config):
    """An empty entry is a job too (filed in dead as not JSON): the fast fetch hands it
    over as b"", whether its move stood or fetch.lua's loop took it."""
    r, k = config.redis(), config.keys
    f = fetcher(config)
    r.lpush(k.queue("a"), job("a1"), b"")
    first = f.fetch()
    assert first.raw == job("a1")
    empty = f.fetch(first.raw, "a1" * 12)  # the fast fetch: the guess (a) stands
    assert empty is not None and empty.raw == b"" and empty.queue == "a"
    r.lpush(k.queue("a"), b"")
    f2 = fetcher(config, queues=("b", "a"))  # guess b: empty, so fetch.lua's loop takes a's
    again = f2.fetch(job("zz"), "zz" * 12)
    assert again is not None and again.raw == b"" and again.queue == "a"
