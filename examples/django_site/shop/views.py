from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from cogworker.django import enqueue_on_commit

from .jobs import ship_order
from .models import Order


@csrf_exempt  # an API endpoint of the example
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(email=request.POST["email"])
        # Not now: a worker could run it before this commits and find no order (or
        # ship one that a rollback removes). Enqueued once the commit is done.
        enqueue_on_commit(ship_order, order.id)
        if request.POST.get("fail"):
            raise ValueError("rolled back: the order and its job are both gone")
    return JsonResponse({"order": order.id})
