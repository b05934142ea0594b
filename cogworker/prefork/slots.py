"""What each child is running, in shared memory: one slot per child index.

The child writes its slot at every job start and end; the master reads it when it needs
to (heartbeat, hard timeouts, a child's death). Unlike a pipe message, a write costs no
system call and wakes nobody: per-job reporting stays off the hot path. The pipe
carries only the rare events (ready, pending and settled settlements, gathered stats).

Each slot also counts the jobs its child processed and failed, bumped at each job's end
in the same write: the master adds what changed to ``stats:processed``/``:failed`` at
each stats flush and once more when it reaps the child, so a killed child's counts are
not lost with the stats it had not sent yet.

Each slot is a seqlock: the child makes the sequence odd, writes, makes it even. A
reader that sees an odd or changed sequence got a torn record; after a child's death
that means it died mid-write, and the master then assumes nothing about its jobs.

Look-ahead (a child fetching its next job while one runs) adds two things here:

- ``ahead``: the child has a look-ahead fetch out whose job it has not started, and
  ``ack_jid``, the finished job whose ack rides on that fetch. A dying child's master
  drops ``ack_jid`` and counts an orphaning for the running job only.
- ``started``: how many jobs of that fetch the child started (a look-ahead fetch brings up
  to 32, docs/architecture.md#lookahead-k): the ones not started are the top of its list; and
  ``acks``: finished jobs of the look-ahead whose ack waits for the next fetch (or rides on
  it), which a dying child's master drops as well.
- a lock and a "taken" flag per child, so that a sibling that runs out of work can take
  that not-yet-started job (``take``) instead of idling while it waits behind a long
  job. The owner claims the job under the same lock before starting it (``siblings.py``
  says how the flag and Redis decide who owns it). The locks are ``fcntl`` record locks
  on a shared file: the kernel drops them when their holder dies, so a child killed
  mid-take never blocks its sibling.
"""

from __future__ import annotations

import fcntl
import mmap
import struct
import tempfile
from dataclasses import dataclass

IDLE, RUNNING, ACK_DUE, WAITING = 0, 1, 2, 3  # WAITING: idle, its queues empty
# The "taken" flag: nobody tried to take the job fetched ahead; someone may have (a
# take-over or a return was sent, its answer unknown); it was taken (Redis said so).
CLEAR, TRYING, TAKEN = 0, 1, 2
MAX_SLOTS = 1024

_SEQ = struct.Struct("=Q")
# state, jid, ack_jid, ahead (the look-ahead fetch's number, 0 = none out), deadline
# (0 = none), started_at, class, queue, identity; after the sequence number
_BODY = struct.Struct("=B64s64sQdd120s48s96s")
_STATE = struct.Struct("=B")
# The body written in two parts around ``_AHEAD``: struct packing zeroes what it packs
# first, so a write that packed ack_jid too would leave it blank if killed mid-way.
_HEAD = struct.Struct("=B64s")  # state, jid
_TAIL = struct.Struct("=dd120s48s96s")  # deadline, started_at, class, queue, identity
_AHEAD = struct.Struct("=64sQ")  # ack_jid, ahead
_AHEAD_OFFSET = _SEQ.size + 1 + 64
_TAIL_OFFSET = _AHEAD_OFFSET + _AHEAD.size
_COUNTS = struct.Struct("=QQ")  # processed, failed: cumulative, this child's
_COUNTS_OFFSET = 432  # after the body, 8-aligned
MAX_ACKS = 32  # a look-ahead's acks due (up to K - 1) and riding (up to K), K <= Depth.MAX = 32
_HELD = struct.Struct("=QQ")  # started (of the look-ahead fetch's jobs), how many acks follow
_HELD_OFFSET = 448
_ACKS = struct.Struct("=" + "64s" * MAX_ACKS)
_JID = struct.Struct("=64s")  # one of them
_ACKS_OFFSET = _HELD_OFFSET + _HELD.size
SIZE = 2560  # a multiple of 64: each slot on its own cache lines, seq aligned
assert _SEQ.size + _BODY.size <= _COUNTS_OFFSET and _COUNTS_OFFSET + _COUNTS.size <= _HELD_OFFSET
assert _ACKS_OFFSET + _ACKS.size <= SIZE and _HEAD.size + _AHEAD.size + _TAIL.size == _BODY.size
_HIGH = struct.Struct("=I")  # after the slots and the flags: how many slots are in use
# After that, 8-aligned: when the master's last beat went out (heartbeat.clock()), then one
# "fenced" flag per slot. A child whose master stopped beating beats for itself; one
# declared dead (fenced) is told so through its flag.
_STAMP = struct.Struct("=d")
_CANCEL = struct.Struct("=64s")


@dataclass(frozen=True)
class SlotState:
    state: int
    jid: str
    ack_jid: str
    ahead: int
    deadline: float | None
    started_at: float
    job_class: str
    queue: str
    identity: str
    processed: int = 0
    failed: int = 0
    started: int = 0  # of the look-ahead fetch's jobs
    acks: tuple[str, ...] = ()  # a look-ahead's finished jobs, their acks due or riding


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode("utf-8", "replace")


def _jid(jid: str | None) -> bytes:
    raw = (jid or "").encode()
    return raw if len(raw) <= 64 else b""  # unknowable: the master then treats the job as unknown


class Slots:
    """An anonymous shared mapping made by the master before forking, with the
    children's "taken" flags after the slots and a file for their locks."""

    def __init__(self, count: int = MAX_SLOTS) -> None:
        self.count = count
        self._stamp_at = (count * SIZE + count + _HIGH.size + 7) // 8 * 8
        self._fenced_at = self._stamp_at + _STAMP.size
        # Then one jid per slot: the master heard on its beat that it was cancelled
        # (api.cancel); the child's watchdog tells the job if it is the one running.
        self._cancel_at = (self._fenced_at + count + 7) // 8 * 8
        # MAP_SHARED | MAP_ANONYMOUS: survives fork, shared
        # Then one byte per slot: the shard its child works (the queue layout on a cluster,
        # docs/architecture.md#cluster-layout): siblings of other shards share no list.
        self._shard_at = self._cancel_at + count * _CANCEL.size
        self.mm = mmap.mmap(-1, (self._shard_at + count + 7) // 8 * 8)  # a whole number of 8-byte items (SlotWriter)
        self.lock_file = tempfile.TemporaryFile()  # unlinked: only the inherited descriptor reaches it
        self._lock_fd = self.lock_file.fileno()  # open while self.lock_file is; asked twice per job

    def reset(self, index: int) -> None:
        _SEQ.pack_into(self.mm, index * SIZE, 0)
        _BODY.pack_into(self.mm, index * SIZE + _SEQ.size, IDLE, b"", b"", 0, 0.0, 0.0, b"", b"", b"")
        _COUNTS.pack_into(self.mm, index * SIZE + _COUNTS_OFFSET, 0, 0)
        _HELD.pack_into(self.mm, index * SIZE + _HELD_OFFSET, 0, 0)
        self.mm[self.count * SIZE + index] = 0
        self.mm[self._fenced_at + index] = 0
        _CANCEL.pack_into(self.mm, self._cancel_at + index * _CANCEL.size, b"")
        if index >= self.high():
            _HIGH.pack_into(self.mm, self.count * SIZE + self.count, index + 1)

    def set_shard(self, index: int, shard: int) -> None:
        """The master's, before the fork: which of its shards the child works (< 256)."""
        self.mm[self._shard_at + index] = shard

    def same_shard(self, index: int, other: int) -> bool:
        return self.mm[self._shard_at + index] == self.mm[self._shard_at + other]

    def high(self) -> int:
        """One past the highest slot index ever used: siblings live below it."""
        return _HIGH.unpack_from(self.mm, self.count * SIZE + self.count)[0]

    def writer(self, index: int) -> SlotWriter:
        return SlotWriter(self, index)

    def read(self, index: int) -> SlotState | None:
        """The slot's state, or None if it was torn (being written, or its writer died mid-write)."""
        offset = index * SIZE
        for _ in range(3):
            seq = _SEQ.unpack_from(self.mm, offset)[0]
            state, jid, ack_jid, ahead, deadline, started_at, cls, queue, identity = _BODY.unpack_from(
                self.mm, offset + _SEQ.size
            )
            processed, failed = _COUNTS.unpack_from(self.mm, offset + _COUNTS_OFFSET)
            started, count = _HELD.unpack_from(self.mm, offset + _HELD_OFFSET)
            acks = _ACKS.unpack_from(self.mm, offset + _ACKS_OFFSET)[: min(count, MAX_ACKS)] if count else ()
            if seq % 2 == 0 and _SEQ.unpack_from(self.mm, offset)[0] == seq:
                return SlotState(
                    state,
                    _text(jid),
                    _text(ack_jid),
                    ahead,
                    deadline or None,
                    started_at,
                    _text(cls),
                    _text(queue),
                    _text(identity),
                    processed,
                    failed,
                    started,
                    tuple(_text(a) for a in acks),
                )
        return None

    def salvage(self, index: int) -> tuple[str, ...]:
        """The jobs a child that died mid-write of its slot had run, its acks not yet
        landed: the ack riding on its look-ahead fetch and the look-ahead's acks listed. Read
        without the sequence check, and still right after any interrupted write: an ack is
        written before the count that lists it (``ack_held``, ``acks``), the count is one
        8-byte store, and a write leaves alone the fields it doesn't change (``write``
        packs around ``ack_jid``: a pack zeroes its fields first); a half-written
        ``ack_jid`` names no job. Unknown still: the running job, and the last one if the
        write that listed it was cut; those may run again."""
        offset = index * SIZE
        ack_jid = _AHEAD.unpack_from(self.mm, offset + _AHEAD_OFFSET)[0]
        count = min(_HELD.unpack_from(self.mm, offset + _HELD_OFFSET)[1], MAX_ACKS)
        acks = _ACKS.unpack_from(self.mm, offset + _ACKS_OFFSET)[:count]
        return tuple(jid for jid in (_text(ack_jid), *(_text(a) for a in acks)) if jid)

    def counts(self, index: int) -> tuple[int, int]:
        """The processed and failed counters, unchecked (for a slot read as torn: they
        only ever grow, and are written after the state in the same write)."""
        return _COUNTS.unpack_from(self.mm, index * SIZE + _COUNTS_OFFSET)

    def state_hint(self, index: int) -> int:
        """A slot's state byte, unlocked and unchecked: a cheap hint, not a record."""
        return self.mm[index * SIZE + _SEQ.size]

    # -- liveness: the master's last beat, and who was declared dead ----------------------

    def stamp_beat(self, at: float) -> None:
        """The master's beat sent at ``at`` went through (children it found fenced are
        flagged before this is written)."""
        _STAMP.pack_into(self.mm, self._stamp_at, at)

    def master_beat(self) -> float:
        """When the master's last beat went out; read twice, so a torn read can't pass."""
        while True:
            first = _STAMP.unpack_from(self.mm, self._stamp_at)[0]
            if _STAMP.unpack_from(self.mm, self._stamp_at)[0] == first:
                return first

    def set_fenced(self, index: int) -> None:
        self.mm[self._fenced_at + index] = 1

    def fenced(self, index: int) -> bool:
        return self.mm[self._fenced_at + index] == 1

    def set_cancelled(self, index: int, jid: str) -> None:
        """The master's: ``jid`` (which that child ran at the beat) was cancelled."""
        _CANCEL.pack_into(self.mm, self._cancel_at + index * _CANCEL.size, _jid(jid))

    def cancelled(self, index: int) -> str:
        """The last jid the master said was cancelled, or "" (a torn read is a jid that
        matches nothing, read right 0.2 s later)."""
        return _text(_CANCEL.unpack_from(self.mm, self._cancel_at + index * _CANCEL.size)[0])

    # -- the per-child lock and "taken" flag (look-ahead hand-over) ------------------------

    def lock(self, index: int) -> None:
        fcntl.lockf(self._lock_fd, fcntl.LOCK_EX, 1, index)

    def unlock(self, index: int) -> None:
        fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, index)

    def taken(self, index: int) -> int:
        """CLEAR, TRYING or TAKEN (read and written under that child's lock)."""
        return self.mm[self.count * SIZE + index]

    def set_taken(self, index: int, value: int) -> None:
        self.mm[self.count * SIZE + index] = value


class SlotWriter:
    """A child's end: its slot is only ever written by that one child."""

    def __init__(self, slots: Slots, index: int) -> None:
        self.slots = slots
        self.index = index
        self.mm = slots.mm
        self.offset = index * SIZE
        self.seq = _SEQ.unpack_from(self.mm, self.offset)[0]
        self.identity = b""
        self.ahead_number = 0  # the look-ahead fetch out (as written by ``ahead``)
        self.started = 0  # how many of its jobs were started (as written by ``ahead``/``start_one``)
        self.processed, self.failed = _COUNTS.unpack_from(self.mm, self.offset + _COUNTS_OFFSET)
        # A mirror of what only this writer writes (per job, kept here rather than read back):
        # the acks listed.
        self.acks_count = int(_HELD.unpack_from(self.mm, self.offset + _HELD_OFFSET)[1])
        # The sequence number, and the look-ahead's started and acks counts, as 8-byte items (the
        # slot is 8-aligned): each one store, cheaper than a pack_into and never seen blank.
        self._seqs = memoryview(self.mm).cast("Q")
        self._seq_at = self.offset // _SEQ.size
        self._started_at = (self.offset + _HELD_OFFSET) // 8
        self._count_at = self._started_at + 1

    def begin(self, identity: str) -> None:
        self.identity = identity.encode()[:96]
        self.write(IDLE)

    def write(
        self,
        state: int,
        jid: str = "",
        deadline: float | None = None,
        started_at: float = 0.0,
        job_class: str = "",
        queue: str = "",
    ) -> None:
        """A job starts (RUNNING), or the child has none (IDLE, WAITING); keeps ``ahead``
        and ``ack_jid`` (not written: see ``Slots.salvage``)."""
        self._begin()
        _HEAD.pack_into(self.mm, self.offset + _SEQ.size, state, _jid(jid))
        _TAIL.pack_into(
            self.mm,
            self.offset + _TAIL_OFFSET,
            deadline or 0.0,
            started_at,
            job_class.encode()[:120],
            queue.encode()[:48],
            self.identity,
        )
        self._end()

    def finished(self, ack_due: bool, ran: bool | None = None) -> None:
        """Keeps the jid when the ack is due (the master must drop that entry if we die).
        ``ran``: the job succeeded (True) or failed (False), counted; None: it didn't run."""
        self._begin()
        _STATE.pack_into(self.mm, self.offset + _SEQ.size, ACK_DUE if ack_due else IDLE)
        if ran is not None:
            if ran:
                self.processed += 1
            else:
                self.failed += 1
            _COUNTS.pack_into(self.mm, self.offset + _COUNTS_OFFSET, self.processed, self.failed)
        self._end()

    def ahead(self, number: int, ack_jid: str | None = None) -> None:
        """Look-ahead fetch ``number`` went out, ``ack_jid`` (the previous job) riding on
        it; or (0) it came back, which settles that ack either way."""
        self.ahead_number = number
        self.started = 0
        self._begin()
        self._set_ahead(_jid(ack_jid) if number else b"", number)
        self._seqs[self._started_at] = 0
        self._end()

    def came_back(self) -> None:
        """The look-ahead fetch's reply was read: the acks riding on it are settled
        (landed, or owed: the pipe said so); its jobs not started stay under ``ahead``."""
        self._begin()
        self._set_ahead(b"", self.ahead_number)
        self.acks_count = 0
        self._seqs[self._count_at] = 0
        self._seqs[self._started_at] = self.started
        self._end()

    def start_one(self) -> None:
        """One more of the look-ahead fetch's jobs claimed (the caller holds our lock)."""
        self.started += 1
        self._begin()
        self._seqs[self._started_at] = self.started
        self._end()

    def acks(self, jids: list[str]) -> None:
        """The look-ahead's finished jobs whose acks are due or riding (``came_back`` clears them)."""
        jids = jids[:MAX_ACKS]
        self._begin()
        # Unlisted first: a child killed mid-way leaves no count over entries being replaced.
        self._seqs[self._count_at] = 0
        _ACKS.pack_into(
            self.mm, self.offset + _ACKS_OFFSET, *(_jid(j) for j in jids), *([b""] * (MAX_ACKS - len(jids)))
        )
        self.acks_count = len(jids)
        self._seqs[self._count_at] = len(jids)
        self._end()

    def ack_held(self, jid: str | None) -> None:
        """One more finished job of the look-ahead whose ack is due: ``acks`` with it appended.
        Written alone (the entries before it are in place), not the whole list again: a
        look-ahead of K would rewrite K^2/2 jids (docs/architecture.md#lookahead-k)."""
        count = self.acks_count
        if count >= MAX_ACKS:
            return  # as ``acks``: the first MAX_ACKS are listed
        self._begin()
        _JID.pack_into(self.mm, self.offset + _ACKS_OFFSET + count * _JID.size, _jid(jid))
        self.acks_count = count + 1
        self._seqs[self._count_at] = count + 1  # after its entry: see ``Slots.salvage``
        self._end()

    def _set_ahead(self, ack_jid: bytes, number: int) -> None:
        _AHEAD.pack_into(self.mm, self.offset + _AHEAD_OFFSET, ack_jid, number)

    def _begin(self) -> None:
        self.seq += 1
        self._seqs[self._seq_at] = self.seq  # odd: being written

    def _end(self) -> None:
        self.seq += 1
        self._seqs[self._seq_at] = self.seq
