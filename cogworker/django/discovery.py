"""Finding a Django project's tasks in a worker: every installed app's ``tasks`` module
(``COGWORKER_TASKS_MODULE`` to name another) is imported, and each ``Task`` in it whose
backend is a ``CogworkerBackend`` is registered as the cogworker job that runs it, so the
master has them all before it forks."""

from __future__ import annotations

import importlib
import importlib.util

from django.apps import apps
from django.conf import settings

from .backend import CogworkerBackend
from .compat import Task
from .running import job_for


def register_tasks(module: str | None = None) -> list[str]:
    """Registers the tasks of each app's tasks module; returns the tasks' module paths."""
    name = module or getattr(settings, "COGWORKER_TASKS_MODULE", "tasks")
    found: list[str] = []
    for app in apps.get_app_configs():
        dotted = f"{app.name}.{name}"
        if not hasattr(app.module, "__path__") or importlib.util.find_spec(dotted) is None:
            continue  # a module, not a package, has no submodules
        imported = importlib.import_module(dotted)
        for value in vars(imported).values():
            if isinstance(value, Task) and value.func.__module__ == dotted:
                backend = value.get_backend()
                if isinstance(backend, CogworkerBackend):
                    job_for(value, backend.job_options)
                    found.append(value.module_path)
    return found
