"""The prefork worker, with real forked processes and real signals against a private
redis-server: TERM, INT and a second TERM, TTIN/TTOU/HUP/TSTP, recycling by job count and
memory, hard and soft timeouts, scheduled jobs, process titles, the command line and an
old Redis. Each test checks from Redis that nothing was lost, nothing ran twice when
nothing failed, and that the master is alive with its N children. (Crashes and outages:
test_prefork_recovery.)"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from apps import pf
from prefork_harness import in_progress_total, lrange, queue_len, wait_for


def test_runs_jobs_and_stops_cleanly_on_term(own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    pf.record.enqueue_many([(f"j{i}",) for i in range(300)])
    wait_for(lambda: own_config.redis().llen("test:ran") == 300, what="300 jobs")
    assert sorted(lrange(own_config, "test:ran")) == sorted(f"j{i}" for i in range(300))
    r = own_config.redis()
    # the master beats for itself and each child
    records = [r.hgetall(k) for k in r.scan_iter(match=own_config.keys.process_prefix + "*")]
    roles = sorted(rec[b"role"].decode() for rec in records)
    assert roles == ["child", "child", "master"]
    for rec in records:
        assert {b"host", b"pid", b"role", b"queues", b"busy", b"rss", b"started_at"} <= rec.keys()
        assert float(rec[b"started_at"]) <= float(rec[b"beat_at"])
        assert int(rec[b"rss"]) > 0 or rec[b"role"] == b"child"
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    assert in_progress_total(own_config) == 0
    assert r.scard(own_config.keys.processes) == 0
    wait_for(lambda: int(r.get(own_config.keys.stats_processed) or 0) == 300, 5, what="stats flushed")


def test_term_with_job_longer_than_timeout_requeues_within_bound(own_config, masters):
    m = masters(procs=1, args=["--timeout", "2"])
    m.wait_children()
    pf.slow.enqueue("long", 30)
    wait_for(lambda: lrange(own_config, "test:started"), what="start")
    t0 = time.time()
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    assert time.time() - t0 <= 2 + 2
    assert queue_len(own_config) == 1
    assert in_progress_total(own_config) == 0
    assert json.loads(own_config.redis().lrange(own_config.keys.queue("default"), 0, -1)[0])["class"] == "apps.pf.slow"


def two_running(own_config, masters, timeout, jobs):
    """A master of 2 children (``--timeout``), both running one of the two ``slow`` jobs."""
    m = masters(procs=2, args=["--timeout", str(timeout)])
    m.wait_children()
    for tag, seconds in jobs:
        pf.slow.enqueue(tag, seconds)
    wait_for(lambda: len(lrange(own_config, "test:started")) == 2, what="both started")
    return m


def test_second_term_stops_now_with_the_same_requeueing(own_config, masters):
    m = two_running(own_config, masters, 20, [("long1", 30), ("long2", 30)])
    t0 = time.time()
    m.signal(signal.SIGTERM)
    time.sleep(0.3)
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    assert time.time() - t0 < 5  # not the 20 s timeout
    assert queue_len(own_config) == 2 and in_progress_total(own_config) == 0
    # handed back, not counted as orphaned: the master killed them, they didn't crash
    for raw in own_config.redis().lrange(own_config.keys.queue("default"), 0, -1):
        assert own_config.redis().get(own_config.keys.orphanings(json.loads(raw)["jid"])) is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_whole_group_same_outcome(own_config, masters, sig):
    m = two_running(own_config, masters, 3, [("short", 1), ("long", 30)])
    t0 = time.time()
    m.signal_group(sig)  # as Heroku does: every process of the dyno at once
    assert m.wait_exit(15) == 0
    assert time.time() - t0 <= 3 + 2
    assert lrange(own_config, "test:done") == ["short"]
    assert queue_len(own_config) == 1 and in_progress_total(own_config) == 0


def test_term_with_pending_failure_record_parks_it_in_unsettled(own_config, masters):
    r = own_config.redis()
    keys = own_config.keys
    # Filing the failure can't work: retry and dead hold the wrong type.
    r.set(keys.retry, "not a zset")
    r.set(keys.dead, "not a zset")
    m = masters(procs=1)
    m.wait_children()
    jid = pf.fail.enqueue("doomed")
    wait_for(lambda: lrange(own_config, "test:ran") == ["doomed"], what="job ran")
    time.sleep(0.3)
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    records = [json.loads(x) for x in r.lrange(keys.unsettled, 0, -1)]
    assert len(records) == 1 and json.loads(records[0]["payload"])["jid"] == jid
    assert in_progress_total(own_config) == 0 and queue_len(own_config) == 0
    # The next master files it once the key is usable; the job is never run again.
    r.delete(keys.retry, keys.dead)
    m2 = masters(procs=1)
    m2.wait_children()
    wait_for(lambda: r.llen(keys.unsettled) == 0, 10, what="unsettled filed")
    assert r.zcard(keys.dead) == 1
    assert json.loads(r.zrange(keys.dead, 0, -1)[0])["jid"] == jid
    time.sleep(0.5)
    assert lrange(own_config, "test:ran") == ["doomed"]


def test_ttin_ttou_hup_tstp(own_config, masters):
    m = masters(procs=2)
    first = m.wait_children(2)
    m.signal(signal.SIGTTIN)
    m.wait_children(3)
    m.signal(signal.SIGTTOU)
    m.wait_children(2)
    before = m.child_pids()
    m.signal(signal.SIGHUP)

    def replaced():
        now = m.child_pids()
        return len(now) == 2 and not (now & before)

    wait_for(replaced, 20, what="all children replaced")
    assert not (m.child_pids() & first)
    # TSTP: quiet — running jobs finish, nothing new is fetched
    pf.slow.enqueue("running", 1)
    wait_for(lambda: lrange(own_config, "test:started"), what="start")
    m.signal(signal.SIGTSTP)
    time.sleep(0.3)
    pf.record.enqueue("after-quiet")
    wait_for(lambda: lrange(own_config, "test:done") == ["running"], what="running job finished")
    time.sleep(1.5)
    assert lrange(own_config, "test:ran") == []
    assert queue_len(own_config) == 1
    assert m.alive() and len(m.children()) == 2


def test_max_jobs_recycles_children(own_config, masters):
    m = masters(procs=1, args=["--max-jobs", "5"])
    first = m.wait_children(1)
    pf.record.enqueue_many([(f"j{i}",) for i in range(12)])
    wait_for(lambda: own_config.redis().llen("test:ran") == 12, what="12 jobs")
    assert sorted(lrange(own_config, "test:ran")) == sorted(f"j{i}" for i in range(12))
    wait_for(lambda: (lambda now: len(now) == 1 and not (now & first))(m.child_pids()), what="replaced child")
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")


def test_max_memory_recycles_child_after_its_job(own_config, masters):
    m = masters(procs=1, args=["--max-memory", "150"])
    first = m.wait_children(1)
    pf.hog.enqueue("big", 200)
    wait_for(lambda: own_config.redis().llen("test:ran") == 1, what="hog ran")
    wait_for(lambda: (lambda now: len(now) == 1 and not (now & first))(m.child_pids()), 15, what="replaced child")
    pf.record.enqueue("after")
    wait_for(lambda: "after" in lrange(own_config, "test:ran"), what="new child works")
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")


def test_hard_timeout_kills_child_and_files_failure(own_config, masters):
    m = masters(procs=1)
    first = m.wait_children(1)
    jid = pf.stubborn.enqueue("stuck")
    r = own_config.redis()
    wait_for(lambda: r.zcard(own_config.keys.dead) == 1, 20, what="timed-out job filed")
    entry = json.loads(r.zrange(own_config.keys.dead, 0, -1)[0])
    assert entry["jid"] == jid and entry["error_class"] == "cogworker.JobTimeout"
    assert lrange(own_config, "test:soft_timeout") == ["stuck"]  # the soft timeout came first
    wait_for(lambda: (lambda now: len(now) == 1 and not (now & first))(m.child_pids()), what="replaced child")
    assert in_progress_total(own_config) == 0 and queue_len(own_config) == 0
    assert len(lrange(own_config, "test:started")) == 1  # filed as failed, not orphaned and re-run
    wait_for(lambda: int(r.get(own_config.keys.stats_failed) or 0) == 1, 5, what="failure counted")


def test_soft_timeout_raises_job_timeout(own_config, masters):
    m = masters(procs=1)
    m.wait_children(1)
    jid = pf.overrun.enqueue("slow")
    r = own_config.redis()
    wait_for(lambda: r.zcard(own_config.keys.dead) == 1, 10, what="failed job")
    entry = json.loads(r.zrange(own_config.keys.dead, 0, -1)[0])
    assert entry["jid"] == jid and entry["error_class"] == "cogworker.JobTimeout"
    assert m.alive() and len(m.children()) == 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["apps.no_such_module"], "can't import 'apps.no_such_module'"),
        (["apps.pf_importerror"], "this app module is broken"),
        (["--procs", "0", "apps.pf"], "--procs"),
        (["--bogus", "apps.pf"], "unrecognized arguments"),
        (["-q", "default,x", "apps.pf"], "weight"),
        (["-q", "a,1", "-q", "b", "apps.pf"], "weight"),
        (["--redis-url", "http://nope", "apps.pf"], "Redis URL"),
        (["--redis-url", "redis://localhost:99999", "apps.pf"], "Redis URL"),
    ],
)
def test_bad_command_line_gets_one_clear_line(args, message):
    from prefork_harness import run_cli

    result = run_cli(args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_scheduled_and_retried_jobs_run_under_prefork(own_config, masters):
    m = masters(procs=1)
    m.wait_children(1)
    pf.record.enqueue_in(1, "later")
    pf.record.enqueue_at(time.time() - 5, "past")  # already due: straight onto the queue
    wait_for(lambda: "past" in lrange(own_config, "test:ran"), 5, what="past-due job")
    wait_for(lambda: "later" in lrange(own_config, "test:ran"), 5, what="scheduled job")
    assert own_config.redis().zcard(own_config.keys.schedule) == 0


def test_process_titles(own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    import psutil

    def title(proc):
        return " ".join(proc.cmdline()).strip()  # the title is padded to the old argv's length

    def titles():
        found = []
        for p in m.children():
            try:
                found.append(title(p))
            except psutil.Error:  # an idle child leaves at once on TERM: gone, or a zombie not yet reaped
                pass
        return sorted(found)

    assert title(psutil.Process(m.pid)) == "cogworker: master apps.pf [2 procs]"
    wait_for(lambda: titles() == ["cogworker: child 0 idle", "cogworker: child 1 idle"], 5, what="idle titles")
    pf.slow.enqueue("titled", 2)
    wait_for(lambda: any("busy apps.pf.slow jid=" in t for t in titles()), 5, what="busy title")
    m.signal(signal.SIGTERM)
    wait_for(lambda: any("stopping" in t for t in titles()), 5, what="stopping title")
    assert m.wait_exit(15) == 0


def test_old_redis_stops_the_master_at_boot_with_one_line(own_redis, own_config):
    import subprocess
    import sys

    from core_util import old_redis_code
    from prefork_harness import TESTS

    pf.record.enqueue("never")
    code = old_redis_code("cogworker.prefork.cli")
    result = subprocess.run(
        [sys.executable, "-c", code, "--procs", "1", "--redis-url", own_redis.url, "apps.pf"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(TESTS),
        env={**os.environ, "PYTHONPATH": str(TESTS)},
    )
    assert result.returncode != 0
    assert "6.0.9" in result.stderr and "6.2" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("cogworker-prefork:")
    assert queue_len(own_config) == 1  # nothing was fetched
