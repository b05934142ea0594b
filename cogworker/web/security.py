"""What guards every request: the auth hook (401), read-only mode (no POST), the CSRF
token every POST carries (403 without it), and the headers every response gets (a
Content-Security-Policy that allows only this app's own script and style).

The CSRF token is a random value in an HttpOnly, SameSite=Strict cookie (the session),
echoed in every form as a hidden field: a page on another site can neither read the cookie
nor make the browser send it, so it can't forge the pair. It needs no server-side secret,
so several server processes behind one address agree on it."""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
AuthHook = Callable[[Request], bool]

CSRF_COOKIE = "cogworker_csrf"
CSRF_FIELD = "csrf"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


class BasicAuth:
    """HTTP basic auth against one username and password, compared in constant time
    (``cogworker web`` builds it from COGWORKER_WEB_USERNAME/COGWORKER_WEB_PASSWORD)."""

    www_authenticate = 'Basic realm="cogworker", charset="UTF-8"'

    def __init__(self, username: str, password: str) -> None:
        self.expected = f"{username}:{password}".encode()

    def __call__(self, request: Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self.expected)


def csrf_token(request: Request) -> str:
    """This session's token (set by ``Guard`` on the request's scope)."""
    return str(request.scope.get("cogworker_csrf", ""))


def csrf_valid(request: Request, submitted: object) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    return bool(cookie) and isinstance(submitted, str) and hmac.compare_digest(cookie.encode(), submitted.encode())


class Guard:
    """ASGI middleware around the whole UI (so under a mount prefix too)."""

    def __init__(self, app: ASGIApp, auth: AuthHook | None, read_only: bool) -> None:
        self.app = app
        self.auth = auth
        self.read_only = read_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.refuse(request)
        token = _cookie(scope) or secrets.token_urlsafe(32)
        scope["cogworker_csrf"] = token
        new_cookie = _cookie(scope) != token

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(HEADERS)
                if new_cookie:
                    headers.append((b"set-cookie", _set_cookie(scope, token).encode("latin-1")))
                message["headers"] = headers
            await send(message)

        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
        else:
            await self.app(scope, receive, send_with_headers)

    def refuse(self, request: Request) -> PlainTextResponse | None:
        if self.auth is not None and not self.auth(request):
            challenge = getattr(self.auth, "www_authenticate", None)
            return PlainTextResponse("401 Unauthorized\n", 401,
                                     headers={"WWW-Authenticate": challenge} if challenge else None)
        if self.read_only and request.method not in ("GET", "HEAD"):
            return PlainTextResponse("403 Forbidden: this UI is read-only\n", 403)
        return None


def _cookie(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed Cookie header: as if there were none
                return ""
            morsel = jar.get(CSRF_COOKIE)
            if morsel is not None and morsel.value:
                return morsel.value
    return ""


def _set_cookie(scope: Scope, token: str) -> str:
    path = (scope.get("root_path") or "").rstrip("/") + "/"
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    return f"{CSRF_COOKIE}={token}; Path={path}; HttpOnly; SameSite=Strict{secure}"
