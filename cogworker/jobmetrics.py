"""Job counts and durations for the Prometheus exporter (docs/architecture.md#metrics), as a
lifecycle hook subscriber: each process counts the transitions it makes into an in-memory
``JobMetrics``; no Redis call, no message per job.

A prefork child ships what it counted to its master with its stats batch (at most once a
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
import os
import threading
from typing import Any

from . import hooks
from .errors import JobTimeout

# 1 ms to 10 min (the contract), roughly x2.5 apart.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
           300.0, 600.0)
OUTCOMES = ("succeeded", "failed", "retried", "dead", "orphaned", "interrupted", "timed_out")
OTHER = "other"
MAX_CLASSES = 500

_BY_REASON = {"timed_out": "timed_out", "interrupted": "interrupted", "bad_payload": "failed",
              "process_died": "failed"}

Counts = dict[tuple[str, str, str], int]  # (queue, job_class, outcome) -> count
# (queue, job_class) -> [count per bucket (not cumulative; the last one is +Inf)..., sum of seconds]
Durations = dict[tuple[str, str], list[float]]


class JobMetrics:
    """Counts per (queue, job class, outcome), duration histograms per (queue, job class),
    periodic fires per entry and requeued orphans. At most ``max_classes`` distinct job
    classes: the rest are counted as ``other`` (a label per class never grows unbounded).
    Thread-safe (the single-process runner scrapes from another thread)."""

    def __init__(self, max_classes: int = MAX_CLASSES) -> None:
        self.max_classes = max_classes
        self.lock = threading.Lock()
        self.classes: set[str] = set()
        self.counts: Counts = {}
        self.durations: Durations = {}
        self.fires: dict[str, int] = {}
        self.orphans_requeued = 0

    def __bool__(self) -> bool:
        return bool(self.counts or self.fires or self.orphans_requeued)

    def _class(self, name: str) -> str:
        if name in self.classes or name == OTHER:  # a child's "other" takes no place of a class
            return name
        if len(self.classes) >= self.max_classes:
            return OTHER
        self.classes.add(name)
        return name

    def count(self, queue: str, job_class: str, outcome: str, duration: float | None = None) -> None:
        # On every job's path (the hook below): kept to a few dict operations.
        with self.lock:
            if job_class not in self.classes:
                job_class = self._class(job_class)
            counts = self.counts
            key = (queue, job_class, outcome)
            counts[key] = counts.get(key, 0) + 1
            if duration is not None:
                buckets = self.durations.get((queue, job_class))
                if buckets is None:
                    buckets = self.durations[(queue, job_class)] = [0.0] * (len(BUCKETS) + 2)
                buckets[bisect.bisect_left(BUCKETS, duration)] += 1
                buckets[-1] += duration

    def fired(self, entry: str) -> None:
        with self.lock:
            self.fires[entry] = self.fires.get(entry, 0) + 1

    def requeued_orphan(self) -> None:
        with self.lock:
            self.orphans_requeued += 1

    def take(self) -> dict[str, Any]:
        """A plain, picklable snapshot (for the pipe to the master); clears this one."""
        with self.lock:
            snap = {"counts": self.counts, "durations": self.durations, "fires": self.fires,
                    "orphans_requeued": self.orphans_requeued}
            self.counts, self.durations, self.fires, self.orphans_requeued = {}, {}, {}, 0
            return snap

    def merge(self, snap: dict[str, Any]) -> None:
        """Adds a snapshot (another process's ``take()``), re-applying this one's class cap."""
        with self.lock:
            for (queue, job_class, outcome), n in snap["counts"].items():
                key = (queue, self._class(job_class), outcome)
                self.counts[key] = self.counts.get(key, 0) + n
            for (queue, job_class), theirs in snap["durations"].items():
                dkey = (queue, self._class(job_class))
                mine = self.durations.get(dkey)
                if mine is None:
                    mine = self.durations[dkey] = [0.0] * (len(BUCKETS) + 2)
                for i, value in enumerate(theirs):
                    mine[i] += value
            for entry, n in snap["fires"].items():
                self.fires[entry] = self.fires.get(entry, 0) + n
            self.orphans_requeued += snap["orphans_requeued"]

    def copy(self) -> dict[str, Any]:
        """A consistent snapshot, leaving this one as it is (for a scrape)."""
        with self.lock:
            return {"counts": dict(self.counts), "durations": {k: list(v) for k, v in self.durations.items()},
                    "fires": dict(self.fires), "orphans_requeued": self.orphans_requeued}


# -- this process's counter, fed by the hooks --------------------------------------------------

local: JobMetrics | None = None


def enable(max_classes: int = MAX_CLASSES) -> JobMetrics:
    """Starts counting this process's transitions (and, after a fork, the child's own:
    it starts from zero). Idempotent."""
    global local
    if local is None:
        local = JobMetrics(max_classes)
        os.register_at_fork(after_in_child=_forked)
        hooks.subscribe(("succeeded", "retrying", "dead"), _on_run)
        hooks.subscribe("orphaned", _on_orphaned)
        hooks.subscribe("enqueued", _on_enqueued, when=_is_periodic_fire)
    return local


def take() -> dict[str, Any] | None:
    """What this process counted since the last call, or None (nothing, or not enabled)."""
    if local is None or not local:
        return None
    return local.take()


def _forked() -> None:
    if local is not None:
        local.take()  # the parent's counts are the parent's


def outcome_of(event: hooks.JobEvent) -> str:
    if event.name == "succeeded":
        return "succeeded"
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
        counts.count(event.queue or payload.get("queue") or "?", payload.get("class") or "?",
                      "succeeded" if event.name == "succeeded" else outcome_of(event), event.duration)


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
