"""A fetched job, as every fetch strategy hands it to the loop."""

from __future__ import annotations

from typing import NamedTuple

from ...core.inprogress import jid_of


class Work(NamedTuple):
    """A fetched job: the entry exactly as it was on the queue, and that queue's name.
    (A named tuple, immutable: made per job, at about half a frozen dataclass's cost.)"""

    raw: bytes
    queue: str

    def jid(self) -> str:
        return jid_of(self.raw)
