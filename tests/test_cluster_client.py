"""The cluster client's own parts (store/cluster.py) against the real cluster: the redis-py
cluster client that reads the slot map is closed with ours (no connection to any node is
left open, sync or async), and the async client reads the slot map in a thread, off the
event loop, and follows its slot to another master."""

from __future__ import annotations

import asyncio
import gc
import threading

import psutil
from apps import sentinel_app
from cluster_util import cluster, cluster_config, cluster_ns  # noqa: F401 (fixtures)

from cogworker.store import cluster as cluster_mode
from cogworker.store.connection import client_options
from cogworker.testing.cluster import key_slot

OPTIONS = {
    "socket_timeout": 2.0,
    "socket_connect_timeout": 2.0,
    "health_check_interval": 0,
    "retry_on_timeout": False,
    **client_options(),
}


def _open_to(cluster) -> set[tuple[str, int]]:  # noqa: F811
    """This process's established TCP connections to the cluster's nodes, by local address."""
    ports = {server.port for server in cluster.servers}
    return {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port in ports and c.status == psutil.CONN_ESTABLISHED
    }


def test_closing_the_client_closes_the_slot_map_readers_connections(cluster, cluster_ns):  # noqa: F811
    gc.collect()
    before = _open_to(cluster)
    client = cluster_mode.client(cluster.url, OPTIONS, cluster_ns)
    client.rpush(cluster_ns + ":q", b"x")
    assert client.llen(cluster_ns + ":q") == 1
    opened = _open_to(cluster) - before
    assert len(opened) >= 2  # ours to the slot's master, and the slot map reader's own
    client.close()
    assert _open_to(cluster) - before == set()
    assert client.llen(cluster_ns + ":q") == 1  # a closed client may be used again (redis-py's rule)
    client.close()
    assert _open_to(cluster) - before == set()


def test_the_async_client_reads_the_slot_map_off_the_loop_and_closes_it(cluster, cluster_ns):  # noqa: F811
    gc.collect()
    before = _open_to(cluster)
    threads: list[int] = []

    async def scenario() -> tuple[int, int, set[tuple[str, int]]]:
        client = cluster_mode.client_async(cluster.url, OPTIONS, cluster_ns)
        locator = client.connection_pool.locator
        real = locator.address

        def address() -> tuple[str, int]:
            threads.append(threading.get_ident())
            return real()

        locator.address = address
        try:
            await client.rpush(cluster_ns + ":q", b"x")
            opened = _open_to(cluster) - before
            return threading.get_ident(), await client.llen(cluster_ns + ":q"), opened
        finally:
            await client.aclose()

    loop_thread, length, opened = asyncio.run(scenario())
    assert length == 1 and len(opened) >= 2
    assert threads and loop_thread not in threads  # the slot map was read off the loop's thread
    assert _open_to(cluster) - before == set()


def test_the_async_client_follows_its_slot_to_another_master(cluster, cluster_config):  # noqa: F811
    """One event loop's client, its pooled connection open on the old master across the
    move: the next enqueue gets MOVED, and is sent once more to the new master."""
    from cogworker.client import aio

    key = cluster_config.keys.queue("default")

    async def scenario():
        try:
            await sentinel_app.logged.enqueue_async("before-move")
            source = cluster.owner(key)
            target = next(node for node in cluster.masters() if node.node_id != source.node_id)
            cluster.move_slot(key_slot(key), target)
            await sentinel_app.logged.enqueue_async("after-move")
            return target
        finally:
            await aio.aclose()

    target = asyncio.run(scenario())
    assert cluster.owner(key).node_id == target.node_id and target.server.client().llen(key) == 2
