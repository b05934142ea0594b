"""What each child runs when it runs several jobs at once (``--concurrency`` M > 1), in
shared memory: M entries per child, next to its slot (``slots.py``, which keeps its
identity, counters and the fenced flag). docs/architecture.md#concurrency.

An entry is one job in flight: RUNNING (its jid, deadline, start, class, queue), or
ACK_DUE (it succeeded, its ack not yet written: a death now drops it, never re-runs it),
or FREE. Only the child writes its own entries, from the one thread that settles its
jobs; each entry is a seqlock like a slot. A reader that finds one torn after the
child's death assumes nothing about which jobs ran (an orphaning is counted for every
job on its list, as for a torn slot), but keeps every other entry, and a torn entry whose
state reads ACK_DUE is still that job's ack: only ``ack_due`` writes that state, a single
byte, and the jid beside it is rewritten only by ``running``, over a FREE entry (``free_entry``
writes the state byte alone, for that reason: ``struct.pack_into`` zeroes what it packs first).

Fetched but not started is no state here: such a job is on the child's list and in no
entry, so a dead child's master requeues it without counting an orphaning.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

FREE, RUNNING, ACK_DUE = 0, 1, 2

_SEQ = struct.Struct("=Q")
# state, jid, deadline (0 = none), started_at, class, queue
_BODY = struct.Struct("=B64sdd64s48s")
SIZE = 256  # 8-aligned, each entry on its own cache lines
assert _SEQ.size + _BODY.size <= SIZE


@dataclass(frozen=True)
class Flight:
    state: int
    jid: str
    deadline: float | None
    started_at: float
    job_class: str
    queue: str


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode("utf-8", "replace")


class FlightSlots:
    """An anonymous shared mapping made by the master before forking: ``per_child``
    entries for each of ``count`` child indexes (untouched pages cost no memory)."""

    def __init__(self, per_child: int, count: int) -> None:
        self.per_child = per_child
        self.count = count
        self.mm = mmap.mmap(-1, per_child * count * SIZE)

    def _offset(self, index: int, entry: int) -> int:
        return (index * self.per_child + entry) * SIZE

    def reset(self, index: int) -> None:
        start = self._offset(index, 0)
        self.mm[start : start + self.per_child * SIZE] = bytes(self.per_child * SIZE)

    def read(self, index: int) -> tuple[list[Flight], bool]:
        """The child's jobs in flight (RUNNING or ACK_DUE), and whether an entry was torn
        (being written, or its writer died mid-write) with its job unknown."""
        found: list[Flight] = []
        torn = False
        for entry in range(self.per_child):
            offset = self._offset(index, entry)
            if self.mm[offset + _SEQ.size] == FREE and _SEQ.unpack_from(self.mm, offset)[0] % 2 == 0:
                continue  # the common case, read cheaply
            for _ in range(3):
                seq = _SEQ.unpack_from(self.mm, offset)[0]
                flight = self._entry(offset)
                if seq % 2 == 0 and _SEQ.unpack_from(self.mm, offset)[0] == seq:
                    break
            else:
                flight = self._entry(offset)
                if flight is None or flight.state != ACK_DUE:  # see the module's docstring
                    torn = True
                    continue
            if flight is not None:
                found.append(flight)
        return found, torn

    def _entry(self, offset: int) -> Flight | None:
        state, jid, deadline, started_at, cls, queue = _BODY.unpack_from(self.mm, offset + _SEQ.size)
        if state == FREE:
            return None
        return Flight(state, _text(jid), deadline or None, started_at, _text(cls), _text(queue))

    def writer(self, index: int) -> FlightWriter:
        return FlightWriter(self, index)


class FlightWriter:
    """A child's end: picks a free entry for each job it starts (its one settling thread
    calls it, so no lock)."""

    def __init__(self, flights: FlightSlots, index: int) -> None:
        self.flights = flights
        self.mm = flights.mm
        self.index = index
        self.free = list(range(flights.per_child - 1, -1, -1))
        self.used: dict[bytes, int] = {}  # the job as fetched -> its entry
        self.seqs = [0] * flights.per_child

    def running(
        self, key: bytes, jid: str, deadline: float | None, started_at: float, job_class: str, queue: str
    ) -> None:
        raw = jid.encode()
        entry = self.free.pop()
        self.used[key] = entry
        # A jid too long to hold is written empty: the master then counts every job (unknown).
        self._write(
            entry,
            RUNNING,
            raw if len(raw) <= 64 else b"",
            deadline or 0.0,
            started_at,
            job_class.encode()[:64],
            queue.encode()[:48],
        )

    def ack_due(self, key: bytes) -> None:
        entry = self.used.get(key)
        if entry is not None:
            offset = self.flights._offset(self.index, entry)
            self._begin(entry, offset)
            self.mm[offset + _SEQ.size] = ACK_DUE
            self._end(entry, offset)

    def free_entry(self, key: bytes) -> None:
        entry = self.used.pop(key, None)
        if entry is not None:
            offset = self.flights._offset(self.index, entry)
            self._begin(entry, offset)
            self.mm[offset + _SEQ.size] = FREE  # the state alone: see the module's docstring
            self._end(entry, offset)
            self.free.append(entry)

    @property
    def in_flight(self) -> int:
        return len(self.used)

    def _write(
        self, entry: int, state: int, jid: bytes, deadline: float, started_at: float, cls: bytes, queue: bytes
    ) -> None:
        offset = self.flights._offset(self.index, entry)
        self._begin(entry, offset)
        _BODY.pack_into(self.mm, offset + _SEQ.size, state, jid, deadline, started_at, cls, queue)
        self._end(entry, offset)

    def _begin(self, entry: int, offset: int) -> None:
        self.seqs[entry] += 1
        _SEQ.pack_into(self.mm, offset, self.seqs[entry])  # odd: being written

    def _end(self, entry: int, offset: int) -> None:
        self.seqs[entry] += 1
        _SEQ.pack_into(self.mm, offset, self.seqs[entry])
