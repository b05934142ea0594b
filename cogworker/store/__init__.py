"""The Redis seam: the only package that imports redis-py (docs/architecture.md#store).

Everything above asks it: ``connection`` opens clients (``Config.redis()`` is built on
it), ``lua`` runs the scripts (for ``cogworker.transitions`` only, which names each call's
keys), ``pipes`` sends commands together on one pooled connection (the single enqueue),
``wire`` packs the hot
path's commands, ``errors`` says what an error reply means and ``guard`` is the one policy
around Redis work (``Outage``, ``handle``, ``best_effort``, ``Breaker``).

The names here are what the rest of the package uses instead of redis-py's: the client
types and the errors it catches. Sentinel (``sentinel``) and Redis Cluster (``cluster``: a
client of the master serving the namespace's slot) plug in under this seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

from redis import Redis as Client
from redis.client import Pipeline
from redis.exceptions import (
    ConnectionError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TimeoutError,
    WatchError,
)
from redis.typing import EncodableT

if TYPE_CHECKING:
    from redis.asyncio import Redis as AsyncClient
    from redis.asyncio.client import Pipeline as AsyncPipeline


@overload
def pipeline(client: Client, transaction: bool = False) -> Pipeline: ...


@overload
def pipeline(client: AsyncClient, transaction: bool = False) -> AsyncPipeline: ...


def pipeline(client: Client | AsyncClient, transaction: bool = False) -> Pipeline | AsyncPipeline:
    """Commands queued and sent in one round trip (``transaction``: as one MULTI/EXEC).
    Each command names its keys, so a cluster client can route it."""
    return client.pipeline(transaction=transaction)


def forget_scripts() -> None:
    """Drops the Lua scripts the runner keeps per client (a new config means new clients).
    Only ``cogworker.transitions`` runs scripts; this only forgets them."""
    from . import lua

    lua.reset()


__all__ = [
    "AsyncClient",
    "Client",
    "ConnectionError",
    "EncodableT",
    "NoScriptError",
    "Pipeline",
    "ReadOnlyError",
    "RedisError",
    "ResponseError",
    "TimeoutError",
    "WatchError",
    "forget_scripts",
    "pipeline",
]
