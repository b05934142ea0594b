"""The worker loop with up to M jobs in flight (``--concurrency`` M > 1, a prefork child;
docs/architecture.md#concurrency).

One identity, one in-progress list, three kinds of threads:

- this one (the control thread) fetches through a fetch thread (one fetch out at a time,
  only while fewer than M jobs run: it never holds a job it can't start at once),
  starts each job, and settles each outcome: every write about a job, and every write
  of the shared-memory record the master reads, happens here, one at a time;
- a pool of M threads runs ``execute`` (resolution, the server middleware chain, the
  function): a sync job runs in its thread, an async job's body is awaited on (an
  ``async def`` job with no server middleware installed skips the pool: it starts as a
  task straight from the control thread, ``execute.launch_async``)
- the process's one event loop, in a thread of its own (``aio.LoopThread``): M async
  jobs are M tasks of one loop.

Settlement is per job and as in the one-at-a-time loop (``engine/ledger.py``), except that a
success is acknowledged at once (there is no next fetch of its own for the ack to ride
on); until that ack lands, its record says so, and a death drops it rather than re-run it.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..config import logger
from ..core import fate
from ..errors import Fenced
from . import eventloop as aio
from .execute import HardStop, execute, in_job_pool, launch_async
from .fetch.fetcher import Work
from .loop import Worker

EVENT_WAIT = 0.5  # the longest the control thread waits without housekeeping


class FlightWorker(Worker):
    """``Worker`` with M jobs in flight. No look-ahead: with a free place it fetches at
    once, and with none it fetches nothing (no job waits behind running ones)."""

    fetches_next = False  # no next fetch of a job's own: a success is acknowledged at once

    def __init__(self, queues: list[tuple[str, int | None]], *, concurrency: int, **kwargs: Any) -> None:
        super().__init__(queues, lookahead=False, **kwargs)
        self.concurrency = concurrency
        self.flying: dict[bytes, Work] = {}  # started, not yet settled
        self.acking: set[bytes] = set()  # succeeded, the ack being written
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.fetch_out = False
        self.pool: ThreadPoolExecutor | None = None
        self.fetch_pool: ThreadPoolExecutor | None = None
        self.loop_thread: aio.LoopThread | None = None

    def run(self) -> None:
        self.startup()
        self.reporter.ready()
        self._status.start(self.config)
        self.loop_thread = aio.LoopThread()
        self.loop_thread.start()
        self.pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="cogworker-job", initializer=in_job_pool)
        self.fetch_pool = ThreadPoolExecutor(1, thread_name_prefix="cogworker-fetch")
        try:
            while True:
                going = self._going_on()
                if not going and not self.flying and not self.fetch_out:
                    break
                self.housekeep()
                if going and self._may_fetch():
                    self._send_fetch()
                self._next_events()
        except Fenced:
            self._leave_fenced()
        finally:
            self.pool.shutdown(wait=False)
            self.fetch_pool.shutdown(wait=False)
            self.loop_thread.stop()
            self._leave()

    def _may_fetch(self) -> bool:
        if self.fetch_out or self.quieted or len(self.flying) >= self.concurrency:
            return False
        return self.max_jobs is None or self.jobs_done + len(self.flying) < self.max_jobs

    def _send_fetch(self) -> None:
        assert self.fetch_pool is not None
        self.fetch_out = True
        future = self.fetch_pool.submit(self.fetch)
        future.add_done_callback(lambda done: self.events.put(("fetched", done)))

    def _idle(self) -> Work | None:
        """Every queue is empty: nothing to take from siblings (no look-ahead), and the
        shared record is written by the control thread only."""
        return None

    def _next_events(self) -> None:
        """Waits for a fetched job or a finished one, then handles every event queued."""
        try:
            event = self.events.get(timeout=EVENT_WAIT)
        except queue.Empty:
            return
        while True:
            self._handle(*event)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return

    def in_flight(self) -> int:
        return len(self.flying)

    def count_item(self) -> None:
        """From a pool or loop thread: counted by the control thread, which owns the count."""
        self.events.put(("item", None))

    def _handle(self, kind: str, item: Any) -> None:
        if kind == "item":
            self.jobs_done += 1
        elif kind == "fetched":
            self.fetch_out = False
            fetched: Future[Work | None] = item
            work = fetched.result()  # Fenced goes up: the loop leaves
            if work is not None:
                self.start(work)
        else:
            work, payload, outcome = item
            self.flying.pop(work.raw, None)
            if self.limiter.held and not self.fenced:
                self.release_limits(work)
            if self.fenced:
                self.report_unsettled(work, payload, outcome)
            else:
                self.settle(work, payload, outcome)
            self.jobs_done += 1

    def start(self, work: Work) -> None:
        """As ``Worker.process`` up to the run, which goes to the pool."""
        payload = self.admit(work)
        if payload is None:
            return
        assert self.pool is not None
        assert self.loop_thread is not None
        self.flying[work.raw] = work
        self.reporter.started(work, payload)
        try:
            launched = launch_async(
                self.config,
                self.identity,
                work.queue,
                payload,
                self.loop_thread.loop,
                lambda outcome: self.events.put(("done", (work, payload, outcome))),
                self,
            )
        except Exception:  # a hook failed before the job started: the pool's path runs it as usual
            logger.exception("couldn't start jid=%s as a task; running it from the pool", payload["jid"])
            launched = False
        if not launched:
            self.pool.submit(self._run_one, work, payload)

    def _run_one(self, work: Work, payload: dict[str, Any]) -> None:
        """In a pool thread: the job's outcome goes back to the control thread, whatever happens."""
        outcome: fate.Outcome = fate.NeverStarted()
        try:
            outcome = execute(self.config, self.identity, work.queue, payload, self)
        except HardStop:
            logger.warning("jid=%s abandoned by a stop-now; handing it back", payload["jid"])
        except Exception:  # a bug in the bookkeeping around the run: logged; the outcome stands
            logger.exception("bookkeeping failed around jid=%s", payload["jid"])
        finally:
            self.events.put(("done", (work, payload, outcome)))

    def acknowledge(self, raw: bytes) -> None:
        """At once: the record says the ack is due until it has landed (or is owed)."""
        self.acking.add(raw)
        try:
            super().acknowledge(raw)
        finally:
            self.acking.discard(raw)
            self.reporter.acked(raw)

    def running_raws(self, holding: Iterable[bytes] = ()) -> set[bytes]:
        return set(self.flying) | self.acking | super().running_raws(holding)

    def riding_acks(self) -> tuple[bytes | None, ...]:
        return (*self.acking, *super().riding_acks())
