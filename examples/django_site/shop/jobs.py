"""The shop's jobs: found by cogworker.django at django.setup() (this is the
app's ``jobs`` module), so the worker needs no list of them."""

from __future__ import annotations

import cogworker

from .models import Order


@cogworker.job(queue="default", retry=5)
def ship_order(order_id: int) -> None:
    # The order exists: the job was enqueued only once its transaction committed.
    Order.objects.filter(pk=order_id).update(shipped=True)
