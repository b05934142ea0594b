"""What guards every request: the allowed hosts (400 for any other ``Host``, before
routing), the auth hook (401), read-only mode (no POST), the same-origin check and the CSRF
token of every state change (403 without them), and the headers every response gets (a
Content-Security-Policy that allows only this app's own script and style).

The session is a random value in an HttpOnly, SameSite=Strict cookie; the CSRF token in
every form is an HMAC of it under a server-side secret (as Django's and Starlette-CSRF's).
A page on another port of this host, or a sibling subdomain, is same-site: it can set a
cookie of the same name and its forms carry SameSite=Strict cookies, so a token the client
could pick (the cookie's own value) is no proof. It can't compute the HMAC; two session
cookies (one tossed in beside ours) are refused; and its Origin/Sec-Fetch-Site give it away
(``hosts.cross_origin``). Several server processes agree when they share the secret
(``create_app(secret=...)`` or ``$COGWORKER_WEB_SECRET``); by default each draws its own."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse

from .hosts import AllowedHosts, cross_origin

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
AuthHook = Callable[[Request], bool]

CSRF_COOKIE = "cogworker_csrf"
CSRF_FIELD = "csrf"
SECRET_ENV = "COGWORKER_WEB_SECRET"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
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


def server_secret(given: str | bytes | None = None) -> bytes:
    """The key of the CSRF tokens: ``given``, else ``$COGWORKER_WEB_SECRET``, else random
    (this process's own: a restart asks open pages to reload before their next action)."""
    if given is None:
        given = os.environ.get(SECRET_ENV) or secrets.token_bytes(32)
    key = given.encode() if isinstance(given, str) else given
    if len(key) < 16:
        raise ValueError(f"the web UI's secret ({SECRET_ENV}) must be at least 16 bytes long")
    return key


def sign(secret: bytes, session: str) -> str:
    digest = hmac.new(secret, b"cogworker-csrf:" + session.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def csrf_token(request: Request) -> str:
    """This session's token (set by ``Guard`` on the request's scope)."""
    return str(request.scope.get("cogworker_csrf", ""))


def csrf_valid(request: Request, submitted: object) -> bool:
    """``submitted`` is the token of the one session cookie the request carried."""
    expected = request.scope.get("cogworker_csrf_expected", "")
    return bool(expected) and isinstance(submitted, str) and hmac.compare_digest(expected.encode(), submitted.encode())


class Guard:
    """ASGI middleware around the whole UI (so under a mount prefix too)."""

    def __init__(
        self,
        app: ASGIApp,
        auth: AuthHook | None,
        read_only: bool,
        hosts: AllowedHosts | None = None,
        secret: bytes | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.read_only = read_only
        self.hosts = hosts or AllowedHosts()
        self.secret = secret or server_secret()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if not self.hosts.allows(request.headers.get("host", "")):
            await _bad_host(scope, receive, send)
            return
        sessions = _cookies(scope)
        refusal = self.refuse(request, sessions)
        session = sessions[0] if len(sessions) == 1 else secrets.token_urlsafe(32)
        scope["cogworker_csrf"] = sign(self.secret, session)
        # Only a session the request carried can be matched: not one minted just now.
        scope["cogworker_csrf_expected"] = scope["cogworker_csrf"] if len(sessions) == 1 else ""
        new_cookie = len(sessions) != 1

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(HEADERS)
                if new_cookie:
                    headers.append((b"set-cookie", _set_cookie(scope, session).encode("latin-1")))
                message["headers"] = headers
            await send(message)

        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
        else:
            await self.app(scope, receive, send_with_headers)

    def refuse(self, request: Request, sessions: list[str]) -> PlainTextResponse | None:
        if self.auth is not None and not self.auth(request):
            challenge = getattr(self.auth, "www_authenticate", None)
            return PlainTextResponse(
                "401 Unauthorized\n", 401, headers={"WWW-Authenticate": challenge} if challenge else None
            )
        if request.method in SAFE_METHODS:
            return None
        if self.read_only:
            return PlainTextResponse("403 Forbidden: this UI is read-only\n", 403)
        if len(sessions) > 1:
            return PlainTextResponse(
                f"403 Forbidden: {len(sessions)} {CSRF_COOKIE} cookies (another page on this "
                "domain set one); clear this site's cookies and reload\n",
                403,
            )
        why = cross_origin(request.headers)
        if why is not None:
            return PlainTextResponse(f"403 Forbidden: a change must come from this UI's own pages ({why})\n", 403)
        return None


async def _bad_host(scope: Scope, receive: Receive, send: Send) -> None:
    """Not routed, no cookie: the name may be an attacker's, rebound to this address."""
    response = PlainTextResponse(
        "400 Bad Request: this Host is not allowed (cogworker web --allowed-host NAME, "
        "or create_app(allowed_hosts=[...]))\n",
        400,
        headers=dict((k.decode(), v.decode()) for k, v in HEADERS),
    )
    await response(scope, receive, send)


def _cookies(scope: Scope) -> list[str]:
    """Every value of our cookie in the request, in order (a tossed-in second one included:
    a parser that keeps the last would let it win)."""
    found = []
    for name, value in scope.get("headers", []):
        if name != b"cookie":
            continue
        for pair in value.decode("latin-1").split(";"):
            key, eq, text = pair.strip().partition("=")
            if eq and key.strip() == CSRF_COOKIE and text.strip().strip('"'):
                found.append(text.strip().strip('"'))
    return found


def _set_cookie(scope: Scope, token: str) -> str:
    path = (scope.get("root_path") or "").rstrip("/") + "/"
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    return f"{CSRF_COOKIE}={token}; Path={path}; HttpOnly; SameSite=Strict{secure}"
