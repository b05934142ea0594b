"""What each child is running, in shared memory: one slot per child index.

The child writes its slot at every job start and end; the master reads it when it needs
to (heartbeat, hard timeouts, a child's death). Unlike a pipe message, a write costs no
system call and wakes nobody: per-job reporting stays off the hot path. The pipe
carries only the rare events (ready, pending and settled settlements, batched stats).

Each slot is a seqlock: the child makes the sequence odd, writes, makes it even. A
reader that sees an odd or changed sequence got a torn record; after a child's death
that means it died mid-write, and the master then assumes nothing about its jobs.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

IDLE, RUNNING, ACK_DUE = 0, 1, 2
MAX_SLOTS = 1024

_SEQ = struct.Struct("=Q")
# state, jid, deadline (0 = none), started_at, class, queue; after the sequence number
_BODY = struct.Struct("=B64sdd120s48s")
_STATE = struct.Struct("=B")
assert _SEQ.size + _BODY.size <= 320
SIZE = 320  # >= _SEQ.size + _BODY.size, a multiple of 64: each slot on its own cache lines, seq aligned


@dataclass(frozen=True)
class SlotState:
    state: int
    jid: str
    deadline: float | None
    started_at: float
    job_class: str
    queue: str


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode("utf-8", "replace")


class Slots:
    """An anonymous shared mapping made by the master before forking."""

    def __init__(self, count: int = MAX_SLOTS) -> None:
        self.count = count
        self.mm = mmap.mmap(-1, count * SIZE)  # MAP_SHARED | MAP_ANONYMOUS: survives fork, shared

    def reset(self, index: int) -> None:
        _SEQ.pack_into(self.mm, index * SIZE, 0)
        _BODY.pack_into(self.mm, index * SIZE + _SEQ.size, IDLE, b"", 0.0, 0.0, b"", b"")

    def writer(self, index: int) -> SlotWriter:
        return SlotWriter(self.mm, index * SIZE)

    def read(self, index: int) -> SlotState | None:
        """The slot's state, or None if it was torn (being written, or its writer died mid-write)."""
        offset = index * SIZE
        for _ in range(3):
            seq = _SEQ.unpack_from(self.mm, offset)[0]
            state, jid, deadline, started_at, cls, queue = _BODY.unpack_from(self.mm, offset + _SEQ.size)
            if seq % 2 == 0 and _SEQ.unpack_from(self.mm, offset)[0] == seq:
                return SlotState(state, _text(jid), deadline or None, started_at, _text(cls), _text(queue))
        return None


class SlotWriter:
    """A child's end: only ever written by that one child."""

    def __init__(self, mm: mmap.mmap, offset: int) -> None:
        self.mm = mm
        self.offset = offset
        self.seq = _SEQ.unpack_from(mm, offset)[0]

    def write(self, state: int, jid: str = "", deadline: float | None = None, started_at: float = 0.0,
              job_class: str = "", queue: str = "") -> None:
        jid_bytes = jid.encode()
        if len(jid_bytes) > 64:
            jid_bytes = b""  # unknowable: the master then treats the job as unknown, conservatively
        self._begin()
        _BODY.pack_into(self.mm, self.offset + _SEQ.size, state, jid_bytes, deadline or 0.0, started_at,
                        job_class.encode()[:120], queue.encode()[:48])
        self._end()

    def finished(self, ack_due: bool) -> None:
        """Keeps the jid when the ack is due (the master must drop that entry if we die)."""
        self._begin()
        _STATE.pack_into(self.mm, self.offset + _SEQ.size, ACK_DUE if ack_due else IDLE)
        self._end()

    def _begin(self) -> None:
        self.seq += 1
        _SEQ.pack_into(self.mm, self.offset, self.seq)  # odd: being written

    def _end(self) -> None:
        self.seq += 1
        _SEQ.pack_into(self.mm, self.offset, self.seq)
