"""The fleet's housekeeping (docs/architecture.md#liveness: the poller and orphan recovery): due entries moved
onto their queues, entries that are no job filed in dead, hand-over lists' heads filed,
a raw dead entry's workflow and batch told."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, run, text, texts
from .declare import Declared, run_declared


class Polled(NamedTuple):
    moved: int
    garbage: list[bytes]  # entries that are not a job object (the caller files them in dead)
    stuck: int  # due entries whose queue can't be written, left in place
    why: str  # the error that left the first one stuck, or ""
    declared: list[Declared]  # the lists it was given (the caller's guess for its next call)


@entry("poll_due", keys=4)
def poll_due(
    client: Any,
    keys: Keys,
    *,
    zset: Key,
    queues: Key,
    wake: Key,
    declared: Sequence[Declared],
    now: Arg,
    most: Arg,
    default_queue: Arg,
    skip: Arg,
) -> Polled:
    """``declared``: lists guessed (those of the last call); a due entry's list not among
    them is asked for by the script and given in a second call (``run_declared``)."""
    call = Call("poll_due", [zset, queues, wake], [now, most, default_queue, skip])
    (got, garbage, stuck, why), used = run_declared(client, keys, call, declared)
    return Polled(int(got), list(garbage), int(stuck), text(why), used)


@entry("file_due", keys=2)
def file_due(client: Any, *, zset: Key, dead: Key, entry: Arg, score: Arg, filed: Arg) -> bool:
    """False if the entry is no longer there (another poller filed it)."""
    return bool(run(client, Call("file_due", [zset, dead], [entry, score, filed])) == 1)


@entry("file_head", keys=7)
def file_head(
    client: Any,
    keys: Keys,
    *,
    list: Key,
    zset: Key,
    queues: Key,
    wake: Key,
    results_index: Key,
    batch_callbacks: Key,
    declared: Sequence[Declared],
    head: Arg,
    score: Arg,
    filed: Arg,
    workflows: Arg,
    now: Arg,
    keep: Arg,
) -> bool:
    """False if ``head`` is no longer the list's head (someone else took it). ``keys``:
    for what the script asks to be declared (``declare.run_declared``)."""
    sent = [list, zset, queues, wake, results_index, batch_callbacks]
    call = Call("file_head", sent, [head, score, filed, workflows, now, keep])
    return bool(run_declared(client, keys, call, declared).reply == 1)


@entry("settle_dead", keys=5)
def settle_dead(
    client: Any,
    keys: Keys,
    *,
    queues: Key,
    wake: Key,
    results_index: Key,
    batch_callbacks: Key,
    declared: Sequence[Declared],
    entry: Arg,
    now: Arg,
    keep: Arg,
) -> list[str]:
    """What couldn't be written (logged by the caller)."""
    call = Call("settle_dead", [queues, wake, results_index, batch_callbacks], [entry, now, keep])
    return texts(run_declared(client, keys, call, declared).reply)
