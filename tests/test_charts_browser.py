"""The charts on a phone's screen (390 px wide, headless Chromium): the dashboard's and
the Metrics tab's charts fit it, drawn for their box (their text not scaled to half), and
the live chart breaks its lines where no page was polling. Screenshots go to
$COGWORKER_SCREENSHOTS (else a temp dir)."""

from __future__ import annotations

import time

import pytest
from prefork_harness import wait_for
from web_harness import CHROMIUM_ARGS, chromium_path, screenshot_dir, served

from cogworker import api
from cogworker.web.charts import GAP, ChartSampler, live_chart, runs_of

pytest.importorskip("starlette")
pytest.importorskip("playwright")

PHONE = {"width": 390, "height": 844}


def gapped_rates(now: float) -> list[tuple[float, float, float]]:
    sampler = ChartSampler()
    now = time.time()
    for i in range(5):  # polled every 2 s for 8 s, then no page for a minute, then again
        sampler.add(100 + 10 * i, i, now - 90 + 2 * i)
    for i in range(5):
        sampler.add(500 + 10 * i, 10 + i, now - 20 + 2 * i)
    return sampler.rates()


def test_the_live_chart_breaks_its_lines_at_a_gap():
    now = time.time()
    rates = gapped_rates(now)
    assert len(rates) == 8  # none across the gap (an average over it, never measured)
    assert [len(run) for run in runs_of(rates)] == [4, 4] and GAP < 60
    svg = live_chart(rates, now=now)
    assert svg.count("<polyline") == 4  # two stretches, processed and failed each


@pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")
def test_the_charts_fit_a_390_px_screen(tmp_path):
    from playwright.sync_api import sync_playwright

    shots = screenshot_dir(tmp_path / "screenshots")
    with served("apps.web_app", tmp_path / "runs.log") as (config, server):
        from apps import web_app

        for i in range(30):
            web_app.mark.enqueue(str(tmp_path / "marks"), f"m{i}")
        for i in range(3):
            web_app.explode.enqueue(f"boom {i}")
        wait_for(lambda: api.stats(config).processed >= 30 and api.stats(config).failed >= 3, 30, what="jobs run")
        wait_for(lambda: api.window_metrics("1h", config).classes, 30, what="metrics flushed")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=PHONE)
                for path, name in (
                    ("/", "dashboard"),
                    ("/metrics", "metrics"),
                    (f"/metrics/{web_app.mark.name}", "metrics-class"),
                ):
                    assert page.goto(server.url + path).status == 200
                    # Each chart redrawn for its box (the dashboard's at its first poll).
                    wait_for(lambda: _drawn_widths(page) and max(_drawn_widths(page)) <= 390, 15, what=f"{name} fit")
                    page.screenshot(path=str(shots / f"phone-{name}.png"), full_page=True)
                    width = page.evaluate("document.documentElement.scrollWidth")
                    assert width <= PHONE["width"], (name, width)  # the page never scrolls sideways
                    for box in page.eval_on_selector_all(
                        "svg, #live-chart", "els => els.map(e => e.getBoundingClientRect().right)"
                    ):
                        assert box <= PHONE["width"], (name, box)
                    # Drawn at the width shown: an SVG's own width is its box's, its text 11 px.
                    for drawn, shown in page.eval_on_selector_all(
                        ".chart svg", "els => els.map(e => [e.width.baseVal.value, e.getBoundingClientRect().width])"
                    ):
                        assert abs(drawn - shown) <= 4, (name, drawn, shown)
                # The live chart with a gap, as drawn for the phone: two stretches a line.
                page.set_content(live_chart(gapped_rates(time.time()), width=358))
                page.screenshot(path=str(shots / "phone-live-gap.png"))
                assert page.eval_on_selector_all("polyline", "els => els.length") == 4
            finally:
                browser.close()
    print(f"screenshots in {shots}")


def _drawn_widths(page) -> list[float]:
    """Each chart's own width (the SVG's width attribute; the live chart's image's natural width)."""
    widths = page.eval_on_selector_all(".chart svg", "els => els.map(e => e.width.baseVal.value)")
    live = page.eval_on_selector_all("#live-chart", "els => els.map(e => e.naturalWidth)")
    return [float(w) for w in widths + live if w]
