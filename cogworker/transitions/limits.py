"""Rate limits (docs/architecture.md#limits): a job's slots taken just before it starts
(or the job parked in ``schedule``), and its concurrency slots given back when it ends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, text
from .declare import Declared, run_declared


class LimitArgs(NamedTuple):
    """One limit a job asks for: its four keys, then what it says."""

    record: Key
    slots: Key
    starts: Key
    waiting: Key
    kind: Arg  # "concurrency" or "window"
    name: Arg
    n: Arg
    per: Arg  # seconds


class Held(NamedTuple):
    """One concurrency limit a job holds a slot of: the keys its release touches."""

    record: Key
    slots: Key
    waiting: Key


class Acquired(NamedTuple):
    state: int  # 1: admitted; 0: parked until ``due`` for limiter ``name``; -1: not on the list
    due: float = 0.0
    name: str = ""
    declared: Sequence[Declared] = ()  # the keys it was given (the caller's guess for its next acquire)


@entry("limit_acquire", keys=8, derived=("count",))
def limit_acquire(
    client: Any,
    keys: Keys,
    *,
    fence: Key,
    last_beat: Key,
    in_progress: Key,
    schedule: Key,
    limits: Key,
    limits_over: Key,
    limiters: Sequence[LimitArgs],
    declared: Sequence[Declared],
    identity: Arg,
    job: Arg,
    jid: Arg,
    now: Arg,
    jitter: Arg,
) -> Acquired:
    """``declared``: the fences guessed of a full limiter's slot holders; the script asks
    for any other and is called again (``run_declared``)."""
    keys_: list[Any] = [fence, last_beat, in_progress, schedule, limits, limits_over]
    args: list[Any] = [identity, job, jid, now, jitter, len(limiters)]
    for one in limiters:
        keys_ += one[:4]
        args += one[4:]
    reply, used = run_declared(client, keys, Call("limit_acquire", keys_, args), declared)
    state = int(reply[0])
    if state != 0:
        return Acquired(state, declared=used)
    return Acquired(0, float(reply[1]), text(reply[2]), used)


class Released(NamedTuple):
    released: int  # slots
    declared: list[Declared]  # the keys it was given (the caller's guess for its next release)


@entry("limit_release", keys=6, derived=("count",))
def limit_release(
    client: Any,
    keys: Keys,
    *,
    fence: Key,
    last_beat: Key,
    schedule: Key,
    wake: Key,
    held: Sequence[Held],
    declared: Sequence[Declared],
    identity: Arg,
    jid: Arg,
    default_queue: Arg,
    held_for: Arg,
) -> Released:
    """How many slots were released. ``declared``: the keys guessed for the jobs the freed
    slots promote; the script asks for any other and is called again (``run_declared``)."""
    keys_: list[Any] = [fence, last_beat, schedule, wake]
    for one in held:
        keys_ += one
    call = Call("limit_release", keys_, [identity, jid, default_queue, held_for, len(held)])
    reply, used = run_declared(client, keys, call, declared)
    return Released(int(reply), used)
