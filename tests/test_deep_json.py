"""Deeply nested JSON (issue #25, point 1): enqueue refuses what a worker could not read,
by the one limit both share (``boundedjson.MAX_DEPTH``); an entry written past it by
anything else goes to dead with a reason, or is shown raw, and the entries beside it go
on. Real redis-servers, real prefork masters and workers."""

from __future__ import annotations

import json
import time

import pytest
from apps import core_jobs, pf
from core_util import RunningWorker, ran, wait_for, zentries
from prefork_harness import lrange
from prefork_harness import wait_for as pf_wait

import cogworker
from cogworker import api
from cogworker.boundedjson import MAX_DEPTH
from cogworker.fleet.poller import Poller
from cogworker.fleet.recovery import requeue_dead


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def raw_job(config, depth: int, jid: str, name: str = "apps.core_jobs.record") -> bytes:
    """A job entry whose ``args`` nest to ``depth`` levels in all (written as old code or
    another client would: never through enqueue)."""
    now = time.time()
    head = json.dumps(
        {
            "class": name,
            "kwargs": {},
            "jid": jid,
            "queue": "default",
            "retry": 25,
            "created_at": now,
            "enqueued_at": now,
        }
    )[:-1]
    return (head + ', "args": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}").encode()


def test_enqueue_refuses_past_the_limit_and_a_worker_runs_what_it_accepts(config):
    # The payload object and its args list are two levels: args nesting MAX_DEPTH - 2 fit.
    jid = core_jobs.record.enqueue(nested(MAX_DEPTH - 2))
    for too_deep in (nested(MAX_DEPTH - 1), nested(985)):
        with pytest.raises(TypeError, match=f"nested too deep: a payload nests at most {MAX_DEPTH} levels"):
            core_jobs.record.enqueue(too_deep)
        with pytest.raises(TypeError, match="nested too deep"):
            core_jobs.record.enqueue_in(60, too_deep)
        with pytest.raises(TypeError, match="nested too deep"):
            core_jobs.record.enqueue_many([(1,), (too_deep,)])
    r = config.redis()
    assert r.llen(config.keys.queue("default")) == 1 and r.zcard(config.keys.schedule) == 0
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 1)
    assert api.status(jid).state in ("succeeded", "queued")  # the run's status is flushed a moment later


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 985, 1100, 100_000])
def test_a_deep_entry_on_a_queue_goes_to_dead_and_the_worker_goes_on(config, depth):
    r = config.redis()
    k = config.keys
    r.lpush(k.queue("default"), raw_job(config, depth, "deep"))
    core_jobs.record.enqueue("after")
    with RunningWorker() as w:
        assert wait_for(lambda: ran(r) == ["record:after"])
        assert wait_for(lambda: r.llen(k.in_progress(w.identity)) == 0)
    [(entry, _)] = zentries(r, k.dead)
    assert entry["error_class"] == "cogworker.BadPayload" and entry["jid"] == "deep"
    assert f"nested deeper than {MAX_DEPTH} levels" in entry["error_message"]
    [record] = api.DeadSet().jobs()
    assert record.jid == "deep" and record.error_class == "cogworker.BadPayload"


@pytest.mark.parametrize("depth", [985, 1100])
def test_a_deep_entry_in_schedule_and_retry_never_stops_a_poller_pass(config, depth):
    r = config.redis()
    k = config.keys
    for zset in (k.schedule, k.retry):
        r.zadd(zset, {raw_job(config, depth, f"deep-{zset}"): 0, b"[" * depth + b"]" * depth: 0})
    core_jobs.record.enqueue_in(-1, "due")
    r.zadd(
        k.retry,
        {
            json.dumps(
                {
                    "class": "apps.core_jobs.record",
                    "args": ["retried"],
                    "kwargs": {},
                    "jid": "ok",
                    "queue": "default",
                    "retry": 25,
                }
            ): 0
        },
    )
    Poller(config).poll()
    Poller(config).poll()
    assert r.zcard(k.schedule) == 0 and r.zcard(k.retry) == 0
    with RunningWorker():
        assert wait_for(lambda: sorted(ran(r)) == ["record:due", "record:retried"])
        assert wait_for(lambda: r.zcard(k.dead) == 4)
    assert {e["error_class"] for e, _ in zentries(r, k.dead)} == {"cogworker.BadPayload"}


def test_a_deep_entry_on_a_dead_process_list_is_requeued_with_the_rest(config):
    r = config.redis()
    k = config.keys
    deep = raw_job(config, 985, "deep")
    good = json.dumps(
        {
            "class": "apps.core_jobs.record",
            "args": ["good"],
            "kwargs": {},
            "jid": "good",
            "queue": "default",
            "retry": 25,
        }
    ).encode()
    r.rpush(k.in_progress("gone:1:x"), deep, good, b"[" * 1100 + b"]" * 1100)
    assert requeue_dead(config, "gone:1:x", "none") == (3, True)
    assert r.llen(k.in_progress("gone:1:x")) == 0 and r.llen(k.queue("default")) == 3
    assert api.status("good").state == "queued"


def test_prefork_with_concurrency_sends_the_deep_job_to_dead_and_runs_the_rest(own_config, masters):
    """The issue's case: a 985-deep entry among jobs fetched ten at a time; before, the
    child died of a RecursionError, the master's recovery failed on its list every pass,
    and the job and the others beside it stayed there."""
    r = own_config.redis()
    k = own_config.keys
    r.lpush(k.queue("default"), raw_job(own_config, 985, "deep", "apps.pf.record"))
    pf.record.enqueue_many([(f"ok{i}",) for i in range(30)])
    m = masters(procs=1, args=("--concurrency", "10"))
    pf_wait(lambda: len(lrange(own_config, "test:ran")) == 30, 30, what="the other jobs")
    pf_wait(lambda: r.zcard(k.dead) == 1, 10, what="the deep job in dead")
    entry = json.loads(r.zrange(k.dead, 0, -1)[0])
    assert entry["jid"] == "deep" and entry["error_class"] == "cogworker.BadPayload"
    pf_wait(lambda: sum(r.llen(key) for key in r.keys(k.in_progress("*"))) == 0, 10, what="lists drained")
    assert m.alive() and "RecursionError" not in m.output() and "Traceback" not in m.output()
    pf_wait(lambda: getattr(cogworker.api.status("deep"), "state", None) == "dead", 5, what="its status")
