"""Which Tasks framework this Django has: ``django.tasks`` (Django 6.0 and later) or the
``django-tasks`` backport (Django 4.2 to 5.2). Both have the same shapes; only a few
names differ (the backport's ``InvalidTaskError`` is Django's ``InvalidTask``). Every
other module of this package takes the framework's names from here."""

from __future__ import annotations

from typing import Any

try:  # Django 6.0 and later
    from django.tasks import DEFAULT_TASK_QUEUE_NAME, TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
except ImportError:  # the backport, on an older Django
    from django_tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django_tasks.exceptions import (
        InvalidTaskError as InvalidTask,
    )
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    FRAMEWORK = "django_tasks"


def set_field(result: Any, name: str, value: Any) -> None:
    """A ``TaskResult`` is a frozen dataclass: the framework's own backends fill it in the
    same way as the task runs."""
    object.__setattr__(result, name, value)


__all__ = [
    "BaseTaskBackend",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "InvalidTask",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "set_field",
    "task_enqueued",
    "task_finished",
    "task_started",
]
