"""Commands sent in one write on one of a client's pooled connections, and their replies
read: what redis-py's pipeline does, without the pipeline object and its per-command
bookkeeping. Used where a call costs: a single enqueue (docs/architecture.md#enqueue),
where redis-py's pipeline or ``Script`` call cost the client 4-6 µs more than the bare
command it wraps (measured: bench/README.md, "Single enqueue").

Replies come as from a pipeline with ``raise_on_error=False``: an error reply is returned
as its exception, and every reply is read, so the connection goes back to the pool clean.
A connection error is retried as the client's own commands are (its connection's
``Retry``, the connection dropped first), then raised.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.exceptions import ResponseError

from . import replication

Command = tuple[Any, ...]  # str, bytes and int arguments (hiredis packs str as UTF-8, as redis-py does)


def _hiredis_packer() -> Callable[[Command], bytes] | None:
    """hiredis's packer (2.1 and later), which redis-py uses too; without it, redis-py's."""
    try:
        import hiredis
    except ImportError:
        return None
    return getattr(hiredis, "pack_command", None)


_pack = _hiredis_packer()
# Whether a pool's get_connection still takes a command name (redis-py before 5.3 needs
# one; later versions warn when given one), per pool class.
_named: dict[type, bool] = {}


def send(client: Redis, *commands: Command) -> list[Any]:
    """The replies of ``commands``, sent together on one connection of ``client``'s pool.
    With ``wait_replicas`` (store/replication.py) a ``WAIT`` follows them on that
    connection; too few replicas raise ``NotReplicated`` once every reply is read."""
    need = replication.need_of(client)
    if need is None:
        return _send(client, commands)
    replies = _send(client, (*commands, need.command()))
    need.check(replies.pop())  # outside the connection's retry: a retry would write again
    return replies


def _send(client: Redis, commands: tuple[Command, ...]) -> list[Any]:
    pool = client.connection_pool
    kind = type(pool)
    named = _named.get(kind)
    if named is None:
        name = inspect.signature(pool.get_connection).parameters.get("command_name")
        named = _named[kind] = name is not None and name.default is inspect.Parameter.empty
    conn = pool.get_connection(commands[0][0]) if named else pool.get_connection()
    try:
        return conn.retry.call_with_retry(lambda: _exchange(conn, commands), lambda _error: conn.disconnect())
    except BaseException:
        conn.disconnect()  # replies may be left unread: the connection can't be reused as it is
        raise
    finally:
        pool.release(conn)


def _exchange(conn: Any, commands: tuple[Command, ...]) -> list[Any]:
    if _pack is not None:  # redis-py's own packer, minus its checks per argument (~1 µs a command)
        conn.send_packed_command([b"".join([_pack(command) for command in commands])])
    else:
        conn.send_packed_command(conn.pack_commands(commands))
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies


def ok(reply: Any) -> Any:
    """``reply``, unless it is an error reply: then that error is raised."""
    if isinstance(reply, Exception):
        raise reply
    return reply
