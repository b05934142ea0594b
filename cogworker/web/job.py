"""``/job/<jid>``: where the job is now, its arguments, status and every attempt with its
traceback, and the actions that fit where it is; ``/search`` (the jid box on every page)."""

from __future__ import annotations

import time

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from ..api import lookup
from ..api.batch_member import batch_of
from ..config import Config
from ..errors import ConfigurationError, NotFound
from .sets import act
from .views import Templates, action, ago, config_of, entry_raw, quoted, redirect, url

# What each place allows: a queue entry can only be deleted; schedule and retry also
# run now or go to dead; a dead job can be run again or deleted.
PLACE_ACTIONS = {
    "schedule": ("retry", "kill", "delete"),
    "retry": ("retry", "kill", "delete"),
    "dead": ("retry", "delete"),
}
SET_KINDS: dict[str, type[api.JobSet]] = {"schedule": api.ScheduledSet, "retry": api.RetrySet, "dead": api.DeadSet}
STATE_SETS: dict[str, type[api.JobSet]] = {"scheduled": api.ScheduledSet, "retrying": api.RetrySet, "dead": api.DeadSet}
PLACE_OF_STATE = {"scheduled": "schedule", "retrying": "retry", "dead": "dead"}


def _hinted(jid: str, request: Request) -> api.JobRecord | None:
    """Where a list page saw the entry (``?in=dead&at=<score>``, ``?in=queue:<name>&pos=<n>``):
    looked up there in O(log N) or O(window), not by scanning every set."""
    params, config = request.query_params, config_of(request)
    place = params.get("in", "")
    try:
        if place in SET_KINDS and "at" in params:
            return lookup.find_scored(SET_KINDS[place](config), jid, float(params["at"]))
        if place.startswith("queue:") and "pos" in params:
            return lookup.find_near(api.Queue(place[len("queue:") :], config), jid, int(params["pos"]))
    except (ValueError, ConfigurationError):
        pass  # a hand-edited hint: ignored
    return None


def _where(jid: str, request: Request, status: api.JobStatus | None) -> api.JobRecord | None:
    """The entry: from the link's hint; else where its status says it is; else, when the
    status is off or its place doesn't hold the job (the status lags a run by up to a
    flush), ``api.locate``, which scans every set (O(N) in Redis, chunked)."""
    found = _hinted(jid, request)
    if found is not None:
        return found
    config = config_of(request)
    if status is not None:
        found = _where_status_says(jid, status, config)
        if found is not None or not _worth_a_scan(jid, status, config):
            return found
    try:
        return api.locate(jid, config)
    except NotFound:
        return None


def _where_status_says(jid: str, status: api.JobStatus, config: Config) -> api.JobRecord | None:
    if status.state == "queued" and status.queue:
        return api.Queue(status.queue, config).find(jid)
    kind = STATE_SETS.get(status.state)
    return kind(config).find(jid) if kind is not None else None


def _worth_a_scan(jid: str, status: api.JobStatus, config: Config) -> bool:
    """Whether the job may wait somewhere its status doesn't say: always when the status
    names a place (it wasn't there); when it says running, unless a live process runs it;
    never once it says succeeded (in no set, by design)."""
    if status.state == "succeeded":
        return False
    if status.state == "running":
        return not any(p.running is not None and p.running.jid == jid for p in api.processes(config))
    return True


def place_of(status: api.JobStatus) -> str | None:
    """The source a status points to (as ``JobRecord.source`` names it), or None."""
    if status.state == "queued":
        return f"queue:{status.queue}" if status.queue else None
    return PLACE_OF_STATE.get(status.state)


def placed_at(record: api.JobRecord) -> float | None:
    """When the entry got where it is, as far as it says: a failure's time in retry and
    dead, the enqueue time on a queue; None when it doesn't say."""
    if not record.readable:
        return record.at if record.source == "dead" else None
    stamp = record.failed_at if record.source in ("retry", "dead") else record.enqueued_at
    return float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None


def disagreement(status: api.JobStatus | None, record: api.JobRecord | None) -> str | None:
    """A sentence when the status and the place the job was found in disagree, saying
    which of the two is newer; None when they agree (or either is missing)."""
    if status is None or record is None or place_of(status) == record.source:
        return None
    where = record.source.replace("queue:", "queue ")
    moved = placed_at(record)
    if moved is None:
        return f"the status says {status.state}, but the job is in {where} (when it got there is not recorded)"
    newer = (
        "the place is newer: the status catches up at the worker's next flush"
        if moved >= status.updated_at
        else "the status is newer: the entry is moving on (reload to see where)"
    )
    return (
        f"the status says {status.state} (written {_age(status.updated_at)}), but the job is in {where} "
        f"(since {_age(moved)}): {newer}"
    )


def _age(at: float) -> str:
    """To a tenth of a second while recent: a lagging status is a matter of a second."""
    delta = time.time() - at
    return f"{delta:.1f} s ago" if 0 <= delta < 60 else ago(at)


CANCELLABLE = ("queued", "scheduled", "running", "retrying")


def cancellable(record: api.JobRecord | None, status: api.JobStatus | None) -> bool:
    """A Cancel button where the job waits (a queue, schedule, retry) or while its status
    says it waits or runs; ``api.cancel`` says what it found."""
    if status is not None and status.state == "cancelled":
        return False
    if record is not None:
        return record.source != "dead" and record.is_job
    return status is not None and status.state in CANCELLABLE


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
        bid = batch_of(jid, record.payload if record is not None else None, request.query_params.get("batch"), config)
        runs = (
            api.running_job(jid, config)
            if record is None and status is not None and status.state == "running"
            else None
        )
        return templates.render(
            request,
            "job.html",
            200 if found else 404,
            jid=jid,
            record=record,
            job_status=status,
            runs_on=runs[0] if runs else None,
            running=runs[1] if runs else None,
            batch_id=bid,
            attempts=attempts,
            actions=actions_for(record),
            found=found,
            retention=api.retention(config).describe(),
            disagreement=disagreement(status, record),
            cancellable=cancellable(record, status),
        )

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
            queue = api.Queue(place[len("queue:") :], config)
            done = verb == "delete" and queue.delete(api.JobRecord.parse(raw, place))
        elif place in SET_KINDS:
            jobset = SET_KINDS[place](config)
            done = act(jobset, verb, api.JobRecord.parse(raw, jobset.name))
        else:
            done = False
        return redirect(request, back, f"{verb}: done" if done else f"{verb}: not done (it moved meanwhile?)")

    def cancel(request: Request, form: FormData) -> Response:
        jid = request.path_params["jid"]
        back = str(form.get("back") or f"/job/{quoted(jid)}")
        if api.cancel(jid, config_of(request)):
            return redirect(request, back, f"cancel: done, job {jid} will not run (again)")
        return redirect(request, back, f"cancel: not done, job {jid} is not waiting or running")

    return [
        Route("/job/{jid}", show, methods=["GET"]),
        Route("/job/{jid}/cancel", action(cancel), methods=["POST"]),
        Route("/search", search, methods=["GET"]),
        Route("/job/{jid}/act", action(change), methods=["POST"]),
    ]
