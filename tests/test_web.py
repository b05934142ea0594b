"""The web UI over HTTP (Starlette's TestClient, a real Redis): mounting under a prefix
(Starlette, Flask, the web UI guide's examples), pagination cost, bulk actions, the queue, job
and periodic actions, stopping a master from Busy, and bad input and a Redis outage as
one-line pages. (CSRF, auth, read-only, escaping: test_web_security.)"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from api_util import entry, failed, fill
from prefork_harness import wait_for

import cogworker
from cogworker import api

pytest.importorskip("starlette")
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402
from web_util import (  # noqa: E402, F401 (seeded: a fixture)
    client_for,
    key,
    page_token,
    post,
    seeded,
    token,
)

from cogworker.web import create_app  # noqa: E402

STATIC = Path(__file__).resolve().parent.parent / "cogworker" / "web" / "static"


def test_mounted_under_a_prefix_in_starlette(seeded):  # noqa: F811
    parent = Starlette(routes=[Mount("/cogworker", app=create_app(config=seeded))])
    client = client_for(parent)
    for name in ("app.css", "app.js"):
        assert client.get(f"/cogworker/static/{name}").content == (STATIC / name).read_bytes(), name
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


def test_mounted_under_a_prefix_in_flask(seeded):  # noqa: F811
    from a2wsgi import ASGIMiddleware
    from flask import Flask
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    flask_app = Flask("host")
    flask_app.wsgi_app = DispatcherMiddleware(
        flask_app.wsgi_app,  # type: ignore[method-assign]
        {"/cogworker": ASGIMiddleware(create_app(config=seeded))},
    )
    client = flask_app.test_client()
    page = client.get("/cogworker/dead")
    assert page.status_code == 200
    for name in ("app.css", "app.js"):  # streamed through a2wsgi, whole
        assert client.get(f"/cogworker/static/{name}").get_data() == (STATIC / name).read_bytes(), name
    links = re.findall(r'(?:href|action|src)="([^"]+)"', page.get_data(as_text=True))
    assert links and all(link.startswith("/cogworker/") for link in links), links
    good = page_token(page.get_data(as_text=True))
    raw = seeded.redis().zrange(seeded.keys.dead, 0, 0)[0]
    form = {"csrf": good, "action": "delete", "entry": key(raw)}
    asked = client.post("/cogworker/dead/bulk", data=form)  # no dialog ran: the server asks
    assert asked.status_code == 200 and "Delete the selected entry of Dead?" in asked.get_data(as_text=True)
    assert 'action="/cogworker/dead/bulk"' in asked.get_data(as_text=True) and api.DeadSet(seeded).size() == 2
    response = client.post("/cogworker/dead/bulk", data={**form, "confirm": "yes"})
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
    form = {"csrf": good, "action": "kill", "scope": "all", "error_class": "KeyError"}
    asked = client.post("/retries/bulk", data=form)  # without JavaScript's dialog: the server asks
    assert asked.status_code == 200 and "Kill every entry matching error class KeyError of Retries?" in asked.text
    assert api.DeadSet(config).size() == 0 and api.RetrySet(config).size() == 730  # nothing done yet
    response = client.post("/retries/bulk", data={**form, "confirm": "yes"})
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


def readme_block(marker: str) -> str:
    section = (Path(__file__).parent.parent / "docs" / "guides" / "web-ui.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return next(block for block in blocks if block.startswith(marker))


def test_every_bulk_action_on_a_whole_set_asks_the_server_first(config):
    """Delete all, Kill all, Retry all: a POST that doesn't say it was confirmed gets a
    page asking, which posts the same form again, confirmed; nothing is done before."""
    r = config.redis()
    fill(r, config.keys.dead, [failed("apps.x.a", [i]) for i in range(7)], time.time())
    client = client_for(create_app(config=config))
    good = token(client)
    for verb, question in (("retry", "Retry all 7 entries of Dead?"), ("delete", "Delete all 7 entries of Dead?")):
        asked = client.post("/dead/bulk", data={"csrf": good, "action": verb, "scope": "all"})
        assert asked.status_code == 200 and question in asked.text, asked.text[-1500:]
        assert api.DeadSet(config).size() == 7 and api.Queue("default", config).size() == 0
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', asked.text))
        assert form == {"csrf": good, "action": verb, "scope": "all", "confirm": "yes"}
        assert re.search(r'<form class="toolbar" method="post" action="/dead/bulk">', asked.text)
        assert '<a href="/dead">Cancel</a>' in asked.text
    # The selected entries (a row's own buttons post the same form with one): delete and kill ask too.
    entries = [key(raw) for raw in r.zrange(config.keys.dead, 0, 1)]
    asked = client.post("/dead/bulk?page=1", data={"csrf": good, "action": "delete", "entry": entries})
    assert asked.status_code == 200 and "Delete the 2 selected entries of Dead? This cannot be undone." in asked.text
    assert re.findall(r'<input type="hidden" name="entry" value="([^"]+)">', asked.text) == entries
    assert 'action="/dead/bulk?page=1"' in asked.text and '<a href="/dead?page=1">Cancel</a>' in asked.text
    assert api.DeadSet(config).size() == 7
    retried = client.post("/dead/bulk", data={"csrf": good, "action": "retry", "entry": entries[:1]})
    assert retried.status_code == 303 and api.DeadSet(config).size() == 6  # a retry asks nothing
    done = client.post("/dead/bulk", data={"csrf": good, "action": "delete", "scope": "all", "confirm": "yes"})
    assert done.status_code == 303 and api.DeadSet(config).size() == 0


def test_the_readmes_mount_examples_work(seeded):  # noqa: F811
    """The web UI guide's FastAPI and Flask blocks, run as written (against this test's Redis)."""
    from fastapi.testclient import TestClient as FastAPIClient

    scope: dict = {}
    exec(compile(readme_block("# FastAPI"), "docs/guides/web-ui.md", "exec"), scope)
    client = FastAPIClient(scope["app"], follow_redirects=False, base_url="http://ops.example.com")
    assert client.get("/cogworker/dead", headers={"host": "testserver"}).status_code == 400  # not allowed
    assert client.get("/cogworker/dead").status_code == 401
    page = client.get("/cogworker/dead", auth=("ops", "secret"))
    assert page.status_code == 200 and 'href="/cogworker/job/d1?in=dead' in page.text
    scope = {"__name__": "__main__"}  # as in a script: Flask(__name__) finds its root path
    exec(compile(readme_block("# Flask"), "docs/guides/web-ui.md", "exec"), scope)
    flask_client = scope["app"].test_client()
    assert flask_client.get("/cogworker/queues").status_code == 401
    page = flask_client.get("/cogworker/queues", headers={"X-Admin": "1"})
    assert page.status_code == 200 and 'href="/cogworker/queues/default"' in page.get_data(as_text=True)


def test_queue_clear_job_page_actions_and_periodic_enable_run_now(seeded, config):  # noqa: F811
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
    # Clear a queue: the page asks for a confirmation first (data-confirm, app.js), and the
    # server does too when the POST doesn't say it was confirmed (JavaScript off).
    assert "data-confirm=" in client.get("/queues/default").text
    waiting = api.Queue("default", seeded).size()
    asked = post(client, "/queues/default/clear")
    assert asked.status_code == 200 and f"Delete all {waiting} jobs of queue default?" in asked.text
    assert 'name="confirm" value="yes"' in asked.text and waiting > 0 and api.Queue("default", seeded).size() == waiting
    cleared = post(client, "/queues/default/clear", confirm="yes")
    assert cleared.status_code == 303 and api.Queue("default", seeded).size() == 0
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
    for path, status in (
        ("/dead?page=abc", 200),
        ("/dead?page=-5", 200),
        ("/queues/no%20such", 404),
        ("/queues/unknown", 404),
        ("/job/x?in=dead&at=nan-ish", 404),
        ("/nope", 404),
        ("/job/x?in=queue:bad%20name&pos=1", 404),
    ):
        assert client.get(path).status_code == status, path
    own_config.redis().set(own_config.keys.dead, "a string")
    wrong = client.get("/dead")
    assert wrong.status_code == 409 and "not a sorted set" in wrong.text
    own_redis.stop()
    down = client.get("/")
    assert down.status_code == 503 and "did not answer" in down.text and "Traceback" not in down.text
