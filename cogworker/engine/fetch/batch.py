"""The look-ahead fetch of several jobs in one round trip, with every due ack riding on
it (docs/architecture.md#batch). A prefork child sends it while the last job it holds
runs, when its jobs are short and its queues deep (``lookahead.Depth``). While the lease
holds it is plain commands in a MULTI checked by ``fetch_batch_moved.lua`` (no payload
enters Lua); otherwise ``fetch_batch.lua``, the acks behind its fence check."""

from __future__ import annotations

from typing import Any

from ...config import as_text
from ...core.inprogress import InProgressList, jid_of
from ...store import wire
from .work import MARK, Fast, Work

Ack = tuple[bytes, "str | None"]  # a finished job, and its jid when known


def command(fetcher: InProgressList, sha: str, order: list[str], number: int, k: int,
            acks: list[Ack], since: str = "") -> tuple[Any, ...]:
    """The script's EVALSHA: the acks' orphan counters and the queues as keys (``since``:
    the known-empty queues', EmptyQueues.plan)."""
    keys = fetcher.keys
    counters = [keys.orphanings(jid or jid_of(raw)) for raw, jid in acks]
    queues = [keys.queue(q) for q in order]
    return ("EVALSHA", sha, 3 + len(counters) + len(queues), fetcher.in_progress, fetcher.fence_key,
            keys.last_beat, *counters, *queues, len(acks), k, keys.ahead, fetcher.identity, number,
            fetcher.beat_as, keys.paused, keys.queue_prefix, *(raw for raw, _ in acks), since)


def works(reply: list[Any], order: list[str]) -> tuple[list[Work], list[Any], str, list[str], bool]:
    """The jobs taken (oldest first) with their queues, the unreadable queues, the wake ID
    empty queues were found at ("" when none), the paused names, and whether it was stale."""
    indexes, jobs, bad, newest, paused, stale = reply
    return ([Work(raw, order[int(i) - 1]) for i, raw in zip(indexes, jobs, strict=True)], list(bad),
            as_text(newest), [as_text(name) for name in paused], bool(int(stale)))


def moved_commands(fetcher: InProgressList, sha: str, order: list[str], number: int, k: int, acks: list[Ack],
                   guess: int, since: str = "") -> tuple[Fast, list[tuple[Any, ...] | bytes]]:
    """The MULTI: a plain LREM per ack and one DEL of their orphan counters, the mark, k
    plain moves from ``guess`` (its position in ``order``), then fetch_batch_moved.lua.
    The LREMs come before the script's fence check: sent only while the lease holds, when
    nobody can have fenced this identity (docs/architecture.md#lease), as the fast fetch."""
    keys = fetcher.keys
    lst = fetcher.in_progress
    queues = [keys.queue(q) for q in order]
    script_keys = [lst, fetcher.fence_key, keys.last_beat, *queues]
    # This fetch's own mark: the script finds it from the tail (under it, in the usual case,
    # only the job still running), never mistaking a stray older mark for it.
    mark = MARK + b":%d" % number
    args = [k, keys.ahead, fetcher.identity, number, fetcher.beat_as, keys.paused, keys.queue_prefix,
            mark, guess + 4, since]
    sent: list[tuple[Any, ...] | bytes] = [("MULTI",)]
    sent += [("LREM", lst, "-1", raw) for raw, _ in acks]  # an acked job is near the tail
    if acks:
        sent.append(("DEL", *(keys.orphanings(jid or jid_of(raw)) for raw, jid in acks)))
    # RPOPLPUSH is LMOVE RIGHT LEFT in two arguments fewer, which Redis parses per job;
    # packed once for all k.
    moves = wire.pack(("RPOPLPUSH", queues[guess], lst)) * k
    sent += [("LPUSH", lst, mark), moves, ("EVALSHA", sha, len(script_keys), *script_keys, *args), ("EXEC",)]
    return Fast(len(sent) - 2 + k - 1, script_keys, args), sent


def moved_works(replies: list[Any], reply: list[Any], fast: Fast,
                order: list[str], k: int) -> tuple[list[Work], list[Any], str, list[str], bool]:
    """As ``works``, for fetch_batch_moved.lua's ``reply``: the first n of the k LMOVEs'
    replies (in ``replies``, the EXEC's, the script's last) stand, from the guessed
    queue, oldest first; then the jobs the script took itself, newer."""
    n, indexes, jobs, bad, newest, paused, stale = reply
    guess = order[int(fast.args[8]) - 4]
    moved = [Work(raw, guess) for raw in replies[-1 - k:-1][:int(n)]]
    taken = [Work(raw, order[int(i) - 1]) for i, raw in zip(indexes, jobs, strict=True)]
    return ([*moved, *taken], list(bad), as_text(newest), [as_text(name) for name in paused],
            bool(int(stale)))
