"""A prefork child with M jobs in flight (``--concurrency`` M > 1;
docs/architecture.md#concurrency): its reporter writes one shared-memory entry per job
(``flight_slots.py``) instead of the slot's one running job, and the child runs
``FlightWorker`` instead of ``Worker``. The slot keeps the child's identity, its
counters and its fenced flag; its one-job fields stay empty."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any

from ..config import Config
from ..core import fate
from ..engine.execute import deadline_of
from ..engine.flights import FlightWorker
from .flight_slots import FlightSlots
from .pipe import TitledReporter
from .slots import Slots


class FlightReporter(TitledReporter):
    """Called from the child's control thread only (``FlightWorker``): no lock."""

    def __init__(
        self, config: Config, conn: Connection, slots: Slots, index: int, flights: FlightSlots, concurrency: int
    ) -> None:
        super().__init__(config, conn, slots, index, lookahead=False)
        self.flights = flights.writer(index)
        self.concurrency = concurrency

    def started(self, work: Any, payload: dict[str, Any]) -> None:
        self.flights.running(work.raw, payload["jid"], deadline_of(payload), time.time(), payload["class"], work.queue)
        self._busy()

    def finished(self, work: Any, decision: fate.Decision) -> None:
        # A success (``ran``): ACK_DUE until ``acked``; anything else is settled (or never
        # ran); a failure is counted in the slot.
        ran = decision.ran
        if ran:
            self.flights.ack_due(work.raw)
            self.slot.finished(ack_due=False, ran=True)
        else:
            self.flights.free_entry(work.raw)
            if ran is False:
                self.slot.finished(ack_due=False, ran=False)
        self._busy()

    def acked(self, raw: bytes) -> None:
        self.flights.free_entry(raw)
        self._busy()

    def _busy(self) -> None:
        n = self.flights.in_flight
        self.title(f"busy {n}/{self.concurrency}" if n else "idle")


def flight_worker(
    queues: list[tuple[str, int | None]], config: Config, identity: str, reporter: FlightReporter, max_jobs: int | None
) -> FlightWorker:
    return FlightWorker(
        queues, concurrency=reporter.concurrency, config=config, identity=identity, reporter=reporter, max_jobs=max_jobs
    )
