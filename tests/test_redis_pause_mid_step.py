"""Redis SIGSTOPped in the middle of a step, then SIGCONTed a few seconds later, with real
prefork masters: a rate-limit acquire in flight (limit_acquire.lua), a result's completion
in flight (complete.lua). "The middle" is hit on purpose: the job before the step stops
Redis itself as it ends (apps/pf_pause.py), so the step's script is the next thing its
child sends. Every start and end is logged to a file (not to Redis, which is stopped)."""

from __future__ import annotations

import time

import pytest
from apps.pf_log import events
from prefork_harness import in_progress_total, queue_len, wait_for
from test_limits_prefork import most_at_once

import cogworker
from cogworker.client.enqueue import push, push_many
from cogworker.client.jobs import JobOptions, build_payload

PAUSE = 3.0  # longer than the app's 1 s socket timeout: what was sent meanwhile times out


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def payload(job, *args):
    return build_payload(f"apps.pf_pause.{job}", args, {}, JobOptions())


def starts(runs, tag):
    return [e for e in runs if e[0] == "start" and e[1] == tag]


def overlapping(runs, tag):
    """True if two runs of ``tag`` were in progress at once (by their start/end lines)."""
    spans = sorted((at, ev) for ev, t, _, at in runs if t == tag and ev in ("start", "end"))
    depth = 0
    for _, ev in spans:
        depth += 1 if ev == "start" else -1
        if depth > 1:
            return True
    return False


def pause_then_resume(own_redis, log, tag):
    wait_for(lambda: any(e[0] == "pausing" and e[1] == tag for e in events(log)), 30, what=f"{tag} stopped Redis")
    time.sleep(PAUSE)
    own_redis.resume()


def settled(config):
    r = config.redis()
    return (
        queue_len(config, "default") == 0
        and in_progress_total(config) == 0
        and r.zcard(config.keys.retry) == 0
        and r.zcard(config.keys.schedule) == 0
    )


def test_redis_stopped_during_a_rate_limit_acquire(own_config, own_redis, masters, log):
    """The child fetched limited jobs ahead while ``gate`` ran; gate stops Redis as it
    ends, so the next job's acquire is sent to a stopped server and times out. Whatever
    the stopped server did with it once resumed, every limited job runs once, never two
    at once (Concurrency 1), and no slot stays held."""
    m = masters(
        module="apps.pf_pause",
        procs=1,
        env={"PF_LOG": log, "PF_REDIS_PID": str(own_redis.proc.pid)},
        args=["--concurrency", "1"],
    )
    m.wait_children()
    tags = [f"l{i}" for i in range(6)]
    # One limited job first: limit_acquire.lua is then in Redis's script cache, so the acquire
    # sent to the stopped server is one that runs once it resumes (not a NOSCRIPT).
    push(payload("limited", "warm"))
    wait_for(lambda: any(e[0] == "end" and e[1] == "warm" for e in events(log)), 30, what="the first limited job")
    push_many([payload("gate", "g")] + [payload("limited", tag) for tag in tags])  # gate first: one write
    pause_then_resume(own_redis, log, "g")
    wait_for(
        lambda: all(any(e[0] == "end" and e[1] == t for e in events(log)) for t in tags),
        60,
        what="every limited job done",
    )
    wait_for(lambda: settled(own_config), 30, what="nothing left listed, queued or parked")
    runs = events(log)
    assert [len(starts(runs, t)) for t in tags] == [1] * len(tags)  # nothing lost, none run twice
    assert most_at_once(runs, set(tags)) == 1  # the limit never exceeded
    _, held, _, _ = own_config.keys.limit_keys("paused")
    wait_for(lambda: own_config.redis().zcard(held) == 0, 10, what="every slot given back")
    assert "couldn't check the limits" in m.output()  # the acquire was in flight: the middle was hit
    assert m.alive()


def test_redis_stopped_during_a_result_completion(own_config, own_redis, masters, log):
    """``kept`` stops Redis as it returns: its completion (the ack with its result, written at
    once, never riding on a fetch) is the next thing its child sends, to a stopped server, and
    times out; whether that one runs once Redis resumes or a retry does, the result is kept
    once, the job never runs again, and the jobs behind it run once."""
    m = masters(module="apps.pf_pause", procs=1, env={"PF_LOG": log, "PF_REDIS_PID": str(own_redis.proc.pid)})
    m.wait_children()
    from apps import pf_pause

    # one write: enqueued one by one, the child could stop Redis before the last enqueue
    jid, *after = pf_pause.kept.enqueue_many([("k", True)] + [(f"a{i}",) for i in range(5)])
    pause_then_resume(own_redis, log, "k")
    assert cogworker.result(jid, timeout=60) == "value of k"
    assert [cogworker.result(j, timeout=60) for j in after] == [f"value of a{i}" for i in range(5)]
    wait_for(lambda: settled(own_config), 30, what="nothing left listed or queued")
    time.sleep(1.0)  # a few reconcile passes more: nothing brings it back
    runs = events(log)
    assert len(starts(runs, "k")) == 1 and not overlapping(runs, "k")
    assert [len(starts(runs, f"a{i}")) for i in range(5)] == [1] * 5
    r = own_config.redis()
    assert r.exists(own_config.keys.result(jid)) == 1
    assert cogworker.result(jid, timeout=1) == "value of k"  # still there: read twice, kept once
    assert m.alive()
