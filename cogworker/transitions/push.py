"""Enqueueing (docs/architecture.md#enqueue): a single small job's push, a periodic slot's
(with its pushed mark), a unique job's (with its lock), a job joining a batch; and the
locks' compare-and-delete and compare-and-extend.

``push``, ``unique_push`` and ``batch_push`` return their ``Call``: the sync client sends
it raw or runs it, the async client awaits it (``call.run_async``), the same call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .call import Arg, Call, Key, entry, run


class Queued(NamedTuple):
    """A job's queued status riding in its push (docs/architecture.md#status-buckets)."""

    bucket: Key  # enq:<hour>
    jid: Arg
    record: Arg
    ttl: Arg  # the bucket's TTL, or "" (set already)


@entry("push", keys=4)
def push(*, queue_key: Key, queues: Key, wake: Key, status: Sequence[Queued], job: Arg, queue: Arg) -> Call:
    """``status``: none, or the one field of the job's queued status."""
    return Call(
        "push",
        [queue_key, queues, wake, *(s.bucket for s in status)],
        [job, queue, *(a for s in status for a in s[1:])],
    )


@entry("periodic_push", keys=5)
def periodic_push(
    client: Any,
    *,
    queue_key: Key,
    queues: Key,
    wake: Key,
    status: Sequence[Queued],
    mark: Key,
    job: Arg,
    queue: Arg,
    jid: Arg,
    mark_ttl: Arg,
) -> str | None:
    """push.lua's push with the slot's pushed mark; the jid the slot was pushed as
    already (nothing pushed), or None (pushed now)."""
    reply = run(
        client,
        Call(
            "periodic_push",
            [queue_key, queues, wake, *(s.bucket for s in status), mark],
            [job, queue, *(a for s in status for a in s[1:]), jid, mark_ttl],
        ),
    )
    return reply.decode() if isinstance(reply, bytes) else None


@entry("unique_push", keys=3)
def unique_push(*, lock: Key, target: Key, queues: Key, jid: Arg, ttl: Arg, payload: Arg, at: Arg, queue: Arg) -> Call:
    """Replies 1 (pushed, the lock taken) or 0 (a duplicate: nothing written)."""
    return Call("unique_push", [lock, target, queues], [jid, ttl, payload, at, queue])


@entry("batch_push", keys=6)
def batch_push(
    *,
    record: Key,
    jobs: Key,
    target: Key,
    queues: Key,
    wake: Key,
    lock: Key,
    at: Arg,
    queue: Arg,
    lock_ttl: Arg,
    pairs: Sequence[Arg],
) -> Call:
    """``pairs``: jid, payload, jid, payload... Replies 1 (written), 0 (a duplicate of a
    unique job), -1 (no such batch), -2 (the batch is done)."""
    return Call("batch_push", [record, jobs, target, queues, wake, lock], [at, queue, lock_ttl, *pairs])


@entry("release_lock", keys=1)
def release_lock(client: Any, *, lock: Key, owner: Arg) -> bool:
    """Deletes ``lock`` if ``owner`` holds it."""
    return bool(run(client, release_lock_call(lock=lock, owner=owner)) == 1)


def release_lock_call(*, lock: Key, owner: Arg) -> Call:
    """``release_lock``'s call, to send with other commands (a fetch's round trip)."""
    return Call("release_lock", [lock], [owner])


@entry("release_locks", keys=1)
def release_locks(*, locks: Sequence[Key], owners: Sequence[Arg]) -> Call:
    """Deletes each of ``locks`` that its owner in ``owners`` (same order) holds."""
    return Call("release_locks", list(locks), list(owners))


def merged(calls: Sequence[Call]) -> list[Call]:
    """``calls`` with every ``release_lock`` among them made one ``release_locks`` (one
    script call for the releases riding on a fetch); the others as they are."""
    releases = [c for c in calls if c.script == "release_lock"]
    if len(releases) < 2:
        return list(calls)
    rest = [c for c in calls if c.script != "release_lock"]
    return [*rest, release_locks(locks=[c.keys[0] for c in releases], owners=[c.args[0] for c in releases])]


@entry("extend_lock", keys=1)
def extend_lock(client: Any, *, lock: Key, owner: Arg, ttl: Arg) -> bool:
    """A new TTL for ``lock`` if ``owner`` holds it."""
    return bool(run(client, Call("extend_lock", [lock], [owner, ttl])) == 1)
