"""Resumable long jobs (``@cogworker.iterable_job``, docs/architecture.md#iterable) under real
prefork masters and real signals. Each job start and end and each item's start and end is a
line of a log file (tests/apps/pf_iter.py): after every fault, every item has run, and none
twice (a SIGKILL: at most ``checkpoint_every`` items twice)."""

from __future__ import annotations

import collections
import json
import os
import random
import signal

import pytest
from apps.pf_iter import events
from prefork_harness import in_progress_total, queue_len, wait_for

from cogworker.client.enqueue import push
from cogworker.client.jobs import JobOptions, build_payload

ITEMS = 1000
EVERY = 20


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def env_for(log, **extra):
    return {"PF_LOG": log, "PF_ITEMS": str(ITEMS), "PF_EVERY": str(EVERY), **extra}


def enqueue(job, *args, **opts):
    return push(build_payload(f"apps.pf_iter.{job}", args, {}, JobOptions.build(**opts)))


def count(log, event, tag=None):
    """How often each item (``tag:i``) or job had ``event``."""
    return collections.Counter(t for e, t, _, _ in events(log) if e == event and (tag is None or t.startswith(tag)))


def items_done(log, tag):
    return sum(count(log, "item-end", f"{tag}:").values())


def job_starts(log, tag):
    return [(t, pid) for e, t, pid, _ in events(log) if e == "job-start" and t.startswith(f"{tag}@")]


def assert_all_once(log, tag, twice_at_most=0):
    ends = count(log, "item-end", f"{tag}:")
    assert set(ends) == {f"{tag}:{i}" for i in range(ITEMS)}, "some items never finished"
    twice = [t for t, n in ends.items() if n > 1]
    assert all(n <= 2 for n in ends.values())
    assert len(twice) <= twice_at_most, f"{len(twice)} items ran twice: {sorted(twice)[:10]}"
    assert count(log, "job-end", tag)[tag] == 1
    return twice


def checkpoint(config, jid):
    raw = config.redis().hgetall(config.keys.checkpoint(jid))
    return {k.decode(): v.decode() for k, v in raw.items()}


def assert_nothing_failed(config):
    r = config.redis()
    # The job's ack lands after its body's last line (the log's job-end): it rides on the
    # child's next fetch, a moment later.
    wait_for(lambda: in_progress_total(config) == 0, 10, interval=0.05, what="the last ack")
    assert r.zcard(config.keys.retry) == 0
    assert r.zcard(config.keys.dead) == 0


def wait_done(log, tag, timeout=60):
    wait_for(lambda: count(log, "job-end", tag)[tag] >= 1, timeout, interval=0.05, what=f"{tag} finished")


def at_random_point(log, tag, low=100, high=700):
    target = random.randint(low, high)
    wait_for(lambda: items_done(log, tag) >= target, 60, interval=0.005, what=f"{target} items of {tag}")
    return target


@pytest.mark.parametrize("job", ["walk", "awalk"])
def test_term_to_the_master_then_restart_runs_every_item_once(own_redis, own_config, masters, log, job):
    m = masters(module="apps.pf_iter", procs=2, args=("--timeout", "20"), env=env_for(log))
    m.wait_children()
    jid = enqueue(job, "t")
    at_random_point(log, "t")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(40) == 0
    out = m.output()
    assert "killed" not in out, out  # it stopped at a yield, well within --timeout
    # Back on its queue with its cursor (payload and checkpoint agree), not failed, not retried.
    listed = own_config.redis().lrange(own_config.keys.queue("default"), 0, -1)
    assert len(listed) == 1
    payload = json.loads(listed[0])
    done = items_done(log, "t")
    assert payload["iter_done"] == done and payload["iter_cursor"] == done - 1
    assert "retry_count" not in payload and "error_class" not in payload
    saved = checkpoint(own_config, jid)
    assert int(saved["done"]) == done and json.loads(saved["cursor"]) == done - 1
    assert saved["state"] == "suspended"
    assert_nothing_failed(own_config)

    m2 = masters(module="apps.pf_iter", procs=2, env=env_for(log))
    wait_done(log, "t")
    assert_all_once(log, "t")
    starts = job_starts(log, "t")
    assert [t for t, _ in starts] == ["t@None", f"t@{done - 1}"]
    assert_nothing_failed(own_config)
    wait_for(lambda: checkpoint(own_config, jid).get("state") == "finished", 10, what="the final checkpoint")
    assert checkpoint(own_config, jid)["done"] == str(ITEMS)
    assert 0 < own_config.redis().ttl(own_config.keys.checkpoint(jid)) <= own_config.status_ttl
    assert m2.alive()


def test_sigkill_of_the_child_reruns_at_most_checkpoint_every_items(own_redis, own_config, masters, log):
    m = masters(module="apps.pf_iter", procs=1, env=env_for(log))
    m.wait_children()
    jid = enqueue("walk", "k")
    at_random_point(log, "k")
    victim = job_starts(log, "k")[0][1]
    os.kill(victim, signal.SIGKILL)
    wait_done(log, "k")
    twice = assert_all_once(log, "k", twice_at_most=EVERY)
    starts = job_starts(log, "k")
    assert len(starts) == 2 and starts[1][1] != victim
    resumed_at = starts[1][0].split("@")[1]
    assert resumed_at != "None"  # from its last checkpoint, not from the start
    # Exactly the items after that checkpoint ran again, up to the one the kill hit.
    assert sorted(twice, key=lambda t: int(t.split(":")[1]))[:1] in ([], [f"k:{int(resumed_at) + 1}"])
    assert int(resumed_at) + 1 == ITEMS or (int(resumed_at) + 1) % EVERY == 0
    assert_nothing_failed(own_config)
    assert own_config.redis().get(own_config.keys.orphanings(jid)) is None  # its success cleared the count


def test_a_deploy_in_the_middle_runs_every_item_once(own_redis, own_config, masters, log):
    """The new master starts, then the old one gets TERM: the job stops at a yield in the
    old master's child and resumes in one of the new master's."""
    env = env_for(log, PF_ITEM_DELAY="0.01")  # 10 s of items: the new master boots well within them
    old = masters(module="apps.pf_iter", procs=2, env=env)
    old.wait_children()
    enqueue("walk", "d")
    at_random_point(log, "d", 50, 300)
    new = masters(module="apps.pf_iter", procs=2, env=env)
    new.wait_children()
    assert not count(log, "job-end", "d")
    old.signal(signal.SIGTERM)
    assert old.wait_exit(40) == 0
    wait_done(log, "d")
    assert_all_once(log, "d")
    starts = job_starts(log, "d")
    assert len(starts) == 2
    assert starts[1][1] in new.child_pids()
    assert_nothing_failed(own_config)


def test_max_jobs_recycling_stops_it_at_a_yield_each_time(own_redis, own_config, masters, log):
    """Its items count towards --max-jobs: a child that reached it stops the job at a
    yield, the job goes back on its queue and the next child resumes it."""
    m = masters(module="apps.pf_iter", procs=1, args=("--max-jobs", "300"), env=env_for(log))
    m.wait_children()
    enqueue("walk", "r")
    wait_done(log, "r")
    assert_all_once(log, "r")
    starts = job_starts(log, "r")
    assert [t for t, _ in starts] == ["r@None", "r@299", "r@599", "r@899"]
    assert len({pid for _, pid in starts}) == 4  # each run in a fresh child
    assert_nothing_failed(own_config)


def test_an_exception_is_a_failure_and_its_retry_resumes_where_it_stopped(own_redis, own_config, masters, log):
    m = masters(module="apps.pf_iter", procs=1, env=env_for(log))
    m.wait_children()
    jid = enqueue("flaky", "f", 437)
    wait_done(log, "f", timeout=90)  # the poller moves its retry back (backoff 0) within seconds
    ends = count(log, "item-end", "f:")
    assert set(ends) == {f"f:{i}" for i in range(ITEMS)} and set(ends.values()) == {1}
    assert count(log, "item-start", "f:")["f:437"] == 2  # the failed item, then its retry
    assert [t for t, _ in job_starts(log, "f")] == ["f@None", "f@436"]
    from cogworker import api

    attempts = wait_for(lambda: len(api.history(jid)) == 2 and api.history(jid), 10, what="its history")
    assert [a.outcome for a in attempts] == ["failed", "succeeded"]
    assert "RuntimeError" in (attempts[0].error_class or "")
    assert_nothing_failed(own_config)
    assert int(own_config.redis().get(own_config.keys.stats_failed) or 0) == 1


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTSTP])
def test_hup_and_tstp_stop_it_at_a_yield(own_redis, own_config, masters, log, sig):
    """HUP replaces the children one at a time: the job resumes in the fresh one. TSTP
    quiets the master: the job goes back on its queue and waits for another process."""
    m = masters(module="apps.pf_iter", procs=1, env=env_for(log))
    m.wait_children()
    enqueue("walk", "h")
    at_random_point(log, "h")
    m.signal(sig)
    if sig == signal.SIGTSTP:
        wait_for(lambda: queue_len(own_config) == 1, 15, what="the job back on its queue")
        done = items_done(log, "h")
        masters(module="apps.pf_iter", procs=1, env=env_for(log))
    wait_done(log, "h")
    assert_all_once(log, "h")
    starts = job_starts(log, "h")
    assert len(starts) == 2 and starts[0][1] != starts[1][1]
    if sig == signal.SIGTSTP:
        assert starts[1][0] == f"h@{done - 1}"
    assert_nothing_failed(own_config)


def test_an_async_generator_with_jobs_in_flight_stops_at_a_yield(own_redis, own_config, masters, log):
    """--concurrency 2: the job's task runs on the child's loop (no pool thread); TERM
    stops it at a yield, plain jobs beside it finish."""
    m = masters(module="apps.pf_iter", procs=1, args=("--concurrency", "2"), env=env_for(log))
    m.wait_children()
    enqueue("awalk", "a")
    at_random_point(log, "a")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(40) == 0
    done = items_done(log, "a")
    masters(module="apps.pf_iter", procs=1, args=("--concurrency", "2"), env=env_for(log))
    wait_done(log, "a")
    assert_all_once(log, "a")
    assert [t for t, _ in job_starts(log, "a")] == ["a@None", f"a@{done - 1}"]
    assert_nothing_failed(own_config)


def test_a_frozen_host_declared_dead_never_overwrites_the_newer_checkpoint(own_redis, own_config, masters, log):
    """The master running the job is SIGSTOPped (its whole group) for twice the orphan
    threshold: another master recovers the job and resumes it from its last checkpoint.
    Resumed, the stale child starts no other item (its lease ran out: it asks, and is
    told it is fenced) and never writes a checkpoint: the record's count never goes back."""
    import threading
    import time

    env = env_for(log, PF_FENCE="1", PF_ITEM_DELAY="0.01")
    m1 = masters(module="apps.pf_iter", procs=1, env=env)
    m1.wait_children()
    jid = enqueue("walk", "z")
    at_random_point(log, "z", 100, 300)
    m2 = masters(module="apps.pf_iter", procs=1, env=env)
    m2.wait_children()
    seen: list[tuple[int, str]] = []
    watching = True

    def watch() -> None:  # every value the record takes, as often as we can look
        while watching:
            saved = checkpoint(own_config, jid)
            if saved:
                seen.append((int(saved["done"]), saved["identity"]))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    frozen = m1.child_pids()
    os.killpg(m1.pid, signal.SIGSTOP)
    frozen_at = time.time()
    try:
        wait_for(lambda: len(job_starts(log, "z")) == 2, 40, what="the job recovered elsewhere")
        wait_for(lambda: items_done(log, "z") > ITEMS // 2 + 100 or count(log, "job-end", "z"), 40)
    finally:
        os.killpg(m1.pid, signal.SIGCONT)
    resumed_at = time.time()
    wait_done(log, "z")
    wait_for(lambda: not (m1.child_pids() & frozen), 10, what="the stale child leaves")
    watching = False
    watcher.join()
    counts = [done for done, _ in seen]
    assert counts == sorted(counts), "a checkpoint went back"
    assert not [e for e in events(log) if e[2] in frozen and e[0] == "item-start" and e[3] > frozen_at + 0.05]
    twice = assert_all_once(log, "z", twice_at_most=EVERY + 1)
    assert len(twice) >= 1  # the items between its last checkpoint and the freeze ran again
    assert "declared dead" in m1.output()
    assert resumed_at > frozen_at
    assert_nothing_failed(own_config)


def test_max_memory_recycling_stops_it_at_a_yield(own_redis, own_config, masters, log):
    """Every child is over a --max-memory of 1 MB: the master replaces it after its job,
    which for an iterable job means at its next yield (checked every 5 s)."""
    m = masters(module="apps.pf_iter", procs=1, args=("--max-memory", "1"), env=env_for(log, PF_ITEM_DELAY="0.008"))
    m.wait_children()
    enqueue("walk", "mem")
    wait_done(log, "mem", timeout=120)
    assert_all_once(log, "mem")
    starts = job_starts(log, "mem")
    assert len(starts) >= 2 and len({pid for _, pid in starts}) == len(starts)
    assert "--max-memory" in m.output()
    assert_nothing_failed(own_config)


def test_the_single_process_runner_stops_it_at_a_yield_on_term(own_redis, own_config, log):
    from worker_process import Process

    first = Process("cogworker.worker", "apps.pf_iter", url=own_redis.url, env=env_for(log))
    try:
        enqueue("walk", "s")
        at_random_point(log, "s")
        assert first.stop() == 0
    finally:
        first.stop()
    done = items_done(log, "s")
    assert queue_len(own_config) == 1 and in_progress_total(own_config) == 0
    second = Process("cogworker.worker", "apps.pf_iter", url=own_redis.url, env=env_for(log))
    try:
        wait_done(log, "s")
    finally:
        second.stop()
    assert_all_once(log, "s")
    assert [t for t, _ in job_starts(log, "s")] == ["s@None", f"s@{done - 1}"]
    assert_nothing_failed(own_config)


def test_a_kill_while_it_suspends_loses_nothing_and_duplicates_nothing(own_redis, own_config, masters, log):
    """TERM to the master, then SIGKILL of the child a moment later, at a different moment
    each round: the kill lands before the suspend (the master requeues the job as fetched:
    it resumes from its last checkpoint) or after it (it resumes from its cursor), never
    between the cursor's save and the requeue. Each time exactly one copy of the job is
    left, on its queue."""
    import time

    env = env_for(log, PF_ITEM_DELAY="0.004")
    for delay in (0.0, 0.004, 0.02):  # three rounds: a fourth counted death would bury it (max_orphanings)
        m = masters(module="apps.pf_iter", procs=1, env=env)
        m.wait_children()
        if delay == 0.0:
            jid = enqueue("walk", "x")
        before = items_done(log, "x")
        wait_for(lambda b=before: items_done(log, "x") >= b + 30, 30, interval=0.005, what="progress")
        child = job_starts(log, "x")[-1][1]
        m.signal(signal.SIGTERM)
        time.sleep(delay)
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        assert m.wait_exit(40) == 0
        if count(log, "job-end", "x"):
            break
        listed = own_config.redis().lrange(own_config.keys.queue("default"), 0, -1)
        assert len(listed) == 1 and json.loads(listed[0])["jid"] == jid
        assert_nothing_failed(own_config)
    masters(module="apps.pf_iter", procs=1, env=env)
    wait_done(log, "x")
    rounds = len(job_starts(log, "x")) - 1
    assert_all_once(log, "x", twice_at_most=EVERY * rounds)
    assert_nothing_failed(own_config)
