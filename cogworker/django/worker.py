"""The app module of a Django project's worker:

    DJANGO_SETTINGS_MODULE=mysite.settings cogworker-prefork --procs 4 cogworker.django.worker

Importing it (what a worker does with its app module, before it forks) sets Django up
(``django.setup()``: with ``cogworker.django.CogworkerConfig`` installed, each app's
``jobs`` module too) and registers every installed app's Django tasks
(``cogworker.django.discovery``)."""

from __future__ import annotations

import os

import django

if not os.environ.get("DJANGO_SETTINGS_MODULE"):
    raise RuntimeError("cogworker.django.worker needs DJANGO_SETTINGS_MODULE (the project's settings module)")
django.setup()

from .discovery import register_tasks  # noqa: E402 (needs the apps set up first)

TASKS = register_tasks()
