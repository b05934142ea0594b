"""wait_replicas (docs/architecture.md#replication): with a real replica, every kind of
enqueue returns only once the replica holds the job; with the replica SIGSTOPped, each
raises NotReplicated (one line) within wait_timeout, while wait_replicas=0 writes as
before; a prefork worker with COGWORKER_WAIT_REPLICAS=1 starts nothing while its moves
can't be replicated, logs it as an outage, and runs every job exactly once after."""

from __future__ import annotations

import asyncio
import time

import pytest
from apps import sentinel_app
from prefork_harness import Master, wait_for
from sentinel_util import runs, sentinel_config, sentinels  # noqa: F401 (fixtures)

import cogworker
from cogworker.client import aio

WAIT = {"wait_replicas": 1, "wait_timeout": 0.3}


def _kinds():
    """Every path an enqueue takes (client/enqueue.py): push.lua, the backlogged LPUSH, the
    large job's pipeline, a scheduled job, a unique job's script, the bulk pipeline."""
    big = "x" * 5000
    return {
        "small": lambda tag: sentinel_app.logged.enqueue(tag),
        "large": lambda tag: sentinel_app.logged.options(queue="big").enqueue(big + tag),
        "scheduled": lambda tag: sentinel_app.logged.enqueue_in(60, tag),
        "unique": lambda tag: sentinel_app.logged.options(unique_for=60).enqueue(tag),
        "bulk": lambda tag: all(sentinel_app.logged.enqueue_many([(tag,), (tag + "b",)])),
    }


@pytest.fixture
def logged(tmp_path, monkeypatch):
    log = tmp_path / "runs.log"
    monkeypatch.setenv("COGWORKER_TEST_LOG", str(log))
    return log


def test_every_enqueue_waits_for_the_replica(sentinels, sentinel_config, logged):  # noqa: F811
    cogworker.configure(**WAIT)
    replica = sentinels.replica.client()
    for kind, enqueue in _kinds().items():
        assert enqueue(kind), kind
    jid = asyncio.run(_async(f"async-{time.time()}"))
    assert jid
    # Returned only once the replica held it: it is there, with no wait of ours.
    queued = replica.lrange("cogworker:queue:default", 0, -1) + replica.lrange("cogworker:queue:big", 0, -1)
    text = b"".join(queued).decode()
    for kind in ("small", "large", "unique", "bulk", "bulkb"):
        assert f'"{kind}"' in text or f'{kind}"' in text, kind
    assert replica.zcard("cogworker:schedule") == 1
    gid = cogworker.group([sentinel_app.logged.s("grouped")]).enqueue()
    assert replica.hget(f"cogworker:group:{{{gid}}}", "n") == b"1"  # the group's record too
    assert replica.ttl(f"cogworker:group:{{{gid}}}") > 0


async def _async(tag):
    try:
        await sentinel_app.logged.options(unique_for=60).enqueue_async(tag + "u")
        return await sentinel_app.logged.enqueue_async(tag)
    finally:
        await aio.aclose()


async def _async_raises(tag):
    try:
        with pytest.raises(cogworker.NotReplicated):
            await sentinel_app.logged.enqueue_async(tag)
        with pytest.raises(cogworker.NotReplicated):
            await sentinel_app.logged.options(unique_for=60).enqueue_async(tag + "u")
    finally:
        await aio.aclose()


def test_without_the_replica_every_enqueue_raises_not_replicated(sentinels, sentinel_config, logged):  # noqa: F811
    replica = sentinels.replica
    sentinel_app.logged.enqueue("warm")  # the backlog path next: a queue with jobs waiting
    replica.pause()
    try:
        cogworker.configure(wait_replicas=0)
        assert sentinel_app.logged.enqueue("unwaited")  # off: writes as before
        cogworker.configure(**WAIT)
        for kind, enqueue in _kinds().items():
            started = time.monotonic()
            with pytest.raises(cogworker.NotReplicated) as caught:
                enqueue(f"{kind}-lost")
            assert time.monotonic() - started < 10, kind  # bounded by wait_timeout, not hung
            message = str(caught.value)
            assert "0 of the 1 replica(s)" in message and "\n" not in message, kind
            assert isinstance(caught.value, cogworker.store.ConnectionError)  # an outage to every caller
        asyncio.run(_async_raises("async-lost"))
    finally:
        replica.resume()
    cogworker.configure(**WAIT)
    assert sentinel_app.logged.enqueue("back")  # the replica caught up: fine again


def test_wait_settings_are_checked():
    for bad in (
        {"wait_replicas": -1},
        {"wait_replicas": "1"},
        {"wait_replicas": True},
        {"wait_timeout": 0},
        {"wait_timeout": "x"},
    ):
        with pytest.raises(cogworker.ConfigurationError) as caught:
            cogworker.Config(**bad)
        assert "\n" not in str(caught.value)


def test_wait_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("COGWORKER_WAIT_REPLICAS", "2")
    monkeypatch.setenv("COGWORKER_WAIT_TIMEOUT", "0.5")
    config = cogworker.Config()
    assert (config.wait_replicas, config.wait_timeout) == (2, 0.5)
    monkeypatch.setenv("COGWORKER_WAIT_REPLICAS", "two")
    with pytest.raises(cogworker.ConfigurationError, match="COGWORKER_WAIT_REPLICAS must be a whole number"):
        cogworker.Config()


def test_a_worker_starts_nothing_its_replica_lacks(sentinels, sentinel_config, logged):  # noqa: F811
    env = {"COGWORKER_TEST_LOG": str(logged), "COGWORKER_WAIT_REPLICAS": "1", "COGWORKER_WAIT_TIMEOUT": "0.3"}
    master = Master(sentinels.url(), module="apps.sentinel_app", procs=2, env=env)
    try:
        sentinel_app.logged.enqueue("first")
        wait_for(lambda: runs(logged)[1]["first"] == 1, 60, 0.05, "a job with the replica up")
        sentinels.replica.pause()
        try:
            tags = [f"held-{i}" for i in range(6)]
            for tag in tags:
                sentinel_app.logged.enqueue(tag)  # wait_replicas is 0 in this process
            wait_for(lambda: "NotReplicated" in master.output(), 30, 0.1, "the outage logged")
            time.sleep(2.0)  # while the replica is stopped, no move of a job is replicated: none starts
            started, _ = runs(logged)
            assert not any(started[t] for t in tags), started
        finally:
            sentinels.replica.resume()
        wait_for(lambda: all(runs(logged)[1][t] >= 1 for t in tags), 90, 0.1, "every held job ran after")
        started, ended = runs(logged)
        assert all(started[t] == 1 and ended[t] == 1 for t in tags), (started, ended)
        assert master.alive()
    finally:
        master.stop()
