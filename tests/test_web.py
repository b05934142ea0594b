"""The web UI over HTTP (Starlette's TestClient, a real Redis): CSRF, auth, read-only,
escaping, garbage entries, mounting under a prefix (Starlette and Flask), pagination cost,
bulk actions, and the ``cogworker web`` command's refusals."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from api_util import entry, failed, fill
from prefork_harness import wait_for
from redis_server import free_port

import cogworker
from cogworker import api

pytest.importorskip("starlette")
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from cogworker.web import BasicAuth, create_app  # noqa: E402
from cogworker.web.security import CSRF_COOKIE  # noqa: E402

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


def test_every_post_without_or_with_a_wrong_token_is_403_and_changes_nothing(seeded):
    app = create_app(config=seeded)
    client = client_for(app)
    good = token(client)
    paths = post_routes(app)
    assert len(paths) >= 9, paths
    raw = seeded.redis().zrange(seeded.keys.dead, 0, -1)
    form = {"action": "delete", "scope": "all", "entry": key(raw[0]), "identity": "x", "name": "x",
            "source": "dead"}
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
    response = client.post("/dead/bulk", data={"action": "delete", "entry": key(raw[0]), "csrf": good})
    assert response.status_code == 303 and api.DeadSet(seeded).size() == 1


def test_csrf_cookie_is_httponly_samesite_strict(seeded):
    response = client_for(create_app(config=seeded)).get("/")
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{CSRF_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/;" in cookie


def test_auth_hook_and_basic_auth(seeded):
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


def test_read_only_hides_every_action_and_refuses_every_post(seeded):
    app = create_app(read_only=True, config=seeded)
    client = client_for(app)
    good = token(client)
    for path in ("/", "/busy", "/queues", "/queues/default", "/scheduled", "/retries", "/dead", "/job/d1",
                 "/periodic", "/metrics", "/unsettled"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert 'method="post"' not in page.text and "read-only" in page.text, path
    for path in post_routes(app):
        response = client.post(path, data={"csrf": good, "action": "delete", "scope": "all"})
        assert response.status_code == 403, path
    assert api.DeadSet(seeded).size() == 2 and api.Queue("default", seeded).size() == 1


def test_untrusted_text_is_escaped_and_csp_forbids_inline_script(seeded, config):
    r = config.redis()
    r.zadd(config.keys.retry, {entry("apps.x.job", {"k": XSS}, jid="r2", error_class=XSS,
                                     error_message=XSS, error_traceback=f"Traceback\n  {XSS}\n"): time.time()})
    r.rpush(config.keys.history("r2"), '{"attempt": 1, "ended_at": 1, "outcome": "failed", '
            f'"error_class": "E", "error_message": "{XSS}", "traceback": "tb {XSS}"}}')
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


def test_garbage_entries_render_raw_and_can_be_deleted(seeded, config):
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
        response = client.post(path, data={"csrf": good, "action": "delete", "entry": key(GARBAGE)})
        assert response.status_code == 303, path
    assert GARBAGE not in r.zrange(config.keys.dead, 0, -1) + r.zrange(config.keys.retry, 0, -1)
    assert GARBAGE not in r.lrange(config.keys.queue("default"), 0, -1)


def test_mounted_under_a_prefix_in_starlette(seeded):
    parent = Starlette(routes=[Mount("/cogworker", app=create_app(config=seeded))])
    client = client_for(parent)
    page = client.get("/cogworker/queues")
    assert page.status_code == 200
    assert "Path=/cogworker/" in page.headers["set-cookie"]
    pages = page.text + client.get("/cogworker/").text
    links = re.findall(r'(?:href|action|src|data-src|data-stats-url)="([^"]+)"', pages)
    assert links and all(link.startswith("/cogworker/") for link in links), links
    for link in set(links):
        if "/pause" not in link and "/search" not in link:
            assert client.get(link).status_code == 200, link
    good = page_token(page.text)
    response = client.post("/cogworker/queues/default/pause", data={"csrf": good, "action": "pause", "back": "/queues"})
    assert response.status_code == 303 and response.headers["location"] == "/cogworker/queues"
    assert api.Queue("default", seeded).paused()
    assert client.get("/cogworker/search?jid=d1").headers["location"] == "/cogworker/job/d1"


def test_mounted_under_a_prefix_in_flask(seeded):
    from a2wsgi import ASGIMiddleware
    from flask import Flask
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    flask_app = Flask("host")
    flask_app.wsgi_app = DispatcherMiddleware(flask_app.wsgi_app,  # type: ignore[method-assign]
                                              {"/cogworker": ASGIMiddleware(create_app(config=seeded))})
    client = flask_app.test_client()
    page = client.get("/cogworker/dead")
    assert page.status_code == 200
    links = re.findall(r'(?:href|action|src)="([^"]+)"', page.get_data(as_text=True))
    assert links and all(link.startswith("/cogworker/") for link in links), links
    good = page_token(page.get_data(as_text=True))
    raw = seeded.redis().zrange(seeded.keys.dead, 0, 0)[0]
    response = client.post("/cogworker/dead/bulk", data={"csrf": good, "action": "delete", "entry": key(raw)})
    assert response.status_code == 303 and response.headers["location"].startswith("/cogworker/dead")
    assert api.DeadSet(seeded).size() == 1


def test_a_page_costs_o_page_redis_work(config):
    """Page 300 of 20,000 dead and of a 20,000-job queue: every range read is one page, and
    so is opening a job from it."""
    r = config.redis()
    fill(r, config.keys.dead, [failed("apps.x.job", [i]) for i in range(20_000)], time.time() - 20_000)
    r.rpush(config.keys.queue("big"), *[entry("apps.x.job", [i]) for i in range(20_000)])
    r.sadd(config.keys.queues, "big")
    client = client_for(create_app(config=config))
    client.get("/")
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 100_000)
    for path in ("/dead?page=300", "/queues/big?page=300"):
        r.slowlog_reset()
        assert client.get(path).status_code == 200
        commands = [[part.decode(errors="replace") for part in e["command"].split()] for e in r.slowlog_get(100_000)]
        reads = [c for c in commands if c[0] in ("ZRANGE", "ZREVRANGE", "LRANGE", "ZSCAN", "SCAN", "KEYS", "SMEMBERS")]
        for command in reads:
            if command[0] in ("ZRANGE", "ZREVRANGE", "LRANGE"):
                start, stop = int(command[2]), int(command[3])
                assert abs(stop - start) < 25, command
            else:
                assert command[0] == "SMEMBERS", command  # the queue and process sets only
        assert any(c[0] in ("ZRANGE", "ZREVRANGE", "LRANGE") for c in reads), (path, commands)
        # A job's link from that page finds it where the page saw it, without scanning the set.
        link = re.search(r'<a class="jid" href="([^"]+)">([^<]+)</a>', client.get(path).text)
        assert link and ("?in=dead&amp;at=" in link[1] or "?in=queue%3Abig&amp;pos=" in link[1])
        r.slowlog_reset()
        page = client.get(link[1].replace("&amp;", "&"))
        assert page.status_code == 200 and "now in" in page.text and ("dead" in page.text or "queue big" in page.text)
        assert link[2] in page.text and 'name="entry"' in page.text  # found: its actions are there
        commands = [e["command"].split()[0] for e in r.slowlog_get(100_000)]
        assert b"ZSCAN" not in commands and b"EVALSHA" not in commands, commands


def test_bulk_all_matching_with_a_filter(config):
    r = config.redis()
    fill(r, config.keys.retry, [failed("apps.x.a", [i], error_class="KeyError") for i in range(700)], time.time())
    fill(r, config.keys.retry, [failed("apps.x.b", [i]) for i in range(30)], time.time())
    client = client_for(create_app(config=config))
    good = token(client)
    response = client.post("/retries/bulk", data={"csrf": good, "action": "kill", "scope": "all",
                                                  "error_class": "KeyError"})
    assert response.status_code == 303
    assert api.DeadSet(config).size() == 700 and api.RetrySet(config).size() == 30
    assert {rec.job_class for rec in api.RetrySet(config).jobs(0, 100)} == {"apps.x.b"}
    # A filtered page reads the set in page order until 25 match; "next" goes on from there.
    page = client.get("/dead?job_class=apps.x.a")
    assert page.text.count('name="entry"') == 2 * 25 and "25 matching" in page.text
    follow = re.search(r'href="(/dead\?job_class=apps.x.a&amp;from=(\d+))" rel="next"', page.text)
    assert follow and int(follow[2]) == 25
    second = client.get(follow[1].replace("&amp;", "&"))
    assert "entries 26–50 read, 25 matching" in second.text
    rare = client.get("/dead?queue=nowhere")
    assert "entries 1–700 read, 0 matching" in rare.text and "No entry matches" in rare.text


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cogworker", "web", *args], capture_output=True, text=True,
                          timeout=30, env={**os.environ, **(env or {})})


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
    proc = subprocess.Popen([sys.executable, "-m", "cogworker", "web", "--port", str(port), "--redis-url",
                             redis_server.url, "--read-only"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
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


def readme_block(marker: str) -> str:
    text = (Path(__file__).parent.parent / "README.md").read_text()
    section = text.split("### The web UI", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return next(block for block in blocks if block.startswith(marker))


def test_the_readmes_mount_examples_work(seeded):
    """The README's FastAPI and Flask blocks, run as written (against this test's Redis)."""
    from fastapi.testclient import TestClient as FastAPIClient

    scope: dict = {}
    exec(compile(readme_block("# FastAPI"), "README.md", "exec"), scope)
    client = FastAPIClient(scope["app"], follow_redirects=False, base_url="http://ops.example.com")
    assert client.get("/cogworker/dead", headers={"host": "testserver"}).status_code == 400  # not allowed
    assert client.get("/cogworker/dead").status_code == 401
    page = client.get("/cogworker/dead", auth=("ops", "secret"))
    assert page.status_code == 200 and 'href="/cogworker/job/d1?in=dead' in page.text
    scope = {"__name__": "__main__"}  # as in a script: Flask(__name__) finds its root path
    exec(compile(readme_block("# Flask"), "README.md", "exec"), scope)
    flask_client = scope["app"].test_client()
    assert flask_client.get("/cogworker/queues").status_code == 401
    page = flask_client.get("/cogworker/queues", headers={"X-Admin": "1"})
    assert page.status_code == 200 and 'href="/cogworker/queues/default"' in page.get_data(as_text=True)


def post(client: TestClient, path: str, **form: str):
    return client.post(path, data={"csrf": client.csrf, **form})


def test_queue_clear_job_page_actions_and_periodic_enable_run_now(seeded, config):
    from apps import cron_jobs

    from cogworker.cron import ticker as cron

    cogworker.periodic("0 3 * * *", cron_jobs.tick, args=("n",), name="nightly", queue="cronq")
    cron.Ticker(config, [cron.entries["nightly"]]).publish()
    client = client_for(create_app(config=seeded))
    token(client)
    # /job/<jid>: retry a dead job from its page (as linked from /dead, and without the hint).
    page = client.get("/job/d1")
    assert "now in" in page.text and 'value="retry"' in page.text
    entry_value = re.search(r'name="entry" value="([^"]+)"', page.text)[1]
    response = post(client, "/job/d1/act", action="retry", source="dead", entry=entry_value)
    assert response.status_code == 303 and api.DeadSet(seeded).find("d1") is None
    assert api.locate("d1", seeded).source == "queue:default"
    assert post(client, "/job/d1/act", action="retry", source="dead", entry=entry_value).status_code == 303
    assert "not done" in client.get("/job/d1").text  # the flash: it had moved already
    # Clear a queue (the page asks for a confirmation first: data-confirm, app.js).
    assert "data-confirm=" in client.get("/queues/default").text
    assert post(client, "/queues/default/clear").status_code == 303 and api.Queue("default", seeded).size() == 0
    # Periodic: disable, enable, run now.
    assert post(client, "/periodic/act", name="nightly", action="disable").status_code == 303
    assert api.periodic_entry("nightly", seeded).disabled
    assert post(client, "/periodic/act", name="nightly", action="enable").status_code == 303
    assert not api.periodic_entry("nightly", seeded).disabled
    post(client, "/periodic/act", name="nightly", action="run")
    assert "nightly: enqueued" in client.get("/periodic").text and api.Queue("cronq", seeded).size() == 1
    post(client, "/periodic/act", name="typo", action="disable")
    assert "no periodic entry named &#39;typo&#39;" in client.get("/periodic").text


def test_stop_a_master_from_busy(own_config, masters):
    master = masters(module="apps.api_app", procs=1)
    master.wait_children()
    wait_for(lambda: any(p.kind == "master" for p in api.processes(own_config)), what="the master's record")
    identity = next(p.identity for p in api.processes(own_config) if p.kind == "master")
    client = client_for(create_app(config=own_config))
    token(client, "/busy")
    assert post(client, "/busy/control", identity=identity, action="stop").status_code == 303
    assert master.wait_exit(30) == 0
    assert post(client, "/busy/control", identity="nobody", action="quiet").status_code == 303
    assert "no live master or worker: nothing sent" in client.get("/busy").text


def test_bad_input_and_a_redis_outage_are_one_line_pages(own_config, own_redis):
    client = client_for(create_app(config=own_config))
    token(client)
    for path, status in (("/dead?page=abc", 200), ("/dead?page=-5", 200), ("/queues/no%20such", 404),
                         ("/queues/unknown", 404), ("/job/x?in=dead&at=nan-ish", 404), ("/nope", 404),
                         ("/job/x?in=queue:bad%20name&pos=1", 404)):
        assert client.get(path).status_code == status, path
    own_config.redis().set(own_config.keys.dead, "a string")
    wrong = client.get("/dead")
    assert wrong.status_code == 409 and "not a sorted set" in wrong.text
    own_redis.stop()
    down = client.get("/")
    assert down.status_code == 503 and "did not answer" in down.text and "Traceback" not in down.text
