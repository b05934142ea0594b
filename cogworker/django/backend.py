"""``cogworker.django.CogworkerBackend``: Django's Tasks framework on cogworker.

    TASKS = {
        "default": {
            "BACKEND": "cogworker.django.CogworkerBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"redis_url": "redis://localhost:6379/0", "namespace": "myapp"},
        }
    }

``OPTIONS`` are ``cogworker.configure()``'s keywords, applied when the backend is made
(the process's configuration, as the ``COGWORKER`` setting is); ``JOB_OPTIONS``, beside
them, are the job options every task's job gets (``retry``, ``timeout``, ``result_ttl``...).
A task's job keeps its result (``results=True``): that is what ``get_result`` reads.
"""

from __future__ import annotations

import time
from typing import Any

from .. import config as config_module
from ..core.payload import JobOptions
from ..errors import ConfigurationError
from ..names import check_job_name, check_queue_name
from . import results
from .compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from .running import job_for, takes_arguments, to_datetime

# What a task's job can't be given: its queue comes from the task, its result is kept.
_FIXED = {"queue", "results"}


class CogworkerBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    # Django's priorities (-100 to 100) are cogworker's own (a job's ``priority`` option).
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        given = dict(params.get("JOB_OPTIONS") or {})
        fixed = sorted(_FIXED & set(given))
        if fixed:
            raise ConfigurationError(f"TASKS[{alias!r}]['JOB_OPTIONS'] can't set {fixed}: the task sets them")
        self.job_options = JobOptions.build(results=True, **given)
        if self.options:
            config_module.configure(**dict(self.options))

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        try:
            check_queue_name(task.queue_name)
            check_job_name(task.module_path)
        except ConfigurationError as exc:
            raise InvalidTask(f"task {task.module_path}: {exc}") from None

    def _bound(self, task: Task) -> Any:
        return job_for(task, self.job_options).options(queue=task.queue_name, priority=task.priority)

    def _checked(self, task: Task, args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
        self.validate_task(task)
        takes_arguments(task, args, kwargs)
        return list(normalize_json(list(args))), dict(normalize_json(dict(kwargs)))

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        args, kwargs = self._checked(task, args, kwargs)
        bound = self._bound(task)
        if task.run_after is not None:
            jid = bound.enqueue_at(task.run_after, *args, **kwargs)
        else:
            jid = bound.enqueue(*args, **kwargs)
        return self._enqueued(task, jid, args, kwargs)

    async def aenqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        args, kwargs = self._checked(task, args, kwargs)
        bound = self._bound(task)
        if task.run_after is not None:
            jid = await bound.enqueue_at_async(task.run_after, *args, **kwargs)
        else:
            jid = await bound.enqueue_async(*args, **kwargs)
        return self._enqueued(task, jid, args, kwargs)

    def _enqueued(self, task: Task, jid: str, args: list[Any], kwargs: dict[str, Any]) -> TaskResult:
        result = TaskResult(
            task=task,
            id=jid,
            status=TaskResultStatus.READY,
            enqueued_at=to_datetime(time.time()),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        return results.load(result_id, self.alias)
