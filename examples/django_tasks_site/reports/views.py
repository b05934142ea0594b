"""A form posts text; the view enqueues ``word_count`` and redirects to the result page,
which shows the task's status and, once it ran, its result."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from .tasks import word_count

try:
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # the backport
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[no-redef]


@csrf_exempt  # an example without sessions or forms framework
def create(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return HttpResponse(status=405)
    result = word_count.enqueue(request.POST.get("text", ""))
    return HttpResponseRedirect(reverse("report-show", args=[result.id]))


def show(request: HttpRequest, result_id: str) -> HttpResponse:
    try:
        result = word_count.get_result(result_id)
    except TaskResultDoesNotExist:
        return HttpResponse("no such report", status=404)
    return render(request, "reports/show.html", {"result": result})
