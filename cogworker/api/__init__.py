"""The one way to read and change the system's state (a job's status and history too), for
operators, the ``cogworker`` command and a web UI (docs/architecture.md#operator-api). Every
change is one script or one command that checks the entry is still where it was read: safe
under a running fleet.

    from cogworker import api
    api.stats(); api.queues(); api.DeadSet().retry(jid); api.status(jid); api.history(jid)
"""

from __future__ import annotations

from .batches import BatchInfo, batch, batch_count, batch_counters, batch_jobs, batches, close_batch
from .cancel import cancel, cancelled, progress
from .control import quiet_process, stop_process
from .limits import LimiterInfo, deferrals, limiters
from .metrics import ClassMetrics, MinuteStats, RedisInfo, class_metrics, redis_info, throughput
from .overview import history_stats, locate, processes, running_job, stats, unsettled
from .periodic import (
    PeriodicEntry,
    disable_periodic,
    enable_periodic,
    periodic_entries,
    periodic_entry,
    run_periodic_now,
)
from .queues import Queue, queue, queues
from .records import DayStats, JobRecord, ProcessRecord, RunningJob, Stats
from .results import Result, result
from .sets import DeadSet, JobSet, RetrySet, ScheduledSet
from .status import NOT_RETAINED, Attempt, JobStatus, Progress, Retention, history, retention, state, status
from .windows import WINDOWS, ClassSummary, ClassWindow, WindowMetrics, class_window, window_metrics

__all__ = [
    "NOT_RETAINED",
    "WINDOWS",
    "Attempt",
    "BatchInfo",
    "ClassMetrics",
    "ClassSummary",
    "ClassWindow",
    "DayStats",
    "DeadSet",
    "JobRecord",
    "JobSet",
    "JobStatus",
    "LimiterInfo",
    "MinuteStats",
    "PeriodicEntry",
    "ProcessRecord",
    "Progress",
    "Queue",
    "RedisInfo",
    "Result",
    "Retention",
    "RetrySet",
    "RunningJob",
    "ScheduledSet",
    "Stats",
    "WindowMetrics",
    "batch",
    "batch_count",
    "batch_counters",
    "batch_jobs",
    "batches",
    "cancel",
    "cancelled",
    "class_metrics",
    "class_window",
    "close_batch",
    "deferrals",
    "disable_periodic",
    "enable_periodic",
    "history",
    "history_stats",
    "limiters",
    "locate",
    "running_job",
    "periodic_entries",
    "periodic_entry",
    "processes",
    "progress",
    "queue",
    "queues",
    "result",
    "quiet_process",
    "redis_info",
    "retention",
    "run_periodic_now",
    "state",
    "stats",
    "status",
    "stop_process",
    "throughput",
    "unsettled",
    "window_metrics",
]
