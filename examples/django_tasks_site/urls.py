from __future__ import annotations

from django.urls import path

from .reports import views

urlpatterns = [
    path("reports/", views.create, name="report-create"),
    path("reports/<str:result_id>/", views.show, name="report-show"),
]
