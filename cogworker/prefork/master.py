"""The prefork master: forks and supervises the children; everything that is not running
jobs is housekeeping (``cogworker.fleet.housekeeping``), shared with the single-process runner.
Single-threaded (forking from a threaded process is unsafe), gunicorn-shaped: one loop
that waits (woken by signals through a self-pipe, the children's pipes and timers),
handles signals (one small method each), reaps, manages the children, runs its timers.
Children bookkeeping: ``children.py``; memory, timeouts, heartbeat: ``watch.py``."""

from __future__ import annotations

import gc
import os
import selectors
import signal
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from setproctitle import setproctitle

from .. import store
from ..config import Config, logger
from ..core import heartbeat
from ..core.inprogress import InProgressList
from ..engine.fetch.fetcher import check_redis_version
from ..engine.loop import FENCED_EXIT, new_identity
from ..errors import Fenced
from ..fleet import recovery
from ..fleet.housekeeping import Housekeeping
from ..lifecycle import stats, unique  # noqa: F401 (unique: hook subscriber)
from ..store.durability import warn_at_boot
from ..store.guard import Breaker
from . import reaped
from .children import ChildrenMixin, ChildState, child_identity
from .exporting import MasterMetrics
from .flight_slots import FlightSlots
from .inbox import SignalInbox
from .shards import Shard, plan
from .signals import SignalsMixin
from .slots import Slots
from .watch import WatchMixin

__all__ = ["Master", "Settings", "ChildState", "child_identity"]

MEMORY_INTERVAL = 5.0
MAX_BOOT_BACKOFF = 30.0
MASTER_SOCKET_TIMEOUT = 1.0
# Children gone, lists not yet recovered: retried this long, then left to orphan
# recovery. Not at all while stopping if Redis failed this recently (it is away).
RECOVERY_GRACE = 1.0
RECENT_FAILURE = 2.0
ANSWER_TTL = 0.5


@dataclass


@dataclass
class Settings:
    module: str
    procs: int
    queues: list[tuple[str, int | None]]
    timeout: float = 25.0
    max_memory_mb: float | None = None
    max_jobs: int | None = None
    catch_up: bool = True
    lookahead: bool = True
    concurrency: int = 1  # jobs in flight per child (docs/architecture.md#concurrency)
    metrics_port: int | None = None  # /metrics from this loop (docs/architecture.md#metrics)
    metrics_host: str = "127.0.0.1"
    metrics_max_classes: int = 500


class Master(SignalsMixin, ChildrenMixin, WatchMixin):
    def __init__(self, settings: Settings, config: Config, inbox: SignalInbox | None = None) -> None:
        self.s = settings
        self.child_config = config
        # Every Redis call of the master (poller, recovery, cron, heartbeat, stats) gets a
        # short timeout, connecting included: a hung Redis must not stall supervision
        # (reaping, --timeout kills, signals). Children use ``config`` as given.
        self.config = config.with_timeouts(MASTER_SOCKET_TIMEOUT)
        self.inbox = inbox
        # The queue layout on a cluster: a child works one shard (prefork/shards.py).
        self.shards: list[Shard] = plan(settings.queues, self.config, config, settings.procs)
        self.identity = new_identity()
        self.target = settings.procs
        self.children: dict[int, ChildState] = {}  # pid -> state
        self.free_indexes: list[int] = []
        self.next_index = 0
        self.signals: deque[int] = deque()  # the inbox's, once run() starts
        self.stopping = False
        self.stop_now = False
        self.children_gone_at: float | None = None  # stopping: when the last child left
        self.quiet = False
        self.rolling: deque[int] = deque()  # HUP: pids still to replace, one at a time
        self.rolling_current: int | None = None
        self.boot_failures = 0
        self.next_fork_at = 0.0
        self.unrecovered: dict[str, reaped.Reaped] = {}
        self.shard_of: dict[str, Shard] = {}  # a gone child's identity -> its shard, until recovered
        self.stats = stats.StatsBuffer()
        # An outage costs one timeout, not one per call: Redis steps are skipped until
        # its backoff ends.
        self.breaker = Breaker("master", self.config)
        self.answered, self.answered_at = False, -float("inf")  # redis_answers()
        self.started_at = time.time()
        self.next_memory = 0.0
        self.selector = selectors.DefaultSelector()
        self.slots = Slots()
        # M entries per child when children run M jobs at once; None keeps the one-job path as it was.
        self.flights = FlightSlots(settings.concurrency, self.slots.count) if settings.concurrency > 1 else None
        self.housekeeping: Housekeeping | None = None  # made in run(): the app is loaded by then
        self.metrics: MasterMetrics | None = None
        if settings.metrics_port is not None:  # bound now: a port in use is a one-line error at boot
            self.metrics = MasterMetrics(self.config, [q for q, _ in settings.queues], self.breaker.step,
                                         self.busy_counts, settings.metrics_host, settings.metrics_port,
                                         settings.metrics_max_classes)
        self.on_signal = self.signal_handlers()

    # -- Redis, through the one error policy, with its circuit breaker ----------------------

    @property
    def client(self) -> store.Client:
        return self.config.redis()

    @property
    def redis_failed_at(self) -> float:
        """Monotonic: the last connection error, timeout, OOM or READONLY."""
        return self.breaker.failed_at

    def redis_ok(self) -> bool:
        return self.breaker.closed()

    def redis_away(self) -> bool:
        """Stopping, and Redis failed just now: no more tries, each could cost a timeout."""
        return self.stopping and time.monotonic() - self.redis_failed_at < RECENT_FAILURE

    def redis_answers(self) -> bool:
        """Whether Redis answers a PING now (asked at most every ``ANSWER_TTL``): tells a
        child stuck on Redis from one still on its way out. False while it failed just now."""
        now = time.monotonic()
        if now - self.redis_failed_at < RECENT_FAILURE:
            return False
        if now >= self.answered_at + ANSWER_TTL:
            self.answered = self.breaker.step("checking Redis", self.client.ping)[0]
            self.answered_at = time.monotonic()
        return self.answered

    def redis_step(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Runs one piece of Redis work; a failure is logged (once per outage) and skipped
        (None)."""
        return self.breaker.step(what, fn, *args, **kwargs)[1]

    # -- boot ------------------------------------------------------------------------------

    def title(self) -> None:
        state = " stopping" if self.stopping else " quiet" if self.quiet else ""
        setproctitle(f"cogworker: master {self.s.module} [{self.target} procs]{state}")

    def run(self) -> int:
        # Connections use the master's client only; the shared per-process client is
        # made in each child after fork.
        self.title()
        if self.inbox is None:
            self.inbox = SignalInbox()
        self.signals = self.inbox.pending  # what arrived during boot is handled first
        self.selector.register(self.inbox.wakeup_r, selectors.EVENT_READ, None)
        if self.metrics is not None:
            self.metrics.attach(self.selector)
        self.boot_checks()
        self.housekeeping = Housekeeping(
            self.config, self.breaker, beat=self.beat, catch_up=self.s.catch_up, counters=self.stats,
            shards=[shard.config for shard in self.shards],
            own=lambda: [c.identity for c in self.children.values()] + [self.identity],
            before_flush=self.refresh_all)
        self.housekeeping.publish_schedule()
        # The preloaded app's objects never change now: keep them out of the collector's
        # way so the children share those pages copy-on-write.
        gc.collect()
        gc.freeze()
        logger.info("master %s: %d children on queues %s", self.identity, self.target,
                    ",".join(q for q, _ in self.s.queues))
        while True:
            self.handle_signals()  # first: a TERM during boot stops before any fork
            self.maintain_children()
            self.wait()
            self.reap()
            self.timers()
            if self.stopping and not self.children and self.may_leave():
                break
        self.shutdown_finish()
        return 0

    def may_leave(self) -> bool:
        """Every child is gone: leave once their lists are recovered; at once if Redis
        just failed (it is away: orphan recovery elsewhere takes what is left); else
        after a short grace for retries (a recovery that failed for another reason)."""
        now = time.monotonic()
        if self.children_gone_at is None:
            self.children_gone_at = now
        return not self.unrecovered or self.redis_away() or now >= self.children_gone_at + RECOVERY_GRACE

    def boot_checks(self) -> None:
        try:
            check_redis_version(self.client)
        except (store.ConnectionError, store.TimeoutError) as exc:
            logger.error("master: Redis unavailable at boot (%s); children will wait for it", exc)
            return
        warn_at_boot(self.client, "master")  # settings that let Redis itself lose jobs

    # -- the loop ----------------------------------------------------------------------------

    def wait(self) -> None:
        keeper = self.housekeeping
        assert keeper is not None
        timeout = min(keeper.seconds_to_next(self.stopping, self.quiet), self.next_memory - time.monotonic(), 1.0)
        if self.children:
            timeout = min(timeout, 0.5)  # slots are polled: hard timeouts are checked twice a second
        if self.stopping or len(self.children) < self.target or self.unrecovered:
            timeout = min(timeout, 0.1)
        for key, mask in self.selector.select(max(0.0, timeout)):
            if key.data is None:
                self.inbox.drain_wakeup()  # type: ignore[union-attr]
            elif callable(key.data):  # the metrics server's sockets (non-blocking)
                key.data(mask)
            else:
                self.read_child(key.data)

    def timers(self) -> None:
        """Supervision first (a hung Redis must not delay a --timeout kill), then the
        housekeeping duties that are due."""
        now = time.monotonic()
        for identity in list(self.unrecovered):
            self.recover_identity(identity)
        if now >= self.next_memory:
            self.next_memory = now + MEMORY_INTERVAL
            self.check_memory()
        self.check_timeouts()
        self.check_fenced()
        assert self.housekeeping is not None
        self.housekeeping.run_due(stopping=self.stopping, quiet=self.quiet)
        if self.metrics is not None:
            self.metrics.tick(self.client)

    def busy_counts(self) -> tuple[int, int]:
        """Live children, and those running a job (for /metrics)."""
        return len(self.children), sum(1 for c in self.children.values() if c.running)

    def refresh_all(self) -> None:
        for child in self.children.values():
            self.refresh(child)

    # -- children ----------------------------------------------------------------------------

    def child_exited(self, child: ChildState, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        if code == FENCED_EXIT or child.fenced_at is not None:
            # Declared dead elsewhere: its list was already requeued there (leftovers, if
            # any, go to orphan recovery). Nothing to settle or count; a fresh identity
            # replaces it.
            logger.warning("master: child %d (pid %d) left: it was declared dead (fenced); replacing it",
                           child.index, child.pid)
            self.reset_slot(child.index)
            self.count_exit("fenced")
            return
        if not self.refresh(child):
            logger.error("master: child %d died mid-update: its jobs are requeued as unknown", child.index)
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        killed_by_us = child.stop_reason in ("killed", "timeout")
        # Leaving mid-job is never what the master asked for (a graceful stop lets the
        # job finish): whatever the exit code, that job crashed its process.
        crashed = not killed_by_us and (bool(child.running) or (code != 0 and child.stop_reason is None))
        if crashed:
            logger.error("master: child %d (pid %d) died (%s)%s", child.index, child.pid, how,
                         f" running {child.running['class']} jid={child.running['jid']}" if child.running else "")
        else:
            logger.info("master: child %d (pid %d) left (%s, %s)", child.index, child.pid, how,
                        child.stop_reason or "done")
        if not child.ready and crashed:
            # Dying before its first fetch is a bad deploy or an import-time crash, not a
            # job: back off instead of fork-looping.
            self.boot_failures += 1
            delay = min(0.5 * 2 ** (self.boot_failures - 1), MAX_BOOT_BACKOFF)
            self.next_fork_at = time.monotonic() + delay
            logger.error("master: children die before their first fetch (%s); next fork in %.1fs", how, delay)
        self.count_exit("crash" if crashed else child.exit_why or "max_jobs")
        self.settle_child(child, crashed)
        self.reset_slot(child.index)  # a stale WAITING would keep its siblings from looking ahead

    def count_exit(self, reason: str) -> None:
        """For cogworker_child_exits_total: crash, timeout, memory, max_jobs (left on its
        own), restart (HUP), shutdown, scale-down, fenced (why the master first wanted it
        gone, even if it then had to kill it)."""
        if self.metrics is not None:
            self.metrics.child_left(reason)

    def settle_child(self, child: ChildState, crashed: bool) -> None:
        """What a gone child owed Redis: its hard-timed-out job filed as failed, pending
        failures filed (or parked in unsettled), pending acks dropped, the rest requeued
        at once, an orphaning counted for the job it ran when it died on its own."""
        running = child.flying if self.flights is not None else child.running
        self.unrecovered[child.identity] = reaped.reap(running, child.acks, child.owes, child.torn,
                                                       child.stop_reason, crashed)
        self.shard_of[child.identity] = self.shards[child.shard]
        self.recover_identity(child.identity)

    def recover_identity(self, identity: str) -> None:
        if self.redis_away():
            return  # left to orphan recovery (see shutdown_finish)
        owed = self.unrecovered[identity]
        config = self.shard_of[identity].config

        def work() -> bool:
            listed = InProgressList(config, identity, beats=False).listed()
            drop: list[bytes] = []
            keep: list[bytes] = []
            try:
                drop, keep = reaped.apply(config, identity, owed, listed)
            except Fenced:
                # Declared dead elsewhere first (this master was frozen?): its jobs were
                # requeued there; only what landed on its list since is left to move.
                logger.warning("master: child %s was declared dead elsewhere; its list was requeued there", identity)
                owed.decisions.clear()
                owed.count_orphanings = False
            for job_class, ms in owed.stats:
                self.stats.record(job_class, False, ms)
            owed.stats.clear()
            moved = recovery.requeue_in_progress(config, identity, drop=drop, keep=keep,
                                                 count_orphanings=owed.count_orphanings, fence=True)
            if owed.count_orphanings:
                buried = recovery.bury_repeat_orphans(config)
                if buried:
                    logger.error("master: %d job(s) orphaned too often moved to dead (ProcessDied)", buried)
            if moved:
                logger.warning("master: requeued %d job(s) of %s", moved, identity)
            heartbeat.deregister(config, identity)
            return True

        if self.redis_step(f"recovering {identity}", work):
            del self.unrecovered[identity], self.shard_of[identity]

    # -- leaving -----------------------------------------------------------------------------

    def shutdown_finish(self) -> None:
        # No new attempts if Redis just failed: TERM with Redis away must not cost a
        # timeout per call. Otherwise one more try, even if the breaker is still open.
        if not self.redis_away():
            self.breaker.reset()
            self.flush_stats()
            for identity in list(self.unrecovered):
                self.recover_identity(identity)
        if self.unrecovered:
            logger.error("master: Redis unavailable: the in-progress lists of %s left for orphan recovery "
                         "(requeued once another process has watched their beat stay unchanged for orphan_threshold)",
                         ", ".join(self.unrecovered))
        if not self.redis_away():
            self.redis_step("deregistering", heartbeat.deregister, self.config, self.identity, self.client)
            for shard in self.shards if self.shards[0].name is not None else ():  # its records there too
                self.redis_step("deregistering", heartbeat.deregister, shard.config, self.identity)
        if self.metrics is not None:
            self.metrics.close()
        logger.info("master: stopped")

    def flush_stats(self) -> None:
        if self.housekeeping is not None:
            self.housekeeping.flush_stats()
