from django.db import models


class Order(models.Model):
    email = models.EmailField()
    shipped = models.BooleanField(default=False)
