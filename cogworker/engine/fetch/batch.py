"""The look-ahead fetch of several jobs in one round trip (``fetch_batch.lua``), with
every due ack riding on it (docs/architecture.md#batch). A prefork child sends it while
the last job it holds runs, when its jobs are short and its queues deep (``lookahead.Depth``)."""

from __future__ import annotations

from typing import Any

from ...config import as_text
from ...core.inprogress import InProgressList, jid_of
from .work import Work

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
