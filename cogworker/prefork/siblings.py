"""A prefork child's look-ahead, kept fair to its siblings.

A child sends its next fetch before running a job (``Worker`` does that part), so the
next job starts without a round trip. That job must not wait behind a long one while a
sibling has nothing to do, so:

- a child doesn't look ahead while a sibling waits on empty queues;
- a child that finds its queues empty takes a sibling's looked-ahead job that hasn't
  started, under that sibling's lock (``take``);
- the owner claims the job under its own lock before starting it, and drops it if it
  was taken (``claim``).

Between hosts there is no such hand-over: a job fetched ahead waits, at most, for the
job before it (``--no-lookahead`` turns look-ahead off).
"""

from __future__ import annotations

from collections.abc import Callable

import redis

from ..config import logger
from ..fetch import Fetcher, Work
from .slots import WAITING, Slots, SlotState, SlotWriter


class Siblings:
    def __init__(self, slots: Slots, slot: SlotWriter) -> None:
        self.slots = slots
        self.slot = slot
        self.index = slot.index

    def any_waiting(self) -> bool:
        return any(self.slots.state_hint(i) == WAITING for i in range(self.slots.high()) if i != self.index)

    def claim(self, work: Work | None) -> Work | None:
        self.slots.lock(self.index)
        try:
            if self.slots.taken(self.index):
                self.slots.set_taken(self.index, False)
                work = None
            self.slot.ahead(0)
        finally:
            self.slots.unlock(self.index)
        return work

    def take(self, fetcher: Fetcher) -> Work | None:
        """A sibling's looked-ahead job that hasn't started, now ours; or None."""
        taken: list[Work] = []

        def act(state: SlotState) -> bool:
            work = fetcher.take_ahead(state.identity, state.ahead)
            if work is not None:
                taken.append(work)
            return work is not None

        for i in range(self.slots.high()):
            if i == self.index:
                continue
            try:
                if with_looked_ahead(self.slots, i, act):
                    return taken[0]
            except redis.RedisError as exc:
                logger.debug("couldn't take a sibling's job: %s", exc)
                return None
        return None


def with_looked_ahead(slots: Slots, index: int, act: Callable[[SlotState], bool]) -> bool:
    """If child ``index`` has a look-ahead job out, runs ``act`` on its slot under its
    lock; when ``act`` moved the job (True), the child will find it taken."""
    hint = slots.read(index)
    if hint is None or not hint.ahead or not hint.identity:
        return False
    slots.lock(index)
    try:
        state = slots.read(index)  # again, under the lock: the owner may have claimed it
        if state is None or not state.ahead or state.identity != hint.identity:
            return False
        if act(state):
            slots.set_taken(index, True)
            return True
        return False
    finally:
        slots.unlock(index)
