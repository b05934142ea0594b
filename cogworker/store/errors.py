"""What a Redis error reply means for the caller.

Three replies look alike (a ``ResponseError``) but call for different handling:
- OOM (``maxmemory`` reached, ``noeviction``): Redis refuses writes for a while. Nothing
  is wrong with a key or a job: back off, log once, and leave every job where it is.
- READONLY: the server became a replica (a failover). Also an outage, and the
  connections must be dropped: after a failover the same address may lead to the new
  primary once reconnected.
- (not a reply) ``NotReplicated``: fewer replicas than ``wait_replicas`` took a write in
  time (store/replication.py); ``NotFsynced``: with ``durability="aof"``, Redis did not
  fsync a write in time. Outages too: each is a ``ConnectionError``.
- ASK, TRYAGAIN (Redis Cluster: the namespace's slot is being moved to another master),
  MOVED and CLUSTERDOWN (raised as ``cluster.SlotMoved``, a ``ConnectionError``: the slot
  has a new master, or none yet, as in a failover): an outage, retried when the move or
  the failover is over (store/cluster.py).
- WRONGTYPE: one key holds the wrong type. That key is skipped (and logged); the rest
  keeps working.
"""

from __future__ import annotations

from typing import Any, Protocol

import redis

from ..errors import RedisUnavailable
from .cluster import SlotMoved
from .replication import NotFsynced, NotReplicated


class Connected(Protocol):
    """What owns this process's client (``Config``): the seam never imports the settings."""

    def redis(self) -> redis.Redis: ...


OOM, READONLY, MOVING, WRONGTYPE, OTHER = "oom", "readonly", "moving", "wrongtype", "other"

# redis-py strips the reply's code from the message of the classes it maps (OOM ->
# OutOfMemoryError, READONLY -> ReadOnlyError); a Lua pcall hands the reply over whole.
_OOM_TEXT = "command not allowed when used memory"
_READONLY_TEXT = "can't write against a read only replica"
_OOM_ERROR = getattr(redis.exceptions, "OutOfMemoryError", ())


def classify(error: BaseException | str | bytes) -> str:
    """``"oom"``, ``"readonly"``, ``"wrongtype"`` or ``"other"``, from an exception or
    the text of an error reply."""
    if _OOM_ERROR and isinstance(error, _OOM_ERROR):
        return OOM
    if isinstance(error, redis.ReadOnlyError):
        return READONLY
    if isinstance(error, (redis.exceptions.AskError, redis.exceptions.TryAgainError)):
        return MOVING
    text = error.decode(errors="replace") if isinstance(error, bytes) else str(error)
    code = text.lstrip("-").split(" ", 1)[0]
    if code == "OOM" or _OOM_TEXT in text:
        return OOM
    if code == "READONLY" or _READONLY_TEXT in text:
        return READONLY
    if code == "UNBLOCKED" and "replica" in text:  # a blocking call cut off as the server stepped down
        return READONLY
    if code in ("ASK", "TRYAGAIN", "MOVED", "CLUSTERDOWN"):  # a script's pcall hands the reply over whole
        return MOVING
    if code == "WRONGTYPE" or "WRONGTYPE" in text:
        return WRONGTYPE
    return OTHER


def is_outage(error: BaseException) -> bool:
    """Redis away, or refusing writes for now (OOM, READONLY, a cluster slot moving): back
    off and retry; don't blame a key, an entry or a job for it."""
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return True
    return isinstance(error, redis.RedisError) and classify(error) in (OOM, READONLY, MOVING)


def describe(error: BaseException) -> str:
    """The outage, for its one log line."""
    kind = classify(error) if isinstance(error, redis.ResponseError) else OTHER
    if kind == OOM:
        return f"Redis is out of memory (OOM: {error}); jobs stay where they are"
    if kind == READONLY:
        return "Redis is read-only (READONLY: a replica now, after a failover?); reconnecting"
    if isinstance(error, redis.exceptions.MovedError):  # never our slot's: cluster.SlotMoved is
        return (
            f"Redis Cluster answered MOVED ({error}): a key outside the namespace's slot, or a client not "
            "in cluster mode (was the cluster unreachable when this process started? set "
            "COGWORKER_REDIS_CLUSTER=1)"
        )
    if kind == MOVING:
        return f"Redis Cluster is moving the namespace's slot ({error}); waiting for the move to end"
    if isinstance(error, SlotMoved):
        return f"{error}"
    if isinstance(error, NotFsynced):
        return f"Redis has not fsynced our writes (NotFsynced: {error}); nothing is started or settled meanwhile"
    if isinstance(error, NotReplicated):
        return f"Redis's replicas are behind (NotReplicated: {error}); nothing is started or settled meanwhile"
    return f"Redis unavailable ({type(error).__name__}: {error})"


def as_error(text: str | bytes) -> redis.RedisError:
    """The exception a command would have raised for this error reply (one a script
    caught with pcall and returned)."""
    message = text.decode(errors="replace") if isinstance(text, bytes) else text
    kind = classify(message)
    if kind == READONLY:
        return redis.ReadOnlyError(message)
    if kind == OOM and _OOM_ERROR:
        return _OOM_ERROR(message)
    if kind == MOVING:
        return redis.exceptions.TryAgainError(message)
    return redis.ResponseError(message)


def reconnect_if_readonly(config: Connected, error: BaseException) -> bool:
    """A READONLY reply: this process's connections lead to a replica. Drops them all, so
    the next command connects (and resolves the address) afresh. True if it did."""
    if not isinstance(error, redis.RedisError) or classify(error) != READONLY:
        return False
    config.redis().connection_pool.disconnect()
    return True


class Unreachable(RedisUnavailable, redis.ConnectionError):
    """``RedisUnavailable`` as raised: also redis-py's ``ConnectionError``, so code that
    caught the bare redis-py error around an enqueue still catches it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        # The built-in's __init__ ends the chain: redis-py's (its repr reads these) never runs.
        kinds: Any = getattr(redis.exceptions, "ExceptionType", None)
        if kinds is not None:
            self.error_type = kinds.NETWORK
        self.status_code = None


def unreachable(what: str, shown_url: str, error: BaseException) -> BaseException:
    """What an enqueue raises for ``error``: an unreachable server (a refused or timed-out
    connection) as one line, ``can't enqueue app.jobs.add: Redis at redis://... is
    unreachable (ConnectionError: ...)`` (``shown_url``: redacted by the caller), chained to ``error``; any
    other error (ours, a cluster's moved slot, a replica lag) as it was."""
    if isinstance(error, (RedisUnavailable, SlotMoved, NotFsynced, NotReplicated)):
        return error
    if not isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return error
    found = Unreachable(f"can't enqueue {what}: Redis at {shown_url} is unreachable ({type(error).__name__}: {error})")
    found.__cause__ = error
    return found
