"""Fault F2: a stall longer than ``orphan_threshold`` must not make a live process look
dead, and a process that really was declared dead (frozen that long) must not run or
settle the jobs taken from it. Real masters, real SIGSTOPs; every job start and end is
logged to a file (so the record survives a paused Redis) and checked for loss and for
jobs run twice (apps.fence_app: threshold 6 s, beats every 0.5 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from apps import fence_app
from fence_check import check, ended, read_runs
from prefork_harness import TESTS, wait_for

THRESHOLD = fence_app.THRESHOLD
STALL = 2 * THRESHOLD


def start(masters, log, procs, **kwargs):
    return masters(module="apps.fence_app", procs=procs, env={"FENCE_LOG": str(log)}, **kwargs)


def freeze(kill, master, masters, log):
    """``master`` SIGSTOPped (``kill``: os.kill, it alone; os.killpg, its whole group) for
    STALL seconds, a third master started 2 s before its end; when the freeze began, and
    the third master."""
    frozen_at = time.time()
    kill(master.pid, signal.SIGSTOP)
    try:
        time.sleep(STALL - 2)
        third = start(masters, log, 1)
        time.sleep(frozen_at + STALL - time.time())
    finally:
        kill(master.pid, signal.SIGCONT)
    return frozen_at, third


def no_death_declared(*ms):
    for m in ms:
        out = m.output()
        assert "declared dead" not in out and "(fenced)" not in out, out[-3000:]


def test_redis_stall_longer_than_the_threshold_runs_no_job_twice(own_redis, own_config, masters, tmp_path):
    """Two masters throughout a Redis SIGSTOP of 2x the threshold; a third boots as Redis
    comes back, so its first recovery pass looks at once (the moment the red team caught)."""
    log = tmp_path / "jobs.log"
    m1, m2 = start(masters, log, 2), start(masters, log, 1)
    m1.wait_children()
    m2.wait_children()
    tags = [f"s{i}" for i in range(1500)]
    fence_app.work.enqueue_many([(t, 0.02) for t in tags])
    wait_for(lambda: ended(log) > 100, 30, what="some progress")
    own_redis.pause()
    time.sleep(STALL)
    own_redis.resume()
    m3 = start(masters, log, 1)
    wait_for(lambda: not check(log, tags).lost, 90, interval=0.5, what="every job ended")
    report = check(log, tags)
    assert report.duplicates == {}, report.summary()
    no_death_declared(m1, m2, m3)


def test_frozen_master_its_working_children_run_nothing_twice(own_config, masters, tmp_path):
    """A master SIGSTOPped for 2x the threshold while its children work on, one of them on
    a job longer than that. Another master watches throughout; a third boots late in the
    freeze (its first pass looks at once)."""
    log = tmp_path / "jobs.log"
    m1 = start(masters, log, 2)
    m1.wait_children()
    fence_app.work.enqueue("long", STALL + 4)
    wait_for(lambda: "long" in read_runs(log), what="the long job started")
    assert read_runs(log)["long"][0].pid in m1.child_pids()
    m2 = start(masters, log, 1)
    m2.wait_children(1)
    tags = [f"m{i}" for i in range(800)]
    fence_app.work.enqueue_many([(t, 0.02) for t in tags])
    wait_for(lambda: ended(log) > 50, 30, what="some progress")
    frozen_at, m3 = freeze(os.kill, m1, masters, log)
    worked = {r.pid for rs in read_runs(log).values() for r in rs if r.start > frozen_at + 1}
    assert worked & m1.child_pids(), "the frozen master's children kept working"
    wait_for(lambda: not check(log, [*tags, "long"]).lost, 60, interval=0.5, what="every job ended")
    report = check(log, [*tags, "long"])
    assert report.duplicates == {}, report.summary()
    no_death_declared(m1, m2, m3)


def test_frozen_host_its_jobs_recovered_once_and_it_settles_nothing_after(own_config, masters, tmp_path):
    """A master's whole process group SIGSTOPped for 2x the threshold while another master
    works: its lists are requeued once (and it is fenced). Resumed, its children leave at
    once without acking, filing or starting anything; the only jobs run twice are those
    they were running when frozen."""
    log = tmp_path / "jobs.log"
    r = own_config.redis()
    m1, m2 = start(masters, log, 2), start(masters, log, 1)
    m1.wait_children()
    m2.wait_children(1)
    tags = [f"h{i}" for i in range(150)]
    fence_app.work.enqueue_many([(t, 0.4) for t in tags])
    wait_for(lambda: ended(log) > 6, 30, what="some progress")
    frozen = m1.child_pids()
    frozen_at, m3 = freeze(os.killpg, m1, masters, log)
    wait_for(lambda: not (m1.child_pids() & frozen), 10, what="the frozen children leave")
    wait_for(lambda: not check(log, tags).lost, 60, interval=0.5, what="every job ended")
    report = check(log, tags)
    runs = [run for rs in report.runs.values() for run in rs]
    assert not [run for run in runs if run.pid in frozen and run.start > frozen_at], "started after the freeze"
    running = {
        run.tag
        for run in runs
        if run.pid in frozen and run.start < frozen_at and (run.end is None or run.end > frozen_at - 0.25)
    }
    assert set(report.duplicates) <= running, report.summary()
    assert all(len(rs) == 2 for rs in report.duplicates.values())  # recovered once
    assert "(fenced)" in m2.output() + m3.output()
    out = m1.output()
    assert "leaving without acking or filing them" in out
    # The master learns it from its beat, refused for them ("declared dead elsewhere"), or,
    # when its first beat after the freeze times out, from the children that left first.
    assert "declared dead elsewhere" in out or "left: it was declared dead (fenced)" in out, out[-3000:]
    fenced = [k.decode() for k in r.scan_iter(match=own_config.keys.fenced_prefix + "*")]
    assert {int(k.split(":")[-2]) for k in fenced} == frozen
    m1.wait_children(2)
    assert m1.alive() and not (m1.child_pids() & frozen)


def test_fenced_child_leaves_at_once_and_is_replaced_under_a_new_identity(own_config, masters, tmp_path):
    log = tmp_path / "jobs.log"
    r = own_config.redis()
    keys = own_config.keys
    m = start(masters, log, 1)
    m.wait_children(1)
    fence_app.work.enqueue("long", 30)
    wait_for(lambda: "long" in read_runs(log), what="the job started")
    pid = read_runs(log)["long"][0].pid
    [identity] = [i.decode() for i in r.smembers(keys.in_progress_identities)]
    fenced_at = time.time()
    r.set(keys.fenced(identity), 1)  # as another master's orphan recovery would
    wait_for(lambda: pid not in m.child_pids(), 5, what="the fenced child leaves")
    assert time.time() - fenced_at < 3
    [new] = m.wait_children(1)
    assert new != pid
    out = m.output()
    assert out.count("leaving without acking or filing them") == 1
    assert "was declared dead (fenced); replacing it" in out
    # Its list wasn't requeued by anyone here: the job on it is a leftover, requeued by
    # orphan recovery once the fenced identity's beat stayed unchanged for the threshold.
    wait_for(lambda: len(read_runs(log)["long"]) == 2, THRESHOLD + 10, what="the leftover ran again")
    assert read_runs(log)["long"][1].pid == new


def test_single_process_runner_declared_dead_exits_nonzero_with_one_error_line(own_redis, own_config):
    r = own_config.redis()
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "apps.fence_app", "--redis-url", own_redis.url],
        cwd=str(TESTS),
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        fence_app.work.enqueue("busy", 30)
        wait_for(lambda: r.smembers(own_config.keys.in_progress_identities), 15, what="registered")
        wait_for(lambda: r.llen(own_config.keys.queue("default")) == 0, 15, what="job taken")
        [identity] = [i.decode() for i in r.smembers(own_config.keys.in_progress_identities)]
        fenced_at = time.time()
        r.set(own_config.keys.fenced(identity), 1)
        code = proc.wait(10)
        assert time.time() - fenced_at < 3  # at once, not after the job
        stderr = proc.stdout.read()  # the log goes to stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 75
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "declared dead" in errors[0], stderr
    assert r.llen(own_config.keys.in_progress(identity)) == 1  # not touched: someone else's to requeue


def test_a_master_reclaiming_a_killed_childs_list_fences_it(own_config, masters, tmp_path):
    log = tmp_path / "jobs.log"
    r = own_config.redis()
    m = start(masters, log, 1)
    m.wait_children(1)
    fence_app.work.enqueue("victim", 30)
    wait_for(lambda: "victim" in read_runs(log), what="the job started")
    [identity] = [i.decode() for i in r.smembers(own_config.keys.in_progress_identities)]
    os.kill(read_runs(log)["victim"][0].pid, signal.SIGKILL)
    wait_for(lambda: len(read_runs(log)["victim"]) == 2, 10, what="requeued at once")
    assert r.exists(own_config.keys.fenced(identity))
