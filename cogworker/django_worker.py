"""The old path of ``cogworker.django.worker``, a Django project's worker app module, kept
for one release: ``cogworker-prefork --procs N cogworker.django.worker``."""

from __future__ import annotations

import warnings

from .django.worker import TASKS

__all__ = ["TASKS"]

warnings.warn(
    "cogworker.django_worker is now cogworker.django.worker; the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
