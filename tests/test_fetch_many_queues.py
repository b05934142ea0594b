"""The queue choice of the fetch scripts (cogworker/lua/_queues.lua) among many queues:
LMOVE on the first, one LMPOP over the rest, the per-key loop when that can't be trusted
(docs/architecture.md#fetch). Strict order, paused queues, keys of the wrong type, OOM,
and a list that can't take the job: every job is fetched once, in order, or left where
it was."""

from __future__ import annotations

import json
import logging

import pytest
import redis
from apps import core_jobs

from cogworker.engine.fetch.fetcher import Fetcher

N = 100


def names(n=N):
    return [f"q{i}" for i in range(1, n + 1)]


def fetcher(config, queues, identity="id-many"):
    return Fetcher(config, identity, [(q, None) for q in queues], block_timeout=0)


def push(queue, arg):
    core_jobs.record.options(queue=queue).enqueue(arg)


def args_of(work):
    return json.loads(work.raw)["args"][0]


def test_strict_order_among_a_hundred_queues(config):
    r = config.redis()
    for q, arg in (("q80", "a"), ("q100", "b"), ("q50", "c"), ("q50", "d"), ("q1", "e")):
        push(q, arg)
    f = fetcher(config, names())
    got = [(w.queue, args_of(w)) for w in iter(f.fetch, None)]
    assert got == [("q1", "e"), ("q50", "c"), ("q50", "d"), ("q80", "a"), ("q100", "b")]
    assert r.llen(config.keys.in_progress("id-many")) == 5


def test_more_queues_than_one_lmpop_takes(config):
    """Scanned 500 keys at a time: a job behind the first chunk is found."""
    push("q1200", "far")
    push("q700", "near")
    f = fetcher(config, names(1200))
    assert [w.queue for w in iter(f.fetch, None)] == ["q700", "q1200"]


def test_paused_queues_among_many_are_skipped(config):
    r = config.redis()
    for q in ("q1", "q30", "q60"):
        push(q, q)
    r.sadd(config.keys.paused, "q1", "q30")
    f = fetcher(config, names())
    w = f.fetch()
    assert w.queue == "q60" and f.fetch() is None
    assert r.llen(config.keys.queue("q1")) == 1 and r.llen(config.keys.queue("q30")) == 1
    r.srem(config.keys.paused, "q30")
    assert f.fetch(ack=w.raw).queue == "q30"


def test_the_only_queue_not_paused(config):
    r = config.redis()
    push("q2", "x")
    push("q3", "y")
    r.sadd(config.keys.paused, *[f"q{i}" for i in range(1, N + 1) if i != 3])
    f = fetcher(config, names())
    assert f.fetch().queue == "q3" and f.fetch() is None


@pytest.mark.parametrize("bad", ["q1", "q2", "q40", "q99"])
def test_a_key_of_the_wrong_type_among_many(config, caplog, bad):
    """Wherever it sits (the first queue, tried alone; or among those LMPOP scans, which
    then stops at it and the loop names it), it is logged and the others are served."""
    r = config.redis()
    r.set(config.keys.queue(bad), "a string")
    push("q100", "last")
    push("q50", "mid")
    f = fetcher(config, names())
    with caplog.at_level(logging.ERROR, logger="cogworker"):
        got = [w.queue for w in iter(f.fetch, None)]
    assert got == ["q50", "q100"]
    assert any(f"queue:{bad} holds the wrong type" in rec.getMessage() for rec in caplog.records)
    assert r.get(config.keys.queue(bad)) == b"a string"


def test_a_list_that_cannot_take_the_job_leaves_it_at_its_queue_fetch_end(config, caplog):
    """The in-progress list of the wrong type: the job LMPOP took goes back where it was."""
    r = config.redis()
    for arg in ("old", "new"):
        push("q70", arg)
    f = fetcher(config, names())
    r.set(f.in_progress, "not a list")
    with caplog.at_level(logging.ERROR, logger="cogworker"):
        assert f.fetch() is None
    assert [json.loads(x)["args"][0] for x in r.lrange(config.keys.queue("q70"), 0, -1)] == ["new", "old"]
    r.delete(f.in_progress)
    assert args_of(f.fetch()) == "old"


def test_out_of_memory_takes_no_job_from_any_queue(own_config, own_redis):
    """LMPOP is not refused under OOM as LMOVE is: the first queue's LMOVE decides, and
    the per-key loop reports the refusal; every job stays where it was."""
    r = own_config.redis()
    push("q60", "x")
    f = fetcher(own_config, names())
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            f.fetch()
        assert r.llen(own_config.keys.queue("q60")) == 1 and r.llen(f.in_progress) == 0
    finally:
        r.config_set("maxmemory", 0)
    assert f.fetch().queue == "q60"


def test_look_ahead_record_among_many_queues(config):
    """A look-ahead fetch that found all empty drops the record; one that took a job sets it."""
    r = config.redis()
    f = fetcher(config, names())
    r.hset(config.keys.ahead, "id-many", 3)
    assert f.read_ahead(f.send_ahead(4)) is None
    assert not r.hexists(config.keys.ahead, "id-many")
    push("q90", "ahead")
    assert f.read_ahead(f.send_ahead(5)).queue == "q90"
    assert r.hget(config.keys.ahead, "id-many") == b"5"
    f.close()


def test_every_queue_empty_then_a_push_wakes_the_fetch(config):
    f = Fetcher(config, "id-many", [(q, None) for q in names()], block_timeout=0.05)
    assert f.fetch() is None
    push("q90", "woken")
    assert f.fetch().queue == "q90"
