"""Fleet-wide rate limits (docs/architecture.md#limits) with real prefork masters and real
signals; every run's start and end is logged to a file (apps.limited)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from apps.pf_faults import events
from metrics_util import scrape, value
from prefork_harness import in_progress_total, wait_for
from redis_server import free_port

from cogworker.client.enqueue import push, push_many
from cogworker.client.jobs import JobOptions, build_payload


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def payload(job, *args):
    return build_payload(f"apps.limited.{job}", args, {}, JobOptions())


def most_at_once(runs, tags=None):
    """The most runs in progress at one moment, from the start/end log."""
    moves = sorted((at, 1 if ev == "start" else -1) for ev, tag, _, at in runs if tags is None or tag in tags)
    now = peak = 0
    for _, step in moves:
        now += step
        peak = max(peak, now)
    return peak


def started(runs, prefix):
    return [e for e in runs if e[0] == "start" and e[1].startswith(prefix)]


def ended(runs, prefix):
    return [e for e in runs if e[0] == "end" and e[1].startswith(prefix)]


def settled(config):
    r = config.redis()
    return r.zcard(config.keys.dead) == 0 and r.zcard(config.keys.retry) == 0


def test_concurrency_3_with_6_children_never_more_than_3_and_no_slower_than_the_limit(own_config, masters, log):
    jobs = 90
    port = free_port()
    m = masters(module="apps.limited", procs=6, env={"PF_LOG": log}, args=["--metrics-port", str(port)])
    m.wait_children()
    push_many([payload("conc", f"c{i}") for i in range(jobs)])
    wait_for(lambda: len(ended(events(log), "c")) == jobs, 60, what="every limited job done")
    runs = events(log)
    assert most_at_once(runs) <= 3
    assert most_at_once(runs) == 3  # the limit is used, not only respected
    assert sorted(e[1] for e in started(runs, "c")) == sorted(f"c{i}" for i in range(jobs))  # each once
    assert settled(own_config)
    took = max(e[3] for e in runs) - min(e[3] for e in runs)
    ideal = jobs * 0.05 / 3
    assert took < ideal + 6.0, f"{jobs} jobs of 50 ms under Concurrency 3 took {took:.2f}s (ideal {ideal:.2f}s)"
    r = own_config.redis()
    record, held, _, _ = own_config.keys.limit_keys("k")
    wait_for(lambda: r.zcard(held) == 0, 10, what="every slot released")
    over = int(r.hget(record, "over") or 0)
    assert over > 0  # some were parked: 6 children for 3 slots
    # /metrics counts the deferrals (sampled from Redis every 5 s).
    wait_for(
        lambda: value(scrape(port), "cogworker_limit_deferrals_total") == over, 20, 0.5, what="/metrics' deferral count"
    )
    wait_for(lambda: in_progress_total(own_config) == 0, 10, what="lists drained")


def test_a_per_argument_key_limits_each_key_alone(own_config, masters, log):
    m = masters(module="apps.limited", procs=6, env={"PF_LOG": log})
    m.wait_children()
    calls = [payload("per_user", user, f"u{user}-{i}") for i in range(5) for user in range(3)]
    push_many(calls)
    wait_for(lambda: len(ended(events(log), "u")) == 15, 60, what="every per-user job done")
    runs = events(log)
    for user in range(3):
        assert most_at_once(runs, {f"u{user}-{i}" for i in range(5)}) == 1
    assert most_at_once(runs) >= 2  # other keys' jobs ran beside each other
    assert len(started(runs, "u")) == 15 and settled(own_config)


def test_a_window_admits_at_most_n_starts_per_window_and_unlimited_jobs_keep_flowing(own_config, masters, log):
    m = masters(module="apps.limited", procs=4, env={"PF_LOG": log})
    m.wait_children()
    limited, unlimited = 45, 300
    calls = [payload("windowed", f"w{i}") for i in range(limited)]
    calls += [payload("free", f"f{i}") for i in range(unlimited)]
    push_many(calls)
    wait_for(lambda: len(ended(events(log), "w")) == limited, 60, what="every windowed job done")
    runs = events(log)
    starts = sorted(e[3] for e in started(runs, "w"))
    assert len(starts) == limited
    # The window is Redis's clock at admission; the log is written a moment later by each
    # child, so the log's windows are taken a little shorter (0.2 s) than the limiter's 2 s.
    for i, at in enumerate(starts):
        inside = [t for t in starts[i:] if t < at + 2.0 - 0.2]
        assert len(inside) <= 20, f"{len(inside)} starts within 1.8 s from {at}"
    assert starts[-1] - starts[0] >= 4.0 - 0.2  # 45 starts need 3 windows
    frees = ended(runs, "f")
    assert len(frees) == unlimited
    # Unlimited jobs behind the parked ones are not held up: all done before the third window.
    assert max(e[3] for e in frees) < starts[-1]
    assert settled(own_config)


def test_a_child_sigkilled_holding_a_slot_frees_it_and_the_job_runs_again(own_config, masters, log):
    m = masters(module="apps.limited", procs=2, env={"PF_LOG": log})
    m.wait_children()
    push(payload("solo", "a"))
    first = wait_for(lambda: started(events(log), "a"), 20, what="a started")[0]
    push(payload("solo", "b", 0.1))  # over the limit while a holds the slot: parked
    r = own_config.redis()
    record, held, _, waiting = own_config.keys.limit_keys("solo")
    wait_for(lambda: r.zcard(waiting) == 1, 10, what="b parked")
    assert r.zcard(held) == 1
    killed_at = time.time()
    os.kill(first[2], signal.SIGKILL)
    # The master reaps the child at once, requeues a (fencing the dead child) and a
    # re-runs in another child: its slot is free again within the orphan-recovery bound.
    wait_for(lambda: len(started(events(log), "a")) == 2, 20, what="a re-run")
    wait_for(lambda: ended(events(log), "b"), 20, what="b done")
    runs = events(log)
    rerun = started(runs, "a")[1]
    assert rerun[2] != first[2] and rerun[3] - killed_at < 20
    # Never two solo jobs at once, the killed run ending at the kill.
    spans = [("start", "a", 0, first[3]), ("end", "a", 0, killed_at)] + [e for e in runs[1:] if e[3] > killed_at]
    assert most_at_once(spans) == 1
    assert len(started(runs, "b")) == 1 and len(ended(runs, "a")) == 1
    wait_for(lambda: r.zcard(held) == 0, 10, what="slot released")
    assert settled(own_config)
    assert m.alive()


def test_jobs_in_flight_hold_the_limit_too_and_a_bad_key_fails_the_job_unrun(own_config, masters, log):
    m = masters(module="apps.limited", procs=2, env={"PF_LOG": log}, args=["--concurrency", "4"])
    m.wait_children()
    push_many([payload("conc", f"c{i}", 0.1) for i in range(30)] + [payload("bad_key", "bad")])
    wait_for(lambda: len(ended(events(log), "c")) == 30, 60, what="every limited job done")
    runs = events(log)
    assert most_at_once(runs) == 3 and len(started(runs, "c")) == 30
    r = own_config.redis()
    # Failed (to retry, as any job's failure), never run: its key can't name a limiter.
    entry = json.loads(wait_for(lambda: r.zrange(own_config.keys.retry, 0, -1), 20, what="the bad key's job")[0])
    assert entry["error_class"] == "cogworker.LimitKeyError" and "raised ZeroDivisionError" in entry["error_message"]
    assert not started(events(log), "bad")
