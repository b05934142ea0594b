"""Settings of the example Django Tasks project (examples/django_tasks_site): a report
view enqueues a task through Django's Tasks framework, cogworker runs it, and a page
shows its result. Django 6.0 and later have ``django.tasks``; on Django 5.2 the
``django-tasks`` backport provides it. Run its worker with:

    DJANGO_SETTINGS_MODULE=examples.django_tasks_site.settings cogworker-prefork --procs 2 cogworker.django.worker
"""

from __future__ import annotations

import os
from importlib.util import find_spec

# An example's key: a real project reads its own from the environment.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = True
ALLOWED_HOSTS = ["*"]
USE_TZ = True

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "examples.django_tasks_site.reports",
]
if find_spec("django.tasks") is None:  # the backport, on Django 5.2: an app of its own
    INSTALLED_APPS.insert(0, "django_tasks")

TASKS = {
    "default": {
        "BACKEND": "cogworker.django.CogworkerBackend",
        "QUEUES": ["default", "reports"],
        "OPTIONS": {
            "redis_url": os.environ.get("REDIS_URL", "redis://localhost:6379/0"),
            "namespace": os.environ.get("COGWORKER_NAMESPACE", "cogworker"),
        },
        # Job options every task's job gets: here a failed task is retried once, at once.
        "JOB_OPTIONS": {"retry": 1, "backoff": lambda count, error: 0},
    }
}

ROOT_URLCONF = "examples.django_tasks_site.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
DATABASES: dict[str, dict[str, str]] = {}  # the tasks keep nothing in a database
