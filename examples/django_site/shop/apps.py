from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "examples.django_site.shop"
    label = "shop"
