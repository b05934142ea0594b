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
from ..wording import counted
from .views import PER_PAGE, Page, Templates, action, ask, config_of, confirmed, entry_raw, page_number, redirect

CHUNK = 500  # entries per read of a filtered page, and per round of a filtered "all matching" action
SCAN_BUDGET = 5000  # entries one filtered page reads at most: a click stays bounded however rare the matches


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


@dataclass
class Scan:
    """A filtered page: the matches from rank ``start`` in page order, and where the next
    page starts (None: the end of the set was reached)."""

    start: int
    rows: list[api.JobRecord]
    next_start: int | None


def scan_page(jobset: api.JobSet, filters: dict[str, str | None], start: int) -> Scan:
    """Reads the set in page order from ``start``, CHUNK entries at a time, until a page of
    matches is found or SCAN_BUDGET entries were read: O(page / selectivity), bounded."""
    rows: list[api.JobRecord] = []
    rank = start
    while rank - start < SCAN_BUDGET:
        chunk = jobset.jobs(rank, CHUNK)
        for i, record in enumerate(chunk):
            if record.matches(filters["job_class"], filters["error_class"], filters["queue"]):
                rows.append(record)
                if len(rows) == PER_PAGE:
                    return Scan(start, rows, rank + i + 1)
        if len(chunk) < CHUNK:
            return Scan(start, rows, None)
        rank += len(chunk)
    return Scan(start, rows, rank)


def listing(view: SetView, templates: Templates) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        jobset = view.kind(config_of(request))
        filters = filters_of(request.query_params)
        if any(filters.values()):
            try:
                start = max(0, int(request.query_params.get("from", "0")))
            except ValueError:
                start = 0
            scan = scan_page(jobset, filters, start)
            return templates.render(
                request,
                "set.html",
                view=view,
                rows=scan.rows,
                scan=scan,
                page=None,
                filters=filters,
                size=jobset.size(),
            )
        size = jobset.size()
        page = Page(page_number(request), PER_PAGE, size, False)
        page.has_next = page.offset + PER_PAGE < size
        rows = jobset.jobs(page.offset, PER_PAGE)
        return templates.render(
            request, "set.html", view=view, rows=rows, page=page, scan=None, filters=filters, size=size
        )

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


def bulk(view: SetView, templates: Templates) -> Callable[[Request, FormData], Response]:
    def handler(request: Request, form: FormData) -> Response:
        verb = str(form.get("action", ""))
        filters = filters_of(form)
        if verb not in ACTIONS or (verb == "kill" and not view.killable):
            return redirect(request, f"/{view.path}", f"unknown action {verb!r}", **filters)
        jobset = view.kind(config_of(request))
        if form.get("scope") == "all":
            if not confirmed(form):
                return ask_all(templates, request, form, view, jobset, verb)
            done = act_on_all(jobset, verb, filters)
            return redirect(
                request,
                f"/{view.path}",
                f"{verb}: {counted(done, 'entry', 'entries', grouped=True)} (all matching)",
                **filters,
            )
        raws = [entry_raw(str(v)) for v in form.getlist("entry")]
        records = [api.JobRecord.parse(raw, jobset.name) for raw in raws if raw is not None]
        if records and verb != "retry" and not confirmed(form):
            return ask_selected(templates, request, form, view, verb, len(records))
        done = sum(act(jobset, verb, record) for record in records)
        gone = len(records) - done
        note = f"; {gone} gone meanwhile or not a job" if gone else ""
        return redirect(
            request,
            f"/{view.path}",
            f"{verb}: {done} of {len(records)} selected{note}",
            page=request.query_params.get("page"),
            **{"from": request.query_params.get("from")},
            **filters,
        )

    handler.__name__ = f"{view.path}_bulk"
    return handler


def ask_selected(
    templates: Templates, request: Request, form: FormData, view: SetView, verb: str, count: int
) -> Response:
    """The confirmation page of a delete or kill of the selected entries (or one row's)."""
    word = verb.capitalize()
    which = "the selected entry" if count == 1 else f"the {count:,} selected entries"  # never "the 1 selected"
    query = request.url.query
    back = f"/{view.path}" + (f"?{query}" if query else "")
    question = f"{word} {which} of {view.title}? This cannot be undone."
    return ask(templates, request, form, question, f"{word} {count:,} selected", back)


def ask_all(
    templates: Templates, request: Request, form: FormData, view: SetView, jobset: api.JobSet, verb: str
) -> Response:
    """The confirmation page of an action on every (matching) entry of a set: the same
    words as the buttons of set.html."""
    shown = {k: v for k, v in filters_of(form).items() if v}
    which = (
        "every entry matching " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown.items())
        if shown
        else "all " + counted(jobset.size(), "entry", "entries", grouped=True)
    )
    scheduled = view.path == "scheduled"
    word = {"retry": "Run now" if scheduled else "Retry", "kill": "Kill", "delete": "Delete"}[verb]
    label = {"retry": "Run all now" if scheduled else "Retry all", "kill": "Kill all", "delete": "Delete all"}[verb]
    undo = "" if verb == "retry" else " This cannot be undone."
    return ask(templates, request, form, f"{word} {which} of {view.title}?{undo}", label, f"/{view.path}")


def routes(templates: Templates) -> list[Route]:
    found = []
    for view in VIEWS.values():
        found.append(Route(f"/{view.path}", listing(view, templates), methods=["GET"]))
        found.append(Route(f"/{view.path}/bulk", action(bulk(view, templates)), methods=["POST"]))
    return found
