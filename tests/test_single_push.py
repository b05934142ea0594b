"""The single enqueue's write (docs/architecture.md#enqueue): push.lua for a queue that may
be empty, HSET + LPUSH in one write (rawpipe) while it has a backlog, with status on;
what a reader, a blocked worker and a caller see after each. Real redis-server."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from apps import core_jobs

import cogworker
from cogworker import api
from cogworker.client import enqueue as client
from cogworker.client import status as status_enqueue
from cogworker.core import hooks
from cogworker.engine.fetch.fetcher import Fetcher
from cogworker.lifecycle import history
from cogworker.store import lua
from cogworker.store import pipes as rawpipe


@pytest.fixture
def config(config):
    status_enqueue._expired_enq = None  # the session's Redis was emptied: this process's memory is stale
    client._backlogged.clear()
    return cogworker.configure(status=True)


def test_every_push_is_queued_for_readers_at_once_through_both_writes(config):
    r, k = config.redis(), config.keys
    jids = [core_jobs.record.enqueue(i) for i in range(4)]  # the first by push.lua, then HSET + LPUSH
    assert k.queue("default") in client._backlogged
    assert [api.status(jid).state for jid in jids] == ["queued"] * 4
    assert r.llen(k.queue("default")) == 4 and r.xlen(k.wake) == 1


def test_a_backlogged_push_finding_its_queue_drained_names_it_and_wakes(config):
    r, k = config.redis(), config.keys
    core_jobs.record.enqueue(1)
    core_jobs.record.enqueue(2)
    r.delete(k.queue("default"), k.queues)  # drained behind this producer's back
    jid = core_jobs.record.enqueue(3)
    assert r.xlen(k.wake) == 2 and r.sismember(k.queues, "default")
    assert k.queue("default") not in client._backlogged
    assert api.status(jid).state == "queued"


def test_a_blocked_worker_wakes_at_once_for_a_push_after_a_backlog_drained(config):
    core_jobs.record.enqueue("a")
    core_jobs.record.enqueue("b")  # this producer now believes the queue backlogged
    f = Fetcher(config, "host:1:idle", [("other", None), ("default", None)], block_timeout=5.0)
    assert f.fetch() is not None and f.fetch() is not None
    pushed: list[float] = []

    def push() -> None:
        pushed.append(time.monotonic())
        core_jobs.record.enqueue("late")

    threading.Timer(0.1, push).start()  # while the next fetch blocks (about a second here)
    started, work = time.monotonic(), None
    while work is None and time.monotonic() - started < 4:
        work = f.fetch()
    assert work is not None and b"late" in work.raw
    assert time.monotonic() - pushed[0] < 0.5  # woken by the push, not at the end of its block


def test_a_status_bucket_of_the_wrong_type_loses_no_job_on_either_write(config):
    r, k = config.redis(), config.keys
    r.set(k.enq(history.hour_of(time.time())), "not a hash")
    assert core_jobs.record.enqueue(1) and core_jobs.record.enqueue(2)  # push.lua, then HSET + LPUSH
    assert r.llen(k.queue("default")) == 2


def test_a_queue_of_the_wrong_type_raises_and_leaves_the_connection_usable(config):
    r, k = config.redis(), config.keys
    core_jobs.record.enqueue(1)
    core_jobs.record.enqueue(2)
    r.delete(k.queue("default"))
    r.set(k.queue("default"), "not a list")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        core_jobs.record.enqueue(3)  # the backlogged write: HSET, then the failing LPUSH
    client._backlogged.clear()
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        core_jobs.record.enqueue(4)  # push.lua
    r.delete(k.queue("default"))
    assert r.ping() and core_jobs.record.enqueue(5)
    assert r.llen(k.queue("default")) == 1


def test_a_flushed_script_is_loaded_again_and_run_once(config):
    r, k = config.redis(), config.keys
    r.script_flush()
    jid = core_jobs.record.enqueue(1)
    assert r.llen(k.queue("default")) == 1 and api.status(jid).state == "queued"


def test_enqueued_hook_and_client_middleware_still_run_around_the_push(config):
    seen, order = [], []

    def mw(payload, call_next):
        order.append("before")
        jid = call_next()
        order.append("after")
        return jid

    cogworker.client_middleware.add(mw)
    hooks.subscribe("enqueued", seen.append)
    try:
        jid = core_jobs.record.enqueue(1)
    finally:
        cogworker.client_middleware.remove(mw)
        hooks.unsubscribe("enqueued", seen.append)
    assert order == ["before", "after"] and [e.payload["jid"] for e in seen] == [jid]


def test_rawpipe_returns_error_replies_in_place_and_reads_every_reply(config):
    r = config.redis()
    r.set("str", "x")
    replies = rawpipe.send(r, ("LPUSH", "str", "a"), ("RPUSH", "list", "b"), ("GET", "str"))
    assert isinstance(replies[0], redis.ResponseError) and replies[1:] == [1, b"x"]
    with pytest.raises(redis.ResponseError):
        rawpipe.ok(replies[0])
    assert r.get("str") == b"x"  # the connection went back clean: no reply left in it
    [missing] = rawpipe.send(r, ("EVALSHA", "0" * 40, 0))
    assert isinstance(missing, redis.exceptions.NoScriptError)
    r.script_flush()
    [unknown] = rawpipe.send(r, lua.command(r, "release_lock", ["lock"], ["jid"]))
    assert isinstance(unknown, redis.exceptions.NoScriptError)  # what _push_one loads it again on


def test_rawpipe_raises_a_connection_error_and_recovers_after(config):
    r = config.redis()
    r.client_kill_filter(_type="normal", skipme=False)  # every connection, this pool's too
    try:
        rawpipe.send(r, ("PING",))
    except redis.ConnectionError:
        pass  # the pooled connection was dead: one clear error, never a wrong reply
    assert rawpipe.send(r, ("PING",)) == [b"PONG"]
