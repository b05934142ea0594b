"""A batch under faults, with real prefork masters, real signals and a private Redis: 500
jobs over 4 children, children SIGKILLed at random while they run them, the master
SIGKILLed once (its children finish and hand back; a second master takes over, and
recovers the list of a child killed while its master was frozen, once the orphan
threshold of 6 s fences it), Redis paused (SIGSTOP) for 5 s. Every run is logged to a
file (apps/batchjobs.py; Redis is paused): on_complete and on_success each start exactly
once, after every job's last end."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict

import psutil
from apps.pf_faults import events
from prefork_harness import in_progress_total, queue_len, wait_for

import cogworker
from cogworker import api

N = 500
KILLS = 6  # children SIGKILLed, over both masters


def _ended(log: str) -> set[str]:
    return {tag for event, tag, _, _ in events(log) if event == "end"}


def _kill_a_child(master, log: str, killed: list[int]) -> None:
    """SIGKILLs one of ``master``'s children, at random, while jobs are still left to run
    (never once the last ones run: a callback killed would run again)."""
    if len(_ended(log)) > N - 40:
        return
    pids = sorted(master.child_pids())
    if pids:
        victim = random.choice(pids)
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)


def _runs(log: str) -> dict[str, list[tuple[float, float | None]]]:
    started: dict[tuple[str, int], float] = {}
    found: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for event, tag, pid, at in events(log):
        if event in ("start", "cb-start"):
            started[(tag.split("@")[0], pid)] = at
        elif event in ("end", "cb-end"):
            found[tag].append((started.pop((tag, pid)), at))
    for (tag, _), at in started.items():
        found[tag].append((at, None))  # its child was killed mid-run
    return found


def test_a_batch_fires_its_callbacks_once_after_its_last_job_through_kills_and_a_stall(
    own_redis, own_config, masters, tmp_path
):
    log = str(tmp_path / "runs.log")
    env = {"PF_LOG": log, "BATCH_FENCE": "1"}  # a job left on the dead master's lists: recovered in 6 s
    random.seed(os.getpid())
    killed: list[int] = []
    m1 = masters(module="apps.batchjobs", procs=4, env=env)
    m1.wait_children()
    from apps import batchjobs as bj

    with cogworker.batch(
        on_success=bj.callback.s("success"),
        on_complete=bj.callback.s("complete"),
        on_death=bj.callback.s("death"),
        description="faults",
    ) as b:
        bj.work.enqueue_many([((f"j{i}", 0.04), {}) for i in range(N)])
    for _ in range(2):
        time.sleep(0.4)
        _kill_a_child(m1, log, killed)
    time.sleep(0.4)
    children = m1.child_pids()
    m1.signal(signal.SIGSTOP)  # frozen: it can't requeue the list of the child killed next
    _kill_a_child(m1, log, killed)
    m1.signal(signal.SIGKILL)  # its other children finish their jobs and hand back the rest
    wait_for(
        lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in children),
        20,
        what="the first master's children gone",
    )
    m2 = masters(module="apps.batchjobs", procs=4, env=env)
    m2.wait_children()
    time.sleep(0.5)
    _kill_a_child(m2, log, killed)
    own_redis.pause()
    time.sleep(5.0)
    own_redis.resume()
    for _ in range(KILLS - 4):
        time.sleep(0.4)
        _kill_a_child(m2, log, killed)
    callbacks = lambda: [tag for event, tag, _, _ in events(log) if event == "cb-start"]  # noqa: E731
    wait_for(lambda: len(callbacks()) >= 2, 90, what="the callbacks")
    wait_for(lambda: queue_len(own_config) == 0 and in_progress_total(own_config) == 0, 30, what="all settled")
    time.sleep(1.0)  # a second firing would show by now
    assert sorted(tag.split("@")[0] for tag in callbacks()) == ["complete", "success"]
    assert len(killed) >= 4, killed
    _check_runs(log, killed)
    info = api.batch(b.bid)
    assert (info.total, info.pending, info.succeeded, info.failed) == (N, 0, N, 0)
    assert info.callbacks["on_death"]["fired_at"] is None
    assert info.done_at is not None and info.done_at <= info.callbacks["on_complete"]["fired_at"]
    # The second master recovered the jobs of the child killed while the first was frozen.
    assert "left in progress by process" in m2.output() and "(fenced)" in m2.output()
    assert m2.alive()


def _check_runs(log: str, killed: list[int]) -> None:
    """No job lost; the callbacks after every job's last end; no job ran twice at once."""
    found = _runs(log)
    jobs = {tag: each for tag, each in found.items() if tag.startswith("j")}
    assert sorted(jobs) == sorted(f"j{i}" for i in range(N))  # none lost
    assert all(any(end is not None for _, end in each) for each in jobs.values())  # each ended once at least
    cut = [tag for tag, each in jobs.items() if any(end is None for _, end in each)]
    print(f"kills {len(killed)}, runs cut short {len(cut)}, runs {sum(len(e) for e in jobs.values())}")
    assert cut  # the kills did hit jobs mid-run (each ran again)
    last_end = max(end for each in jobs.values() for _, end in each if end is not None)
    first_callback = min(start for tag in ("complete", "success") for start, _ in found[tag])
    assert last_end < first_callback  # never before the last job settled
    for tag, each in jobs.items():  # finished runs of one job never overlap
        spans = sorted((s, e) for s, e in each if e is not None)
        assert all(spans[i + 1][0] >= spans[i][1] for i in range(len(spans) - 1)), (tag, each)
