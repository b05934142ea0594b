"""The operator's API (docs/architecture.md#operator-api): a queue searched or emptied, an entry of
schedule/retry/dead moved, retry-all in chunks, a process asked to quiet or stop, a job
cancelled; each checked against what was read, in the same step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, run
from .declare import Declared, run_declared


class Found(NamedTuple):
    at: int  # of the match, or -1
    entry: bytes  # the matching entry, or b""
    next: int  # where the next chunk starts; -1: the list's end


class Retried(NamedTuple):
    moved: int
    skipped: int
    read: int
    declared: list[Declared]  # the lists it was given (the caller's guess for its next chunk)


@entry("api_clear_list", keys=1)
def api_clear_list(client: Any, *, queue: Key) -> int:
    """How many jobs the queue held."""
    return int(run(client, Call("api_clear_list", [queue], [])))


@entry("api_list_find", keys=1)
def api_list_find(client: Any, *, list: Key, start: Arg, count: Arg, needle: Arg) -> Found:
    index, raw, after = run(client, Call("api_list_find", [list], [start, count, needle]))
    return Found(int(index), raw, int(after))


@entry("api_move", keys=4)
def api_move(client: Any, *, zset: Key, dest: Key, queues: Key, wake: Key, mode: Arg, entry: Arg, arg: Arg) -> bool:
    """False if the entry was no longer there."""
    return int(run(client, Call("api_move", [zset, dest, queues, wake], [mode, entry, arg]))) == 1


@entry("api_retry_chunk", keys=4)
def api_retry_chunk(
    client: Any,
    keys: Keys,
    *,
    zset: Key,
    queues: Key,
    wake: Key,
    declared: Sequence[Declared],
    skip: Arg,
    chunk: Arg,
    default_queue: Arg,
) -> Retried:
    """``declared``: lists guessed (the last chunk's); an entry's list not among them is
    asked for by the script and given in a second call (``run_declared``)."""
    call = Call("api_retry_chunk", [zset, queues, wake], [skip, chunk, default_queue])
    (m, s, read), used = run_declared(client, keys, call, declared)
    return Retried(int(m), int(s), int(read), used)


@entry("api_control", keys=2)
def api_control(client: Any, *, process: Key, control: Key, command: Arg, ttl: Arg) -> bool:
    """False if the process is no live master or worker."""
    return int(run(client, Call("api_control", [process, control], [command, ttl]))) == 1


@entry("cancel", keys=11)
def cancel(
    client: Any,
    keys: Keys,
    *,
    where: Key,
    mark_key: Key,
    counter: Key,
    lock: Key,
    ahead: Key,
    index: Key,
    queues: Key,
    wake: Key,
    results_index: Key,
    batch_callbacks: Key,
    declared: Sequence[Declared],
    kind: Arg,
    entry: Arg,
    mark: Arg,
    ttl: Arg,
    lock_owner: Arg,
    list_owner: Arg,
    workflows: Arg,
    now: Arg,
    keep: Arg,
) -> bool:
    """False if the entry was no longer there. ``keys``: for what the script asks to be
    declared (``declare.run_declared``)."""
    sent = [where, mark_key, counter, lock, ahead, index, queues, wake, results_index, batch_callbacks]
    args = [kind, entry, mark, ttl, lock_owner, list_owner, workflows, now, keep]
    return int(run_declared(client, keys, Call("cancel", sent, args), declared).reply) == 1


@entry("cancel_workflow", keys=8)
def cancel_workflow(
    client: Any,
    keys: Keys,
    *,
    mark_key: Key,
    index: Key,
    group: Key,
    result: Key,
    result_wait: Key,
    group_wait: Key,
    results_index: Key,
    declared: Sequence[Declared],
    id: Arg,
    kind: Arg,
    mark: Arg,
    ttl: Arg,
    now: Arg,
    most: Arg,
    result_ttl: Arg,
) -> bool:
    """True if it stopped something (a group not yet done or failed, a chain); False:
    nothing written (an unknown, finished or already failed group). ``keys``: for the
    chord's callback's result and the old marks shed, which the script asks to be
    declared (``declare.run_declared``)."""
    sent = [mark_key, index, group, result, result_wait, group_wait, results_index]
    args = [id, kind, mark, ttl, now, most, result_ttl]
    return int(run_declared(client, keys, Call("cancel_workflow", sent, args), declared).reply) == 1
