"""The prefork worker, with real forked processes and real signals against a private
redis-server. Each test checks from Redis that nothing was lost, nothing ran twice when
nothing failed, and that the master is alive with its N children."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from apps import pf
from prefork_harness import in_progress_total, lrange, queue_len, wait_for


def alive(pid):
    """Running (not gone, not a zombie); a process that vanishes while we look is gone."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


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


def test_sigkill_child_mid_job_requeues_at_once(own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    jid = pf.slow.enqueue("victim", 1.5)
    started = wait_for(lambda: lrange(own_config, "test:started"), what="job start")
    pid = int(started[0].split(":")[1])
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    again = wait_for(lambda: len(lrange(own_config, "test:started")) == 2 and lrange(own_config, "test:started"),
                     what="job running again")
    second_pid, second_start = int(again[1].split(":")[1]), float(again[1].split(":")[2])
    assert second_pid != pid
    # The promise is "within a second"; the bench measures it. Here: well within the
    # 60 s orphan threshold, i.e. at once, not by orphan recovery.
    assert second_start - killed_at < 5
    wait_for(lambda: lrange(own_config, "test:done") == ["victim"], what="job done")
    m.wait_children(2)
    assert m.alive()
    # it counted one orphaning, cleared by the ack once it finished
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert own_config.redis().get(own_config.keys.orphanings(jid)) is None
    assert queue_len(own_config) == 0


def test_job_that_kills_its_process_ends_dead_as_process_died(own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    jid = pf.suicide.enqueue("killer")
    pf.record.enqueue_many([(f"ok{i}",) for i in range(50)])
    r = own_config.redis()
    wait_for(lambda: r.zcard(own_config.keys.dead) == 1, 30, what="job in dead")
    entry = json.loads(r.zrange(own_config.keys.dead, 0, -1)[0])
    assert entry["jid"] == jid
    assert entry["error_class"] == "cogworker.ProcessDied"
    # orphaned more than max_orphanings (3) times: it ran 4 times, then no more
    assert len(lrange(own_config, "test:started")) == 4
    wait_for(lambda: r.llen("test:ran") == 50, what="other jobs")
    # (the last job's ack rides on its child's next fetch: a moment later)
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert queue_len(own_config) == 0
    m.wait_children(2)
    assert m.alive()


def test_sigkill_master_children_finish_and_second_master_recovers(own_config, masters):
    m = masters(procs=2, args=["--timeout", "2"])
    m.wait_children()
    children = m.child_pids()
    pf.slow.enqueue("short", 0.5)
    pf.slow.enqueue("long", 30)
    wait_for(lambda: len(lrange(own_config, "test:started")) == 2, what="both started")
    m.signal(signal.SIGKILL)
    # children notice, stop fetching, finish the short job, hand back the long one
    wait_for(lambda: not any(alive(p) for p in children), 15, what="children exit")
    assert lrange(own_config, "test:done") == ["short"]
    assert queue_len(own_config) == 1  # the long one, handed back
    assert in_progress_total(own_config) == 0
    m2 = masters(procs=2)
    m2.wait_children()
    wait_for(lambda: len(lrange(own_config, "test:started")) == 3, what="long job again")
    m2.signal(signal.SIGKILL)


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


def test_second_term_stops_now_with_the_same_requeueing(own_config, masters):
    m = masters(procs=2, args=["--timeout", "20"])
    m.wait_children()
    pf.slow.enqueue("long1", 30)
    pf.slow.enqueue("long2", 30)
    wait_for(lambda: len(lrange(own_config, "test:started")) == 2, what="both started")
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
    m = masters(procs=2, args=["--timeout", "3"])
    m.wait_children()
    pf.slow.enqueue("short", 1)
    pf.slow.enqueue("long", 30)
    wait_for(lambda: len(lrange(own_config, "test:started")) == 2, what="both started")
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


def test_redis_paused_mid_run_all_jobs_exactly_once(own_redis, own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    pf.record.enqueue_many([(f"a{i}",) for i in range(2000)])
    wait_for(lambda: own_config.redis().llen("test:ran") > 200, what="some progress")
    own_redis.pause()
    time.sleep(10)
    own_redis.resume()
    wait_for(lambda: own_config.redis().llen("test:ran") >= 2000, 60, what="all jobs")
    time.sleep(1)
    ran = lrange(own_config, "test:ran")
    assert sorted(ran) == sorted(f"a{i}" for i in range(2000))  # each exactly once
    wait_for(lambda: in_progress_total(own_config) == 0, 10, what="in-progress drained")
    assert m.alive() and len(m.children()) == 2


def test_redis_stopped_then_back(own_redis, own_config, masters):
    m = masters(procs=2)
    m.wait_children()
    own_redis.kill()
    time.sleep(3)
    assert m.alive() and len(m.children()) == 2  # nothing crashed, no fork loop
    own_redis.start()
    pf.record.enqueue_many([(f"b{i}",) for i in range(100)])
    wait_for(lambda: own_config.redis().llen("test:ran") == 100, 30, what="work resumes")
    out = m.output()
    assert out.count("Redis unavailable") <= 3  # once per process per outage, not per attempt


def test_fleet_of_two_masters_runs_each_job_exactly_once(own_config, masters):
    m1, m2 = masters(procs=2), masters(procs=2)
    m1.wait_children()
    m2.wait_children()
    pf.record.enqueue_many([(f"f{i}",) for i in range(5000)])
    wait_for(lambda: own_config.redis().llen("test:ran") == 5000, 60, what="5000 jobs")
    time.sleep(0.5)
    ran = lrange(own_config, "test:ran")
    assert len(ran) == 5000 and len(set(ran)) == 5000
    assert m1.alive() and m2.alive()


def test_children_dying_at_boot_back_off_instead_of_fork_looping(own_config, masters):
    m = masters(module="apps.pf_bootcrash", procs=2)
    time.sleep(4)
    assert m.alive()
    out = m.output()
    forks = out.count("died (exit 3)")
    assert 2 <= forks <= 12, out
    assert "die before their first fetch" in out


@pytest.mark.parametrize("args,message", [
    (["apps.no_such_module"], "can't import 'apps.no_such_module'"),
    (["apps.pf_importerror"], "this app module is broken"),
    (["--procs", "0", "apps.pf"], "--procs"),
    (["--bogus", "apps.pf"], "unrecognized arguments"),
    (["-q", "default,x", "apps.pf"], "weight"),
    (["-q", "a,1", "-q", "b", "apps.pf"], "weight"),
    (["--redis-url", "http://nope", "apps.pf"], "Redis URL"),
    (["--redis-url", "redis://localhost:99999", "apps.pf"], "Redis URL"),
])
def test_bad_command_line_gets_one_clear_line(args, message):
    from prefork_harness import run_cli

    result = run_cli(args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_boot_recovers_other_hosts_dead_processes_but_not_live_ones(own_config, masters):
    """A process is dead once a master has watched its beat stay unchanged for the
    threshold (6 s in apps.fence_app), however old that beat was when first seen."""
    r = own_config.redis()
    keys = own_config.keys
    now = time.time()

    def job(tag):
        return json.dumps({"class": "apps.pf.record", "args": [tag], "kwargs": {}, "jid": f"jid-{tag}",
                           "queue": "default", "retry": 25, "created_at": now, "enqueued_at": now})

    # A process dead for long (registered, last beat 5 min ago)
    r.lpush(keys.in_progress("otherhost:1:dead"), job("dead1"), job("dead2"))
    r.sadd(keys.in_progress_identities, "otherhost:1:dead")
    r.hset(keys.last_beat, "otherhost:1:dead", now - 300)
    # A list nobody registered (from before the registry): found by the boot SCAN
    r.lpush(keys.in_progress("otherhost:2:unregistered"), job("scanned"))
    # A live process on another host: its job must not run twice
    r.lpush(keys.in_progress("otherhost:3:alive"), job("alive"))
    r.sadd(keys.in_progress_identities, "otherhost:3:alive")
    r.hset(keys.last_beat, "otherhost:3:alive", now)
    r.hset(keys.process("otherhost:3:alive"), "pid", 3)
    # A dead process that missed only a few beats (last beat 10 s ago, key expired)
    r.lpush(keys.in_progress("otherhost:4:recent"), job("recent"))
    r.sadd(keys.in_progress_identities, "otherhost:4:recent")
    r.hset(keys.last_beat, "otherhost:4:recent", now - 10)
    # A broken identity (its list of the wrong type) must not stop the others
    r.set(keys.in_progress("otherhost:5:broken"), "not a list")
    r.sadd(keys.in_progress_identities, "otherhost:5:broken")
    r.hset(keys.last_beat, "otherhost:5:broken", now - 300)

    m = masters(module="apps.fence_app", procs=1)
    m.wait_children(1)
    booted = time.time()
    expected = ["dead1", "dead2", "recent", "scanned"]
    wait_for(lambda: sorted(lrange(own_config, "test:ran")) == expected, 20, what="orphans recovered")
    assert time.time() - booted > 4  # watched for the threshold first, whatever the beat's age
    time.sleep(0.5)
    assert sorted(lrange(own_config, "test:ran")) == expected
    assert r.llen(keys.in_progress("otherhost:3:alive")) == 1
    assert r.exists(keys.fenced("otherhost:1:dead")) and not r.exists(keys.fenced("otherhost:3:alive"))
    # its jobs were counted as orphaned once (cleared by the ack after they ran)
    assert r.get(keys.orphanings("jid-dead1")) is None
    # a fenced identity is watched one threshold more (for late leftovers), then forgotten
    wait_for(lambda: not r.sismember(keys.in_progress_identities, "otherhost:1:dead"), 15, what="forgotten")
    assert m.alive()


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


def test_child_killed_by_an_escaping_exception_is_replaced_and_nothing_lost(own_config, masters):
    from apps import pf_escape

    m = masters(module="apps.pf_escape", procs=2, env={"PF_ESCAPE": "1"})
    m.wait_children()
    pf_escape.record.enqueue_many([(f"e{i}",) for i in range(200)])
    r = own_config.redis()
    wait_for(lambda: len(set(lrange(own_config, "test:ran"))) == 200, 20, what="all jobs")
    assert int(r.get("test:blowups")) >= 2
    assert "died (exit 1)" in m.output()
    assert len(lrange(own_config, "test:ran")) == 200  # the finished job was acknowledged on the way out
    m.wait_children(2)
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert queue_len(own_config) == 0
    assert m.alive()




def test_old_redis_stops_the_master_at_boot_with_one_line(own_redis, own_config):
    import subprocess
    import sys

    from core_util import old_redis_code
    from prefork_harness import TESTS

    pf.record.enqueue("never")
    code = old_redis_code("cogworker.prefork.cli")
    result = subprocess.run([sys.executable, "-c", code, "--procs", "1", "--redis-url", own_redis.url, "apps.pf"],
                            capture_output=True, text=True, timeout=30, cwd=str(TESTS),
                            env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert result.returncode != 0
    assert "6.0.9" in result.stderr and "6.2" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("cogworker-prefork:")
    assert queue_len(own_config) == 1  # nothing was fetched
