"""The worker loop class: one identity, one job at a time, no signal handling of its
own, stoppable (and quietable) from outside."""

from __future__ import annotations

import signal
import threading
import time

from apps import core_jobs
from core_util import RunningWorker, ran, wait_for

from cogworker.engine.loop import Worker


def test_runs_in_the_main_thread_without_touching_signals(config):
    r = config.redis()
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTSTP)}
    for i in range(3):
        core_jobs.record.enqueue(i)
    w = Worker([("default", None)], block_timeout=0.1, max_jobs=3)
    w.run()  # returns after max_jobs
    assert ran(r) == ["record:0", "record:1", "record:2"]
    assert {s: signal.getsignal(s) for s in before} == before
    assert r.llen(config.keys.in_progress(w.identity)) == 0


def test_one_job_at_a_time(config):
    r = config.redis()
    for i in range(3):
        core_jobs.sleepy.enqueue(i, 0.2)
    with RunningWorker():
        assert wait_for(lambda: len(ran(r)) == 6)
    assert ran(r) == ["start:0", "done:0", "start:1", "done:1", "start:2", "done:2"]


def test_stop_from_another_thread_finishes_the_running_job(config):
    r = config.redis()
    core_jobs.sleepy.enqueue("s", 0.5)
    core_jobs.record.enqueue("never")
    rw = RunningWorker()
    with rw as w:
        assert wait_for(lambda: "start:s" in ran(r))
        w.stop()
        rw.thread.join(10)
        assert not rw.alive
    assert ran(r) == ["start:s", "done:s"]
    assert r.llen(config.keys.in_progress(w.identity)) == 0
    assert r.llen(config.keys.queue("default")) == 1


def test_quiet_stops_fetching_and_settles_what_ran(config):
    r = config.redis()
    core_jobs.sleepy.enqueue("q", 0.4)
    with RunningWorker() as w:
        assert wait_for(lambda: "start:q" in ran(r))
        w.quiet()
        core_jobs.record.enqueue("not while quiet")
        assert wait_for(lambda: "done:q" in ran(r))
        # Its ack doesn't wait for a fetch that a quiet worker won't make.
        assert wait_for(lambda: r.llen(config.keys.in_progress(w.identity)) == 0, timeout=3)
        time.sleep(0.5)
        assert r.llen(config.keys.queue("default")) == 1
    assert ran(r) == ["start:q", "done:q"]


def test_should_stop_callback(config):
    r = config.redis()
    flag = threading.Event()
    for i in range(2):
        core_jobs.record.enqueue(i)
    w = Worker([("default", None)], block_timeout=0.1, should_stop=flag.is_set)
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    assert wait_for(lambda: len(ran(r)) == 2)
    flag.set()
    thread.join(10)
    assert not thread.is_alive()
    assert r.llen(config.keys.in_progress(w.identity)) == 0
