"""Opening clients: the one place a connection to Redis is made (``Config.redis()`` and
the async client ask here). Every client gets a socket timeout, so a hung Redis can't
freeze a loop, and no retry on timeout: the callers' error policy (``guard``) decides.
The URL's scheme chooses the client: ``redis+sentinel://`` (store/sentinel.py) asks
Sentinel for the master; a Cluster client plugs in here the same way. ``wait_replicas``
(store/replication.py) is attached to the client made, whichever it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis

from . import replication, sentinel

if TYPE_CHECKING:
    import redis.asyncio


def connect(url: str, socket_timeout: float, socket_connect_timeout: float,
            need: replication.Need | None = None) -> redis.Redis:
    """A client for ``url`` (bytes in, bytes out: raw payloads must round-trip exactly);
    ``need``: every write of ours through it waits for that many replicas."""
    options = _options(socket_timeout, socket_connect_timeout)
    client = sentinel.master(url, options) if sentinel.is_sentinel(url) else redis.Redis.from_url(url, **options)
    replication.require(client, need)
    return client


def connect_async(url: str, socket_timeout: float, socket_connect_timeout: float,
                  need: replication.Need | None = None) -> redis.asyncio.Redis:
    """The same on ``redis.asyncio``: a client belongs to the event loop it first runs on."""
    import redis.asyncio  # only asyncio code pays for importing it

    options = _options(socket_timeout, socket_connect_timeout)
    client = (sentinel.master_async(url, options) if sentinel.is_sentinel(url)
              else redis.asyncio.Redis.from_url(url, **options))
    replication.require(client, need)
    return client


def _options(socket_timeout: float, socket_connect_timeout: float) -> dict[str, Any]:
    return {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_connect_timeout,
            "health_check_interval": 0, "retry_on_timeout": False, **client_options()}


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
