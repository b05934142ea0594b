"""The ways a job leaves an in-progress list (docs/architecture.md#fate-table): its ack
(plain, or with its workflow's writes), a give-back, a filing in retry or dead, a parking
in ``unsettled``, an iterable job's suspend, and the requeue of a whole list. Each is
refused (``Fenced``) once the list's owner was declared dead; ``checkpoint`` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, TypedDict

from ..keys import Keys
from .call import Arg, Call, Key, entry, run, texts
from .declare import Declared, run_declared


class SettlingKeys(TypedDict):
    """The fixed keys every script that settles a job for good may write (complete, file,
    file_head, settle_dead, cancel): a callback pushed (the known-queues set, the wake
    stream), a kept result's index, the batch callbacks counter."""

    queues: Key
    wake: Key
    results_index: Key
    batch_callbacks: Key


def settling_keys(keys: Keys) -> SettlingKeys:
    """Spread into those calls: ``settle.file(..., **settling_keys(keys), ...)``."""
    return SettlingKeys(
        queues=keys.queues,
        wake=keys.wake,
        results_index=keys.retained_results,
        batch_callbacks=keys.stats_batch_callbacks,
    )


class Settled(NamedTuple):
    """complete.lua's reply: whether the job was still listed (else a replay), and what
    couldn't be written beside it (keys of the wrong type, an expired group)."""

    done: bool
    errors: list[str]


class Requeued(NamedTuple):
    moved: int  # -1: orphan recovery's requeue found the owner alive
    fenced_now: bool  # this requeue fenced the identity (it wasn't yet)
    buried: list[bytes]  # repeat orphans the script filed in dead raw (the caller completes them)
    # For a gone owner's list ("reclaim", "dead:"): "c"/"u" (an orphaning counted or not)
    # alternating with each job moved or parked, for the ``orphaned`` hook.
    orphaned: list[bytes] = []


@entry("ack", keys=4)
def ack(client: Any, *, in_progress: Key, orphans: Key, fence: Key, last_beat: Key, job: Arg, identity: Arg) -> None:
    run(client, Call("ack", [in_progress, orphans, fence, last_beat], [job, identity]))


@entry("complete", keys=17)
def complete(
    client: Any,
    keys: Keys,
    *,
    in_progress: Key,
    orphans: Key,
    fence: Key,
    last_beat: Key,
    result: Key,
    result_wait: Key,
    next_queue_key: Key,
    queues: Key,
    wake: Key,
    group: Key,
    group_wait: Key,
    batch_key: Key,
    batch_jobs: Key,
    results_index: Key,
    batch_callbacks: Key,
    chain_mark: Sequence[Key],
    declared: Sequence[Declared],
    job: Arg,
    identity: Arg,
    jid: Arg,
    value: Arg,
    ttl: Arg,
    now: Arg,
    group_id: Arg,
    member: Arg,
    next_payload: Arg,
    next_queue: Arg,
    batch_id: Arg,
    keep: Arg,
) -> Settled:
    """``keys``: for a callback's keys the script asks to be declared (``declare.run_declared``:
    one more call, for the settlement that fires one)."""
    sent = [in_progress, orphans, fence, last_beat, result, result_wait, next_queue_key, queues, wake]
    sent += [group, group_wait, batch_key, batch_jobs, results_index, batch_callbacks, *chain_mark]
    args = [job, identity, jid, value, ttl, now, group_id, member, next_payload, next_queue, batch_id, keep]
    reply = run_declared(client, keys, Call("complete", sent, args), declared).reply
    return Settled(reply[0] == 1, texts(reply[1:]))


@entry("file", keys=10)
def file(
    client: Any,
    keys: Keys,
    *,
    in_progress: Key,
    zset: Key,
    orphans: Key,
    fence: Key,
    last_beat: Key,
    queues: Key,
    wake: Key,
    results_index: Key,
    batch_callbacks: Key,
    declared: Sequence[Declared],
    job: Arg,
    score: Arg,
    entry: Arg,
    dead: Arg,
    oldest: Arg,
    most: Arg,
    identity: Arg,
    workflows: Arg,
    now: Arg,
    keep: Arg,
) -> bool:
    """Into retry or dead, off the list; False if no longer listed. ``keys``: for what the
    script asks to be declared (``declare.run_declared``)."""
    sent = [in_progress, zset, orphans, fence, last_beat, queues, wake, results_index, batch_callbacks]
    args = [job, score, entry, dead, oldest, most, identity, workflows, now, keep]
    return bool(run_declared(client, keys, Call("file", sent, args), declared).reply == 1)


@entry("give_back", keys=5)
def give_back(
    client: Any, *, in_progress: Key, fence: Key, queue: Key, wake: Key, lock: Sequence[Key], job: Arg
) -> bool:
    """``job`` back on ``queue`` (``lock``: its unique lock, renewed, or none); False if
    no longer listed."""
    return bool(run(client, Call("give_back", [in_progress, fence, queue, wake, *lock], [job])) == 1)


@entry("park_unsettled", keys=3)
def park_unsettled(client: Any, *, in_progress: Key, unsettled: Key, fence: Key, job: Arg, record: Arg) -> bool:
    return bool(run(client, Call("park_unsettled", [in_progress, unsettled, fence], [job, record])) == 1)


@entry("suspend", keys=9)
def suspend(
    client: Any,
    keys: Keys,
    *,
    in_progress: Key,
    fence: Key,
    checkpoint: Key,
    last_beat: Key,
    index: Key,
    queue: Key,
    wake: Key,
    lock: Sequence[Key],
    declared: Sequence[Declared],
    job: Arg,
    entry: Arg,
    done: Arg,
    cursor: Arg,
    ttl: Arg,
    identity: Arg,
    now: Arg,
    keep: Arg,
) -> bool:
    """False if the job is no longer listed. ``keys``: for the checkpoints the index's
    trim sheds, which the script asks to be declared (``declare.run_declared``)."""
    sent = [in_progress, fence, checkpoint, last_beat, index, queue, wake, *lock]
    call = Call("suspend", sent, [job, entry, done, cursor, ttl, identity, now, keep])
    return bool(run_declared(client, keys, call, declared).reply == 1)


@entry("checkpoint", keys=5)
def checkpoint(
    client: Any,
    keys: Keys,
    *,
    checkpoint: Key,
    fence: Key,
    last_beat: Key,
    index: Key,
    declared: Sequence[Declared],
    done: Arg,
    cursor: Arg,
    ttl: Arg,
    identity: Arg,
    now: Arg,
    state: Arg,
    keep: Arg,
) -> bool:
    """False if a newer checkpoint is there (more items done). ``keys``: for the
    checkpoints the index's trim sheds, which the script asks to be declared."""
    call = Call("checkpoint", [checkpoint, fence, last_beat, index], [done, cursor, ttl, identity, now, state, keep])
    return bool(run_declared(client, keys, call, declared).reply == 1)


@entry("requeue", keys=8)
def requeue(
    client: Any,
    keys: Keys,
    *,
    in_progress: Key,
    process: Key,
    last_beat: Key,
    repeat_orphans: Key,
    dead: Key,
    fence: Key,
    wake: Key,
    declared: Sequence[Declared],
    default_queue: Arg,
    identity: Arg,
    mode: Arg,
    now: Arg,
    orphanings_ttl: Arg,
    max_orphanings: Arg,
    count: Arg,
    marks: Sequence[Arg],
) -> Requeued:
    """``declared``: keys the listed jobs name, if known; the script asks for the others
    (their queues, unique locks, orphan counters, checkpoints) and is called again."""
    fixed = [in_progress, process, last_beat, repeat_orphans, dead, fence, wake]
    args = [default_queue, identity, mode, now, orphanings_ttl, max_orphanings, count]
    reply = run_declared(client, keys, Call("requeue", fixed, [*args, *marks]), declared, at=len(args)).reply
    moved = int(reply[0])
    if moved < 0:
        return Requeued(moved, False, [])
    return Requeued(moved, int(reply[1]) == 1, list(reply[2]), list(reply[3]))
