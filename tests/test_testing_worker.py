"""The pytest plugin's integration fixtures: ``cogworker_redis`` (a private redis-server,
cogworker configured on it) and ``cogworker_worker`` (a real prefork master on it)."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

import cogworker
from cogworker.testing import PreforkWorker


def test_redis_fixture_is_private_and_configured(
    cogworker_redis: cogworker.Config, cogworker_redis_server: cogworker.testing.RedisServer
) -> None:
    assert cogworker.get_config() is cogworker_redis
    assert cogworker_redis.redis_url == cogworker_redis_server.url != "redis://127.0.0.1:6379/0"
    assert cogworker_redis.redis().dbsize() == 0


@pytest.mark.cogworker_app("apps.basic", procs=2)
def test_worker_fixture_runs_jobs_in_a_real_prefork_master(
    cogworker_worker: PreforkWorker, cogworker_redis: cogworker.Config
) -> None:
    from apps import basic

    jids = [basic.add.enqueue(i, i) for i in range(5)]
    assert all(jids)
    cogworker_worker.wait_idle(timeout=60)
    ran = sorted(x.decode() for x in cogworker_redis.redis().lrange("test:ran", 0, -1))
    assert ran == sorted(f"add:{i}:{i}" for i in range(5))
    master = psutil.Process(cogworker_worker.pid)
    assert "cogworker: master apps.basic" in " ".join(master.cmdline())
    assert len(master.children()) >= 2


@pytest.mark.cogworker_app("apps.basic")
def test_worker_stop_is_a_clean_sigterm(cogworker_worker: PreforkWorker) -> None:
    cogworker_worker.wait_idle(timeout=60)
    assert cogworker_worker.alive()
    assert cogworker_worker.stop() == 0
    assert not cogworker_worker.alive()
    with pytest.raises(ProcessLookupError):
        os.kill(cogworker_worker.pid, signal.SIGCONT)  # reaped: nothing left of it


def test_worker_fixture_without_an_app_is_a_usage_error(request: pytest.FixtureRequest) -> None:
    with pytest.raises(pytest.UsageError, match="needs the app module"):
        request.getfixturevalue("cogworker_worker")
