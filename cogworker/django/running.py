"""A Django task run as a cogworker job.

Each ``Task`` is a cogworker job named by its module path (``app.tasks.send_email``), so
the web UI, metrics, retries and the dead set show it under its own name. The job's body
makes the task's ``TaskResult`` as Django's own backends do, sends ``task_started`` and
``task_finished`` around the call (after every attempt: a failed attempt that cogworker
retries is ``FAILED`` in its signal, then ``READY`` again in ``get_result``), passes a
``TaskContext`` to a task that takes one, and keeps what ``get_result`` needs later in the
job's kept result: the return value, the arguments and when it was enqueued.
"""

from __future__ import annotations

import inspect
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections

from .. import api
from ..client.jobs import Job
from ..core.current import current_job
from ..core.payload import JobOptions, error_class_name, error_traceback
from ..core.registry import register, registry
from .compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    set_field,
    task_finished,
    task_started,
)

# The keys of a task's kept result (``results=True``): get_result reads them back.
VALUE, ARGS, KWARGS, ENQUEUED_AT = "return_value", "args", "kwargs", "enqueued_at"


def job_for(task: Task, options: JobOptions) -> Job[..., Any]:
    """The cogworker job that runs ``task``, registered under its module path (made once;
    a task redefined, as a test's reload does, is registered again)."""
    found = registry.get(task.module_path)
    if isinstance(found, Job) and getattr(found, "django_task", None) is task:
        return found
    made: Job[..., Any] = Job(_body(task), options, name=task.module_path)
    made.django_task = task  # type: ignore[attr-defined]
    register(made)
    return made


def _body(task: Task) -> Callable[..., dict[str, Any]]:
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return execute(task, list(args), dict(kwargs))

    run.__name__ = run.__qualname__ = task.name
    run.__module__ = task.func.__module__
    return run


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute(task: Task, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One attempt of ``task``: its signals, its context, the call between two
    ``close_old_connections()`` (as a request is), and what its kept result holds."""
    job = current_job()
    payload = job.payload if job is not None else {}
    result = _attempt_result(task, payload, args, kwargs)
    sender = type(task.get_backend())
    close_old_connections()
    task_started.send(sender=sender, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)
    except BaseException as exc:
        set_field(result, "finished_at", _now())
        result.errors.append(TaskError(exception_class_path=_class_path(exc), traceback=error_traceback(exc) or ""))
        set_field(result, "status", TaskResultStatus.FAILED)
        task_finished.send(sender=sender, task_result=result)
        raise  # cogworker's fate decides: retry or dead, as for any job
    finally:
        close_old_connections()
    set_field(result, "_return_value", value)
    set_field(result, "finished_at", _now())
    set_field(result, "status", TaskResultStatus.SUCCESSFUL)
    task_finished.send(sender=sender, task_result=result)
    return {VALUE: value, ARGS: args, KWARGS: kwargs, ENQUEUED_AT: payload.get("enqueued_at")}


def _attempt_result(task: Task, payload: dict[str, Any], args: list[Any], kwargs: dict[str, Any]) -> TaskResult:
    """The running attempt's ``TaskResult``. Earlier attempts' workers come from the job's
    history, read only on a retry (a first attempt costs no read)."""
    jid = str(payload.get("jid", ""))
    runs = int(payload.get("retry_count") or 0)  # attempts before this one: ``context.attempt`` counts on it
    earlier: list[str] = []
    if runs > 0 and jid:
        # History lands about a second after each attempt: an attempt not there yet is "unknown".
        earlier = [a.identity or "unknown" for a in api.history(jid)][:runs]
        earlier += ["unknown"] * (runs - len(earlier))
    now = _now()
    return TaskResult(
        task=task,
        id=jid,
        status=TaskResultStatus.RUNNING,
        enqueued_at=to_datetime(payload.get("enqueued_at")),
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=[*earlier, worker_id()],
    )


def _class_path(exc: BaseException) -> str:
    """The exception's import path, as Django's ``TaskError.exception_class_path`` wants it
    (``builtins.ValueError``, not cogworker's short ``ValueError``)."""
    name = error_class_name(exc)
    return name if "." in name else f"builtins.{name}"


def _now() -> datetime:
    return datetime.now(UTC)


def to_datetime(epoch: Any) -> datetime | None:
    """An epoch second read from Redis as an aware datetime; None for a missing or bad one."""
    try:
        value = float(epoch)
    except (TypeError, ValueError):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return datetime.fromtimestamp(value, UTC)


def takes_arguments(task: Task, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> None:
    """``TypeError`` now, at enqueue, for arguments the task's function can't take (the
    context, for a task that takes one, is given by the worker)."""
    signature = inspect.signature(task.func)
    params = list(signature.parameters.values())
    if task.takes_context and params:
        signature = signature.replace(parameters=params[1:])
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"task {task.module_path} can't take these arguments: {exc}") from None
