"""Django support.

- ``INSTALLED_APPS = [..., "cogworker.django"]``: cogworker configured from the ``COGWORKER``
  setting, every app's ``jobs`` module registered (``apps``); ``enqueue_on_commit``
  (``commit``); ``admin_urls()``, the web UI behind the admin's login (``mount``).
- ``TASKS``' backend ``cogworker.django.CogworkerBackend``: Django's Tasks framework
  (``django.tasks``, or the ``django-tasks`` backport) on cogworker (``backend``).
- ``cogworker-prefork cogworker.django.worker``: a Django project's worker (``worker``).

Each name is imported when asked for (``cogworker.django.X``), so importing the package
needs neither the Tasks framework nor Django's apps to be ready.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "CogworkerBackend": "backend",
    "CogworkerConfig": "apps",
    "autodiscover": "apps",
    "fresh_connections": "apps",
    "enqueue_on_commit": "commit",
    "admin_urls": "mount",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cogworker.django' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
