"""``/job/<jid>``: where the job is now, its arguments, status and every attempt with its
traceback, and the actions that fit where it is; ``/search`` (the jid box on every page)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from ..api import lookup
from ..errors import ConfigurationError, NotFound
from .sets import act
from .views import Templates, action, config_of, entry_raw, quoted, redirect, url

# What each place allows: a queue entry can only be deleted; schedule and retry also
# run now or go to dead; a dead job can be run again or deleted.
PLACE_ACTIONS = {"schedule": ("retry", "kill", "delete"), "retry": ("retry", "kill", "delete"),
                 "dead": ("retry", "delete")}
SET_KINDS: dict[str, type[api.JobSet]] = {"schedule": api.ScheduledSet, "retry": api.RetrySet, "dead": api.DeadSet}
STATE_SETS: dict[str, type[api.JobSet]] = {"scheduled": api.ScheduledSet, "retrying": api.RetrySet,
                                           "dead": api.DeadSet}


def _hinted(jid: str, request: Request) -> api.JobRecord | None:
    """Where a list page saw the entry (``?in=dead&at=<score>``, ``?in=queue:<name>&pos=<n>``):
    looked up there in O(log N) or O(window), not by scanning every set."""
    params, config = request.query_params, config_of(request)
    place = params.get("in", "")
    try:
        if place in SET_KINDS and "at" in params:
            return lookup.find_scored(SET_KINDS[place](config), jid, float(params["at"]))
        if place.startswith("queue:") and "pos" in params:
            return lookup.find_near(api.Queue(place[len("queue:"):], config), jid, int(params["pos"]))
    except (ValueError, ConfigurationError):
        pass  # a hand-edited hint: ignored
    return None


def _where(jid: str, request: Request, status: api.JobStatus | None) -> api.JobRecord | None:
    """The entry: from the link's hint; else where its status says it is (status on);
    else ``api.locate``, which scans every set (O(N) in Redis, chunked)."""
    found = _hinted(jid, request)
    if found is not None:
        return found
    config = config_of(request)
    if status is None:
        try:
            return api.locate(jid, config)
        except NotFound:
            return None
    if status.state == "queued" and status.queue:
        return api.Queue(status.queue, config).find(jid)
    kind = STATE_SETS.get(status.state)
    return kind(config).find(jid) if kind is not None else None  # running or succeeded: in no set


def actions_for(record: api.JobRecord | None) -> tuple[str, ...]:
    if record is None:
        return ()
    if record.source.startswith("queue:"):
        return ("delete",)
    found = PLACE_ACTIONS.get(record.source, ())
    return found if record.is_job else tuple(a for a in found if a != "retry")


def routes(templates: Templates) -> list[Route]:
    def show(request: Request) -> Response:
        jid = request.path_params["jid"]
        config = config_of(request)
        status = api.status(jid, config)
        record = _where(jid, request, status)
        attempts = list(reversed(api.history(jid, config)))  # the latest first
        found = record is not None or status is not None or bool(attempts)
        return templates.render(request, "job.html", 200 if found else 404, jid=jid, record=record, job_status=status,
                                attempts=attempts, actions=actions_for(record), found=found)

    def search(request: Request) -> Response:
        jid = request.query_params.get("jid", "").strip()
        target = url(request, f"/job/{quoted(jid)}") if jid else url(request, "/")
        return Response(status_code=303, headers={"location": target})

    def change(request: Request, form: FormData) -> Response:
        jid = request.path_params["jid"]
        verb, place = str(form.get("action", "")), str(form.get("source", ""))
        raw = entry_raw(str(form.get("entry", "")))
        back = f"/job/{quoted(jid)}"
        if raw is None or verb not in ("retry", "kill", "delete"):
            return redirect(request, back, "nothing done: unknown action or entry")
        config = config_of(request)
        if place.startswith("queue:"):
            queue = api.Queue(place[len("queue:"):], config)
            done = verb == "delete" and queue.delete(api.JobRecord.parse(raw, place))
        elif place in SET_KINDS:
            jobset = SET_KINDS[place](config)
            done = act(jobset, verb, api.JobRecord.parse(raw, jobset.name))
        else:
            done = False
        return redirect(request, back, f"{verb}: done" if done else f"{verb}: not done (it moved meanwhile?)")

    return [
        Route("/job/{jid}", show, methods=["GET"]),
        Route("/search", search, methods=["GET"]),
        Route("/job/{jid}/act", action(change), methods=["POST"]),
    ]
