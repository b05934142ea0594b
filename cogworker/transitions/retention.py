"""What a process writes of finished jobs (docs/architecture.md#retention): the buffered
statuses and history entries in one call, with the retained sets' trim; the done ring's
room reserved for first-try successes (filed then with plain HSETs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, texts
from .declare import Declared, run_declared


@entry("status_flush", keys=5, derived=("n", "m", "g"))
def status_flush(
    client: Any,
    keys: Keys,
    *,
    statuses: Sequence[Key],
    histories: Sequence[Key],
    retained_succeeded: Key,
    retained_failed: Key,
    declared: Sequence[Declared],
    history_max: Arg,
    history_ttl: Arg,
    now: Arg,
    status_max: Arg,
    status_max_failed: Arg,
    keep: Arg,
    rows: Sequence[Sequence[Arg]],
    entries: Sequence[Arg],
    gone: Sequence[tuple[Arg, Arg]],
    ended: Arg,
) -> list[str]:
    """``rows``: per status key, its jid, ttl, updated_at, compare (1/0) and field values;
    ``entries``: one per history key; ``gone``: per enq group, its spec and its jids;
    ``declared``: the gone groups' enq: buckets and the keys of the jobs the trim may shed
    (the last call's hint); the script asks for any other and is called again. Returns
    the hint: the jobs the next call may shed."""
    fixed: list[Any] = [*statuses, *histories, retained_succeeded, retained_failed]
    tail: list[Any] = [value for row in rows for value in row] + list(entries)
    for pair in gone:
        tail += pair
    tail.append(ended)
    args: list[Any] = [len(statuses), history_max, history_ttl, len(histories), now]
    args += [status_max, status_max_failed, keep, len(gone)]
    call = Call("status_flush", fixed, [*args, *tail])
    return texts(run_declared(client, keys, call, declared, at=len(args)).reply[1:])


class Room(NamedTuple):
    spans: list[tuple[Any, int]]  # the n records' places, in order: (bucket, how many go there)
    declared: list[Declared]  # the buckets it was given (the caller's guess for its next call)


@entry("done_room", keys=3)
def done_room(
    client: Any,
    keys: Keys,
    *,
    ring: Key,
    fill: Key,
    declared: Sequence[Declared],
    n: Arg,
    now: Arg,
    size: Arg,
    status_max: Arg,
    keep: Arg,
) -> Room:
    """``declared``: the buckets guessed (the ring's, and those it may open); the script
    asks for any other and is called again (``run_declared``)."""
    spans, used = run_declared(
        client, keys, Call("done_room", [ring, fill], [n, now, size, status_max, keep]), declared
    )
    return Room([(name, int(count)) for name, count in zip(spans[::2], spans[1::2], strict=True)], used)
