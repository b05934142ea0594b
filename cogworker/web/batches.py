"""``/batches``: the newest batches (docs/architecture.md#batches) with their progress and
callbacks; ``/batches/<bid>``: one batch's counts, its jobs with their states (linked to
the job page) and its callbacks with when each fired. Read-only, through ``cogworker.api``."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from ..config import Config
from ..errors import NotFound
from .views import PER_PAGE, Page, Templates, config_of, page_number

JOBS_SHOWN = 200  # a batch's jobs on its page (the counts say how many it has in all)


@dataclass(frozen=True)
class BatchBar:
    """A batch's progress as the three parts of one bar, in percent of its jobs."""

    succeeded: float
    failed: float
    pending: float

    @classmethod
    def of(cls, info: api.BatchInfo) -> BatchBar:
        total = max(info.total, info.succeeded + info.failed + info.pending, 1)
        return cls(100.0 * info.succeeded / total, 100.0 * info.failed / total, 100.0 * info.pending / total)


def fired(info: api.BatchInfo) -> list[str]:
    """The names of the callbacks that fired."""
    return [name for name, cb in info.callbacks.items() if cb.get("fired_at") is not None]


def class_of(jid: str, config: Config) -> str | None:
    """A member's class, from its status (the batch's own hash holds only its state): two
    pipelines a job, for the jobs shown; None once its status is not retained."""
    found = api.status(jid, config)
    return found.job_class if found is not None else None


def routes(templates: Templates) -> list[Route]:
    def listing(request: Request) -> Response:
        config = config_of(request)
        number, total = page_number(request), api.batch_count(config)
        page = Page(number, PER_PAGE, total, number * PER_PAGE < total)
        found = api.batches(limit=PER_PAGE, offset=page.offset, config=config)
        return templates.render(request, "batches.html", page=page, rows=[(b, BatchBar.of(b), fired(b)) for b in found])

    def one(request: Request) -> Response:
        bid = request.path_params["bid"]
        config = config_of(request)
        info = api.batch(bid, config)
        if info is None:
            raise NotFound(f"no batch {bid!r} (never opened, or its record expired)")
        jobs = sorted(api.batch_jobs(bid, limit=JOBS_SHOWN, config=config), key=lambda j: (j[1] != "pending", j))
        classes = {jid: class_of(jid, config) for jid, _ in jobs}
        return templates.render(
            request, "batch.html", info=info, bar=BatchBar.of(info), jobs=jobs, classes=classes, shown=JOBS_SHOWN
        )

    return [Route("/batches", listing, methods=["GET"]), Route("/batches/{bid}", one, methods=["GET"])]
