"""Writes that survive a failover (docs/architecture.md#replication): with ``wait_replicas=N``
each write of ours is followed, on the same connection and in the same round trip, by
``WAIT N <timeout>``. With ``durability="aof"`` (docs/architecture.md#durable-mode) it is
``WAITAOF 1 N <timeout>`` instead: Redis has fsynced the write to its append-only file
(and N replicas to theirs). One wait per group of writes (a pipeline, a fetch with its
acks, a script), never one per job. Redis replicates asynchronously; ``WAIT`` returns once N replicas
acknowledged everything this connection wrote (its own offset), so a write and its WAIT
must share the connection: a pipeline, a ``pipes.send``, the fetch's held connection.

Too few replicas in time raises ``NotReplicated``, an outage (a ``ConnectionError``):
the enqueue's caller gets it (the job may still be on the master, unreplicated), and a
worker backs off, starts nothing and settles nothing until its move is replicated (a
fetched job not started is requeued by reconcile; an ack or a filing is retried).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from ..errors import CogworkerError


class NotReplicated(CogworkerError, redis.ConnectionError):
    """A write reached the master but not ``wait_replicas`` replicas within ``wait_timeout``:
    a failover now could lose it. For an enqueue: the job may or may not survive; enqueue
    again (with a unique job, or an idempotent one) or treat it as failed."""

    def __init__(self, wanted: int, got: int, timeout: float) -> None:
        super().__init__(
            f"written to the Redis master, but {got} of the {wanted} replica(s) wanted "
            f"acknowledged it within {timeout:g}s (wait_replicas)"
        )
        self.wanted, self.got = wanted, got


class NotFsynced(CogworkerError, redis.ConnectionError):
    """``durability="aof"``: Redis did not fsync a write to its append-only file within
    ``wait_timeout`` (a slow or failing disk, or AOF turned off since start). Handled as
    ``NotReplicated`` is: an outage. For an enqueue: the job may or may not survive a crash
    of Redis's host; enqueue again (a unique or idempotent job) or treat it as failed."""

    def __init__(self, timeout: float, why: str = "") -> None:
        super().__init__(
            why or f"written to Redis, but not fsynced to its append-only file within {timeout:g}s (durability='aof')"
        )


@dataclass(frozen=True)
class Need:
    """``replicas`` must hold each write within ``timeout`` seconds; with ``aof``, Redis
    (and those replicas) must have fsynced it to the append-only file."""

    replicas: int
    timeout: float
    aof: bool = False

    def command(self) -> tuple[Any, ...]:
        ms = max(1, round(self.timeout * 1000))
        return ("WAITAOF", 1, self.replicas, ms) if self.aof else ("WAIT", self.replicas, ms)

    def check(self, reply: Any) -> None:
        """``WAIT``'s or ``WAITAOF``'s reply (or its error): raises unless enough replicas
        (and, for WAITAOF, the server's own fsync) have it."""
        if isinstance(reply, redis.ResponseError) and "replica" in str(reply):
            raise redis.ReadOnlyError(str(reply))  # a wait on a demoted master: an outage, reconnect
        if isinstance(reply, redis.ResponseError) and "appendonly" in str(reply):
            # AOF turned off under us (CONFIG SET appendonly no): nothing is fsynced until it is back
            raise NotFsynced(self.timeout, f"Redis refused WAITAOF ({reply}): its append-only file is off")
        if isinstance(reply, BaseException):
            raise reply
        if not self.aof:
            got = int(reply)
        elif int(reply[0]) < 1:
            raise NotFsynced(self.timeout)
        else:
            got = int(reply[1])
        if got < self.replicas:
            raise NotReplicated(self.replicas, got, self.timeout)


# connection pool -> Need: set once by store.connection, read on every write. Keyed by
# the pool, which a client shares with its pipelines (weak: a dropped client takes its
# entry with it).
_needs: weakref.WeakKeyDictionary[Any, Need] = weakref.WeakKeyDictionary()


def require(client: Any, need: Need | None) -> None:
    if need is not None and (need.replicas > 0 or need.aof):
        _needs[client.connection_pool] = need


def need_of(client: Any) -> Need | None:
    """What the writes of ``client`` (or of a pipeline of it) must wait for (None:
    nothing, the default: neither wait_replicas nor durability="aof")."""
    if not _needs:
        return None
    return _needs.get(client.connection_pool)


def wait_on(pipe: Any) -> Need | None:
    """Queues the WAIT last on ``pipe`` if its writes must be replicated; the caller
    checks that last reply with ``Need.check``."""
    need = need_of(pipe)
    if need is not None:
        pipe.execute_command(*need.command())
    return need


def read_then_wait(conn: Any, need: Need | None, read: Callable[[], Any]) -> Any:
    """``read()``'s replies on ``conn``, then the WAIT's sent after them, read and checked
    (``NotReplicated``: an outage; a fetched job stays listed, not started, and reconcile
    requeues it). An error reply of ``read()`` is raised once the WAIT's is read too, so
    the connection stays in step."""
    if need is None:
        return read()
    try:
        replies = read()
    except redis.ResponseError:
        with contextlib.suppress(redis.ResponseError):
            conn.read_response()
        raise
    try:
        waited = conn.read_response()
    except redis.ResponseError as exc:  # WAIT on a replica (a demoted master): an outage too
        waited = exc
    need.check(waited)
    return replies
