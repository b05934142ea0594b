"""The worker's side of settlement: a job's outcome -> ``fate.decide`` -> written through
``settlement.apply``; what it still owes Redis (an ack riding on the next fetch, an owed
ack or filing retried until it lands); reconcile of its own list; what it hands over as
it leaves. A mixin of ``Worker``, which holds the state it works on."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import store
from ..config import logger
from ..core import fate, hooks, settlement
from ..errors import Fenced
from ..lifecycle import history, stats
from ..store import guard
from .fetch.fast import MARK
from .fetch.fetcher import Work, jid_of

if TYPE_CHECKING:
    from .fetch.fetcher import Fetcher
    from .reporter import Reporter

ACK_ATTEMPTS = 3


def log_failure(payload: dict[str, Any], decision: fate.File, queue: str | None = None,
                duration: float | None = None) -> None:
    """One line (then its traceback) for a failed run: where it went, ``retry in 45s
    (attempt 3/25)`` at WARNING, or ``dead`` at ERROR (docs/architecture.md#logs)."""
    if decision.retrying:
        where = f"retry in {decision.delay:.0f}s (attempt {payload.get('retry_count')}/{fate.max_retries(payload)})"
    else:
        where = "dead"
    trace = payload.get("error_traceback")
    extra = {"event": "job_failed", "jid": payload.get("jid"), "job_class": payload.get("class"),
             "queue": queue or payload.get("queue"), "outcome": "retried" if decision.retrying else "dead",
             "duration_ms": None if duration is None else round(duration * 1000, 3), "traceback": trace}
    logger.log(logging.WARNING if decision.retrying else logging.ERROR, "fail: %s jid=%s: %s: %s; %s%s",
               payload.get("class"), payload.get("jid"), payload.get("error_class"), payload.get("error_message"),
               where, "\n" + trace if trace else "", extra=extra)


class Settling(ABC):
    fetcher: Fetcher
    reporter: Reporter
    identity: str
    config: Any
    pending: fate.Owed
    ack_due: bytes | None
    ack_due_jid: str | None
    completing: float
    current: Work | None
    _quiet: threading.Event
    _strays: set[bytes]
    _stats: stats.StatsBuffer

    @property
    @abstractmethod
    def stopping(self) -> bool:
        """The Worker's: asked to leave."""

    @abstractmethod
    def flush_stats(self) -> None:
        """The Worker's: hands the counters over."""

    def settle(self, work: Work, payload: dict[str, Any], outcome: fate.Outcome) -> None:
        """Decides the job's fate from its outcome and writes it (an ack rides on the
        next fetch when there is one). The counters count a run through the hooks."""
        if isinstance(outcome, fate.Succeeded) and "wf" in payload:
            outcome = self._complete(work, payload, outcome)
            if isinstance(outcome, fate.Succeeded):
                return
        if isinstance(outcome, fate.Succeeded):
            # Its success is final (only the ack is left): the locks go before anything else.
            hooks.fire("succeeded", payload, queue=work.queue, identity=self.identity,
                       duration=outcome.duration, config=self.config)
            self.reporter.finished(work, outcome)
            self._ack_later(work, payload)
        elif isinstance(outcome, fate.Cancelled):
            # Off the list since the cancel (cancel.lua): nothing to file, no hook (the
            # operator's process fired it), its history entry; the drop rides on the next fetch as an ack would.
            logger.info("cancelled: %s jid=%s ended after %.3fs", payload.get("class"), payload["jid"],
                        outcome.duration, extra={"event": "job_cancelled", "jid": payload["jid"],
                                                 "job_class": payload.get("class"), "queue": work.queue,
                                                 "outcome": "cancelled",
                                                 "duration_ms": round(outcome.duration * 1000, 3)})
            history.note_cancelled(payload, work.queue, self.identity, outcome.duration, self.config)
            self.reporter.finished(work, outcome)
            self._ack_later(work, payload)
        elif isinstance(outcome, fate.Raised):
            filed = self._file_failure(work, payload, outcome)
            self.reporter.finished(work, outcome)
            if not filed:
                self.interrupt(work, outcome.error, outcome.duration)
        elif isinstance(outcome, fate.Suspended):
            self.reporter.finished(work, outcome)
            self.suspend(work, payload, outcome)
        else:
            self.reporter.finished(work, outcome)
            self.give_back(work)

    def _complete(self, work: Work, payload: dict[str, Any], outcome: fate.Succeeded) -> fate.Outcome:
        """A workflow job's success: its ack, result, chain step and group counter in one
        script, written now (never riding on a fetch, never dropped as a plain ack is), and
        only then reported finished: a child killed before it landed left the job running
        in its slot, so it runs again, and its result and callbacks are written once.
        A value that can't be kept fails the job instead (the outcome returned)."""
        try:
            decision = fate.decide(self.config, payload, outcome)
        except TypeError as exc:
            return fate.Raised(exc, fate.default_backoff, outcome.duration)
        hooks.fire("succeeded", payload, queue=work.queue, identity=self.identity,
                   duration=outcome.duration, config=self.config)
        began = time.perf_counter()
        for attempt in range(1, ACK_ATTEMPTS + 1):
            try:
                settlement.apply(self.fetcher, work.raw, decision)
                break
            except store.RedisError as exc:
                if attempt == ACK_ATTEMPTS:
                    logger.error("couldn't settle finished jid=%s after %d attempts (will retry): %s",
                                 payload["jid"], attempt, exc)
                    self.owe(work.raw, decision)
                    break
                time.sleep(0.1 * attempt)
        self.completing += time.perf_counter() - began
        self.reporter.finished(work, outcome)
        self.reporter.acked(work)
        return outcome

    def _ack_later(self, work: Work, payload: dict[str, Any]) -> None:
        # Quiet or stopping: no next fetch for the ack to ride on.
        if self.stopping or self._quiet.is_set() or self.ack_due is not None:
            self.acknowledge(work.raw)
        else:
            self.ack_due = work.raw
            self.ack_due_jid = payload["jid"]

    def _file_failure(self, work: Work, payload: dict[str, Any], outcome: fate.Raised) -> bool:
        """Files the run's failure into retry or dead; False if that failed (then it is
        filed as an interruption)."""
        error = outcome.error
        try:
            decision = fate.decide(self.config, payload, outcome)
            assert isinstance(decision, fate.File)
            log_failure(payload, decision, work.queue, outcome.duration)
            filed = settlement.apply(self.fetcher, work.raw, decision, payload, queue=work.queue, error=error,
                                     duration=outcome.duration)
        except Fenced:
            raise
        except Exception as exc:  # whatever stopped the filing (even an unserializable payload): an interruption
            logger.error("couldn't record the failure of jid=%s: %s: %s", payload["jid"],
                         type(exc).__name__, exc)
            return False
        if not filed:
            # No hook fires for an entry that was gone: counted here, as every run is.
            self._stats.record(payload["class"], False, outcome.duration * 1000)
            logger.warning("jid=%s was no longer in progress when its failure was filed", payload["jid"])
        return True

    def acknowledge(self, raw: bytes) -> None:
        """A failed ack leaves a finished job on the list: retried briefly, then owed."""
        for attempt in range(1, ACK_ATTEMPTS + 1):
            try:
                self.fetcher.acknowledge(raw)
                return
            except store.RedisError as exc:
                if attempt == ACK_ATTEMPTS:
                    logger.error("couldn't acknowledge finished jid=%s after %d attempts (will retry): %s",
                                 jid_of(raw), attempt, exc)
                    self.owe(raw, fate.ACK)
                    return
                time.sleep(0.1 * attempt)

    def give_back(self, work: Work) -> None:
        """Only for a job that hasn't run. If even this fails, it stays on the list, where
        reconcile (or the owner's shutdown, or orphan recovery) requeues it later."""
        try:
            settlement.apply(self.fetcher, work.raw, fate.GIVE_BACK, queue=work.queue)
        except store.RedisError as exc:
            logger.error("couldn't hand back jid=%s (left in progress): %s", work.jid(), exc)

    def suspend(self, work: Work, payload: dict[str, Any], outcome: fate.Suspended) -> None:
        """An iterable job stopped at a yield: back on its queue with its cursor, saved in
        the same script (docs/architecture.md#iterable). If that fails it stays listed, and
        whatever requeues it (reconcile, this process's exit, its master, orphan recovery)
        puts it back as fetched: it resumes from its last checkpoint."""
        decision = fate.decide(self.config, payload, outcome)
        try:
            settlement.apply(self.fetcher, work.raw, decision, payload, queue=work.queue, duration=outcome.duration)
        except Fenced:
            raise
        except store.RedisError as exc:
            logger.error("couldn't put iterable jid=%s back on its queue after %d item(s) (left in progress): %s",
                         payload["jid"], outcome.done, exc)
            return
        logger.info("iterable jid=%s stopped after %d item(s), back on queue %s", payload["jid"], outcome.done,
                    work.queue)

    def interrupt(self, work: Work, error: BaseException, duration: float | None = None) -> None:
        """Ran and failed, but filing that failed: into retry after 30 s x count, or dead.
        ``duration``: the run's (its ``retrying``/``dead`` hook counts it)."""
        decision = fate.decide(self.config, work.raw, fate.FilingFailed(error))
        assert isinstance(decision, fate.File)
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
            decision = fate.decide(self.config, raw, fate.Leaving(how))
            (drop if isinstance(decision, fate.Drop) else keep).append(raw)
        return self.fetcher.requeue_all(drop=drop, keep=keep).moved
