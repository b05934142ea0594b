"""``/queues`` and ``/queues/<name>``: size, latency, paused; pause/resume, clear (after a
confirmation), and the jobs, paginated and each deletable - through ``cogworker.api``."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from ..errors import ConfigurationError, NotFound
from ..wording import counted
from .views import (
    PER_PAGE,
    Page,
    Templates,
    action,
    ask,
    config_of,
    confirmed,
    entry_raw,
    page_number,
    quoted,
    redirect,
)


def _queue(request: Request) -> api.Queue:
    """The queue named in the path; NotFound (404) for a name no job was pushed to."""
    try:
        return api.queue(request.path_params["name"], config_of(request))
    except ConfigurationError as exc:
        raise NotFound(str(exc)) from None


def routes(templates: Templates) -> list[Route]:
    def overview(request: Request) -> Response:
        rows = [(q.name, q.size(), q.latency(), q.paused()) for q in api.queues(config_of(request))]
        return templates.render(request, "queues.html", rows=rows)

    def detail(request: Request) -> Response:
        queue = _queue(request)
        page = Page(page_number(request), PER_PAGE, queue.size(), False)
        page.has_next = page.offset + PER_PAGE < (page.total or 0)
        jobs = queue.jobs(page.offset, PER_PAGE)
        return templates.render(
            request, "queue.html", queue=queue, jobs=jobs, page=page, latency=queue.latency(), paused=queue.paused()
        )

    def pause(request: Request, form: FormData) -> Response:
        queue = _queue(request)
        if form.get("action") == "resume":
            queue.resume()
            note = f"queue {queue.shown} resumed"
        else:
            queue.pause()
            note = f"queue {queue.shown} paused: no worker takes a job off it until it is resumed"
        return redirect(request, str(form.get("back") or f"/queues/{quoted(queue.name)}"), note)

    def clear(request: Request, form: FormData) -> Response:
        queue = _queue(request)
        if not confirmed(form):
            what = counted(queue.size(), "job", grouped=True)
            question = f"Delete all {what} of queue {queue.shown}? This cannot be undone."
            return ask(templates, request, form, question, "Clear queue", f"/queues/{quoted(queue.name)}")
        return redirect(
            request,
            f"/queues/{quoted(queue.name)}",
            f"queue {queue.shown} cleared: {counted(queue.clear(), 'job', grouped=True)}",
        )

    def delete(request: Request, form: FormData) -> Response:
        queue = _queue(request)
        raw = entry_raw(str(form.get("entry", "")))
        done = raw is not None and queue.delete(api.JobRecord.parse(raw, f"queue:{queue.name}"))
        return redirect(
            request,
            f"/queues/{quoted(queue.name)}",
            "job deleted" if done else "job not there any more",
            page=request.query_params.get("page"),
        )

    return [
        Route("/queues", overview, methods=["GET"]),
        Route("/queues/{name}", detail, methods=["GET"]),
        Route("/queues/{name}/pause", action(pause), methods=["POST"]),
        Route("/queues/{name}/clear", action(clear), methods=["POST"]),
        Route("/queues/{name}/delete", action(delete), methods=["POST"]),
    ]
