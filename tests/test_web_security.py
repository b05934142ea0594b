"""The web UI's guards over HTTP (Starlette's TestClient, a real Redis): every POST refused
without its CSRF token, the CSRF cookie's flags, the auth hook and basic auth, read-only,
untrusted text escaped under a CSP that forbids inline script, garbage entries shown raw,
and the ``cogworker web`` command's refusals and basic auth. (Pages and actions: test_web.)"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from api_util import entry
from prefork_harness import wait_for
from redis_server import free_port

from cogworker import api

pytest.importorskip("starlette")
from web_util import (  # noqa: E402, F401 (seeded: a fixture)
    GARBAGE,
    XSS,
    client_for,
    key,
    post_routes,
    seeded,
    token,
)

from cogworker.web import BasicAuth, create_app  # noqa: E402
from cogworker.web.security import CSRF_COOKIE  # noqa: E402


def test_every_post_without_or_with_a_wrong_token_is_403_and_changes_nothing(seeded):  # noqa: F811
    app = create_app(config=seeded)
    client = client_for(app)
    good = token(client)
    paths = post_routes(app)
    assert len(paths) >= 9, paths
    raw = seeded.redis().zrange(seeded.keys.dead, 0, -1)
    form = {"action": "delete", "scope": "all", "entry": key(raw[0]), "identity": "x", "name": "x", "source": "dead"}
    for path in paths:
        for bad in ({}, {"csrf": "wrong"}, {"csrf": good + "x"}):
            response = client.post(path, data={**form, **bad})
            assert response.status_code == 403, (path, bad)
            assert "CSRF" in response.text
    # And with the right token in the form but no session cookie: refused too.
    bare = client_for(app)
    assert bare.post("/dead/bulk", data={**form, "csrf": good}).status_code == 403
    assert api.DeadSet(seeded).size() == 2 and api.Queue("default", seeded).size() == 1
    assert not api.Queue("default", seeded).paused()
    response = client.post(
        "/dead/bulk", data={"action": "delete", "entry": key(raw[0]), "csrf": good, "confirm": "yes"}
    )
    assert response.status_code == 303 and api.DeadSet(seeded).size() == 1


def test_csrf_cookie_is_httponly_samesite_strict(seeded):  # noqa: F811
    response = client_for(create_app(config=seeded)).get("/")
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{CSRF_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/;" in cookie


def test_auth_hook_and_basic_auth(seeded):  # noqa: F811
    hooked = client_for(create_app(auth=lambda request: request.headers.get("x-ok") == "yes", config=seeded))
    assert hooked.get("/").status_code == 401
    assert hooked.post("/dead/bulk", data={"action": "delete", "scope": "all"}).status_code == 401
    assert hooked.get("/static/app.js").status_code == 401
    assert hooked.get("/", headers={"x-ok": "yes"}).status_code == 200
    basic = client_for(create_app(auth=BasicAuth("ops", "s3cret:x"), config=seeded))
    denied = basic.get("/dead")
    assert denied.status_code == 401 and denied.headers["www-authenticate"].startswith("Basic")
    for header in ("Basic " + base64.b64encode(b"ops:wrong").decode(), "Basic !!!", "Bearer x", ""):
        assert basic.get("/dead", headers={"authorization": header}).status_code == 401
    good = "Basic " + base64.b64encode(b"ops:s3cret:x").decode()
    assert basic.get("/dead", headers={"authorization": good}).status_code == 200
    assert api.DeadSet(seeded).size() == 2


def test_read_only_hides_every_action_and_refuses_every_post(seeded):  # noqa: F811
    app = create_app(read_only=True, config=seeded)
    client = client_for(app)
    good = token(client)
    for path in (
        "/",
        "/busy",
        "/queues",
        "/queues/default",
        "/scheduled",
        "/retries",
        "/dead",
        "/job/d1",
        "/periodic",
        "/metrics",
        "/unsettled",
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        assert 'method="post"' not in page.text and "read-only" in page.text, path
    for path in post_routes(app):
        response = client.post(path, data={"csrf": good, "action": "delete", "scope": "all"})
        assert response.status_code == 403, path
    assert api.DeadSet(seeded).size() == 2 and api.Queue("default", seeded).size() == 1


def test_untrusted_text_is_escaped_and_csp_forbids_inline_script(seeded, config):  # noqa: F811
    r = config.redis()
    r.zadd(
        config.keys.retry,
        {
            entry(
                "apps.x.job",
                {"k": XSS},
                jid="r2",
                error_class=XSS,
                error_message=XSS,
                error_traceback=f"Traceback\n  {XSS}\n",
            ): time.time()
        },
    )
    r.rpush(
        config.keys.history("r2"),
        '{"attempt": 1, "ended_at": 1, "outcome": "failed", '
        f'"error_class": "E", "error_message": "{XSS}", "traceback": "tb {XSS}"}}',
    )
    client = client_for(create_app(config=seeded))
    for path in ("/dead", "/retries", "/job/d1", "/job/r2", f"/job/{XSS}", "/retries?error_class=" + XSS):
        response = client.get(path)
        assert response.status_code in (200, 404), path
        assert "<script>alert" not in response.text, path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert "&lt;script&gt;alert(" in client.get("/job/r2").text
    scripts = re.findall(r"<script[^>]*>", client.get("/job/r2").text)
    assert scripts == ['<script src="/static/app.js" defer>']


def test_garbage_entries_render_raw_and_can_be_deleted(seeded, config):  # noqa: F811
    r = config.redis()
    r.zadd(config.keys.retry, {GARBAGE: time.time()})
    r.lpush(config.keys.queue("default"), GARBAGE)
    r.rpush(config.keys.unsettled, GARBAGE)
    client = client_for(create_app(config=seeded))
    good = token(client)
    shown = "\\xff\\xfe&lt;i&gt;not json"
    for path in ("/dead", "/retries", "/queues/default", "/unsettled"):
        page = client.get(path)
        assert page.status_code == 200 and shown in page.text, path
    assert client.post("/dead/bulk", data={"csrf": good, "action": "retry", "entry": key(GARBAGE)}).status_code == 303
    assert api.DeadSet(seeded).size() == 2  # not a job: it can't be retried, only deleted
    for path in ("/dead/bulk", "/retries/bulk", "/queues/default/delete"):
        response = client.post(path, data={"csrf": good, "action": "delete", "entry": key(GARBAGE), "confirm": "yes"})
        assert response.status_code == 303, path
    assert GARBAGE not in r.zrange(config.keys.dead, 0, -1) + r.zrange(config.keys.retry, 0, -1)
    assert GARBAGE not in r.lrange(config.keys.queue("default"), 0, -1)


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cogworker", "web", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


def test_cli_refuses_a_public_address_without_auth_in_one_line():
    env = {"COGWORKER_WEB_USERNAME": "", "COGWORKER_WEB_PASSWORD": ""}
    refused = cli("--host", "0.0.0.0", env=env)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "refusing to serve on 0.0.0.0 without authentication" in refused.stderr
    # --insecure, or credentials, get past that check (to the Redis check: nothing listens on port 1).
    for args, extra in ((("--insecure",), env), ((), {"COGWORKER_WEB_USERNAME": "a", "COGWORKER_WEB_PASSWORD": "b"})):
        result = cli("--host", "0.0.0.0", "--redis-url", "redis://:hunter2@127.0.0.1:1/0", *args, env=extra)
        assert result.returncode == 3 and "unreachable" in result.stderr and "hunter2" not in result.stderr
    half = cli(env={"COGWORKER_WEB_USERNAME": "a", "COGWORKER_WEB_PASSWORD": ""})
    assert half.returncode == 2 and "set both" in half.stderr


def test_cli_serves_with_basic_auth(redis_server, config):
    port = free_port()
    env = {**os.environ, "COGWORKER_WEB_USERNAME": "ops", "COGWORKER_WEB_PASSWORD": "pw"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "web", "--port", str(port), "--redis-url", redis_server.url, "--read-only"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/dead"

    def status(headers: dict) -> int:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    try:
        wait_for(lambda: status({}) == 401, timeout=20, what="the server answering 401")
        good = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
        assert status(good) == 200
    finally:
        proc.terminate()
        proc.wait(10)
