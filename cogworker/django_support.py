"""The old path of ``cogworker.django``'s job support (``CogworkerConfig``, ``autodiscover``,
``enqueue_on_commit``, ``admin_urls``), kept for one release: import them from
``cogworker.django`` (``INSTALLED_APPS``: ``"cogworker.django"``)."""

from __future__ import annotations

import warnings

from .django.apps import CogworkerConfig, autodiscover, fresh_connections
from .django.commit import enqueue_on_commit
from .django.mount import admin_urls, forward

__all__ = ["CogworkerConfig", "admin_urls", "autodiscover", "enqueue_on_commit", "forward", "fresh_connections"]

warnings.warn(
    "cogworker.django_support is now cogworker.django (INSTALLED_APPS: 'cogworker.django'); "
    "the old path goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
