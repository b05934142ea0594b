"""The app module of a Django project's worker: ``cogworker-prefork cogworker.django_worker``
with ``DJANGO_SETTINGS_MODULE`` set. Importing it runs ``django.setup()``, which (with
``cogworker.django_support`` installed) imports every app's ``jobs`` module: the master
imports them before it forks, so each child has them all."""

from __future__ import annotations

import os

import django

if not os.environ.get("DJANGO_SETTINGS_MODULE"):
    raise RuntimeError("cogworker.django_worker needs DJANGO_SETTINGS_MODULE (the project's settings module)")
django.setup()
