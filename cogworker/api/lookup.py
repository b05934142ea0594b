"""Finding one entry without scanning its set, when the caller knows where it was: a
sorted-set entry by its score (ZRANGE BYSCORE: O(log N) plus the entries sharing that
score), a queue entry near the position it was seen at (a queue entry only moves toward
the end fetch takes from). For the web UI's links from its list pages to ``/job/<jid>``;
``locate`` remains the way when nothing is known (docs/architecture.md#operator-api)."""

from __future__ import annotations

from ..routing import first
from .queues import Queue
from .records import JobRecord
from .sets import JobSet

WINDOW = 200  # entries read around a queue position before falling back to Queue.find


def find_scored(jobset: JobSet, jid: str, score: float) -> JobRecord | None:
    """The entry of ``jid`` with exactly this score (as a page read it), or None (over
    parts: each part's set at that score)."""
    if jobset.merged:
        return first(jobset.parts(), lambda part: find_scored(part, jid, score))
    with jobset._checked():
        rows = jobset.client.zrange(jobset.key, score, score, byscore=True, withscores=True, offset=0, num=100)
    for raw, found_score in rows:  # type: ignore[str-unpack]
        record = jobset._parse(raw, found_score)
        if record.jid == jid:
            return record
    return None


def find_near(queue: Queue, jid: str, position: int) -> JobRecord | None:
    """The entry of ``jid`` at or before ``position`` (0: the next to run), looking at most
    WINDOW entries back from there; None if not there (taken, or moved further)."""
    if not isinstance(position, int) or position < 0:
        return None
    stop, start = position, max(0, position - WINDOW)
    # In fetch order, as the page that gave the position (its levels merged: Queue.jobs).
    for record in queue.jobs(start, stop - start + 1):
        if record.jid == jid:
            return record
    return None
