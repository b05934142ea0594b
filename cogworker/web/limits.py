"""``/limits``: every rate limiter (docs/architecture.md#limits): kind and limit, in use,
waiting, and how many jobs it parked over its limit, through ``cogworker.api``. Read-only."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import api
from .views import Templates, config_of


def routes(templates: Templates) -> list[Route]:
    def listing(request: Request) -> Response:
        config = config_of(request)
        return templates.render(request, "limits.html", limiters=api.limiters(config), deferrals=api.deferrals(config))

    return [Route("/limits", listing, methods=["GET"])]
