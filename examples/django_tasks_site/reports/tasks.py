"""The example's tasks: Django's own ``@task``, nothing of cogworker's in sight."""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import TaskContext, task  # type: ignore[no-redef]


@task(queue_name="reports")
def word_count(text: str) -> dict[str, int]:
    """A report: how often each word appears."""
    counts: dict[str, int] = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts


@task
def add(a: int, b: int = 0) -> int:
    return a + b


@task
async def slow_double(n: int) -> int:
    await asyncio.sleep(0.05)
    return n * 2


@task(takes_context=True)
def whoami(context: TaskContext, note: str) -> dict[str, Any]:
    """What the context tells a task: its result's id, and which attempt this is."""
    return {"id": context.task_result.id, "attempt": context.attempt, "note": note}


@task
def explode(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def flaky(context: TaskContext) -> int:
    """Fails its first attempt, succeeds on its retry (the settings allow one)."""
    if context.attempt == 1:
        raise RuntimeError("first attempt fails")
    return context.attempt
