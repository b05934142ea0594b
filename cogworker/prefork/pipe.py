"""Child -> master messages, over ``multiprocessing.connection`` (length-prefixed pickles).

The master thus knows at every moment what each child runs and what it still owes
Redis, so a child's death can be settled exactly:

- ``("ready",)``: the first fetch was made (the child booted fine);
- ``("started", raw, jid, class, queue, deadline, started_at)``;
- ``("finished", disposition)``: the job last started is over; ``"ack"`` means it ran
  and only its ack is due (it rides on the child's next fetch): if the child dies now,
  drop the entry;
- ``("pending", raw, how)``: a settlement the child could not make: ``"ack"``, or a
  failure record ``(zset, score, entry)`` to file;
- ``("settled", raw)``: a pending settlement went through;
- ``("stats", snapshot)``: batched counters.
"""

from __future__ import annotations

from multiprocessing.connection import Connection, Pipe
from typing import Any

from ..settle import ACK, Filing
from ..worker import Reporter

Message = tuple[Any, ...]


def make_pipe() -> tuple[Connection, Connection]:
    """(master's reading end, child's writing end)."""
    reader, writer = Pipe(duplex=False)
    return reader, writer


def encode_how(how: str | Filing) -> Any:
    return ACK if how == ACK else (how.zset, how.score, how.entry)  # type: ignore[union-attr]


def decode_how(how: Any) -> str | Filing:
    if how == ACK:
        return ACK
    zset, score, entry = how
    return Filing(zset, score, entry, retrying=False)


class PipeReporter(Reporter):
    """A child's reporter: everything goes to the master. Once the master is gone (the
    pipe breaks), stats are written to Redis directly and the rest is dropped: the child
    then settles and hands over everything itself before it exits."""

    def __init__(self, config: Any, conn: Connection) -> None:
        super().__init__(config)
        self.conn = conn
        self.orphaned = False

    def _send(self, message: Message) -> bool:
        if self.orphaned:
            return False
        try:
            self.conn.send(message)
            return True
        except (OSError, EOFError, ValueError):
            self.orphaned = True
            return False

    def ready(self) -> None:
        self._send(("ready",))

    def started(self, work: Any, payload: dict[str, Any], deadline: float | None) -> None:
        import time

        self._send(("started", work.raw, payload["jid"], payload["class"], work.queue, deadline, time.time()))

    def finished(self, work: Any, disposition: str) -> None:
        self._send(("finished", disposition))

    def pending(self, raw: bytes, how: str | Filing) -> None:
        self._send(("pending", raw, encode_how(how)))

    def settled(self, raw: bytes) -> None:
        self._send(("settled", raw))

    def stats(self, snap: dict[str, Any]) -> None:
        if not self._send(("stats", snap)):
            super().stats(snap)  # the master is gone: write them ourselves
