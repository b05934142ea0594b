"""A fetched job, as every fetch strategy hands it to the loop; a look-ahead fetch in
flight, and what a MULTI fetch (the fast fetch, a look-ahead of K's while the lease holds) sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict

from ...core.inprogress import jid_of
from ...store import replication
from ...transitions.call import Call

# Pushed on the list just before a MULTI fetch's moves and removed by its script in the
# same MULTI: where the script finds it says how many jobs they moved. A look-ahead of K's is
# MARK:<fetch number>, its own (engine/fetch/ahead.py).
MARK = b"\x00cogworker:fetch-mark"


class Fixed(NamedTuple):
    """The KEYS and ARGV that are the same at every fetch of one identity (fetch.lua and the
    look-ahead's two scripts), encoded once (``Fetcher._fixed``)."""

    in_progress: bytes
    fence: bytes
    last_beat: bytes
    wake: bytes
    paused: bytes
    ahead: bytes
    identity: bytes
    queue_prefix: bytes

    def ahead_args(self, owner: str, number: int) -> AheadArgs:
        """Spread into either look-ahead script's call, with this fetch's ``owner`` and ``number``."""
        return AheadArgs(
            in_progress=self.in_progress,
            fence=self.fence,
            last_beat=self.last_beat,
            wake=self.wake,
            paused=self.paused,
            ahead=self.ahead,
            owner=owner,
            number=number,
            identity=self.identity,
            queue_prefix=self.queue_prefix,
        )


class AheadArgs(TypedDict):
    """The keys and arguments both look-ahead scripts take alike (``Fixed.ahead_args``)."""

    in_progress: bytes
    fence: bytes
    last_beat: bytes
    wake: bytes
    paused: bytes
    ahead: bytes
    owner: str
    number: int
    identity: bytes
    queue_prefix: bytes


@dataclass(frozen=True)
class Fast:
    """A fast fetch sent: how many commands were queued in its MULTI, its script's call
    (to run it again after NOSCRIPT), and the position in the order of the queue its
    plain moves came from."""

    queued: int
    call: Call
    guess: int = 0


class Work(NamedTuple):
    """A fetched job: the entry exactly as it was on the queue, and that queue's name.
    (A named tuple, immutable: made per job, at about half a frozen dataclass's cost.)"""

    raw: bytes
    queue: str

    def jid(self) -> str:
        return jid_of(self.raw)


@dataclass
class Ahead:
    """A fetch sent before the running job ends (look-ahead): its reply waits in the
    socket until the job is done, so the next job starts without a round trip. The
    connection is held out of the pool meanwhile (the job may use the client too)."""

    conn: Any
    order: list[str]
    ack: bytes | None  # the previous job's ack, riding along: unknown whether it landed until read
    sent_at: float = 0.0  # clock() when sent: a reply proves this identity was alive then
    fast: Fast | None = None  # sent as a fast fetch
    acks: tuple[bytes, ...] = ()  # a fetch of K (fetch_ahead.lua): every ack riding on it
    many: bool = False  # a fetch of K (fetch_ahead.lua, or its MULTI), even K = 1
    since: str = ""  # the known-empty queues' wake ID it was sent with (EmptyQueues.plan)
    k: int = 1  # jobs asked for
    need: replication.Need | None = None  # wait_replicas: a WAIT was sent after the fetch
    riders: tuple[Call, ...] = ()  # best-effort writes sent in front of it (a unique lock's release)
