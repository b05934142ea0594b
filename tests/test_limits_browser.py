"""The Limits page in a real browser (headless Chromium, Playwright), with a real prefork
master holding a concurrency slot and jobs parked over it, and the same numbers from the
API and the CLI. Its screenshot goes to $COGWORKER_SCREENSHOTS (else a temp dir);
docs/web-limits.png is one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from prefork_harness import TESTS, wait_for
from web_harness import browser_page, chromium_path, screenshot_dir, served

from cogworker import api
from cogworker.client.enqueue import push_many
from cogworker.client.jobs import JobOptions, build_payload

pytest.importorskip("starlette")
pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")


def payload(job, *args):
    return build_payload(f"apps.limited.{job}", args, {}, JobOptions())


def solo(config):
    return next((x for x in api.limiters(config) if x.name == "solo"), None)


def check_api(config):
    """Solo held once with two parked, the window full: as the API counts them."""
    wait_for(
        lambda: (s := solo(config)) is not None and s.in_use == 1 and s.waiting == 2,
        30,
        what="solo held once, two parked",
    )
    wait_for(lambda: any(x.name == "w" and x.over >= 5 for x in api.limiters(config)), 30, what="the window full")
    by_name = {x.name: x for x in api.limiters(config)}
    assert by_name["solo"].kind == "concurrency" and by_name["solo"].limit == 1 and by_name["solo"].over >= 2
    assert by_name["w"].kind == "window" and by_name["w"].limit == 20 and by_name["w"].per == 2.0
    assert api.deferrals(config) >= by_name["solo"].over + by_name["w"].over - 1


def check_cli(url):
    cli = subprocess.run(
        [sys.executable, "-m", "cogworker", "limits", "--json", "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(TESTS),
    )
    assert cli.returncode == 0, cli.stderr
    rows = {x["name"]: x for x in json.loads(cli.stdout)["limiters"]}
    assert rows["solo"]["in_use"] == 1 and rows["solo"]["waiting"] == 2 and rows["w"]["kind"] == "window"
    text = subprocess.run(
        [sys.executable, "-m", "cogworker", "limits", "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(TESTS),
    ).stdout
    assert "LIMITER" in text and "1 at once" in text and "20 per 2.0s" in text


def test_the_limits_page_api_and_cli_show_each_limiter(tmp_path):
    with served("apps.limited", tmp_path / "runs.log") as (config, server):
        push_many(
            [payload("solo", "holder", 120.0), payload("solo", "parked1"), payload("solo", "parked2")]
            + [payload("windowed", f"w{i}") for i in range(25)]
        )
        check_api(config)
        check_cli(config.redis_url)
        with browser_page(server.url + "/limits", "Limits", height=640) as page:
            table = [
                [c.inner_text() for c in row.query_selector_all("td")]
                for row in page.query_selector_all("#limiters tbody tr")
            ]
            cells = {row[0]: row for row in table}
            name, kind, limit, in_use, waiting, over, _ = cells["solo"]
            assert (kind, limit, waiting) == ("concurrency", "1 at once", "2")
            assert in_use.startswith("1") and "full" in in_use and int(over) >= 2
            assert cells["w"][1:3] == ["window", "20 per 2 s"]
            page.screenshot(path=str(screenshot_dir(tmp_path / "shots") / "web-limits.png"), full_page=True)
