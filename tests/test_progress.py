"""current_job().progress (issue #27): seen by the API while the job runs (a real prefork
master), written at most once per 0.5 s per job however often it is called (counted by
Redis itself), the last value flushed at the end; the bounds, with time injected."""

from __future__ import annotations

import json

import pytest
from apps.pf_faults import events
from prefork_harness import Master, wait_for

import cogworker
from cogworker import api
from cogworker.client.jobs import by_name
from cogworker.core.current import MESSAGE_LIMIT, ProgressWriter, progress_record


def set_calls(config):
    stats = config.redis().info("commandstats")
    return stats.get("cmdstat_set", {}).get("calls", 0)


def test_progress_seen_while_running(config, tmp_path):
    log = str(tmp_path / "runs.log")
    m = Master(config.redis_url, module="apps.pf_cancel", procs=1, env={"PF_LOG": log})
    try:
        m.wait_children()
        before = set_calls(config)
        jid = by_name("apps.pf_cancel.reports").enqueue("p", 20000, 2.0)
        wait_for(lambda: any(e[0] == "half" for e in events(log)), 30, what="half-way")
        # Stalled half-way: what it reported last (0.5) is in Redis, whatever the timer's lag.
        shown = wait_for(lambda: (p := api.progress(jid)) and p.fraction >= 0.5 and p, 5, what="its progress")
        assert shown.message == "row 10000/20000"
        # "running" is written at the worker's next status flush (about a second)
        status = wait_for(lambda: (s := api.status(jid)) and s.state == "running" and s, 5, what="running")
        assert status.progress == 0.5 and status.progress_message == "row 10000/20000"
        wait_for(lambda: any(e[0] == "end" for e in events(log)), 30, what="the end")
        wait_for(lambda: api.progress(jid).fraction == 1.0, 5, what="the last value, flushed")
        assert api.progress(jid).message == "done"
        took = events(log)[-1][3] - events(log)[0][3]
        writes = set_calls(config) - before
        # 20,001 calls: at most one write per 0.5 s (plus the first, and the flush at the end)
        assert 2 <= writes <= took / 0.5 + 3, (writes, took)
        ttl = config.redis().ttl(config.keys.progress(jid))
        assert 0 < ttl <= config.status_ttl
    finally:
        m.stop()


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Timers:
    """schedule(delay, fn) that runs only when the test says time has come."""

    def __init__(self, clock):
        self.clock = clock
        self.due = []

    def __call__(self, delay, fn):
        timer = _Timer(self.clock.now + delay, fn)
        self.due.append(timer)
        return timer

    def advance(self, seconds):
        self.clock.now += seconds
        for timer in list(self.due):
            if not timer.cancelled and timer.at <= self.clock.now:
                self.due.remove(timer)
                timer.fn()


class _Timer:
    def __init__(self, at, fn):
        self.at, self.fn, self.cancelled = at, fn, False

    def cancel(self):
        self.cancelled = True


def test_writes_coalesced_with_time_injected():
    clock = Clock()
    timers = Timers(clock)
    written = []
    writer = ProgressWriter(written.append, interval=0.5, clock=clock, schedule=timers)
    for i in range(1000):  # 1000 calls over 1 s of the injected clock
        writer.report(str(i))
        timers.advance(0.001)
    # t=0 at once, then the timer at 0.5 and at 1.0 with the latest value each time
    assert len(written) <= 3
    assert written[0] == "0"
    writer.flush()
    assert written[-1] == "999"  # the last value wins, flushed at the end
    assert len(written) <= 4
    writer.flush()  # nothing waiting: no write
    assert written[-1] == "999" and len(written) <= 4


def test_a_quiet_job_writes_at_once():
    clock = Clock()
    written = []
    writer = ProgressWriter(written.append, clock=clock, schedule=Timers(clock))
    writer.report("a")
    clock.now += 10
    writer.report("b")
    assert written == ["a", "b"]


def test_a_failing_write_never_fails_the_job():
    def broken(value):
        raise ConnectionError("Redis away")

    writer = ProgressWriter(broken, clock=Clock(), schedule=lambda d, f: None)
    writer.report("x")  # logged, not raised


def test_record_bounds():
    record = json.loads(progress_record(0.25, "x" * 10_000, 1.0))
    assert record["fraction"] == 0.25 and len(record["message"]) == MESSAGE_LIMIT
    for bad in (-0.1, 1.5, float("nan"), "half", True, None):
        with pytest.raises(ValueError, match="progress must be a number from 0 to 1"):
            progress_record(bad, None, 1.0)
    with pytest.raises(TypeError, match="message must be a string"):
        progress_record(0.5, 42, 1.0)


def test_outside_a_job():
    assert cogworker.current_job() is None


def test_current_job_under_inline(config):
    from cogworker import testing

    seen = []

    @cogworker.job
    def reports_inline(n):
        job = cogworker.current_job()
        for i in range(n):
            job.progress(i / n, f"{i}")
        seen.append((job.jid, job.cancelled, job.last_progress))

    with testing.inline():
        jid = reports_inline.enqueue(4)
    assert seen == [(jid, False, (0.75, "3"))]
    assert config.redis().get(config.keys.progress(jid)) is None  # inline: nothing reaches Redis
    assert cogworker.current_job() is None
