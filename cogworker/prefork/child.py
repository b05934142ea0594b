"""A prefork child: the core worker loop, reporting to the master over its pipe.

Its watchdog thread notices its master's death (parent pid changes) within ~0.2 s: then
it stops fetching, beats for itself, and finishes or hands back its job within
``--timeout``. While the master lives but stops beating (frozen), the watchdog beats for
the child, so a working child never looks dead. A child declared dead elsewhere (fenced:
its list was requeued) leaves at once with ``FENCED_EXIT``, settling nothing.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from setproctitle import setproctitle

from .. import store
from ..config import Config, logger
from ..core import current as current_job
from ..core import heartbeat, hooks, tracing
from ..core.heartbeat import clock
from ..engine import execute
from ..engine.effects import builtin_subscribers
from ..engine.loop import FENCED_EXIT, Worker
from ..errors import Fenced
from ..launch import logs as logsetup
from .flight_child import FlightReporter, flight_worker
from .flight_slots import FlightSlots
from .pipe import TitledReporter
from .slots import Slots

WATCH_INTERVAL = 0.2


def shutdown_grace(timeout: float) -> float:
    """How long before the master's kill ``Shutdown`` is raised in a running job: time for
    its ``finally:`` blocks and the give-back, at most 3 s, half the timeout when short."""
    return min(3.0, timeout / 2)


METRICS_INTERVAL = 1.0


class Child:
    def __init__(
        self,
        index: int,
        config: Config,
        conn: Connection,
        slots: Slots,
        queues: list[tuple[str, int | None]],
        master_pid: int,
        timeout: float,
        max_jobs: int | None,
        identity: str,
        lookahead: bool = True,
        flights: FlightSlots | None = None,
    ) -> None:
        self.index = index
        self.config = config
        self.conn = conn
        self.master_pid = master_pid
        self.timeout = timeout
        self.identity = identity
        self.reporter: TitledReporter
        self.worker: Worker
        if flights is None:
            self.reporter = TitledReporter(config, conn, slots, index, lookahead)
            self.worker = Worker(
                queues, config=config, identity=self.identity, reporter=self.reporter, max_jobs=max_jobs
            )
        else:  # --concurrency above 1
            reporter = FlightReporter(config, conn, slots, index, flights, flights.per_child)
            self.reporter = reporter
            self.worker = flight_worker(queues, config, identity, reporter, max_jobs)
        self.reporter.slot.begin(identity)
        self.queues = [q for q, _ in queues]
        self.started_at = time.time()
        self._shutdown_at: float | None = None  # clock() when Shutdown is raised in a running job
        self._shutdown_sent = False

    def install_signals(self) -> None:
        """Replaces what was inherited from the master: a TERM/INT (from the master, or
        from the platform to the whole group at once) means finish the job and leave."""
        signal.set_wakeup_fd(-1)

        def stop(signum: int, frame: Any) -> None:
            self.reporter.stopping = True
            self.reporter.title("stopping")
            self.worker.stop()
            self.arm_shutdown()

        def quiet(signum: int, frame: Any) -> None:
            self.worker.quiet()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTSTP, quiet)
        for sig in (signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)
        signal.signal(signal.SIGUSR1, self._deadline)  # sent by our own watchdog only (_shutdown_due)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        # The master forked with these blocked (see Master.spawn_child); ours are in place now.
        signal.pthread_sigmask(signal.SIG_SETMASK, set())

    def arm_shutdown(self) -> None:
        """The master kills this child ``--timeout`` after it asked it to stop: a short grace
        before that, ``Shutdown`` is raised inside a job still running (SIGUSR1 to ourselves,
        handled in the main thread, where the job runs), so its ``finally:`` blocks run and it
        is handed back, not failed (docs/architecture.md#fate-table). Called in the TERM
        handler: only a float is set here (starting a thread there could wait on a lock the
        interrupted main thread holds); the watchdog thread sends the signal when it is due."""
        if self._shutdown_at is None:
            self._shutdown_at = clock() + max(0.0, self.timeout - shutdown_grace(self.timeout))

    def _shutdown_due(self, now: float) -> None:
        """In the watchdog: past the shutdown deadline, SIGUSR1 once (``install_signals``)."""
        if self._shutdown_at is not None and not self._shutdown_sent and now >= self._shutdown_at:
            self._shutdown_sent = True
            os.kill(os.getpid(), signal.SIGUSR1)

    def _deadline(self, signum: int, frame: Any) -> None:
        grace = shutdown_grace(self.timeout)
        execute.shutdown_now(
            f"the worker is shutting down: still running {self.timeout:g}s after the stop, killed in {grace:g}s"
        )

    def run(self) -> int:
        self.install_signals()
        self.reporter.title("idle")
        threading.Thread(target=self.watch_master, name="cogworker-watchdog", daemon=True).start()
        self.worker.run()
        return FENCED_EXIT if self.worker.fenced else 0

    # -- the master's death ------------------------------------------------------------------

    def watch_master(self) -> None:
        hb = self.config.heartbeat_interval
        next_beat = next_metrics = 0.0
        told = ""
        while os.getppid() == self.master_pid:
            if self.reporter.told_fenced():
                self.leave_fenced()
            cancelled = self.reporter.slot.slots.cancelled(self.index)
            if cancelled != told:  # the master heard on its beat that this jid was cancelled
                told = cancelled
                if cancelled:
                    current_job.tell_cancelled(cancelled)
            now = clock()
            self._shutdown_due(now)
            # The master's beat covers us; a frozen master's doesn't, and the child's own
            # fetches don't come while a long job runs.
            if now - self.reporter.vouched_at() > 2 * hb and now >= next_beat:
                next_beat = now + hb
                self.beat_self()
            if now >= next_metrics:  # --metrics-port: this child's counts, gathered (docs/architecture.md#metrics)
                next_metrics = now + METRICS_INTERVAL
                self.reporter.ship_metrics()
            time.sleep(WATCH_INTERVAL)
        logger.error(
            "child %d: master %d is gone; finishing up within %.0fs", self.index, self.master_pid, self.timeout
        )
        self.reporter.orphaned = True
        self.reporter.stopping = True
        self.worker.stop()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if clock() >= next_beat:
                # Nobody beats for us any more: without this, orphan recovery elsewhere
                # would take our list (and run our job twice) while we still run it.
                self.beat_self()
                next_beat = clock() + hb
            time.sleep(WATCH_INTERVAL)
        # Still running after --timeout: hand the job back and leave at once, so it never
        # runs twice concurrently (the main thread's job dies with this process).
        self.abandon()
        os._exit(0)

    def beat_self(self) -> None:
        current = self.worker.current
        flying = len(getattr(self.worker, "flying", ()))  # --concurrency above 1: jobs in flight
        record = heartbeat.BeatRecord(
            self.identity,
            "child",
            os.getpid(),
            self.queues,
            self.started_at,
            busy=flying or int(current is not None),
            running={"jid": current.jid(), "queue": current.queue} if current else None,
            extra={"ppid": os.getppid()},
        )
        sent = clock()
        try:
            told = heartbeat.beat(self.config, [record])
        except store.RedisError:
            return
        for jid in told.cancelled:  # the master is away: heard here instead
            current_job.tell_cancelled(jid)
        if told.refused:
            self.leave_fenced()
        self.worker.fetcher.vouch(sent)

    def leave_fenced(self) -> NoReturn:
        """Declared dead: its jobs already run elsewhere, and every second more risks a
        second concurrent run of the one in hand. Nothing is settled; the master replaces
        this child under a new identity."""
        self.worker.declare_fenced()
        os._exit(FENCED_EXIT)

    def abandon(self) -> None:
        """The master is gone and the job outran ``--timeout``: what wasn't started goes
        back to its queue, a finished job whose ack is owed (or riding on a fetch) is
        dropped, an owed filing parked (``fate.Leaving``); then this process exits."""
        worker = self.worker
        try:
            worker.park_owed()
            moved = worker.requeue_rest(riding=worker.riding_acks())
            logger.error("child %d: handed back %d job(s) after the master died", self.index, moved)
            heartbeat.deregister(self.config, self.identity)
        except Fenced:
            self.leave_fenced()
        except store.RedisError as exc:
            logger.error("child %d: couldn't hand back its job (orphan recovery will): %s", self.index, exc)


def child_main(
    index: int,
    config: Config,
    conn: Connection,
    slots: Slots,
    queues: list[tuple[str, int | None]],
    master_pid: int,
    timeout: float,
    max_jobs: int | None,
    identity: str,
    lookahead: bool = True,
    flights: FlightSlots | None = None,
) -> None:
    """Runs in the forked process; never returns."""
    code = 1
    logsetup.set_process(f"child {index}")  # its log lines say which child (docs/architecture.md#logs)
    # A job that forks: its fork must not claim to be one of the master's children.
    os.register_at_fork(after_in_child=lambda: setproctitle(f"cogworker: child {index}'s fork (pid {os.getpid()})"))
    try:
        # What a child's jobs do besides running (engine/effects.py): inherited from the
        # master over fork, and installed here too, where the child is put together.
        hooks.install(builtin_subscribers())
        child = Child(index, config, conn, slots, queues, master_pid, timeout, max_jobs, identity, lookahead, flights)
        code = child.run()
        if child.reporter.orphaned and code != FENCED_EXIT:
            # The master can't clean up after us: leave nothing behind.
            try:
                heartbeat.deregister(config, child.identity)
            except store.RedisError:
                pass
        if code == 0:
            # What a normal exit runs and os._exit skips: the app's atexit handlers
            # (an error reporter's flush, a pool's close). The title says so to the master.
            setproctitle(f"cogworker: child {index} stopping: exit handlers")
            atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            conn.close()
        except OSError:
            pass
        tracing.flush()  # os._exit runs no atexit: a batching span processor would lose its last spans
        os._exit(code)
