"""What the worker loop tells its owner (``Reporter``): the default writes stats to Redis
itself; a prefork child's (``prefork/pipe.py``) sends everything to the master over its
pipe and writes its shared-memory slot."""

from __future__ import annotations

from collections import deque
from typing import Any

from ..config import Config
from ..core import fate
from ..lifecycle import stats
from .fetch.fetcher import Fetcher, Work


class Reporter:
    """What the loop tells its owner. The default writes stats to Redis itself; a prefork
    child's reporter sends everything to the master over its pipe."""

    # Hand the counts over as soon as the queues run dry, not only at the once-a-second
    # flush: for an owner that batches the writes itself (the prefork master). This one
    # writes to Redis, so it keeps to once a second.
    stats_when_idle = False

    def __init__(self, config: Config) -> None:
        self.config = config
        self.buffer: dict[str, Any] | None = None

    def ready(self) -> None:
        """The first fetch was made: the process booted fine."""

    def started(self, work: Work, payload: dict[str, Any]) -> None:
        """A job began to run."""

    def finished(self, work: Work, decision: fate.Decision) -> None:
        """A job's run ended with ``decision`` (its settlement, told before the write or
        once it went through: ``Decision.told_after``). What it counts as and whether its
        ack is due are the decision's (``ran``, ``ack_due``), never re-derived here."""

    def acked(self, raw: bytes) -> None:
        """A finished job's ack or completion was written (or is owed: ``pending`` said
        so) at once, not riding on a fetch."""

    def pending(self, raw: bytes, how: fate.Decision) -> None:
        """A settlement could not be written; the worker keeps retrying it."""

    def settled(self, raw: bytes) -> None:
        """A pending settlement went through after all."""

    def stats(self, snap: dict[str, Any]) -> None:
        """Counters gathered since the last call. Raises if it could not be delivered (the worker keeps it)."""
        stats.flush(self.config, snap)

    # Look-ahead: fetching the next job while one runs, so it starts without a round trip.
    # Only a prefork child does it: it has siblings to hand that job to when they run dry.

    def may_look_ahead(self) -> bool:
        """Asked before each job: may the next fetch go out while it runs?"""
        return False

    def looked_ahead(self, number: int, ack_jid: str | None) -> None:
        """Look-ahead fetch ``number`` is about to go out, the ack of ``ack_jid`` riding
        on it; 0: it came back (or never went)."""

    def claim(self, work: Work | None, fetcher: Fetcher) -> Work | None:
        """The look-ahead came back with ``work``: returns it if it is still ours to start
        (a sibling may have taken it meanwhile; ``fetcher`` asks Redis when in doubt)."""
        return work

    def claim_next(self, held: deque[Work], fetcher: Fetcher) -> Work | None:
        """The oldest of ``held`` (a look-ahead's jobs not started), off it, if still ours."""
        return held.popleft() if held else None

    def came_back(self) -> None:
        """The look-ahead's reply was read: the acks riding on it are settled either way."""

    def acks_held(self, jids: list[str]) -> None:
        """Finished jobs whose acks wait for the next fetch (besides the last one's)."""

    def ack_held(self, jid: str | None) -> None:
        """One more finished job whose ack waits for the next fetch: ``acks_held`` with
        the list so far and ``jid`` appended."""

    def waiting(self, fetcher: Fetcher) -> Work | None:
        """Every queue is empty: a job taken over from a sibling, or None (then the loop
        blocks on the queues)."""
        return None

    # Liveness, as another process sees it (a prefork child's master beats for it).

    def vouched_at(self) -> float:
        """``heartbeat.clock()`` when another process last refreshed this identity's beat
        and found it not fenced; read before ``told_fenced``."""
        return float("-inf")

    def told_fenced(self) -> bool:
        """Another process found this identity fenced (declared dead)."""
        return False
