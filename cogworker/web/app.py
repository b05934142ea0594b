"""``create_app``: the web UI as one ASGI app, standalone (``cogworker web``) or mounted
under a prefix in another app. It reads and changes the system only through
``cogworker.api`` (docs/architecture.md#web-ui)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import store
from ..config import Config, redact_url
from ..errors import BadPayload, NotFound, WrongType
from . import batches, job, limits, metrics, overview, periodic, queues, sets
from .charts import ChartSampler
from .hosts import AllowedHosts
from .security import AuthHook, Guard, server_secret
from .views import Templates, config_of

FAVICON = resources.files("cogworker.web") / "static" / "favicon.svg"


def favicon(request: Request) -> Response:
    """The icon where a browser asks by default (pages also link it under /static)."""
    return Response(FAVICON.read_bytes(), media_type="image/svg+xml", headers={"cache-control": "max-age=86400"})


def create_app(
    auth: AuthHook | None = None,
    read_only: bool = False,
    config: Config | None = None,
    allowed_hosts: Iterable[str] = (),
    secret: str | bytes | None = None,
) -> Guard:
    """The UI. ``auth(request) -> bool``: False answers 401 (``security.BasicAuth`` is one);
    ``read_only``: every action hidden and every POST refused; ``config``: the Redis and
    namespace to show (default: the process's, ``cogworker.configure``); ``allowed_hosts``:
    the names it is served under besides localhost, 127.0.0.1 and ::1 (any other Host: 400);
    ``secret``: the key of the CSRF tokens, the same for every server process behind one
    address (default: $COGWORKER_WEB_SECRET, else random per process)."""
    hosts, key = AllowedHosts(allowed_hosts), server_secret(secret)  # bad ones: ValueError now, not per request
    templates = Templates()

    def failure(request: Request, status: int, message: str) -> Response:
        return templates.render(request, "error.html", status, message=message)

    async def not_found(request: Request, exc: Exception) -> Response:
        return failure(request, 404, str(exc) if isinstance(exc, NotFound) else "no such page")

    async def refused(request: Request, exc: Exception) -> Response:
        return failure(request, 409, str(exc))

    async def unreachable(request: Request, exc: Exception) -> Response:
        url = redact_url(config_of(request).redis_url)
        return failure(request, 503, f"Redis at {url} did not answer ({type(exc).__name__}); try again")

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        return failure(request, code, "no such page" if code == 404 else f"HTTP {code}")

    routes = [
        *overview.routes(templates, ChartSampler()),
        *queues.routes(templates),
        *sets.routes(templates),
        *job.routes(templates),
        *periodic.routes(templates),
        *limits.routes(templates),
        *batches.routes(templates),
        *metrics.routes(templates),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Mount("/static", StaticFiles(packages=[("cogworker.web", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            NotFound: not_found,
            WrongType: refused,
            BadPayload: refused,
            HTTPException: http_error,
            store.ConnectionError: unreachable,
            store.TimeoutError: unreachable,
        },
    )
    app.state.config = config
    app.state.read_only = read_only
    return Guard(app, auth, read_only, hosts, key)
