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
from ..store import lua

RELEASE_ATTEMPTS = 3


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
        # Acquires whose reply never came (Redis stopped, the link cut): the script may run
        # later all the same and take slots for a job this process no longer starts. Each is
        # released (limit_release.lua frees only a slot held) once Redis answers again.
        self.unsure: dict[bytes, tuple[list[str], float]] = {}

    def acquire(self, raw: bytes, payload: dict[str, Any], limits: tuple[limits_mod.Limit, ...]) -> Admission:
        """Raises ``LimitKeyError`` (a key can't name a limiter for these arguments),
        ``Fenced``, or a Redis error (nothing known: the job stays listed; its slots, if
        the script ran, are released by ``release_unsure``)."""
        resolved = limits_mod.resolve(limits, payload)
        self.release_unsure()
        keys = self.config.keys
        redis_keys: list[str] = [keys.fenced(self.identity), keys.last_beat, keys.in_progress(self.identity),
                                 keys.schedule, keys.limits, keys.limits_over]
        args: list[Any] = [self.identity, raw, payload["jid"], keys.fenced_prefix,
                           "" if self.clock is None else repr(self.clock()), repr(random.random()), len(resolved)]
        for one in resolved:
            redis_keys.extend(keys.limit_keys(one.name))
            args.extend((one.kind, one.name, one.n, repr(one.per)))
        slots = [one.name for one in resolved if one.kind == "concurrency"]
        try:
            reply = lua.run(self.config.redis(), "limit_acquire", redis_keys, args)
        except store.RedisError:
            if slots:
                self.unsure[raw] = (slots, time.monotonic())
            raise
        state = int(reply[0])
        if state == 1:
            if slots:
                self.held[raw] = (slots, time.monotonic())
            return Admission(True)
        if state == -1:
            return Admission(False, listed=False)
        due, name = float(reply[1]), reply[2].decode() if isinstance(reply[2], bytes) else str(reply[2])
        logger.debug("jid=%s over limit %s: parked until %.3f", payload["jid"], name, due)
        return Admission(False, due, name)

    def release(self, raw: bytes) -> int:
        """Gives back the slots ``raw`` holds (none: nothing sent). Retried briefly; if Redis
        stays away they free once this process is gone (fenced or deregistered). Raises
        ``Fenced``: declared dead, its slots were freed by then, it releases nothing."""
        held = self.held.pop(raw, None)
        if held is None:
            return 0
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                return self._release(raw, *held)
            except Fenced:
                raise
            except store.RedisError as exc:
                if attempt == RELEASE_ATTEMPTS:
                    logger.error("couldn't release the limit slots of jid=%s (%s): they free when this process "
                                 "is gone", jid_of(raw), exc)
                    return 0
                time.sleep(0.1 * attempt)
        return 0

    def release_unsure(self) -> int:
        """Releases what the acquires whose reply was lost may have taken: sent once Redis
        answers (a command a stopped server held runs before it answers anything sent after),
        so a late-running acquire can't keep a slot for a job this process gave up on. A
        Redis error goes up, the rest kept for the next call (the next acquire, reconcile)."""
        released = 0
        for raw, (names, since) in list(self.unsure.items()):
            if raw in self.held:  # acquired again since, for good: its release comes at its end
                del self.unsure[raw]
                continue
            n = self._release(raw, names, since)
            del self.unsure[raw]
            released += n
            if n:
                logger.warning("released the limit slots a lost acquire took for jid=%s", jid_of(raw))
        return released

    def _release(self, raw: bytes, names: list[str], since: float) -> int:
        keys = self.config.keys
        redis_keys = [keys.fenced(self.identity), keys.last_beat, keys.schedule]
        for name in names:
            record, slots, _, waiting = keys.limit_keys(name)
            redis_keys.extend((record, slots, waiting))
        args = [self.identity, jid_of(raw), keys.queue_prefix, "default", keys.unique_prefix,
                repr(time.monotonic() - since), len(names)]
        return int(lua.run(self.config.redis(), "limit_release", redis_keys, args))
