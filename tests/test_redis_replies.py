"""Redis error replies, told apart against a real redis-server: OOM (maxmemory reached)
and READONLY (the server became a replica) are outages (logged once, backed off, every
job left where it is); WRONGTYPE stays a bad key (test_core_bad_input)."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
import redis
from apps import core_jobs
from core_util import RunningWorker, wait_for
from prefork_harness import wait_for as wait_until
from redis_server import RedisServer

from cogworker.fleet.poller import Poller
from cogworker.store import errors as redis_errors


@pytest.fixture(autouse=True)
def _fresh(fresh_core_jobs):
    pass


def _lines(caplog, text):
    return [rec.getMessage() for rec in caplog.records if text in rec.getMessage()]


def _out_of_memory(server, on=True):
    client = server.client()
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1 if on else 0)


def test_classify():
    assert redis_errors.classify("OOM command not allowed when used memory > 'maxmemory'.") == "oom"
    assert redis_errors.classify(redis.exceptions.OutOfMemoryError("command not allowed when used memory")) == "oom"
    assert redis_errors.classify(b"READONLY You can't write against a read only replica.") == "readonly"
    assert redis_errors.classify(redis.ReadOnlyError("You can't write against a read only replica.")) == "readonly"
    assert (
        redis_errors.classify(
            redis.ResponseError(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
            )
        )
        == "readonly"
    )
    assert redis_errors.classify("WRONGTYPE Operation against a key holding the wrong kind of value") == "wrongtype"
    assert redis_errors.classify(redis.ResponseError("ERR syntax error")) == "other"
    assert redis_errors.is_outage(redis.ConnectionError("x")) and redis_errors.is_outage(redis.ReadOnlyError("x"))
    assert not redis_errors.is_outage(redis.ResponseError("WRONGTYPE x"))


def test_oom_is_an_outage_and_no_job_is_lost(own_config, own_redis, caplog):
    config = own_config
    for i in range(10):
        core_jobs.local.enqueue(i)
    _out_of_memory(own_redis)
    rw = RunningWorker()
    with rw as w:
        time.sleep(2.0)  # fetch after fetch refused
        assert rw.alive and core_jobs.local_started == []
        assert own_redis.client().llen(config.keys.queue("default")) == 10  # where they were
        _out_of_memory(own_redis, on=False)
        assert wait_for(lambda: len(core_jobs.local_runs) == 10)
        assert wait_for(lambda: own_redis.client().llen(config.keys.in_progress(w.identity)) == 0)
    assert Counter(core_jobs.local_runs) == Counter(range(10))
    assert len(_lines(caplog, "Redis is out of memory (OOM")) == 1
    assert _lines(caplog, "Redis is back")
    assert not _lines(caplog, "wrong type") and not _lines(caplog, "fetch failed")


def test_poller_under_oom_leaves_due_entries_in_place(own_config, own_redis, caplog):
    config = own_config
    core_jobs.local.enqueue_at(time.time() + 0.2, "due")
    time.sleep(0.3)
    _out_of_memory(own_redis)
    with pytest.raises(redis.RedisError) as info:
        Poller(config).poll()
    assert redis_errors.classify(info.value) == "oom" and redis_errors.is_outage(info.value)
    assert own_redis.client().zcard(config.keys.schedule) == 1
    assert not _lines(caplog, "wrong type")
    _out_of_memory(own_redis, on=False)
    assert Poller(config).poll() == 1


def test_master_logs_oom_once_and_recovers(own_redis, own_config, masters):
    from apps import pf

    config = own_config
    master = masters(procs=1)
    master.wait_children()
    wait_until(lambda: "children on queues" in master.output(), what="the master's boot")
    time.sleep(0.5)
    _out_of_memory(own_redis)
    time.sleep(6.5)  # past a heartbeat (5 s), a stats flush and a recovery pass
    _out_of_memory(own_redis, on=False)
    for i in range(5):
        pf.record.enqueue(i)
    wait_until(lambda: config.redis().llen("test:ran") == 5, what="the jobs")
    out = master.output()
    assert out.count("master: Redis is out of memory") == 1, out
    assert "master: Redis is back" in out, out
    assert "heartbeat failed" not in out and "wrong type" not in out, out
    assert master.alive()


class _Failover:
    """The worker's server (``primary``) steps down: a second server, synced from it,
    becomes the primary and ``primary`` its replica (READONLY to the worker) with the same
    data; then ``primary`` takes over again. Writes are paused over the switch, so no
    write lands on one side only."""

    def __init__(self, primary: RedisServer) -> None:
        self.primary = primary
        self.other = RedisServer().start()
        self.other.client().replicaof("127.0.0.1", primary.port)
        wait_until(
            lambda: self.other.client().info("replication")["master_link_status"] == "up", what="the replica's sync"
        )

    def step_down(self) -> None:
        a, b = self.primary.client(), self.other.client()
        a.execute_command("CLIENT", "PAUSE", 10000, "WRITE")
        wait_until(
            lambda: b.info("replication")["slave_repl_offset"] == a.info("replication")["master_repl_offset"],
            what="the replica to catch up",
        )
        b.replicaof("NO", "ONE")
        a.replicaof("127.0.0.1", self.other.port)
        a.execute_command("CLIENT", "UNPAUSE")
        wait_until(lambda: a.info("replication")["master_link_status"] == "up", what="the step-down")

    def take_over(self) -> None:
        self.primary.client().replicaof("NO", "ONE")

    def cleanup(self) -> None:
        self.other.cleanup()


def test_readonly_after_failover_reconnects_and_nothing_is_lost(own_config, own_redis, caplog):
    caplog.set_level(logging.INFO, logger="cogworker")
    config = own_config
    failover = _Failover(own_redis)
    try:
        n = 40
        for i in range(n):
            core_jobs.local.enqueue(i, 0.05)
        rw = RunningWorker()
        with rw as w:
            assert wait_for(lambda: len(core_jobs.local_runs) >= 5)
            before = config.redis().client_id()  # one of the worker's pooled connections
            failover.step_down()
            time.sleep(1.5)
            stalled = len(core_jobs.local_started)
            time.sleep(0.5)
            assert len(core_jobs.local_started) == stalled  # no job starts on a replica
            assert _lines(caplog, "Redis is read-only (READONLY")
            failover.take_over()
            assert wait_for(lambda: len(core_jobs.local_runs) == n, timeout=20)
            r = config.redis()
            assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0 and not w.pending.items)
            assert rw.alive
            # Every connection of the worker's from before the failover was dropped.
            assert before not in {c["id"] for c in own_redis.client().client_list()}
        assert Counter(core_jobs.local_runs) == Counter(range(n))
        assert Counter(core_jobs.local_started) == Counter(range(n))
        assert len(_lines(caplog, "Redis is read-only (READONLY")) == 1
        assert _lines(caplog, "Redis is back")
        assert not _lines(caplog, "wrong type") and not _lines(caplog, "fetch failed")
    finally:
        failover.cleanup()
