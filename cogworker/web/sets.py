"""``/scheduled``, ``/retries``, ``/dead``: the sorted sets, paginated (O(page) Redis work
each click), filtered by job class, error class and queue, with per-row and bulk retry,
delete and kill (scheduled and retries) - every change through ``cogworker.api``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from ..errors import BadPayload
from .views import PER_PAGE, Page, Templates, action, config_of, entry_raw, page_number, redirect

FILTER_LIMIT = 1000  # matches a filtered view sorts and pages through (the scan stops there)
CHUNK = 500  # entries per round of a filtered "all matching" action


@dataclass(frozen=True)
class SetView:
    path: str
    title: str
    kind: type[api.JobSet]
    order: str

    @property
    def killable(self) -> bool:
        return self.kind is not api.DeadSet


VIEWS = {
    "scheduled": SetView("scheduled", "Scheduled", api.ScheduledSet, "soonest first"),
    "retries": SetView("retries", "Retries", api.RetrySet, "soonest first"),
    "dead": SetView("dead", "Dead", api.DeadSet, "newest first"),
}
ACTIONS = ("retry", "delete", "kill")


def filters_of(source: Any) -> dict[str, str | None]:
    return {name: (str(source.get(name) or "").strip() or None) for name in ("job_class", "error_class", "queue")}


def listing(view: SetView, templates: Templates) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        jobset = view.kind(config_of(request))
        filters = filters_of(request.query_params)
        number = page_number(request)
        capped = False
        if any(filters.values()):
            matches = jobset.filter(**filters, limit=FILTER_LIMIT)
            capped = len(matches) >= FILTER_LIMIT
            page = Page(number, PER_PAGE, len(matches), False)
            rows = matches[page.offset:page.offset + PER_PAGE]
        else:
            size = jobset.size()
            page = Page(number, PER_PAGE, size, False)
            rows = jobset.jobs(page.offset, PER_PAGE)
        page.has_next = page.offset + PER_PAGE < (page.total or 0)
        return templates.render(request, "set.html", view=view, rows=rows, page=page, filters=filters,
                                capped=capped, filter_limit=FILTER_LIMIT)

    endpoint.__name__ = f"{view.path}_page"
    return endpoint


def act(jobset: api.JobSet, verb: str, record: api.JobRecord) -> bool:
    """One entry; False if it is gone (or, for retry, not a job: it can only be deleted)."""
    try:
        if verb == "retry":
            return jobset.retry(record)
        if verb == "kill" and isinstance(jobset, (api.ScheduledSet, api.RetrySet)):
            return jobset.kill(record)
        return verb == "delete" and jobset.delete(record)
    except BadPayload:
        return False


def act_on_all(jobset: api.JobSet, verb: str, filters: dict[str, str | None]) -> int:
    """Every entry matching ``filters`` (all of them if none), in chunks."""
    if not any(filters.values()) and verb == "retry":
        return jobset.retry_all()
    if not any(filters.values()) and verb == "delete":
        return jobset.clear()
    done = 0
    budget = jobset.size() + CHUNK  # entries arriving meanwhile can't keep it going forever
    while budget > 0:
        batch = jobset.filter(**filters, limit=CHUNK) if any(filters.values()) else jobset.jobs(0, CHUNK)
        moved = sum(act(jobset, verb, record) for record in batch)
        done, budget = done + moved, budget - len(batch)
        if not batch or not moved:  # what is left can't be acted on (e.g. retrying non-jobs)
            break
    return done


def bulk(view: SetView) -> Callable[[Request, FormData], Response]:
    def handler(request: Request, form: FormData) -> Response:
        verb = str(form.get("action", ""))
        filters = filters_of(form)
        if verb not in ACTIONS or (verb == "kill" and not view.killable):
            return redirect(request, f"/{view.path}", f"unknown action {verb!r}", **filters)
        jobset = view.kind(config_of(request))
        if form.get("scope") == "all":
            done = act_on_all(jobset, verb, filters)
            return redirect(request, f"/{view.path}", f"{verb}: {done} entries (all matching)", **filters)
        raws = [entry_raw(str(v)) for v in form.getlist("entry")]
        records = [api.JobRecord.parse(raw, jobset.name) for raw in raws if raw is not None]
        done = sum(act(jobset, verb, record) for record in records)
        gone = len(records) - done
        note = f"; {gone} gone meanwhile or not a job" if gone else ""
        return redirect(request, f"/{view.path}", f"{verb}: {done} of {len(records)} selected{note}",
                        page=request.query_params.get("page"), **filters)

    handler.__name__ = f"{view.path}_bulk"
    return handler


def routes(templates: Templates) -> list[Route]:
    found = []
    for view in VIEWS.values():
        found.append(Route(f"/{view.path}", listing(view, templates), methods=["GET"]))
        found.append(Route(f"/{view.path}/bulk", action(bulk(view)), methods=["POST"]))
    return found
