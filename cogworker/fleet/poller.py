"""The scheduled poller: due entries of ``schedule`` and ``retry`` onto their queues.

One script per chunk, so two pollers can never enqueue the same entry twice.
"""

from __future__ import annotations

import random
import time

from .. import store
from ..config import Config, logger
from ..core import fate, settlement
from ..core.payload import jid_in
from ..store import errors as redis_errors
from ..store import guard
from ..transitions import housekeeping
from ..transitions.declare import Declared

CHUNK = 100  # due entries moved per script call
# The due entries' lists a poll was given, kept to be given again (a set's entries go to
# the same few queues): then one call a chunk, as when the script built their names.
GUESSED = 2 * CHUNK


class Poller:
    def __init__(self, config: Config, interval: float = 1.0) -> None:
        self.config = config
        self.interval = interval
        self.next_at = 0.0
        self._logged: dict[str, str] = {}
        self._declared: dict[str, list[Declared]] = {}

    def due(self) -> bool:
        return time.monotonic() >= self.next_at

    def poll(self) -> int:
        """Moves every due entry; returns how many. Each sorted set on its own: one of the
        wrong type is logged and the other is still polled."""
        # Jittered, so several masters don't poll in lock-step.
        self.next_at = time.monotonic() + self.interval * random.uniform(0.5, 1.0)
        keys = self.config.keys
        moved = 0
        for zset in (keys.schedule, keys.retry):
            try:
                moved += self.drain(zset)
                self._logged.pop(zset, None)
            except store.RedisError as exc:
                if guard.kind_of(exc) == guard.OUTAGE:
                    raise  # Redis away or refusing writes (OOM, READONLY): the caller's policy backs off
                message = f"{type(exc).__name__}: {exc}"
                if self._logged.get(zset) != message:  # once per distinct problem, not per second
                    self._logged[zset] = message
                    logger.error("scheduled poller: can't read %s (%s); other sets still polled", zset, message)
        return moved

    def drain(self, zset: str) -> int:
        keys = self.config.keys
        client = self.config.redis()
        moved = skip = 0
        while True:
            now = time.time()
            got, garbage, stuck, why, declared = housekeeping.poll_due(
                client,
                keys,
                zset=zset,
                queues=keys.queues,
                wake=keys.wake,
                declared=self._declared.get(zset, []),
                now=repr(now),
                most=CHUNK,
                default_queue="default",
                skip=skip,
            )
            self._declared[zset] = declared[-GUESSED:]
            if stuck and not got and redis_errors.classify(why) in (redis_errors.OOM, redis_errors.READONLY):
                raise redis_errors.as_error(why)  # no queue's fault: every entry stays where it is
            bad = self.file_garbage(zset, garbage)
            if bad:
                logger.error(
                    "scheduled poller: %d unreadable entr%s in %s moved to dead", bad, "y" if bad == 1 else "ies", zset
                )
            if stuck:
                logger.error(
                    "scheduled poller: %d due entr%s in %s left in place: their queue can't be written (wrong type?)",
                    stuck,
                    "y" if stuck == 1 else "ies",
                    zset,
                )
            moved += got
            skip += stuck
            if got + len(garbage) + stuck < CHUNK:
                return moved

    def file_garbage(self, zset: str, garbage: list[bytes]) -> int:
        """Files each entry of ``zset`` that is not a job object in dead, as a bad payload
        (the dead entry every process builds for one); then the ``dead`` hooks."""
        filed = 0
        for raw in garbage:
            decision = fate.plain_dead(
                self.config, raw, "cogworker.BadPayload", "scheduled entry is not a job object", jid_in(raw)
            )
            if housekeeping.file_due(
                self.config.redis(),
                zset=zset,
                dead=self.config.keys.dead,
                entry=raw,
                score=repr(decision.score),
                filed=decision.entry,
            ):
                filed += 1
                settlement.filed(self.config, decision)
        return filed
