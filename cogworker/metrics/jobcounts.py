"""Job counts and durations for the Prometheus exporter (docs/architecture.md#metrics), as a
lifecycle hook subscriber: each process counts the transitions it makes into an in-memory
``JobMetrics``; no Redis call, no message per job.

A prefork child ships what it counted to its master with its stats (at most once a
second, and when its queues run dry: ``prefork/pipe.py``); the master's own transitions
(hard-timed-out and orphaned jobs, periodic fires) are counted in the master. Off unless
``enable()`` was called (``--metrics-port``): then nothing subscribes and nothing is counted.

Every job transition counts once, under one ``outcome``:

- ``succeeded``: its run succeeded;
- ``retried``: its run raised, a retry is scheduled;
- ``dead``: its run raised with no retries left: moved to the dead set;
- ``timed_out``: its timeout ended it (``JobTimeout``, or killed past it); then retried or dead;
- ``interrupted``: its run ended by a stop-now, or its failure could not be filed;
- ``orphaned``: its process died running it; it was requeued;
- ``failed``: it could not run at all (unreadable payload, or orphaned too often): dead.

Durations are those of runs (succeeded, retried, dead, interrupted), in seconds.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import threading
from typing import Any

from ..core import hooks
from ..errors import JobTimeout

# 1 ms to 10 min (the contract), roughly x2.5 apart.
BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
OUTCOMES = ("succeeded", "failed", "retried", "dead", "orphaned", "interrupted", "timed_out", "expired")
OTHER = "other"
MAX_CLASSES = 500
# A label value (job class, queue, periodic entry) is at most this long: a longer one is cut
# and ends in a hash of the whole, so two long names stay two series. 500 classes of 8,000
# characters made an 89 MB body; with this cap and CELLS_PER_CLASS the body stays a few MB.
MAX_LABEL = 120
_HASH_HEX = 12
# (queue, class) pairs kept, per admitted class (a class on several queues); past it: other/other.
CELLS_PER_CLASS = 2

_BY_REASON = {
    "requested": "retried",
    "timed_out": "timed_out",
    "interrupted": "interrupted",
    "bad_payload": "failed",
    "process_died": "failed",
}

Counts = dict[tuple[str, str, str], float]  # (queue, job_class, outcome) -> count
# (queue, job_class) -> [count per bucket (not cumulative; the last one is +Inf)..., sum of seconds]
Durations = dict[tuple[str, str], list[float]]
Cells = dict[tuple[str, str], list[float]]

_OUTCOME_AT = {name: i for i, name in enumerate(OUTCOMES)}
_BUCKETS_AT = len(OUTCOMES)
# A cell, per (queue, job class): a count per outcome, a count per bucket (+Inf last), the sum.
CELL = len(OUTCOMES) + len(BUCKETS) + 2


class JobMetrics:
    """Counts per (queue, job class, outcome), duration histograms per (queue, job class),
    periodic fires per entry and requeued orphans. At most ``max_classes`` distinct job
    classes: the rest are counted as ``other`` (a label per class never grows unbounded).

    Only ever added to, by one thread (the one running jobs), with no lock: other threads
    only read (``copy``, and ``delta``: what changed since the last delta, what a
    child ships from its watchdog thread). Counts are monotonic, so the deltas add up to
    the totals exactly even when a read lands between two fields of one job."""

    def __init__(self, max_classes: int = MAX_CLASSES) -> None:
        self.max_classes = max_classes
        self.classes: set[str] = set()
        self.cells: Cells = {}  # by (queue, class label)
        self.alias: Cells = {}  # by (queue, class as given): the same lists, past the cap "other"'s
        self.fires: dict[str, int] = {}
        self.orphans_requeued = 0
        self.ship_lock = threading.Lock()  # between the readers that ship (never on the count path)
        self.shipped: dict[str, Any] = {"cells": {}, "fires": {}, "orphans_requeued": 0}

    def _cell(self, queue: str, job_class: str) -> list[float]:
        """A new (queue, class) pair: its cell, the class admitted under the cap or "other"."""
        key = (label_value(queue), label_value(job_class))
        if key[1] not in self.classes and key[1] != OTHER:  # a child's "other" takes no place
            if len(self.classes) >= self.max_classes:
                key = (key[0], OTHER)
            else:
                self.classes.add(key[1])
        cell = self.cells.get(key)
        if cell is None:
            if len(self.cells) >= CELLS_PER_CLASS * self.max_classes:
                key = (OTHER, OTHER)
                cell = self.cells.get(key)
            if cell is None:
                cell = self.cells[key] = [0.0] * CELL
        # Remembered by the name as given only while that costs little: a long name, or
        # more names than the series kept, is looked up again each time.
        if len(job_class) + len(queue) <= 2 * MAX_LABEL and len(self.alias) < 4 * self.max_classes:
            self.alias[(queue, job_class)] = cell
        return cell

    def count(self, queue: str, job_class: str, outcome: str, duration: float | None = None) -> None:
        # On every job's path (the hook below): one dict lookup, three list increments.
        cell = self.alias.get((queue, job_class)) or self._cell(queue, job_class)
        cell[_OUTCOME_AT[outcome]] += 1
        if duration is not None:
            cell[_BUCKETS_AT + bisect.bisect_left(BUCKETS, duration)] += 1
            cell[-1] += duration

    def fired(self, entry: str) -> None:
        entry = label_value(entry)
        self.fires[entry] = self.fires.get(entry, 0) + 1

    def requeued_orphan(self) -> None:
        self.orphans_requeued += 1

    def snapshot(self) -> dict[str, Any]:
        """The totals, copied (each copy is one atomic step for another thread)."""
        return {
            "cells": {key: list(cell) for key, cell in dict(self.cells).items()},
            "fires": dict(self.fires),
            "orphans_requeued": self.orphans_requeued,
        }

    def delta(self) -> dict[str, Any] | None:
        """What was counted since the last call (a picklable delta), or None."""
        with self.ship_lock:
            now, last = self.snapshot(), self.shipped
            cells = {}
            for key, cell in now["cells"].items():
                before = last["cells"].get(key)
                if cell != before:
                    cells[key] = [a - b for a, b in zip(cell, before or [0.0] * CELL, strict=True)]
            fires = {e: n - last["fires"].get(e, 0) for e, n in now["fires"].items() if n != last["fires"].get(e)}
            orphans = now["orphans_requeued"] - last["orphans_requeued"]
            self.shipped = now
        if not (cells or fires or orphans):
            return None
        return {"cells": cells, "fires": fires, "orphans_requeued": orphans}

    def merge(self, delta: dict[str, Any]) -> None:
        """Adds another process's delta (``delta()``), under this one's class cap."""
        for (queue, job_class), theirs in delta["cells"].items():
            mine = self.alias.get((queue, job_class)) or self._cell(queue, job_class)
            for i, value in enumerate(theirs):
                mine[i] += value
        for entry, n in delta["fires"].items():
            entry = label_value(entry)
            self.fires[entry] = self.fires.get(entry, 0) + n
        self.orphans_requeued += delta["orphans_requeued"]

    def copy(self) -> dict[str, Any]:
        """For a scrape: ``counts`` per (queue, class, outcome), ``durations`` per (queue,
        class) as bucket counts then the sum, ``fires``, ``orphans_requeued``."""
        snap = self.snapshot()
        counts: Counts = {}
        durations: Durations = {}
        for (queue, job_class), cell in snap["cells"].items():
            for outcome, i in _OUTCOME_AT.items():
                if cell[i]:
                    counts[(queue, job_class, outcome)] = cell[i]
            if any(cell[_BUCKETS_AT:-1]):
                durations[(queue, job_class)] = cell[_BUCKETS_AT:]
        return {
            "counts": counts,
            "durations": durations,
            "fires": snap["fires"],
            "orphans_requeued": snap["orphans_requeued"],
        }


def label_value(name: str) -> str:
    """``name`` as a label value: itself up to MAX_LABEL characters; longer, its start and a
    hash of the whole (at most MAX_LABEL too, so a value cut once is left as it is)."""
    name = name if isinstance(name, str) else str(name)
    if len(name) <= MAX_LABEL:
        return name
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=_HASH_HEX // 2).hexdigest()
    return f"{name[: MAX_LABEL - _HASH_HEX - 1]}~{digest}"


# -- this process's counter, fed by the hooks --------------------------------------------------

local: JobMetrics | None = None


def enable(max_classes: int = MAX_CLASSES) -> JobMetrics:
    """Starts counting this process's transitions (and, after a fork, the child's own:
    it starts from zero). Idempotent."""
    global local
    if local is None:
        local = JobMetrics(max_classes)
        os.register_at_fork(after_in_child=_forked)
        hooks.install(subscribers())
    return local


def subscribers() -> list[hooks.Subscription]:
    """The counter's hooks (``enable`` installs them, with the counter they feed)."""
    return [
        hooks.Subscription(("succeeded", "retrying", "dead", "expired"), _on_run),
        hooks.Subscription(("orphaned",), _on_orphaned),
        hooks.Subscription(("enqueued",), _on_enqueued, when=_is_periodic_fire),
    ]


def take() -> dict[str, Any] | None:
    """What this process counted since the last call, or None (nothing, or not enabled)."""
    return None if local is None else local.delta()


def _forked() -> None:
    global local
    if local is not None:
        local = JobMetrics(local.max_classes)  # the parent's counts are the parent's


def outcome_of(event: hooks.JobEvent) -> str:
    if event.name in ("succeeded", "expired"):
        return event.name
    by_reason = _BY_REASON.get(event.reason or "")
    if by_reason is not None:
        return by_reason
    if isinstance(event.error, JobTimeout):  # its soft timeout ended it
        return "timed_out"
    return "retried" if event.name == "retrying" else "dead"


def _on_run(event: hooks.JobEvent) -> None:
    counts = local
    if counts is not None:
        payload = event.payload
        counts.count(
            event.queue or payload.get("queue") or "?",
            payload.get("class") or "?",
            "succeeded" if event.name == "succeeded" else outcome_of(event),
            event.duration,
        )


def _on_orphaned(event: hooks.JobEvent) -> None:
    if local is None:
        return
    local.requeued_orphan()
    if event.counted:  # its process died running it (not merely listed, or stopped by its master)
        local.count(event.queue or event.payload.get("queue") or "?", event.payload.get("class") or "?", "orphaned")


def _is_periodic_fire(payload: dict[str, Any]) -> bool:
    return "periodic_slot" in payload


def _on_enqueued(event: hooks.JobEvent) -> None:
    if local is not None:
        local.fired(str(event.payload.get("periodic_pjid") or "?"))
