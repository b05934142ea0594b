"""The web UI in a real browser: headless Chromium (Debian's, driven by Playwright) against
the UI mounted under /cogworker in a host app, a real redis-server and a real prefork
master running jobs. One browser, one server, one master for the module; the tests run in
file order (quieting the master is last). Screenshots of every page go to
$COGWORKER_SCREENSHOTS (else a temp dir)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from api_util import failed, fill
from prefork_harness import Master, wait_for
from redis_server import RedisServer, free_port
from web_harness import CHROMIUM_ARGS, ServerThread, chromium_path, screenshot_dir

import cogworker
from cogworker import api

pytest.importorskip("starlette")
pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")

PREFIX = "/cogworker"
XSS = "<script>window.pwned = 1</script>"


class Env:
    def __init__(self, tmp: Path) -> None:
        from playwright.sync_api import sync_playwright
        from starlette.applications import Starlette
        from starlette.routing import Mount

        from cogworker.web import create_app

        self.tmp = tmp
        self.shots = screenshot_dir(tmp / "screenshots")
        self.log = tmp / "runs.log"
        self.redis = RedisServer().start()
        self.config = cogworker.Config(redis_url=self.redis.url)
        self.master = Master(self.redis.url, module="apps.web_app", procs=2, args=("-q", "default", "-q", "slowq"))
        host = Starlette(routes=[Mount(PREFIX, app=create_app(config=self.config))])
        self.server = ServerThread(host, free_port()).start()
        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1280, "height": 860})
        self.page.set_default_timeout(15_000)
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(m.text) if m.type in ("error", "warning") else None)
        self.dialogs: list[str] = []  # every confirmation asked, in order
        self.dismiss = False  # answer the next ones "Cancel"
        self.page.on("dialog", self.answer)

    def answer(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss() if self.dismiss else dialog.accept()

    def url(self, path: str) -> str:
        return self.server.url + PREFIX + path

    def go(self, path: str) -> None:
        response = self.page.goto(self.url(path))
        assert response is not None and response.status == 200, path

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def runs(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def flash(self) -> str:
        return self.page.inner_text(".flash")

    def close(self) -> None:
        for step in (self.browser.close, self.playwright.stop, self.server.stop, self.master.stop, self.redis.cleanup):
            try:
                step()
            except Exception:  # teardown goes on: the next step frees its own resource
                pass


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = Env(tmp_path_factory.mktemp("web"))
    try:
        env.master.wait_children()
        yield env
    finally:
        env.close()


@pytest.fixture
def app(env):
    """The jobs module, and the test process's config pointed at this module's Redis."""
    cogworker.config._config = None
    cogworker.configure(redis_url=env.redis.url)
    from apps import web_app

    env.console.clear()
    yield web_app
    assert not [m for m in env.console if "Content Security Policy" in m or "Refused" in m], env.console


def counter(env, name: str) -> int:
    return int(env.page.inner_text(f'[data-counter="{name}"]').replace(",", ""))


def waiting(env) -> int:
    """The jobs queued now, as Redis holds them (what the dashboard's counter shows)."""
    r = env.config.redis()
    return sum(r.llen(env.config.keys.queue(q.decode())) for q in r.smembers(env.config.keys.queues))


def test_dashboard_counters_change_as_jobs_run_and_polling_pauses(env, app):
    env.go("/")
    before = counter(env, "processed")
    app.mark.enqueue_many([(str(env.log), f"d{i}", 0.04) for i in range(60)])
    wait_for(lambda: counter(env, "processed") >= before + 60, timeout=30, what="the counter to rise, no reload")
    wait_for(lambda: "<polyline" in env.page.request.get(env.url("/live.svg")).text(), what="the live chart")
    env.page.click("#live-toggle")
    assert env.page.inner_text("#live-toggle") == "Resume" and "paused" in env.page.inner_text("#live-state")
    frozen = counter(env, "processed")
    app.mark.enqueue_many([(str(env.log), f"p{i}") for i in range(10)])
    wait_for(lambda: len([t for t in env.runs() if t.startswith("p")]) == 10, what="the jobs while paused")
    time.sleep(2.5)  # more than a polling period
    assert counter(env, "processed") == frozen
    env.page.click("#live-toggle")
    wait_for(lambda: counter(env, "processed") >= frozen + 10, what="polling again")
    app.mark.enqueue_many([(str(env.log), f"e{i}", 0.03) for i in range(80)])
    app.explode.enqueue_many([(f"burst {i}",) for i in range(20)])  # the failed line, and dead
    time.sleep(5)  # a few more samples: the chart shows the runs
    env.go("/")  # the day charts and Redis as they are now; the live samples stay on the server
    time.sleep(2.5)
    env.page.wait_for_function("document.getElementById('live-chart').complete")
    env.shot("dashboard")
    assert env.page.evaluate("document.getElementById('live-chart').naturalWidth") > 0


def test_retry_a_dead_job_from_dead_and_it_runs(env, app):
    jid = app.explode.enqueue(f"bad input {XSS}")
    wait_for(lambda: api.DeadSet(env.config).find(jid) is not None, what="the job in dead")
    raw = failed("apps.web_app.mark", [str(env.log), "revived"], jid="revive-me")
    env.config.redis().zadd(env.config.keys.dead, {raw: time.time()})
    env.go("/dead")
    row = env.page.locator("tr", has=env.page.locator("a", has_text="revive-me"))
    row.get_by_role("button", name="Retry now").click()
    assert "retry: 1 of 1 selected" in env.flash()
    wait_for(lambda: "revived" in env.runs(), what="the retried job to run")
    wait_for(lambda: api.history(jid, env.config), what="the failure in the job's history (written within ~1 s)")
    env.go(f"/job/{jid}")
    text = env.page.inner_text("main")
    assert XSS in text and "ValueError" in text and "Traceback" in text and "dead" in text and "#1 failed" in text
    assert env.page.evaluate("window.pwned") is None
    env.shot("job")


def test_bulk_delete_all_matching(env, app):
    r = env.config.redis()
    fill(
        r,
        env.config.keys.dead,
        [failed("apps.web_app.gone", [i], error_class="KeyError") for i in range(120)],
        time.time() - 500,
    )
    fill(r, env.config.keys.dead, [failed("apps.web_app.kept", [i]) for i in range(40)], time.time() - 1000)
    kept_before = len(api.DeadSet(env.config).filter(job_class="apps.web_app.kept", limit=1000))
    env.go("/dead")
    env.page.fill('input[name="job_class"]', "apps.web_app.gone")
    env.page.click('form.filters button[type="submit"]')
    env.page.wait_for_url("**/dead?job_class=apps.web_app.gone*")  # the filtered page, not the one it left
    classes = env.page.eval_on_selector_all("#bulk tbody tr td:nth-child(4)", "els => els.map(e => e.innerText)")
    assert classes == ["apps.web_app.gone"] * 25 and "25 matching" in env.page.inner_text(".pager")
    env.shot("dead")
    env.page.click('form.toolbar button[value="delete"]')  # "Delete all", confirmed
    assert "delete: 120 entries (all matching)" in env.flash()
    assert not api.DeadSet(env.config).filter(job_class="apps.web_app.gone", limit=10)
    # Select-all on a page, then "Delete" for the selected: the page's 25 go, nothing else.
    env.go("/dead?job_class=apps.web_app.kept")
    env.page.check("input[data-select-all]")
    assert env.page.locator('input[name="entry"]:checked').count() == 25
    env.page.locator("#bulk .toolbar button[value=delete]").click()
    assert "delete: 25 of 25 selected" in env.flash()
    assert len(api.DeadSet(env.config).filter(job_class="apps.web_app.kept", limit=1000)) == kept_before - 25


def test_pause_a_queue_from_queues_and_its_jobs_wait(env, app):
    app.mark.options(queue="slowq").enqueue(str(env.log), "first")
    wait_for(lambda: "first" in env.runs(), what="a first job on slowq")
    env.go("/queues")
    env.page.locator("tr", has_text="slowq").get_by_role("button", name="Pause").click()
    assert "queue slowq paused" in env.flash() and api.Queue("slowq", env.config).paused()
    app.mark.options(queue="slowq").enqueue_many([(str(env.log), f"w{i}") for i in range(5)])
    time.sleep(2)
    assert not [t for t in env.runs() if t.startswith("w")]
    env.go("/queues/slowq")
    assert "paused" in env.page.inner_text("h1") and "5 jobs" in env.page.inner_text("main")
    env.shot("queue")
    env.page.get_by_role("button", name="Resume").click()
    wait_for(lambda: len([t for t in env.runs() if t.startswith("w")]) == 5, what="the jobs after resume")


def test_disable_a_periodic_entry(env, app):
    wait_for(lambda: len(api.periodic_entries(env.config)) == 2, what="the published entries")
    env.go("/periodic")
    env.page.locator("tr", has_text="nightly-report").get_by_role("button", name="Disable").click()
    assert "nightly-report disabled" in env.flash()
    entries = {e.name: e for e in api.periodic_entries(env.config)}
    assert entries["nightly-report"].disabled and not entries["every-30s"].disabled
    row = env.page.locator("tr", has_text="nightly-report")
    assert "disabled" in row.inner_text() and row.get_by_role("button", name="Enable").count() == 1
    env.shot("periodic")


def test_a_post_without_the_csrf_token_is_refused(env, app):
    env.go("/queues")
    env.page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
    with env.page.expect_response(lambda r: r.request.method == "POST") as info:
        env.page.locator("tr", has_text="slowq").get_by_role("button", name="Pause").click()
    assert info.value.status == 403 and "CSRF" in env.page.inner_text("body")
    assert not api.Queue("slowq", env.config).paused()
    forged = env.page.request.post(env.url("/queues/slowq/pause"), form={"action": "pause", "csrf": "guess"})
    assert forged.status == 403 and not api.Queue("slowq", env.config).paused()
    # A page of another origin posting to the UI: the browser sends the session cookie along
    # (same site: 127.0.0.1), but the page can't know the token.
    env.page.goto("about:blank")
    env.page.set_content(
        f'<form method="post" action="{env.url("/queues/slowq/pause")}">'
        '<input name="action" value="pause"><input name="csrf" value="guess">'
        '<button id="go">go</button></form>'
    )
    with env.page.expect_response(lambda r: r.request.method == "POST") as info:
        env.page.click("#go")
    assert info.value.status == 403 and not api.Queue("slowq", env.config).paused()


def test_every_page_under_the_prefix(env, app):
    app.mark.enqueue_in(3600, str(env.log), "later")
    fill(
        env.config.redis(),
        env.config.keys.retry,
        [failed("apps.web_app.mark", [str(env.log), f"r{i}"]) for i in range(3)],
        time.time() + 600,
    )
    env.config.redis().rpush(
        env.config.keys.unsettled,
        json.dumps({"set": "dead", "score": time.time(), "payload": failed("apps.web_app.mark", ["-", "parked"])}),
    )
    for name, path in (
        ("queues", "/queues"),
        ("scheduled", "/scheduled"),
        ("retries", "/retries"),
        ("metrics", "/metrics"),
        ("unsettled", "/unsettled"),
    ):
        env.go(path)
        links = env.page.eval_on_selector_all(
            "a[href], form[action]", "els => els.map(e => e.getAttribute('href') || e.getAttribute('action'))"
        )
        assert links and all(link.startswith(PREFIX + "/") for link in links), (path, links)
        env.shot(name)
    env.go("/metrics")
    assert "apps.web_app.mark" in env.page.inner_text("table")
    env.page.fill('input[name="jid"]', "revive-me")
    env.page.press('input[name="jid"]', "Enter")
    assert env.page.url.endswith(PREFIX + "/job/revive-me")


def test_the_dashboard_status_line_follows_the_queues_without_a_reload(env, app):
    env.go("/")
    assert env.page.inner_text('[data-text="latency_text"]') == "0 ms"
    api.Queue("default", env.config).pause()
    try:
        app.mark.enqueue_many([(str(env.log), f"s{i}") for i in range(50)])
        # The "every-30s" entry also pushes onto default, so the count to follow is Redis's.
        wait_for(lambda: counter(env, "enqueued") == waiting(env) >= 50, what="the enqueued counter, no reload")
        wait_for(
            lambda: env.page.inner_text('[data-text="latency_text"]').endswith(" s"),
            timeout=10,
            what="the status line's latency, no reload",
        )
        assert counter(env, "processes") == 3  # the master and its two children
        env.shot("dashboard-waiting")
        assert "warn" in env.page.get_attribute('a:has([data-counter="dead"])', "class")
        env.config.redis().delete(env.config.keys.dead)
        wait_for(
            lambda: "warn" not in env.page.get_attribute('a:has([data-counter="dead"])', "class"),
            what="the dead counter no longer red once dead is empty",
        )
    finally:
        api.Queue("default", env.config).resume()
    wait_for(lambda: env.page.inner_text('[data-text="latency_text"]') == "0 ms", what="the latency back to 0")
    icon = env.page.evaluate("document.querySelector('link[rel=icon]').href")
    assert env.page.request.get(icon).status == 200 and env.page.request.get(env.url("/favicon.ico")).status == 200


def test_every_delete_on_dead_asks_and_cancel_keeps_the_entry(env, app):
    fill(
        env.config.redis(),
        env.config.keys.dead,
        [failed("apps.web_app.asked", [i], jid=f"ask{i}") for i in range(3)],
        time.time() + 1000,
    )  # the newest: the first rows of /dead
    env.go("/dead")
    env.dialogs.clear()
    env.dismiss = True
    row = env.page.locator("tr", has=env.page.locator("a", has_text="ask2"))
    row.get_by_role("button", name="Delete").click()
    assert env.dialogs == ["Apply to dead entry ask2? This cannot be undone."]
    assert api.DeadSet(env.config).find("ask2") is not None  # cancelled: nothing posted
    env.dismiss = False
    row.get_by_role("button", name="Delete").click()
    assert "delete: 1 of 1 selected" in env.flash() and api.DeadSet(env.config).find("ask2") is None
    env.page.locator("tr", has=env.page.locator("a", has_text="ask1")).locator('input[name="entry"]').check()
    env.page.locator("#bulk .toolbar button[value=delete]").click()
    assert env.dialogs[-1] == "Apply to the selected entries of Dead? This cannot be undone."
    assert "delete: 1 of 1 selected" in env.flash() and api.DeadSet(env.config).find("ask1") is None
    env.page.locator("tr", has=env.page.locator("a", has_text="ask0")).get_by_role("button", name="Retry now").click()
    assert len(env.dialogs) == 3  # a retry doesn't ask


def test_the_job_page_of_a_job_whose_status_lags(env, app):
    queue = api.Queue("slowq", env.config)
    queue.pause()
    try:
        jid = app.mark.options(queue="slowq").enqueue(str(env.log), "lagging")
        r = env.config.redis()
        raw = next(e for e in r.lrange(env.config.keys.queue("slowq"), 0, -1) if json.loads(e)["jid"] == jid)
        r.lrem(env.config.keys.queue("slowq"), 1, raw)
        time.sleep(0.01)
        dead = {
            **json.loads(raw),
            "retry_count": 1,
            "error_class": "ValueError",
            "error_message": "boom",
            "failed_at": time.time(),
        }
        r.zadd(env.config.keys.dead, {json.dumps(dead): time.time()})  # dead, its status still "queued"
    finally:
        queue.resume()
    env.go(f"/job/{jid}")
    assert api.status(jid, env.config).state == "queued"
    assert "the status says queued" in env.page.inner_text(".stale") and "the place is newer" in env.page.inner_text(
        ".stale"
    )
    env.shot("job-stale")
    env.page.get_by_role("button", name="Retry now").click()
    assert "retry: done" in env.flash()
    wait_for(lambda: "lagging" in env.runs(), what="the retried job to run")


def test_the_job_page_of_a_job_whose_record_was_trimmed(env, app):
    """Retention trimmed a first-try success (a flush with status_max 1 files a newer one):
    its page says not retained, with the rules, and never queued."""
    from cogworker.lifecycle import history

    trimming = cogworker.Config(redis_url=env.redis.url, status_max=1)
    jid = app.mark.enqueue(str(env.log), "trimmed")
    wait_for(lambda: api.state(jid, env.config) == "succeeded", what="the job to succeed")
    now = time.time()
    history._write_pending(trimming, [], [], True, [("newer", "default", "C", 1, now, now, "w", now)])
    history._write_pending(trimming, [], [], True, [("newest", "default", "C", 1, now, now, "w", now)])
    assert api.state(jid, env.config) == api.NOT_RETAINED
    response = env.page.goto(env.url(f"/job/{jid}"))
    assert response is not None and response.status == 404
    note = env.page.inner_text("#not-retained")
    assert (
        note.startswith("not retained")
        and "the last 10,000 successes" in note
        and "queued" not in note.split("in any")[0]
    )
    assert env.page.locator(".badge.state-not_retained").first.is_visible()
    assert env.page.locator(".state-queued").count() == 0
    env.shot("job-not-retained")


def test_the_metrics_tab_windows_and_a_class_page(env, app):
    env.go("/metrics")
    assert env.page.inner_text(".windows a.here") == "1h"
    row = env.page.locator("table.metrics tr", has_text="apps.web_app.mark")
    assert int(row.locator("td.num").first.inner_text().replace(",", "")) >= 150
    aligns = env.page.eval_on_selector_all(
        "table.metrics td.num, table.metrics th.num", "els => els.map(e => getComputedStyle(e).textAlign)"
    )
    assert aligns and set(aligns) == {"right"}
    env.shot("metrics")
    env.page.click(".windows >> text=24h")
    assert env.page.url.endswith("/metrics?window=24h") and env.page.inner_text(".windows a.here") == "24h"
    assert "executions per hour" in env.page.content()
    env.page.click("table.metrics >> text=apps.web_app.explode")
    assert "/metrics/apps.web_app.explode?window=24h" in env.page.url
    assert int(env.page.inner_text('[data-metric="failed"]')) >= 20
    env.go("/metrics/apps.web_app.mark?window=1h")
    assert env.page.locator("table.histogram tbody tr").count() >= 2
    assert "runs by execution time" in env.page.content()
    env.shot("metrics-class")
    env.go("/queues")
    aligns = env.page.eval_on_selector_all("td.num", "els => els.map(e => getComputedStyle(e).textAlign)")
    assert aligns and set(aligns) == {"right"}


def test_quiet_a_master_from_busy(env, app):
    app.mark.enqueue(str(env.log), "long", 4.0)
    wait_for(lambda: any(p.running for p in api.processes(env.config)), what="a running job")
    env.go("/busy")
    assert "apps.web_app.mark" in env.page.inner_text("table")
    env.shot("busy")
    master = next(p for p in api.processes(env.config) if p.kind == "master")
    env.page.locator("tr", has_text=master.identity).get_by_role("button", name="Quiet").click()
    assert "quiet sent to" in env.flash()
    wait_for(
        lambda: any(p.state == "quiet" for p in api.processes(env.config) if p.kind == "master"),
        timeout=15,
        what="the master quiet",
    )
    app.mark.enqueue(str(env.log), "after-quiet")
    time.sleep(2)
    assert "after-quiet" not in env.runs() and env.master.alive()
    env.go("/busy")
    row = env.page.locator("tr", has_text=master.identity)
    assert "quiet" in row.inner_text()
    assert row.get_by_role("button", name="Quiet").count() == 0 and row.get_by_role("button", name="Stop").count() == 1
    kinds = env.page.eval_on_selector_all("table.list tbody tr", "els => els.map(e => e.className)")
    assert kinds == ["master", "child", "child"]  # the master above its children
