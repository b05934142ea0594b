"""The example Django Tasks project's settings, with the tests' signal probe installed."""

from __future__ import annotations

from examples.django_tasks_site.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "apps.djtasks_probe"]  # noqa: F405
