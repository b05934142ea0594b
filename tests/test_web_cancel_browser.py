"""Cancel buttons and progress bars in a real browser (headless Chromium driven by
Playwright), against the UI mounted under /cogworker, a real redis-server and a real
prefork master whose jobs log their starts and ends (apps/pf_cancel.py). Screenshots go
to $COGWORKER_SCREENSHOTS (else a temp dir); docs/web-busy-progress.png and
docs/web-job-cancelled.png are made this way."""

from __future__ import annotations

import pytest
from apps.pf_faults import events
from prefork_harness import Master, wait_for
from redis_server import RedisServer, free_port
from web_harness import CHROMIUM_ARGS, ServerThread, chromium_path, screenshot_dir

import cogworker
from cogworker import api
from cogworker.client.jobs import by_name

pytest.importorskip("starlette")
pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")

PREFIX = "/cogworker"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from playwright.sync_api import sync_playwright
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from cogworker.web import create_app

    tmp = tmp_path_factory.mktemp("webcancel")
    redis = RedisServer().start()
    config = cogworker.Config(redis_url=redis.url)
    log = str(tmp / "runs.log")
    master = Master(redis.url, module="apps.pf_cancel", procs=1, env={"PF_LOG": log})
    server = ServerThread(Starlette(routes=[Mount(PREFIX, app=create_app(config=config))]), free_port()).start()
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 700})
    page.set_default_timeout(15_000)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    cogworker.config._config = None
    cogworker.configure(redis_url=redis.url)
    env = {
        "page": page,
        "log": log,
        "url": lambda path: server.url + PREFIX + path,
        "dialogs": dialogs,
        "shots": screenshot_dir(tmp / "screenshots"),
        "console": console,
    }
    try:
        master.wait_children()
        yield env
    finally:
        for step in (browser.close, playwright.stop, server.stop, master.stop, redis.cleanup):
            try:
                step()
            except Exception:  # teardown goes on
                pass


def seen(env, event, tag):
    return any(e[0] == event and e[1] == tag for e in events(env["log"]))


def go(env, path):
    response = env["page"].goto(env["url"](path))
    assert response is not None and response.status == 200, path


def test_progress_bar_and_cancel_on_busy(env):
    page = env["page"]
    jid = by_name("apps.pf_cancel.reports").enqueue("bar", 100, 60.0)  # stalls at 50% for a minute
    wait_for(lambda: seen(env, "half", "bar"), 20, what="half-way")
    go(env, "/busy")
    bar = page.locator("td progress")
    # 0.5 was reported just before "half": written at once or by the timer within 0.5 s
    wait_for(
        lambda: (go(env, "/busy"), bar.count() == 1 and bar.get_attribute("value") == "0.5")[1],
        20,
        what="the progress bar on Busy at 50%",
    )
    assert "50% row 50/100" in page.inner_text("td .progress")
    page.screenshot(path=str(env["shots"] / "web-busy-progress.png"), full_page=True)
    go(env, f"/job/{jid}")
    assert page.locator("progress").get_attribute("value") == "0.5"
    page.screenshot(path=str(env["shots"] / "web-job-progress.png"), full_page=True)
    go(env, "/busy")
    page.click("button.cancel")
    assert env["dialogs"][-1].startswith(f"Cancel job {jid}?")
    assert "cancel: done" in page.inner_text(".flash")
    assert api.cancelled(jid)["was"] == "running"
    # the job, stalled in a sleep, never polls: it ends cancelled when the sleep would end;
    # what counts here is that it was taken off its list and will not run again
    assert api.status(jid).state == "cancelled"
    assert not env["console"], env["console"]


def test_cancel_button_on_the_job_page_and_queue_rows(env):
    page = env["page"]
    jid = by_name("apps.pf_cancel.brief").enqueue_in(3600, "later")
    go(env, f"/job/{jid}")
    page.click("button.cancel")
    assert "cancel: done" in page.inner_text(".flash")
    assert "cancelled" in page.inner_text(".badge")
    assert page.locator("button.cancel").count() == 0  # nothing left to cancel
    page.screenshot(path=str(env["shots"] / "web-job-cancelled.png"), full_page=True)
    assert (
        api.status(jid).state == "cancelled"
        and cogworker.get_config().redis().zcard(cogworker.get_config().keys.schedule) == 0
    )
    other = by_name("apps.pf_cancel.brief").enqueue_in(3600, "row")
    go(env, "/scheduled")
    page.click("button.cancel")
    assert "cancel: done" in page.inner_text(".flash")
    assert api.status(other).state == "cancelled"
    assert not seen(env, "start", "later") and not seen(env, "start", "row")
    assert not env["console"], env["console"]


def test_cancel_without_the_token_is_refused(env):
    jid = by_name("apps.pf_cancel.brief").enqueue_in(3600, "csrf")
    response = env["page"].request.post(env["url"](f"/job/{jid}/cancel"), form={"back": "/busy"})
    assert response.status == 403
    assert cogworker.get_config().redis().zcard(cogworker.get_config().keys.schedule) == 1
    assert api.cancel(jid) is True
