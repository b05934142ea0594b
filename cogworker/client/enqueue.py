"""Enqueueing: writing a built payload, single, bulk (pipelined) or scheduled; the client
middleware chain runs here, and ``enqueued`` fires. The handles that build payloads
(``Job``, ``BoundJob``, ``by_name``) are in ``client/jobs.py``, above this module."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import routing, store
from ..config import Config, get_config, redact_url
from ..core import batchscope, hooks, tracing
from ..core.middleware import client_middleware
from ..core.payload import dumps, priority_of
from ..errors import ConfigurationError
from ..keys import Keys, level_name
from ..lifecycle import unique
from ..store import NoScriptError, guard, replication
from ..store import errors as store_errors
from ..store import pipes as rawpipe
from ..transitions import call
from ..transitions import push as push_scripts
from . import status as status_enqueue

BULK_CHUNK = 1000  # values per LPUSH in a bulk enqueue
# Up to this size a single enqueue is one push.lua call; a larger job takes the pipeline,
# since Lua hashes every byte of the job it is handed (about 1.5 µs per KB).
PUSH_SCRIPT_MAX = 4096
# Queues (by key) whose last single push from this process found jobs already waiting:
# the next push there is a plain LPUSH, as a bare client's (docs/architecture.md#enqueue).
_backlogged: set[str] = set()
# The innermost write, replaced while cogworker.testing's inline or fake mode is on
# (``(payload, at) -> jid``): the client middleware still runs around it. None: Redis.
sink: Callable[[dict[str, Any], float | None], str | None] | None = None


def _write(pipe: Any, payload: dict[str, Any], encoded: str, at: float | None, config: Config) -> None:
    """``config``: the job's part (``routing.holder(config, queue)``; one part: the config itself)."""
    keys = config.keys
    status(pipe, payload, at, config)  # before the push: a worker's "running" can't be overwritten by it
    priority = priority_of(payload)
    if priority:  # before the job: a worker that reads the levels names its level's list
        pipe.sadd(keys.levels, level_name(payload["queue"], priority))
    if at is not None and at > time.time():
        pipe.zadd(keys.schedule, {encoded: at})
    else:
        pipe.lpush(keys.job_queue(payload["queue"], priority), encoded)
        pipe.sadd(keys.queues, payload["queue"])
        wake(pipe, config)


def status(pipe: Any, payload: dict[str, Any], at: float | None, config: Config) -> None:
    """The job's queued/scheduled status, riding in the push's pipeline (no round trip)."""
    found = status_enqueue.enqueue_fields(config, payload, at)
    if found is not None:
        hset(pipe, found)


def hset(pipe: Any, found: status_enqueue.EnqueueWrite) -> None:
    key, ttl, fields = found
    pipe.hset(key, mapping=fields)
    if ttl is not None:
        pipe.expire(key, ttl)


def status_many(pipe: Any, payloads: list[dict[str, Any]], config: Config) -> None:
    """Queued statuses of a bulk enqueue (of one part): one HSET of the hour's bucket."""
    wanted = [p for p in payloads if status_enqueue.writes_enqueue(config, p)]
    if wanted:
        hset(pipe, status_enqueue.enqueue_bucket(config, wanted, time.time()))


def wake(pipe: Any, config: Config) -> None:
    """Wakes idle workers of several queues (see fetch.lua); rides in the same pipeline."""
    pipe.xadd(config.keys.wake, {"w": 1}, maxlen=100, approximate=True)


def _execute(pipe: Any) -> None:
    """Runs the pipeline; raises the first error except the wake's and the known-queues
    set's and the status's (best-effort: a key of the wrong type there must not make a written job look
    unwritten, or a caller's retry would enqueue it twice)."""
    need = replication.wait_on(pipe)  # wait_replicas: the WAIT rides last, on the same connection
    commands = [c[0][0] for c in pipe.command_stack]
    results = pipe.execute(raise_on_error=False)
    check_written(commands, results, need)


def check_written(commands: list[Any], results: list[Any], need: replication.Need | None) -> None:
    if need is not None:
        commands, waited = commands[:-1], results.pop()
    for name, result in zip(commands, results, strict=True):
        if isinstance(result, Exception) and name not in ("XADD", "SADD", "HSET", "EXPIRE"):
            raise result
    if need is not None:
        need.check(waited)


def _push_one(client: Any, payload: dict[str, Any], encoded: str, config: Config) -> None:
    """A small job onto its queue in one round trip, sent as bare commands (rawpipe: no
    pipeline or Script object per call). While the queue has a backlog (the last push here
    found jobs waiting): a plain LPUSH, after the HSET of its queued status if on. The push
    that made the queue non-empty named it in ``queues`` and woke the idle workers, and
    those are awake until it is empty again; a plain push that finds it was empty after
    all does both now, one round trip later. Otherwise push.lua: the push, ``queues``, the
    wake when it made the queue non-empty, and the status field, in one command."""
    keys, queue = config.keys, payload["queue"]
    key = keys.queue(queue)
    found = status_enqueue.queued_field(config, payload)
    if key in _backlogged and (found is None or found[1] is None):
        status = () if found is None else (("HSET", found[0], found[2], found[3]),)
        # HSET first, as in the pipeline: a worker's later "running" is never overwritten.
        pushed = rawpipe.send(client, *status, ("LPUSH", key, encoded))[-1]  # a failed HSET: best-effort
        if rawpipe.ok(pushed) > 1:
            return
        _backlogged.discard(key)
        guard.best_effort("waking idle workers", _name_and_wake, client, keys, queue)
        return
    one = push_call(keys, queue, encoded, found)
    [n] = rawpipe.send(client, call.command(client, one))
    if isinstance(n, NoScriptError):  # not run: Redis lost it (a restart, SCRIPT FLUSH)
        n = call.run(client, one)
    if rawpipe.ok(n) > 1:
        _backlogged.add(key)


def queued(found: tuple[str, int | None, str, str] | None) -> list[push_scripts.Queued]:
    """The job's enq:<hour> field riding in its push (``found``), if any."""
    if found is None:
        return []
    bucket, ttl, jid, record = found
    return [push_scripts.Queued(bucket, jid, record, "" if ttl is None else ttl)]


def push_call(keys: Keys, queue: str, encoded: str, found: tuple[str, int | None, str, str] | None) -> call.Call:
    """push.lua's call; ``found``: the job's enq:<hour> field, riding in it."""
    return push_scripts.push(
        queue_key=keys.queue(queue), queues=keys.queues, wake=keys.wake, status=queued(found), job=encoded, queue=queue
    )


class SlotPushed(Exception):
    """``periodic_push.lua`` refused: the slot's mark names the job it was pushed as already."""

    def __init__(self, jid: str) -> None:
        super().__init__(f"this periodic slot was pushed already, as jid={jid}")
        self.jid = jid


def _push_marked(client: Any, payload: dict[str, Any], encoded: str, mark: tuple[str, int], config: Config) -> None:
    """``periodic_push.lua``: push.lua's call with the mark after it, whatever the job's
    size (rare: a periodic slot's). Raises SlotPushed if the slot's mark is there already."""
    keys, queue = config.keys, payload["queue"]
    pushed_as = push_scripts.periodic_push(
        client,
        queue_key=keys.job_queue(queue, priority_of(payload)),
        queues=keys.queues,
        wake=keys.wake,
        status=queued(status_enqueue.queued_field(config, payload)),
        mark=mark[0],
        job=encoded,
        queue=queue,
        jid=payload["jid"],
        mark_ttl=mark[1],
    )
    if pushed_as is not None:
        raise SlotPushed(pushed_as)


def _name_and_wake(client: Any, keys: Keys, queue: str) -> None:
    for reply in rawpipe.send(
        client, ("SADD", keys.queues, queue), ("XADD", keys.wake, "MAXLEN", "~", 100, "*", "w", 1)
    ):
        rawpipe.ok(reply)


def push(
    payload: dict[str, Any], at: float | None = None, config: Config | None = None, mark: tuple[str, int] | None = None
) -> str | None:
    """Write one job (to its queue, or to ``schedule`` when ``at`` is in the future).

    Returns its jid, or None when a client middleware or a held unique lock dropped it.
    Serialization happens before anything is written: a bad argument writes nothing.
    ``config``: whose client writes it (the prefork master's has a short timeout).
    ``mark``: (key, ttl): a key set to the jid in the push's own step (a periodic slot's:
    its ticker can tell a push whose reply was lost from one that never landed).
    """
    try:
        if tracing.ON and tracing.active(config):  # a PRODUCER span, its context into the payload
            with tracing.producing(payload, at) as span:
                return tracing.written(span, _push(payload, at, config, mark))
        return _push(payload, at, config, mark)
    except (store.ConnectionError, store.TimeoutError) as exc:
        found = unreachable(str(payload.get("class")), config, exc)
        if found is exc:
            raise
        raise found from exc


def unreachable(what: str, config: Config | None, error: BaseException) -> BaseException:
    """``error`` as an enqueue raises it: an unreachable Redis as ``cogworker.RedisUnavailable``
    (one line, the URL without its password), anything else as it was."""
    return store_errors.unreachable(what, redact_url((config or get_config()).redis_url), error)


def _push(
    payload: dict[str, Any], at: float | None, config: Config | None, mark: tuple[str, int] | None = None
) -> str | None:
    if sink is not None:
        divert = sink
        dumps(payload)
        return client_middleware.invoke((payload,), lambda: divert(payload, at))
    if not client_middleware:
        return _final(payload, at, config, mark)
    dumps(payload)  # refuse bad arguments before any middleware sees them (_final checks too)
    return client_middleware.invoke((payload,), lambda: _final(payload, at, config, mark))


def _final(
    payload: dict[str, Any], at: float | None, config: Config | None, mark: tuple[str, int] | None = None
) -> str | None:
    """The push itself, inside the client middleware chain."""
    if at is not None:
        if at > time.time():
            payload["at"] = at
        else:
            at = None  # due already: to its queue
    unique_for = payload.get("unique_for")
    given = config or get_config()
    into = part_of(given, payload) if routing.split(given) else given  # the job's part (one part: given)
    bid = batchscope.joining()
    if bid is not None:
        payload.setdefault("wf", {})["b"] = bid  # counted by the script of its settlement
    if unique_for:
        dumps(payload)  # the clear TypeError before the digest's own serialization
        unique.prepare(payload)
    encoded = dumps(payload)
    client = into.redis()
    priority = priority_of(payload)
    if priority and (bid is not None or unique_for or mark is not None):  # scripts push it: its level known first
        client.sadd(into.keys.levels, level_name(payload["queue"], priority))
    if bid is not None:
        jid = joined(bid, call.run(client, batch_call(bid, payload, encoded, at, into)), payload)
        if jid is not None and status_enqueue.writes_enqueue(into, payload):
            pipe = store.pipeline(client)
            status(pipe, payload, at, into)
            guard.best_effort("writing job status", pipe.execute)
    elif unique_for:
        jid = unique.push(client, payload, encoded, at, into.keys)
        if jid is not None and status_enqueue.writes_enqueue(into, payload):
            # The lock and the push are one script: its status follows in a pipeline of its own.
            pipe = store.pipeline(client)
            status(pipe, payload, at, into)
            guard.best_effort("writing job status", pipe.execute)
    elif at is None and mark is not None:
        _push_marked(client, payload, encoded, mark, into)
        jid = payload["jid"]
    elif at is None and len(encoded) <= PUSH_SCRIPT_MAX and not priority:
        _push_one(client, payload, encoded, into)
        jid = payload["jid"]
    else:
        pipe = store.pipeline(client)
        _write(pipe, payload, encoded, at, into)
        _execute(pipe)
        jid = payload["jid"]
    if jid is not None and hooks.wanted("enqueued"):
        hooks.fire("enqueued", payload, queue=payload.get("queue"), config=config)
    return jid


def part_of(config: Config, payload: dict[str, Any]) -> Config:
    """A split layout: the part ``payload``'s queue is in, listed in the fleet's registry;
    checked against the batch it joins (one part per batch)."""
    queue = payload["queue"]
    into = routing.place(config, queue)
    if "wf" in payload:  # a result may be waited for: result() finds it without a search
        routing.remember(payload["jid"], into)
    scope = batchscope.joining_scope()
    if scope is not None:
        scope.join(into, queue)
    return into


def _push_joining(bid: str, bulk: list[dict[str, Any]], config: Config) -> None:
    """A bulk enqueue into batch ``bid`` (``config``: its part): its jobs counted in
    the scripts that write them."""
    for payload in bulk:
        payload.setdefault("wf", {})["b"] = bid
    client = config.redis()
    pipe = store.pipeline(client)
    status_many(pipe, bulk, config)  # before the push, as in the plain pipeline
    guard.best_effort("writing job status", pipe.execute)
    for one in batch_calls(bid, bulk, [dumps(p) for p in bulk], config):
        joined(bid, call.run(client, one), {"jid": ""})
    if hooks.wanted("enqueued"):
        for payload in bulk:
            hooks.fire("enqueued", payload, queue=payload["queue"])


def batch_call(bid: str, payload: dict[str, Any], encoded: str, at: float | None, config: Config) -> call.Call:
    """``batch_push.lua``'s call (the sync and the async client send the same)."""
    keys = config.keys
    scheduled = at is not None and at > time.time()
    lock = keys.unique(payload["unique_digest"]) if payload.get("unique_for") else keys.batch(bid)
    ttl = unique.lock_ttl(payload, (at - time.time()) if scheduled and at else 0.0) if payload.get("unique_for") else ""
    return push_scripts.batch_push(
        record=keys.batch(bid),
        jobs=keys.batch_jobs(bid),
        target=keys.schedule if scheduled else keys.job_queue(payload["queue"], priority_of(payload)),
        queues=keys.queues,
        wake=keys.wake,
        lock=lock,
        at=repr(at) if scheduled else "",
        queue=payload["queue"],
        lock_ttl=ttl,
        pairs=[payload["jid"], encoded],
    )


def batch_calls(bid: str, payloads: list[dict[str, Any]], encoded: list[str], config: Config) -> list[call.Call]:
    """``batch_push.lua`` calls for a bulk enqueue into a batch: one per queue and chunk."""
    keys = config.keys
    by_queue: dict[str, list[str]] = {}
    for payload, raw in zip(payloads, encoded, strict=True):
        by_queue.setdefault(payload["queue"], []).extend((payload["jid"], raw))
    calls = []
    for queue, pairs in by_queue.items():
        for i in range(0, len(pairs), 2 * BULK_CHUNK):
            calls.append(
                push_scripts.batch_push(
                    record=keys.batch(bid),
                    jobs=keys.batch_jobs(bid),
                    target=keys.queue(queue),
                    queues=keys.queues,
                    wake=keys.wake,
                    lock=keys.batch(bid),
                    at="",
                    queue=queue,
                    lock_ttl="",
                    pairs=pairs[i : i + 2 * BULK_CHUNK],
                )
            )
    return calls


def joined(bid: str, reply: Any, payload: dict[str, Any]) -> str | None:
    """``batch_push.lua``'s answer: the jid, None for a duplicate, or why it can't join."""
    if reply == -1:
        raise ConfigurationError(f"batch {bid} is unknown or expired: no job can join it")
    if reply == -2:
        raise ConfigurationError(f"batch {bid} is done (its callbacks fired): no job can join it")
    return str(payload["jid"]) if reply == 1 else None


def push_many(payloads: Sequence[dict[str, Any]]) -> list[str | None]:
    """Bulk: one pipeline, one multi-value LPUSH per queue and chunk, in order (unique
    jobs and jobs under client middleware take the single path, one by one)."""
    encoded = [dumps(p) for p in payloads]  # all refused before any is written
    if sink is not None:
        return [push(p) for p in payloads]
    singles, by_queue, bulk = bulk_plan(payloads, encoded)
    jids: list[str | None] = [p.get("jid") for p in payloads]
    for i in singles:
        jids[i] = push(payloads[i])  # one by one: a traced enqueue is a span and a payload field each
    config = get_config()
    for into, queues, part in by_part(config, by_queue, bulk):
        bid = batchscope.joining()
        if bid is not None and part:
            _push_joining(bid, part, into)
        elif queues:
            pipe = store.pipeline(into.redis())
            bulk_write(pipe, queues, part, into)
            _execute(pipe)
            bulk_enqueued(part)
    return jids


def by_part(
    config: Config,
    by_queue: dict[str, list[str]],
    bulk: list[dict[str, Any]],
) -> list[tuple[Config, dict[str, list[str]], list[dict[str, Any]]]]:
    """A bulk's plain jobs split by part, each with its part's config (one pipeline
    each: a pipeline is one slot's); one part: all of it, as one."""
    if not routing.split(config):
        return [(config, by_queue, bulk)]
    parts: dict[str | None, tuple[Config, dict[str, list[str]], list[dict[str, Any]]]] = {}
    for queue, raws in by_queue.items():
        into = part_of(config, {"queue": queue})
        parts.setdefault(routing.name_of(into), (into, {}, []))[1][queue] = raws
    for payload in bulk:
        parts[routing.name_of(routing.holder(config, payload["queue"]))][2].append(payload)
    return list(parts.values())


def bulk_plan(
    payloads: Sequence[dict[str, Any]],
    encoded: Sequence[str],
) -> tuple[list[int], dict[str, list[str]], list[dict[str, Any]]]:
    """Which payloads take the single path (their indexes, in order: unique jobs, jobs of
    a priority (their level's list), jobs under client middleware or tracing), and the
    rest: their encodings by queue, and themselves."""
    singles: list[int] = []
    by_queue: dict[str, list[str]] = {}
    bulk: list[dict[str, Any]] = []
    for i, (payload, raw) in enumerate(zip(payloads, encoded, strict=True)):
        if (
            len(client_middleware)
            or payload.get("unique_for")
            or "priority" in payload
            or tracing.ON
            and tracing.active()
        ):
            singles.append(i)
            continue
        by_queue.setdefault(payload["queue"], []).append(raw)
        bulk.append(payload)
    return singles, by_queue, bulk


def bulk_write(pipe: Any, by_queue: dict[str, list[str]], bulk: list[dict[str, Any]], config: Config) -> None:
    """Queues the bulk's writes on ``pipe`` (sync or asyncio): statuses, pushes, known
    queues, the wake (``config``: their part)."""
    keys = config.keys
    status_many(pipe, bulk, config)
    for queue, raws in by_queue.items():
        for i in range(0, len(raws), BULK_CHUNK):
            # LPUSH k a b c leaves a nearest the fetch end: first in, first out.
            pipe.lpush(keys.queue(queue), *raws[i : i + BULK_CHUNK])
        pipe.sadd(keys.queues, queue)
    wake(pipe, config)


def bulk_enqueued(bulk: list[dict[str, Any]]) -> None:
    if hooks.wanted("enqueued"):
        for payload in bulk:
            hooks.fire("enqueued", payload, queue=payload["queue"])
