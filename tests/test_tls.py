"""rediss:// against a real redis-server that speaks only TLS: verified with a CA file
(``?ssl_ca_certs=``), and as on Heroku (a self-signed certificate, a password, and
verification off: ``?ssl_cert_reqs=none``). The client (enqueue, by name too) and both
worker commands must work; a plain rediss:// URL fails on the self-signed certificate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis
from apps import basic
from core_util import ran, wait_for
from tls_redis import TLSRedis, tls_support
from worker_process import TESTS_DIR, Process

import cogworker
from cogworker import config as config_module

COMMANDS = {
    "prefork": ("cogworker.prefork.cli", "--procs", "2"),
    "single": ("cogworker.worker",),
}


@pytest.fixture
def tls_server():
    if tls_support():
        pytest.skip(tls_support())
    server = TLSRedis()
    yield server
    server.stop()


@pytest.fixture
def heroku_server():
    if tls_support():
        pytest.skip(tls_support())
    server = TLSRedis(self_signed=True, password="h3roku-s3cret")
    yield server
    server.stop()


def use(url: str) -> cogworker.Config:
    config_module._config = None
    return cogworker.configure(redis_url=url, socket_timeout=2.0)


def run_jobs_over(url: str, command: tuple[str, ...], how: str, heroku_url: str = "") -> None:
    """Enqueue through ``url``, run a worker on it (``how``: with --redis-url, or as on
    Heroku: $REDIS_URL without parameters and the Deploying page's configure() line in the app
    module), and see every job run and the worker stop cleanly."""
    config = use(url)
    r = config.redis()
    r.flushall()
    jids = [basic.add.enqueue(i, 1) for i in range(4)]
    jids.append(cogworker.enqueue("apps.basic.add", 9, 9))
    jids.append(cogworker.by_name("apps.basic.add", queue="default", retry=1).enqueue(8, 8))
    assert all(jids)
    if how == "flag":
        worker = Process(*command, "--redis-url", url, "apps.basic", env={"COGWORKER_REDIS_URL": "redis://nowhere:1"})
    else:
        worker = Process(*command, "apps.heroku_app", env={"REDIS_URL": heroku_url})
    try:
        assert wait_for(lambda: len(ran(r)) == 6, 30), worker.output()
    finally:
        code = worker.stop()
    assert code == 0
    assert sorted(ran(r)) == sorted([f"add:{i}:1" for i in range(4)] + ["add:9:9", "add:8:8"])
    assert int(r.get(config.keys.stats_processed)) == 6


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_verified_with_a_ca_file(tls_server, command):
    run_jobs_over(tls_server.verified_url, COMMANDS[command], "flag")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_heroku_style_self_signed_verification_off(heroku_server, command):
    url = heroku_server.unverified_url
    heroku_url = heroku_server.url(host="127.0.0.1", password=True)  # what Heroku puts in REDIS_URL
    assert url == heroku_url + "?ssl_cert_reqs=none"  # the Deploying page's form
    assert heroku_url.startswith("rediss://:h3roku-s3cret@127.0.0.1:")
    run_jobs_over(url, COMMANDS[command], "heroku", heroku_url)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_heroku_recipe_keeps_a_query_the_url_already_has(heroku_server, command):
    # Before: `url += "?ssl_cert_reqs=none"` made ...?socket_keepalive=true?ssl_cert_reqs=none,
    # whose one parameter is socket_keepalive: verification stayed on and the worker refused.
    heroku_url = heroku_server.url(host="127.0.0.1", password=True) + "?socket_keepalive=true"
    run_jobs_over(heroku_server.unverified_url, COMMANDS[command], "heroku", heroku_url)


def test_the_deploying_page_shows_the_heroku_recipe():
    readme = (Path(__file__).parent.parent / "docs" / "operations" / "deploying.md").read_text()
    app = (Path(__file__).parent / "apps" / "heroku_app.py").read_text()
    recipe = app[app.index("url = os.environ") :]
    assert textwrap.indent(recipe, "  ") in readme  # the lines tested here, on both kinds of URL
    assert "rediss://:PASSWORD@HOST:PORT?ssl_cert_reqs=none" in readme


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_heroku_recipe_on_a_laptops_plain_url(own_redis, command):
    run_jobs_over(own_redis.url, COMMANDS[command], "heroku", own_redis.url)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_tls_options_on_a_plain_url_are_ignored_with_one_warning(own_redis, command):
    """The old recipe (TLS options appended to any REDIS_URL) on redis://: it ran into a
    TypeError deep in redis-py (exit 1, a 47-line traceback); now the options are left out."""
    config = use(own_redis.url)
    config.redis().flushall()
    basic.add.enqueue(2, 3)
    worker = Process(*COMMANDS[command], "apps.heroku_old", env={"REDIS_URL": own_redis.url})
    try:
        assert wait_for(lambda: ran(config.redis()) == ["add:2:3"], 30), worker.output()
        os.killpg(worker.proc.pid, signal.SIGTERM)
        code = worker.proc.wait(30)
        out = worker.output()
    finally:
        worker.stop()
    assert code == 0, out
    assert "Traceback" not in out and "TypeError" not in out, out
    warnings = [line for line in out.splitlines() if "isn't a TLS one" in line]
    assert len(warnings) == 1, out  # once, not once per process or client
    assert "ssl_cert_reqs ignored (TLS options apply to rediss:// URLs only)" in warnings[0]


def test_the_client_and_the_cli_ignore_them_too(own_redis, caplog):
    config = use(own_redis.url + "?ssl_cert_reqs=none&ssl_check_hostname=false")
    assert basic.add.enqueue(1, 1)
    assert "ssl_cert_reqs, ssl_check_hostname ignored" in caplog.text
    result = cli("stats", "--redis-url", own_redis.url + "?ssl_cert_reqs=none")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("isn't a TLS one") == 1, result.stderr
    assert config.redis_url.endswith("?ssl_cert_reqs=none&ssl_check_hostname=false")  # as given


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=TESTS_DIR,
        env={**os.environ, "PYTHONPATH": TESTS_DIR, **(env or {})},
    )


@pytest.mark.parametrize("args, code", [(["stats"], 3), (["health"], 1), (["jobs", "dead"], 3)])
def test_the_cli_gives_the_same_hint_for_a_self_signed_certificate(heroku_server, args, code):
    url = heroku_server.url(host="127.0.0.1", password=True)
    result = cli(*args, env={"REDIS_URL": url, "COGWORKER_REDIS_URL": ""})
    assert result.returncode == code, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "TLS certificate can't be verified (self-signed certificate)" in line
    assert "?ssl_cert_reqs=none" in line and "?ssl_ca_certs=" in line
    assert "h3roku-s3cret" not in result.stderr


def test_without_the_parameters_a_self_signed_certificate_is_refused(heroku_server):
    config = use(heroku_server.url(password=True))
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        basic.add.enqueue(1, 2)
    assert config.redis_url.startswith("rediss://")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_certificate_that_cant_be_verified_stops_a_worker_at_boot_with_the_fix(heroku_server, command):
    """Not an outage to wait out forever: one line naming the URL parameters to use."""
    url = heroku_server.url(host="127.0.0.1", password=True)
    result = subprocess.run(
        [sys.executable, "-m", *COMMANDS[command], "apps.basic"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=TESTS_DIR,
        env={**os.environ, "PYTHONPATH": TESTS_DIR, "REDIS_URL": url, "COGWORKER_REDIS_URL": ""},
    )
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "TLS certificate can't be verified (self-signed certificate)" in last
    assert "?ssl_cert_reqs=none" in last and "?ssl_ca_certs=" in last
    assert "Traceback" not in result.stderr and "h3roku-s3cret" not in result.stderr


def test_an_unreachable_tls_redis_is_waited_for_not_refused():
    from redis_server import free_port

    worker = Process("cogworker.worker", "apps.basic", url=f"rediss://127.0.0.1:{free_port()}/0?ssl_cert_reqs=none")
    try:
        time.sleep(2)
        assert worker.proc.poll() is None, worker.output()
    finally:
        worker.stop()
