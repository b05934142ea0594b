"""Enqueueing from asyncio code (``await job.enqueue_async(...)``), on ``redis.asyncio``:
the same payloads, the same pipelines and scripts, and the same client middleware as
``client/enqueue.py``. Middleware is sync code (``fn(payload, call_next)``): when any is
installed, the chain runs in a worker thread and its innermost step awaits the write on
the caller's loop, so each middleware sees the real result (a jid, or None for a
duplicate) exactly as with ``enqueue``."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from typing import Any

from .. import routing, store
from ..config import Config, get_config
from ..core import batchscope, hooks, tracing
from ..core.middleware import client_middleware
from ..core.payload import dumps, priority_of
from ..keys import level_name
from ..lifecycle import unique
from ..store import guard, replication
from ..store.connection import connect_async
from ..transitions import call
from . import enqueue as client
from . import status as status_enqueue

# loop -> {(redis URL, wait_replicas's need, namespace): client}: a redis.asyncio client belongs to the
# loop it first ran on.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, Any, str], store.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)


def async_redis(config: Config | None = None) -> store.AsyncClient:
    """This loop's client for the configured Redis (made on first use, kept per loop)."""
    config = config or get_config()
    loop = asyncio.get_running_loop()
    per_loop = _clients.setdefault(loop, {})
    key = (config.redis_url, config.replication_need, config.keys.namespace)
    found = per_loop.get(key)
    if found is None:  # config.cluster: asked of the node once per process (a blocking INFO), then kept
        config.require_durable()  # durability="aof": asked once per process (blocking, as above)
        found = per_loop[key] = connect_async(
            config.client_url,
            config.socket_timeout,
            config.socket_connect_timeout,
            config.replication_need,
            config.cluster,
            config.keys.namespace,
        )
    return found


async def aclose() -> None:
    """Close this loop's clients (an ASGI app's lifespan, at shutdown): a redis.asyncio
    client left open warns when its loop is gone. The next use makes new ones."""
    per_loop = _clients.pop(asyncio.get_running_loop(), {})
    for found in per_loop.values():
        await found.aclose()


async def _execute(pipe: Any) -> None:
    """As ``client._execute``: only the job's own write may fail the push."""
    need = replication.wait_on(pipe)  # wait_replicas: the WAIT rides last, on the same connection
    commands = [c[0][0] for c in pipe.command_stack]
    results = await pipe.execute(raise_on_error=False)
    client.check_written(commands, results, need)


async def _unique_push(conn: Any, push: call.Call) -> Any:
    """unique_push.lua (or batch_push.lua); with wait_replicas, with its WAIT in one pipeline."""
    if replication.need_of(conn) is None:
        return await call.run_async(conn, push)
    pipe = store.pipeline(conn)
    await call.run_async(conn, push, pipe)  # queued, not sent
    need = replication.wait_on(pipe)
    pushed, waited = await pipe.execute(raise_on_error=False)
    if isinstance(pushed, Exception):
        raise pushed
    if need is not None:
        need.check(waited)
    return pushed


async def _write_one(payload: dict[str, Any], at: float | None) -> str | None:
    """``client.push``'s innermost step, awaited."""
    if at is not None and at > time.time():
        payload["at"] = at
    given = get_config()
    # The job's part (one part: the config itself); its listing in the registry (an SADD,
    # once per process) runs off the loop.
    into = await asyncio.to_thread(client.part_of, given, payload) if routing.split(given) else given
    bid = batchscope.joining()
    if bid is not None:
        payload.setdefault("wf", {})["b"] = bid
    if payload.get("unique_for"):
        dumps(payload)
        unique.prepare(payload)
    encoded = dumps(payload)
    conn: Any = async_redis(into)  # the runner registers scripts on either kind of client
    priority = priority_of(payload)
    if priority and (bid is not None or payload.get("unique_for")):  # as client._final
        await conn.sadd(into.keys.levels, level_name(payload["queue"], priority))
    if bid is not None:
        jid = client.joined(bid, await _unique_push(conn, client.batch_call(bid, payload, encoded, at, into)), payload)
        if jid is not None and status_enqueue.writes_enqueue(into, payload):
            await _status(conn, payload, at, into)
    elif payload.get("unique_for"):
        try:
            pushed = await _unique_push(conn, unique.push_call(payload, encoded, at, into.keys))
        except store.ResponseError as exc:
            call.raise_if_fenced(exc)
            raise
        jid = payload["jid"] if pushed == 1 else None
        if jid is not None and status_enqueue.writes_enqueue(into, payload):
            await _status(conn, payload, at, into)
    else:
        pipe = store.pipeline(conn)
        client._write(pipe, payload, encoded, at, into)
        await _execute(pipe)
        jid = payload["jid"]
    if jid is not None and hooks.wanted("enqueued"):
        hooks.fire("enqueued", payload, queue=payload.get("queue"))
    return jid


async def _status(conn: Any, payload: dict[str, Any], at: float | None, config: Config) -> None:
    pipe = store.pipeline(conn)
    client.status(pipe, payload, at, config)
    try:
        await pipe.execute()
    except Exception as exc:  # best-effort, as the sync client's (guard.best_effort)
        guard.handle("writing job status", exc)


async def push(payload: dict[str, Any], at: float | None = None) -> str | None:
    """``client.push``, awaited: the jid, or None when a middleware or a unique lock dropped it."""
    if client.sink is not None:  # cogworker.testing: the job may run now, off this loop
        return await asyncio.to_thread(client.push, payload, at)
    try:
        if tracing.ON and tracing.active():
            with tracing.producing(payload, at) as span:  # a PRODUCER span, current across the await
                return tracing.written(span, await _untraced(payload, at))
        return await _untraced(payload, at)
    except (store.ConnectionError, store.TimeoutError) as exc:
        found = client.unreachable(str(payload.get("class")), None, exc)
        if found is exc:
            raise
        raise found from exc


async def _untraced(payload: dict[str, Any], at: float | None) -> str | None:
    if not len(client_middleware):
        return await _write_one(payload, at)
    dumps(payload)
    loop = asyncio.get_running_loop()

    def chain() -> str | None:
        def final() -> str | None:
            return asyncio.run_coroutine_threadsafe(_write_one(payload, at), loop).result()

        result: str | None = client_middleware.invoke((payload,), final)
        return result

    return await asyncio.to_thread(chain)


async def push_many(payloads: Sequence[dict[str, Any]]) -> list[str | None]:
    """``client.push_many``, awaited: one pipeline for the plain jobs (unique jobs and
    jobs under client middleware one by one, in order)."""
    encoded = [dumps(p) for p in payloads]  # all refused before any is written
    if client.sink is not None:
        return await asyncio.to_thread(client.push_many, payloads)
    singles, by_queue, bulk = client.bulk_plan(payloads, encoded)
    jids: list[str | None] = [p.get("jid") for p in payloads]
    for i in singles:
        jids[i] = await push(payloads[i])
    config = get_config()
    parts = (
        await asyncio.to_thread(client.by_part, config, by_queue, bulk)
        if routing.split(config)
        else [(config, by_queue, bulk)]
    )
    for into, queues, part in parts:
        bid = batchscope.joining()
        if bid is not None and part:
            await _push_joining(bid, part, into)
        elif queues:
            pipe = store.pipeline(async_redis(into))
            client.bulk_write(pipe, queues, part, into)
            await _execute(pipe)
            client.bulk_enqueued(part)
    return jids


async def _push_joining(bid: str, bulk: list[dict[str, Any]], config: Config) -> None:
    """``client._push_joining``, awaited: each chunk counted by the script that writes it."""
    for payload in bulk:
        payload.setdefault("wf", {})["b"] = bid
    conn: Any = async_redis(config)
    pipe = store.pipeline(conn)
    client.status_many(pipe, bulk, config)
    try:
        await pipe.execute()
    except Exception as exc:  # best-effort, as the sync client's
        guard.handle("writing job status", exc)
    for push in client.batch_calls(bid, bulk, [dumps(p) for p in bulk], config):
        client.joined(bid, await _unique_push(conn, push), {"jid": ""})
    if hooks.wanted("enqueued"):
        for payload in bulk:
            hooks.fire("enqueued", payload, queue=payload["queue"])
