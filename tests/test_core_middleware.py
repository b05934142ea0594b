"""Middleware: a client chain around push, a server chain around perform; a failure to
resolve the job reaches the server chain like a perform-time error."""

from __future__ import annotations

import json

import pytest
from apps import core_jobs
from core_util import RunningWorker, queued, ran, wait_for, zentries

import cogworker


def test_client_chain_wraps_push_in_order_and_may_change_the_payload(config):
    r = config.redis()
    calls = []
    lengths = []

    @cogworker.client_middleware.add
    def outer(payload, call_next):
        calls.append(("outer in", payload["class"]))
        payload["trace_id"] = "t-1"
        jid = call_next()
        calls.append(("outer out", jid))
        return jid

    @cogworker.client_middleware.add
    def inner(payload, call_next):
        calls.append(("inner in", payload.get("trace_id")))
        lengths.append(r.llen(config.keys.queue("default")))
        return call_next()

    jid = core_jobs.record.enqueue("c")
    assert lengths == [0]  # inside the chain, nothing is written yet
    assert calls == [("outer in", "apps.core_jobs.record"), ("inner in", "t-1"), ("outer out", jid)]
    [payload] = queued(r, config)
    assert payload["trace_id"] == "t-1" and payload["jid"] == jid
    # Every path goes through the chain: scheduled, bulk, by name.
    calls.clear()
    core_jobs.record.enqueue_in(60, "s")
    core_jobs.record.enqueue_many([("m1",), ("m2",)])
    cogworker.enqueue("apps.core_jobs.record", "n")
    assert [c for c in calls if c[0] == "outer in"] == [("outer in", "apps.core_jobs.record")] * 4
    assert json.loads(r.zrange(config.keys.schedule, 0, 0)[0])["trace_id"] == "t-1"
    assert all(p["trace_id"] == "t-1" for p in queued(r, config))


def test_client_middleware_can_drop_a_push(config):
    """A dropped push of a job that isn't unique raises: its enqueue never returns None
    (as its type says); a unique job's returns None, as for a duplicate."""
    r = config.redis()

    @cogworker.client_middleware.add
    def drop_odd(payload, call_next):
        if payload["args"][0] % 2:
            return None
        return call_next()

    with pytest.raises(cogworker.EnqueueDropped, match=r"core_jobs\.record: a client middleware dropped the push"):
        core_jobs.record.enqueue(1)
    with pytest.raises(cogworker.EnqueueDropped):
        cogworker.by_name(core_jobs.record.name).enqueue_in(30, 3)
    assert isinstance(core_jobs.record.enqueue(2), str)
    jids = core_jobs.record.enqueue_many([(3,), (4,)])
    assert jids[0] is None and isinstance(jids[1], str)
    assert core_jobs.charge.enqueue(5) is None  # unique: None
    assert [p["args"] for p in queued(r, config)] == [[4], [2]]


def test_client_middleware_adding_junk_writes_nothing(config):
    @cogworker.client_middleware.add
    def junk(payload, call_next):
        payload["obj"] = object()
        return call_next()

    with pytest.raises(TypeError):
        core_jobs.record.enqueue("x")
    assert config.redis().dbsize() == 0


def test_server_chain_wraps_perform(config):
    r = config.redis()
    calls = []

    @cogworker.server_middleware.add
    def outer(job, payload, queue, call_next):
        calls.append(("outer", job.name, payload["args"], queue))
        try:
            return call_next()
        finally:
            calls.append(("outer done", ran(r)))

    @cogworker.server_middleware.add
    def inner(job, payload, queue, call_next):
        calls.append(("inner", ran(r)))
        return call_next()

    core_jobs.record.options(queue="low").enqueue("s")
    with RunningWorker(queues=[("low", None)]):
        assert wait_for(lambda: len(calls) == 3)
    assert calls == [("outer", "apps.core_jobs.record", ["s"], "low"), ("inner", []), ("outer done", ["record:s"])]


def test_server_middleware_sees_and_may_swallow_errors(config):
    r = config.redis()
    seen = []

    @cogworker.server_middleware.add
    def swallow(job, payload, queue, call_next):
        try:
            return call_next()
        except ValueError as exc:
            seen.append(str(exc))
            if payload["args"] == ["swallowed"]:
                return None
            raise

    core_jobs.fail_no_retry.enqueue("swallowed")
    core_jobs.fail_no_retry.enqueue("raised")
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 2 and r.zcard(config.keys.dead) == 1)
    assert seen == ["no retries swallowed", "no retries raised"]
    assert [e["args"] for e, _ in zentries(r, config.keys.dead)] == [["raised"]]


def test_server_middleware_can_skip_the_job(config):
    r = config.redis()

    @cogworker.server_middleware.add
    def skip(job, payload, queue, call_next):
        return None

    core_jobs.record.enqueue("skipped")
    with RunningWorker() as w:
        assert wait_for(lambda: r.llen(config.keys.queue("default")) == 0)
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0)
    assert ran(r) == []


def test_resolution_failure_reaches_the_server_chain(config):
    r = config.redis()
    seen = []

    @cogworker.server_middleware.add
    def observe(job, payload, queue, call_next):
        try:
            return call_next()
        except BaseException as exc:
            seen.append((job, payload["class"], type(exc).__name__))
            raise

    cogworker.enqueue("apps.core_jobs.not_defined_anywhere")
    cogworker.enqueue("apps.no_such_module.job")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.retry) == 2)
    assert sorted(seen) == [
        (None, "apps.core_jobs.not_defined_anywhere", "UnknownJob"),
        (None, "apps.no_such_module.job", "UnknownJob"),
    ]


def test_a_middleware_that_raises_fails_the_job_like_any_error(config):
    r = config.redis()

    @cogworker.server_middleware.add
    def broken(job, payload, queue, call_next):
        raise RuntimeError("middleware broke")

    core_jobs.record.options(retry=0).enqueue("m")
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1)
    [(entry, _)] = zentries(r, config.keys.dead)
    assert entry["error_class"] == "RuntimeError" and entry["error_message"] == "middleware broke"
    assert ran(r) == []
