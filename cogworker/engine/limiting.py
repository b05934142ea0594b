"""The worker's side of rate limits (docs/architecture.md#limits): just before a limited
job starts, one ``limit_acquire.lua`` takes its slots (or parks it in ``schedule``); when
it ends, one ``limit_release.lua`` gives its concurrency slots back. A job without limits
costs a dict lookup here and no round trip."""

from __future__ import annotations

import random
import time
from typing import Any

from .. import store
from ..config import Config, logger
from ..core import limits as limits_mod
from ..core.inprogress import jid_of
from ..core.registry import registry
from ..errors import Fenced
from ..transitions import limits as limit_scripts
from ..transitions.declare import Declared

RELEASE_ATTEMPTS = 3
PROMOTED = 8  # the lists of jobs promoted lately, given to the next release as its guess
HOLDERS = 32  # the fences of slot holders lately seen, given to the next acquire as its guess
UNSURE_INTERVAL = 1.0  # owed releases are retried at most this often while Redis is away


def limits_of(payload: dict[str, Any]) -> tuple[limits_mod.Limit, ...]:
    """The job's declared limits (registered jobs only: the worker runs no others)."""
    job = registry.get(payload["class"])
    return job.opts.limits if job is not None else ()


class Admission:
    """What the limiters said: ``admitted``; else ``due`` (epoch seconds, Redis's clock)
    and the limiter that parked the job; ``listed`` False when the job wasn't on the list."""

    __slots__ = ("admitted", "due", "limiter", "listed")

    def __init__(self, admitted: bool, due: float = 0.0, limiter: str = "", listed: bool = True) -> None:
        self.admitted, self.due, self.limiter, self.listed = admitted, due, limiter, listed


class Limiter:
    """One identity's slots: acquired before a job starts, released when it ends."""

    def __init__(self, config: Config, identity: str, clock: Any = None) -> None:
        self.config = config
        self.identity = identity
        self.clock = clock  # a test's clock (epoch seconds); None: Redis's TIME
        # raw job -> (names of the concurrency limiters it holds, when it started)
        self.held: dict[bytes, tuple[list[str], float]] = {}
        # Slots that may still be held for a job no longer running here, each released
        # (limit_release.lua frees only a slot held, so a second release is harmless) once
        # Redis answers again: acquires whose reply never came (Redis stopped, the link cut:
        # the script may run later all the same), and releases that failed. raw job ->
        # (names, when it started, how long it held them; None: not started here).
        self.unsure: dict[bytes, tuple[list[str], float, float | None]] = {}
        self._unsure_tried = 0.0
        self._promoted: list[Declared] = []
        self._holders: list[Declared] = []

    def acquire(self, raw: bytes, payload: dict[str, Any], limits: tuple[limits_mod.Limit, ...]) -> Admission:
        """Raises ``LimitKeyError`` (a key can't name a limiter for these arguments),
        ``Fenced``, or a Redis error (nothing known: the job stays listed; its slots, if
        the script ran, are released by ``release_unsure``)."""
        resolved = limits_mod.resolve(limits, payload)
        self.release_unsure()
        slots = [one.name for one in resolved if one.kind == "concurrency"]
        try:
            reply = self._acquire(raw, payload, resolved)
        except store.RedisError:
            if slots:
                self.unsure[raw] = (slots, time.monotonic(), None)
            raise
        state = reply.state
        if state == 1:
            if slots:
                self.held[raw] = (slots, time.monotonic())
            return Admission(True)
        if state == -1:
            return Admission(False, listed=False)
        due, name = reply.due, reply.name
        logger.debug("jid=%s over limit %s: parked until %.3f", payload["jid"], name, due)
        return Admission(False, due, name)

    def release(self, raw: bytes) -> int:
        """Gives back the slots ``raw`` holds (none: nothing sent). Retried briefly; if Redis
        stays away, kept in ``unsure`` and released once it answers (``release_unsure``,
        from every acquire and the loop's housekeeping): a live holder never keeps a slot
        past its job. Raises ``Fenced``: declared dead, its slots were freed by then, it
        releases nothing."""
        held = self.held.pop(raw, None)
        if held is None:
            return 0
        names, since = held
        took = time.monotonic() - since
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                return self._release(raw, names, took)
            except Fenced:
                raise
            except store.RedisError as exc:
                if attempt == RELEASE_ATTEMPTS:
                    self.unsure[raw] = (names, since, took)
                    logger.error(
                        "couldn't release the limit slots of jid=%s yet (%s): released once Redis answers",
                        jid_of(raw),
                        exc,
                    )
                    return 0
                time.sleep(0.1 * attempt)
        return 0

    def release_unsure_due(self) -> int:
        """``release_unsure`` at most once a second while something is owed (a dict
        lookup otherwise): the loop's housekeeping, so a slot owed frees within about a
        second of Redis answering, whether or not this process fetches a limited job."""
        now = time.monotonic()
        if not self.unsure or now - self._unsure_tried < UNSURE_INTERVAL:
            return 0
        self._unsure_tried = now
        return self.release_unsure()

    def release_unsure(self) -> int:
        """Releases the slots owed (``unsure``): sent once Redis answers (a command a stopped
        server held runs before it answers anything sent after), so neither a late-running
        acquire nor a failed release keeps a slot for a job this process is done with. A
        Redis error goes up, the rest kept for the next call (the next acquire, housekeeping)."""
        released = 0
        for raw, (names, since, took) in list(self.unsure.items()):
            if raw in self.held:  # acquired again since, for good: its release comes at its end
                del self.unsure[raw]
                continue
            n = self._release(raw, names, time.monotonic() - since if took is None else took)
            del self.unsure[raw]
            released += n
            if n:
                what = "a lost acquire took" if took is None else "held by a job that ended in an outage"
                logger.warning("released the limit slots %s for jid=%s", what, jid_of(raw))
        return released

    def _acquire(self, raw: bytes, payload: dict[str, Any], resolved: list[Any]) -> limit_scripts.Acquired:
        keys = self.config.keys
        acquired = limit_scripts.limit_acquire(
            self.config.redis(),
            keys,
            fence=keys.fenced(self.identity),
            last_beat=keys.last_beat,
            in_progress=keys.in_progress(self.identity),
            schedule=keys.schedule,
            limits=keys.limits,
            limits_over=keys.limits_over,
            limiters=[
                limit_scripts.LimitArgs(*keys.limit_keys(one.name), one.kind, one.name, one.n, repr(one.per))
                for one in resolved
            ],
            declared=self._holders,
            identity=self.identity,
            job=raw,
            jid=payload["jid"],
            now="" if self.clock is None else repr(self.clock()),
            jitter=repr(random.random()),
        )
        # The fences of the slots' holders lately seen (the fleet's processes): a full
        # limiter's next acquire has them all in one call, as a script building them had.
        self._holders = list(acquired.declared)[-HOLDERS:]
        return acquired

    def _release(self, raw: bytes, names: list[str], took: float) -> int:
        keys = self.config.keys
        held = []
        for name in names:
            record, slots, _, waiting = keys.limit_keys(name)
            held.append(limit_scripts.Held(record, slots, waiting))
        released, declared = limit_scripts.limit_release(
            self.config.redis(),
            keys,
            fence=keys.fenced(self.identity),
            last_beat=keys.last_beat,
            schedule=keys.schedule,
            wake=keys.wake,
            held=held,
            declared=self._promoted,
            identity=self.identity,
            jid=jid_of(raw),
            default_queue="default",
            held_for=repr(took),
        )
        # The lists of the jobs promoted lately: the next promoted job's is most likely
        # among them, so it goes in one call (its unique lock, if any, costs a second).
        self._promoted = [d for d in declared if str(d.name).startswith("queue:")][-PROMOTED:]
        return released
