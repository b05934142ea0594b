"""Helpers of the web UI's HTTP tests (test_web, test_web_security): a TestClient that
follows no redirect, the session's CSRF token as a form carries it, a form post with it,
the app's POST routes, and a Redis seeded with entries of every kind (one with a script
in its argument, one that isn't JSON)."""

from __future__ import annotations

import base64
import re
import time

import pytest
from api_util import entry, failed
from starlette.testclient import TestClient

XSS = "<script>alert('pwned')</script>"
GARBAGE = b"\xff\xfe<i>not json"


def client_for(app, **kwargs) -> TestClient:
    return TestClient(app, follow_redirects=False, **{"base_url": "http://localhost", **kwargs})


def page_token(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    return found[1] if found else ""


def token(client: TestClient, path: str = "/") -> str:
    """The session's CSRF token, as a form carries it (from another page if ``path`` has
    no form); kept on the client for ``post``."""
    page = client.get(path)
    assert page.status_code == 200
    found = page_token(page.text)
    for other in ("/dead", "/retries", "/queues"):  # pages with a form, when not empty
        found = found or page_token(client.get(other).text)
    client.csrf = found  # type: ignore[attr-defined]
    return client.csrf  # type: ignore[attr-defined]


def key(raw: bytes | str) -> str:
    return base64.urlsafe_b64encode(raw.encode() if isinstance(raw, str) else raw).decode()


@pytest.fixture
def seeded(config):
    r = config.redis()
    r.zadd(config.keys.dead, {failed("apps.x.job", [XSS], jid="d1", error_class="ValueError"): time.time()})
    r.zadd(config.keys.dead, {GARBAGE: time.time() - 5})
    r.zadd(config.keys.retry, {failed("apps.x.job", [1], jid="r1"): time.time() + 60})
    r.lpush(config.keys.queue("default"), entry("apps.x.job", [2], jid="q1"))
    r.sadd(config.keys.queues, "default")
    return config


def post_routes(app) -> list[str]:
    paths = []
    for route in app.app.routes:
        if "POST" in (getattr(route, "methods", None) or ()):
            paths.append(route.path.replace("{name}", "default").replace("{jid}", "d1"))
    return paths


def post(client: TestClient, path: str, **form: str):
    return client.post(path, data={"csrf": client.csrf, **form})
