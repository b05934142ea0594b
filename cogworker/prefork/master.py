"""The prefork master: forks and supervises the children, and does everything that is
not running jobs (DESIGN §3). Single-threaded (forking from a threaded process is
unsafe): one loop woken by signals (self-pipe), the children's pipes and timers."""

from __future__ import annotations

import dataclasses
import gc
import os
import selectors
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import psutil
import redis
from setproctitle import setproctitle

from .. import fate, heartbeat, recovery, redis_errors, stats, unique  # noqa: F401 (unique: hook subscriber)
from ..config import Config, logger
from ..errors import Fenced
from ..fate import Decision
from ..fetch import check_redis_version
from ..inprogress import InProgressList
from ..scheduler import Poller
from ..worker import FENCED_EXIT, Outage, new_identity
from . import reaped
from .child import child_main
from .inbox import FORWARDED, SignalInbox
from .pipe import make_pipe
from .reaped import TIMEOUT_GRACE
from .siblings import with_looked_ahead
from .slots import ACK_DUE, MAX_SLOTS, RUNNING, Slots, SlotState

MEMORY_INTERVAL = 5.0
STATS_INTERVAL = 1.0
FENCED_GRACE = 2.0  # a child told it was declared dead, still there after this, is killed
MAX_BOOT_BACKOFF = 30.0
MASTER_SOCKET_TIMEOUT = 1.0
# A child asked to leave that has no job running and is still there after this is
# killed: it is stuck in a Redis call (Redis hung or away), and nothing of it is lost
# (its list is requeued, what it owed is settled by the master).
IDLE_LEAVE_GRACE = 0.5
# Children gone, lists not yet recovered: retried this long, then left to orphan
# recovery. Not at all while stopping if Redis failed this recently (it is away).
RECOVERY_GRACE = 1.0
RECENT_FAILURE = 2.0


@dataclass
class ChildState:
    index: int
    pid: int
    identity: str
    conn: Connection
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    running: dict[str, Any] | None = None  # jid, class, queue, deadline, run_at
    acks: set[str] = field(default_factory=set)  # jids that ran; their ack is due or riding on a fetch
    torn: bool = False  # died mid-write of its slot: what it ran is unknown
    owes: dict[str, Decision] = field(default_factory=dict)  # what it told us it still owes
    stop_reason: str | None = None  # why the master stopped it: shutdown, timeout, memory, ...
    stop_sent: bool = False
    leave_by: float = 0.0  # monotonic: asked to leave, killed if still there then (--timeout)
    idle_since: float | None = None  # asked to leave and seen with no job since then
    counted: tuple[int, int] = (0, 0)  # its slot's processed, failed counters, as last read
    rss: int = 0
    fenced_at: float | None = None  # when a beat found it declared dead (it leaves on its own)


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


class Master:
    def __init__(self, settings: Settings, config: Config, inbox: SignalInbox | None = None) -> None:
        self.s = settings
        self.child_config = config
        # Every Redis call of the master (poller, recovery, cron, heartbeat, stats) gets a
        # short timeout, connecting included: a hung Redis must not stall supervision
        # (reaping, --timeout kills, signals). Children use ``config`` as given.
        self.config = dataclasses.replace(
            config, socket_timeout=MASTER_SOCKET_TIMEOUT,
            socket_connect_timeout=min(config.socket_connect_timeout, MASTER_SOCKET_TIMEOUT))
        self.inbox = inbox
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
        self.stats = stats.StatsBuffer()
        self.poller = Poller(self.config)
        self.recovery = recovery.OrphanRecovery(self.config, own=[self.identity])
        self.outage = Outage("master")
        self.redis_retry_at = 0.0
        self.redis_failed_at = -RECENT_FAILURE  # monotonic: the last connection error or timeout
        self.started_at = time.time()
        self.next_beat = self.next_recovery = self.next_stats = self.next_memory = 0.0
        self.ticker: Any = None
        self.selector = selectors.DefaultSelector()
        self.slots = Slots()

    # -- Redis, with a circuit breaker so an outage costs one timeout, not one per call ----

    @property
    def client(self) -> redis.Redis:
        return self.config.redis()

    def redis_ok(self) -> bool:
        return time.monotonic() >= self.redis_retry_at

    def redis_away(self) -> bool:
        """Stopping, and Redis failed just now: no more tries, each could cost a timeout."""
        return self.stopping and time.monotonic() - self.redis_failed_at < RECENT_FAILURE

    def redis_step(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Runs one piece of Redis work; a failure is logged (once per outage) and skipped."""
        if not self.redis_ok():
            return None
        try:
            result = fn(*args, **kwargs)
            self.outage.ok()
            return result
        except redis.RedisError as exc:
            if not redis_errors.is_outage(exc):
                logger.error("master: %s failed: %s: %s", what, type(exc).__name__, exc)
                return None
            # Away, out of memory or read-only (a replica now: its connections are dropped).
            redis_errors.reconnect_if_readonly(self.config, exc)
            self.redis_failed_at = time.monotonic()
            self.redis_retry_at = self.redis_failed_at + self.outage.failed(exc)
        except Exception:
            logger.exception("master: %s failed", what)
        return None

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
        self.boot_checks()
        from .. import cron

        self.ticker = cron.ticker_for(self.config, ready=lambda: self.recovery.completed_passes > 0,
                                      catch_up=self.s.catch_up)
        if self.ticker is not None and hasattr(self.ticker, "publish"):
            self.redis_step("publishing the periodic schedule", self.ticker.publish)
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
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.error("master: Redis unavailable at boot (%s); children will wait for it", exc)

    # -- the loop ----------------------------------------------------------------------------

    def wait(self) -> None:
        now = time.monotonic()
        timeout = min(self.next_beat, self.next_stats, self.next_recovery, self.next_memory) - now
        if self.ticker is not None and not self.stopping and not self.quiet:
            timeout = min(timeout, self.ticker.seconds_to_next())
        if self.children:
            timeout = min(timeout, 0.5)  # slots are polled: hard timeouts are checked twice a second
        if self.stopping or len(self.children) < self.target or self.unrecovered:
            timeout = min(timeout, 0.1)
        timeout = max(0.0, min(timeout, 1.0, self.poller.next_at - now if not self.quiet else 1.0))
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self.inbox.drain_wakeup()  # type: ignore[union-attr]
            else:
                self.read_child(key.data)

    def read_child(self, child: ChildState) -> None:
        try:
            while child.conn.poll():
                self.on_message(child, child.conn.recv())
        except (EOFError, OSError):
            self.selector.unregister(child.conn)  # it exited; reap() does the rest
            child.conn.close()

    def on_message(self, child: ChildState, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready":
            child.ready = True
            self.boot_failures = 0
            if self.rolling_current is not None and child.pid != self.rolling_current:
                self.rolling_current = None  # the replacement is up: next one
        elif kind == "pending":
            child.owes[msg[1]] = fate.from_wire(msg[2])
        elif kind == "settled":
            child.owes.pop(msg[1], None)
        elif kind == "stats":
            # The totals come from the child's slot (see count_jobs); the per-minute,
            # per-class figures from here.
            self.stats.merge({**msg[1], "processed": 0, "failed": 0})

    def refresh(self, child: ChildState) -> bool:
        """What the child runs now, from its slot. False if the slot is torn (the child
        died mid-write): then nothing is assumed about its jobs."""
        slot = self.slots.read(child.index)
        child.torn = slot is None
        self.count_jobs(child, (slot.processed, slot.failed) if slot else self.slots.counts(child.index))
        if slot is None:
            child.running = None
            child.acks = set()
            return False
        if slot.state == RUNNING:
            child.running = {"jid": slot.jid, "class": slot.job_class, "queue": slot.queue,
                             "deadline": slot.deadline, "run_at": slot.started_at}
        else:
            child.running = None
        child.acks = {jid for jid in (slot.ack_jid, slot.jid if slot.state == ACK_DUE else "") if jid}
        return True

    def count_jobs(self, child: ChildState, counts: tuple[int, int]) -> None:
        """What the child processed and failed since the last look, into the totals."""
        processed, failed = counts
        if processed >= child.counted[0] and failed >= child.counted[1]:
            self.stats.processed += processed - child.counted[0]
            self.stats.failed += failed - child.counted[1]
            child.counted = counts

    def handle_signals(self) -> None:
        while self.signals:
            sig = self.signals.popleft()
            if sig in (signal.SIGTERM, signal.SIGINT):
                if self.stopping:
                    logger.warning("master: second %s: stopping now", signal.Signals(sig).name)
                    self.stop_now = True
                    for child in self.children.values():
                        self.kill_child(child, "shutdown")
                else:
                    self.begin_shutdown(signal.Signals(sig).name)
            elif sig == signal.SIGTSTP:
                logger.info("master: TSTP: quiet (no new jobs; running jobs finish)")
                self.quiet = True
                for child in self.children.values():
                    self.signal_child(child, signal.SIGTSTP)
                self.return_looked_ahead()
                self.title()
            elif sig == signal.SIGTTIN:
                if self.target >= MAX_SLOTS:
                    logger.error("master: TTIN ignored: at most %d children", MAX_SLOTS)
                    continue
                self.target += 1
                logger.info("master: TTIN: %d children", self.target)
                self.title()
            elif sig == signal.SIGTTOU:
                if self.target > 1:
                    self.target -= 1
                    logger.info("master: TTOU: %d children", self.target)
                    self.title()
                    self.trim_children()
            elif sig == signal.SIGHUP:
                logger.info("master: HUP: replacing every child, one at a time")
                self.rolling = deque(sorted(self.children))
                self.rolling_current = None

    def return_looked_ahead(self, children: list[ChildState] | None = None) -> None:
        """Jobs the children fetched ahead and won't start now go back at once, not when
        the job in front of them ends."""
        for child in children if children is not None else list(self.children.values()):
            def act(state: SlotState) -> bool:
                try:
                    return InProgressList(self.config, state.identity, beats=False).return_ahead(state.ahead)
                except Fenced:
                    return False  # declared dead: its list, that job included, was requeued

            if self.redis_step("returning a looked-ahead job", with_looked_ahead, self.slots, child.index, act):
                logger.info("master: child %d's looked-ahead job is back on its queue", child.index)

    def begin_shutdown(self, why: str) -> None:
        logger.info("master: %s: stopping (running jobs get %.0fs)", why, self.s.timeout)
        self.stopping = True
        self.rolling.clear()
        self.title()
        for child in self.children.values():
            self.stop_child(child, "shutdown")

    # -- children ----------------------------------------------------------------------------

    def maintain_children(self) -> None:
        self.check_leaving()
        if self.stopping:
            return
        self.step_rolling()
        while len(self.children) < self.target:
            if time.monotonic() < self.next_fork_at:
                return
            self.fork_child()

    def step_rolling(self) -> None:
        if self.rolling_current is not None or not self.rolling:
            return
        pid = self.rolling.popleft()
        child = self.children.get(pid)
        if child is not None:
            self.rolling_current = pid
            self.stop_child(child, "restart")

    def trim_children(self) -> None:
        live = [c for c in self.children.values() if not c.stop_sent]
        for child in sorted(live, key=lambda c: -c.index)[: max(0, len(live) - self.target)]:
            self.stop_child(child, "scale-down")

    def fork_child(self) -> None:
        index = self.free_indexes.pop(0) if self.free_indexes else self._new_index()
        self.slots.reset(index)
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
                child_main(index, self.child_config, writer, self.slots, self.s.queues,
                           os.getppid(), self.s.timeout,
                           self.s.max_jobs, child_identity(os.getpid(), nonce), self.s.lookahead)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        writer.close()
        child = ChildState(index, pid, child_identity(pid, nonce), reader)
        self.children[pid] = child
        self.selector.register(reader, selectors.EVENT_READ, child)
        self.redis_step("registering a child", heartbeat.beat, self.config,
                        [self.child_record(child)], self.client)

    def _new_index(self) -> int:
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
        child.stop_sent = True
        child.leave_by = time.monotonic() + self.s.timeout
        self.signal_child(child, signal.SIGTERM)
        self.return_looked_ahead([child])  # shutdown, recycling, scale-down: it won't start it

    def kill_child(self, child: ChildState, reason: str) -> None:
        """``timeout``: its job is filed as failed; anything else: requeued, uncounted."""
        child.stop_reason = "timeout" if reason == "timeout" else "killed"
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
                logger.warning("master: child %d (%s) still running at --timeout: killed, its job requeued",
                               child.index, child.stop_reason)
                self.kill_child(child, "killed")
                continue
            self.refresh(child)
            if child.running or child.torn:
                child.idle_since = None
            elif child.idle_since is None:
                child.idle_since = now
            elif now >= child.idle_since + IDLE_LEAVE_GRACE:
                logger.info("master: child %d (%s) runs no job but hasn't left (stuck on Redis?): killed",
                            child.index, child.stop_reason)
                self.kill_child(child, "killed")

    def reap(self) -> None:
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
            logger.warning("master: child %d (pid %d) left: it was declared dead (fenced); replacing it",
                           child.index, child.pid)
            self.slots.reset(child.index)
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
        self.settle_child(child, crashed)
        self.slots.reset(child.index)  # a stale WAITING would keep its siblings from looking ahead

    def settle_child(self, child: ChildState, crashed: bool) -> None:
        """What a gone child owed Redis: its hard-timed-out job filed as failed, pending
        failures filed (or parked in unsettled), pending acks dropped, the rest requeued
        at once, an orphaning counted for the job it ran when it died on its own."""
        self.unrecovered[child.identity] = reaped.reap(child.running, child.acks, child.owes, child.torn,
                                                       child.stop_reason, crashed)
        self.recover_identity(child.identity)

    def recover_identity(self, identity: str) -> None:
        if self.redis_away():
            return  # left to orphan recovery (see shutdown_finish)
        owed = self.unrecovered[identity]

        def work() -> bool:
            listed = InProgressList(self.config, identity, beats=False).listed()
            drop: list[bytes] = []
            keep: list[bytes] = []
            try:
                drop, keep = reaped.apply(self.config, identity, owed, listed)
            except Fenced:
                # Declared dead elsewhere first (this master was frozen?): its jobs were
                # requeued there; only what landed on its list since is left to move.
                logger.warning("master: child %s was declared dead elsewhere; its list was requeued there", identity)
                owed.decisions.clear()
                owed.count_orphanings = False
            for job_class, ms in owed.stats:
                self.stats.record(job_class, False, ms)
            owed.stats.clear()
            moved = recovery.requeue_in_progress(self.config, identity, drop=drop, keep=keep,
                                                 count_orphanings=owed.count_orphanings, fence=True)
            if owed.count_orphanings:
                buried = recovery.bury_repeat_orphans(self.config)
                if buried:
                    logger.error("master: %d job(s) orphaned too often moved to dead (ProcessDied)", buried)
            if moved:
                logger.warning("master: requeued %d job(s) of %s", moved, identity)
            heartbeat.deregister(self.config, identity)
            return True

        if self.redis_step(f"recovering {identity}", work):
            del self.unrecovered[identity]

    # -- timers ------------------------------------------------------------------------------

    def timers(self) -> None:
        now = time.monotonic()
        if now >= self.next_beat:
            self.next_beat = now + self.config.heartbeat_interval
            self.redis_step("heartbeat", self.beat)
        for identity in list(self.unrecovered):
            self.recover_identity(identity)
        if now >= self.next_memory:
            self.next_memory = now + MEMORY_INTERVAL
            self.check_memory()
        self.check_timeouts()
        self.check_fenced()
        if now >= self.next_stats:
            self.next_stats = now + STATS_INTERVAL
            self.flush_stats()
        if self.stopping:
            return
        if now >= self.next_recovery:
            first = self.recovery.completed_passes == 0
            own = [c.identity for c in self.children.values()] + [self.identity]
            if self.redis_step("orphan recovery", self.recovery.run, scan=first, own=own) is not None:
                self.next_recovery = time.monotonic() + self.recovery.next_delay()
        if self.quiet:
            return
        if self.poller.due():
            self.redis_step("scheduled poller", self.poller.poll)
        if self.ticker is not None and self.redis_ok():
            try:
                self.ticker.tick()
            except Exception:
                logger.exception("master: cron tick failed")

    def beat(self) -> None:
        for child in self.children.values():
            self.refresh(child)
        records = [heartbeat.ProcessRecord(self.identity, "master", os.getpid(),
                                           [q for q, _ in self.s.queues], self.started_at,
                                           busy=sum(1 for c in self.children.values() if c.running),
                                           rss=heartbeat.rss_of(), owns_list=False)]
        live = [child for child in self.children.values() if child.fenced_at is None]
        records.extend(self.child_record(child) for child in live)
        sent = heartbeat.clock()
        refused = set(heartbeat.beat(self.config, records, client=self.client))
        for child in live:
            if child.identity in refused:
                logger.warning("master: child %d (pid %d) was declared dead elsewhere (fenced): it leaves now",
                               child.index, child.pid)
                child.fenced_at = time.monotonic()
                self.slots.set_fenced(child.index)
        # Written after the flags: a child that reads this stamp sees its flag too. It
        # vouches for the children while fresh (they beat for themselves once it is stale).
        self.slots.stamp_beat(sent)

    def check_fenced(self) -> None:
        """A fenced child leaves on its own within a fraction of a second; one that
        doesn't (stuck in C code) is killed: its job runs elsewhere now."""
        for child in self.children.values():
            if child.fenced_at is not None and time.monotonic() > child.fenced_at + FENCED_GRACE \
                    and child.stop_reason != "fenced":
                self.kill_child(child, "fenced")

    def child_record(self, child: ChildState) -> heartbeat.ProcessRecord:
        running = None
        if child.running:
            running = {k: v for k, v in child.running.items() if k != "deadline"}
        return heartbeat.ProcessRecord(child.identity, "child", child.pid, [q for q, _ in self.s.queues],
                                       child.started_at, busy=int(bool(child.running)), rss=child.rss,
                                       running=running)

    def check_memory(self) -> None:
        for child in list(self.children.values()):
            try:
                child.rss = psutil.Process(child.pid).memory_info().rss
            except psutil.Error:
                continue
            limit = self.s.max_memory_mb
            if limit and child.rss > limit * 1024 * 1024 and not child.stop_sent:
                logger.warning("master: child %d uses %.0f MB (> --max-memory %.0f): replacing it after its job",
                               child.index, child.rss / 2**20, limit)
                self.stop_child(child, "memory")

    def check_timeouts(self) -> None:
        now = time.time()
        for child in self.children.values():
            self.refresh(child)
            running = child.running
            if running and running.get("deadline") and now > running["deadline"] + TIMEOUT_GRACE \
                    and child.stop_reason != "timeout":
                logger.error("master: jid=%s ran %.0fs past its timeout: killing child %d", running["jid"],
                             now - running["deadline"], child.index)
                self.kill_child(child, "timeout")

    def flush_stats(self) -> None:
        for child in self.children.values():
            self.refresh(child)
        if not self.stats:
            return
        snap = self.stats.take()
        if self.redis_step("stats flush", stats.flush, self.config, snap) is None and not self.redis_ok():
            self.stats.merge(snap)

    # -- leaving -----------------------------------------------------------------------------

    def shutdown_finish(self) -> None:
        # No new attempts if Redis just failed: TERM with Redis away must not cost a
        # timeout per call. Otherwise one more try, even if the breaker is still open.
        if not self.redis_away():
            self.redis_retry_at = 0.0
            self.flush_stats()
            for identity in list(self.unrecovered):
                self.recover_identity(identity)
        if self.unrecovered:
            logger.error("master: Redis unavailable: the in-progress lists of %s left for orphan recovery "
                         "(requeued once their last beat is older than orphan_threshold)", ", ".join(self.unrecovered))
        if not self.redis_away():
            self.redis_step("deregistering", heartbeat.deregister, self.config, self.identity, self.client)
        logger.info("master: stopped")


def child_identity(pid: int, nonce: str) -> str:
    """Made by the master too, so it knows a child's identity even if it dies at once."""
    return f"{socket.gethostname()}:{pid}:{nonce}"


# -- small Redis steps, on the master's client (short timeouts) ------------------------------
