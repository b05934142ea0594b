"""Opening clients: the one place a connection to Redis is made (``Config.redis()`` and
the async client ask here). Every client gets a socket timeout, so a hung Redis can't
freeze a loop, and no retry on timeout: the callers' error policy (``guard``) decides.
The URL's scheme chooses the client: ``redis+sentinel://`` (store/sentinel.py) asks
Sentinel for the master; a ``redis://`` URL naming a Redis Cluster node (detected with one
``INFO cluster`` at the first connect, or said by ``cluster``) gets a client of the master
serving the namespace's slot (store/cluster.py). ``wait_replicas``
(store/replication.py) is attached to the client made, whichever it is."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import redis

from . import cluster as cluster_mode
from . import replication, sentinel

if TYPE_CHECKING:
    import redis.asyncio


def connect(
    url: str,
    socket_timeout: float,
    socket_connect_timeout: float,
    need: replication.Need | None = None,
    cluster: bool | None = None,
    namespace: str = "cogworker",
) -> redis.Redis:
    """A client for ``url`` (bytes in, bytes out: raw payloads must round-trip exactly);
    ``need``: every write of ours through it waits for that many replicas; ``cluster``:
    whether ``url`` names a Redis Cluster node (None: ask it), whose client then serves
    ``namespace``'s slot."""
    options = _options(socket_timeout, socket_connect_timeout)
    if sentinel.is_sentinel(url):
        client = sentinel.master(url, options)
    elif is_cluster(url, socket_connect_timeout, cluster):
        client = cluster_mode.client(url, options, namespace)
    else:
        client = redis.Redis.from_url(url, **options)
    replication.require(client, need)
    return client


def connect_async(
    url: str,
    socket_timeout: float,
    socket_connect_timeout: float,
    need: replication.Need | None = None,
    cluster: bool | None = None,
    namespace: str = "cogworker",
) -> redis.asyncio.Redis:
    """The same on ``redis.asyncio``: a client belongs to the event loop it first runs on."""
    import redis.asyncio  # only asyncio code pays for importing it

    options = _options(socket_timeout, socket_connect_timeout)
    if sentinel.is_sentinel(url):
        client = sentinel.master_async(url, options)
    elif is_cluster(url, socket_connect_timeout, cluster):
        client = cluster_mode.client_async(url, options, namespace)
    else:
        client = redis.asyncio.Redis.from_url(url, **options)
    replication.require(client, need)
    return client


def is_cluster(url: str, timeout: float = 2.0, cluster: bool | None = None) -> bool | None:
    """Whether ``url`` is a Redis Cluster node: ``cluster`` if said, else what the node
    says (``INFO cluster``, once per URL and process; None: it can't be asked now). A
    Sentinel URL never is."""
    if sentinel.is_sentinel(url):
        return False
    if cluster is not None:
        return cluster
    return cluster_mode.detect(url, _options(timeout, timeout))


def _options(socket_timeout: float, socket_connect_timeout: float) -> dict[str, Any]:
    return {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_connect_timeout,
        "health_check_interval": 0,
        "retry_on_timeout": False,
        **client_options(),
    }


def client_options() -> dict[str, Any]:
    """What every client of ours sets beyond the URL and timeouts. redis-py 7+ asks each new
    connection to turn on maintenance notifications (Redis Enterprise/Cloud only): a server
    without them refuses, and redis-py logs a DEBUG line per connection for it. Off: no
    such round trip, no such line."""
    try:
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:  # redis-py before 7: it never asks
        return {}
    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


_UNKNOWN_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def url_problem(url: str) -> str | None:
    """What redis-py would refuse in a plain (not Sentinel) ``url`` only once it makes a
    connection, found now, without connecting: a query parameter it doesn't know
    (``?foo=1``: a TypeError from the connection class), a value it can't read
    (``?socket_timeout=abc``, ``?ssl_cert_reqs=none?x=1``: a second ``?`` glued to a value);
    None if there is nothing. The message holds no part of the URL but the parameter."""
    try:
        pool = redis.ConnectionPool.from_url(url, **client_options())
        pool.connection_class(**pool.connection_kwargs)  # the constructor checks; connect() isn't called
    except TypeError as exc:
        unknown = _UNKNOWN_KEYWORD.search(str(exc))
        return f"unknown parameter {unknown.group(1)!r}" if unknown else "a parameter redis-py can't take"
    except (ValueError, redis.RedisError) as exc:
        return str(exc).rstrip(".")
    return None
