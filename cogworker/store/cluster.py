"""Redis Cluster (docs/architecture.md#cluster): a ``redis://``/``rediss://`` URL naming any
node of a cluster. A namespace lives in one slot (its keys share one hash tag), so every
command, script and transaction of ours goes to the one master serving that slot.

A cluster client of ours is therefore a plain ``redis.Redis`` whose connections ask, each
time one is opened, which master serves the namespace's slot now. redis-py's cluster
client (``RedisCluster``) finds out: its ``NodesManager`` reads the slot map from any node
it knows and learns every node, so a dead seed doesn't matter. Everything above the seam
(scripts, pipes, the fetch's hand-packed commands and held connection, ``WAIT`` after a
write on the same connection, the blocking wake read) works on that connection as on one
Redis. What a cluster says back:

- ``MOVED`` (the slot has a new master: after a failover or a slot migration) and ``CLUSTERDOWN``
  (no master for it yet): raised as ``SlotMoved``, a ``ConnectionError``, with the slot map
  patched from the reply (as redis-py's cluster client does) or marked stale: the
  connection is dropped and the command sent once more on a new one, to the new master
  (a command, a pipeline, a ``pipes.send``: their connection's ``Retry``); the fetch's own
  connection, or a second MOVED, is an outage, backed off by ``guard``. Nothing ran on
  this node for a slot it doesn't serve, so the retry writes nothing twice.
- ``ASK`` and ``TRYAGAIN`` (the slot is being moved, key by key): an outage until the move
  ends (store/errors.py). A script names keys on both sides of a move in general, and
  Redis refuses those with TRYAGAIN anyway, so following ASK per key would gain nothing.

The redis-py cluster client that reads the slot map holds connections of its own to the
nodes it asked: closing our client (``close()``/``aclose()``: its pool) closes it too. The
async client reads the slot map in a thread (``asyncio.to_thread``), so a node slow to
answer blocks no event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import ClusterDownError, MovedError

if TYPE_CHECKING:
    import redis.asyncio
    from redis.cluster import RedisCluster

logger = logging.getLogger("cogworker")

_detected: dict[str, bool] = {}  # URL -> cluster_enabled, per process
_lock = threading.Lock()


class SlotMoved(redis.ConnectionError):
    """The node answered MOVED or CLUSTERDOWN for the namespace's slot: reconnect to the
    master that serves it now (an outage until there is one)."""


def forget() -> None:
    """Ask each node again at the next detection (``configure()``): an address may now be
    another server, a cluster node where a plain Redis was (tests start servers on free
    ports, and a port comes back), or the other way round."""
    with _lock:
        _detected.clear()


def setting(text: str) -> bool | None:
    """``COGWORKER_REDIS_CLUSTER``: 1/yes/true, 0/no/false, or empty/auto (ask the node)."""
    value = text.strip().lower()
    if value in ("", "auto"):
        return None
    if value in ("1", "yes", "true", "on"):
        return True
    if value in ("0", "no", "false", "off"):
        return False
    raise ValueError(f"COGWORKER_REDIS_CLUSTER must be 1, 0 or auto, got {text!r}")


def has_tag(namespace: str) -> bool:
    """Whether ``namespace`` holds a Cluster hash tag (``{...}`` with something inside)."""
    start = namespace.find("{")
    return start >= 0 and namespace.find("}", start + 2) > start + 1


def tagged(namespace: str) -> str:
    """The namespace as one slot: as it is if it holds a hash tag, else wrapped in one."""
    return namespace if has_tag(namespace) else "{" + namespace + "}"


def detect(url: str, options: dict[str, Any]) -> bool | None:
    """Whether the node ``url`` names has ``cluster_enabled:1`` (``INFO cluster``, once per
    URL and process); None if it can't be asked now (then nothing is kept)."""
    found = _detected.get(url)
    if found is not None:
        return found
    probe = redis.Redis.from_url(url, **options)
    try:
        enabled = str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
    except redis.RedisError as exc:
        logger.debug("cluster mode not detected (%s): taken as a plain Redis", type(exc).__name__)
        return None
    finally:
        probe.close()
    with _lock:
        _detected[url] = enabled
    return enabled


class Locator:
    """Which master serves ``slot`` now, as redis-py's cluster client knows it (made on
    first use, so a cluster that is away at boot is an outage, not a crash)."""

    def __init__(self, url: str, options: dict[str, Any], slot: int) -> None:
        self.url, self.options, self.slot = url, options, slot
        self.stale = False
        self.redirect: MovedError | None = None  # the last MOVED: where the slot went
        self._cluster: RedisCluster | None = None
        self._lock = threading.Lock()

    def address(self) -> tuple[str, int]:
        with self._lock:
            try:
                redirect, self.redirect = self.redirect, None
                if self._cluster is None:
                    self._cluster = self._open()
                elif self.stale:
                    self._cluster.nodes_manager.initialize()
                elif redirect is not None:  # as redis-py follows MOVED: the slot map patched
                    self._cluster.nodes_manager.move_slot(redirect)
                node = self._cluster.nodes_manager.get_node_from_slot(self.slot)
            except redis.RedisError as exc:  # no node answers, or none serves the slot yet
                self.stale = True
                raise redis.ConnectionError(
                    f"no Redis Cluster master for slot {self.slot} ({type(exc).__name__})"
                ) from None
            self.stale = False
            return str(node.host), int(node.port)

    def _open(self) -> RedisCluster:
        from redis.cluster import RedisCluster

        keep = ("socket_timeout", "socket_connect_timeout", "maint_notifications_config")
        return RedisCluster.from_url(self.url, **{k: v for k, v in self.options.items() if k in keep})

    def close(self) -> None:
        """Closes the cluster client's connections to the nodes (a later ``address`` opens
        a new one: a closed redis-py pool may be used again, and so may this)."""
        with self._lock:
            cluster, self._cluster = self._cluster, None
        if cluster is None:
            return
        # A cluster client made from a URL gives each node's client a pool of its own that
        # the node's close() leaves open (redis-py 8): each pool is disconnected here.
        for node in cluster.get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()
        cluster.close()


def _moved(locator: Locator, exc: BaseException) -> SlotMoved:
    if isinstance(exc, MovedError):
        locator.redirect = exc
    else:
        locator.stale = True
    kind = "MOVED" if isinstance(exc, MovedError) else "CLUSTERDOWN"
    return SlotMoved(f"Redis Cluster: {kind} for slot {locator.slot} ({exc}); reconnecting to its master")


@cache
def _sync_class(base: Any) -> type:
    def _connect(self: Any) -> Any:
        self.host, self.port = self.locator.address()
        try:
            return base._connect(self)
        except OSError:
            self.locator.stale = True  # the master may have died: ask again next time
            raise

    def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return base.read_response(self, *args, **kwargs)
        except (MovedError, ClusterDownError) as exc:
            if isinstance(exc, MovedError) and exc.slot_id != self.locator.slot:
                raise  # a key of another slot: not ours to follow (store/errors.py: MOVING)
            self.disconnect()  # held connections too (the fetch's): the next command reconnects
            raise _moved(self.locator, exc) from None

    return type(f"Slot{base.__name__}", (base,), {"_connect": _connect, "read_response": read_response})


@cache
def _async_class(base: Any) -> type:
    async def _connect(self: Any) -> Any:
        # The slot map is read with the sync client, only when a connection opens (a
        # failover or a slot migration), in a thread: the loop goes on meanwhile.
        self.host, self.port = await asyncio.to_thread(self.locator.address)
        try:
            return await base._connect(self)
        except OSError:
            self.locator.stale = True
            raise

    async def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await base.read_response(self, *args, **kwargs)
        except (MovedError, ClusterDownError) as exc:
            if isinstance(exc, MovedError) and exc.slot_id != self.locator.slot:
                raise
            await self.disconnect()
            raise _moved(self.locator, exc) from None

    return type(f"Slot{base.__name__}", (base,), {"_connect": _connect, "read_response": read_response})


def _slot_of(namespace: str) -> int:
    from redis.crc import key_slot

    return int(key_slot(namespace.encode()))


def _follow_once() -> Any:
    """A MOVED command is sent once more, at once, to the slot's new master (nothing ran
    on the old one); any other connection error stays the callers' (guard's) to handle."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return Retry(NoBackoff(), 1, supported_errors=(SlotMoved,))


class _SyncPool(redis.ConnectionPool):
    """A pool whose ``close`` closes its locator's cluster client too."""

    locator: Locator

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.locator.close()


@cache
def _async_pool() -> type[redis.asyncio.ConnectionPool]:
    import redis.asyncio

    class _AsyncPool(redis.asyncio.ConnectionPool):
        locator: Locator

        async def aclose(self) -> None:
            try:
                await super().aclose()
            finally:  # in a thread: it waits for the lock a slot map read may hold
                await asyncio.to_thread(self.locator.close)

    return _AsyncPool


def client(url: str, options: dict[str, Any], namespace: str) -> redis.Redis:
    """A client of the master serving ``namespace``'s slot, following it as it moves."""
    pool = _SyncPool.from_url(url, **{**options, "retry": _follow_once()})
    _attach(pool, _sync_class, url, options, namespace)
    made = redis.Redis(connection_pool=pool)
    made.auto_close_connection_pool = True  # as from_url's: closing the client closes its pool
    return made


def client_async(url: str, options: dict[str, Any], namespace: str) -> redis.asyncio.Redis:
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    pool = _async_pool().from_url(url, **{**options, "retry": Retry(NoBackoff(), 1, (SlotMoved,))})
    _attach(pool, _async_class, url, options, namespace)
    made = redis.asyncio.Redis(connection_pool=pool)
    made.auto_close_connection_pool = True
    return made


def _attach(pool: Any, kind: Any, url: str, options: dict[str, Any], namespace: str) -> None:
    """Every connection the pool makes from now on asks the pool's locator where to go
    (a class per pool: the locator rides on it, redis-py's keywords stay its own); the
    pool closes the locator with itself."""
    locator = Locator(url, options, _slot_of(tagged(namespace)))
    base = kind(pool.connection_class)
    pool.connection_class = type(base.__name__, (base,), {"locator": locator})
    pool.locator = locator
