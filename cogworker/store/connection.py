"""Opening clients: the one place a connection to Redis is made (``Config.redis()`` and
the async client ask here). Every client gets a socket timeout, so a hung Redis can't
freeze a loop, and no retry on timeout: the callers' error policy (``guard``) decides.
This is where a Cluster or Sentinel URL will choose its client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    import redis.asyncio


def connect(url: str, socket_timeout: float, socket_connect_timeout: float) -> redis.Redis:
    """A client for ``url`` (bytes in, bytes out: raw payloads must round-trip exactly)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        health_check_interval=0,
        retry_on_timeout=False,
        **client_options(),
    )


def connect_async(url: str, socket_timeout: float, socket_connect_timeout: float) -> redis.asyncio.Redis:
    """The same on ``redis.asyncio``: a client belongs to the event loop it first runs on."""
    import redis.asyncio  # only asyncio code pays for importing it

    return redis.asyncio.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        health_check_interval=0,
        retry_on_timeout=False,
        **client_options(),
    )


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
