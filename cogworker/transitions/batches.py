"""Batches with callbacks (docs/architecture.md#batches): a batch's record opened, and
closed when its block ends (whatever is due then fires)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..keys import Keys
from .call import Arg, Call, Key, entry, texts
from .declare import Declared, run_declared


class Closed(NamedTuple):
    found: bool  # False: no such batch (expired)
    errors: list[str]  # what couldn't be written (a callback's queue of the wrong type...)


@entry("batch_open", keys=4)
def batch_open(
    client: Any,
    keys: Keys,
    *,
    record: Key,
    index: Key,
    created: Key,
    declared: Sequence[Declared],
    bid: Arg,
    now: Arg,
    ttl: Arg,
    most: Arg,
    oldest: Arg,
    fields: Sequence[Arg],
) -> bool:
    """False if the record existed (nothing written). ``declared``: the keys of batches the
    trim drops, if known; the script asks for the others and is called again."""
    call = Call("batch_open", [record, index, created], [bid, now, ttl, most, oldest, *fields])
    return bool(run_declared(client, keys, call, declared, at=5).reply == 1)


@entry("batch_close", keys=6)
def batch_close(
    client: Any,
    keys: Keys,
    *,
    record: Key,
    jobs: Key,
    queues: Key,
    wake: Key,
    batch_callbacks: Key,
    declared: Sequence[Declared],
    now: Arg,
) -> Closed:
    """``keys``: for the callbacks' keys the script asks to be declared (``declare.run_declared``)."""
    call = Call("batch_close", [record, jobs, queues, wake, batch_callbacks], [now])
    reply = run_declared(client, keys, call, declared).reply
    return Closed(reply[0] == 1, texts(reply[1:]))
