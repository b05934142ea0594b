"""The master's children bookkeeping: fork, stop, kill, reap, the rolling HUP restart,
trimming to the target, the boot backoff, and what each child runs (its slot, its pipe).
A mixin of ``Master``: the state it reads and writes is the master's (declared below)."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import psutil

from ..config import Config, logger
from ..core import fate, heartbeat
from ..core.inprogress import InProgressList
from ..errors import Fenced
from ..lifecycle import stats
from . import flight_slots
from .child import child_main
from .flight_slots import FlightSlots
from .inbox import FORWARDED, SignalInbox
from .pipe import make_pipe
from .shards import Shard, next_shard, spare
from .siblings import with_looked_ahead
from .slots import ACK_DUE, RUNNING, Slots, SlotState

# A child asked to leave leaves at once when it runs no job (a stop cuts its idle wait
# short, cogworker/wakewait.py). One with no job still there after IDLE_LEAVE_GRACE is
# killed if Redis doesn't answer (it is stuck in a Redis call), else after
# IDLE_EXIT_GRACE (its exit handlers, say an error reporter's flush, had their time).
# Nothing of it is lost either way: its list is requeued, what it owed settled here.
IDLE_LEAVE_GRACE = 0.5
IDLE_EXIT_GRACE = 5.0


@dataclass
class ChildState:
    index: int
    pid: int
    identity: str
    conn: Connection
    started_at: float = field(default_factory=time.time)
    ready: bool = False
    running: dict[str, Any] | None = None  # jid, class, queue, deadline, run_at
    flying: list[dict[str, Any]] = field(default_factory=list)  # --concurrency > 1: every job it runs
    acks: set[str] = field(default_factory=set)  # jids that ran; their ack is due or riding on a fetch
    torn: bool = False  # died mid-write of its slot: what it ran is unknown
    owes: dict[str, fate.Decision] = field(default_factory=dict)  # what it told us it still owes
    stop_reason: str | None = None  # why the master stopped it: shutdown, timeout, memory, ...
    stop_sent: bool = False
    leave_by: float = 0.0  # monotonic: asked to leave, killed if still there then (--timeout)
    idle_since: float | None = None  # asked to leave and seen with no job since then
    counted: tuple[int, int] = (0, 0)  # its slot's processed, failed counters, as last read
    rss: int = 0
    fenced_at: float | None = None  # when a beat found it declared dead (it leaves on its own)
    told: set[str] = field(default_factory=set)  # cancelled jids written to its slot (one per beat)
    exit_why: str | None = None  # why the master first wanted it gone (restart, memory, ...), for /metrics
    shard: int = 0  # which of the master's shards it works (prefork/shards.py)

class ChildrenMixin:
    # The master's state this part reads and writes (set in Master.__init__).
    s: Any  # Settings
    config: Config
    child_config: Config
    inbox: SignalInbox | None
    children: dict[int, ChildState]
    free_indexes: list[int]
    next_index: int
    target: int
    stopping: bool
    rolling: deque[int]
    rolling_current: int | None
    boot_failures: int
    next_fork_at: float
    selector: selectors.BaseSelector
    slots: Slots
    shards: list[Shard]
    flights: FlightSlots | None
    stats: stats.StatsBuffer
    metrics: Any  # MasterMetrics | None

    if TYPE_CHECKING:  # the master's, or another mixin's (never shadow them at run time)
        client: Any

        def redis_step(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any: ...
        def child_record(self, child: ChildState) -> heartbeat.ProcessRecord: ...
        def child_exited(self, child: ChildState, status: int) -> None: ...
        def redis_answers(self) -> bool: ...

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
        elif kind == "metrics":
            if self.metrics is not None:
                self.metrics.merge(msg[1])

    def refresh(self, child: ChildState) -> bool:
        """What the child runs now, from its slot. False if the slot is torn (the child
        died mid-write): then nothing is assumed about its jobs."""
        slot = self.slots.read(child.index)
        self.count_jobs(child, (slot.processed, slot.failed) if slot else self.slots.counts(child.index))
        if self.flights is not None:  # the slot's one-job fields stay empty: its entries say it all
            return self.refresh_flights(child)
        child.torn = slot is None
        if slot is None:
            child.running = None
            # What it ran is unknown, but the acks it listed still stand (a dead child's
            # slot no longer changes: read again at its reap).
            child.acks = set(self.slots.salvage(child.index))
            return False
        if slot.state == RUNNING:
            child.running = {"jid": slot.jid, "class": slot.job_class, "queue": slot.queue,
                             "deadline": slot.deadline, "run_at": slot.started_at}
        else:
            child.running = None
        child.acks = {jid for jid in (slot.ack_jid, slot.jid if slot.state == ACK_DUE else "", *slot.acks) if jid}
        return True

    def refresh_flights(self, child: ChildState) -> bool:
        """``--concurrency`` above 1: every job the child has in flight, from its entries
        (``running``: the first of them)."""
        assert self.flights is not None
        found, child.torn = self.flights.read(child.index)
        child.flying = [{"jid": f.jid, "class": f.job_class, "queue": f.queue, "deadline": f.deadline,
                         "run_at": f.started_at} for f in found if f.state == flight_slots.RUNNING]
        child.running = child.flying[0] if child.flying else None
        child.acks = {f.jid for f in found if f.state == flight_slots.ACK_DUE and f.jid}
        return not child.torn

    def reset_slot(self, index: int) -> None:
        self.slots.reset(index)
        if self.flights is not None:
            self.flights.reset(index)

    def count_jobs(self, child: ChildState, counts: tuple[int, int]) -> None:
        """What the child processed and failed since the last look, into the totals."""
        processed, failed = counts
        if processed >= child.counted[0] and failed >= child.counted[1]:
            self.stats.processed += processed - child.counted[0]
            self.stats.failed += failed - child.counted[1]
            child.counted = counts

    def return_looked_ahead(self, children: list[ChildState] | None = None) -> None:
        """Jobs the children fetched ahead and won't start now go back at once, not when
        the job in front of them ends."""
        for child in children if children is not None else list(self.children.values()):
            config = self.shards[child.shard].config

            def act(state: SlotState, config: Config = config) -> bool:
                try:
                    return InProgressList(config, state.identity, beats=False).return_ahead(
                        state.ahead, state.started) > 0
                except Fenced:
                    return False  # declared dead: its list, that job included, was requeued

            if self.redis_step("returning a looked-ahead job", with_looked_ahead, self.slots, child.index, act):
                logger.info("master: child %d's looked-ahead jobs are back on their queues", child.index)

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
        live = sorted((c for c in self.children.values() if not c.stop_sent), key=lambda c: c.index)
        for pid in spare(self.shards, [(c.pid, c.shard) for c in live], max(0, len(live) - self.target)):
            self.stop_child(self.children[pid], "scale-down")

    def fork_child(self) -> None:
        index = self.free_indexes.pop(0) if self.free_indexes else self._new_index()
        self.reset_slot(index)
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
                child_main(index, shard.child_config, writer, self.slots, shard.queues,
                           os.getppid(), self.s.timeout,
                           self.s.max_jobs, child_identity(os.getpid(), nonce), self.s.lookahead, self.flights)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        writer.close()
        child = ChildState(index, pid, child_identity(pid, nonce), reader, shard=shard.number)
        self.children[pid] = child
        self.selector.register(reader, selectors.EVENT_READ, child)
        logger.info("master: child %d (pid %d) started", index, pid)
        self.redis_step("registering a child", heartbeat.beat, shard.config, [self.child_record(child)])

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
                answers = self.redis_answers()
                if answers and now < child.idle_since + IDLE_EXIT_GRACE:
                    continue  # not stuck on Redis: still on its way out
                logger.warning("master: child %d (pid %d, %s) runs no job but hasn't left %.1fs after it was asked "
                               "to, %s (%s): killed; nothing of it is lost (its list is requeued)",
                               child.index, child.pid, child.stop_reason, now - child.idle_since,
                               "though Redis answers" if answers else "and Redis doesn't answer (stuck on it)",
                               doing(child.pid))
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


def doing(pid: int) -> str:
    """What a child that won't leave is doing, as far as the master can see: its title
    (the child sets it as it goes) and where the kernel has it waiting."""
    try:
        title = " ".join(psutil.Process(pid).cmdline()).strip()
    except psutil.Error:
        title = "?"
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = ""
    return f"its title {title!r}" + (f", waiting in the kernel in {wchan}" if wchan and wchan != "0" else "")


def child_identity(pid: int, nonce: str) -> str:
    """Made by the master too, so it knows a child's identity even if it dies at once."""
    return f"{socket.gethostname()}:{pid}:{nonce}"
