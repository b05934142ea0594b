"""The demo's numbers (python -m examples.demo): the stats are written in batches, so a
prefork child hands its counts over as soon as its queues run dry, and the demo's lines
account for every job once nothing is queued, running or waiting."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from core_util import ran, run_worker_until
from test_first_hour import ROOT, load_app


def test_a_prefork_child_hands_its_stats_over_when_its_queues_run_dry(config, monkeypatch):
    from cogworker.engine import loop as worker_module
    from cogworker.prefork.pipe import PipeReporter

    class Handed(worker_module.Reporter):  # as a child's: counts handed over, then batched by the master
        stats_when_idle = PipeReporter.stats_when_idle

        def __init__(self, config):
            super().__init__(config)
            self.handed = 0

        def stats(self, snap):
            self.handed += snap["processed"]

    monkeypatch.setattr(worker_module, "STATS_INTERVAL", 3600.0)  # no periodic flush: only the idle one
    app = load_app()
    for i in range(3):
        app.add.enqueue(i, i)
    reporter = Handed(config)
    assert run_worker_until(lambda: reporter.handed == 3, 10, reporter=reporter)
    assert len(ran(config.redis())) == 3


DEMO_LINE = re.compile(
    r"processed=\s*(\d+) failed=\s*(\d+) queued=\s*(\d+) running=(\d+) scheduled=(\d+) "
    r"retry=(\d+) dead=(\d+)"
)
DEMO_JOBS = 2000 + 200 + 50 + 1  # what examples/demo.py enqueues (the periodic entry adds more)


def test_the_demos_counters_account_for_every_job_once_the_queues_are_empty(own_redis):
    env = {**os.environ, "COGWORKER_REDIS_URL": own_redis.url, "DEMO_SECONDS": "10", "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "examples.demo"], capture_output=True, text=True, timeout=90, env=env, cwd=ROOT
    )
    assert result.returncode == 0 and "worker stopped (exit 0)" in result.stdout, result.stdout + result.stderr
    lines = [tuple(map(int, m.groups())) for m in DEMO_LINE.finditer(result.stdout)]
    idle = [line for line in lines if line[2:6] == (0, 0, 0, 0)]  # nothing queued, running, scheduled, retrying
    assert idle, result.stdout
    for processed, _failed, _q, _run, _s, _retry, dead in idle:
        assert processed + dead >= DEMO_JOBS, result.stdout


def test_ctrl_c_stops_the_demos_worker_gracefully():
    """Ctrl-C goes to the terminal's whole foreground group: the worker must get one stop
    signal (the demo's TERM), not that SIGINT and then the TERM, a second signal that
    stops at once and kills every child (issue #31, point 1); and the demo's private
    redis-server must outlive the worker's stop."""
    import signal

    env = {**os.environ, "DEMO_SECONDS": "30", "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)
    env.pop("COGWORKER_REDIS_URL", None)  # the demo's own private redis-server
    demo = subprocess.Popen(
        [sys.executable, "-m", "examples.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out = []
        for line in demo.stdout:
            out.append(line)
            if "t=" in line:  # watching: the worker is up
                os.killpg(demo.pid, signal.SIGINT)  # as the terminal does
                break
        out += demo.stdout.readlines()
        assert demo.wait(60) == 0
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    text = "".join(out)
    assert "worker stopped (exit 0)" in text, text
    assert "second" not in text and "SIGKILL" not in text and "killed" not in text, text
    assert "Redis unavailable" not in text and "orphan recovery" not in text, text
