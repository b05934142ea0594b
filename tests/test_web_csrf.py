"""The web UI's request pipeline against forged requests (issue #25, points 6 and 7): a
CSRF token the server can verify (an HMAC of the session under its secret), duplicate
session cookies refused, Origin/Referer/Sec-Fetch-Site honoured on every change, and an
allowed-hosts list checked before routing (DNS rebinding). Over HTTP (Starlette's
TestClient, a real Redis), through the `cogworker web` command, and in a real Chromium
with the attacker's page served from another port of the same host."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from api_util import entry
from redis_server import free_port
from web_harness import CHROMIUM_ARGS, ServerThread, chromium_path

from cogworker import api

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from cogworker.web import create_app  # noqa: E402
from cogworker.web.security import CSRF_COOKIE  # noqa: E402

PAUSE = "/queues/default/pause"
FORM = {"action": "pause", "back": "/queues"}


@pytest.fixture
def queue(config):
    r = config.redis()
    r.lpush(config.keys.queue("default"), entry("apps.x.job", ["secret-argument"], jid="q1"))
    r.sadd(config.keys.queues, "default")
    return api.Queue("default", config)


def client(app, host: str = "localhost", **kwargs) -> TestClient:
    return TestClient(app, base_url=f"http://{host}", follow_redirects=False, **kwargs)


def session(app) -> tuple[str, str]:
    """A real session: its cookie, and the token its pages carry."""
    page = client(app).get("/dead")
    cookie = page.cookies[CSRF_COOKIE]
    # /dead is empty here: the token is in the queue page's forms.
    c = client(app)
    c.cookies.set(CSRF_COOKIE, cookie)
    found = re.search(r'name="csrf" value="([^"]+)"', c.get("/queues").text)
    assert found, "the queues page carries the token"
    return cookie, found[1]


def pause(app, cookie_header: str, token: str, **headers: str) -> int:
    fresh = client(app)  # no jar: exactly the Cookie header given
    return fresh.post(PAUSE, data={**FORM, "csrf": token}, headers={"cookie": cookie_header, **headers}).status_code


# -- point 6: the token, the cookies, the origin -------------------------------------------------


def test_a_pair_the_client_picks_is_refused(config, queue):
    app = create_app(config=config)
    assert pause(app, f"{CSRF_COOKIE}=EVIL", "EVIL") == 403
    assert pause(app, f"{CSRF_COOKIE}=EVIL", "EVIL", origin="http://localhost") == 403
    assert not queue.paused()
    cookie, token = session(app)
    assert token != cookie  # the token is not the cookie: it can't be read off or chosen
    assert pause(app, f"{CSRF_COOKIE}={cookie}", cookie) == 403
    assert pause(app, f"{CSRF_COOKIE}={cookie}", token + "x") == 403
    assert not queue.paused()
    assert pause(app, f"{CSRF_COOKIE}={cookie}", token) == 303 and queue.paused()


def test_a_second_session_cookie_is_refused_whichever_comes_last(config, queue):
    app = create_app(config=config)
    cookie, token = session(app)
    evil_cookie, evil_token = session(app)  # a real pair, the attacker's own
    for header in (
        f"{CSRF_COOKIE}={cookie}; {CSRF_COOKIE}={evil_cookie}",
        f"{CSRF_COOKIE}={evil_cookie}; {CSRF_COOKIE}={cookie}",
    ):
        for guess in (token, evil_token):
            assert pause(app, header, guess) == 403
    response = client(app).post(
        PAUSE, data={**FORM, "csrf": token}, headers={"cookie": f"{CSRF_COOKIE}={cookie}; {CSRF_COOKIE}=EVIL"}
    )
    assert response.status_code == 403 and "cookies" in response.text
    assert not queue.paused()


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "http://localhost:8001"},  # another port of the same host: same site, not same origin
        {"origin": "null"},
        {"referer": "http://evil.example/page"},
        {"sec-fetch-site": "same-site", "origin": "http://localhost"},
        {"sec-fetch-site": "cross-site"},
    ],
)
def test_a_change_from_another_origin_is_refused_even_with_a_good_token(config, queue, headers):
    app = create_app(config=config)
    cookie, token = session(app)
    response = client(app).post(
        PAUSE, data={**FORM, "csrf": token}, headers={"cookie": f"{CSRF_COOKIE}={cookie}", **headers}
    )
    assert response.status_code == 403 and "this UI's own pages" in response.text
    assert not queue.paused()


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://localhost"},
        {"origin": "http://localhost:80"},
        {"referer": "http://localhost/queues"},
        {"sec-fetch-site": "same-origin", "origin": "http://localhost"},
        {},
    ],
)
def test_a_change_from_this_uis_own_pages_goes_through(config, queue, headers):
    app = create_app(config=config)
    cookie, token = session(app)
    assert pause(app, f"{CSRF_COOKIE}={cookie}", token, **headers) == 303 and queue.paused()


def test_the_secret_is_shared_only_when_given(config, queue, monkeypatch):
    one, other = create_app(config=config), create_app(config=config)
    cookie, token = session(one)
    assert pause(other, f"{CSRF_COOKIE}={cookie}", token) == 403  # each process its own key by default
    a, b = create_app(config=config, secret="s" * 32), create_app(config=config, secret=b"s" * 32)
    cookie, token = session(a)
    assert pause(b, f"{CSRF_COOKIE}={cookie}", token) == 303 and queue.paused()
    monkeypatch.setenv("COGWORKER_WEB_SECRET", "e" * 32)
    cookie, token = session(create_app(config=config))
    assert pause(create_app(config=config), f"{CSRF_COOKIE}={cookie}", token) == 303
    with pytest.raises(ValueError, match="at least 16 bytes"):
        create_app(config=config, secret="short")


# -- point 7: the allowed hosts -------------------------------------------------------------------


def test_an_unknown_host_is_refused_before_routing(config, queue):
    app = create_app(config=config)
    cookie, token = session(app)
    rebound = client(app, "rebind.evil.example")
    page = rebound.get("/queues/default")
    assert page.status_code == 400 and "secret-argument" not in page.text and "Host is not allowed" in page.text
    assert CSRF_COOKIE not in page.headers.get("set-cookie", "")
    response = rebound.post(PAUSE, data={**FORM, "csrf": token}, headers={"cookie": f"{CSRF_COOKIE}={cookie}"})
    assert response.status_code == 400 and not queue.paused()
    for host in ("localhost.evil.example", "127.0.0.1.nip.io", "localhost:abc", "", "::1", "evil@localhost"):
        assert client(app).get("/dead", headers={"host": host}).status_code == 400, host
    for host in ("localhost", "LOCALHOST:8000", "127.0.0.1:8000", "[::1]:8000", "localhost."):
        assert client(app).get("/dead", headers={"host": host}).status_code == 200, host


def test_allowed_hosts_adds_names_and_domains(config):
    app = create_app(config=config, allowed_hosts=["ui.example.com", ".corp.example", "10.0.0.5:8000"])
    for host, status in (
        ("ui.example.com", 200),
        ("ui.example.com:443", 200),
        ("corp.example", 200),
        ("a.b.corp.example", 200),
        ("10.0.0.5", 200),
        ("localhost", 200),
        ("example.com", 400),
        ("evilcorp.example", 400),
        ("ui.example.com.evil", 400),
    ):
        assert client(app).get("/dead", headers={"host": host}).status_code == status, host
    assert client(create_app(config=config, allowed_hosts=["*"]), "anything.example").get("/dead").status_code == 200
    for bad in (["two words"], ["http://ui.example.com/"], [""], [5]):
        with pytest.raises(ValueError, match="allowed host"):
            create_app(config=config, allowed_hosts=bad)


def test_cogworker_web_allowed_host(redis_server, config):
    port = free_port()
    env = dict(os.environ, COGWORKER_REDIS_URL=config.redis_url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker", "web", "--port", str(port), "--allowed-host", "ui.example.com"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def status(host: str) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/dead", headers={"Host": host})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    try:
        deadline = time.time() + 30
        while True:
            try:
                status("127.0.0.1")
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "cogworker web did not start"
                time.sleep(0.1)
        assert [status(h) for h in ("127.0.0.1", f"127.0.0.1:{port}", "ui.example.com", "rebind.evil.example")] == [
            200,
            200,
            200,
            400,
        ]
    finally:
        proc.terminate()
        proc.wait(15)
    bad = subprocess.run(
        [sys.executable, "-m", "cogworker", "web", "--allowed-host", "a b"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "allowed host" in bad.stderr, bad.stderr


# -- in a real browser: the attacker's page on another port of the same host --------------------

EVIL_PAGE = """<!doctype html><title>cat pictures</title>
<form method="post" action="{target}"><input name="csrf" value="EVIL"><input name="action" value="pause">
<input name="back" value="/queues"></form>
<script>{script}document.forms[0].submit();</script>"""


SITE = "cogworker.test"  # ui.cogworker.test and evil.cogworker.test: one site, two origins


class EvilSite:
    """A plain web server on another port of 127.0.0.1: same host, same site, another
    origin. Its page plants ``cogworker_csrf=EVIL`` for the whole host (cookies know no
    ports): ``script`` from the page (a second cookie, path /, beside the UI's under its
    prefix: script may not overwrite an HttpOnly cookie), or ``header`` from the server (a
    Set-Cookie replaces the UI's own), then posts ``csrf=EVIL`` to the UI."""

    def __init__(self, target: str, plant: str) -> None:
        import http.server
        import threading

        planted = {
            "script": f'document.cookie = "{CSRF_COOKIE}=EVIL; path=/";',
            # A sibling subdomain sets it for the parent domain: sent to ui.<domain> too.
            "domain": f'document.cookie = "{CSRF_COOKIE}=EVIL; domain={SITE}; path=/";',
        }
        script = planted.get(plant, "")
        body = EVIL_PAGE.format(target=target, script=script).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html")
                if plant == "header":
                    self.send_header("set-cookie", f"{CSRF_COOKIE}=EVIL; Path=/")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def browser():
    if chromium_path() is None:
        pytest.skip("no chromium (.ci/run installs it)")
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # rebind.evil.example resolves to this host, as a rebinding attacker's name would.
        launched = playwright.chromium.launch(
            executable_path=chromium_path(),
            args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP rebind.evil.example 127.0.0.1, MAP *.{SITE} 127.0.0.1"],
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.parametrize("plant, prefix", [("script", "/cogworker"), ("header", "")])
def test_in_chromium_a_page_on_another_port_cannot_pause_a_queue(config, queue, browser, plant, prefix):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = Starlette(routes=[Mount(prefix, app=create_app(config=config))]) if prefix else create_app(config=config)
    ui = ServerThread(app, free_port()).start()
    base = ui.url + prefix
    evil = EvilSite(base + PAUSE, plant)
    try:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        assert page.goto(base + "/queues").status == 200  # the victim holds the real session
        assert any(
            c["name"] == CSRF_COOKIE and c["httpOnly"] and c["sameSite"] == "Strict" for c in page.context.cookies()
        )
        with page.expect_response(lambda r: r.url.endswith(PAUSE)) as posted:
            page.goto(evil.url)
        assert posted.value.status == 403
        assert not queue.paused()
        # DNS rebinding: the attacker's name now points here; the page is refused, nothing shown.
        rebound = page.goto(f"http://rebind.evil.example:{ui.port}{prefix}/queues/default")
        assert rebound is not None and rebound.status == 400 and "secret-argument" not in page.content()
        # And the UI's own form still works in the same browser (its Origin and token are right).
        page.context.clear_cookies()
        assert page.goto(base + "/queues").status == 200
        page.click("form[action$='/queues/default/pause'] button")
        page.wait_for_url(base + "/queues")
        assert queue.paused()
    finally:
        evil.stop()
        ui.stop()


def test_in_chromium_a_sibling_subdomain_cannot_pause_a_queue(config, queue, browser):
    ui = ServerThread(create_app(config=config, allowed_hosts=[f"ui.{SITE}"]), free_port()).start()
    base = f"http://ui.{SITE}:{ui.port}"
    evil = EvilSite(base + PAUSE, "domain")
    try:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        assert page.goto(base + "/queues").status == 200  # the victim holds the real session
        with page.expect_response(lambda r: r.url.endswith(PAUSE)) as posted:
            page.goto(evil.url.replace("127.0.0.1", f"evil.{SITE}"))
        assert posted.value.status == 403
        assert {c["domain"] for c in page.context.cookies() if c["name"] == CSRF_COOKIE} == {f"ui.{SITE}", f".{SITE}"}
        assert not queue.paused()
    finally:
        evil.stop()
        ui.stop()
