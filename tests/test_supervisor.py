"""The master that only supervises: its signals each go to one small method; the
housekeeping duties (shared with the single-process runner) go on when one of them
fails; the entry points (``python -m cogworker``, the ``cogworker`` script) run the
runner; ``import cogworker`` is lazy (no redis-py before the prefork title is set)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from apps import core_jobs
from core_util import ran, wait_for

import cogworker
from cogworker.fleet.housekeeping import Housekeeping
from cogworker.lifecycle import stats
from cogworker.prefork.master import Master, Settings
from cogworker.store.guard import Breaker

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


# -- signals ------------------------------------------------------------------------------------


def test_each_signal_goes_to_its_own_method(config):
    master = Master(Settings(module="apps.core_jobs", procs=1, queues=[("default", None)]), config)
    expected = {
        signal.SIGTERM: "on_stop",
        signal.SIGINT: "on_stop",
        signal.SIGTSTP: "on_quiet",
        signal.SIGTTIN: "on_more",
        signal.SIGTTOU: "on_fewer",
        signal.SIGHUP: "on_restart",
    }
    assert {sig: handler.__name__ for sig, handler in master.on_signal.items()} == expected
    calls = []
    master.on_signal = {sig: (lambda s, name=name: calls.append((name, s))) for sig, name in expected.items()}
    master.signals.extend([signal.SIGHUP, signal.SIGTTIN, signal.SIGUSR2, signal.SIGTERM])
    master.handle_signals()
    assert calls == [("on_restart", signal.SIGHUP), ("on_more", signal.SIGTTIN), ("on_stop", signal.SIGTERM)]
    assert not master.signals


def test_the_signal_methods_change_the_masters_state(config):
    master = Master(Settings(module="apps.core_jobs", procs=2, queues=[("default", None)]), config)
    for sig in (signal.SIGTTIN, signal.SIGTTIN, signal.SIGTTOU):
        master.signals.append(sig)
    master.handle_signals()
    assert master.target == 3
    master.signals.extend([signal.SIGTSTP, signal.SIGTERM])
    master.handle_signals()
    assert master.quiet and master.stopping and not master.stop_now
    master.signals.append(signal.SIGINT)  # the second: stop now
    master.handle_signals()
    assert master.stop_now


# -- housekeeping -------------------------------------------------------------------------------


def keeper_for(config, beats: list[float], **kwargs) -> Housekeeping:
    return Housekeeping(
        config,
        Breaker("housekeeping", config),
        beat=lambda: beats.append(time.monotonic()),
        own=lambda: ["me"],
        cron=False,
        **kwargs,
    )


def drive(keeper: Housekeeping, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        keeper.run_due()
        time.sleep(max(0.005, min(0.05, keeper.seconds_to_next())))


def test_a_duty_failing_does_not_starve_the_others(own_config, caplog):
    """A key of the wrong type (orphan recovery, the stats flush) and a bug (the heartbeat)
    are logged; the scheduled poller still moves due jobs, recovery still passes."""
    config = own_config
    r = config.redis()
    r.set(config.keys.in_progress_identities, "a string")
    r.hset(config.keys.stats_processed, "a", "hash")
    jid = core_jobs.record.enqueue_at(time.time() - 1, "due")
    buffer = stats.StatsBuffer()
    buffer.record("apps.core_jobs.record", True, 1.0)

    def broken_beat() -> None:
        raise ZeroDivisionError("a bug in the heartbeat")

    keeper = Housekeeping(
        config, Breaker("housekeeping", config), beat=broken_beat, own=lambda: ["me"], cron=False, counters=buffer
    )
    with caplog.at_level(logging.ERROR, logger="cogworker"):
        drive(keeper, 1.5)
    assert [json.loads(raw)["jid"] for raw in r.lrange(config.keys.queue("default"), 0, -1)] == [jid]
    assert keeper.recovery.completed_passes >= 1
    assert "heartbeat failed: ZeroDivisionError" in caplog.text
    assert "Traceback" in caplog.text  # a bug: with its traceback
    assert "stats flush failed (a key of the wrong type; skipped)" in caplog.text
    # rescheduled, not retried in a hot loop: once per heartbeat_interval
    assert caplog.text.count("heartbeat failed") == 1 + int(1.5 // config.heartbeat_interval)


def test_an_outage_is_logged_once_and_backed_off(own_redis, own_config, caplog):
    config = own_config
    beats: list[float] = []
    keeper = keeper_for(config, beats)
    drive(keeper, 0.2)
    assert beats and keeper.recovery.completed_passes == 1
    own_redis.pause()
    try:
        with caplog.at_level(logging.DEBUG, logger="cogworker"):
            drive(keeper, 2.5)
    finally:
        own_redis.resume()
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(errors) == 1 and "housekeeping: " in errors[0].getMessage(), [e.getMessage() for e in errors]
    assert "retrying with backoff" in errors[0].getMessage()
    caplog.clear()
    resumed = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="cogworker"):
        assert wait_for(lambda: (drive(keeper, 0.2), beats[-1] > resumed)[1], 10)
    assert "housekeeping: Redis is back after" in caplog.text


def test_the_runners_thread_is_the_housekeeping_component(config):
    from cogworker.engine.loop import Worker
    from cogworker.worker.runner import Housekeeper

    keeper = Housekeeper(Worker([("default", None)], block_timeout=0.2), ["default"], cron=False)
    assert isinstance(keeper.duties, Housekeeping)
    assert keeper.duties.counters is None  # the worker flushes its own counters


# -- entry points -------------------------------------------------------------------------------


def test_python_dash_m_cogworker_is_the_cogworker_command():
    out = subprocess.run(
        [sys.executable, "-m", "cogworker", "--version"], capture_output=True, text=True, timeout=30, cwd=TESTS_DIR
    )
    assert out.returncode == 0 and out.stdout.strip() == f"cogworker {cogworker.__version__}"
    out = subprocess.run(
        [sys.executable, "-m", "cogworker", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=TESTS_DIR,
    )
    assert "Run cogworker in one process" in out.stdout and out.stdout.startswith("usage: cogworker worker")


def test_the_cogworker_script_runs_the_runner(config):
    script = shutil.which("cogworker", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("the package is not installed with its scripts")
    out = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == f"cogworker {cogworker.__version__}"
    env = dict(os.environ, COGWORKER_REDIS_URL=config.redis_url, PYTHONPATH=TESTS_DIR)
    proc = subprocess.Popen(
        [script, "apps.core_jobs", "-q", "default"],
        cwd=TESTS_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        core_jobs.record.enqueue("by the script")
        assert wait_for(lambda: ran(config.redis()) == ["record:by the script"], 15)
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=20)[0].decode()
    assert proc.returncode == 0, output
    assert "worker" in output and "cogworker: stopped" in output
    # `cogworker MODULE` (before the subcommands) still runs the worker, for a release, and says so.
    assert "`cogworker apps.core_jobs` is deprecated" in output and "use `cogworker worker apps.core_jobs`" in output


def test_import_cogworker_is_lazy():
    code = (
        "import sys, cogworker, cogworker.prefork.cli; "
        "assert 'redis' not in sys.modules, 'redis imported'; "
        "assert callable(cogworker.job) and cogworker.Config and cogworker.__version__; "
        "from cogworker import *; assert 'redis' in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "ok", out.stderr
