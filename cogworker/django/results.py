"""A Django ``TaskResult`` read back from what cogworker keeps of a job: its status, its
history (one attempt a row: when it started and ended, where it ran, its error), the job
where it waits (its arguments, while queued, scheduled, retrying or dead) and its kept
result (the return value and, for a finished task, its arguments).

Status READY is a job waiting: queued, scheduled, or retrying between attempts (its
failed attempts are in ``errors``); RUNNING, running; SUCCESSFUL, succeeded; FAILED, dead
or cancelled. A job of which nothing is retained (an unknown id, or trimmed by retention)
raises ``TaskResultDoesNotExist``.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from .. import api
from ..config import Config
from ..errors import NotFound
from .compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus, set_field
from .running import ARGS, ENQUEUED_AT, KWARGS, VALUE, to_datetime

STATUS = {
    "queued": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "retrying": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


def load(result_id: str, alias: str, config: Config | None = None) -> TaskResult:
    """The ``TaskResult`` of job ``result_id``, or ``TaskResultDoesNotExist``."""
    found = api.status(result_id, config) if isinstance(result_id, str) and result_id else None
    if found is None or found.state not in STATUS or not found.job_class:
        raise TaskResultDoesNotExist(result_id)
    task = _task(found.job_class, result_id)
    attempts = api.history(result_id, config)
    kept = api.result(result_id, config) if found.state == "succeeded" else None
    value = kept.value if kept is not None and isinstance(kept.value, dict) else {}
    waiting = _payload(result_id, config) if found.state != "succeeded" else {}
    source = value or waiting
    result = TaskResult(
        task=task,
        id=result_id,
        status=STATUS[found.state],
        enqueued_at=to_datetime(source.get(ENQUEUED_AT)),
        started_at=to_datetime(attempts[0].started_at) if attempts else to_datetime(found.started_at),
        last_attempted_at=_last_attempted(found, attempts),
        finished_at=_finished(found, attempts),
        args=list(source.get(ARGS) or []),
        kwargs=dict(source.get(KWARGS) or {}),
        backend=alias,
        errors=[_error(a) for a in attempts if a.error_class],
        worker_ids=[a.identity or "" for a in attempts] + ([found.identity or ""] if found.state == "running" else []),
    )
    if found.state == "succeeded":
        set_field(result, "_return_value", value.get(VALUE))
    return result


def _task(job_class: str, result_id: str) -> Task:
    try:
        task = import_string(job_class)
    except ImportError:
        raise TaskResultDoesNotExist(f"{result_id}: its task {job_class!r} can't be imported here") from None
    if not isinstance(task, Task):
        raise TaskResultDoesNotExist(f"{result_id} is a cogworker job ({job_class}), not a Django task")
    return task


def _payload(result_id: str, config: Config | None) -> dict[str, Any]:
    """The job as it waits (its arguments, when it was enqueued); empty once it runs."""
    try:
        record = api.locate(result_id, config)
    except NotFound:
        return {}
    payload = record.payload if record.readable else {}
    return {ARGS: payload.get("args"), KWARGS: payload.get("kwargs"), ENQUEUED_AT: payload.get("enqueued_at")}


def _last_attempted(found: api.JobStatus, attempts: list[api.Attempt]) -> Any:
    if found.state == "running" and found.started_at:
        return to_datetime(found.started_at)
    return to_datetime(attempts[-1].started_at) if attempts else None


def _finished(found: api.JobStatus, attempts: list[api.Attempt]) -> Any:
    if STATUS[found.state] not in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED):
        return None
    return to_datetime(attempts[-1].ended_at) if attempts else to_datetime(found.updated_at)


def _error(attempt: api.Attempt) -> TaskError:
    name = attempt.error_class or "Exception"
    path = name if "." in name else f"builtins.{name}"
    return TaskError(exception_class_path=path, traceback=attempt.traceback or attempt.error_message or "")
