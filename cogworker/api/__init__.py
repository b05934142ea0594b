"""The one way to read and change the system's state (a job's status and history too), for
operators, the ``cogworker`` command and a web UI (docs/architecture.md#operator-api). Every
change is one script or one command that checks the entry is still where it was read: safe
under a running fleet.

    from cogworker import api
    api.stats(); api.queues(); api.DeadSet().retry(jid); api.status(jid); api.history(jid)
"""

from __future__ import annotations

from .overview import history_stats, locate, processes, stats, unsettled
from .queues import Queue, queue, queues
from .records import DayStats, JobRecord, ProcessRecord, RunningJob, Stats
from .sets import DeadSet, JobSet, RetrySet, ScheduledSet
from .status import Attempt, JobStatus, history, status

__all__ = [
    "Attempt",
    "DayStats",
    "DeadSet",
    "JobRecord",
    "JobSet",
    "JobStatus",
    "ProcessRecord",
    "Queue",
    "RetrySet",
    "RunningJob",
    "ScheduledSet",
    "Stats",
    "history",
    "history_stats",
    "locate",
    "processes",
    "queue",
    "queues",
    "stats",
    "status",
    "unsettled",
]
