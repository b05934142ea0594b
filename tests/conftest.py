from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from redis_server import RedisServer  # noqa: E402

import cogworker  # noqa: E402
from cogworker.client import jobs as job_module  # noqa: E402
from cogworker.core import hooks  # noqa: E402
from cogworker.core.middleware import client_middleware, server_middleware  # noqa: E402
from cogworker.cron import ticker as periodic_module  # noqa: E402
from cogworker.engine.effects import builtin_subscribers  # noqa: E402

# The test process is put together as a worker process is (worker/runner.py): the tests
# run workers, orphan recovery and the ticker in it, and their jobs' locks, stats and
# history follow through these (no module subscribes on import).
hooks.install(builtin_subscribers())


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs as from a terminal, whoever started it: a non-interactive shell's
    background job (.ci/run's server matrix) starts with SIGINT ignored, every process a
    test starts would inherit that, and a CLI's Ctrl-C (``stats --watch``) would do
    nothing. Restored here, before any test starts a process."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header() -> str:
    """Which server the fixtures start (cogworker/testing/binaries.py)."""
    from cogworker.testing.binaries import NoServer, server_binary

    try:
        return f"cogworker test server: {server_binary().describe()}"
    except NoServer as exc:
        return f"cogworker test server: none ({exc})"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private redis-server for the session; tests that stop or restart it use
    ``own_redis`` instead."""
    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, free to pause, kill or restart."""
    server = RedisServer().start()
    yield server
    server.cleanup()


def _configure(server: RedisServer) -> cogworker.Config:
    if server.paused:
        server.resume()
    server.client().flushall()
    # From the defaults, not from whatever an earlier test configured (configure()
    # keeps the settings it isn't given).
    cogworker.config._config = None
    return cogworker.configure(redis_url=server.url, socket_timeout=2.0)


@pytest.fixture
def config(redis_server: RedisServer) -> Iterator[cogworker.Config]:
    """cogworker configured against the session's private Redis, emptied first."""
    yield _configure(redis_server)


@pytest.fixture
def own_config(own_redis: RedisServer) -> Iterator[cogworker.Config]:
    yield _configure(own_redis)


@pytest.fixture(autouse=True)
def clean_registries() -> Iterator[None]:
    jobs = dict(job_module.registry)
    entries = dict(periodic_module.entries)
    modules = set(sys.modules)
    yield
    # A test app imported during the test registered its jobs; they are dropped below, so
    # the module goes too: a later test importing it registers them again (whatever the order).
    for name in set(sys.modules) - modules:
        if name.startswith("apps."):
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if hasattr(sys.modules.get(parent), child):
                delattr(sys.modules[parent], child)
    job_module.registry.clear()
    job_module.registry.update(jobs)
    periodic_module.entries.clear()
    periodic_module.entries.update(entries)
    client_middleware.clear()
    server_middleware.clear()


@pytest.fixture(autouse=True)
def _log_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cogworker")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each phase's report on its test (``item.rep_call``), for fixtures' teardown to see."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def masters(own_redis: RedisServer, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Starts real prefork masters on this test's own Redis; kills what is left after. A
    failed test shows each master's log (its "Captured stdout teardown")."""
    from prefork_harness import Master

    started: list[Master] = []

    def start(**kwargs: Any) -> Master:
        master = Master(own_redis.url, **kwargs)
        started.append(master)
        return master

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for master in started:
        if failed:
            print(f"--- master {master.pid}'s log (last 200 lines) ---")
            print("\n".join(master.output().splitlines()[-200:]))
        master.stop()


@pytest.fixture
def fresh_core_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """apps.core_jobs' in-process run records emptied, and a fast reconcile."""
    from apps import core_jobs

    from cogworker.engine import loop as worker_module

    core_jobs.local_runs.clear()
    core_jobs.local_started.clear()
    monkeypatch.setattr(worker_module, "RECONCILE_INTERVAL", 0.3)
