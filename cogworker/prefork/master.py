"""The prefork master: forks and supervises the children; everything that is not running
jobs is housekeeping (``cogworker.fleet.housekeeping``), shared with the single-process runner.

One class, read top to bottom as gunicorn's ``Arbiter`` is: ``run`` (the loop), the signal
methods (one small method each), hearing from the children (their pipes and slots),
``reap_children`` (and what a gone child owed Redis), ``manage_children`` (fork, stop,
kill, trimming), the watch over the running children (heartbeat,
--max-memory, hard timeouts), Redis through the breaker, and leaving. Single-threaded
(forking from a threaded process is unsafe): one loop that waits (woken by signals through
a self-pipe, the children's pipes and timers), handles signals, reaps, manages the
children, runs its timers.

The parts with no master state are their own modules, which the master calls: what it
knows of a child and reading its slot (``children``), the slot layout (``slots``,
``flight_slots``), what a dead child owed (``reaped``), the queue layout's shards
(``shards``), look-ahead hand-back (``siblings``), its /metrics (``exporting``)."""

from __future__ import annotations

import gc
import os
import selectors
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
from setproctitle import setproctitle

from .. import store
from ..config import Config, logger
from ..core import fate, heartbeat, hooks
from ..core.inprogress import InProgressList
from ..engine.effects import builtin_subscribers
from ..engine.fetch.fetcher import check_redis_version
from ..engine.loop import FENCED_EXIT, new_identity
from ..errors import Fenced
from ..fleet import recovery
from ..fleet.housekeeping import Housekeeping
from ..lifecycle import stats, unique
from ..store.durability import warn_at_boot
from ..store.guard import Breaker
from ..store.server import warn_lacking
from . import reaped
from .child import child_main
from .children import ChildState, SlotReader, child_identity, doing
from .exporting import MasterMetrics
from .flight_slots import FlightSlots
from .inbox import FORWARDED, SignalInbox
from .pipe import make_pipe
from .reaped import TIMEOUT_GRACE
from .shards import Shard, next_shard, plan, spare
from .siblings import with_looked_ahead
from .slots import MAX_SLOTS, Slots, SlotState

__all__ = ["Master", "Settings", "ChildState", "child_identity"]

MEMORY_INTERVAL = 5.0
MAX_BOOT_BACKOFF = 30.0
MASTER_SOCKET_TIMEOUT = 1.0
# Children gone, lists not yet recovered: retried this long, then left to orphan
# recovery. Not at all while stopping if Redis failed this recently (it is away).
RECOVERY_GRACE = 1.0
RECENT_FAILURE = 2.0
ANSWER_TTL = 0.5
FENCED_GRACE = 2.0  # a child told it was declared dead, still there after this, is killed
# A child asked to leave leaves at once when it runs no job (a stop cuts its idle wait
# short, cogworker/wakewait.py). One with no job still there after IDLE_LEAVE_GRACE is
# killed if Redis doesn't answer (it is stuck in a Redis call), else after
# IDLE_EXIT_GRACE (its exit handlers, say an error reporter's flush, had their time).
# Nothing of it is lost either way: its list is requeued, what it owed settled here.
IDLE_LEAVE_GRACE = 0.5
IDLE_EXIT_GRACE = 5.0


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


class Master:
    def __init__(self, settings: Settings, config: Config, inbox: SignalInbox | None = None) -> None:
        # What the jobs this process files, requeues and buries do besides (orphan recovery,
        # the poller, the ticker), and, inherited over fork, what its children's jobs do:
        # unique locks, the cron running lock, stats, status and history (engine/effects.py).
        hooks.install(builtin_subscribers())
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
        # HUP: stopping as TERM does, then the caller re-executes the command (new code)
        self.reloading = False
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
        self.reader = SlotReader(self.slots, self.flights, self.stats)  # the children's shared memory
        self.housekeeping: Housekeeping | None = None  # made in run(): the app is loaded by then
        self.metrics: MasterMetrics | None = None
        if settings.metrics_port is not None:  # bound now: a port in use is a one-line error at boot
            self.metrics = MasterMetrics(
                self.config,
                [q for q, _ in settings.queues],
                self.breaker.step,
                self.busy_counts,
                settings.metrics_host,
                settings.metrics_port,
                settings.metrics_max_classes,
            )
        self.on_signal = self.signal_handlers()

    # -- run: boot, then the loop ------------------------------------------------------------

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
            self.config,
            self.breaker,
            beat=self.beat,
            catch_up=self.s.catch_up,
            counters=self.stats,
            parts=[shard.config for shard in self.shards],
            own=lambda: [c.identity for c in self.children.values()] + [self.identity],
            before_flush=self.refresh_all,
        )
        self.housekeeping.publish_schedule()
        # The preloaded app's objects never change now: keep them out of the collector's
        # way so the children share those pages copy-on-write.
        gc.collect()
        gc.freeze()
        logger.info(
            "master %s: %d children on queues %s", self.identity, self.target, ",".join(q for q, _ in self.s.queues)
        )
        while True:
            self.handle_signals()  # first: a TERM during boot stops before any fork
            self.manage_children()
            self.wait()
            # A stop that arrived with a child's exit is seen before the reap: TERM sent to
            # every process at once (Heroku's dyno stop) ends an idle child before this loop
            # would otherwise handle its own TERM, and that child left on the stop.
            self.handle_signals()
            self.reap_children()
            self.timers()
            if self.stopping and not self.children and self.may_leave():
                break
        self.shutdown_finish()
        return 0

    def title(self) -> None:
        state = " reloading" if self.reloading else " stopping" if self.stopping else " quiet" if self.quiet else ""
        setproctitle(f"cogworker: master {self.s.module} [{self.target} procs]{state}")

    def boot_checks(self) -> None:
        try:
            check_redis_version(self.client)
        except (store.ConnectionError, store.TimeoutError) as exc:
            logger.error("master: Redis unavailable at boot (%s); children will wait for it", exc)
            return
        warn_at_boot(self.client, "master")  # settings that let Redis itself lose jobs
        warn_lacking(self.client, "master")  # what of what cogworker uses this server lacks

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

    def may_leave(self) -> bool:
        """Every child is gone: leave once their lists are recovered; at once if Redis
        just failed (it is away: orphan recovery elsewhere takes what is left); else
        after a short grace for retries (a recovery that failed for another reason)."""
        now = time.monotonic()
        if self.children_gone_at is None:
            self.children_gone_at = now
        return not self.unrecovered or self.redis_away() or now >= self.children_gone_at + RECOVERY_GRACE

    # -- signals: each dispatched to one small method ----------------------------------------

    def signal_handlers(self) -> dict[int, Callable[[int], None]]:
        return {
            signal.SIGTERM: self.on_stop,
            signal.SIGINT: self.on_stop,
            signal.SIGTSTP: self.on_quiet,
            signal.SIGTTIN: self.on_more,
            signal.SIGTTOU: self.on_fewer,
            signal.SIGHUP: self.on_restart,
        }

    def handle_signals(self) -> None:
        while self.signals:
            sig = self.signals.popleft()
            handler = self.on_signal.get(sig)
            if handler is not None:
                handler(sig)

    def on_stop(self, sig: int) -> None:
        """TERM/INT: a graceful stop; a second one: stop now (the children are killed).
        During a reload's drain the first one only cancels the re-exec: a stop for good."""
        name = signal.Signals(sig).name
        if not self.stopping:
            self.begin_shutdown(name)
            return
        if self.reloading:
            self.cancel_reload(name)
            return
        logger.warning("master: second %s: stopping now", signal.Signals(sig).name)
        self.stop_now = True
        for child in self.children.values():
            self.kill_child(child, "shutdown")

    def on_quiet(self, sig: int) -> None:
        """TSTP: no new jobs; running jobs finish, looked-ahead ones go back at once."""
        self.go_quiet("TSTP")

    def on_more(self, sig: int) -> None:
        """TTIN: one child more (up to the slots there are)."""
        if self.target >= MAX_SLOTS:
            logger.error("master: TTIN ignored: at most %d children", MAX_SLOTS)
            return
        self.target += 1
        logger.info("master: TTIN: %d children", self.target)
        self.title()

    def on_fewer(self, sig: int) -> None:
        """TTOU: one child fewer (never below one)."""
        if self.target > max(1, len(self.shards)):  # each shard keeps a child (queue layout)
            self.target -= 1
            logger.info("master: TTOU: %d children", self.target)
            self.title()
            self.trim_children()

    def on_restart(self, sig: int) -> None:
        """HUP: reload. The children stop as on TERM (each finishes its job within
        --timeout); then, instead of exiting, the caller re-executes the master's own
        command in this process (same pid), which imports the app anew (docs/architecture.md#reload)."""
        if self.stopping:
            logger.info("master: HUP ignored: %s", "a reload is under way" if self.reloading else "stopping")
            return
        self.reloading = True
        self.begin_shutdown("HUP", reason="restart")

    def on_control(self, command: str | None) -> None:
        """An operator's request read from Redis on the heartbeat (api.quiet_process,
        api.stop_process): as TSTP, or as the first TERM (never a stop-now)."""
        if command == "quiet" and not self.quiet and not self.stopping:
            self.go_quiet("quiet requested through Redis")
        elif command == "stop" and not self.stopping:
            self.begin_shutdown("stop requested through Redis")
        elif command == "stop" and self.reloading:
            self.cancel_reload("stop requested through Redis")

    def cancel_reload(self, why: str) -> None:
        """A stop during a reload's drain: the drain goes on, then the master exits."""
        logger.info("master: %s during a reload: stopping for good (no re-exec)", why)
        self.reloading = False
        self.title()

    def go_quiet(self, why: str) -> None:
        logger.info("master: %s: quiet (no new jobs; running jobs finish)", why)
        self.quiet = True
        for child in self.children.values():
            self.signal_child(child, signal.SIGTSTP)
        self.return_looked_ahead()
        self.title()

    def begin_shutdown(self, why: str, reason: str = "shutdown") -> None:
        what = "reloading: stopping the children, then re-executing" if self.reloading else "stopping"
        logger.info("master: %s: %s (running jobs get %.0fs)", why, what, self.s.timeout)
        self.stopping = True
        self.title()
        for child in self.children.values():
            self.stop_child(child, reason)

    # -- hearing from the children: their pipes and their slots ------------------------------

    def read_child(self, child: ChildState) -> None:
        try:
            while child.conn.poll():
                self.on_message(child, child.conn.recv())
        except (EOFError, OSError):
            self.selector.unregister(child.conn)  # it exited; reap_children() does the rest
            child.conn.close()

    def on_message(self, child: ChildState, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready":
            child.ready = True
            self.boot_failures = 0
        elif kind == "pending":
            child.owes[msg[1]] = fate.from_wire(msg[2])
        elif kind == "settled":
            child.owes.pop(msg[1], None)
        elif kind == "stats":
            # The totals come from the child's slot (see SlotReader.count_jobs); the
            # per-minute, per-class figures from here.
            self.stats.merge({**msg[1], "processed": 0, "failed": 0})
        elif kind == "metrics":
            if self.metrics is not None:
                self.metrics.merge(msg[1])

    def refresh_all(self) -> None:
        for child in self.children.values():
            self.reader.refresh(child)

    def busy_counts(self) -> tuple[int, int]:
        """Live children, and those running a job (for /metrics)."""
        return len(self.children), sum(1 for c in self.children.values() if c.running)

    # -- reaping: a child is gone, and what it owed Redis ------------------------------------

    def reap_children(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self.free_indexes.append(child.index)
            self.free_indexes.sort()
            try:
                if not child.conn.closed:
                    self.read_child(child)  # what it said just before it died
                    if not child.conn.closed:
                        self.selector.unregister(child.conn)
                        child.conn.close()
            except (KeyError, ValueError, OSError):
                pass
            self.child_exited(child, status)

    def child_exited(self, child: ChildState, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        if code == FENCED_EXIT or child.fenced_at is not None:
            # Declared dead elsewhere: its list was already requeued there (leftovers, if
            # any, go to orphan recovery). Nothing to settle or count; a fresh identity
            # replaces it.
            logger.warning(
                "master: child %d (pid %d) left: it was declared dead (fenced); replacing it", child.index, child.pid
            )
            self.reader.reset_slot(child.index)
            self.count_exit("fenced")
            return
        if not self.reader.refresh(child):
            logger.error("master: child %d died mid-update: its jobs are requeued as unknown", child.index)
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        killed_by_us = child.stop_reason in ("killed", "timeout")
        # Leaving mid-job is never what the master asked for (a graceful stop lets the
        # job finish): whatever the exit code, that job crashed its process.
        crashed = not killed_by_us and (bool(child.running) or (code != 0 and child.stop_reason is None))
        if crashed:
            logger.error(
                "master: child %d (pid %d) died (%s)%s",
                child.index,
                child.pid,
                how,
                f" running {child.running['class']} jid={child.running['jid']}" if child.running else "",
            )
        else:
            logger.info(
                "master: child %d (pid %d) left (%s, %s)", child.index, child.pid, how, child.stop_reason or "done"
            )
        if not child.ready and crashed:
            # Dying before its first fetch is a bad deploy or an import-time crash, not a
            # job: back off instead of fork-looping.
            self.boot_failures += 1
            delay = min(0.5 * 2 ** (self.boot_failures - 1), MAX_BOOT_BACKOFF)
            self.next_fork_at = time.monotonic() + delay
            logger.error("master: children die before their first fetch (%s); next fork in %.1fs", how, delay)
        self.count_exit("crash" if crashed else child.exit_why or "max_jobs")
        self.settle_child(child, crashed)
        self.reader.reset_slot(child.index)  # a stale WAITING would keep its siblings from looking ahead

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
        self.unrecovered[child.identity] = reaped.reap(
            running, child.acks, child.owes, child.torn, child.stop_reason, crashed
        )
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
            moved = recovery.requeue_in_progress(
                config,
                identity,
                drop=drop,
                keep=keep,
                count_orphanings=owed.count_orphanings,
                fence=True,
                killed=owed.killed,
            )
            released = unique.release_dropped(config.redis(), config.keys, drop)
            if released:  # their releases were held with the acks, for a fetch never sent
                logger.info("master: released %d unique lock(s) of %s's finished jobs", released, identity)
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

    # -- managing the children: fork, stop, kill, trimming ------------------------------------

    def manage_children(self) -> None:
        self.check_leaving()
        if self.stopping:
            return
        while len(self.children) < self.target:
            if time.monotonic() < self.next_fork_at:
                return
            self.spawn_child()

    def trim_children(self) -> None:
        live = sorted((c for c in self.children.values() if not c.stop_sent), key=lambda c: c.index)
        for pid in spare(self.shards, [(c.pid, c.shard) for c in live], max(0, len(live) - self.target)):
            self.stop_child(self.children[pid], "scale-down")

    def spawn_child(self) -> None:
        index = self.free_indexes.pop(0) if self.free_indexes else self.new_index()
        self.reader.reset_slot(index)
        shard = next_shard(self.shards, (c.shard for c in self.children.values() if not c.stop_sent))
        self.slots.set_shard(index, shard.number)
        reader, writer = make_pipe()
        nonce = os.urandom(4).hex()
        # Signals stay blocked across fork until the child has its own handlers: a TERM
        # landing in between would otherwise run the master's handler in the child.
        signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
        pid = os.fork()
        if pid == 0:  # the child
            try:
                reader.close()
                self.inbox.close_in_child()  # type: ignore[union-attr]
                self.selector.close()
                for other in self.children.values():
                    other.conn.close()  # siblings' pipes are none of its business
            finally:
                child_main(
                    index,
                    shard.child_config,
                    writer,
                    self.slots,
                    shard.queues,
                    os.getppid(),
                    self.s.timeout,
                    self.s.max_jobs,
                    child_identity(os.getpid(), nonce),
                    self.s.lookahead,
                    self.flights,
                )
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        writer.close()
        child = ChildState(index, pid, child_identity(pid, nonce), reader, shard=shard.number)
        self.children[pid] = child
        self.selector.register(reader, selectors.EVENT_READ, child)
        logger.info("master: child %d (pid %d) started", index, pid)
        self.redis_step("registering a child", heartbeat.beat, shard.config, [self.child_record(child)])

    def new_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index

    def signal_child(self, child: ChildState, sig: int) -> None:
        try:
            os.kill(child.pid, sig)
        except ProcessLookupError:
            pass

    def stop_child(self, child: ChildState, reason: str) -> None:
        """Graceful: the child finishes its job and leaves within --timeout, or is killed
        (its job requeued); a job it fetched ahead goes back to its queue at once."""
        if child.stop_sent:
            return
        child.stop_reason = reason
        child.exit_why = child.exit_why or reason
        child.stop_sent = True
        child.leave_by = time.monotonic() + self.s.timeout
        self.signal_child(child, signal.SIGTERM)
        self.return_looked_ahead([child])  # shutdown, recycling, scale-down: it won't start it

    def kill_child(self, child: ChildState, reason: str) -> None:
        """``timeout``: its job is filed as failed; anything else: requeued, uncounted."""
        child.stop_reason = "timeout" if reason == "timeout" else "killed"
        child.exit_why = "timeout" if reason == "timeout" else child.exit_why or reason
        child.stop_sent = True
        self.signal_child(child, signal.SIGKILL)

    def check_leaving(self) -> None:
        """Children asked to leave (shutdown, HUP, --max-memory, TTOU) that haven't: at
        --timeout (say a job ignores TERM), or at once if they run no job (stuck in a
        Redis call), they are killed, as at shutdown."""
        now = time.monotonic()
        for child in self.children.values():
            if not child.stop_sent or child.stop_reason in ("killed", "timeout"):
                continue
            if now >= child.leave_by:
                logger.warning(
                    "master: child %d (%s) still running at --timeout: killed, its job requeued",
                    child.index,
                    child.stop_reason,
                )
                self.kill_child(child, "killed")
                continue
            self.reader.refresh(child)
            if child.running or child.torn:
                child.idle_since = None
            elif child.idle_since is None:
                child.idle_since = now
            elif now >= child.idle_since + IDLE_LEAVE_GRACE:
                answers = self.redis_answers()
                if answers and now < child.idle_since + IDLE_EXIT_GRACE:
                    continue  # not stuck on Redis: still on its way out
                logger.warning(
                    "master: child %d (pid %d, %s) runs no job but hasn't left %.1fs after it was asked "
                    "to, %s (%s): killed; nothing of it is lost (its list is requeued)",
                    child.index,
                    child.pid,
                    child.stop_reason,
                    now - child.idle_since,
                    "though Redis answers" if answers else "and Redis doesn't answer (stuck on it)",
                    doing(child.pid),
                )
                self.kill_child(child, "killed")

    def return_looked_ahead(self, children: list[ChildState] | None = None) -> None:
        """Jobs the children fetched ahead and won't start now go back at once, not when
        the job in front of them ends."""
        for child in children if children is not None else list(self.children.values()):
            config = self.shards[child.shard].config

            def act(state: SlotState, config: Config = config) -> bool:
                try:
                    return (
                        InProgressList(config, state.identity, beats=False).return_ahead(state.ahead, state.started) > 0
                    )
                except Fenced:
                    return False  # declared dead: its list, that job included, was requeued

            if self.redis_step("returning a looked-ahead job", with_looked_ahead, self.slots, child.index, act):
                logger.info("master: child %d's looked-ahead jobs are back on their queues", child.index)

    # -- the watch over the running children: heartbeat, fencing, memory, hard timeouts ----

    def beat(self) -> None:
        # An operator's request first, so the record written below already shows it.
        self.on_control(heartbeat.take_control(self.config, self.identity, self.client))
        for child in self.children.values():
            self.reader.refresh(child)
        live = [child for child in self.children.values() if child.fenced_at is None]
        records = [
            heartbeat.BeatRecord(
                self.identity,
                "master",
                os.getpid(),
                [q for q, _ in self.s.queues],
                self.started_at,
                busy=sum(1 for c in self.children.values() if c.running),
                rss=heartbeat.rss_of(),
                owns_list=False,
                state="stopping" if self.stopping else "quiet" if self.quiet else "",
                extra={"procs": self.target, "children": sum(1 for c in live if c.ready)},
            )
        ]
        sent = heartbeat.clock()
        refused, cancelled = self.beat_shards(records, live)
        for child in live:
            self.tell_cancelled(child, cancelled)
            if child.identity in refused:
                logger.warning(
                    "master: child %d (pid %d) was declared dead elsewhere (fenced): it leaves now",
                    child.index,
                    child.pid,
                )
                child.fenced_at = time.monotonic()
                self.slots.set_fenced(child.index)
        # Written after the flags: a child that reads this stamp sees its flag too. It
        # vouches for the children while fresh (they beat for themselves once it is stale).
        self.slots.stamp_beat(sent)

    def beat_shards(self, records: list[heartbeat.BeatRecord], live: list[ChildState]) -> tuple[set[str], set[str]]:
        """One beat.lua per shard, for the children working it (the master's own record
        rides with the first; in the queue layout it goes to the fleet's keys on its own).
        Returns who was refused (fenced) and which running jids were cancelled."""
        refused: set[str] = set()
        cancelled: set[str] = set()
        sharded = self.shards[0].name is not None
        if sharded:
            heartbeat.beat(self.config, records, client=self.client)
            records = []
        for shard in self.shards:
            mine = records + [self.child_record(c) for c in live if c.shard == shard.number]
            records = []
            if mine:
                told = heartbeat.beat(shard.config, mine, client=None if sharded else self.client)
                refused.update(told.refused)
                cancelled.update(told.cancelled)
        return refused, cancelled

    def child_record(self, child: ChildState) -> heartbeat.BeatRecord:
        return child.record(self.shards[child.shard].queue_names)

    def tell_cancelled(self, child: ChildState, cancelled: set[str]) -> None:
        """The child's slot names one cancelled jid at a time; with several jobs in flight
        (``--concurrency``), one more per beat (the beat reports them as long as they run)."""
        running = {job["jid"] for job in child.jobs()}
        child.told &= running
        for jid in sorted((cancelled & running) - child.told):
            self.slots.set_cancelled(child.index, jid)
            child.told.add(jid)
            return

    def check_fenced(self) -> None:
        """A fenced child leaves on its own within a fraction of a second; one that
        doesn't (stuck in C code) is killed: its job runs elsewhere now."""
        for child in self.children.values():
            if (
                child.fenced_at is not None
                and time.monotonic() > child.fenced_at + FENCED_GRACE
                and child.stop_reason != "fenced"
            ):
                self.kill_child(child, "fenced")

    def check_memory(self) -> None:
        for child in list(self.children.values()):
            try:
                child.rss = psutil.Process(child.pid).memory_info().rss
            except psutil.Error:
                continue
            limit = self.s.max_memory_mb
            if limit and child.rss > limit * 1024 * 1024 and not child.stop_sent:
                logger.warning(
                    "master: child %d uses %.0f MB (> --max-memory %.0f): replacing it after its job",
                    child.index,
                    child.rss / 2**20,
                    limit,
                )
                self.stop_child(child, "memory")

    def check_timeouts(self) -> None:
        now = time.time()
        for child in self.children.values():
            self.reader.refresh(child)
            # Several in flight (--concurrency): an async job past its timeout is
            # cancelled by its child before this; one still here blocks the child.
            for running in child.jobs():
                if (
                    running.get("deadline")
                    and now > running["deadline"] + TIMEOUT_GRACE
                    and child.stop_reason != "timeout"
                ):
                    logger.error(
                        "master: jid=%s ran %.0fs past its timeout: killing child %d",
                        running["jid"],
                        now - running["deadline"],
                        child.index,
                    )
                    self.kill_child(child, "timeout")

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
            logger.error(
                "master: Redis unavailable: the in-progress lists of %s left for orphan recovery "
                "(requeued once another process has watched their beat stay unchanged for orphan_threshold)",
                ", ".join(self.unrecovered),
            )
        if not self.redis_away():
            self.redis_step("deregistering", heartbeat.deregister, self.config, self.identity, self.client)
            for shard in self.shards if self.shards[0].name is not None else ():  # its records there too
                self.redis_step("deregistering", heartbeat.deregister, shard.config, self.identity)
        if self.metrics is not None:
            self.metrics.close()
        # Two messages, not one with a %s: a JSON line's event is named from the message's format.
        if self.reloading:
            logger.info("master: children stopped: re-executing to load the app anew")
        else:
            logger.info("master: stopped")

    def flush_stats(self) -> None:
        if self.housekeeping is not None:
            self.housekeeping.flush_stats()
