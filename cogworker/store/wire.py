"""Commands packed for the socket by hand, for the hot path's pipelines (the fetch and
its ack, docs/architecture.md#fast-fetch): small commands joined into one buffer (one
system call, not one per command), a large argument (a big job's ack) sent from the
caller's own bytes.

hiredis packs a small command in a third of redis-py's time, but copies every argument
into one new buffer: about 130 µs for a 100 KB job and 2 ms for 1 MB (allocation and
page faults), more than Redis spends on the job. A large argument is written as its RESP
header, then the bytes object itself, then the rest of the command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis._parsers import hiredis as _redis_hiredis
from redis._parsers.hiredis import _HiredisParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

try:  # hiredis packs a command in a third of redis-py's time: this is the hot path
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover (a dependency: redis[hiredis])
    _hiredis_pack = None  # type: ignore[assignment]
_pack: Callable[..., bytes] | None = _hiredis_pack

# What redis-py's hiredis reader says while a reply is still incomplete (False before 6).
_WAITING = getattr(_redis_hiredis, "NOT_ENOUGH_DATA", False)

# An argument at least this large is sent from its own buffer, never copied; commands
# smaller than this are joined into one buffer.
BIG = 16384


def _arg(value: Any) -> bytes:
    """One argument as redis-py encodes it (UTF-8 text, integers in decimal)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return b"%d" % value
    raise TypeError(f"can't send {type(value).__name__} to Redis")


def _split(command: Sequence[Any]) -> list[bytes]:
    """A command in RESP as parts: each large argument a part of its own, as given."""
    parts: list[bytes] = []
    buf = [b"*%d\r\n" % len(command)]
    for value in command:
        data = _arg(value)
        if len(data) >= BIG:
            buf.append(b"$%d\r\n" % len(data))
            parts += [b"".join(buf), data]
            buf = [b"\r\n"]
        else:
            buf += [b"$%d\r\n" % len(data), data, b"\r\n"]
    parts.append(b"".join(buf))
    return parts


def _whole(conn: Any, command: Sequence[Any]) -> bytes:
    return _pack(tuple(command)) if _pack is not None else b"".join(conn.pack_command(*command))


def pack(command: tuple[Any, ...]) -> bytes:
    """One small command in RESP, for ``packed`` to take as it is (a command sent many
    times over is packed once: the look-ahead fetch's k moves)."""
    return _pack(command) if _pack is not None else b"".join(_split(command))


def packed(conn: Any, commands: Sequence[tuple[Any, ...] | bytes]) -> list[bytes]:
    """The commands as buffers for ``conn.send_packed_command``: as few as possible, no
    large argument copied. A ``bytes`` item is commands packed already (``pack``)."""
    out: list[bytes] = []
    small: list[bytes] = []
    for command in commands:
        if isinstance(command, bytes):
            small.append(command)
            continue
        if not any(isinstance(a, bytes) and len(a) >= BIG for a in command):
            small.append(_whole(conn, command))
            continue
        parts = _split(command)
        small.append(parts[0])
        out.append(b"".join(small))
        out += parts[1:-1]
        small = [parts[-1]]
    if small:
        out.append(b"".join(small))
    return out


def replies(conn: Any, n: int) -> list[Any]:
    """The next ``n`` replies on ``conn``, an error reply as its exception (not raised):
    a MULTI fetch's, one per command queued. Taken from redis-py's hiredis reader in a
    loop: ``read_response`` costs about 1 µs of Python per reply, and the look-ahead fetch's
    MULTI has about 2k + 4 (docs/architecture.md#lookahead-multi). A push message (RESP3) is
    handed to redis-py's parser, as ``read_response`` does; any other parser is read
    through ``read_response``."""
    parser = getattr(conn, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if not isinstance(parser, _HiredisParser) or reader is None:
        return [_one(conn) for _ in range(n)]
    push = getattr(parser, "_hiredis_PushNotificationType", None)
    out: list[Any] = []
    try:
        while len(out) < n:
            got = reader.gets()
            if got is _WAITING:  # not a whole reply yet
                parser.read_from_socket()
            elif isinstance(got, RedisConnectionError):
                raise got
            elif push is not None and isinstance(got, push):
                parser.handle_push_response(got)
            else:
                out.append(got)
    except BaseException:
        conn.disconnect()  # replies left unread: never reused as it is
        raise
    return out


def _one(conn: Any) -> Any:
    try:
        return conn.read_response()
    except ResponseError as exc:  # an error reply, as the loop above gives it
        return exc
