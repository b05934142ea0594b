"""``--concurrency`` M: real prefork children with many jobs in flight, real signals.
Each job records its start (pid, time, orphanings counted so far) and its end in Redis;
every test checks that log for loss and for a job running twice at once."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

from apps import pf_async
from prefork_harness import in_progress_total, lrange, queue_len, wait_for


def starts(config):
    """[(tag, pid, time, orphanings at start)] in order."""
    out = []
    for entry in lrange(config, "test:started"):
        tag, pid, at, *rest = entry.split(":")
        out.append((tag, int(pid), float(at), int(rest[0]) if rest else 0))
    return out


def dones(config):
    return [entry.split(":")[0] for entry in lrange(config, "test:done")]


def enqueue_tracked(config, n, seconds, prefix="t"):
    jids = pf_async.tracked.enqueue_many([(f"{prefix}{i}", seconds) for i in range(n)])
    config.redis().hset("test:jids", mapping={f"{prefix}{i}": jid for i, jid in enumerate(jids)})
    return jids


def never_twice_at_once(config):
    """No tag started again while an earlier run of it was still going in a live process:
    a second start only ever follows the death of the first run's process."""
    seen: dict[str, int] = {}
    for tag, pid, _, _ in starts(config):
        if tag in seen:
            assert seen[tag] != pid, f"{tag} started twice in process {pid}"
        seen[tag] = pid


def test_a_thousand_async_jobs_on_two_children_of_fifty_each_run_once(own_config, masters):
    m = masters(procs=2, module="apps.pf_async", args=("--concurrency", "50"))
    m.wait_children()
    pf_async.a_sleep.enqueue_many([(f"s{i}", 0.2) for i in range(1000)])
    wait_for(lambda: own_config.redis().llen("test:done") == 1000, timeout=60, what="1000 jobs")
    started = Counter(entry.split(":")[0] for entry in lrange(own_config, "test:started"))
    assert started == Counter(f"s{i}" for i in range(1000))  # each once, none lost
    assert Counter(dones(own_config)) == started
    assert len({int(entry.split(":")[1]) for entry in lrange(own_config, "test:started")}) == 2  # both children
    wait_for(lambda: in_progress_total(own_config) == 0, what="all acked")
    r = own_config.redis()
    assert r.zcard(own_config.keys.retry) == 0 and r.zcard(own_config.keys.dead) == 0
    wait_for(lambda: int(r.get(own_config.keys.stats_processed) or 0) == 1000, what="counted")


def test_sigkill_with_fifty_in_flight_requeues_each_counted_once(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "50"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 60, 1.5)
    wait_for(lambda: len(starts(own_config)) == 50, what="50 in flight")
    assert queue_len(own_config) == 10, m.output()  # no hoarding: nothing fetched beyond the free places
    assert m.child_pids() == {pid}, m.output()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(set(dones(own_config))) == 60, timeout=30, what="all 60 done")
    first = [s for s in starts(own_config) if s[1] == pid]
    again = [s for s in starts(own_config) if s[1] != pid]
    killed = {tag for tag, *_ in first}
    assert len(killed) == 50
    # Each job that was running when the child died started once more, with one
    # orphaning counted; the ten never fetched ran once, with none.
    rerun = {tag: count for tag, _, _, count in again if tag in killed}
    assert rerun == {tag: 1 for tag in killed}
    assert sorted(tag for tag, *_ in again if tag not in killed) == sorted(
        f"t{i}" for i in range(60) if f"t{i}" not in killed
    )
    assert all(count == 0 for tag, _, _, count in again if tag not in killed)
    assert Counter(dones(own_config)) == Counter(f"t{i}" for i in range(60))  # each finished once
    never_twice_at_once(own_config)
    wait_for(lambda: in_progress_total(own_config) == 0, what="all acked")
    assert own_config.redis().zcard(own_config.keys.dead) == 0


def test_term_with_fifty_in_flight_finishes_them_and_leaves_the_rest(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "50", "--timeout", "15"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 80, 1.5)
    wait_for(lambda: len(starts(own_config)) == 50, what="50 in flight")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0
    started = [tag for tag, *_ in starts(own_config)]
    assert len(started) == 50 and Counter(dones(own_config)) == Counter(started)  # all finished, once
    assert queue_len(own_config) == 30 and in_progress_total(own_config) == 0  # the rest still queued
    queued = {json.loads(raw)["args"][0] for raw in own_config.redis().lrange(own_config.keys.queue("default"), 0, -1)}
    assert queued == {f"t{i}" for i in range(80)} - set(started)
    assert not own_config.redis().keys(own_config.keys.orphanings("*"))


def test_term_past_timeout_kills_and_requeues_uncounted(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "20", "--timeout", "1"))
    m.wait_children()
    enqueue_tracked(own_config, 20, 30)
    wait_for(lambda: len(starts(own_config)) == 20, what="20 in flight")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0
    assert queue_len(own_config) == 20 and in_progress_total(own_config) == 0  # all back, none lost
    assert not own_config.redis().keys(own_config.keys.orphanings("*"))  # shutdown counts nothing


def test_a_stuck_sync_job_gets_its_child_killed_and_the_others_requeued(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "4"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 2, 20)
    wait_for(lambda: len(starts(own_config)) == 2, what="2 async jobs running")
    pf_async.sync_stuck.enqueue("stuck")
    wait_for(lambda: own_config.redis().zcard(own_config.keys.dead) == 1, timeout=15, what="filed dead")
    [dead] = [json.loads(raw) for raw in own_config.redis().zrange(own_config.keys.dead, 0, -1)]
    assert dead["error_class"] == "cogworker.JobTimeout" and dead["args"] == ["stuck"]
    assert pid not in m.wait_children()
    # The async jobs were killed with it (by the master: not counted) and run again.
    wait_for(
        lambda: sorted(tag for tag, *_ in starts(own_config) if tag != "stuck") == ["t0", "t0", "t1", "t1"],
        what="the other jobs started again",
    )
    assert all(count == 0 for tag, _, _, count in starts(own_config) if tag != "stuck")


def test_tstp_then_hup_with_jobs_in_flight(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "10", "--timeout", "15"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 10, 1.0)
    wait_for(lambda: len(starts(own_config)) == 10, what="10 in flight")
    m.signal(signal.SIGTSTP)  # quiet: the running ones finish, nothing more is fetched
    enqueue_tracked(own_config, 5, 0.01, prefix="q")
    wait_for(lambda: len(dones(own_config)) == 10, what="the running ones finished")
    assert queue_len(own_config) == 5 and len(starts(own_config)) == 10
    m.signal(signal.SIGHUP)  # a fresh child (not quiet) picks the rest up
    wait_for(lambda: len(dones(own_config)) == 15, timeout=20, what="the rest ran")
    assert pid not in m.child_pids()
    assert Counter(dones(own_config)) == Counter([f"t{i}" for i in range(10)] + [f"q{i}" for i in range(5)])
    never_twice_at_once(own_config)


def test_master_sigkill_children_finish_their_jobs_in_flight(own_config, masters):
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "20", "--timeout", "10"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 30, 1.0)
    wait_for(lambda: len(starts(own_config)) == 20, what="20 in flight")
    os.kill(m.pid, signal.SIGKILL)
    wait_for(lambda: len(dones(own_config)) == 20, timeout=15, what="the 20 finished")
    import psutil

    wait_for(
        lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
        timeout=15,
        what="the orphaned child left",
    )
    assert queue_len(own_config) == 10 and in_progress_total(own_config) == 0
    assert Counter(dones(own_config)) == Counter(tag for tag, *_ in starts(own_config))


def test_sigkill_under_load_loses_nothing_and_reruns_only_what_the_dead_child_held(own_config, masters):
    """Jobs start and finish all the time (acks in flight, places refilled) when the child
    is killed: every job still finishes, and only jobs the dead child had started run again."""
    m = masters(procs=1, module="apps.pf_async", args=("--concurrency", "50"))
    [pid] = m.wait_children()
    enqueue_tracked(own_config, 600, 0.05)
    wait_for(lambda: len(dones(own_config)) >= 200, what="200 done")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: len(set(dones(own_config))) == 600, timeout=30, what="all 600 done")
    by_dead = {tag for tag, p, _, _ in starts(own_config) if p == pid}
    started_twice = {tag for tag, n in Counter(tag for tag, *_ in starts(own_config)).items() if n > 1}
    assert started_twice <= by_dead and len(started_twice) <= 50  # at most the places it had
    assert all(n <= 2 for n in Counter(tag for tag, *_ in starts(own_config)).values())
    never_twice_at_once(own_config)
    wait_for(lambda: in_progress_total(own_config) == 0, what="all acked")
    assert own_config.redis().zcard(own_config.keys.dead) == 0
