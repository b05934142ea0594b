from __future__ import annotations

from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "examples.django_tasks_site.reports"
    label = "reports"
