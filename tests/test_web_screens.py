"""The operator's screens over HTTP (Starlette's TestClient, a real Redis): the job page
when the status lags, the favicon, the dashboard's refreshable numbers, the confirmations
on every delete, the Metrics tab and a job class's page. The same screens in a real
browser: tests/test_web_browser.py."""

from __future__ import annotations

import json
import re
import time

import pytest
from api_util import entry, failed

import cogworker
from cogworker import api

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from cogworker.web import create_app  # noqa: E402


def client_for(config) -> TestClient:
    client = TestClient(create_app(config=config), follow_redirects=False, base_url="http://localhost")
    assert client.get("/").status_code == 200  # the session cookie
    return client


@pytest.fixture
def status_on(config):
    return cogworker.configure(status=True, history=True)


def die_before_the_status_flush(config, jid: str) -> None:
    """What a worker does when a job fails for good, minus the (batched) status write:
    the entry leaves its queue and lands in dead."""
    r = config.redis()
    raw = next(e for e in r.lrange(config.keys.queue("default"), 0, -1) if json.loads(e)["jid"] == jid)
    r.lrem(config.keys.queue("default"), 1, raw)
    payload = json.loads(raw)
    time.sleep(0.01)  # the death strictly after the enqueue's status write
    now = time.time()
    payload.update(retry_count=1, error_class="ValueError", error_message="boom", failed_at=now)
    r.zadd(config.keys.dead, {json.dumps(payload): now})


def test_the_job_page_finds_a_job_its_stale_status_misplaces(status_on):
    jid = cogworker.enqueue("apps.x.job", 1)
    assert api.status(jid, status_on).state == "queued"
    die_before_the_status_flush(status_on, jid)
    page = client_for(status_on).get(f"/job/{jid}")
    assert page.status_code == 200
    assert "no queue or set" not in page.text
    assert 'href="/dead">dead</a>' in page.text and 'value="retry"' in page.text and 'value="delete"' in page.text
    note = re.search(r'class="stale" role="note">([^<]+)<', page.text)[1]
    assert "the status says queued" in note and "the job is in dead" in note and "the place is newer" in note


def test_the_job_page_scans_when_no_live_process_runs_a_running_job(status_on):
    r = status_on.redis()
    r.zadd(status_on.keys.retry, {failed("apps.x.job", [1], jid="j-run"): time.time() + 60})
    r.hset(
        status_on.keys.status("j-run"),
        mapping={"state": "running", "updated_at": time.time() - 5, "attempt": 1, "queue": "default"},
    )
    page = client_for(status_on).get("/job/j-run")
    assert 'href="/retries">retry</a>' in page.text and "the status says running" in page.text
    assert 'value="kill"' in page.text


def test_favicon_and_its_link(config):
    client = client_for(config)
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in icon.content
    page = client.get("/queues").text
    href = re.search(r'<link rel="icon" [^>]*href="([^"]+)"', page)[1]
    assert client.get(href).status_code == 200


def test_the_dashboard_json_carries_every_number_the_page_shows(config):
    r = config.redis()
    r.sadd(config.keys.queues, "default")
    r.lpush(config.keys.queue("default"), entry("apps.x.job", [1], enqueued_at=time.time() - 10.9))
    client = client_for(config)
    data = client.get("/stats.json").json()
    assert data["latency"] >= 10.9 and data["latency_text"].endswith(" s") and data["enqueued"] == 1
    assert data["redis_version"] and data["redis_memory"] and data["redis_uptime"]
    page = client.get("/").text
    for name in ("processes", "unsettled"):
        assert f'data-counter="{name}"' in page
    for name in ("latency_text", "redis_version", "redis_memory", "redis_clients", "redis_uptime"):
        assert f'data-text="{name}"' in page
    days = client.get("/days.svg?days=7")
    assert days.status_code == 200 and days.text.startswith("<svg") and "last 7 days" in days.text


def test_every_delete_asks_first(config):
    r = config.redis()
    r.zadd(config.keys.dead, {failed("apps.x.job", [1], jid="d1"): time.time()})
    r.zadd(config.keys.retry, {failed("apps.x.job", [1], jid="r1"): time.time() + 60})
    r.sadd(config.keys.queues, "default")
    r.lpush(config.keys.queue("default"), entry("apps.x.job", [1], jid="q1"))
    client = client_for(config)
    for path in ("/dead", "/retries"):
        page = client.get(path).text
        rows = re.findall(r'<form id="row-\d+"[^>]*>', page)
        assert rows and all("data-confirm-delete=" in form for form in rows), path
        assert "data-confirm-delete=" in re.search(r'<form id="bulk"[^>]*>', page)[0], path
    queue_page = client.get("/queues/default").text
    deletes = re.findall(r"<form [^>]*/queues/default/delete[^>]*>", queue_page)
    assert deletes and all("data-confirm=" in form for form in deletes)


def test_the_metrics_tab_per_window_and_a_class_page(config):
    from cogworker.lifecycle import stats

    buffer = stats.StatsBuffer()
    now = time.time()
    for i in range(40):
        buffer.record("app.jobs.resize", i % 8 != 0, 2.0 + i, now=now - (i % 5) * 60)
    for _ in range(3):
        buffer.record("app.jobs.resize", True, 900.0, now=now - 5 * 3600)
    buffer.record("app.jobs.mail<b>", True, 0.3, now=now)
    stats.flush(config, buffer.take())
    client = client_for(config)
    page = client.get("/metrics").text
    assert re.search(r'href="/metrics\?window=1h" class="here"', page)
    rows = re.findall(
        r"<tr>\s*<td><a href=\"(/metrics/[^\"]+)\">([^<]+)</a></td>\s*<td class=\"num\">([\d,]+)</td>", page
    )
    assert [(name, runs) for _, name, runs in rows] == [("app.jobs.resize", "40"), ("app.jobs.mail&lt;b&gt;", "1")]
    assert rows[0][0] == "/metrics/app.jobs.resize?window=1h" and "<polyline" in page and "<b>" not in page
    assert "executions per minute (UTC)" in page
    eight = client.get("/metrics?window=8h").text
    assert re.search(r">app\.jobs\.resize</a></td>\s*<td class=\"num\">43</td>", eight)
    assert "executions per hour (UTC)" in eight
    assert 'class="here"' in client.get("/metrics?window=nope").text  # an unknown window: the last hour
    detail = client.get("/metrics/app.jobs.resize?window=8h")
    assert detail.status_code == 200
    values = dict(re.findall(r'data-metric="([^"]+)">([^<]+)<', detail.text))
    assert values["executions"] == "43" and values["failed"] == "5" and values["p99"] == "1.0 s"
    assert "runs by execution time" in detail.text and "<rect" in detail.text
    shares = re.findall(r'<td class="num">([\d,]+)</td><td class="num">([\d.]+ %)</td>', detail.text)
    assert sum(int(runs) for runs, _ in shares) == 43
    empty = client.get("/metrics/no.such.job?window=72h")
    assert empty.status_code == 200 and "did not run in the last 72 hours" in empty.text
