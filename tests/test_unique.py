"""Unique jobs against a real Redis: one lock per (job, queue, arguments), owned by the
jid that took it, kept while the job waits (retry, requeue) and freed when it's done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apps import basic, cron_jobs
from core_util import run_worker_until as _run_worker_until

import cogworker
from cogworker.engine.fetch.fetcher import Work
from cogworker.engine.loop import Worker
from cogworker.errors import ConfigurationError
from cogworker.fleet import recovery
from cogworker.lifecycle import unique
from cogworker.store import lua

TESTS = Path(__file__).parent


def lock_key(config, job, *args, queue="default", **kwargs):
    return config.keys.unique(unique.digest({"class": job.name, "queue": queue, "args": list(args), "kwargs": kwargs}))


def queued(config, queue="default"):
    return [json.loads(raw) for raw in config.redis().lrange(config.keys.queue(queue), 0, -1)]


def run_worker_until(predicate, timeout=10.0):
    assert _run_worker_until(predicate, timeout), "timed out"


def test_duplicate_enqueue_writes_nothing_and_returns_none(config):
    r = config.redis()
    jid = cron_jobs.u_ok.enqueue("a")
    assert isinstance(jid, str)
    assert cron_jobs.u_ok.enqueue("a") is None
    assert [j["jid"] for j in queued(config)] == [jid]
    key = lock_key(config, cron_jobs.u_ok, "a")
    assert r.get(key) == jid.encode() and 55 < r.ttl(key) <= 60
    # Other arguments, another queue: other locks.
    assert cron_jobs.u_ok.enqueue("b")
    assert cron_jobs.u_ok.options(queue="other").enqueue("a")
    assert len(queued(config)) == 2 and len(queued(config, "other")) == 1
    # Bulk and scheduled enqueues go through the same lock.
    assert cron_jobs.u_ok.enqueue_many([("a",), ("c",), ("c",)])[::2] == [None, None]
    assert cron_jobs.u_ok.enqueue_in(30, "a") is None
    assert r.zcard(config.keys.schedule) == 0


def test_digest_is_name_queue_and_canonical_arguments(config):
    base = {"class": "app.f", "queue": "q", "args": [1, {"x": 1, "y": 2}], "kwargs": {"a": 1, "b": 2}}
    same = {"class": "app.f", "queue": "q", "args": [1, {"y": 2, "x": 1}], "kwargs": {"b": 2, "a": 1}}
    assert unique.digest(base) == unique.digest(same)
    for change in ({"class": "app.g"}, {"queue": "r"}, {"args": [2, {"x": 1, "y": 2}]}, {"kwargs": {"a": 1}}):
        assert unique.digest({**base, **change}) != unique.digest(base)


def test_per_call_unique_for_and_scheduled_lock_covers_the_wait(config):
    r = config.redis()
    once = basic.add.options(unique_for=10)
    jid = once.enqueue(1, 2)
    assert jid and once.enqueue(1, 2) is None and basic.add.enqueue(1, 2)  # only the unique call is locked
    key = lock_key(config, basic.add, 1, 2)
    assert r.get(key) == jid.encode() and r.ttl(key) <= 10
    later = cron_jobs.u_ok.enqueue_in(100, "later")
    assert later and cron_jobs.u_ok.enqueue("later") is None
    assert 150 < r.ttl(lock_key(config, cron_jobs.u_ok, "later")) <= 160


def test_options_are_validated():
    with pytest.raises(ConfigurationError, match="unique_until"):
        cogworker.job(unique_for=10, unique_until="forever")(lambda: None)
    with pytest.raises(ConfigurationError, match="unique_for"):
        basic.add.options(unique_for=0)


def test_lock_held_while_running_and_freed_on_success(config):
    r = config.redis()
    jid = cron_jobs.u_ok.enqueue("s")
    run_worker_until(lambda: r.llen("test:unique") == 1)
    _, _, (holder, _) = json.loads(r.lindex("test:unique", 0))
    assert holder == jid
    run_worker_until(lambda: not r.exists(lock_key(config, cron_jobs.u_ok, "s")))
    assert cron_jobs.u_ok.enqueue("s")  # free again


def test_until_start_frees_the_lock_when_the_job_starts(config):
    r = config.redis()
    assert cron_jobs.u_start.enqueue("s")
    run_worker_until(lambda: r.llen("test:unique") == 1)
    _, _, (holder, ttl) = json.loads(r.lindex("test:unique", 0))
    assert (holder, ttl) == ("", -2)  # already gone while it ran


def test_lock_freed_when_the_job_goes_to_dead(config):
    r = config.redis()
    assert cron_jobs.u_dead.enqueue("d")
    run_worker_until(lambda: r.zcard(config.keys.dead) == 1 and not r.exists(lock_key(config, cron_jobs.u_dead, "d")))


def test_lock_extended_over_the_retry_delay(config):
    r = config.redis()
    jid = cron_jobs.u_retry.enqueue("r")
    key = lock_key(config, cron_jobs.u_retry, "r")
    assert r.ttl(key) <= 5  # unique_for alone would lapse long before the retry runs
    run_worker_until(lambda: r.zcard(config.keys.retry) == 1)
    time.sleep(0.1)
    assert r.get(key) == jid.encode() and r.ttl(key) > 100
    assert cron_jobs.u_retry.enqueue("r") is None  # still a duplicate while it waits


def test_requeue_after_a_crash_keeps_and_renews_the_lock(config):
    r = config.redis()
    jid = cron_jobs.u_ok.enqueue("c")
    key = lock_key(config, cron_jobs.u_ok, "c")
    # The job was fetched by a process that died; its lock is about to lapse.
    r.lmove(config.keys.queue("default"), config.keys.in_progress("gone:1:x"), "RIGHT", "LEFT")
    r.expire(key, 2)
    assert recovery.requeue_in_progress(config, "gone:1:x") == 1
    assert [j["jid"] for j in queued(config)] == [jid]
    assert r.get(key) == jid.encode() and r.ttl(key) > 50


@pytest.mark.parametrize("path", ["repeat_orphan", "unsettled"])
def test_lock_freed_when_buried_in_dead_by_any_path(config, path):
    r = config.redis()
    jid = cron_jobs.u_ok.enqueue("o")
    raw = r.rpop(config.keys.queue("default"))
    if path == "repeat_orphan":
        r.rpush(config.keys.repeat_orphans, raw)
        assert recovery.bury_repeat_orphans(config) == 1
    else:
        r.rpush(
            config.keys.unsettled, json.dumps({"set": config.keys.dead, "score": time.time(), "payload": raw.decode()})
        )
        assert recovery.file_unsettled(config) == 1
    assert json.loads(r.zrange(config.keys.dead, 0, -1)[0])["jid"] == jid
    assert not r.exists(lock_key(config, cron_jobs.u_ok, "o"))


def test_only_the_owner_can_delete_or_extend_the_lock(config):
    r = config.redis()
    first = cron_jobs.u_ok.enqueue("w")
    key = lock_key(config, cron_jobs.u_ok, "w")
    payload = queued(config)[0]
    assert lua.run(r, "release_lock", [key], ["someone-else"]) == 0
    assert lua.run(r, "extend_lock", [key], ["someone-else", 9999]) == 0
    assert r.get(key) == first.encode() and r.ttl(key) <= 60
    # The lock lapsed and a later duplicate took it: the first job finishing mustn't free it.
    r.delete(key)
    second = cron_jobs.u_ok.enqueue("w")
    unique.release(r, payload)
    unique.extend(r, payload, 1000)
    assert r.get(key) == second.encode() and r.ttl(key) <= 60


def test_two_processes_enqueueing_the_same_job_concurrently_make_one_job(config):
    script = (
        "import sys, time\n"
        "import cogworker\n"
        "from apps import cron_jobs\n"
        "cogworker.configure(redis_url=sys.argv[1])\n"
        "start = float(sys.argv[2])\n"
        "while time.time() < start: pass\n"
        "print(sum(1 for _ in range(300) if cron_jobs.u_ok.enqueue('race')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    start = time.time() + 1.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, config.redis_url, repr(start)],
            cwd=str(TESTS),
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    won = [int(p.communicate(timeout=30)[0]) for p in procs]
    assert sum(won) == 1
    assert len(queued(config)) == 1


@pytest.mark.parametrize("job,where", [(cron_jobs.u_dead, "dead"), (cron_jobs.u_retry, "retry")])
def test_interrupted_job_frees_or_keeps_its_lock(config, job, where):
    """Ran and failed, but the failure record couldn't be written: the interruption's
    filing treats the lock like any other filing."""
    r = config.redis()
    jid = job.enqueue("i")
    worker = Worker([("default", None)])
    raw = r.lmove(config.keys.queue("default"), config.keys.in_progress(worker.identity), "RIGHT", "LEFT")
    worker.interrupt(Work(raw, "default"), ValueError("boom"))
    key = lock_key(config, job, "i")
    if where == "dead":
        assert r.zcard(config.keys.dead) == 1 and not r.exists(key)
    else:
        assert r.zcard(config.keys.retry) == 1
        assert r.get(key) == jid.encode() and r.ttl(key) > 30  # over the 30 s interruption delay
