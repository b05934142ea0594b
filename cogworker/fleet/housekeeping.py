"""Housekeeping: everything a cogworker process does besides running jobs, in one
component shared by the prefork master and by ``python -m cogworker.worker``.

Duties, each on its own timer: the heartbeat, orphan recovery (scheduled by the pass
itself: ``OrphanRecovery.next_delay``), the scheduled/retry poller, the cron ticker and
(where the caller keeps counters) the stats flush. Every duty runs through one
``policy.Breaker``: one failing (a key of the wrong type, a bug) is logged and never
starves the others; an outage is logged once and backed off.

The caller drives it (``run_due`` from its loop, ``seconds_to_next`` for its wait): the
master from its single-threaded loop, the runner from a thread (``runner.Housekeeper``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ..config import Config
from ..lifecycle import stats
from ..store.guard import Breaker
from .poller import Poller
from .recovery import OrphanRecovery

STATS_INTERVAL = 1.0


class Housekeeping:
    def __init__(
        self,
        config: Config,
        breaker: Breaker,
        *,
        beat: Callable[[], Any],
        own: Callable[[], Iterable[str]],
        cron: bool = True,
        catch_up: bool | None = None,
        counters: stats.StatsBuffer | None = None,
        before_flush: Callable[[], Any] | None = None,
        parts: list[Config] | None = None,
    ) -> None:
        """``beat`` writes the process records; ``own`` names the identities that are
        alive here (never recovered as orphans); ``counters``, if given, are flushed
        every second (``before_flush`` first: gather what is to be counted). ``parts``: the
        parts this process works (``routing``; docs/architecture.md#cluster-layout): the
        poller and orphan recovery run in each;
        cron and the counters stay on ``config``, the fleet's."""
        self.config = config
        self.breaker = breaker
        self.beat = beat
        self.own = own
        self.counters = counters
        self.before_flush = before_flush
        self.pollers = [Poller(part) for part in parts or [config]]
        self.recoveries = [OrphanRecovery(part, own=list(own())) for part in parts or [config]]
        self.next_recoveries = [0.0] * len(self.recoveries)
        self.next_beat = self.next_stats = 0.0
        self.ticker: Any = None
        if cron:
            from ..cron import ticker as periodic

            # None when the app registered no periodic entries. Slots wait for the first
            # recovery pass (a job of a dead process's slot is requeued first).
            kwargs = {} if catch_up is None else {"catch_up": catch_up}
            self.ticker = periodic.ticker_for(config, ready=self.recovered_once, **kwargs)

    def recovered_once(self) -> bool:
        return all(recovery.completed_passes > 0 for recovery in self.recoveries)

    def publish_schedule(self) -> None:
        if self.ticker is not None and hasattr(self.ticker, "publish"):
            self.breaker.step("publishing the periodic schedule", self.ticker.publish)

    # -- the duties ----------------------------------------------------------------------------

    def run_due(self, stopping: bool = False, quiet: bool = False) -> None:
        """Runs every duty that is due. Stopping: only the heartbeat and the stats flush
        (the process is leaving); quiet: no new jobs, so no polling or cron either."""
        now = time.monotonic()
        if now >= self.next_beat:
            self.next_beat = now + self.config.heartbeat_interval
            self.breaker.step("heartbeat", self.beat)
        if self.counters is not None and now >= self.next_stats:
            self.next_stats = now + STATS_INTERVAL
            self.flush_stats()
        if stopping:
            return
        for i, due in enumerate(self.next_recoveries):
            if now >= due:
                self.recover_orphans(i)
        if quiet:
            return
        for poller in self.pollers:
            if poller.due():
                self.breaker.step("scheduled poller", poller.poll)
        if self.ticker is not None:
            # An outage raised, not swallowed: the breaker logs it as this process's one.
            self.breaker.step("cron tick", self.ticker.tick, raise_outage=True)

    def recover_orphans(self, i: int = 0) -> None:
        """One pass in part ``i`` (scanning for lists until a first pass completes).
        Rescheduled unless Redis is away or skipped: then it runs again as soon as Redis
        may answer."""
        recovery = self.recoveries[i]
        first = recovery.completed_passes == 0
        failed_at = self.breaker.failed_at
        ok, _ = self.breaker.step("orphan recovery", recovery.run, scan=first, own=list(self.own()))
        if ok or (self.breaker.closed() and self.breaker.failed_at == failed_at):  # not an outage
            self.next_recoveries[i] = time.monotonic() + recovery.next_delay()

    @property
    def recovery(self) -> OrphanRecovery:
        """The first part's (the only one outside the queue layout)."""
        return self.recoveries[0]

    @property
    def poller(self) -> Poller:
        return self.pollers[0]

    def flush_stats(self) -> None:
        """The counters, in one round trip; kept for the next flush if Redis is away."""
        if self.counters is None:
            return
        if self.before_flush is not None:
            self.before_flush()
        if not self.counters:
            return
        snap = self.counters.take()
        ok, _ = self.breaker.step("stats flush", stats.flush, self.config, snap)
        if not ok and not self.breaker.closed():
            self.counters.merge(snap)

    def seconds_to_next(self, stopping: bool = False, quiet: bool = False) -> float:
        """How long until a duty is due."""
        now = time.monotonic()
        due = [self.next_beat]
        if self.counters is not None:
            due.append(self.next_stats)
        if not stopping:
            due.extend(self.next_recoveries)
            if not quiet:
                due.extend(poller.next_at for poller in self.pollers)
                if self.ticker is not None:
                    due.append(now + self.ticker.seconds_to_next())
        return max(0.0, min(due) - now)
