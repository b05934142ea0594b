"""The worker loop of one identity: fetch -> execute -> settle, one job at a time.

A prefork child runs this loop unchanged; so does ``python -m cogworker.worker MODULE``
(see ``cogworker.runner``). It has no signal handling of its own: whoever owns it calls
``stop()``, ``quiet()`` or ``hard_stop()``.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from . import fate, hooks, redis_errors, settlement, stats, unique  # noqa: F401 (unique, stats: hook subscribers)
from .config import Config, get_config, logger
from .errors import Fenced, JobTimeout
from .fetch import Ahead, Fetcher, Work, check_redis_version, jid_of
from .jobs import Job, default_backoff, error_message, resolve
from .middleware import server_middleware
from .policy import Outage

RECONCILE_INTERVAL = 5.0
STATS_INTERVAL = 1.0
ACK_ATTEMPTS = 3
FENCED_EXIT = 75  # a process declared dead leaves with this (EX_TEMPFAIL: restart it, under a new identity)


class HardStop(BaseException):
    """Raised inside a running job to abandon it (stop-now): it is handed back, not failed."""


def new_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


class Reporter:
    """What the loop tells its owner. The default writes stats to Redis itself; a prefork
    child's reporter sends everything to the master over its pipe."""

    # Hand the counts over as soon as the queues run dry, not only at the once-a-second
    # flush: for an owner that batches the writes itself (the prefork master). This one
    # writes to Redis, so it keeps to once a second.
    stats_when_idle = False

    def __init__(self, config: Config) -> None:
        self.config = config
        self.buffer: dict[str, Any] | None = None

    def ready(self) -> None:
        """The first fetch was made: the process booted fine."""

    def started(self, work: Work, payload: dict[str, Any], deadline: float | None) -> None:
        """A job began to run."""

    def finished(self, work: Work, outcome: fate.Outcome) -> None:
        """A job's run ended: ``Succeeded`` (its ack is due), ``Raised`` (filed, or
        being filed as an interruption) or anything else (it never ran: handed back)."""

    def pending(self, raw: bytes, how: fate.Decision) -> None:
        """A settlement could not be written; the worker keeps retrying it."""

    def settled(self, raw: bytes) -> None:
        """A pending settlement went through after all."""

    def stats(self, snap: dict[str, Any]) -> None:
        """A batch of counters. Raises if it could not be delivered (the worker keeps it)."""
        stats.flush(self.config, snap)

    # Look-ahead: fetching the next job while one runs, so it starts without a round trip.
    # Only a prefork child does it: it has siblings to hand that job to when they run dry.

    def may_look_ahead(self) -> bool:
        """Asked before each job: may the next fetch go out while it runs?"""
        return False

    def looked_ahead(self, number: int, ack_jid: str | None) -> None:
        """Look-ahead fetch ``number`` is about to go out, the ack of ``ack_jid`` riding
        on it; 0: it came back (or never went)."""

    def claim(self, work: Work | None, fetcher: Fetcher) -> Work | None:
        """The look-ahead came back with ``work``: returns it if it is still ours to start
        (a sibling may have taken it meanwhile; ``fetcher`` asks Redis when in doubt)."""
        return work

    def waiting(self, fetcher: Fetcher) -> Work | None:
        """Every queue is empty: a job taken over from a sibling, or None (then the loop
        blocks on the queues)."""
        return None

    # Liveness, as another process sees it (a prefork child's master beats for it).

    def vouched_at(self) -> float:
        """``heartbeat.clock()`` when another process last refreshed this identity's beat
        and found it not fenced; read before ``told_fenced``."""
        return float("-inf")

    def told_fenced(self) -> bool:
        """Another process found this identity fenced (declared dead)."""
        return False


class Worker:
    """One identity, one job at a time, stoppable from outside."""

    def __init__(self, queues: list[tuple[str, int | None]], *, config: Config | None = None,
                 identity: str | None = None, reporter: Reporter | None = None,
                 max_jobs: int | None = None, block_timeout: float = 1.0,
                 should_stop: Callable[[], bool] | None = None) -> None:
        self.config = config or get_config()
        self.identity = identity or new_identity()
        self.fetcher = Fetcher(self.config, self.identity, queues, block_timeout)
        self.reporter = reporter or Reporter(self.config)
        self.max_jobs = max_jobs
        self.should_stop = should_stop
        self.ahead: Ahead | None = None  # a look-ahead fetch out, its reply unread
        self._ahead_number = 0
        self.pending = fate.Owed()
        self.current: Work | None = None
        self.ack_due: bytes | None = None  # rides on the next fetch
        self._ack_due_jid: str | None = None
        self.jobs_done = 0
        self._stopping = threading.Event()
        self._quiet = threading.Event()
        self._strays: set[bytes] = set()
        self._stats = stats.StatsBuffer()
        self._last_stats = time.monotonic()
        self._last_reconcile = time.monotonic()
        self._ran: Any = None
        self._outage = Outage(f"worker {self.identity}")
        self._fence_lock = threading.Lock()
        self._fence_logged = False

    # -- control (thread- and signal-safe: they only set flags) --------------------------

    def stop(self) -> None:
        """Finish the current job, then leave the loop."""
        self._stopping.set()

    def quiet(self) -> None:
        """Stop fetching; a running job finishes."""
        self._quiet.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set() or bool(self.should_stop and self.should_stop())

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
        logger.error("worker %s was declared dead by another process (its beat stayed unchanged for %gs): its "
                     "jobs were requeued elsewhere; leaving without acking or filing them", self.identity,
                     self.config.orphan_threshold)
        return True

    # -- the loop ------------------------------------------------------------------------

    def startup(self) -> None:
        """Checks the server and registers this identity's in-progress list before any
        fetch, so orphan recovery can find it even if this process dies at once."""
        while not self.stopping:
            try:
                client = self.config.redis()
                check_redis_version(client)
                keys = self.config.keys
                pipe = client.pipeline(transaction=False)
                pipe.sadd(keys.in_progress_identities, self.identity)
                pipe.hset(keys.last_beat, self.identity, time.time())
                try:
                    pipe.execute()
                except redis.ResponseError as exc:
                    if redis_errors.is_outage(exc):
                        raise
                    # A key of the wrong type: logged, and the worker runs anyway (orphan
                    # recovery's boot-time scan still finds this identity's list).
                    logger.error("worker %s: couldn't register (%s); running anyway", self.identity, exc)
                self._outage.ok()
                return
            except redis.RedisError as exc:
                if not redis_errors.is_outage(exc):
                    raise
                self._stopping.wait(self._redis_away(exc))  # a stop ends the backoff

    def run(self) -> None:
        self.startup()
        self.reporter.ready()  # booted: Redis answered, this identity is registered
        nxt: Work | None = None  # fetched by a look-ahead, not started
        try:
            while not self.stopping and not self.fenced:
                if self.max_jobs is not None and self.jobs_done >= self.max_jobs:
                    logger.info("worker %s: did %d jobs (max_jobs), leaving", self.identity, self.jobs_done)
                    break
                self.housekeep(holding=nxt)
                if self._quiet.is_set():
                    if nxt is not None:
                        self._give_back(nxt)
                        nxt = None
                    if self.ack_due is not None:  # quieted since: acknowledged now, not at stop
                        raw, self.ack_due = self.ack_due, None
                        self._acknowledge(raw)
                    time.sleep(0.2)
                    continue
                work, nxt = nxt or self._fetch(), None
                if work is None:
                    continue
                ahead = self._send_ahead()
                self.process(work)
                if ahead is not None:
                    nxt = self._read_ahead(ahead)
        except Fenced:
            self._leave_fenced()
        finally:
            try:
                if not self.fenced:
                    if self.ahead is not None:  # left the loop from inside a job (an exception)
                        nxt = self._read_ahead(self.ahead)
                    if nxt is not None:
                        self._give_back(nxt)  # never started: straight back to its queue
                    self.finish()
            except Fenced:
                self._leave_fenced()
            self.fetcher.close()

    def _leave_fenced(self) -> None:
        """Declared dead: what this process holds was requeued elsewhere, so it settles
        nothing (an ack or a filing would now be about someone else's copy) and leaves."""
        self.declare_fenced()
        self.pending.items.clear()
        self.ack_due = None
        self._stopping.set()

    def _send_ahead(self) -> Ahead | None:
        """The next fetch, sent before this job runs, with the last ack riding on it."""
        if self._quiet.is_set() or self.stopping:
            return None
        if self.max_jobs is not None and self.jobs_done + 1 >= self.max_jobs:
            return None
        if not self.reporter.may_look_ahead():
            return None
        self._ahead_number += 1
        ack_jid = self._ack_due_jid or (jid_of(self.ack_due) if self.ack_due else None)
        # Told first: if we die with it out, the master must know the ack may have landed.
        self.reporter.looked_ahead(self._ahead_number, ack_jid)
        try:
            self.ahead = self.fetcher.send_ahead(self._ahead_number, self.ack_due, ack_jid)
        except redis.RedisError as exc:
            logger.debug("look-ahead not sent: %s", exc)
            self.reporter.looked_ahead(0, None)
            return None  # the ack stays due; the plain fetch carries it
        self.ack_due = None
        return self.ahead

    def _read_ahead(self, ahead: Ahead) -> Work | None:
        work = None
        try:
            work = self.fetcher.read_ahead(ahead)
        except redis.exceptions.NoScriptError:
            # Scripts flushed (or a new server): it did not run, so neither did its ack.
            # Made now, while the slot still names that job for the master.
            if ahead.ack is not None:
                self._acknowledge(ahead.ack)
        except redis.RedisError as exc:
            # Unknown whether it ran: the ack is owed (LREM is idempotent) and a job it
            # may have moved is a stray that reconcile requeues.
            if ahead.ack is not None:
                self._owe(ahead.ack, fate.ACK)
            if redis_errors.is_outage(exc):
                self._redis_away(exc)  # the next plain fetch backs off
            else:
                logger.warning("worker %s: look-ahead fetch failed: %s: %s", self.identity, type(exc).__name__,
                               exc)
        finally:
            self.ahead = None
        return self.reporter.claim(work, self.fetcher)

    def _fetch(self) -> Work | None:
        try:
            work = self.fetcher.fetch(ack=self.ack_due, ack_jid=self._ack_due_jid, on_empty=self._idle)
        except redis.RedisError as exc:
            if self.ack_due is not None:
                # Unknown whether it landed; LREM is idempotent, so reconcile just repeats it.
                self._owe(self.ack_due, fate.ACK)
                self.ack_due = None
            if redis_errors.is_outage(exc):  # away, out of memory or read-only: jobs stay queued
                self._stopping.wait(self._redis_away(exc))  # a stop ends the backoff
            else:
                logger.error("worker %s: fetch failed: %s: %s", self.identity, type(exc).__name__, exc)
                time.sleep(1.0)
            return None
        self.ack_due = None
        self._outage.ok()
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

    def _redis_away(self, exc: BaseException) -> float:
        """An outage: logged once; a READONLY reply drops every connection first (the
        server is a replica now). Returns how long to back off."""
        if redis_errors.reconnect_if_readonly(self.config, exc):
            self.fetcher.close()  # the look-ahead's own connection too
        return self._outage.failed(exc)

    def housekeep(self, force: bool = False, holding: Work | None = None) -> None:
        now = time.monotonic()
        if force or now - self._last_stats >= STATS_INTERVAL:
            self._last_stats = now
            self.flush_stats()
        if force or now - self._last_reconcile >= RECONCILE_INTERVAL:
            self._last_reconcile = now
            try:
                self.reconcile(holding)
            except redis.RedisError as exc:
                logger.debug("reconcile skipped: %s", exc)

    def flush_stats(self) -> None:
        if not self._stats:
            return
        snap = self._stats.take()
        try:
            self.reporter.stats(snap)
        except redis.ResponseError as exc:
            if redis_errors.is_outage(exc):  # writes refused (OOM, READONLY): kept for later
                self._stats.merge(snap)
                logger.debug("stats not written yet: %s", exc)
                return
            # Redis ran the batch and refused part of it (a key of the wrong type): the
            # rest is written, so sending it again would count it twice.
            logger.error("stats partly not written (dropped): %s", exc)
        except Exception as exc:  # kept for the next flush: counters are never worth a job
            self._stats.merge(snap)
            logger.debug("stats not delivered yet: %s", exc)

    # -- one job -------------------------------------------------------------------------

    def process(self, work: Work) -> None:
        if self.stopping or self._quiet.is_set():
            self._give_back(work)  # fetched by a blocking call that began before the stop
            return
        payload, why = fate.parse_payload(work.raw)
        if payload is None:
            self._bury_bad_payload(work, why)
            return
        if not self._may_start(work):
            return
        self.current = work
        # What a failure around the run leaves: before the job ran, a hand-back; once it
        # ran, whatever its outcome dictates, so a bug in the bookkeeping can't re-queue
        # a job that already ran.
        outcome: fate.Outcome = fate.NeverStarted()
        timeout = payload.get("timeout")
        deadline = time.time() + float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
        self.reporter.started(work, payload, deadline)
        try:
            outcome = self.execute(work, payload)
        except HardStop:
            logger.warning("jid=%s abandoned by a stop-now; handing it back", payload["jid"])
        except Fenced:
            raise
        except Exception:
            logger.exception("bookkeeping failed around jid=%s", payload["jid"])
        finally:
            self.current = None
            if not self.fenced:
                self.settle(work, payload, outcome)
            else:
                self.reporter.finished(work, outcome)
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
        except redis.RedisError as exc:
            logger.warning("worker %s: couldn't confirm it is alive before starting jid=%s (%s); left listed",
                           self.identity, work.jid(), exc)
            return False

    def execute(self, work: Work, payload: dict[str, Any]) -> fate.Succeeded | fate.Raised:
        """Runs the job: what happened to it (it is settled by the caller)."""
        name = payload["class"]
        job: Any = None
        resolution_error: BaseException | None = None
        try:
            job = resolve(name, self.config.import_prefixes)
        except Exception as exc:
            resolution_error = exc
        if hooks.wanted("started"):
            hooks.fire("started", payload, queue=work.queue, identity=self.identity, config=self.config)
        logger.debug("start: %s jid=%s", name, payload["jid"])
        started = time.perf_counter()
        error = self.run_job(job, payload, work.queue, resolution_error)
        seconds = time.perf_counter() - started
        if error is None:
            return fate.Succeeded(seconds)
        backoff = job.backoff_for if isinstance(job, Job) else default_backoff
        return fate.Raised(error, backoff, seconds)

    def run_job(self, job: Any, payload: dict[str, Any], queue: str,
                resolution_error: BaseException | None) -> BaseException | None:
        """The job's own outcome: None, or what it (or a middleware) raised.

        A resolution failure is raised as the chain's innermost step, so every server
        middleware sees it like a perform-time error.
        """
        def perform() -> Any:
            if resolution_error is not None:
                raise resolution_error
            if isinstance(job, Job):
                return job.refuse_awaitable(job.func(*payload.get("args") or [], **payload.get("kwargs") or {}))
            return job(*payload.get("args") or [], **payload.get("kwargs") or {})

        timeout = payload.get("timeout")
        timer = _SoftTimeout(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
        try:
            if timer:
                timer.arm()
            server_middleware.invoke((job if resolution_error is None else None, payload, queue), perform)
            return None
        except HardStop:
            raise
        except BaseException as exc:  # a job's SystemExit is its failure, not ours
            return exc
        finally:
            if timer:
                timer.disarm()

    # -- settlement ------------------------------------------------------------------------

    def settle(self, work: Work, payload: dict[str, Any], outcome: fate.Outcome) -> None:
        """Decides the job's fate from its outcome and writes it (an ack rides on the
        next fetch when there is one)."""
        if isinstance(outcome, (fate.Succeeded, fate.Raised)):
            self._stats.record(payload["class"], isinstance(outcome, fate.Succeeded), outcome.duration * 1000)
        if isinstance(outcome, fate.Succeeded):
            # Its success is final (only the ack is left): the locks go before anything else.
            if hooks.wanted("succeeded"):
                hooks.fire("succeeded", payload, queue=work.queue, identity=self.identity,
                           duration=outcome.duration, config=self.config)
            self.reporter.finished(work, outcome)
            self._ack_later(work, payload)
        elif isinstance(outcome, fate.Raised):
            filed = self._file_failure(work, payload, outcome)
            self.reporter.finished(work, outcome)
            if not filed:
                self.interrupt(work, outcome.error)
        else:
            self.reporter.finished(work, outcome)
            self._give_back(work)

    def _ack_later(self, work: Work, payload: dict[str, Any]) -> None:
        # Quiet or stopping: no next fetch for the ack to ride on.
        if self.stopping or self._quiet.is_set() or self.ack_due is not None:
            self._acknowledge(work.raw)
        else:
            self.ack_due = work.raw
            self._ack_due_jid = payload["jid"]

    def _file_failure(self, work: Work, payload: dict[str, Any], outcome: fate.Raised) -> bool:
        """Files the run's failure into retry or dead; False if that failed (then it is
        filed as an interruption)."""
        error = outcome.error
        logger.warning("fail: %s jid=%s: %s: %s", payload["class"], payload["jid"],
                       type(error).__name__, error_message(error))
        try:
            decision = fate.decide(self.config, payload, outcome)
            assert isinstance(decision, fate.File)
            filed = settlement.apply(self.fetcher, work.raw, decision, payload, queue=work.queue, error=error,
                                     duration=outcome.duration)
        except Fenced:
            raise
        except Exception as exc:
            logger.error("couldn't record the failure of jid=%s: %s: %s", payload["jid"],
                         type(exc).__name__, exc)
            return False
        if not filed:
            logger.warning("jid=%s was no longer in progress when its failure was filed", payload["jid"])
        return True

    def _acknowledge(self, raw: bytes) -> None:
        """A failed ack leaves a finished job on the list: retried briefly, then owed."""
        for attempt in range(1, ACK_ATTEMPTS + 1):
            try:
                self.fetcher.acknowledge(raw)
                return
            except redis.RedisError as exc:
                if attempt == ACK_ATTEMPTS:
                    logger.error("couldn't acknowledge finished jid=%s after %d attempts (will retry): %s",
                                 jid_of(raw), attempt, exc)
                    self._owe(raw, fate.ACK)
                    return
                time.sleep(0.1 * attempt)

    def _give_back(self, work: Work) -> None:
        """Only for a job that hasn't run. If even this fails, it stays on the list, where
        reconcile (or the owner's shutdown, or orphan recovery) requeues it later."""
        try:
            settlement.apply(self.fetcher, work.raw, fate.GIVE_BACK, queue=work.queue)
        except redis.RedisError as exc:
            logger.error("couldn't hand back jid=%s (left in progress): %s", work.jid(), exc)

    def interrupt(self, work: Work, error: BaseException) -> None:
        """Ran and failed, but filing that failed: into retry after 30 s x count, or dead."""
        decision = fate.decide(self.config, work.raw, fate.FilingFailed(error))
        assert isinstance(decision, fate.File)
        try:
            settlement.apply(self.fetcher, work.raw, decision, queue=work.queue, error=error)
        except Fenced:
            raise
        except Exception as exc:
            logger.error("couldn't file the interruption of jid=%s (will retry): %s", work.jid(), exc)
            self._owe(work.raw, decision)
            return
        where = f"retrying in {decision.delay:.0f}s" if decision.retrying else "moved to dead"
        logger.error("couldn't record the failure of jid=%s (%s); %s", work.jid(), type(error).__name__, where)

    def _owe(self, raw: bytes, decision: fate.Decision) -> None:
        self.pending.add(raw, decision)
        self.reporter.pending(raw, decision)

    def _bury_bad_payload(self, work: Work, why: str) -> None:
        logger.error("unreadable job on queue %s moved to dead: %s", work.queue, why)
        decision = fate.decide(self.config, work.raw, fate.Unreadable(why))
        try:
            settlement.apply(self.fetcher, work.raw, decision, queue=work.queue)
        except redis.RedisError:
            self._owe(work.raw, decision)

    def settle_pending(self, listed: set[bytes] | None = None) -> None:
        """Finishes each owed settlement that can be finished now; one that fails stays."""
        for raw, how in list(self.pending.items.items()):
            if listed is not None and raw not in listed:
                self.pending.pop(raw)  # no longer ours (already settled, or requeued by recovery)
                self.reporter.settled(raw)
                continue
            try:
                settlement.apply(self.fetcher, raw, how)
            except redis.RedisError as exc:
                logger.debug("still couldn't settle jid=%s: %s", jid_of(raw), exc)
                continue
            self.pending.pop(raw)
            self.reporter.settled(raw)

    def reconcile(self, holding: Work | None = None) -> None:
        """This identity's entries that nothing is running: owed settlements are finished,
        never re-run; any other stray is requeued once seen on two passes in a row (the
        second look rules out a job caught between fetch and start). ``holding``: a job
        fetched ahead, about to start."""
        listed = self.fetcher.listed()
        running = {w.raw for w in (self.current, holding) if w is not None}
        if self.ack_due is not None:
            running.add(self.ack_due)
        self.settle_pending(set(listed))
        strays = {raw for raw in listed if raw not in running and raw not in self.pending}
        for raw in strays & self._strays:
            if self.fetcher.give_back(raw):
                logger.warning("requeued stray in-progress job jid=%s", jid_of(raw))
        self._strays = strays - self._strays

    def finish(self) -> None:
        """Leaving the loop: settle what is owed, hand over what can't be settled."""
        if self.ack_due is not None:
            raw, self.ack_due = self.ack_due, None
            self._acknowledge(raw)
        try:
            self.settle_pending(set(self.fetcher.listed()))
        except redis.RedisError:
            pass
        for raw, filing in self.pending.filings().items():
            try:
                settlement.apply(self.fetcher, raw, fate.Park(filing.record()))
                self.pending.pop(raw)
                self.reporter.settled(raw)
            except redis.RedisError as exc:
                logger.error("couldn't hand over the unsettled failure of jid=%s: %s", jid_of(raw), exc)
        self.flush_stats()


class _SoftTimeout:
    """Raises JobTimeout inside the job at its deadline (SIGALRM: main thread only)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.usable = threading.current_thread() is threading.main_thread()
        self._previous: Any = None

    def arm(self) -> None:
        if not self.usable:
            return
        seconds = self.seconds

        def expire(signum: int, frame: Any) -> None:
            raise JobTimeout(f"job ran past its timeout of {seconds:g}s")

        self._previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        if not self.usable:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)


def main(argv: list[str] | None = None) -> None:
    """``python -m cogworker.worker MODULE``: the whole system in one process."""
    from .runner import main as run_main

    run_main(argv)


if __name__ == "__main__":
    main()
