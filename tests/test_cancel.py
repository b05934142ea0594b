"""api.cancel and current_job() (issue #27), against real Redis and real prefork masters,
with a start/end log written by the jobs themselves (apps/pf_cancel.py): a queued, a
scheduled, a retrying, a running sync and a running async job; cancel racing the job's
own end; a child SIGKILLed after its job was told; the bounds of the cancel mark."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from apps.pf_faults import events
from prefork_harness import Master, in_progress_total, wait_for

import cogworker
from cogworker import api
from cogworker.client.jobs import by_name

APP = "apps.pf_cancel"


@pytest.fixture
def pf_log(tmp_path):
    return str(tmp_path / "runs.log")


def job(name):
    return by_name(f"{APP}.{name}")


def starts(path, tag):
    return [e for e in events(path) if e[0] == "start" and e[1] == tag]


def seen(path, event, tag):
    return any(e[0] == event and e[1] == tag for e in events(path))


def master(config, pf_log, procs=1, args=()):
    m = Master(config.redis_url, module=APP, procs=procs, args=args, env={"PF_LOG": pf_log})
    m.wait_children()
    return m


def nothing_left(config):
    r, keys = config.redis(), config.keys
    return (
        r.llen(keys.queue("default")) == 0
        and r.zcard(keys.schedule) == 0
        and r.zcard(keys.retry) == 0
        and r.zcard(keys.dead) == 0
        and in_progress_total(config) == 0
    )


def test_cancel_queued_job(config):
    from cogworker import hooks

    heard = []

    def hear(event):
        heard.append(event.payload["jid"])

    hooks.subscribe("cancelled", hear)
    jid = job("brief").options(unique_for=600).enqueue("q")
    assert config.redis().llen(config.keys.queue("default")) == 1
    try:
        assert api.cancel(jid) is True
    finally:
        hooks.unsubscribe("cancelled", hear)
    assert heard == [jid]  # fired once, after the write, in the caller's process
    assert nothing_left(config)
    assert api.status(jid).state == "cancelled"
    assert api.cancelled(jid)["was"] == "queue"
    assert api.cancel(jid) is False  # nothing left to cancel
    assert int(config.redis().get(config.keys.stats_cancelled)) == 1
    # its unique lock went with it: the same job can be enqueued again at once
    assert job("brief").options(unique_for=600).enqueue("q") is not None


def test_cancel_scheduled_job(config):
    jid = job("brief").enqueue_in(3600, "s")
    assert api.cancel(jid) is True
    assert config.redis().zcard(config.keys.schedule) == 0
    assert api.status(jid).state == "cancelled"


def test_cancel_unknown_job_and_bad_input(config):
    assert api.cancel("0" * 24) is False
    with pytest.raises(ValueError, match="jid"):
        api.cancel("")


def test_cancel_retrying_job(config, pf_log):
    m = master(config, pf_log)
    try:
        jid = job("fails").enqueue("r")
        wait_for(lambda: config.redis().zcard(config.keys.retry) == 1, 20, what="the job in retry")
        assert api.cancel(jid) is True
        assert config.redis().zcard(config.keys.retry) == 0
        assert api.status(jid).state == "cancelled"
        time.sleep(1.0)
        assert len(starts(pf_log, "r")) == 1
        assert nothing_left(config)
    finally:
        m.stop()


def _cancel_once_started(config, pf_log, name, tag):
    """Enqueues job ``name`` (60 s long), cancels it once it runs, and waits until it has
    heard and nothing of it is left: it ends cancelled. Its jid."""
    jid = job(name).enqueue(tag, 60)
    wait_for(lambda: seen(pf_log, "start", tag), 20, what="the job started")
    assert api.cancel(jid) is True
    wait_for(lambda: seen(pf_log, "cancelled", tag), 20, what="the job told")
    wait_for(lambda: nothing_left(config), 20, what="nothing left anywhere")
    assert api.status(jid).state == "cancelled"
    # Its execution is in its history as cancelled (written by the worker's next flush).
    runs = wait_for(lambda: api.history(jid), 10, what="its history entry")
    assert [(a.attempt, a.outcome, a.went) for a in runs] == [(1, "cancelled", "cancelled")]
    assert runs[0].started_at is not None and runs[0].ended_at >= runs[0].started_at and runs[0].identity
    return jid


@pytest.mark.parametrize("name", ["polls", "awaits"])
def test_cancel_running_job(config, pf_log, name):
    """Sync polls current_job().cancelled; async gets CancelledError at its await. Either
    ends cancelled: not retried, not dead, never run again."""
    m = master(config, pf_log)
    try:
        jid = _cancel_once_started(config, pf_log, name, "run")
        assert api.cancelled(jid)["was"] == "running"
        time.sleep(1.0)  # a few beats more: nothing brings it back
        assert len(starts(pf_log, "run")) == 1
        assert not seen(pf_log, "end", "run")
        assert nothing_left(config)
        assert api.cancel(jid) is False
        assert "cancelled: apps.pf_cancel" in m.output()
    finally:
        m.stop()


def test_cancel_races_the_jobs_end(config, pf_log):
    """Many rounds of cancel against short jobs ending on their own: True exactly when
    the job ends cancelled (its status; never acked as a success), False exactly when it
    succeeded; no job runs twice, nothing is left anywhere."""
    random.seed(27)
    m = master(config, pf_log, procs=2)
    answers = {}
    try:
        for i in range(60):
            tag = f"t{i}"
            jid = job("brief").enqueue(tag, random.choice([0.0, 0.005, 0.02]))
            time.sleep(random.choice([0.0, 0.001, 0.003, 0.01, 0.03]))
            answers[jid] = (tag, api.cancel(jid))
        wait_for(lambda: nothing_left(config), 30, what="every job settled")
        time.sleep(1.5)  # status flushes (about a second)
        for jid, (tag, answer) in answers.items():
            state = api.status(jid).state
            assert len(starts(pf_log, tag)) <= 1, tag
            if answer:
                assert state == "cancelled", (tag, state)
            else:
                assert state == "succeeded", (tag, state)
                assert seen(pf_log, "end", tag)
        won = sum(1 for _, answer in answers.values() if answer)
        assert int(config.redis().get(config.keys.stats_cancelled) or 0) == won
        assert 0 < won < len(answers)  # both sides won some rounds
    finally:
        m.stop()


@pytest.mark.parametrize("told", [True, False])
def test_sigkill_after_cancel(config, pf_log, told):
    """The child is SIGKILLed after cancel() returned True (after the job was told, or
    before it heard): the master's requeue of its list must not bring the job back."""
    m = master(config, pf_log)
    try:
        jid = job("lingers").enqueue("k", 60)
        wait_for(lambda: seen(pf_log, "start", "k"), 20, what="the job started")
        child = starts(pf_log, "k")[0][2]
        assert api.cancel(jid) is True
        if told:
            wait_for(lambda: seen(pf_log, "told", "k"), 20, what="the job told")
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: child not in m.child_pids() and len(m.children()) == 1, 20, what="a new child")
        time.sleep(1.5)
        assert len(starts(pf_log, "k")) == 1
        assert nothing_left(config)
        assert api.status(jid).state == "cancelled"
    finally:
        m.stop()


def test_cancel_mark_is_bounded(config):
    """The mark lives status_ttl (here 60 s) and no longer."""
    cogworker.configure(status_ttl=60)
    jid = job("brief").enqueue("b")
    assert api.cancel(jid) is True
    ttl = config.redis().ttl(config.keys.cancelled(jid))
    assert 0 < ttl <= 60


def cli(*args, url):
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)), "COGWORKER_REDIS_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_cli_cancel_and_progress(config, pf_log):
    jid = job("brief").enqueue("c")
    done = cli("cancel", jid, url=config.redis_url)
    assert done.returncode == 0 and done.stdout == f"{jid}: cancelled\n" and not done.stderr
    again = cli("cancel", jid, "--json", url=config.redis_url)
    assert again.returncode == 1 and json.loads(again.stdout) == {"cancelled": [], "not_found": [jid]}
    plain = cli("cancel", jid, url=config.redis_url)
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and "1 of 1 not cancelled" in plain.stderr
    shown = cli("job", jid, url=config.redis_url)
    assert shown.returncode == 0 and "cancelled (since" in shown.stdout
    m = master(config, pf_log)
    try:
        running = job("reports").enqueue("p", 100, 30.0)
        wait_for(lambda: seen(pf_log, "half", "p"), 20, what="half-way")
        wait_for(lambda: "50%" in cli("processes", url=config.redis_url).stdout, 20, what="progress in processes")
        wait_for(
            lambda: "50% row 50/100" in cli("job", running, url=config.redis_url).stdout, 20, what="progress in job"
        )
        assert cli("cancel", running, url=config.redis_url).returncode == 0
    finally:
        m.stop()


def test_metrics_count_cancels(config, pf_log):
    from metrics_util import scrape, value
    from redis_server import free_port

    port = free_port()
    m = master(config, pf_log, args=["--metrics-port", str(port)])
    try:
        for i in range(2):
            assert api.cancel(job("brief").enqueue_in(3600, f"m{i}")) is True

        def counted():
            try:
                return value(scrape(port), "cogworker_cancels_total") == 2
            except OSError:
                return False

        wait_for(counted, 30, 0.2, what="2 cancels in /metrics")
    finally:
        m.stop()


@pytest.mark.parametrize("name", ["polls", "awaits"])
def test_cancel_running_job_in_the_single_process_worker(config, pf_log, name):
    """The runner hears of it on its own beat (its housekeeping thread)."""
    from worker_process import Process

    runner = Process("cogworker.worker", APP, url=config.redis_url, env={"PF_LOG": pf_log})
    try:
        _cancel_once_started(config, pf_log, name, "w")
        assert len(starts(pf_log, "w")) == 1
    finally:
        assert runner.stop() == 0


def test_cancel_jobs_in_flight_with_concurrency(config, pf_log):
    """--concurrency 4: several jobs in one child, each told (one more per beat)."""
    m = master(config, pf_log, args=["--concurrency", "4"])
    try:
        jids = [job("polls").enqueue("f0", 60), job("polls").enqueue("f1", 60), job("awaits").enqueue("f2", 60)]
        wait_for(lambda: all(seen(pf_log, "start", f"f{i}") for i in range(3)), 20, what="three in flight")
        keep = job("polls").enqueue("f3", 3)  # not cancelled: ends on its own
        assert all(api.cancel(jid) for jid in jids)
        wait_for(lambda: all(seen(pf_log, "cancelled", f"f{i}") for i in range(3)), 20, what="each told")
        wait_for(lambda: seen(pf_log, "end", "f3"), 20, what="the other one's end")
        wait_for(lambda: nothing_left(config), 20, what="nothing left")
        time.sleep(1.5)
        assert [api.status(j).state for j in jids] == ["cancelled"] * 3
        assert api.status(keep).state == "succeeded"
        assert all(len(starts(pf_log, f"f{i}")) == 1 for i in range(4))
    finally:
        m.stop()


def test_cancel_iterable_job_stops_at_its_next_yield(config, pf_log):
    m = master(config, pf_log)
    try:
        jid = job("walks").enqueue("it")
        wait_for(lambda: seen(pf_log, "start", "it"), 20, what="the job started")
        assert api.cancel(jid) is True
        wait_for(lambda: "cancelled: apps.pf_cancel.walks" in m.output(), 20, what="it ended cancelled")
        wait_for(lambda: nothing_left(config), 20, what="nothing left")
        time.sleep(1.0)
        assert len(starts(pf_log, "it")) == 1 and not seen(pf_log, "end", "it")  # not resumed, not run out
        assert api.status(jid).state == "cancelled"
    finally:
        m.stop()
