from django.contrib import admin
from django.urls import path

from cogworker.django import admin_urls

from .shop import views

urlpatterns = [
    *admin_urls(),  # /admin/cogworker/: the web UI, behind the admin's login (before admin.site.urls)
    path("admin/", admin.site.urls),
    path("orders/", views.place_order),
]
