"""A prefork child's look-ahead, kept fair to its siblings.

A child sends its next fetch before running a job (``Worker`` does that part), so the
next job starts without a round trip. That job must not wait behind a long one while a
sibling has nothing to do, so:

- a child doesn't look ahead while a sibling waits on empty queues;
- a child that finds its queues empty takes a sibling's looked-ahead job that hasn't
  started (any of a look-ahead's: the newest, one per take), under that sibling's lock
  (``take``); the master returns all of them to their queues the same way when the child
  is stopping (``with_looked_ahead``);
- the owner claims each job under its own lock before starting it (``claim_next``).

Who owns the job is decided by Redis: the take-over (and return) script and the owner's
claim script each remove the fetch's record in ``ahead`` before anything else, so
whichever Redis runs first wins, and the other finds it gone. The owner asks Redis only
when someone may have tried, which the "taken" flag in shared memory says:

- a taker sets the flag (TRYING) under the owner's lock *before* sending its script; it
  clears it again only when the script definitely answered "not taken", and sets TAKEN
  when it took the job. On any error, and if it is killed with the call in flight, the
  flag stays TRYING: the script may still have run (a lost reply).
- the owner's claim, under its lock: CLEAR means nobody tried (the lock proves it: no
  take-over can start now), so the job starts with no round trip, the common case.
  TAKEN or TRYING: Redis is asked (``claim_ahead.lua``) how many are still ours (the
  oldest; takes go newest first), and the record goes: nobody takes the rest. If that
  call fails, none of them starts: each stays on a list, where that list's owner's
  reconcile (or the master, or orphan recovery) requeues it once.

Between hosts there is no such hand-over: a job fetched ahead waits, at most, for the
job before it (``--no-lookahead`` turns look-ahead off).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .. import store
from ..config import logger
from ..engine.fetch.fetcher import Fetcher, Work
from .slots import CLEAR, TAKEN, TRYING, WAITING, Slots, SlotState, SlotWriter


class Siblings:
    def __init__(self, slots: Slots, slot: SlotWriter) -> None:
        self.slots = slots
        self.slot = slot
        self.index = slot.index

    def any_waiting(self) -> bool:
        return any(
            self.slots.state_hint(i) == WAITING
            for i in range(self.slots.high())
            if i != self.index and self.slots.same_shard(i, self.index)
        )

    def claim(self, work: Work | None, fetcher: Fetcher) -> Work | None:
        """``work``, fetched ahead alone, if it is still ours to start; None if it was
        taken (or if that can't be known now)."""
        return self.claim_next(deque([work] if work is not None else []), fetcher)

    def claim_next(self, held: deque[Work], fetcher: Fetcher) -> Work | None:
        """The oldest of ``held`` (the jobs of our look-ahead fetch not started, oldest
        first), off it, if it is still ours to start; jobs taken over or returned are
        dropped from ``held`` first. None: nothing left that is ours (or knowably so)."""
        self.slots.lock(self.index)
        try:
            if self.slots.taken(self.index) != CLEAR:
                self._ask(held, fetcher)  # someone tried: Redis says which are left
                self.slots.set_taken(self.index, CLEAR)
                self.slot.ahead(0)  # the record is gone: nobody can take the rest
            work = held.popleft() if held else None
            if self.slot.ahead_number:
                if held:
                    self.slot.start_one()
                else:
                    self.slot.ahead(0)
        finally:
            self.slots.unlock(self.index)
        return work

    def _ask(self, held: deque[Work], fetcher: Fetcher) -> None:
        """Keeps in ``held`` only the jobs still ours: the oldest ones, as many as Redis
        says (``claim_ahead.lua``); none if it can't say."""
        if not held:
            return
        try:
            left = fetcher.claim_ahead(self.slot.ahead_number, self.slot.started)
        except store.RedisError as exc:
            left = 0
            logger.warning(
                "%d job(s) fetched ahead: couldn't tell whether a sibling took them (%s: %s); "
                "not starting them (they are requeued from whichever list holds them)",
                len(held),
                type(exc).__name__,
                exc,
            )
        while len(held) > max(left, 0):
            # Routine (an idle sibling took the job, as designed): not for the INFO log.
            logger.debug("jid=%s fetched ahead was taken over; not starting it", held.pop().jid())

    def take(self, fetcher: Fetcher) -> Work | None:
        """A sibling's looked-ahead job that hasn't started, now ours; or None."""
        taken: list[Work] = []

        def act(state: SlotState) -> bool:
            work = fetcher.take_ahead(state.identity, state.ahead, state.started)
            if work is not None:
                taken.append(work)
            return work is not None

        for i in range(self.slots.high()):
            if i == self.index or not self.slots.same_shard(i, self.index):
                continue  # a sibling of another shard: its list is in another slot of the cluster
            try:
                if with_looked_ahead(self.slots, i, act):
                    return taken[0]
            except store.RedisError as exc:
                # Maybe taken after all (a lost reply): our reconcile requeues it if so.
                logger.debug("couldn't take a sibling's job: %s", exc)
                return None
        return None


def with_looked_ahead(slots: Slots, index: int, act: Callable[[SlotState], bool]) -> bool:
    """If child ``index`` has a look-ahead job out, runs ``act`` (a script that moves that
    job off its list: True if it did, False if it definitely didn't, raises if unknown)
    on its slot under its lock, with the "taken" flag set first (see the module's doc)."""
    hint = slots.read(index)
    if hint is None or not hint.ahead or not hint.identity:
        return False
    slots.lock(index)
    try:
        state = slots.read(index)  # again, under the lock: the owner may have claimed it
        if state is None or not state.ahead or state.identity != hint.identity:
            return False
        before = slots.taken(index)  # TAKEN: more of a look-ahead may be left; Redis counts
        slots.set_taken(index, TRYING)  # before the script: it may run even if we never hear back
        if act(state):
            slots.set_taken(index, TAKEN)
            return True
        # Definitely not moved; another attempt whose answer was lost keeps its TRYING.
        slots.set_taken(index, before)
        return False
    finally:
        slots.unlock(index)
