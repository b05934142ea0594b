"""What every page shares: the templates (Jinja2, autoescaped: job arguments, errors and
tracebacks are untrusted), links under the mount prefix, the flash line after an action,
the POST handling (CSRF checked first), pagination, and how times and sizes read."""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from ..config import Config, get_config, number
from ..names import shown
from ..wording import counted
from .security import CSRF_FIELD, csrf_token, csrf_valid

PER_PAGE = 25
FLASH_COOKIE = "cogworker_flash"


def config_of(request: Request) -> Config:
    """The app's config, or the process's current one (``cogworker.configure``)."""
    return request.app.state.config or get_config()


def url(request: Request, path: str, **params: Any) -> str:
    """``path`` under the prefix the app is mounted at (its ASGI root_path)."""
    prefix = str(request.scope.get("root_path") or "").rstrip("/")
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return prefix + path + (f"?{query}" if query else "")


def quoted(text: str) -> str:
    """A name or jid as one path segment."""
    return quote(text, safe="")


def ago(at: float | None, now: float | None = None) -> str:
    moment = number(at)
    if moment is None:
        return "-"
    delta = (now or time.time()) - moment
    future = delta < 0
    delta = abs(delta)
    if delta < 60:
        text = f"{delta:.0f}s"
    elif delta < 3600:
        text = f"{delta / 60:.0f}m"
    elif delta < 86400:
        text = f"{delta / 3600:.1f}h"
    else:
        text = f"{delta / 86400:.1f}d"
    return f"in {text}" if future else f"{text} ago"


def utc(at: float | None) -> str:
    if at is None:
        return ""
    try:
        return datetime.fromtimestamp(float(at), tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError, TypeError):
        return str(at)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def milliseconds(ms: float | None) -> str:
    """A job's execution time: sub-millisecond ones too (0.42 ms), then as ``duration``."""
    if ms is None:
        return "-"
    if ms < 10:
        return f"{ms:.2g} ms" if ms < 1 else f"{ms:.1f} ms"
    return duration(ms / 1000)


def megabytes(rss: int | None) -> str:
    return "-" if not rss else f"{rss / 1048576:.0f} MB"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)


def short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def raw_text(raw: bytes) -> str:
    """An unreadable entry's bytes as they are: invalid UTF-8 as \\xNN escapes."""
    return bytes(raw).decode("utf-8", errors="backslashreplace")


def entry_key(raw: bytes) -> str:
    """An entry as a form value: its exact bytes (what every API change is checked against)."""
    return base64.urlsafe_b64encode(raw).decode()


def entry_raw(value: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        return None


def grouped_count(n: int, noun: str, plural: str | None = None) -> str:
    return counted(n, noun, plural, grouped=True)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("cogworker.web", "templates"), autoescape=select_autoescape(default=True))
    env.filters.update(
        ago=ago,
        utc=utc,
        duration=duration,
        ms=milliseconds,
        mb=megabytes,
        pretty=pretty,
        short=short,
        q=quoted,
        key=entry_key,
        rawbytes=raw_text,
        repr=repr,
        name=shown,
        counted=grouped_count,  # {{ n|counted('entry', 'entries') }}: "1 entry", "1,204 entries"
    )
    return env


@dataclass
class Page:
    """Where a paginated list is: ``page`` 1-based; ``total`` None when not known (filtered)."""

    page: int
    per_page: int
    total: int | None
    has_next: bool

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    @property
    def last(self) -> int | None:
        return None if self.total is None else max(1, -(-self.total // self.per_page))


def page_number(request: Request) -> int:
    try:
        return max(1, min(int(request.query_params.get("page", "1")), 10**9))
    except ValueError:
        return 1


class Templates:
    def __init__(self) -> None:
        self.env = _environment()

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        flash = unquote(request.cookies.get(FLASH_COOKIE, ""))
        body = self.env.get_template(name).render(
            request=request,
            u=lambda path, **params: url(request, path, **params),
            csrf=csrf_token(request),
            csrf_field=CSRF_FIELD,
            read_only=request.app.state.read_only,
            flash=flash,
            now=time.time(),
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(body, status)
        if flash:
            response.delete_cookie(FLASH_COOKIE, path=url(request, "/"))
        return response


def redirect(request: Request, path: str, flash: str = "", **params: Any) -> Response:
    """After a POST: back to a page (303, so a reload doesn't post again), with one line."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        path = "/"  # only this app's own pages
    response = RedirectResponse(url(request, path, **params), 303)
    if flash:
        response.set_cookie(FLASH_COOKIE, quote(flash[:300]), path=url(request, "/"), httponly=True, samesite="strict")
    return response


CONFIRM_FIELD = "confirm"


def confirmed(form: FormData) -> bool:
    """A destructive bulk action's POST says it was confirmed: app.js adds the field once
    its dialog was accepted, the page ``ask`` renders carries it. Without JavaScript (a
    script that failed to load, or none allowed) the server asks: nothing depends on it."""
    return form.get(CONFIRM_FIELD) == "yes"


def ask(templates: Templates, request: Request, form: FormData, question: str, label: str, back: str) -> Response:
    """The confirmation page of a destructive bulk action: ``question``, and a button
    (``label``) posting the same form again, confirmed; Cancel goes ``back``, nothing done."""
    fields = [(k, str(v)) for k, v in form.multi_items() if k not in (CSRF_FIELD, CONFIRM_FIELD)]
    return templates.render(
        request,
        "confirm.html",
        question=question,
        label=label,
        target=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
        fields=fields,
        confirm_field=CONFIRM_FIELD,
        back=url(request, back),
    )


Handler = Callable[[Request, FormData], Response]


def action(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A POST endpoint: the CSRF token is checked before anything else (403, nothing
    changed); the handler (blocking Redis calls) then runs in a thread."""

    async def endpoint(request: Request) -> Response:
        form = await request.form()
        if not csrf_valid(request, form.get(CSRF_FIELD)):
            return PlainTextResponse("403 Forbidden: missing or wrong CSRF token (reload the page)\n", 403)
        return await run_in_threadpool(handler, request, form)

    endpoint.__name__ = handler.__name__
    return endpoint
