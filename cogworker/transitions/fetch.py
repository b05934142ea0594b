"""The fetch scripts (docs/architecture.md#fetch): a job (or k of them) onto an identity's
in-progress list, with the previous job's ack riding along; and the look-ahead's records.

The four fetches return their ``Call``: the hot path sends it raw (``call.as_command``) in
one pipeline with plain commands, or runs it (``call.run``); ``fetch_reply`` types what
fetch.lua and fetch_moved.lua answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from ..store import lua
from .call import Arg, Call, Key, entry, run
from .declare import Declared, run_declared

# The fetch runs once per job: its Call and FetchReply are made with the tuple's own
# constructor, which skips the NamedTuple's Python-level __new__ (a frame per job each).
_tuple = tuple.__new__


class FetchReply(NamedTuple):
    """fetch.lua's (and fetch_moved.lua's) reply."""

    at: int  # the queue's position (1-based) among the queues named; 0: none had a job; -1: stale
    job: bytes | None  # None from fetch_moved.lua: the job is its LMOVE's own reply
    wake_id: Any  # the wake stream's ID to block from, or ""
    empty_at: Any  # the wake ID the worker learns empty queues at, or ""
    paused: list[Any]  # the paused names (when ``since`` was given)
    bad: list[Any]  # per queue that could not be moved from: its key, then Redis's error


def fetch_reply(reply: list[Any]) -> FetchReply:
    return _tuple(FetchReply, (int(reply[0]), reply[1], reply[2], reply[3], reply[4], reply[5:]))


def fetched(client: Any, call: Call) -> FetchReply:
    """Runs a fetch's ``call`` (as ``call.run``): its reply, typed."""
    script, keys, args = call
    reply = lua.run(client, script, keys, args)
    return _tuple(FetchReply, (int(reply[0]), reply[1], reply[2], reply[3], reply[4], reply[5:]))


@entry("fetch", keys=8)
def fetch(
    *,
    in_progress: Key,
    orphans: Key,
    fence: Key,
    last_beat: Key,
    wake: Key,
    paused: Key,
    ahead: Key,
    queues: Sequence[Key],
    ack: Arg,
    block: Arg,
    owner: Arg,
    number: Arg,
    identity: Arg,
    queue_prefix: Arg,
    since: Arg,
) -> Call:
    return _tuple(
        Call,
        (
            "fetch",
            [in_progress, orphans, fence, last_beat, wake, paused, ahead, *queues],
            [ack, block, owner, number, identity, queue_prefix, since],
        ),
    )


@entry("fetch_moved", keys=8)
def fetch_moved(
    *,
    in_progress: Key,
    orphans: Key,
    fence: Key,
    last_beat: Key,
    wake: Key,
    paused: Key,
    ahead: Key,
    queues: Sequence[Key],
    acked: Arg,
    block: Arg,
    owner: Arg,
    number: Arg,
    identity: Arg,
    queue_prefix: Arg,
    mark: Arg,
    guess: Arg,
    since: Arg,
) -> Call:
    """``guess``: the guessed queue's index in KEYS (``FIRST_QUEUE`` + its position)."""
    return Call(
        "fetch_moved",
        [in_progress, orphans, fence, last_beat, wake, paused, ahead, *queues],
        [acked, block, owner, number, identity, queue_prefix, mark, guess, since],
    )


# The KEYS index (1-based) of the first queue in fetch.lua and fetch_moved.lua, and in
# fetch_ahead_moved.lua: a guessed queue's index is this plus its position in the order.
FIRST_QUEUE = 8
FIRST_QUEUE_AHEAD_MOVED = 7


@entry("fetch_ahead", keys=8, derived=("m",))
def fetch_ahead(
    *,
    in_progress: Key,
    fence: Key,
    last_beat: Key,
    wake: Key,
    paused: Key,
    ahead: Key,
    orphans: Sequence[Key],
    queues: Sequence[Key],
    k: Arg,
    owner: Arg,
    number: Arg,
    identity: Arg,
    queue_prefix: Arg,
    acks: Sequence[Arg],
    since: Arg,
) -> Call:
    return Call(
        "fetch_ahead",
        [in_progress, fence, last_beat, wake, paused, ahead, *orphans, *queues],
        [len(orphans), k, owner, number, identity, queue_prefix, *acks, since],
    )


@entry("fetch_ahead_moved", keys=7)
def fetch_ahead_moved(
    *,
    in_progress: Key,
    fence: Key,
    last_beat: Key,
    wake: Key,
    paused: Key,
    ahead: Key,
    queues: Sequence[Key],
    k: Arg,
    owner: Arg,
    number: Arg,
    identity: Arg,
    queue_prefix: Arg,
    mark: Arg,
    guess: Arg,
    since: Arg,
) -> Call:
    return Call(
        "fetch_ahead_moved",
        [in_progress, fence, last_beat, wake, paused, ahead, *queues],
        [k, owner, number, identity, queue_prefix, mark, guess, since],
    )


@entry("confirm", keys=4)
def confirm(client: Any, *, fence: Key, last_beat: Key, in_progress: Key, identities: Key, identity: Arg) -> None:
    """Refreshes the beat of ``identity``, or raises ``Fenced``."""
    run(client, Call("confirm", [fence, last_beat, in_progress, identities], [identity]))


@entry("take_ahead", keys=5)
def take_ahead(
    client: Any,
    *,
    ahead: Key,
    sibling_list: Key,
    in_progress: Key,
    fence: Key,
    sibling_fence: Key,
    sibling: Arg,
    number: Arg,
    started: Arg,
) -> bytes | None:
    """One of a sibling's look-ahead jobs not started, onto our list; None: nothing to take."""
    raw = run(
        client,
        Call("take_ahead", [ahead, sibling_list, in_progress, fence, sibling_fence], [sibling, number, started]),
    )
    return raw or None


@entry("claim_ahead", keys=2)
def claim_ahead(client: Any, *, ahead: Key, fence: Key, owner: Arg, number: Arg, started: Arg) -> int:
    """How many of the owner's look-ahead jobs not started are still its own."""
    return int(run(client, Call("claim_ahead", [ahead, fence], [owner, number, started])))


@entry("return_ahead", keys=5)
def return_ahead(
    client: Any,
    keys: Keys,
    *,
    ahead: Key,
    in_progress: Key,
    fence: Key,
    wake: Key,
    declared: Sequence[Declared],
    owner: Arg,
    number: Arg,
    default_queue: Arg,
    started: Arg,
) -> int:
    """The owner's look-ahead jobs not started, back on their queues: how many went.
    ``declared``: keys the jobs name, if known; the script asks for the others."""
    call = Call("return_ahead", [ahead, in_progress, fence, wake], [owner, number, default_queue, started])
    return int(run_declared(client, keys, call, declared).reply)
