"""The worker loop of one identity: fetch -> execute -> settle, one job at a time.

Fetching is a strategy (``engine/lookahead.py``: plain, or with the next fetch sent while a job
runs); running one job is ``engine/execute.py``; settling its outcome is ``engine/ledger.py``. A
prefork child runs this loop unchanged; so does ``python -m cogworker.worker MODULE``
(``worker/runner.py``). It has no signal handling of its own: whoever owns it calls ``stop()``,
``quiet()`` or ``hard_stop()``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import routing, store
from ..config import Config, get_config, logger
from ..core import fate, hooks
from ..core.limits import Limit, LimitKeyError
from ..core.registry import registry
from ..errors import Fenced
from ..lifecycle import history
from ..store import errors as redis_errors
from ..store import guard
from ..store.guard import Outage
from .effects import builtin_subscribers
from .execute import HardStop, execute
from .fetch.fetcher import Fetcher, Work, check_redis_version
from .ledger import ACK_ATTEMPTS, Settling
from .limiting import Limiter, limits_of
from .lookahead import LookAhead, Plain
from .reporter import Reporter

__all__ = ["ACK_ATTEMPTS", "FENCED_EXIT", "HardStop", "Reporter", "Worker", "new_identity"]

RECONCILE_INTERVAL = 5.0
STATS_INTERVAL = 1.0
FENCED_EXIT = 75  # a process declared dead leaves with this (EX_TEMPFAIL: restart it, under a new identity)


def new_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


class Worker(Settling):
    """One identity, one job at a time, stoppable from outside. ``lookahead``: the next
    fetch may go out while a job runs (when the reporter allows it: a prefork child
    with siblings); the single-process runner passes False."""

    def __init__(
        self,
        queues: list[tuple[str, int | None]],
        *,
        config: Config | None = None,
        identity: str | None = None,
        reporter: Reporter | None = None,
        max_jobs: int | None = None,
        block_timeout: float = 1.0,
        should_stop: Callable[[], bool] | None = None,
        lookahead: bool = True,
        subscribers: Iterable[hooks.Subscription] | None = None,
    ) -> None:
        # What its jobs' transitions do besides (unique locks, stats, history...): the
        # built-in list unless the process put together its own (engine/effects.py).
        hooks.install(builtin_subscribers() if subscribers is None else subscribers)
        config = config or get_config()
        identity = identity or new_identity()
        super().__init__(
            config,
            identity,
            Fetcher(config, identity, queues, block_timeout),
            reporter or Reporter(config),
            should_stop,
        )
        self.max_jobs = max_jobs
        self.fetching = LookAhead(self) if lookahead else Plain(self)
        self.jobs_done = 0
        self._last_stats = time.monotonic()
        # Its job status/history is buffered by the history subscriber, into this one (written by a thread).
        self._status = history.buffering(self.identity)
        self._last_reconcile = time.monotonic()
        # The process's one outage log (its housekeeping shares it: cogworker.worker.runner).
        self.outage = Outage(f"worker {self.identity}")
        self._fence_lock = threading.Lock()
        self._fence_logged = False
        self.limiter = Limiter(self.config, self.identity)

    # -- control (thread- and signal-safe: they set flags; a stop also ends an idle wait) --

    def stop(self) -> None:
        """Finish the current job, then leave the loop; idle, leave at once.

        Signal-safe. A handler runs in the main thread between two bytecodes, perhaps
        while that thread holds the stop Event's own lock (inside its ``wait``): setting the
        Event there would wait for that lock forever (a child stuck "stopping" in a futex
        wait). So in the main thread this only raises a flag, which ``stopping`` and
        ``pause`` read; from another thread it sets the Event at once."""
        self._stop_asked = True
        if threading.current_thread() is not threading.main_thread():
            self._stopping.set()
        self.fetcher.wake_wait.stop()

    def quiet(self) -> None:
        """Stop fetching; a running job finishes."""
        self._quiet.set()

    # -- an iterable job's host (core/iteration.py): asked at its every yield ---------------

    def pause_due(self) -> bool:
        """Should a running iterable job stop at this yield and go back on its queue: a
        stop (TERM, HUP, --max-memory, a deploy), quiet (TSTP), or --max-jobs reached (its
        items count as jobs). Its next item starts as a job does (``_may_start``): while
        the lease holds, or once ``confirm`` says this identity wasn't declared dead
        (``Fenced`` goes up: the job's run ends, settling nothing); if Redis can't say, it
        stops here."""
        if self.stopping or self._quiet.is_set() or self.recycle_due():
            return True
        vouched = self.reporter.vouched_at()
        if self.fenced or self.reporter.told_fenced():
            self.fetcher.fenced = True
            raise Fenced(self.identity)
        if self.fetcher.lease_left(vouched) > 0:
            return False
        try:
            self.fetcher.confirm()
        except store.RedisError as exc:
            logger.warning(
                "worker %s: couldn't confirm it is alive between two items (%s); stopping the job", self.identity, exc
            )
            return True
        return False

    def recycle_due(self) -> bool:
        return self.max_jobs is not None and self.jobs_done + self.in_flight() >= self.max_jobs

    def in_flight(self) -> int:
        return 1 if self.current is not None else 0

    def count_item(self) -> None:
        """An item of the iterable job this thread runs (the only one: one job at a time)."""
        self.jobs_done += 1

    @property
    def busy(self) -> bool:
        return self.current is not None

    @property
    def fenced(self) -> bool:
        return self.fetcher.fenced

    def declare_fenced(self) -> bool:
        """Logs, once per process whichever thread learns it first, that this identity was
        declared dead; True the first time."""
        with self._fence_lock:
            if self._fence_logged:
                return False
            self._fence_logged = True
        self.fetcher.fenced = True
        logger.error(
            "worker %s was declared dead by another process (its beat stayed unchanged for %gs): its "
            "jobs were requeued elsewhere; leaving without acking or filing them",
            self.identity,
            self.config.orphan_threshold,
        )
        return True

    # -- the loop ------------------------------------------------------------------------

    def startup(self) -> None:
        """Checks the server and registers this identity's in-progress list before any
        fetch, so orphan recovery can find it even if this process dies at once."""
        while not self.stopping:
            try:
                check_redis_version(self.config.redis())
                self._register()
                routing.announce(self.config)  # a split layout: the faces find this part in the fleet's registry
                self.outage.ok()
                return
            except store.RedisError as exc:
                if not redis_errors.is_outage(exc):
                    raise
                self.pause(self.redis_away(exc))  # a stop ends the backoff

    def _register(self) -> None:
        keys = self.config.keys
        pipe = store.pipeline(self.config.redis())
        pipe.sadd(keys.in_progress_identities, self.identity)
        pipe.hset(keys.last_beat, self.identity, time.time())
        try:
            pipe.execute()
        except store.ResponseError as exc:
            if redis_errors.is_outage(exc):
                raise
            # A key of the wrong type: logged, and the worker runs anyway (orphan
            # recovery's boot-time scan still finds this identity's list).
            logger.error("worker %s: couldn't register (%s); running anyway", self.identity, exc)

    def run(self) -> None:
        self.startup()
        self.reporter.ready()  # booted: Redis answered, this identity is registered
        self._status.start(self.config)
        try:
            while self._going_on():
                self.housekeep(holding=self.fetching.holding)
                if self._quiet.is_set():  # (the property, inline: asked per job)
                    self._stay_quiet()
                    continue
                work = self.fetching.next()
                if work is None:
                    continue
                self.fetching.before_run()  # look-ahead: the next fetch goes out now
                self.process(work)
                self.fetching.after_run()  # ... and is read now
        except Fenced:
            self._leave_fenced()
        finally:
            self._leave()

    def _going_on(self) -> bool:
        if self.stopping or self.fenced:
            return False
        if self.max_jobs is not None and self.jobs_done >= self.max_jobs:
            logger.info("worker %s: did %d jobs (max_jobs), leaving", self.identity, self.jobs_done)
            return False
        return True

    def _stay_quiet(self) -> None:
        self.fetching.give_back()
        if self.ack_due is not None:  # quieted since: acknowledged now, not at stop
            raw, self.ack_due = self.ack_due, None
            self.acknowledge(raw)
        self.pause(0.2)  # a stop ends it

    def _leave(self) -> None:
        try:
            if not self.fenced:
                self.fetching.leave()  # a job fetched ahead, never started: straight back to its queue
                self.finish()
        except Fenced:
            self._leave_fenced()
        self._status.stop(self.config)
        self.fetcher.close()

    def riding_acks(self) -> tuple[bytes | None, ...]:
        """Acks that may or may not have landed (due, or riding on a fetch): what a
        leaving process drops rather than requeues (``requeue_rest``)."""
        return (self.ack_due, *self.fetching.riding_acks())

    def _leave_fenced(self) -> None:
        """Declared dead: what this process holds was requeued elsewhere, so it settles
        nothing (an ack or a filing would now be about someone else's copy) and leaves."""
        self.declare_fenced()
        self.pending.items.clear()
        self.ack_due = None
        self._stopping.set()

    def fetch(self) -> Work | None:
        """One job (the ack due riding on the fetch), or None."""
        try:
            work = self.fetcher.fetch(ack=self.ack_due, ack_jid=self.ack_due_jid, on_empty=self._idle)
        except store.RedisError as exc:
            if self.ack_due is not None:
                # Unknown whether it landed; LREM is idempotent, so reconcile just repeats it.
                self.owe(self.ack_due, fate.ACK)
                self.ack_due = None
            if redis_errors.is_outage(exc):  # away, out of memory or read-only: jobs stay queued
                self.pause(self.redis_away(exc))  # a stop ends the backoff
            else:
                logger.error("worker %s: fetch failed: %s: %s", self.identity, type(exc).__name__, exc)
                time.sleep(1.0)
            return None
        self.ack_due = None
        self.outage.ok()
        return work

    def _idle(self) -> Work | None:
        """Every queue is empty (the last job's ack has landed). A prefork child's stats go
        to the master now, not up to a second or a blocking fetch later, so the counters
        are current soon after the workers go idle. Then a job from elsewhere, if the
        owner has one (a sibling's look-ahead job)."""
        if self.reporter.stats_when_idle:
            self.flush_stats()
            self._last_stats = time.monotonic()
        return self.reporter.waiting(self.fetcher)

    def jobs_left(self) -> int | None:
        return None if self.max_jobs is None else self.max_jobs - self.jobs_done

    def later(self, call: Any) -> None:
        self.fetching.ride(call)

    def redis_away(self, exc: BaseException) -> float:
        """An outage: logged once; a READONLY reply drops every connection first (the
        server is a replica now). Returns how long to back off."""
        if redis_errors.reconnect_if_readonly(self.config, exc):
            self.fetcher.close()  # the look-ahead's own connection too
        return self.outage.failed(exc)

    def housekeep(self, force: bool = False, holding: Callable[[], Iterable[bytes]] = tuple) -> None:
        """``holding``: what the fetch strategy holds, asked only when reconcile runs (not per job)."""
        now = time.monotonic()
        if force or now - self._last_stats >= STATS_INTERVAL:
            self._last_stats = now
            self.flush_stats()
        self.release_owed_slots(force=False)
        if force or now - self._last_reconcile >= RECONCILE_INTERVAL:
            self._last_reconcile = now
            try:
                self.limiter.release_unsure()
                self.reconcile(holding())
            except store.RedisError as exc:  # skipped this time (``Fenced`` goes up: the loop leaves)
                guard.handle(f"worker {self.identity}: reconcile", exc)

    def release_owed_slots(self, force: bool) -> None:
        """Limit slots owed since an outage (``Limiter.unsure``) sent again: at most once a
        second from housekeeping, and before any job starts (``force``), so a job that may
        run long can't hold back a slot the last one kept. Owed still on a Redis error
        (``Fenced`` goes up)."""
        if not self.limiter.unsure:
            return
        try:
            if force:
                self.limiter.release_unsure()
            else:
                self.limiter.release_unsure_due()
        except store.RedisError as exc:
            guard.handle(f"worker {self.identity}: limit release", exc)

    def flush_stats(self) -> None:
        if not self._stats:
            return
        snap = self._stats.take()
        try:
            self.reporter.stats(snap)
        except Exception as exc:  # counters are never worth a job: kept for the next flush, or dropped (below)
            if isinstance(exc, store.ResponseError) and not redis_errors.is_outage(exc):
                # Redis ran the pipeline and refused part of it (a key of the wrong type): the
                # rest is written, so sending it again would count it twice.
                logger.error("stats partly not written (dropped): %s", exc)
                return
            self._stats.merge(snap)
            logger.debug("stats not delivered yet: %s", exc)

    # -- one job -------------------------------------------------------------------------

    def admit(self, work: Work) -> dict[str, Any] | None:
        """The job's payload if it may start now; else None, the job already handed back
        (stopping), buried (unreadable) or dropped (taken by a sibling)."""
        if self.stopping or self._quiet.is_set():
            self.hand_back(work)  # fetched by a blocking call that began before the stop
            return None
        payload, why = fate.parse_payload(work.raw)
        if payload is None:
            self.bury_bad_payload(work, why)
            return None
        if not self._may_start(work):
            return None
        expires_at = payload.get("expires_at")
        if expires_at is not None and time.time() >= expires_at:  # waited too long: not run
            self.settle(work, payload, fate.Expired(expires_at))
            return None
        self.release_owed_slots(force=True)
        limits = limits_of(payload)
        if limits and not self._within_limits(work, payload, limits):
            return None
        return payload

    def _within_limits(self, work: Work, payload: dict[str, Any], limits: tuple[Limit, ...]) -> bool:
        """Takes the job's limit slots (docs/architecture.md#limits); False: parked over a
        limit, failed (a key that names no limiter), or left listed (Redis couldn't say)."""
        try:
            said = self.limiter.acquire(work.raw, payload, limits)
        except LimitKeyError as exc:  # failed as the job's own error (logged as every failure), unrun
            self.settle(work, payload, fate.Raised(exc, registry[payload["class"]].backoff_for, 0.0))
            return False
        except store.RedisError as exc:  # (Fenced goes up: the loop leaves)
            logger.warning(
                "worker %s: couldn't check the limits of jid=%s (%s); left listed", self.identity, payload["jid"], exc
            )
            return False
        return said.admitted

    def release_limits(self, work: Work) -> None:
        """The job's concurrency slots back, before its ack can be written."""
        try:
            self.limiter.release(work.raw)
        except Fenced:
            self._leave_fenced()

    def process(self, work: Work) -> None:
        payload = self.admit(work)
        if payload is None:
            return
        self.current = work
        # What a failure around the run leaves: before the job ran, a hand-back; once it
        # ran, whatever its outcome dictates, so a bug in the bookkeeping can't re-queue
        # a job that already ran.
        outcome: fate.Outcome = fate.NEVER_STARTED
        self.reporter.started(work, payload)
        try:
            outcome = execute(self.config, self.identity, work.queue, payload, self)
        except HardStop:
            logger.warning("jid=%s abandoned by a stop-now; handing it back", payload["jid"])
        except Fenced:
            raise
        except Exception:  # a bug in the bookkeeping around the run: logged; the outcome stands
            logger.exception("bookkeeping failed around jid=%s", payload["jid"])
        finally:
            self.current = None
            if self.limiter.held and not self.fenced:
                self.release_limits(work)
            if not self.fenced:
                self.settle(work, payload, outcome)
            else:  # (an iterable job's checkpoint can be the first to learn it)
                self.report_unsettled(work, payload, outcome)
                self.declare_fenced()
            self.jobs_done += 1

    def _may_start(self, work: Work) -> bool:
        """Raises ``Fenced`` if this identity was declared dead. Free while its lease holds
        (its own scripts, or its master's beat, refreshed its beat lately); one round trip
        when the lease ran out (a freeze, or a long job with nobody beating for it). False
        if Redis can't say: the job stays listed, unstarted, and reconcile hands it back."""
        vouched = self.reporter.vouched_at()
        if self.reporter.told_fenced():
            self.fetcher.fenced = True
            raise Fenced(self.identity)
        if self.fetcher.lease_left(vouched) > 0:
            return True
        try:
            self.fetcher.confirm()
            return True
        except store.RedisError as exc:
            logger.warning(
                "worker %s: couldn't confirm it is alive before starting jid=%s (%s); left listed",
                self.identity,
                work.jid(),
                exc,
            )
            return False
