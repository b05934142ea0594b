"""A command line that doesn't say what was meant never runs a worker: a mistyped
subcommand is a usage error with the commands it may have meant, and a worker whose module
registers no job refuses to start (each command: one line, exit 2, the queued job left
alone). And the namespace from the environment (``COGWORKER_NAMESPACE``) for every command,
options before the subcommand, and ``health`` saying which namespace it looked in. Real
processes on a real redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from core_util import wait_for
from redis_server import RedisServer
from worker_process import Process

import cogworker
from cogworker import api
from cogworker.client.jobs import by_name

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def server() -> Iterator[RedisServer]:
    started = RedisServer().start()
    yield started
    cogworker.config._config = None
    started.cleanup()


def run(
    *args: str, url: str, env: dict[str, str] | None = None, cwd: str = TESTS_DIR
) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` on ``url``; a worker that starts by mistake never ends by itself:
    the timeout fails the test."""
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS_DIR, cwd]), "COGWORKER_REDIS_URL": url, **(env or {})}
    full.pop("REDIS_URL", None)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=30, cwd=cwd, env=full)


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stderr, result.stdout)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def queued_job(url: str, namespace: str = "cogworker") -> tuple[cogworker.Config, str]:
    cogworker.config._config = None
    config = cogworker.configure(redis_url=url, namespace=namespace)
    jid = by_name("apps.cli_jobs.add").enqueue(1, 2)
    assert jid
    return config, jid


# -- 3. a mistyped subcommand, a module without jobs ----------------------------------------------


def test_a_mistyped_subcommand_is_a_usage_error_that_says_what_was_meant(server):
    config, jid = queued_job(server.url, "x")
    # Before: the standard library's `stat` module imported as the app, a worker started on
    # namespace x, and the queued job taken and failed as unknown.
    line = one_line(run("cogworker", "stat", "--namespace", "x", url=server.url), 2)
    assert line.startswith("cogworker: error: unknown command 'stat' (did you mean stats") and "?" in line, line
    assert "cogworker worker MODULE" in line
    line = one_line(run("cogworker", "--namespace", "x", "proccesses", url=server.url), 2)
    assert "did you mean processes?" in line, line
    line = one_line(run("cogworker", "frobnicate", url=server.url), 2)
    assert "unknown command 'frobnicate' (see cogworker --help" in line, line
    assert api.queue("default", config).size() == 1 and api.locate(jid, config).source == "queue:default"


def test_a_worker_on_a_module_that_registers_no_job_refuses_to_start(server, tmp_path: Path):
    config, jid = queued_job(server.url)
    (tmp_path / "nojobs_app.py").write_text("SETTING = 1  # an app module with no @job in it\n")
    commands = [
        ("cogworker", "worker", "nojobs_app"),
        ("cogworker.worker", "nojobs_app"),
        ("cogworker.prefork.cli", "--procs", "1", "nojobs_app"),
        ("cogworker", "worker", "stat"),  # the standard library's, named as the app
    ]
    for command in commands:
        line = one_line(run(*command, url=server.url, cwd=str(tmp_path)), 2)
        module = command[-1]
        assert f"{module!r} registers no job" in line, (command, line)
        assert line.startswith(("cogworker: ", "cogworker-prefork: ")), line
    assert api.queue("default", config).size() == 1 and api.locate(jid, config).source == "queue:default"


# -- 4. COGWORKER_NAMESPACE, options before the subcommand, health's namespace ------------------


def test_the_namespace_from_the_environment_for_every_command(server):
    config, jid = queued_job(server.url, "shop")
    env = {"COGWORKER_NAMESPACE": "shop"}
    listed = run("cogworker", "queue", "default", "--json", url=server.url, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [job["jid"] for job in json.loads(listed.stdout)["jobs"]] == [jid]
    # Options before the subcommand: the same as after it.
    before = run("cogworker", "--namespace", "shop", "--json", "job", jid, url=server.url)
    assert before.returncode == 0 and json.loads(before.stdout)["jid"] == jid, before.stderr
    assert run("cogworker", "--namespace=shop", "job", jid, url=server.url).returncode == 0
    assert one_line(run("cogworker", "job", jid, url=server.url), 1)  # not in the default namespace
    bad = one_line(run("cogworker", "stats", url=server.url, env={"COGWORKER_NAMESPACE": "a b"}), 2)
    assert bad == "cogworker: COGWORKER_NAMESPACE: invalid namespace 'a b': no spaces or control characters", bad
    # A worker started with nothing but the environment works the app's namespace.
    worker = Process("cogworker", "worker", "apps.cli_jobs", url=server.url, env=env)
    try:
        assert wait_for(lambda: api.queue("default", config).size() == 0, 30), worker.output()
        assert wait_for(lambda: getattr(api.status(jid, config), "state", None) == "succeeded", 30), worker.output()
    finally:
        assert worker.stop() == 0


def test_health_says_which_namespace_it_looked_in(server):
    env = {"COGWORKER_NAMESPACE": "shop"}
    master = Process("cogworker.prefork.cli", "--procs", "1", "apps.cli_jobs", url=server.url, env=env)
    try:
        found = lambda: run("cogworker", "health", url=server.url, env=env)  # noqa: E731
        assert wait_for(lambda: found().returncode == 0, 60), master.output()
        healthy = found()
        assert healthy.stdout.startswith("ok: master ") and "in namespace 'shop'" in healthy.stdout, healthy.stdout
        assert json.loads(run("cogworker", "health", "--json", url=server.url, env=env).stdout)["namespace"] == "shop"
        # Without the variable: the default namespace, which holds no master, and the line says so.
        result = run("cogworker", "health", url=server.url)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        line = result.stderr.splitlines()[0]  # (then the test Redis's warning: it persists nothing)
        assert "no master on host" in line and "in namespace 'cogworker'" in line, line
    finally:
        assert master.stop() == 0
