"""Django support: add ``"cogworker.django_support.CogworkerConfig"`` to ``INSTALLED_APPS``.

- At ``django.setup()`` (``CogworkerConfig.ready``): cogworker is configured from the
  optional ``COGWORKER`` setting (``configure``'s keywords), and every installed app's
  ``jobs`` module (``COGWORKER_JOBS_MODULE``) is imported, so its ``@job``s are registered.
  A worker runs them all with ``cogworker-prefork cogworker.django_worker`` (it calls
  ``django.setup()``; ``DJANGO_SETTINGS_MODULE`` names the settings).
- Each job runs between two ``close_old_connections()`` (a server middleware), as a
  request does, so a connection that broke or outlived ``CONN_MAX_AGE`` is replaced.
- ``enqueue_on_commit(job, *args, **kwargs)``: the arguments are checked now and the job
  is enqueued once the current transaction commits (never, if it rolls back).
- ``admin_urls()``: the web UI at ``admin/cogworker/``, behind the admin's own login
  (``staff_member_required``); its POSTs carry cogworker's CSRF token, not Django's.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from asgiref.sync import async_to_sync
from django.apps import AppConfig, apps
from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.db import close_old_connections, transaction
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from . import config as config_module
from .client.jobs import Job
from .core.middleware import server_middleware
from .core.registry import JobDef, register

if TYPE_CHECKING:
    from .web.security import ASGIApp

P = ParamSpec("P")
R = TypeVar("R")


class CogworkerConfig(AppConfig):
    name = "cogworker.django_support"
    label = "cogworker"
    verbose_name = "cogworker"

    def ready(self) -> None:
        given = getattr(settings, "COGWORKER", None)
        if given:
            config_module.configure(**dict(given))
        autodiscover()
        if fresh_connections not in server_middleware:  # once, whatever calls setup() again
            server_middleware.add(fresh_connections)


def autodiscover(module: str | None = None) -> list[str]:
    """Imports each installed app's jobs module (``COGWORKER_JOBS_MODULE``, default
    ``jobs``) and registers its jobs (again, if a test reset the registry); returns the
    modules found. An app without one is skipped; an error inside one is raised."""
    name = module or getattr(settings, "COGWORKER_JOBS_MODULE", "jobs")
    found = []
    for app in apps.get_app_configs():
        dotted = f"{app.name}.{name}"
        if not hasattr(app.module, "__path__") or importlib.util.find_spec(dotted) is None:
            continue  # a module, not a package (this one), has no submodules
        imported = importlib.import_module(dotted)
        for value in vars(imported).values():
            if isinstance(value, JobDef) and value.func.__module__ == dotted:
                register(value)
        found.append(dotted)
    return found


def fresh_connections(job: Any, payload: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
    close_old_connections()
    try:
        return call_next()
    finally:
        close_old_connections()


def enqueue_on_commit(job: Job[P, R], *args: P.args, **kwargs: P.kwargs) -> None:
    """``job.enqueue(*args, **kwargs)`` once the transaction of the default database
    commits (at once outside one); the arguments are checked now. Another database:
    ``transaction.on_commit(job.s(...).enqueue, using="other")``."""
    call = job.s(*args, **kwargs)
    transaction.on_commit(call.enqueue)


def admin_urls(prefix: str = "admin/cogworker", **ui: Any) -> list[URLPattern]:
    """URL patterns for the web UI under ``prefix``, behind the Django admin's login; put
    them before ``path("admin/", admin.site.urls)``. ``ui``: ``create_app``'s keywords."""
    from .web import create_app

    # Django checked the Host against its ALLOWED_HOSTS before this view runs (request.get_host)
    ui.setdefault("allowed_hosts", ["*"])
    app = create_app(**ui)

    @csrf_exempt  # the UI's forms carry its own CSRF token (a cookie and a field)
    @staff_member_required
    def view(request: HttpRequest, path: str | None = None) -> HttpResponse:
        return forward(app, request, path or "/")

    return [re_path(rf"^{prefix.strip('/')}(?P<path>/.*)?$", view, name="cogworker-ui")]


def forward(app: ASGIApp, request: HttpRequest, path: str) -> HttpResponse:
    """Runs the ASGI ``app`` for this Django request, mounted where ``path`` starts."""
    full = request.path
    root = full[: len(full) - len(path)] if full.endswith(path) else full.rstrip("/")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": full, "raw_path": full.encode(), "root_path": root,
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in request.headers.items()],
        "client": (request.META.get("REMOTE_ADDR") or "", 0),
        "server": (request.get_host().split(":")[0], int(request.get_port() or 80)),
    }
    status, headers, body = async_to_sync(_call)(app, scope, request.body)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() == "set-cookie":
            response.cookies.load(value)
        elif name.lower() != "content-length":
            response[name] = value
    return response


async def _call(app: ASGIApp, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    received = False
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Any) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers.extend((k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)
