"""The worker's side of settlement: a job's outcome -> ``fate.decide`` -> applied through
the settle table (``settlement.apply``), the worker as its target (an ack held for the
next fetch, or retried until it is owed); what it still owes Redis, retried until it
lands; reconcile of its own list; what it hands over as it leaves. The base of
``Worker``: the state settlement works on is declared here, once."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from .. import store
from ..config import Config, logger
from ..core import fate, settlement
from ..core.workflow import Completion
from ..errors import Fenced
from ..lifecycle import history, stats
from ..store import guard
from ..transitions import call as script
from .fetch.fast import MARK
from .fetch.fetcher import Fetcher, Work, jid_of
from .reporter import Reporter

ACK_ATTEMPTS = 3


class Settling(ABC):
    """The worker's settlement, and the state it works on (declared here, once; the
    ``Worker`` adds the loop's own)."""

    def __init__(
        self,
        config: Config,
        identity: str,
        fetcher: Fetcher,
        reporter: Reporter,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.config = config
        self.identity = identity
        self.fetcher = fetcher
        self.reporter = reporter
        self.should_stop = should_stop
        self.pending = fate.Owed()  # what it owes Redis: retried until it lands
        # The ride-along ack: the last job's, held for the next fetch, which writes it in
        # the same round trip (``carry``; consumed by ``Worker.fetch`` or the look-ahead).
        self.ack_due: bytes | None = None
        self.ack_due_jid: str | None = None
        self.completing = 0.0  # lookahead.Depth leaves a success's settlement out of a run
        self.current: Work | None = None
        self._stopping = threading.Event()
        # A stop asked by a signal handler: a flag only (``Worker.stop``), made the Event by
        # the first reader of ``stopping``, never inside the handler.
        self._stop_asked = False
        self._quiet = threading.Event()
        self._strays: set[bytes] = set()
        # This process's runs are counted by the stats hook subscriber, into this buffer.
        self._stats = stats.counting(identity)

    @property
    def stopping(self) -> bool:
        if self._stop_asked and not self._stopping.is_set():
            self._stopping.set()  # here, out of the handler, the Event's lock is safe to take
        return self._stopping.is_set() or bool(self.should_stop and self.should_stop())

    def pause(self, seconds: float) -> None:
        """Sleeps ``seconds``, cut short by a stop. In steps, checking ``stopping``: a stop a
        signal handler asked for is a flag, which no ``Event.wait`` would see."""
        end = time.monotonic() + seconds
        while not self.stopping:
            left = end - time.monotonic()
            if left <= 0:
                return
            self._stopping.wait(min(left, 0.05))

    @property
    def quieted(self) -> bool:
        return self._quiet.is_set()

    @abstractmethod
    def flush_stats(self) -> None:
        """The Worker's: hands the counters over."""

    # The Worker's, for the fetch strategies of ``engine/lookahead.py``, which see their
    # worker through this class (so that they import no ``loop``).
    @abstractmethod
    def fetch(self) -> Work | None:
        """One job, the ack due riding on the fetch."""

    @abstractmethod
    def later(self, call: Any) -> None:
        """A ``succeeded`` hook's best-effort write (``JobEvent.later``), handed to the fetch
        strategy: held to ride on its next fetch with the ack, or written now."""

    @abstractmethod
    def jobs_left(self) -> int | None:
        """How many more jobs it may start before it leaves (``max_jobs``); None: no limit."""

    @abstractmethod
    def redis_away(self, exc: BaseException) -> float:
        """An outage: logged once; returns how long to back off."""

    # Whether a next fetch of its own follows a job (``FlightWorker``: no).
    fetches_next = True

    def settle(self, work: Work, payload: dict[str, Any], outcome: fate.Outcome) -> None:
        """Decides the job's fate from its outcome (``fate.decide``) and applies it
        through the settle table (``settlement``), the worker as its target. Its record
        (``reporter.finished``) is told the decision before the write, or once it went
        through (``told_after``). The counters count a run through the hooks."""
        # The ride-along: a next fetch of its own follows, not quiet or stopping, and no
        # ack already waits for it.
        ride = self.fetches_next and self.ack_due is None and not self._quiet.is_set() and not self.stopping
        try:
            decision = fate.decide(self.config, payload, outcome, ride)
        except Exception as exc:
            failed = fate.undecided(outcome, exc)  # a success whose value can't be kept: failed with it
            if failed is not None:
                self.settle(work, payload, failed)
            else:  # a failure that can't be recorded (even its payload won't serialize)
                self._interrupted(work, payload, outcome, exc)
            return
        told_after = decision.told_after
        if not told_after:
            self.reporter.finished(work, decision)
        # A success's settlement (a completion's script, a unique lock's release in its
        # ``succeeded`` hook) is a round trip of its own, not the job's run: timed, and
        # left out of look-ahead's measure (``completing``), so it doesn't keep K at 1.
        began = time.perf_counter() if decision.ack_due else 0.0
        # The hooks' fields (read from the outcome's own, not from its type: asked per job).
        event: dict[str, Any] = {"queue": work.queue, "duration": getattr(outcome, "duration", None)}
        if decision.ran is False:
            event["error"] = getattr(outcome, "error", None)
        elif ride:  # its hooks' writes may ride with the ack (``JobEvent.later``)
            event["later"] = self.later
        try:
            # ``settlement.apply`` without its keyword packing (per job): the same table.
            took = settlement.TABLE[type(decision)](self, work.raw, decision, payload, event)
        except Fenced:
            raise
        except Exception as exc:
            if decision.ran is not False:  # handed back or suspended: stays listed
                if not isinstance(exc, store.RedisError):
                    raise
                logger.error(
                    "couldn't settle jid=%s (%s; left in progress): %s", work.jid(), decision.to_wire()[0], exc
                )
                return
            self._interrupted(work, payload, outcome, exc)  # whatever stopped the filing
            return
        if decision.ack_due:
            self.completing += time.perf_counter() - began
        if told_after:
            self.reporter.finished(work, decision)
            if decision.ack_due:  # a completion, written at once
                self.reporter.acked(work.raw)
        if not took and decision.ran is False:
            # No hook fires for an entry that was gone: counted here, as every run is.
            self._stats.record(payload["class"], False, (event["duration"] or 0.0) * 1000)
            logger.warning("jid=%s was no longer in progress when its failure was filed", payload["jid"])

    def report_unsettled(self, work: Work, payload: dict[str, Any], outcome: fate.Outcome) -> None:
        """Declared dead: nothing is written (its jobs were requeued elsewhere), but its
        record is told how the run ended, as its decision has it."""
        try:
            decision = fate.decide(self.config, payload, outcome)
        except Exception as exc:
            decision = fate.filing_failed(self.config, work.raw, getattr(outcome, "error", None) or exc)
        self.reporter.finished(work, decision)

    def _interrupted(self, work: Work, payload: dict[str, Any], outcome: fate.Outcome, exc: Exception) -> None:
        """A run's failure that couldn't be recorded: filed as an interruption, built
        from the entry as fetched (told to its record first, as any filing is)."""
        logger.error("couldn't record the failure of jid=%s: %s: %s", payload["jid"], type(exc).__name__, exc)
        error = getattr(outcome, "error", None) or exc
        decision = fate.filing_failed(self.config, work.raw, error)
        self.reporter.finished(work, decision)
        self.interrupt(work, error, getattr(outcome, "duration", None), decision)

    # -- the worker as the settle table's target (settlement.Target) ----------------------

    def carry(self, raw: bytes, jid: str | None = None) -> None:
        """The ride-along ack: held for the next fetch, which writes it (``settle`` found
        there is one)."""
        self.ack_due = raw
        self.ack_due_jid = jid

    def acknowledge(self, raw: bytes) -> None:
        """A failed ack leaves a finished job on the list: retried briefly, then owed."""
        self._retried(raw, fate.ACK, lambda: self.fetcher.acknowledge(raw))

    def complete(self, raw: bytes, done: Completion) -> bool:
        """A workflow job's success, written now (never riding on a fetch, never dropped
        as a plain ack is): retried briefly, then owed (its master applies it if this
        process dies)."""
        return self._retried(raw, fate.Complete(done), lambda: self.fetcher.complete(raw, done))

    def _retried(self, raw: bytes, decision: fate.Decision, write: Callable[[], object]) -> bool:
        """True once written, or owed after ``ACK_ATTEMPTS`` (the job ran: never re-run)."""
        for attempt in range(1, ACK_ATTEMPTS + 1):
            try:
                write()
                return True
            except store.RedisError as exc:
                if attempt == ACK_ATTEMPTS:
                    logger.error(
                        "couldn't settle finished jid=%s after %d attempts (will retry): %s", jid_of(raw), attempt, exc
                    )
                    self.owe(raw, decision)
                    return True
                time.sleep(0.1 * attempt)
        return True

    def write_now(self, calls: list[Any]) -> None:
        """Best-effort writes that had no fetch to ride on (a unique lock's release, each
        compare-and-delete): written one by one; once one fails, the rest are not tried
        (Redis is away: each lock then frees itself at its TTL)."""
        for n, call in enumerate(calls):
            try:
                script.run(self.fetcher.client, call)
            except store.RedisError as exc:
                logger.error(
                    "worker %s: %d write(s) of finished jobs not made (a unique lock frees at its TTL): %s",
                    self.identity,
                    len(calls) - n,
                    exc,
                )
                return

    def give_back(self, raw: bytes) -> bool:
        return self.fetcher.give_back(raw)

    def file(self, raw: bytes, zset: str, score: float, entry: str | bytes) -> bool:
        return self.fetcher.file(raw, zset, score, entry)

    def park_unsettled(self, raw: bytes, record: str) -> bool:
        return self.fetcher.park_unsettled(raw, record)

    def suspend(self, raw: bytes, entry: str, jid: str, cursor: str, done: int) -> bool:
        return self.fetcher.suspend(raw, entry, jid, cursor, done)

    def cancelled(self, payload: dict[str, Any], event: dict[str, Any]) -> None:
        """A run ended cancelled: its log line and its history entry (no hook: the
        operator's process fired ``cancelled``)."""
        duration = event.get("duration") or 0.0
        logger.info(
            "cancelled: %s jid=%s ended after %.3fs",
            payload.get("class"),
            payload["jid"],
            duration,
            extra={
                "event": "job_cancelled",
                "jid": payload["jid"],
                "job_class": payload.get("class"),
                "queue": event.get("queue"),
                "outcome": "cancelled",
                "duration_ms": round(duration * 1000, 3),
            },
        )
        history.note_cancelled(payload, event.get("queue") or "", self.identity, duration, self.config)

    # -- what is settled outside a run ------------------------------------------------------

    def hand_back(self, work: Work) -> None:
        """Only for a job that hasn't run. If even this fails, it stays on the list, where
        reconcile (or the owner's shutdown, or orphan recovery) requeues it later."""
        try:
            settlement.apply(self.fetcher, work.raw, fate.GIVE_BACK, queue=work.queue)
        except store.RedisError as exc:
            logger.error("couldn't hand back jid=%s (left in progress): %s", work.jid(), exc)

    def interrupt(
        self, work: Work, error: BaseException, duration: float | None = None, decision: fate.File | None = None
    ) -> None:
        """Ran and failed, but filing that failed: into retry after 30 s x count, or dead.
        ``duration``: the run's (its ``retrying``/``dead`` hook counts it)."""
        if decision is None:
            decision = fate.filing_failed(self.config, work.raw, error)
        try:
            settlement.apply(self.fetcher, work.raw, decision, queue=work.queue, error=error, duration=duration)
        except Fenced:
            raise
        except Exception as exc:  # whatever stopped it, the job ran: owed (retried, parked at exit), never re-run
            logger.error("couldn't file the interruption of jid=%s (will retry): %s", work.jid(), exc)
            self.owe(work.raw, decision)
            if duration is not None:  # its hook fires (without a duration) only once the filing lands
                payload = fate.parse_payload(work.raw)[0]
                if payload is not None:  # an interruption is only ever built from a readable payload
                    self._stats.record(payload["class"], False, duration * 1000)
            return
        where = f"retrying in {decision.delay:.0f}s" if decision.retrying else "moved to dead"
        logger.error("couldn't record the failure of jid=%s (%s); %s", work.jid(), type(error).__name__, where)

    def owe(self, raw: bytes, decision: fate.Decision) -> None:
        self.pending.add(raw, decision)
        self.reporter.pending(raw, decision)

    def bury_bad_payload(self, work: Work, why: str) -> None:
        logger.error("unreadable job on queue %s moved to dead: %s", work.queue, why)
        decision = fate.decide(self.config, work.raw, fate.Unreadable(why))
        try:
            settlement.apply(self.fetcher, work.raw, decision, queue=work.queue)
        except store.RedisError:
            self.owe(work.raw, decision)

    def settle_pending(self, listed: set[bytes] | None = None) -> None:
        """Finishes each owed settlement that can be finished now; one that fails stays."""
        for raw, how in list(self.pending.items.items()):
            if listed is not None and raw not in listed:
                self.pending.pop(raw)  # no longer ours (already settled, or requeued by recovery)
                self.reporter.settled(raw)
                continue
            try:
                settlement.apply(self.fetcher, raw, how)
            except store.RedisError as exc:
                logger.debug("still couldn't settle jid=%s: %s", jid_of(raw), exc)
                continue
            self.pending.pop(raw)
            self.reporter.settled(raw)

    def reconcile(self, holding: Iterable[bytes] = ()) -> None:
        """This identity's entries that nothing is running: owed settlements are finished,
        never re-run; any other stray is requeued once seen on two passes in a row (the
        second look rules out a job caught between fetch and start). ``holding``: jobs
        fetched ahead, about to start, and finished ones whose acks wait for a fetch."""
        listed = self.fetcher.listed()
        running = self.running_raws(holding)
        self.settle_pending(set(listed))
        strays = {raw for raw in listed if raw not in running and raw not in self.pending}
        for raw in strays & self._strays:
            if raw.startswith(MARK):  # a fetch's mark its script never removed (NOSCRIPT, then Redis away)
                self.fetcher.drop_mark(raw)
                continue
            if self.fetcher.give_back(raw):
                logger.warning("requeued stray in-progress job jid=%s", jid_of(raw))
        self._strays = strays - self._strays

    def running_raws(self, holding: Iterable[bytes] = ()) -> set[bytes]:
        """What this process holds that nothing should requeue: the job it runs, one
        fetched ahead or finished with its ack held (``holding``), one whose ack is due."""
        running = set(holding)
        if self.current is not None:
            running.add(self.current.raw)
        if self.ack_due is not None:
            running.add(self.ack_due)
        return running

    def finish(self) -> None:
        """Leaving the loop: settle what is owed, hand over what can't be settled."""
        if self.ack_due is not None:
            raw, self.ack_due = self.ack_due, None
            self.acknowledge(raw)
        try:
            self.settle_pending(set(self.fetcher.listed()))
        except store.RedisError as exc:  # each stays owed: parked below, or kept listed by the requeue at exit
            guard.handle(f"worker {self.identity}: settling what it owes", exc)
        self.park_owed(quiet=True)
        self.flush_stats()

    def park_owed(self, quiet: bool = False) -> None:
        """Each owed filing, as ``fate.decide`` has it for a process that leaves: parked
        in ``unsettled`` (filed later by whoever reads it, never re-run). ``quiet``: one
        that can't be parked stays owed (else the Redis error is raised)."""
        for raw, filing in self.pending.filings().items():
            try:
                settlement.apply(self.fetcher, raw, fate.decide(self.config, raw, fate.Leaving(filing)))
                self.pending.pop(raw)
                self.reporter.settled(raw)
            except store.RedisError as exc:
                if not quiet:
                    raise
                logger.error("couldn't hand over the unsettled failure of jid=%s: %s", jid_of(raw), exc)

    def requeue_rest(self, riding: tuple[bytes | None, ...] = ()) -> int:
        """Everything still on this identity's list back to its queues, in one script, as
        ``fate.decide`` has it for a process that leaves: never started -> given back; an
        owed ack (or one riding on a fetch, ``riding``) -> dropped (that is the ack); an
        owed filing -> kept listed. Raises ``Fenced`` or a Redis error."""
        drop: list[bytes] = []
        keep: list[bytes] = []
        owed = dict(self.pending.items)
        owed.update((raw, fate.ACK) for raw in riding if raw)
        for raw, how in owed.items():
            (drop if fate.dropped(fate.decide(self.config, raw, fate.Leaving(how))) else keep).append(raw)
        return self.fetcher.requeue_all(drop=drop, keep=keep).moved
