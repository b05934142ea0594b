"""Django support for cogworker's jobs: add ``"cogworker.django"`` to ``INSTALLED_APPS``.

At ``django.setup()`` (``CogworkerConfig.ready``): cogworker is configured from the
optional ``COGWORKER`` setting (``configure``'s keywords), and every installed app's
``jobs`` module (``COGWORKER_JOBS_MODULE``) is imported, so its ``@job``s are registered.
A worker runs them all with ``cogworker-prefork cogworker.django.worker`` (it calls
``django.setup()``; ``DJANGO_SETTINGS_MODULE`` names the settings). Each job runs between
two ``close_old_connections()`` (a server middleware), as a request does, so a connection
that broke or outlived ``CONN_MAX_AGE`` is replaced.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from django.apps import AppConfig, apps
from django.conf import settings
from django.db import close_old_connections

from .. import config as config_module
from ..core.middleware import server_middleware
from ..core.registry import JobDef, register


class CogworkerConfig(AppConfig):
    name = "cogworker.django"
    label = "cogworker"
    verbose_name = "cogworker"

    def ready(self) -> None:
        given = getattr(settings, "COGWORKER", None)
        if given:
            config_module.configure(**dict(given))
        autodiscover()
        if fresh_connections not in server_middleware:  # once, whatever calls setup() again
            server_middleware.add(fresh_connections)


def autodiscover(module: str | None = None) -> list[str]:
    """Imports each installed app's jobs module (``COGWORKER_JOBS_MODULE``, default
    ``jobs``) and registers its jobs (again, if a test reset the registry); returns the
    modules found. An app without one is skipped; an error inside one is raised."""
    name = module or getattr(settings, "COGWORKER_JOBS_MODULE", "jobs")
    found = []
    for app in apps.get_app_configs():
        dotted = f"{app.name}.{name}"
        if not hasattr(app.module, "__path__") or importlib.util.find_spec(dotted) is None:
            continue  # a module, not a package (this one), has no submodules
        imported = importlib.import_module(dotted)
        for value in vars(imported).values():
            if isinstance(value, JobDef) and value.func.__module__ == dotted:
                register(value)
        found.append(dotted)
    return found


def fresh_connections(job: Any, payload: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
    close_old_connections()
    try:
        return call_next()
    finally:
        close_old_connections()
