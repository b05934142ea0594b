"""Bad names and deep entries in a real browser (issue #25, points 1 and 2): headless
Chromium (Debian's, driven by Playwright) against the web UI served by uvicorn, on a
real redis-server holding queues whose names break the naming rule and a dead entry
nested 100,000 deep. Every page renders; a bad-named queue is shown escaped and can be
paused from its page."""

from __future__ import annotations

import json
import time

import pytest
from redis_server import RedisServer, free_port
from web_harness import CHROMIUM_ARGS, ServerThread, chromium_path

import cogworker
from cogworker import api

pytest.importorskip("starlette")
pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")

NAMES = ["\u200b", "a\nb", "q\x1b[31m"]


def job(name: str, jid: str) -> str:
    return json.dumps(
        {
            "class": "apps.x\nERROR forged",
            "args": [1],
            "kwargs": {},
            "jid": jid,
            "queue": name,
            "retry": 0,
            "enqueued_at": time.time(),
        }
    )


def test_pages_show_bad_names_escaped_and_a_deep_entry_raw():
    from playwright.sync_api import sync_playwright

    from cogworker.web import create_app

    server = RedisServer().start()
    config = cogworker.Config(redis_url=server.url)
    r = config.redis()
    for i, name in enumerate(NAMES):
        r.sadd(config.keys.queues, name)
        r.lpush(config.keys.queue(name), job(name, f"{i:024x}"))
    r.zadd(
        config.keys.dead,
        {
            b'{"jid": "deep", "args": ' + b"[" * 100_000 + b"]" * 100_000 + b"}": time.time(),
            job("default", "beside" + "0" * 18): time.time(),
        },
    )
    web = ServerThread(create_app(config=config), free_port()).start()
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    try:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.on("dialog", lambda dialog: dialog.accept())
        assert page.goto(web.url + "/queues").status == 200
        cells = page.locator("table.list tbody td:first-child").all_inner_texts()
        assert sorted(cells) == sorted(["\\u200b", "a\\nb", "q\\x1b[31m"])
        page.get_by_role("link", name="a\\nb").click()
        assert page.locator("h1").inner_text().startswith("Queue a\\nb")
        assert "apps.x\\nERROR\\x20forged" in page.inner_text("table")  # a space in a bad name, escaped too
        page.get_by_role("button", name="Pause").click()
        assert "queue a\\nb paused" in page.inner_text(".flash")
        assert api.Queue.known("a\nb", config).paused()
        assert page.goto(web.url + "/dead").status == 200
        assert "beside" in page.inner_text("table") and "deep" in page.content()
    finally:
        browser.close()
        playwright.stop()
        web.stop()
        server.cleanup()
