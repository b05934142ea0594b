"""Reading a kept result (docs/architecture.md#workflows): ``result(id, timeout)`` for a jid
(a job of ``results=True``, a chain's id, a chord's id) or a group id, and its async twin.

A waiter never polls: it reads the result, and while there is none it blocks on the
result's wake list (``BLPOP``, in chunks shorter than the socket timeout) that the script
writing the result pushes a token on; after each wake or chunk it reads again.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from .. import routing, store
from ..boundedjson import loads as json_loads
from ..config import Config, get_config
from ..core.workflow import GROUP_PREFIX
from ..errors import JobFailed, ResultExpired, ResultTimeout
from ..lifecycle.history import HOUR, hour_of
from . import aio
from .jobid import JobId

R = TypeVar("R")

MISSING: Any = object()


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _fields(raw: dict[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in raw.items()}


def _expired(of: str, fields: dict[str, str], now: float) -> None:
    try:
        at = float(fields.get("expires_at", "inf"))
    except ValueError:
        return
    if now > at:
        kept = fields.get("ttl", "?")
        raise ResultExpired(
            f"the result of {of} expired at {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime(at))}"
            f" (kept {kept}s, result_ttl)"
        )


def _failed(of: str, fields: dict[str, str], prefix: str = "") -> JobFailed:
    return JobFailed(
        fields.get(prefix + "jid") or of,
        fields.get(prefix + "error_class", ""),
        fields.get(prefix + "error_message", ""),
        fields.get(prefix + "traceback") or None,
        fields.get(prefix + "class") or None,
        of,
    )


def decode_result(jid: str, raw: dict[Any, Any], now: float) -> Any:
    """A result hash -> the value; raises JobFailed or ResultExpired; MISSING if none."""
    if not raw:
        return MISSING
    fields = _fields(raw)
    _expired(f"jid={jid}", fields, now)
    if fields.get("status") == "dead":
        raise _failed(jid, fields)
    if "value" not in fields:
        return MISSING
    return json_loads(fields["value"])


def decode_group(gid: str, raw: dict[Any, Any], now: float) -> Any:
    """A group's hash -> the list of results in order; JobFailed if a member died; MISSING
    while members are still running."""
    if not raw:
        return MISSING
    fields = _fields(raw)
    if "failed" in fields:
        raise _failed(gid, fields, "f:")
    if fields.get("left") != "0":
        return MISSING
    _expired(f"group {gid}", fields, now)
    return [json_loads(fields[f"r:{i}"]) for i in range(int(fields.get("n", "0")))]


def _where(config: Config, ident: str) -> tuple[str, str, Callable[[str, dict[Any, Any], float], Any]]:
    keys = config.keys
    if ident.startswith(GROUP_PREFIX):
        return keys.group(ident), keys.group_wait(ident), decode_group
    return keys.result(ident), keys.result_wait(ident), decode_result


def _timeout(ident: str, timeout: float) -> ResultTimeout:
    what = f"group {ident}" if ident.startswith(GROUP_PREFIX) else f"jid={ident}"
    return ResultTimeout(
        f"no result for {what} within {timeout:g}s: not finished yet, not a job that keeps "
        f"its result (results=True), or gone past twice its result_ttl"
    )


def _check(ident: Any, timeout: Any) -> None:
    if not isinstance(ident, str) or not ident:
        raise TypeError(f"result() takes a jid or group id (a non-empty string), got {ident!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise TypeError(f"result() takes a timeout in seconds (a number >= 0), got {timeout!r}")


def _placed(ident: str, config: Config) -> list[Config]:
    """Where ``ident``'s result may be: the config itself unless it is the fleet's in the
    queue layout; there, the part this process put it in, else every part."""
    if not routing.merged(config):
        return [config]
    name = routing.placed(ident)
    return [routing.named(config, name)] if name is not None else routing.all_parts(config)


def _traces(part: Config, ident: str, now: float) -> list[tuple[str, str, str | None]]:
    """What a part holds of ``ident`` once it was enqueued there: its result (a group's
    record, written at enqueue), its status, its queued field in the hour buckets (status
    on, the default): ``(command, key, field)``, any of them found is enough."""
    keys = part.keys
    found: list[tuple[str, str, str | None]] = [("EXISTS", _where(part, ident)[0], None)]
    if ident.startswith(GROUP_PREFIX) or not part.status:
        return found
    newest = hour_of(now)
    hours = [newest - k * HOUR for k in range(math.ceil(part.status_ttl / HOUR) + 1)]
    return [*found, ("EXISTS", keys.status(ident), None), *(("HEXISTS", keys.enq(h), ident) for h in hours)]


def _holds(part: Config, ident: str) -> bool:
    """Whether ``part`` knows ``ident``: one pipeline (``_traces``)."""
    pipe = store.pipeline(part.redis())
    for command, key, field in _traces(part, ident, time.time()):
        pipe.execute_command(command, key, *([field] if field is not None else []))
    return any(reply is True or reply == 1 for reply in pipe.execute(raise_on_error=False))


async def _holds_async(part: Config, ident: str) -> bool:
    """``_holds``, awaited."""
    pipe = aio.async_redis(part).pipeline(transaction=False)
    for command, key, field in _traces(part, ident, time.time()):
        pipe.execute_command(command, key, *([field] if field is not None else []))
    return any(reply is True or reply == 1 for reply in await pipe.execute(raise_on_error=False))


def _search(ident: str, parts: list[Config], deadline: float, timeout: float) -> Config:
    """The queue layout, an id this process didn't place: the part that knows it (its
    result, group, status or queued field), one pipeline each; a job not enqueued yet (or
    with status off and no result yet) is looked for again, with a growing pause, until
    ``deadline``: then a waiter polls, since a wait list is one part's."""
    pause = 0.05
    while True:
        for part in parts:
            if _holds(part, ident):
                return part
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timeout(ident, timeout)
        time.sleep(min(left, pause))
        pause = min(pause * 2, 0.5)


def peek(ident: str, config: Config | None = None, now: float | None = None) -> Any:
    """The result now, without waiting: the value, MISSING, or JobFailed/ResultExpired raised."""
    for where in _placed(ident, config or get_config()):
        key, _, decode = _where(where, ident)
        found = decode(ident, where.redis().hgetall(key), time.time() if now is None else now)
        if found is not MISSING:
            return found
    return MISSING


# An async job's R is its coroutine (the function's return type): its result is what it
# awaits to. Listed first, so the overlap with the next (mypy's overload-overlap) is intended.
@overload
def result(ident: JobId[Awaitable[R]], timeout: float = 10.0, config: Config | None = None) -> R: ...


@overload
def result(ident: JobId[R], timeout: float = 10.0, config: Config | None = None) -> R: ...


@overload
def result(ident: str, timeout: float = 10.0, config: Config | None = None) -> Any: ...


def result(ident: str, timeout: float = 10.0, config: Config | None = None) -> Any:
    """The result of a job (``results=True``), chain, chord or group, waiting up to ``timeout``
    seconds: of the job's return type, for type checkers, when ``ident`` is the ``JobId`` its
    ``enqueue`` gave. Raises ``JobFailed`` if it ended dead, ``ResultTimeout`` if none came in
    time, ``ResultExpired`` if it was kept but outlived its TTL."""
    _check(ident, timeout)
    deadline = time.monotonic() + timeout
    parts = _placed(ident, config or get_config())
    config = parts[0] if len(parts) == 1 else _search(ident, parts, deadline, timeout)
    client = config.redis()
    key, wait_key, decode = _where(config, ident)
    chunk = max(0.05, config.socket_timeout / 2)  # a BLPOP longer than the socket timeout would fail
    while True:
        found = decode(ident, client.hgetall(key), time.time())
        if found is not MISSING:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timeout(ident, timeout)
        if client.blpop([wait_key], timeout=min(left, chunk)):
            # The token was one waiter's: put back for the others once the result is there.
            found = decode(ident, client.hgetall(key), time.time())
            if found is not MISSING:
                client.rpush(wait_key, "1")
                client.expire(wait_key, 300)
                return found


@overload
async def result_async(ident: JobId[Awaitable[R]], timeout: float = 10.0, config: Config | None = None) -> R: ...


@overload
async def result_async(ident: JobId[R], timeout: float = 10.0, config: Config | None = None) -> R: ...


@overload
async def result_async(ident: str, timeout: float = 10.0, config: Config | None = None) -> Any: ...


async def result_async(ident: str, timeout: float = 10.0, config: Config | None = None) -> Any:
    """``result`` from asyncio code, on ``redis.asyncio`` (the loop is never blocked)."""
    _check(ident, timeout)
    deadline = time.monotonic() + timeout
    config = config or get_config()
    parts = _placed(ident, config) if not routing.split(config) else await asyncio.to_thread(_placed, ident, config)
    config = parts[0] if len(parts) == 1 else await _search_async(ident, parts, deadline, timeout)
    client = aio.async_redis(config)
    key, wait_key, decode = _where(config, ident)
    chunk = max(0.05, config.socket_timeout / 2)
    while True:
        found = decode(ident, await client.hgetall(key), time.time())
        if found is not MISSING:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timeout(ident, timeout)
        if await client.blpop([wait_key], timeout=min(left, chunk)):
            found = decode(ident, await client.hgetall(key), time.time())
            if found is not MISSING:
                await client.rpush(wait_key, "1")
                await client.expire(wait_key, 300)
                return found


async def _search_async(ident: str, parts: list[Config], deadline: float, timeout: float) -> Config:
    """``_search``, awaited."""
    pause = 0.05
    while True:
        for part in parts:
            if await _holds_async(part, ident):
                return part
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timeout(ident, timeout)
        await asyncio.sleep(min(left, pause))
        pause = min(pause * 2, 0.5)
