"""The priority levels a worker's fetch names beside its queues (docs/architecture.md#priorities).

A job of priority p != 0 waits on a list of its own per (queue, p), its level, named in
the ``levels`` set before the job is written. The worker reads that set (at start, at
most every ``REFRESH`` seconds, and after every idle wait) and names, for each of its
queues in the order of the fetch, the queue's levels above 0 from the highest, the queue
itself, then its levels below 0: one list of names the fetch scripts try in strict
order, as they try queues. A fleet without priorities reads an empty set and names
exactly its queues: the fetch is as it was.
"""

from __future__ import annotations

import time
from typing import Any

from ...config import logger
from ...keys import Keys, level_name, split_level
from ...store import ResponseError
from ...store import errors as redis_errors

# The longest a busy worker names no level that was added since it last read them (an
# idle worker reads them after each wait, so a job on a new level wakes it and is seen).
REFRESH = 1.0


class Levels:
    """The levels in use of one worker's queues, and the fetch order with them."""

    def __init__(self, queues: list[str]) -> None:
        self.queues = queues
        self.base: dict[str, str] = {}  # a level's name -> its queue; empty: no level in use
        self._around: dict[str, list[str]] = {}  # queue -> its names in fetch order, itself included
        self._due = 0.0
        self._order: list[str] | None = None
        self._expanded: list[str] = []
        self._warned = False

    def due(self) -> bool:
        return time.monotonic() >= self._due

    def read(self, client: Any, keys: Keys) -> bool:
        """Reads the levels set; True when the levels of these queues changed."""
        self._due = time.monotonic() + REFRESH
        try:
            members = client.smembers(keys.levels)
        except ResponseError as exc:
            if redis_errors.classify(exc) != redis_errors.WRONGTYPE:
                raise  # Redis refusing (an outage): as the fetch it rides with
            if not self._warned:  # once: it is read every second
                logger.error("the levels key %s holds the wrong type: no priority level is fetched", keys.levels)
                self._warned = True
            members = set()
        found: dict[str, list[int]] = {}
        mine = set(self.queues)
        for member in members:
            queue, p = split_level(member.decode() if isinstance(member, bytes) else str(member))
            if p and queue in mine:
                found.setdefault(queue, []).append(p)
        around = {q: _around(q, ps) for q, ps in found.items()}
        if around == self._around:
            return False
        self._around = around
        self.base = {name: q for q, names in around.items() for name in names if name != q}
        self._order = None
        return True

    def expand(self, order: list[str]) -> list[str]:
        """``order`` with each queue's levels around it (the same list when none is in use)."""
        if not self.base:
            return order
        if order is self._order:  # a strict order: the same list each time
            return self._expanded
        around = self._around
        expanded = [name for q in order for name in around.get(q, (q,))]
        self._order, self._expanded = order, expanded
        return expanded


def _around(queue: str, priorities: list[int]) -> list[str]:
    ps = sorted(set(priorities), reverse=True)
    return [
        *(level_name(queue, p) for p in ps if p > 0),
        queue,
        *(level_name(queue, p) for p in ps if p < 0),
    ]
