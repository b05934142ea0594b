"""A Django app of the tests: records every Tasks signal it receives, one JSON line per
signal, in the file ``DJTASKS_SIGNAL_LOG`` names (the worker's children and the enqueuing
process append to the same file)."""

from __future__ import annotations

import json
import os
from typing import Any

from django.apps import AppConfig

try:
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # the backport
    from django_tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[no-redef]


def _record(kind: str) -> Any:
    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        path = os.environ.get("DJTASKS_SIGNAL_LOG")
        if not path:
            return
        line = {
            "signal": kind,
            "sender": f"{sender.__module__}.{sender.__qualname__}",
            "id": task_result.id,
            "status": str(task_result.status),
            "task": task_result.task.module_path,
            "attempts": task_result.attempts,
            "errors": [e.exception_class_path for e in task_result.errors],
            "pid": os.getpid(),
        }
        with open(path, "a") as log:
            log.write(json.dumps(line) + "\n")

    return receiver


class ProbeConfig(AppConfig):
    name = "apps.djtasks_probe"
    label = "djtasks_probe"

    def ready(self) -> None:
        for kind, signal in (("enqueued", task_enqueued), ("started", task_started), ("finished", task_finished)):
            signal.connect(_record(kind), weak=False, dispatch_uid=f"djtasks-probe-{kind}")
