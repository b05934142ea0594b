"""How the worker loop gets its next job: a fetch strategy.

``Plain``: each fetch goes out after the job before it ran, with that job's ack riding on
it (the single-process runner, and a child under ``--no-lookahead``).

``LookAhead`` (a prefork child): the next fetch is sent before the job runs, the last ack
riding on it, and read after it, so the next job starts without a round trip. The job it
brings lands on this identity's list as ``ahead``: until this process claims it (through
its reporter: the slot's lock, or Redis when in doubt), an idle sibling may take it over.
A looked-ahead job that is not started (quiet, stop) goes straight back to its queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis

from . import fate, redis_errors
from .config import logger
from .fetch import Ahead, Work, jid_of

if TYPE_CHECKING:
    from .worker import Worker


class Plain:
    """No look-ahead: the loop fetches when it needs a job."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.held: Work | None = None  # fetched (ahead), not started

    def next(self) -> Work | None:
        work, self.held = self.held, None
        return work or self.worker.fetch()

    def before_run(self) -> None:
        """A job is about to run."""

    def after_run(self) -> None:
        """The job ran (or was settled without running)."""

    def riding_ack(self) -> bytes | None:
        """The ack riding on a fetch out now, unknown whether it landed."""
        return None

    def give_back(self) -> None:
        """Quiet, stop or leaving: a job fetched ahead, never started, goes back to its queue."""
        work, self.held = self.held, None
        if work is not None:
            self.worker.give_back(work)

    def leave(self) -> None:
        """The loop ends (maybe from inside a job): nothing fetched is left unstarted."""
        self.give_back()


class LookAhead(Plain):
    """The next fetch goes out while a job runs (only when the reporter allows it: it has
    siblings to hand that job to, none of them idle)."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.ahead: Ahead | None = None  # sent, its reply unread
        self.number = 0

    def before_run(self) -> None:
        """The next fetch, sent before this job runs, with the last ack riding on it."""
        w = self.worker
        if w.quieted or w.stopping:
            return
        if w.max_jobs is not None and w.jobs_done + 1 >= w.max_jobs:
            return
        if not w.reporter.may_look_ahead():
            return
        self.number += 1
        ack_jid = w.ack_due_jid or (jid_of(w.ack_due) if w.ack_due else None)
        # Told first: if we die with it out, the master must know the ack may have landed.
        w.reporter.looked_ahead(self.number, ack_jid)
        try:
            self.ahead = w.fetcher.send_ahead(self.number, w.ack_due, ack_jid)
        except redis.RedisError as exc:
            logger.debug("look-ahead not sent: %s", exc)
            w.reporter.looked_ahead(0, None)
            return  # the ack stays due; the plain fetch carries it
        w.ack_due = None

    def after_run(self) -> None:
        if self.ahead is not None:
            self.held = self.read(self.ahead)

    def riding_ack(self) -> bytes | None:
        return self.ahead.ack if self.ahead is not None else None

    def leave(self) -> None:
        self.after_run()  # left the loop from inside a job (an exception): its reply first
        super().leave()

    def read(self, ahead: Ahead) -> Work | None:
        """The look-ahead's job if it is still ours to start (the claim)."""
        w = self.worker
        work = None
        try:
            work = w.fetcher.read_ahead(ahead)
        except redis.exceptions.NoScriptError:
            # Scripts flushed (or a new server): it did not run, so neither did its ack.
            # Made now, while the slot still names that job for the master.
            if ahead.ack is not None:
                w.acknowledge(ahead.ack)
        except redis.RedisError as exc:
            # Unknown whether it ran: the ack is owed (LREM is idempotent) and a job it
            # may have moved is a stray that reconcile requeues.
            if ahead.ack is not None:
                w.owe(ahead.ack, fate.ACK)
            if redis_errors.is_outage(exc):
                w.redis_away(exc)  # the next plain fetch backs off
            else:
                logger.warning("worker %s: look-ahead fetch failed: %s: %s", w.identity, type(exc).__name__, exc)
        finally:
            self.ahead = None
        return w.reporter.claim(work, w.fetcher)
