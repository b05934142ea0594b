"""Job status (``status:<jid>``) and history (``history:<jid>``), written by the hook
subscribers of ``cogworker.history``; tracebacks in the retry/dead entry, the history and
the log line. Real redis-server, real workers (single-process and prefork)."""

from __future__ import annotations

import json
import logging
import os
import signal
import time

import pytest
from apps import core_jobs, pf
from core_util import RunningWorker, ran, wait_for
from prefork_harness import lrange
from prefork_harness import wait_for as pf_wait

import cogworker
from cogworker import api
from cogworker.fleet.poller import Poller
from cogworker.lifecycle import history

ON = {"COGWORKER_TEST_STATUS": "1"}  # the prefork app turns status and history on


# Both are on by default; set here all the same (the conftest fixtures, overridden).
@pytest.fixture
def config(config):
    return cogworker.configure(status=True, history=True)


@pytest.fixture
def own_config(own_config):
    return cogworker.configure(status=True, history=True)


def state(jid):
    found = api.status(jid)
    return found.state if found else None


def test_success_queued_running_succeeded_with_one_history_entry(config):
    jid = core_jobs.sleepy.enqueue("s", 2.5)  # longer than a flush interval: "running" shows
    queued = api.status(jid)
    assert queued.state == "queued" and queued.queue == "default" and queued.attempt == 1
    assert queued.job_class == "apps.core_jobs.sleepy"
    with RunningWorker() as worker:
        assert wait_for(lambda: state(jid) == "running", 5)
        running = api.status(jid)
        assert running.identity == worker.identity and running.started_at is not None
        assert wait_for(lambda: state(jid) == "succeeded", 5)
    done = api.status(jid)
    assert done.identity is None and done.attempt == 1
    assert 0 < config.redis().ttl(config.keys.status(jid)) <= config.status_ttl
    [entry] = api.history(jid)
    assert (entry.outcome, entry.went, entry.attempt, entry.identity) == ("succeeded", "succeeded", 1, worker.identity)
    assert entry.started_at <= entry.ended_at and entry.ended_at - entry.started_at >= 2.4
    assert entry.error_class is None and entry.traceback is None
    assert 0 < config.redis().ttl(config.keys.history(jid)) <= config.history_ttl


def test_scheduled_status(config):
    jid = core_jobs.record.enqueue_in(600, "later")
    found = api.status(jid)
    assert found.state == "scheduled" and found.at == pytest.approx(time.time() + 600, abs=5)
    assert config.redis().ttl(config.keys.status(jid)) > config.status_ttl


def test_retry_then_dead_keeps_tracebacks_everywhere(config, caplog):
    caplog.set_level(logging.WARNING, logger="cogworker")
    jid = core_jobs.fail_always.enqueue("t")  # retry=2, backoff 0
    poller = Poller(config)
    r = config.redis()
    with RunningWorker():
        for n in (1, 2):
            assert wait_for(lambda n=n: len(api.history(jid)) == n, 5)
            assert state(jid) == "retrying" and api.status(jid).error_class == "ValueError"
            assert api.status(jid).attempt == n
            poller.poll()
        assert wait_for(lambda: state(jid) == "dead", 5)
    dead = json.loads(r.zrange(config.keys.dead, 0, -1)[0])
    trace = dead["error_traceback"]
    assert trace.startswith("Traceback (most recent call last):") and "fail_always" in trace
    # It starts at the job's own frame: none of cogworker's (the loop, the executor, the
    # middleware chain) before it.
    frames = [row for row in trace.splitlines() if row.startswith('  File "')]
    assert frames[0].endswith(", in fail_always") and "apps/core_jobs.py" in frames[0], trace
    assert not [row for row in frames if f"{os.sep}cogworker{os.sep}" in row], trace
    assert trace.splitlines()[-1] == "ValueError: always a t".replace("always a t", dead["error_message"])
    assert len(trace.splitlines()) <= 30
    log = api.history(jid)
    assert [(a.attempt, a.outcome, a.went) for a in log] == [
        (1, "failed", "retrying"),
        (2, "failed", "retrying"),
        (3, "failed", "dead"),
    ]
    assert all(a.traceback and "ValueError" in a.traceback and a.error_class == "ValueError" for a in log)
    lines = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("fail: ")]
    assert lines[0].startswith(f"fail: apps.core_jobs.fail_always jid={jid}: ValueError: ")
    assert lines[0].splitlines()[0].endswith("; retry in 0s (attempt 1/2)")
    assert lines[1].splitlines()[0].endswith("; retry in 0s (attempt 2/2)")
    assert lines[2].splitlines()[0].endswith("; dead")
    assert "Traceback (most recent call last):" in lines[2]


def test_traceback_is_capped_to_the_configured_lines(config):
    cogworker.configure(traceback_lines=6)
    jid = core_jobs.fail_deep.enqueue(12)
    with RunningWorker():
        assert wait_for(lambda: config.redis().zcard(config.keys.dead) == 1, 5)
    trace = json.loads(config.redis().zrange(config.keys.dead, 0, -1)[0])["error_traceback"]
    rows = trace.splitlines()
    assert len(rows) == 6 and rows[0].startswith("Traceback") and "lines cut" in rows[1]
    assert rows[-1].startswith("ValueError") or ":" in rows[-1]
    assert wait_for(lambda: api.history(jid) and api.history(jid)[0].traceback == trace, 5)


def test_a_success_after_failures_and_the_attempts_view(config):
    from cogworker.lifecycle import stats

    jid = core_jobs.fail_then_pass.enqueue("b", 1)
    poller = Poller(config)
    with RunningWorker():
        assert wait_for(lambda: state(jid) == "retrying", 5)
        poller.poll()
        assert wait_for(lambda: state(jid) == "succeeded", 5)
    assert api.status(jid).attempt == 2
    assert [(a.attempt, a.outcome) for a in api.history(jid)] == [(1, "failed"), (2, "succeeded")]
    assert [(a["attempt"], a["outcome"]) for a in stats.attempts(config, jid)] == [(1, "retrying"), (2, "succeeded")]


def test_history_is_capped(config):
    cogworker.configure(history_max=3)
    jid = core_jobs.fail_always.enqueue("cap")
    job = core_jobs.fail_always
    r = config.redis()
    with RunningWorker():
        for _ in range(5):
            r.lpush(
                config.keys.queue("default"),
                json.dumps(
                    {"class": job.name, "args": ["cap"], "kwargs": {}, "jid": jid, "queue": "default", "retry": 0}
                ),
            )
        assert wait_for(lambda: r.zcard(config.keys.dead) >= 5, 5)
        assert wait_for(lambda: len(api.history(jid)) == 3 and r.llen(config.keys.history(jid)) == 3, 5)
    assert all(a.outcome == "failed" for a in api.history(jid))


def test_on_by_default_and_off_leaves_no_status_and_only_the_attempts_history(config):
    cogworker.config._config = None
    config = cogworker.configure(redis_url=config.redis_url, socket_timeout=2.0)  # the defaults
    assert (config.status, config.history) == (True, True)
    config = cogworker.configure(status=False, history=False)
    ok = core_jobs.record.enqueue("x")
    bad = core_jobs.fail_no_retry.enqueue("y")
    later = core_jobs.record.enqueue_in(600, "z")
    many = core_jobs.record.enqueue_many([["m"]])
    r = config.redis()
    with RunningWorker():
        assert wait_for(lambda: "record:m" in ran(r) and "record:x" in ran(r) and r.zcard(config.keys.dead) == 1, 5), (
            ran(r),
            r.zcard(config.keys.dead),
        )
        time.sleep(1.3)  # a flush would have happened by now
    assert list(r.scan_iter(config.keys.status_prefix + "*")) == []
    assert [k for p in (config.keys.enq_prefix, config.keys.done_prefix) for k in r.scan_iter(p + "*")] == []
    # Only the failure, for the attempts log: no entry for the plain successes.
    assert [k.decode() for k in r.scan_iter(config.keys.history_prefix + "*")] == [config.keys.history(bad)]
    assert [(a.outcome, a.went) for a in api.history(bad)] == [("failed", "dead")]
    assert api.status(ok) is None and api.history(ok) == [] and api.status(later) is None and many


def test_a_raising_status_write_never_changes_a_fate(config, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("status store broken")

    monkeypatch.setattr(history, "_run", broken)  # the script call of every status row and entry
    monkeypatch.setattr(history, "file_done", broken)  # and the first-try successes' filing
    r = config.redis()
    r.set(config.keys.status("wrongtype"), "x")  # and a key of the wrong type, for the real script below
    ok = core_jobs.record.enqueue("ok")
    bad = core_jobs.fail_no_retry.enqueue("bad")
    with RunningWorker():
        assert wait_for(lambda: "record:ok" in ran(r) and r.zcard(config.keys.dead) == 1, 5)
        time.sleep(1.3)
    assert json.loads(r.zrange(config.keys.dead, 0, -1)[0])["jid"] == bad
    assert r.llen(config.keys.queue("default")) == 0
    assert sum(r.llen(k) for k in r.scan_iter(config.keys.in_progress_prefix + "*")) == 0
    assert api.status(ok).state == "queued"  # only the enqueue's write (in the client's pipeline) landed
    monkeypatch.undo()
    # The real script with a wrong-type status key skips that key, writes the rest.
    history.write(
        config,
        [("wrongtype", time.time(), 60, {"state": "running"}), ("fine", time.time(), 60, {"state": "running"})],
        [("fine", "{}")],
    )
    assert r.get(config.keys.status("wrongtype")) == b"x"
    assert state("fine") == "running" and r.llen(config.keys.history("fine")) == 1


def test_an_older_status_never_overwrites_a_newer_one(config):
    now = time.time()
    history.write(config, [("j", now, 60, {"state": "running"})], [])
    history.write(config, [("j", now - 1, 60, {"state": "retrying"})], [])
    assert state("j") == "running"


def test_a_newer_status_clears_the_fields_that_no_longer_apply(config):
    now = time.time()
    history.write(config, [("k", now, 60, {"state": "running", "identity": "w1", "started_at": repr(now)})], [])
    history.write(config, [("k", now + 1, 60, {"state": "succeeded"})], [])
    found = api.status("k")
    assert (found.state, found.identity, found.started_at) == ("succeeded", None, None)


# -- prefork: the master files orphanings and hard timeouts ------------------------------


def test_a_job_killed_at_shutdown_has_a_history_entry(own_config, masters):
    """Still running at the shutdown's deadline (--timeout): the master kills its child and
    requeues it, uncounted; its history says that run ended (interrupted, back queued)."""
    m = masters(procs=1, env=ON, args=("--timeout", "2"))
    m.wait_children()
    jid = pf.slow.enqueue("outlives-the-stop", 60)
    pf_wait(lambda: state(jid) == "running", 15, what="running status flushed")
    identity = api.status(jid).identity
    m.signal(signal.SIGTERM)
    assert m.wait_exit(40) == 0
    (entry,) = api.history(jid)
    assert (entry.outcome, entry.went, entry.identity) == ("interrupted", "queued", identity)
    assert state(jid) == "queued" and api.status(jid).attempt == 1  # not counted: its first run comes again
    assert api.queue("default").size() == 1


def test_sigkilled_child_orphaned_then_succeeded(own_config, masters):
    m = masters(procs=2, env=ON)
    m.wait_children()
    jid = pf.slow.enqueue("victim", 1.5)
    started = pf_wait(lambda: lrange(own_config, "test:started"), what="job start")
    pid = int(started[0].split(":")[1])
    pf_wait(lambda: state(jid) == "running", 5, what="running status flushed")
    first = api.status(jid).identity
    os.kill(pid, signal.SIGKILL)
    pf_wait(lambda: [a.outcome for a in api.history(jid)] == ["orphaned", "succeeded"], 15, what="history")
    orphaned, succeeded = api.history(jid)
    assert orphaned.identity == first and orphaned.went == "queued"
    assert succeeded.identity != first and orphaned.attempt == succeeded.attempt == 1
    assert state(jid) == "succeeded"


def test_hard_timeout_is_filed_by_the_master_as_timed_out(own_config, masters):
    m = masters(procs=1, env=ON)
    m.wait_children(1)
    jid = pf.stubborn.enqueue("stuck")
    pf_wait(lambda: state(jid) == "dead", 25, what="timed-out status")
    assert api.status(jid).reason == "timed_out" and api.status(jid).error_class == "cogworker.JobTimeout"
    [entry] = api.history(jid)
    assert (entry.outcome, entry.went, entry.error_class) == ("timed_out", "dead", "cogworker.JobTimeout")


# -- status and history agree on every fate ----------------------------------------------------


def _agree(jid):
    """The status and the last history entry tell the same fate: where the job went, and
    the number of the attempt that sent it there."""
    status = api.status(jid)
    last = api.history(jid)[-1]
    assert (status.state, status.attempt) == (last.went, last.attempt), (status, last)
    return status, last


def test_a_repeat_orphan_is_dead_in_its_status_and_its_history(config):
    """Orphaned past max_orphanings: the last run's entry went dead (not queued), and the
    status counts that run as its attempt (not 0)."""
    from cogworker.fleet.recovery import bury_repeat_orphans, requeue_dead

    r = config.redis()
    now = time.time()
    payload = {
        "class": "apps.core_jobs.record",
        "args": [1],
        "kwargs": {},
        "jid": "often",
        "queue": "default",
        "retry": 25,
        "created_at": now,
        "enqueued_at": now,
    }
    for kill in range(1, config.max_orphanings + 2):
        identity = f"gone:{kill}:d"
        r.rpush(config.keys.in_progress(identity), json.dumps(payload))
        assert requeue_dead(config, identity, "none") == (1, True)
        if kill <= config.max_orphanings:
            status, last = _agree("often")
            assert (status.state, last.outcome) == ("queued", "orphaned")
            r.delete(config.keys.queue("default"))  # as if fetched again (the same payload)
    status, last = _agree("often")
    assert (status.state, status.attempt, last.outcome) == ("dead", 1, "orphaned")
    assert bury_repeat_orphans(config) == 1
    status, last = _agree("often")
    assert (status.state, status.reason, status.error_class) == ("dead", "process_died", "cogworker.ProcessDied")
    assert [e.outcome for e in api.history("often")] == ["orphaned"] * (config.max_orphanings + 1)


def test_a_job_killing_its_child_four_times_agrees_dead(own_config, masters):
    """The issue's case, with real children SIGKILLed by the job itself."""
    m = masters(procs=1, env=ON)
    m.wait_children(1)
    jid = pf.suicide.enqueue("killer")
    pf_wait(lambda: state(jid) == "dead" and api.status(jid).reason == "process_died", 40, what="dead status")
    status, last = _agree(jid)
    assert (status.attempt, last.outcome) == (1, "orphaned")
    assert len(api.history(jid)) == own_config.max_orphanings + 1


def test_an_async_jobs_stored_traceback_starts_at_its_own_frame(config):
    """Not at asyncio's or cogworker's frames that ran it."""
    from apps import pf_async

    pf_async.a_fail.options(retry=0).enqueue("tb")
    with RunningWorker():
        assert wait_for(lambda: config.redis().zcard(config.keys.dead) == 1, 10)
    trace = json.loads(config.redis().zrange(config.keys.dead, 0, -1)[0])["error_traceback"]
    frames = [row for row in trace.splitlines() if row.startswith('  File "')]
    assert len(frames) == 1 and frames[0].endswith(", in a_fail"), trace
