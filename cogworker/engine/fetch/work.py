"""A fetched job, as every fetch strategy hands it to the loop; a look-ahead fetch in
flight, and what a MULTI fetch (the fast fetch, the batch's while the lease holds) sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ...core.inprogress import jid_of
from ...store import replication

# Pushed on the list just before a MULTI fetch's moves and removed by its script in the
# same MULTI: where the script finds it says how many jobs they moved. A batch's is
# MARK:<fetch number>, its own (engine/fetch/batch.py).
MARK = b"\x00cogworker:fetch-mark"


@dataclass(frozen=True)
class Fast:
    """A fast fetch sent: how many commands were queued in its MULTI, and its script's
    keys and arguments (to run it again after NOSCRIPT)."""

    queued: int
    keys: list[Any]
    args: list[Any]


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
    acks: tuple[bytes, ...] = ()  # a batch fetch (fetch_batch.lua): every ack riding on it
    batch: bool = False
    since: str = ""  # the known-empty queues' wake ID it was sent with (EmptyQueues.plan)
    k: int = 1  # jobs asked for
    need: replication.Need | None = None  # wait_replicas: a WAIT was sent after the fetch
