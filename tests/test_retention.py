"""Retention of finished jobs' status and history (docs/architecture.md#retention): bounded
by count (successes and failures apart) and by age, trimmed inside the status flush a
bounded amount per call; a finished job's ``enq:`` field goes; a trimmed job reads as not
retained in the API, the command and the web UI, never as queued. Real redis-server; the
writes' clock injected (``history.clock``); real workers where a job runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from apps import core_jobs
from core_util import RunningWorker, wait_for

import cogworker
from cogworker import api
from cogworker.client import status as status_enqueue
from cogworker.errors import ConfigurationError
from cogworker.lifecycle import history

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def config(config):
    status_enqueue._expired_enq = None  # the session's Redis was emptied: this process's memory is stale
    return cogworker.configure(status=True, history=True, status_max=5, status_max_failed=3)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    found = Clock(time.time())
    monkeypatch.setattr(history, "clock", found)
    return found


def succeed(config, jids, t):
    """First-try successes filed by a worker's buffer at ``t`` (done: records)."""
    history._write_pending(config, [], [], True, [(j, "default", "C", 1, t - 0.2, t, "w1", t - 1) for j in jids])


def die(config, jids, t):
    """Dead jobs, as a flush writes them: a status:<jid> row and a history entry each."""
    history.write(
        config,
        [(j, t, 3600, {"state": "dead", "queue": "default", "class": "C", "reason": "failed"}) for j in jids],
        [(j, f'{{"attempt": 1, "ended_at": {t!r}, "outcome": "failed", "went": "dead"}}') for j in jids],
    )


def zcard(config, key):
    return config.redis().zcard(key)


def ring_sizes(config):
    r = config.redis()
    return [r.hlen(name) for name in r.lrange(config.keys.done_ring, 0, -1)]


def test_the_count_bound_keeps_the_last_successes(config, clock):
    cogworker.configure(status_max=20)  # buckets of 2
    config = cogworker.get_config()
    for k in range(6):  # six flushes of ten
        succeed(config, [f"ok{k}-{j}" for j in range(10)], clock.t)
        clock.t += 1
    assert sum(ring_sizes(config)) == 20 and ring_sizes(config) == [2] * 10
    kept = [f"ok{k}-{j}" for k in (4, 5) for j in range(10)]
    assert all(api.state(j) == "succeeded" for j in kept)
    assert [api.state(f"ok{k}-{j}") for k in range(4) for j in range(10)] == [api.NOT_RETAINED] * 40
    assert all(api.history(f"ok0-{j}") == [] for j in range(10))
    buckets = list(config.redis().scan_iter(config.keys.done_prefix + "*"))
    assert len(buckets) == 10  # the trimmed buckets are deleted, not only out of the ring
    succeed(config, ["one-more"], clock.t)  # a bucket not full: kept until the others hold 20
    assert sum(ring_sizes(config)) == 21 and api.state("ok4-0") == "succeeded"


def test_successes_and_failures_are_counted_apart(config, clock):
    die(config, [f"dead{j}" for j in range(6)], clock.t)
    clock.t += 1
    succeed(config, [f"ok{j}" for j in range(8)], clock.t)
    clock.t += 1
    die(config, ["dead6"], clock.t)
    assert zcard(config, config.keys.retained_failed) == 3
    assert sum(ring_sizes(config)) == 5
    assert [api.state(f"dead{j}") for j in range(7)] == [api.NOT_RETAINED] * 4 + ["dead"] * 3
    assert [api.state(f"ok{j}") for j in range(8)] == [api.NOT_RETAINED] * 3 + ["succeeded"] * 5
    r = config.redis()
    assert not r.exists(config.keys.status("dead0"), config.keys.history("dead0"))
    assert r.exists(config.keys.status("dead6")) and len(api.history("dead6")) == 1


def test_successes_with_keys_of_their_own_are_bounded_too(config, clock):
    """A success after a failure (or a run longer than a flush) has status:/history: keys:
    the succeeded zset bounds those, by the same status_max."""
    history.write(
        config,
        [(f"s{j}", clock.t, 3600, {"state": "succeeded", "queue": "default", "class": "C"}) for j in range(8)],
        [],
    )
    assert zcard(config, config.keys.retained_succeeded) == 5
    assert [api.state(f"s{j}") for j in range(8)] == [api.NOT_RETAINED] * 3 + ["succeeded"] * 5


def test_the_age_bound_trims_below_the_count(config, clock):
    t0 = clock.t
    succeed(config, ["old1", "old2"], t0)
    die(config, ["olddead"], t0)
    clock.t = t0 + history.keep_seconds(config) - 1
    succeed(config, ["young"], clock.t)  # under every count: nothing shed yet
    assert api.state("old1", now=t0 + 1) == "succeeded" and api.state("olddead", now=t0 + 1) == "dead"
    clock.t = t0 + history.keep_seconds(config) + 3601  # past the age, and the hour it was filed in
    succeed(config, ["new"], clock.t)  # a flush past the old ones' age sheds them, failures too
    r = config.redis()
    assert zcard(config, config.keys.retained_failed) == 0
    assert not r.exists(config.keys.status("olddead"), config.keys.history("olddead"))
    assert api.state("old1", now=t0 + 1) == api.NOT_RETAINED  # deleted, not only out of the readers' window
    assert api.state("young", now=clock.t - 3600) == "succeeded" and api.state("new") == "succeeded"
    assert sum(ring_sizes(config)) == 2


def test_trimming_is_bounded_per_call_and_catches_up(config, clock):
    die(cogworker.configure(status_max_failed=100), [f"j{n}" for n in range(100)], clock.t)
    config = cogworker.configure(status_max_failed=10)
    r = config.redis()
    assert r.zcard(config.keys.retained_failed) == 100
    clock.t += 1
    die(config, ["a"], clock.t)
    assert r.zcard(config.keys.retained_failed) == 101 - 51  # at most what it added plus 50 per call
    die(config, ["b"], clock.t)
    assert r.zcard(config.keys.retained_failed) == 10
    assert api.state("b") == "dead" and api.state("j89") == api.NOT_RETAINED
    succeed(cogworker.configure(status_max=1000), [f"k{n}" for n in range(1000)], clock.t)  # ten buckets of 100
    config = cogworker.configure(status_max=10)
    succeed(config, ["c"], clock.t)
    assert len(ring_sizes(config)) == 11 - 8  # eight buckets dropped per call at most
    succeed(config, ["d"], clock.t)
    assert sum(ring_sizes(config)) == 2 + 100  # the newest bucket of 100 holds the count now


def test_a_finished_job_leaves_its_enq_bucket_and_a_trimmed_one_is_never_queued(config):
    r = config.redis()
    first = core_jobs.record.enqueue("first")
    waiting_hour = history.hour_of(time.time())
    assert api.state(first) == "queued"
    with RunningWorker():
        assert wait_for(lambda: api.state(first) == "succeeded", 10)
        more = [core_jobs.record.enqueue(f"more{n}") for n in range(7)]
        assert wait_for(lambda: all(api.state(j) == "succeeded" for j in more[-5:]), 10)
        dead = [core_jobs.fail_no_retry.enqueue(f"dead{n}") for n in range(5)]
        assert wait_for(lambda: all(api.state(j) == "dead" for j in dead[-3:]), 10)
    assert api.state(first) == api.NOT_RETAINED and api.status(first) is None
    assert [api.state(j) for j in dead[:2]] == [api.NOT_RETAINED] * 2
    assert api.DeadSet().size() == 5  # the dead set is bounded by its own rules, as before
    enq = [k for k in r.scan_iter(config.keys.enq_prefix + "*")]
    assert sum(r.hlen(k) for k in enq) == 0  # every job finished: no field left
    queued = core_jobs.record.enqueue("waits")
    assert r.hexists(config.keys.enq(waiting_hour), queued) or r.hexists(
        config.keys.enq(history.hour_of(time.time())), queued
    )
    assert api.state(queued) == "queued"


def test_a_job_enqueued_in_the_last_minute_of_an_hour_leaves_both_buckets(config, clock):
    r = config.redis()
    hour = history.hour_of(clock.t)
    late = hour - 10  # 10 s before this hour: its field may be in either bucket
    for key in (config.keys.enq(hour - 3600), config.keys.enq(hour)):
        r.hset(key, "late", f'["default","C",1,{late!r}]')
    history._write_pending(config, [], [], True, [("late", "default", "C", 1, clock.t - 1, clock.t, "w1", late)])
    assert not r.hexists(config.keys.enq(hour - 3600), "late") and not r.hexists(config.keys.enq(hour), "late")


@pytest.mark.parametrize("name", ["status_max", "status_max_failed", "status_ttl", "history_ttl", "history_max"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True, None])
def test_bad_retention_settings_are_one_line_errors(config, name, value):
    with pytest.raises(ConfigurationError) as raised:
        cogworker.configure(**{name: value})
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{name} must be a whole number of at least 1")


def test_retention_describes_the_rules():
    rules = api.retention(cogworker.Config(redis_url="redis://127.0.0.1:7100/0"))
    assert (rules.succeeded, rules.failed, rules.seconds) == (10_000, 10_000, 24 * 3600)
    assert rules.describe() == (
        "status and history are retained for the last 10,000 successes and the last 10,000 "
        "failed (dead) jobs, each at most 24 h; the dead set keeps 10,000 entries, at most "
        "180 days"
    )


def cli(config, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": TESTS_DIR, "COGWORKER_REDIS_URL": config.redis_url}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args], capture_output=True, text=True, timeout=60, cwd=TESTS_DIR, env=env
    )


def trimmed_and_kept(config, clock):
    """A success whose record was trimmed, a dead job still in the dead set whose status was
    (the dead set keeps more), and a kept success."""
    jid = core_jobs.fail_no_retry.enqueue("in-dead")
    with RunningWorker():
        assert wait_for(lambda: api.state(jid) == "dead", 10)
    clock.t = time.time() + 1  # after the worker's flushes
    succeed(config, ["gone"], clock.t)
    clock.t += 1
    die(config, ["d1", "d2", "d3"], clock.t)
    clock.t += 1
    succeed(config, [f"ok{j}" for j in range(5)], clock.t)
    assert api.state("gone") == api.NOT_RETAINED and api.state(jid) == api.NOT_RETAINED
    assert api.DeadSet().size() == 1
    return jid


def test_the_command_says_not_retained(config, clock):
    in_dead = trimmed_and_kept(config, clock)
    gone = cli(config, "job", "gone")
    assert gone.returncode == 1 and gone.stdout == ""  # not found: nothing of it is kept
    assert gone.stderr.count("\n") == 1
    assert gone.stderr.startswith("cogworker: job 'gone': not retained: not queued, scheduled, retrying or dead")
    assert "last 10,000 successes" in gone.stderr  # the command's own config: the defaults
    shown = cli(config, "job", in_dead)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split()[0]: line.split(None, 1)[1] for line in shown.stdout.splitlines()[:3]}
    assert lines["where"] == "dead"
    assert lines["status"].startswith("not retained (status and history are retained for the last 10,000")
    doc = json.loads(cli(config, "job", in_dead, "--json").stdout)
    assert (doc["state"], doc["status"], doc["where"]) == (api.NOT_RETAINED, None, "dead")
    assert doc["retention"].startswith("status and history are retained")
    ok = json.loads(cli(config, "job", "ok4", "--json").stdout)
    assert (ok["state"], ok["status"]["state"]) == ("succeeded", "succeeded")


def test_the_web_job_page_says_not_retained(config, clock):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    in_dead = trimmed_and_kept(config, clock)
    client = TestClient(create_app(config=config), base_url="http://localhost")
    page = client.get("/job/gone")
    assert page.status_code == 404
    assert 'id="not-retained"' in page.text and "last 5 successes" in page.text
    assert "state-queued" not in page.text
    kept = client.get(f"/job/{in_dead}")
    assert kept.status_code == 200
    assert "state-not_retained" in kept.text and ">dead<" in kept.text
    ok = client.get("/job/ok4")
    assert ok.status_code == 200 and "state-succeeded" in ok.text and "state-not_retained" not in ok.text


def test_a_job_filed_dead_at_once_leaves_enq_and_is_retained_as_a_failure(config, clock):
    """The master's and orphan recovery's events have no buffer: written at once, through
    the same script (a parked orphan, bound for dead)."""
    from cogworker.core import hooks

    r = config.redis()
    jid = core_jobs.record.enqueue("orphan")
    [raw] = r.lrange(config.keys.queue("default"), 0, -1)
    payload = json.loads(raw)
    assert api.state(jid) == "queued"
    history._on_event(
        hooks.JobEvent(
            "orphaned",
            payload,
            queue="default",
            identity="gone:1:x",
            counted=True,
            reason="process_died",
            config=config,
        )
    )
    assert api.state(jid) == "dead"
    assert not any(r.hexists(k, jid) for k in r.scan_iter(config.keys.enq_prefix + "*"))
    assert [m.decode() for m in r.zrange(config.keys.retained_failed, 0, -1)] == [jid]
    clock.t += 1  # the flush's clock scores the retained (not the rows' times)
    die(config, ["d1", "d2", "d3"], clock.t)
    assert api.state(jid) == api.NOT_RETAINED  # trimmed: not queued, though its payload is still listed


def test_with_status_and_history_off_the_failures_history_is_bounded_too(config, clock):
    """Off, history:<jid> still gets the attempts log's entries (each failure): counted."""
    config = cogworker.configure(status=False, history=False)
    jids = [core_jobs.fail_no_retry.enqueue(f"off{n}") for n in range(6)]
    with RunningWorker():
        assert wait_for(lambda: api.DeadSet().size() == 6, 10)
    r = config.redis()
    assert wait_for(lambda: r.zcard(config.keys.retained_failed) == 3, 10)
    kept = [j for j in jids if r.exists(config.keys.history(j))]
    assert len(kept) == 3 and not r.keys(config.keys.status_prefix + "*")
