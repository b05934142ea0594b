"""The look-ahead fetch while the lease holds (issue 30, docs/architecture.md#lookahead-k): the acks'
LREMs, the mark and k LMOVEs from the guessed queue are plain commands in one MULTI, and
fetch_ahead_moved.lua checks what fetch_ahead.lua checks, on a private redis-server. Each
test makes the moved jobs wrong where they must not stand (a fence, a pause, a queue
before the guess with a job, a wake since the known-empty queues were found empty, a
queue key of the wrong type) or the guess short (run dry mid-look-ahead), and checks they went
back to their queue's fetch end in order, and that what the look-ahead brings is what k strict
fetches would have taken."""

from __future__ import annotations

import pytest

from cogworker.engine.fetch.fetcher import MARK, Fetcher
from cogworker.errors import Fenced
from cogworker.fleet.recovery import requeue_in_progress
from cogworker.store import lua

OWNER = "host:1:owner"


def job(jid: str, queue: str = "a") -> bytes:
    return f'{{"jid":"{jid}","class":"x","queue":"{queue}","args":[]}}'.encode()


def push(config, queue, *jids, wake=True):
    """Oldest first. ``wake``: through cogworker's push script (it XADDs the wake stream
    when the queue was empty); else a raw LPUSH, as a writer outside cogworker may."""
    r, k = config.redis(), config.keys
    for jid in jids:
        if wake:
            lua.run(r, "push", [k.queue(queue), k.queues, k.wake], [job(jid, queue), queue])
        else:
            r.lpush(k.queue(queue), job(jid, queue))


def listed(config):
    return config.redis().lrange(config.keys.in_progress(OWNER), 0, -1)


def marks(config):
    """Marks left on the list (a look-ahead's is MARK:<number>)."""
    return [raw for raw in listed(config) if raw.startswith(MARK)]


def queued(config, queue="a"):
    """Oldest (next to fetch) first."""
    return list(reversed(config.redis().lrange(config.keys.queue(queue), 0, -1)))


def fetcher(config, queues=("a",)) -> Fetcher:
    f = Fetcher(config, OWNER, [(q, None) for q in queues])
    f.vouch(float("inf"))  # the lease holds throughout (the clock can't pass it)
    return f


def fetch_k(f, number, k, acks=(), moved=True):
    ahead = f.send_ahead(number, None, None, k, tuple(acks))
    assert (ahead.fast is not None) == moved  # the plain commands' MULTI, not fetch_ahead.lua
    return f.read_ahead_all(ahead)


def jids(works):
    return [w.jid() for w in works]


def test_the_lookahead_moves_by_plain_commands_and_its_acks_ride_on_them(config):
    r, k = config.redis(), config.keys
    push(config, "a", "a1", "a2", "a3", "a4", "a5")
    f = fetcher(config)
    assert jids(fetch_k(f, 1, 3)) == ["a1", "a2", "a3"]  # oldest first
    assert listed(config) == [job("a3"), job("a2"), job("a1")] and r.hget(k.ahead, OWNER) == b"1:3:0"
    r.set(k.orphanings("a1"), 1)
    r.set(k.orphanings("a3"), 1)  # still running: its counter stays
    works = fetch_k(f, 2, 3, acks=[(job("a1"), "a1"), (job("a2"), None)])
    assert jids(works) == ["a4", "a5"] and {w.queue for w in works} == {"a"}
    assert listed(config) == [job("a5"), job("a4"), job("a3")]  # no mark left
    assert r.get(k.orphanings("a1")) is None and r.get(k.orphanings("a3")) == b"1"
    assert r.hget(k.ahead, OWNER) == b"2:2:0"
    assert fetch_k(f, 3, 3, acks=[(job("a3"), "a3")]) == []
    assert r.hget(k.ahead, OWNER) is None and listed(config) == [job("a5"), job("a4")]


def test_fenced_between_its_moves_go_back_and_its_acks_find_nothing(config):
    """Fenced while the lease holds can't happen (docs/architecture.md#lease); if it did,
    the recoverer's requeue emptied the list first: the acks' plain LREMs find nothing,
    the moved jobs go back in order, and the fetch is refused."""
    push(config, "a", *(f"j{i}" for i in range(6)))
    f = fetcher(config)
    assert jids(fetch_k(f, 1, 2)) == ["j0", "j1"]
    assert requeue_in_progress(config, OWNER, fence=True) == 2  # j0, j1 back at the fetch end, fenced
    with pytest.raises(Fenced):
        fetch_k(f, 2, 4, acks=[(job("j0"), "j0")])
    assert f.fenced and listed(config) == []
    assert queued(config) == [job(f"j{i}") for i in range(6)]  # j0 not lost by the ack's LREM
    assert config.redis().hget(config.keys.ahead, OWNER) == b"1:2:0"  # refused before the record


def test_paused_between_its_moves_go_back_and_the_next_queue_gives(config):
    push(config, "a", "a1", "a2", "a3", "a4")
    push(config, "b", "b1", "b2")
    f = fetcher(config, ("a", "b"))
    assert jids(fetch_k(f, 1, 2)) == ["a1", "a2"]  # the guess is now a
    config.redis().sadd(config.keys.paused, "a")
    # Cut after a (it gave the last job): a paused gives nothing, its moves put back in order.
    assert fetch_k(f, 2, 4, acks=[(job("a1"), "a1"), (job("a2"), "a2")]) == []
    assert queued(config, "a") == [job("a3"), job("a4")] and listed(config) == []
    works = fetch_k(f, 3, 4)  # names every queue: a's guessed moves go back again, b gives
    assert jids(works) == ["b1", "b2"] and {w.queue for w in works} == {"b"}
    assert queued(config, "a") == [job("a3"), job("a4")]
    assert listed(config) == [job("b2", "b"), job("b1", "b")]
    config.redis().srem(config.keys.paused, "a")  # by hand: no wake, but a paused queue was never counted empty
    assert jids(fetch_k(f, 4, 4)) == ["a3", "a4"]


def test_a_guess_run_dry_mid_lookahead_is_followed_by_the_next_queues_in_order(config):
    r, k = config.redis(), config.keys
    push(config, "a", "a1", "a2", "a3")
    push(config, "b", "b1", "b2")
    push(config, "c", *(f"c{i}" for i in range(5)))
    f = fetcher(config, ("a", "b", "c"))
    works = fetch_k(f, 1, 8)
    assert jids(works) == ["a1", "a2", "a3", "b1", "b2", "c0", "c1", "c2"]
    assert [w.queue for w in works] == ["a"] * 3 + ["b"] * 2 + ["c"] * 3
    assert listed(config) == [w.raw for w in reversed(works)]  # newest at the head, no mark
    assert r.hget(k.ahead, OWNER) == b"1:8:0"
    assert queued(config, "c") == [job("c3", "c"), job("c4", "c")]
    works = fetch_k(f, 2, 8)  # the guess is c, and a, b are known empty
    assert jids(works) == ["c3", "c4"] and r.hget(k.ahead, OWNER) == b"2:2:0"


def test_a_job_before_the_guess_wins_and_the_guess_goes_back(config):
    push(config, "a", "a1")
    push(config, "b", *(f"b{i}" for i in range(6)))
    f = fetcher(config, ("a", "b"))
    assert jids(fetch_k(f, 1, 3)) == ["a1", "b0", "b1"]  # the guess is now b
    push(config, "a", "a2", wake=False)  # outside cogworker: no wake, a still "known empty"
    f.empty.forget()  # as after RESCAN: the fetch names every queue
    works = fetch_k(f, 2, 3)
    assert jids(works) == ["a2", "b2", "b3"] and [w.queue for w in works] == ["a", "b", "b"]
    assert queued(config, "b") == [job(f"b{i}", "b") for i in (4, 5)]


def test_a_wake_since_makes_it_stale_and_its_moves_go_back(config):
    r, k = config.redis(), config.keys
    push(config, "a", "a1")
    push(config, "b", *(f"b{i}" for i in range(6)))
    f = fetcher(config, ("a", "b"))
    assert jids(fetch_k(f, 1, 3)) == ["a1", "b0", "b1"]  # a found empty at the wake's newest ID
    push(config, "a", "a2")  # fills a: wakes the stream
    assert fetch_k(f, 2, 3, acks=[(job("a1"), "a1")]) == []  # stale: nothing taken, the ack landed
    assert queued(config, "b") == [job(f"b{i}", "b") for i in range(2, 6)]
    assert listed(config) == [job("b1", "b"), job("b0", "b")] and r.hget(k.ahead, OWNER) is None
    assert jids(fetch_k(f, 3, 3)) == ["a2", "b2", "b3"]  # names every queue


def test_a_queue_key_of_the_wrong_type_is_reported_and_skipped(config, caplog):
    r, k = config.redis(), config.keys
    push(config, "a", "a1", "a2")
    push(config, "b", "b1", "b2", "b3")
    f = fetcher(config, ("a", "b"))
    assert jids(fetch_k(f, 1, 2)) == ["a1", "a2"]  # the guess is a
    r.set(k.queue("a"), "not a list")  # every LMOVE of the MULTI fails: none moved
    assert fetch_k(f, 2, 4) == []  # cut after a, the guess
    assert "holds the wrong type" in caplog.text
    works = fetch_k(f, 2, 4)  # every queue named
    assert jids(works) == ["b1", "b2", "b3"]
    assert "holds the wrong type" in caplog.text
    assert marks(config) == []
    r.delete(k.queue("a"))
    push(config, "a", "a3")
    r.set(k.queue("b"), "not a list")  # the guess is b now, of the wrong type: nothing moved
    assert jids(fetch_k(f, 3, 4)) == ["a3"]  # the queue choice's, from the first queue
    r.delete(k.queue("b"))
    push(config, "b", "b4", "b5")
    assert jids(fetch_k(f, 4, 4)) == ["b4", "b5"]  # the guess is b again
    push(config, "b", "b6", "b7")
    r.set(k.queue("a"), "not a list")  # before the guess, and it exists: b's moves go back
    assert jids(fetch_k(f, 5, 4)) == ["b6", "b7"]  # a skipped, b's in order all the same
    assert marks(config) == [] and queued(config, "b") == []


def test_the_lookahead_survives_a_script_flush(config):
    """NOSCRIPT inside the MULTI: the plain commands ran, the script then runs on what they left."""
    push(config, "a", *(f"j{i}" for i in range(5)))
    f = fetcher(config)
    assert jids(fetch_k(f, 1, 2)) == ["j0", "j1"]
    config.redis().script_flush()
    assert jids(fetch_k(f, 2, 2, acks=[(job("j0"), "j0")])) == ["j2", "j3"]
    assert listed(config) == [job("j3"), job("j2"), job("j1")]
    assert config.redis().hget(config.keys.ahead, OWNER) == b"2:2:0"


def test_with_the_lease_run_out_the_lookahead_is_fetch_ahead_lua(config):
    push(config, "a", "a1", "a2", "a3")
    f = fetcher(config)
    f.confirmed_at = float("-inf")
    assert jids(fetch_k(f, 1, 2, moved=False)) == ["a1", "a2"]
    assert jids(fetch_k(f, 2, 2, acks=[(job("a1"), "a1")])) == ["a3"]  # vouched for: the MULTI again


def test_a_stray_mark_under_the_fetch_is_not_mistaken_for_its_own(config):
    """A mark some earlier fetch left (its script never ran): this fetch finds its own."""
    r, k = config.redis(), config.keys
    push(config, "a", "a1", "a2", "a3", "a4")
    f = fetcher(config)
    r.lpush(k.in_progress(OWNER), MARK + b":7", MARK)
    assert jids(fetch_k(f, 8, 3)) == ["a1", "a2", "a3"]
    assert listed(config) == [job("a3"), job("a2"), job("a1"), MARK, MARK + b":7"]
    assert r.hget(k.ahead, OWNER) == b"8:3:0"


def test_a_reconcile_drops_a_stray_lookahead_mark(config):
    from cogworker.engine.loop import Worker

    r, k = config.redis(), config.keys
    w = Worker([("default", None)], config=config, block_timeout=0)
    r.lpush(k.in_progress(w.identity), MARK + b":3")
    w.reconcile()
    w.reconcile()  # a stray is handled when seen twice
    assert r.llen(k.in_progress(w.identity)) == 0
    assert r.llen(k.queue("default")) == 0  # not requeued as a job
