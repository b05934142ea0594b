"""``python -m cogworker.worker MODULE``, as a real subprocess: it runs jobs (and due
scheduled jobs); SIGTERM stops it with exit 0 and nothing left in progress; a job longer
than the stop is finished; a second SIGTERM hands the running job back to its queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from apps import core_jobs
from core_util import old_redis_code, ran, wait_for

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


class Runner:
    def __init__(self, url: str, *args: str, code: str | None = None) -> None:
        env = dict(os.environ, COGWORKER_REDIS_URL=url, PYTHONUNBUFFERED="1")
        env.pop("REDIS_URL", None)
        self.log = tempfile.TemporaryFile()
        cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "cogworker.worker", *args]
        self.proc = subprocess.Popen(cmd, cwd=TESTS_DIR, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def term(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 20) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"runner did not exit; output:\n{self.output()}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def start(config, redis_server):
    started: list[Runner] = []

    def _start(*args: str, code: str | None = None) -> Runner:
        runner = Runner(redis_server.url, *(args or ("apps.core_jobs", "--no-cron")), code=code)
        started.append(runner)
        return runner

    yield _start
    for runner in started:
        runner.close()


def _nothing_in_progress(r, config) -> bool:
    return all(r.llen(key) == 0 for key in r.keys(config.keys.in_progress_prefix + "*"))


def test_runs_jobs_and_stops_on_sigterm(config, start):
    r = config.redis()
    for i in range(10):
        core_jobs.record.enqueue(i)
    runner = start()
    assert wait_for(lambda: len(ran(r)) == 10, timeout=20), runner.output()
    assert wait_for(lambda: r.scard(config.keys.processes) == 1)
    runner.term()
    assert runner.wait() == 0, runner.output()
    assert sorted(ran(r)) == sorted(f"record:{i}" for i in range(10))
    assert _nothing_in_progress(r, config)
    assert r.scard(config.keys.processes) == 0  # deregistered
    assert r.scard(config.keys.in_progress_identities) == 0
    assert r.get(config.keys.stats_processed) == b"10"


def test_runs_due_scheduled_jobs(config, start):
    r = config.redis()
    core_jobs.record.enqueue_in(0.5, "scheduled")
    runner = start()
    assert wait_for(lambda: ran(r) == ["record:scheduled"], timeout=15), runner.output()
    runner.term()
    assert runner.wait() == 0


def test_a_job_longer_than_the_stop_is_finished(config, start):
    r = config.redis()
    core_jobs.sleepy.enqueue("long", 1.5)
    core_jobs.record.enqueue("not started")
    runner = start()
    assert wait_for(lambda: "start:long" in ran(r), timeout=15), runner.output()
    runner.term()
    assert runner.wait() == 0, runner.output()
    assert ran(r) == ["start:long", "done:long"]
    assert _nothing_in_progress(r, config)
    # The job that never started is still on its queue.
    assert [json.loads(x)["args"] for x in r.lrange(config.keys.queue("default"), 0, -1)] == [["not started"]]


def test_second_sigterm_hands_the_running_job_back(config, start):
    r = config.redis()
    jid = core_jobs.sleepy.enqueue("longer", 30)
    runner = start()
    assert wait_for(lambda: "start:longer" in ran(r), timeout=15), runner.output()
    runner.term()
    time.sleep(0.3)
    assert runner.proc.poll() is None  # still finishing the job
    runner.term()
    assert runner.wait() == 0, runner.output()
    assert ran(r) == ["start:longer"]
    [payload] = [json.loads(x) for x in r.lrange(config.keys.queue("default"), 0, -1)]
    assert payload["jid"] == jid and "error_class" not in payload
    assert _nothing_in_progress(r, config)
    assert r.zcard(config.keys.retry) == 0 and r.zcard(config.keys.dead) == 0


OLD_REDIS = old_redis_code("cogworker.worker.runner")


def test_old_redis_stops_the_runner_with_a_clear_error(config, start):
    core_jobs.record.enqueue("never")
    runner = start("apps.core_jobs", "--no-cron", code=OLD_REDIS)
    code = runner.wait()
    assert code != 0
    assert "6.0.9" in runner.output() and "6.2" in runner.output()
    assert "Traceback" not in runner.output()
    assert config.redis().llen(config.keys.queue("default")) == 1


def test_an_unimportable_module_is_a_clear_error(config, start):
    runner = start("apps.no_such_module")
    assert runner.wait() != 0
    assert "can't import 'apps.no_such_module'" in runner.output()
    assert "Traceback" not in runner.output()


def test_the_single_process_worker_sets_its_process_title(config, start):
    """As the prefork processes do (issue #31, point 6): ``ps`` says what it does."""
    import psutil

    def title():
        return " ".join(psutil.Process(runner.proc.pid).cmdline()).strip()

    r = config.redis()
    runner = start()
    assert wait_for(lambda: title() == "cogworker: worker apps.core_jobs idle", timeout=15), (title(), runner.output())
    core_jobs.sleepy.enqueue("titled", 2)
    assert wait_for(lambda: "start:titled" in ran(r), timeout=15), runner.output()
    assert title().startswith("cogworker: worker apps.core_jobs busy apps.core_jobs.sleepy jid="), title()
    runner.term()
    assert wait_for(lambda: title() == "cogworker: worker apps.core_jobs stopping", timeout=5), title()
    assert runner.wait() == 0, runner.output()
