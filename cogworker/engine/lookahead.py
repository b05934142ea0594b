"""How the worker loop gets its next job: a fetch strategy.

``Plain``: each fetch goes out after the job before it ran, with that job's ack riding on
it (the single-process runner, and a child under ``--no-lookahead``).

``LookAhead`` (a prefork child): the next fetch is sent before the job runs, the last acks
riding on it, and read after it, so the next job starts without a round trip. It brings up
to K jobs (``Depth``: K grows while jobs are short and the queues deep, docs/architecture.md#lookahead-k);
they land on this identity's list as ``ahead``: until this process claims each (through its
reporter: the slot's lock, or Redis when in doubt), an idle sibling may take it over. The
next fetch goes out with the last of them. Looked-ahead jobs that are not started (quiet,
stop) go straight back to their queues.
"""

from __future__ import annotations

import time
from collections import deque

from .. import store
from ..config import logger
from ..core import fate
from ..store import errors as redis_errors
from ..transitions import push
from ..transitions.call import Call
from .fetch.ahead import Ack
from .fetch.fetcher import Ahead, Work, jid_of, large
from .ledger import Settling  # the loop that owns a strategy, as its settlement sees it


class Plain:
    """No look-ahead: the loop fetches when it needs a job."""

    def __init__(self, worker: Settling) -> None:
        self.worker = worker

    def next(self) -> Work | None:
        return self.worker.fetch()

    def before_run(self) -> None:
        """A job is about to run."""

    def after_run(self) -> None:
        """The job ran (or was settled without running)."""

    def riding_acks(self) -> tuple[bytes, ...]:
        """Acks held for the next fetch or riding on one out now (unknown whether they landed)."""
        return ()

    def ride(self, rider: Call) -> None:
        """A best-effort write (a unique lock's release) handed over by a ``succeeded``
        hook (``JobEvent.later``): no fetch of this strategy carries it, so it is written now."""
        self.worker.write_now([rider])

    def holding(self) -> list[bytes]:
        """Entries of our list this strategy holds (fetched ahead, or finished and their
        acks held): reconcile must not requeue them."""
        return []

    def give_back(self) -> None:
        """Quiet, stop or leaving: jobs fetched ahead, never started, go back to their queues."""

    def leave(self) -> None:
        """The loop ends (maybe from inside a job): nothing fetched is left unstarted."""
        self.give_back()


class Depth:
    """K, the jobs one look-ahead fetch asks for. A look-ahead of several saves a round trip's work on
    both ends per job (system calls, the script call), but its jobs wait behind each
    other: K doubles (up to ``MAX``) while K - 1 jobs of the measured length fit in
    ``HOLD`` and the last look-ahead came back full (the queues are deep); it halves when they
    don't fit, drops to what came back when the queues ran short, and to 1 while a
    sibling is idle. A job of ``LONG`` or longer is never fetched ahead with others: K = 1 (such a job
    outlasts a round trip several times over, so K > 1 saves it nothing worth a wait)."""

    # 32: a true no-op job (no Redis call of its own, ~30-60 us of the child's Python) fills
    # a look-ahead of 31 in HOLD; per job, Redis then does the acks' LREMs and the LMOVEs, and
    # the script call, its keys and the beat are shared by 32 (docs/architecture.md#lookahead-k).
    MAX = 32
    HOLD = 0.002  # seconds a job fetched ahead may wait behind the others of its look-ahead
    LONG = HOLD / 3  # docs/architecture.md#lookahead-k: 0.1-0.3 ms a round trip here

    def __init__(self) -> None:
        self.k = 1
        self.job: float | None = None  # EWMA of a job's run (start to settled), seconds

    def ran(self, seconds: float) -> None:
        if self.job is None:
            self.job = seconds
            return
        # A run stretched by preemption (a shared machine) moves it a little, not 4x.
        self.job += (min(seconds, 4 * self.job) - self.job) / 8

    def one(self) -> None:
        self.k = 1

    def came_back(self, asked: int, got: int) -> None:
        job = self.job if self.job is not None else self.HOLD
        if job >= self.LONG:
            self.k = 1
            return
        if got < asked:
            self.k = max(1, got)
        elif self.k < self.MAX and (2 * self.k - 1) * job <= self.HOLD:
            self.k *= 2
        while self.k > 1 and (self.k - 1) * job > self.HOLD:
            self.k //= 2


class LookAhead(Plain):
    """The next fetch goes out while a job runs (only when the reporter allows it: it has
    siblings to hand those jobs to, none of them idle)."""

    def __init__(self, worker: Settling) -> None:
        super().__init__(worker)
        self.held: deque[Work] = deque()  # fetched ahead, not started, oldest first
        self.ahead: Ahead | None = None  # sent, its reply unread
        self.asked = 1
        self.number = 0
        self.acks: list[Ack] = []  # finished jobs of this look-ahead, acks held for the next fetch
        # Best-effort writes of those jobs' successes (their unique locks' releases), held
        # with the acks and sent in front of the same fetch (``ride``).
        self.riders: list[Call] = []
        self.depth = Depth()
        self._began = 0.0

    def next(self) -> Work | None:
        if self.held:
            return self.worker.reporter.claim_next(self.held, self.worker.fetcher)
        self._flush_acks()  # the jobs behind them were taken over: no look-ahead fetch to ride on
        return self.worker.fetch()

    def before_run(self) -> None:
        """The next fetch, sent before the last held job runs, with the acks riding on it."""
        w = self.worker
        self._began = time.perf_counter()
        if self.held:  # more of this look-ahead first: the last job's ack waits with the others
            self._hold_ack()
            return
        if not self._may_send():
            self._flush_acks()
            return
        k = self.depth.k
        if large(w.ack_due):
            # A large job: one at a time, by the fast fetch, where no payload enters Lua
            # (docs/architecture.md#lookahead-k); Lua's hashing of K payloads costs more than the
            # round trips K > 1 saves.
            k = 1
        left = w.jobs_left()
        if left is not None:
            k = min(k, left - 1)
        self.number += 1
        ack_jid = w.ack_due_jid or (jid_of(w.ack_due) if w.ack_due else None)
        # Told first: if we die with it out, the master must know the acks may have landed.
        w.reporter.looked_ahead(self.number, ack_jid)
        try:
            riders = tuple(push.merged(self.riders))  # the locks' releases: one script call
            self.ahead = w.fetcher.send_ahead(self.number, w.ack_due, ack_jid, k, tuple(self.acks), riders)
        except store.RedisError as exc:
            logger.debug("look-ahead not sent: %s", exc)
            w.reporter.looked_ahead(0, None)
            self._flush_acks()
            return  # the last ack stays due; the plain fetch carries it
        self.asked = k
        self.acks = []  # riding now: the slot lists them until the reply is read
        self.riders = []
        w.ack_due = None

    def _may_send(self) -> bool:
        w = self.worker
        if w.quieted or w.stopping or self.ahead is not None:
            return False
        left = w.jobs_left()
        if left is not None and left <= 1:
            return False
        if not w.reporter.may_look_ahead():
            self.depth.one()
            return False
        return True

    def _hold_ack(self) -> None:
        """The last job's ack joins the look-ahead's held acks (listed in the slot before the
        next job starts, so a dying child's master drops it rather than requeue it)."""
        w = self.worker
        if w.ack_due is None:
            return
        jid = w.ack_due_jid or jid_of(w.ack_due)
        self.acks.append((w.ack_due, jid))
        w.ack_due = None
        w.reporter.ack_held(jid)  # the slot lists the acks before it already

    def _flush_acks(self) -> None:
        """Held acks with no look-ahead fetch to ride on: written one by one (rare: a sibling
        went idle, a stop, or the jobs behind them were taken over), their riders after them."""
        acks, self.acks = self.acks, []
        for raw, _ in acks:
            self.worker.acknowledge(raw)  # or owed: the master is told
        if acks:
            self.worker.reporter.acks_held([])
        riders, self.riders = self.riders, []
        if riders:
            self.worker.write_now(push.merged(riders))

    def ride(self, rider: Call) -> None:
        """Held for the next look-ahead fetch, in front of which it is sent; if none goes
        out after all, written with the held acks (``_flush_acks``). A child that dies
        holding it has its master write it, as the master drops the held ack
        (``prefork/master.py``). Where no look-ahead may go out (a single-process worker, a
        sibling idle), nothing would carry it: written now, as ``Plain`` does."""
        if self.worker.reporter.may_look_ahead():
            self.riders.append(rider)
        else:
            super().ride(rider)

    def after_run(self) -> None:
        # A success's settlement (a workflow job's completion, a unique lock's release) is
        # its own round trip, not the job's run: left out, so results and unique jobs don't
        # keep K at 1 (docs/architecture.md#workflows).
        self.depth.ran(time.perf_counter() - self._began - self.worker.completing)
        self.worker.completing = 0.0
        if self.ahead is None:
            return
        works = self.read(self.ahead)
        self.held = deque(works)
        self.depth.came_back(self.asked, len(works))
        if not works:  # clears the slot's record (and a take-over's flag)
            self.worker.reporter.claim_next(self.held, self.worker.fetcher)

    def riding_acks(self) -> tuple[bytes, ...]:
        return (*(raw for raw, _ in self.acks), *(_riding(self.ahead) if self.ahead is not None else ()))

    def holding(self) -> list[bytes]:
        return [*(w.raw for w in self.held), *(raw for raw, _ in self.acks)]

    def give_back(self) -> None:
        w = self.worker
        mine: list[Work] = []
        while self.held:  # each claimed first: a sibling may be taking them
            work = w.reporter.claim_next(self.held, w.fetcher)
            if work is not None:
                mine.append(work)
        # Newest first: each goes back to its queue's fetch end, so the oldest ends up
        # there, next to run, and the look-ahead's jobs are back in queue order (as return_ahead.lua).
        for work in reversed(mine):
            w.hand_back(work)
        self._flush_acks()

    def leave(self) -> None:
        if self.ahead is not None:
            self.after_run()  # left the loop from inside a job (an exception): its reply first
        super().leave()

    def read(self, ahead: Ahead) -> list[Work]:
        """The look-ahead's jobs, oldest first (each still to be claimed)."""
        w = self.worker
        works: list[Work] = []
        replied = False
        refused = list(ahead.riders)  # until their replies are read: unknown, so written again
        try:
            if ahead.riders:
                refused = w.fetcher.read_riders(ahead)
                replied = True
            works = w.fetcher.read_ahead_all(ahead)
        except store.NoScriptError:
            # Scripts flushed (or a new server): it did not run, so neither did its acks.
            # Made now, while the slot still names those jobs for the master.
            for raw in _riding(ahead):
                w.acknowledge(raw)
        except store.RedisError as exc:
            # Unknown whether it ran: the acks are owed (LREM is idempotent) and jobs it
            # may have moved are strays that reconcile requeues.
            for raw in _riding(ahead):
                w.owe(raw, fate.ACK)
            if refused and not replied:
                logger.debug("%d write(s) riding on the fetch got no reply (%s): written again", len(refused), exc)
            if redis_errors.is_outage(exc):
                w.redis_away(exc)  # the next plain fetch backs off
            else:
                logger.warning("worker %s: look-ahead fetch failed: %s: %s", w.identity, type(exc).__name__, exc)
        finally:
            self.ahead = None
            w.reporter.came_back()
        if refused:  # compare-and-delete: written twice does no harm
            w.write_now(refused)
        return works


def _riding(ahead: Ahead) -> tuple[bytes, ...]:
    """Every ack riding on a look-ahead fetch."""
    if ahead.many:
        return ahead.acks
    return (ahead.ack,) if ahead.ack is not None else ()
