"""Sentinel (docs/architecture.md#sentinel): every face of cogworker against a
redis+sentinel:// URL of a real deployment on loopback (a master, a replica, 3 sentinels),
a SIGKILLed master under a running prefork worker, a demoted master's READONLY, and the
password kept out of every message, log line and process title. The URL's bad forms are
one-line errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import psutil
import pytest
from apps import sentinel_app
from prefork_harness import TESTS, Master, wait_for
from redis_server import free_port
from sentinel_util import (  # noqa: F401 (fixtures)
    PASSWORD,
    enqueue_async,
    finish,
    runs,
    scraped,
    sentinel_config,
    sentinels,
    try_enqueue,
)

import cogworker
from cogworker import api
from cogworker.config import redact_url
from cogworker.store import errors as redis_errors
from cogworker.store import sentinel as sentinel_url

BAD = [
    ("redis+sentinel://:pw@/svc/0", "no sentinel host"),
    ("redis+sentinel://:pw@h1:26379,,h2/svc", "no sentinel host"),
    ("redis+sentinel://:pw@h1:abc/svc", "the port must be a number"),
    ("redis+sentinel://:pw@h1:70000/svc", "port out of range"),
    ("redis+sentinel://:pw@h1:26379", "no service name"),
    ("redis+sentinel://:pw@h1:26379/", "no service name"),
    ("redis+sentinel://:pw@h1:26379/svc/x", "the database must be a number"),
    ("redis+sentinel://:pw@h1:26379/svc/0/more", "nothing more"),
]


@pytest.mark.parametrize(("url", "why"), BAD)
def test_a_bad_sentinel_url_is_one_line_without_the_password(url, why):
    with pytest.raises(cogworker.ConfigurationError) as caught:
        cogworker.Config(redis_url=url)
    message = str(caught.value)
    assert why in message and "\n" not in message
    assert "pw" not in message.replace("pw@", "") and ":***@" in message


def test_a_sentinel_url_is_parsed_and_redacted():
    url = "rediss+sentinel://:se%40cret@h1:26380,[::1],h3/mysvc/3?sentinel_password=sp&ssl_cert_reqs=none"
    target = sentinel_url.parse(url)
    assert target.sentinels == [("h1", 26380), ("::1", 26379), ("h3", 26379)]
    assert (target.service, target.db, target.tls, target.password) == ("mysvc", 3, True, "se@cret")
    assert target.sentinel_password == "sp" and target.options == {"ssl_cert_reqs": "none"}
    shown = redact_url(url)
    assert "se%40cret" not in shown and "sp&" not in shown and ":***@h1" in shown
    assert "sentinel_password=***" in shown
    assert "se%40cret" not in repr(cogworker.Config(redis_url=url))


def test_a_plain_sentinel_url_leaves_tls_options_out(caplog):
    config = cogworker.Config(redis_url="redis+sentinel://:pw@h1/svc?ssl_cert_reqs=none")
    assert "ssl_cert_reqs" not in config.client_url
    assert "pw" not in caplog.text.replace("pw@", "")


def test_every_face_works_through_sentinel(sentinels, sentinel_config, tmp_path):  # noqa: F811
    log = tmp_path / "runs.log"
    url = sentinels.url()
    env = {"COGWORKER_TEST_LOG": str(log)}
    os.environ["COGWORKER_TEST_LOG"] = str(log)  # for the enqueues' registry only: nothing runs here
    sentinel_app.logged.enqueue("sync")
    asyncio.run(enqueue_async("async"))
    # The data is on the master the sentinels name.
    assert sentinels.master.client().llen("cogworker:queue:default") == 2
    assert api.stats().enqueued == 2 and any(q.name == "default" for q in api.queues())
    port = free_port()
    master = Master(url, module="apps.sentinel_app", procs=2, args=["--metrics-port", str(port)], env=env)
    try:
        wait_for(lambda: runs(log)[1]["sync"] == 1 and runs(log)[1]["async"] == 1, 60, 0.05, "both jobs ran")
        wait_for(
            lambda: any(name == "cogworker_jobs_total" for name, _ in scraped(port) or {}),
            60,
            0.2,
            "/metrics counting the jobs",
        )
        titles = _titles(master.pid)
        assert titles and not any(PASSWORD in t for t in titles)
        _cli_and_web_work(url)
    finally:
        output = finish(master)
    assert PASSWORD not in output
    # The single-process runner too.
    sentinel_app.logged.enqueue("runner")
    runner = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "apps.sentinel_app", "--redis-url", url],
        cwd=str(TESTS),
        env={**os.environ, "PYTHONPATH": str(TESTS), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: runs(log)[1]["runner"] == 1, 60, 0.05, "the runner ran its job")
    finally:
        runner.terminate()
        output = runner.communicate(timeout=40)[0].decode(errors="replace")
    assert PASSWORD not in output and "redis+sentinel://:***@" in output


def _titles(pid):
    found = []
    for proc in [psutil.Process(pid), *psutil.Process(pid).children()]:
        try:
            found.append(" ".join(proc.cmdline()))
        except psutil.Error:
            pass
    return found


def _cli_and_web_work(url):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "cogworker", "stats", "--redis-url", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=str(TESTS),
    )
    assert result.returncode == 0, result.stderr
    assert "default" in result.stdout and PASSWORD not in result.stdout + result.stderr
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    page = TestClient(create_app(), base_url="http://localhost").get("/")
    assert page.status_code == 200 and PASSWORD not in page.text


def test_a_killed_master_is_replaced_under_a_running_prefork_worker(sentinels, sentinel_config, tmp_path):  # noqa: F811
    log, master = _logged_master(sentinels, tmp_path, 2)
    try:
        sentinel_app.logged.enqueue("before")
        wait_for(lambda: runs(log)[1]["before"] == 1, 60, 0.05, "a job before the failover")
        old = sentinels.kill_master().port
        new = sentinels.wait_failover(old)
        assert new != old
        # Enqueue against the promoted replica (the client follows too), and the worker runs it.
        tags = [f"after-{i}" for i in range(5)]
        for tag in tags:
            wait_for(lambda tag=tag: try_enqueue(tag), 30, 0.1, "an enqueue after the failover")
        wait_for(lambda: all(runs(log)[1][t] >= 1 for t in tags), 60, 0.1, "the worker followed the new master")
        assert master.proc.poll() is None
    finally:
        output = finish(master)
    assert PASSWORD not in output


def _logged_master(group, tmp_path, procs):
    """A prefork master of apps.sentinel_app through the sentinels, its jobs' runs logged to
    ``tmp_path/runs.log`` (this process enqueues with the same log named: its registry)."""
    log = tmp_path / "runs.log"
    os.environ["COGWORKER_TEST_LOG"] = str(log)
    return log, Master(group.url(), module="apps.sentinel_app", procs=procs, env={"COGWORKER_TEST_LOG": str(log)})


def test_a_demoted_master_answers_readonly_and_every_process_follows(sentinels, sentinel_config, tmp_path):  # noqa: F811
    """SENTINEL FAILOVER demotes a live master: connections still open to it get READONLY
    (an outage: the pool is dropped), and the next connect asks the sentinels again."""
    log = tmp_path / "runs.log"
    os.environ["COGWORKER_TEST_LOG"] = str(log)
    old = sentinels.master
    direct = old.client()
    with pytest.raises(cogworker.store.ReadOnlyError) as caught:
        sentinels.sentinel_client().execute_command("SENTINEL", "FAILOVER", "cogworker")
        wait_for(lambda: sentinels.master_port() not in (None, old.port), 30, 0.05, "the manual failover")
        wait_for(lambda: old.client().info("replication")["role"] == "slave", 30, 0.05, "the demotion")
        direct.set("x", 1)
    assert redis_errors.is_outage(caught.value) and redis_errors.classify(caught.value) == redis_errors.READONLY
    master = Master(sentinels.url(), module="apps.sentinel_app", procs=1, env={"COGWORKER_TEST_LOG": str(log)})
    try:
        tag = uuid.uuid4().hex
        wait_for(lambda: try_enqueue(tag), 30, 0.1, "an enqueue after the demotion")
        wait_for(lambda: runs(log)[1][tag] == 1, 60, 0.05, "the job ran on the promoted master")
        assert sentinels.master.client().llen("cogworker:queue:default") == 0
    finally:
        master.stop()


def test_a_worker_moves_off_a_master_demoted_under_it(sentinels, sentinel_config, tmp_path):  # noqa: F811
    log, master = _logged_master(sentinels, tmp_path, 1)
    try:
        sentinel_app.logged.enqueue("first")
        wait_for(lambda: runs(log)[1]["first"] == 1, 60, 0.05, "a job on the first master")
        old = sentinels.master.port
        sentinels.sentinel_client().execute_command("SENTINEL", "FAILOVER", "cogworker")
        sentinels.wait_failover(old)
        wait_for(lambda: sentinels.node(old).client().info("replication")["role"] == "slave", 30, 0.05, "the demotion")
        deadline = time.monotonic() + 60
        tag = "second"
        wait_for(lambda: try_enqueue(tag), 30, 0.1, "an enqueue on the new master")
        wait_for(lambda: runs(log)[1][tag] == 1, deadline - time.monotonic(), 0.05, "the worker followed")
        assert master.proc.poll() is None
    finally:
        master.stop()


def test_a_held_connection_reconnects_to_the_master_the_sentinels_name(sentinels, sentinel_config):  # noqa: F811
    """The look-ahead holds a connection of its own and writes to it directly: a send on
    it, never opened or dropped, connects through the sentinels (redis-py's own would go to
    the address it had: localhost:6379 on a new one, the old master after a failover)."""
    conn = sentinel_config.redis().connection_pool.make_connection()
    conn.send_packed_command(conn.pack_command("PING"))
    assert conn.read_response() == b"PONG" and conn.port == sentinels.master.port
    old = sentinels.kill_master().port
    new = sentinels.wait_failover(old)
    with pytest.raises(cogworker.store.ConnectionError):
        conn.send_packed_command(conn.pack_command("PING"))
        conn.read_response()
    conn.send_packed_command(conn.pack_command("PING"))  # dropped by the failed read: connects anew
    assert conn.read_response() == b"PONG" and conn.port == new
    conn.disconnect()


@pytest.mark.parametrize(
    "command",
    [
        ["cogworker", "redis+sentinel://:pw-zq9@h1/svc", "stats"],
        ["cogworker.prefork.cli", "--redis-url", "redis+sentinel://:pw-zq9@h1/svc/x", "apps.sentinel_app"],
        ["cogworker.prefork.cli", "apps.sentinel_app", "redis+sentinel://:pw-zq9@h1/svc"],
    ],
)
def test_a_bad_command_line_never_shows_the_password(command):
    """argparse quotes a bad argument whole: every URL in its one line is redacted."""
    result = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(TESTS),
        env={**os.environ, "PYTHONPATH": str(TESTS)},
    )
    assert result.returncode == 2
    assert "pw-zq9" not in result.stdout + result.stderr and len(result.stderr.strip().splitlines()) == 1
