"""cogworker's pytest plugin (the ``pytest11`` entry point ``cogworker``: on wherever
cogworker is installed). Its fixtures:

- ``cogworker_inline`` / ``cogworker_fake``: ``cogworker.testing.inline()`` / ``fake()``
  for the test's duration (the fake is the fixture's value);
- ``cogworker_redis_server``: a private ``redis-server`` on a free port, one per session;
- ``cogworker_redis``: cogworker configured on it, emptied first (the ``Config``); the
  settings before the test come back after it;
- ``cogworker_worker``: a real ``cogworker-prefork`` master on it for the test's duration
  (a ``PreforkWorker``), running the app module named by ``@pytest.mark.cogworker_app("app.jobs",
  procs=2, args=[...])`` or the ``cogworker_app`` ini setting.

Importing this module imports nothing else of cogworker: pytest loads it in every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .config import Config
    from .testing import Fake, Inline
    from .testing.servers import PreforkWorker, RedisServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("cogworker_app", "the app module cogworker_worker runs (a @pytest.mark.cogworker_app overrides it)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cogworker_app(module, procs=1, args=()): what cogworker_worker runs")


@pytest.fixture
def cogworker_inline() -> Iterator[Inline]:
    from .testing import inline

    with inline() as sink:
        yield sink


@pytest.fixture
def cogworker_fake() -> Iterator[Fake]:
    from .testing import fake

    with fake() as sink:
        yield sink


@pytest.fixture(scope="session")
def cogworker_redis_server() -> Iterator[RedisServer]:
    from .testing.servers import RedisServer

    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture
def cogworker_redis(cogworker_redis_server: RedisServer) -> Iterator[Config]:
    from . import config as config_module
    from .store import forget_scripts

    if cogworker_redis_server.paused:
        cogworker_redis_server.resume()
    cogworker_redis_server.client().flushall()
    before = config_module._config
    config_module._config = None  # from the defaults, not from what an earlier test set
    yield config_module.configure(redis_url=cogworker_redis_server.url)
    config_module._config = before
    forget_scripts()  # what configure() does for a new config: the scripts are kept per client


@pytest.fixture
def cogworker_worker(request: pytest.FixtureRequest, cogworker_redis: Config) -> Iterator[PreforkWorker]:
    from .testing.servers import PreforkWorker

    marker = request.node.get_closest_marker("cogworker_app")
    module: Any = marker.args[0] if marker and marker.args else request.config.getini("cogworker_app")
    if not module:
        raise pytest.UsageError(
            "cogworker_worker needs the app module: @pytest.mark.cogworker_app('app.jobs') "
            "or cogworker_app = app.jobs in the pytest ini"
        )
    options = dict(marker.kwargs) if marker else {}
    worker = PreforkWorker(
        cogworker_redis.redis_url,
        str(module),
        procs=int(options.get("procs", 1)),
        args=tuple(options.get("args", ())),
        namespace=cogworker_redis.namespace,
    )
    try:
        worker.wait_ready()
    except BaseException:
        worker.stop()
        raise
    yield worker
    worker.stop()
