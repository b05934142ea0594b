"""The queues a worker's fetch leaves out because it found them empty, so that idle
queues cost a fetch nothing (docs/architecture.md#idle-queues).

A fetch that found queues empty reports the wake stream's newest ID as it was then. Every
cogworker write that fills an empty queue XADDs that stream, so while its newest ID is
unchanged those queues are still empty: the next fetches name only the others, with that
ID ("since"), and the script checks it before taking anything. A newer ID makes that
fetch stale (nothing taken): the worker fetches again at once, naming every queue. Writes
outside cogworker (a raw LPUSH, a hand SREM of the paused set) don't wake the stream:
every queue is named again at least every ``RESCAN`` seconds, which bounds their wait.

The queues after the one that gave the last job are cut too: a job there can only be
taken once that queue and every one before it is empty. A fetch cut short that finds no
job is not dry: the worker fetches again, naming every queue.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ...keys import split_level

# The longest a queue filled by a writer outside cogworker is left out of a busy worker's
# fetch. A fetch naming every queue costs about 0.25 µs of Redis time per idle queue: at
# 20 a second it is nothing next to the fetches it spares.
RESCAN = 0.05
# A worker of one queue has nothing to leave out; the check costs Redis one command.
MIN_QUEUES = 2

EVERY = "*"  # since: every queue named; report the newest ID if some were found empty


class EmptyQueues:
    """What one identity knows: queues empty as of wake ID ``at``, named again after ``until``."""

    def __init__(self, queues: list[str], rescan: float | None = None) -> None:
        self.on = len(queues) >= MIN_QUEUES
        self.rescan = RESCAN if rescan is None else rescan
        self.empty: frozenset[str] = frozenset()
        self.at = ""  # the wake ID they were empty at; "" = nothing known
        self.until = 0.0
        # The last order and the queues it named: a strict order is the same list each
        # time, so a busy worker's fetch costs its Python no loop over the idle queues.
        self._order: list[str] | None = None
        self._of: frozenset[str] = self.empty
        self._named: list[str] = []
        self.gave: str | None = None  # the queue that gave the last job fetched

    def plan(self, order: list[str], whole: bool = False) -> tuple[list[str], str, bool]:
        """The queues this fetch names (``order`` without the known-empty ones, cut after
        the one that gave the last job), its ``since`` argument for the script ("" when
        this worker keeps none), and whether it was cut. ``whole``: every queue named."""
        if not self.on:
            return order, "", False
        if whole or not self.empty or time.monotonic() >= self.until:
            return self._cut(order, EVERY, whole)
        if order is not self._order or self.empty is not self._of:
            self._named = [q for q in order if q not in self.empty]
            self._order, self._of = order, self.empty
        if not self._named:  # all of them: the fetch names every queue, so it can block on the wake
            return self._cut(order, EVERY, whole)
        return self._cut(self._named, self.at, whole)

    def _cut(self, named: list[str], since: str, whole: bool) -> tuple[list[str], str, bool]:
        if whole or self.gave is None or named[-1] == self.gave or self.gave not in named:
            return named, since, False
        return named[: named.index(self.gave) + 1], since, True

    def learn(self, order: list[str], since: str, newest: str, stale: bool, before: int, paused: Iterable[str]) -> None:
        """A fetch that named ``order`` with ``since`` found ``order[:before]`` empty when the
        wake stream's newest ID was ``newest`` ("" = not read, or unreadable). Paused queues
        are never counted empty: a resume by hand must count at the next fetch."""
        if not since:
            return
        if not stale:
            self.gave = order[before] if before < len(order) else None
        if stale or (since != EVERY and newest != since):
            self.forget()
            return
        paused = set(paused)
        found = set(order[:before]).difference(paused)
        if paused:  # a priority level is paused with its queue
            found = {q for q in found if split_level(q)[0] not in paused}
        if since == EVERY:
            if not newest:  # none found empty (or the stream can't be read): nothing known
                self.forget()
                return
            self.empty, self.at = frozenset(found), newest
            self.until = time.monotonic() + self.rescan
        elif found:
            self.empty = self.empty.union(found)

    def forget(self) -> None:
        """The next fetch names every queue (a wake was read, or the last fetch was stale)."""
        self.empty, self.at = frozenset(), ""
