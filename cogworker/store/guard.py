"""One policy for errors around Redis work, used everywhere instead of a local try/except.

Every failure of a piece of Redis work is one of three kinds, and each kind has one answer:

- **outage** (Redis away, timing out, out of memory, read-only after a failover): logged
  once when it starts and once when it ends (``Outage``), backed off, retried later. A
  READONLY reply also drops the connections (the address may lead to the new primary).
- **bad key** (WRONGTYPE: a key holds the wrong type): logged with the key's error; that
  step is skipped, the others go on.
- **bug** (anything else): logged with its traceback; the process goes on.

``best_effort`` is the same answer for the steps after a job's fate is written (stats,
history, locks, logs): whatever they raise is logged and never changes the fate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from . import errors as redis_errors
from .errors import Connected

logger = logging.getLogger("cogworker")  # the package's one logger (config.logger)

T = TypeVar("T")

OUTAGE, BAD_KEY, BUG = "outage", "bad key", "bug"
# The longest wait between two tries during an outage: a process notices Redis back at
# most this long after it answers again. One try a second per process is no load (a
# refused connect costs microseconds; a hung one waits out its socket timeout anyway).
MAX_BACKOFF = 1.0


def backoff(failures: int) -> float:
    """The wait after the ``failures``-th failed try in a row: 0.2 s doubling to ``MAX_BACKOFF``."""
    return min(0.1 * 2 ** min(max(failures, 1), 6), MAX_BACKOFF)


def kind_of(exc: BaseException) -> str:
    """``"outage"``, ``"bad key"`` or ``"bug"``."""
    if redis_errors.is_outage(exc):
        return OUTAGE
    if isinstance(exc, redis.RedisError) and redis_errors.classify(exc) == redis_errors.WRONGTYPE:
        return BAD_KEY
    return BUG


class Outage:
    """Logs a Redis outage once when it starts and once when it ends, not per attempt
    (and again if its kind changes: away, out of memory, read-only). One per process
    (per Redis it talks to): the pieces of a process share it (the runner's worker loop
    and its housekeeping thread, the master's steps and its cron ticker), so each
    process says it once each way. Locked: those pieces may be on two threads."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None
        self.failures = 0
        self.kind = ""
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> float:
        """Records one failed attempt; returns how long to back off (``backoff``)."""
        kind = redis_errors.classify(exc) if isinstance(exc, redis.ResponseError) else "away"
        with self._lock:
            self.failures += 1
            failures = self.failures
            if self.since is None or kind != self.kind:
                self.since = self.since or time.monotonic()
                self.kind = kind
                logger.error("%s: %s; retrying with backoff", self.what, redis_errors.describe(exc))
        return backoff(failures)

    def ok(self) -> None:
        with self._lock:
            if self.since is not None:
                logger.warning("%s: Redis is back after %.1fs", self.what, time.monotonic() - self.since)
            self.since = None
            self.failures = 0


def handle(
    what: str,
    exc: BaseException,
    outage: Outage | None = None,
    config: Connected | None = None,
    log: logging.Logger = logger,
) -> float:
    """Applies the policy to ``exc`` raised by the step ``what``. Returns the backoff in
    seconds for an outage (0 otherwise)."""
    kind = kind_of(exc)
    if kind == OUTAGE:
        if config is not None:
            redis_errors.reconnect_if_readonly(config, exc)
        if outage is not None:
            return outage.failed(exc)
        log.debug("%s: %s", what, redis_errors.describe(exc))
        return 0.0
    if kind == BAD_KEY:
        log.error("%s failed (a key of the wrong type; skipped): %s", what, exc)
    else:
        log.error("%s failed: %s: %s", what, type(exc).__name__, exc, exc_info=exc)
    return 0.0


def best_effort(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Runs ``fn``; whatever it raises is logged by the policy and swallowed (None)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # the policy itself: sorted by handle()
        handle(what, exc)
        return None


class Breaker:
    """The policy for a loop that must not stall on Redis (the master, housekeeping):
    ``step`` runs one piece of Redis work through ``handle``; after an outage, if
    ``skips``, every step is skipped until the backoff ends, so an outage costs one
    timeout, not one per call. ``outage``: the process's, when another piece of it (a
    worker loop) already has one for the same Redis."""

    def __init__(
        self, what: str, config: Connected | None = None, skips: bool = True, outage: Outage | None = None
    ) -> None:
        self.what = what
        self.config = config
        self.skips = skips
        self.outage = outage or Outage(what)
        self.retry_at = 0.0
        self.failed_at = -float("inf")  # monotonic: the last outage-kind failure

    def closed(self) -> bool:
        """Redis steps may run (no outage backoff pending)."""
        return not self.skips or time.monotonic() >= self.retry_at

    def reset(self) -> None:
        """One more try now, even if the backoff isn't over."""
        self.retry_at = 0.0

    def step(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[bool, T | None]:
        """``(True, result)``, or ``(False, None)`` if it failed or was skipped."""
        if not self.closed():
            return False, None
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # the policy sorts it: outage, bad key or bug; never raised
            self._failed(what, exc)
            return False, None
        if self.outage.active and not self._answers(what):
            return True, result  # done without Redis (a cron tick with no slot due): not a sign it is back
        self.outage.ok()
        return True, result

    def _failed(self, what: str, exc: BaseException) -> None:
        delay = handle(f"{self.what}: {what}", exc, self.outage, self.config)
        if kind_of(exc) == OUTAGE:
            self.failed_at = time.monotonic()
            self.retry_at = self.failed_at + delay

    def _answers(self, what: str) -> bool:
        """During an outage, whether Redis answers a PING: a step may succeed without
        asking Redis anything, and "Redis is back" must be said once, when it is."""
        if self.config is None:
            return True
        try:
            self.config.redis().ping()
        except Exception as exc:  # the policy sorts it, as for the step itself
            self._failed(what, exc)
            return False
        return True
