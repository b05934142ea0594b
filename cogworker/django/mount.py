"""``admin_urls()``: the web UI at ``admin/cogworker/``, behind the Django admin's own
login (``staff_member_required``); its POSTs carry cogworker's CSRF token, not Django's.
Each request is handed to the UI's ASGI app (``forward``) and its whole response sent
back."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

if TYPE_CHECKING:
    from ..web.security import ASGIApp


def admin_urls(prefix: str = "admin/cogworker", **ui: Any) -> list[URLPattern]:
    """URL patterns for the web UI under ``prefix``, behind the Django admin's login; put
    them before ``path("admin/", admin.site.urls)``. ``ui``: ``create_app``'s keywords."""
    from ..web import create_app

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
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": full,
        "raw_path": full.encode(),
        "root_path": root,
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
    sent = asyncio.Event()  # the whole response was sent
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            # The client is gone only once the response is whole. A disconnect told at once
            # cancels a streamed response (a static file: Starlette's FileResponse listens for
            # it while it sends), which left an empty 200.
            await sent.wait()
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
            if not message.get("more_body", False):
                sent.set()

    try:
        await app(scope, receive, send)
    finally:
        sent.set()  # a listener still waiting is let go
    return status, headers, b"".join(chunks)
