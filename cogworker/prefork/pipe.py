"""Child -> master messages, over ``multiprocessing.connection`` (length-prefixed pickles).

The master thus knows at every moment what each child runs and what it still owes
Redis, so a child's death can be settled exactly:

- ``("ready",)``: the child booted (Redis answered, its identity is registered);
- ``("pending", jid, how)``: a settlement the child could not make: a ``fate`` decision
  (an ack, or a failure record to file) as ``Decision.to_wire()`` gives it;
- ``("settled", jid)``: a pending settlement went through;
- ``("stats", snapshot)``: counters gathered, at most once a second (the master takes
  the processed/failed totals from the child's slot instead, which survive its death);
- ``("metrics", snapshot)``: with ``--metrics-port``, the job counts and durations the
  child counted since its last delta (``jobmetrics``), sent right after its stats and
  by its watchdog thread at most once a second.

What a child runs now (started; finished, with its ack due or not) is not sent: it is
written to the child's shared-memory slot (``slots.py``), which costs the hot path no
system call and wakes nobody. Jobs are named by jid, never sent whole.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from multiprocessing.connection import Connection, Pipe
from typing import Any

from setproctitle import setproctitle

from ..config import Config
from ..core import fate
from ..engine.execute import deadline_of
from ..engine.fetch.fetcher import Fetcher, Work, jid_of
from ..engine.loop import Reporter
from ..metrics import jobcounts as jobmetrics
from .siblings import Siblings
from .slots import RUNNING, WAITING, Slots, SlotWriter

Message = tuple[Any, ...]


def make_pipe() -> tuple[Connection, Connection]:
    """(master's reading end, child's writing end)."""
    reader, writer = Pipe(duplex=False)
    return reader, writer


class PipeReporter(Reporter):
    """A child's reporter: everything goes to the master. Once the master is gone (the
    pipe breaks), stats are written to Redis directly and the rest is dropped: the child
    then settles and hands over everything itself before it exits."""

    stats_when_idle = True  # a pipe message; the master still writes at most once a second

    def __init__(self, config: Any, conn: Connection, slot: SlotWriter, siblings: Siblings | None = None) -> None:
        super().__init__(config)
        self.conn = conn
        self.slot = slot
        self.siblings = siblings  # None: no look-ahead
        self.orphaned = False
        # The watchdog thread sends the metrics delta too: one message at a time on the pipe.
        self.send_lock = threading.Lock()

    def _send(self, message: Message) -> bool:
        if self.orphaned:
            return False
        try:
            with self.send_lock:
                self.conn.send(message)
            return True
        except (OSError, EOFError, ValueError):
            self.orphaned = True
            return False

    def ship_metrics(self) -> None:
        """The job counts since the last delta (``jobmetrics``), if any: from the stats
        flush, and from the watchdog once a second (so a long job, or a kill, holds back
        at most a second of them)."""
        counted = jobmetrics.take()  # None unless --metrics-port
        if counted is not None:
            self._send(("metrics", counted))

    def ready(self) -> None:
        self._send(("ready",))

    def started(self, work: Any, payload: dict[str, Any]) -> None:
        self.slot.write(RUNNING, payload["jid"], deadline_of(payload), time.time(), payload["class"], work.queue)

    def finished(self, work: Any, decision: fate.Decision) -> None:
        # As the decision has it: whether its ack is due (a death drops the entry, never
        # requeues it) and what the run counts as, in the slot, where the master reads it
        # even if this process is killed before its stats go out.
        self.slot.finished(ack_due=decision.ack_due, ran=decision.ran)

    def may_look_ahead(self) -> bool:
        return self.siblings is not None and not self.orphaned and not self.siblings.any_waiting()

    def looked_ahead(self, number: int, ack_jid: str | None) -> None:
        self.slot.ahead(number, ack_jid)

    def claim(self, work: Work | None, fetcher: Fetcher) -> Work | None:
        if self.siblings is None:
            self.slot.ahead(0)
            return work
        return self.siblings.claim(work, fetcher)

    def claim_next(self, held: deque[Work], fetcher: Fetcher) -> Work | None:
        if self.siblings is None:
            return super().claim_next(held, fetcher)
        return self.siblings.claim_next(held, fetcher)

    def came_back(self) -> None:
        self.slot.came_back()

    def acks_held(self, jids: list[str]) -> None:
        self.slot.acks(jids)

    def ack_held(self, jid: str | None) -> None:
        self.slot.ack_held(jid)

    def waiting(self, fetcher: Fetcher) -> Work | None:
        self.slot.write(WAITING)
        return self.siblings.take(fetcher) if self.siblings is not None else None

    def vouched_at(self) -> float:
        return self.slot.slots.master_beat()

    def told_fenced(self) -> bool:
        return self.slot.slots.fenced(self.slot.index)

    def pending(self, raw: bytes, how: fate.Decision) -> None:
        self._send(("pending", jid_of(raw), how.to_wire()))

    def settled(self, raw: bytes) -> None:
        self._send(("settled", jid_of(raw)))

    def stats(self, snap: dict[str, Any]) -> None:
        if not self._send(("stats", snap)):
            super().stats(snap)  # the master is gone: write them ourselves
        self.ship_metrics()


class TitledReporter(PipeReporter):
    """Keeps the process title saying what the child does (``ps`` is the first tool an
    operator reaches for)."""

    def __init__(self, config: Config, conn: Connection, slots: Slots, index: int, lookahead: bool) -> None:
        slot = slots.writer(index)
        super().__init__(config, conn, slot, Siblings(slots, slot) if lookahead else None)
        self.index = index
        self.stopping = False

    def title(self, state: str) -> None:
        setproctitle(f"cogworker: child {self.index} {'stopping' if self.stopping else state}")

    def started(self, work: Any, payload: dict[str, Any]) -> None:
        super().started(work, payload)
        self.title(f"busy {payload['class']} jid={payload['jid']}")

    def finished(self, work: Any, decision: fate.Decision) -> None:
        super().finished(work, decision)
        self.title("idle")
