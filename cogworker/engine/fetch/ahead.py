"""The look-ahead fetch of several jobs in one round trip, with every due ack riding on
it (docs/architecture.md#lookahead-k). A prefork child sends it while the last job it holds
runs, when its jobs are short and its queues deep (``lookahead.Depth``). While the lease
holds it is plain commands in a MULTI checked by ``fetch_ahead_moved.lua`` (no payload
enters Lua); otherwise ``fetch_ahead.lua``, the acks behind its fence check."""

from __future__ import annotations

from typing import Any

from ...config import as_text
from ...core.inprogress import InProgressList, jid_of
from ...store import wire
from ...transitions import fetch
from ...transitions.call import as_command
from .work import MARK, Fast, Fixed, Work

Ack = tuple[bytes, "str | None"]  # a finished job, and its jid when known


def command(
    fetcher: InProgressList,
    fixed: Fixed,
    sha: str,
    order: list[str],
    number: int,
    k: int,
    acks: list[Ack],
    since: str = "",
) -> tuple[Any, ...]:
    """The script's EVALSHA: the acks' orphan counters and the queues as keys (``since``:
    the known-empty queues', EmptyQueues.plan)."""
    keys = fetcher.keys
    call = fetch.fetch_ahead(
        **fixed.ahead_args(fetcher.identity, number),
        orphans=[keys.orphanings(jid or jid_of(raw)) for raw, jid in acks],
        queues=[keys.queue(q) for q in order],
        k=k,
        acks=[raw for raw, _ in acks],
        since=since,
    )
    return as_command(sha, call)


def works(reply: list[Any], order: list[str]) -> tuple[list[Work], list[Any], str, list[str], bool]:
    """The jobs taken (oldest first) with their queues, the unreadable queues, the wake ID
    empty queues were found at ("" when none), the paused names, and whether it was stale."""
    indexes, jobs, bad, newest, paused, stale = reply
    return (
        [Work(raw, order[int(i) - 1]) for i, raw in zip(indexes, jobs, strict=True)],
        list(bad),
        as_text(newest),
        [as_text(name) for name in paused],
        bool(int(stale)),
    )


def moved_commands(
    fetcher: InProgressList,
    fixed: Fixed,
    sha: str,
    order: list[str],
    number: int,
    k: int,
    acks: list[Ack],
    guess: int,
    since: str = "",
) -> tuple[Fast, list[tuple[Any, ...] | bytes]]:
    """The MULTI: a plain LREM per ack and one DEL of their orphan counters, the mark, k
    plain moves from ``guess`` (its position in ``order``), then fetch_ahead_moved.lua.
    The LREMs come before the script's fence check: sent only while the lease holds, when
    nobody can have fenced this identity (docs/architecture.md#lease), as the fast fetch."""
    keys = fetcher.keys
    lst = fetcher.in_progress
    queues = [keys.queue(q) for q in order]
    # This fetch's own mark: the script finds it from the tail (under it, in the usual case,
    # only the job still running), never mistaking a stray older mark for it.
    mark = MARK + b":%d" % number
    call = fetch.fetch_ahead_moved(
        **fixed.ahead_args(fetcher.identity, number),
        queues=queues,
        k=k,
        mark=mark,
        guess=fetch.FIRST_QUEUE_AHEAD_MOVED + guess,  # its index in KEYS
        since=since,
    )
    sent: list[tuple[Any, ...] | bytes] = [("MULTI",)]
    sent += [("LREM", lst, "-1", raw) for raw, _ in acks]  # an acked job is near the tail
    if acks:
        sent.append(("DEL", *(keys.orphanings(jid or jid_of(raw)) for raw, jid in acks)))
    # RPOPLPUSH is LMOVE RIGHT LEFT in two arguments fewer, which Redis parses per job;
    # packed once for all k.
    moves = wire.pack(("RPOPLPUSH", queues[guess], lst)) * k
    sent += [("LPUSH", lst, mark), moves, as_command(sha, call), ("EXEC",)]
    return Fast(len(sent) - 2 + k - 1, call, guess), sent


def moved_works(
    replies: list[Any], reply: list[Any], fast: Fast, order: list[str], k: int
) -> tuple[list[Work], list[Any], str, list[str], bool]:
    """As ``works``, for fetch_ahead_moved.lua's ``reply``: the first n of the k LMOVEs'
    replies (in ``replies``, the EXEC's, the script's last) stand, from the guessed
    queue, oldest first; then the jobs the script took itself, newer."""
    n, indexes, jobs, bad, newest, paused, stale = reply
    guess = order[fast.guess]
    moved = [Work(raw, guess) for raw in replies[-1 - k : -1][: int(n)]]
    taken = [Work(raw, order[int(i) - 1]) for i, raw in zip(indexes, jobs, strict=True)]
    return ([*moved, *taken], list(bad), as_text(newest), [as_text(name) for name in paused], bool(int(stale)))
