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
    assert r.zcard(config.keys.retry) == 0
    assert r.zcard(config.keys.dead) == 0
    assert in_progress_total(config) == 0


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
