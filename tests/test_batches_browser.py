"""The Batches pages in a real browser (headless Chromium, Playwright), over a batch run by
a real prefork master: the list's counts and progress bar, one batch's counts, jobs and
callbacks, and the links between them and the job pages (a running batch job's progress
shows on Busy and on its job page, which links back to its batch). Its screenshots go to
$COGWORKER_SCREENSHOTS (else a temp dir); docs/web-batches.png and docs/web-batch.png are two."""

from __future__ import annotations

import pytest
from apps.pf_log import events
from prefork_harness import wait_for
from web_harness import browser_page, chromium_path, screenshot_dir, served

import cogworker
from cogworker import api

pytest.importorskip("starlette")
pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="no chromium (.ci/run installs it)")


def widths(page, bar):
    """The bar's three parts (succeeded, failed, pending) in percent, as drawn."""
    return [
        round(float(bar.locator(f"rect.bar-{part}").get_attribute("width")), 1)
        for part in ("succeeded", "failed", "pending")
    ]


def make_batch(bf, go):
    """Six jobs that succeed, two that die, one that holds at 50 % until ``go`` exists."""
    with cogworker.batch(
        on_success=bf.callback.s("success"),
        on_complete=bf.callback.s("complete"),
        on_death=bf.callback.s("death"),
        description="nightly import <b>2026-12</b>",
    ) as b:
        done = [bf.work.enqueue(f"w{i}") for i in range(6)]
        dead = [bf.doomed.enqueue(f"d{i}") for i in range(2)]
        slow = bf.halfway.enqueue("h", str(go))
    return b, done, dead, slow


def check_list(page, b, shots):
    row = page.locator(f"#batches tr[data-bid='{b.bid}']")
    cells = row.locator("td").all_inner_texts()
    assert cells[0] == "nightly import <b>2026-12</b>"  # escaped, shown as typed
    assert cells[1] == b.bid
    assert "6 succeeded · 2 failed · 1 pending" in cells[4] and "of 9" in cells[4]
    assert widths(page, row.locator("svg.batchbar")) == [66.7, 22.2, 11.1]
    assert "death" in cells[5]  # on_death fires once a job died and the block closed
    page.screenshot(path=str(shots / "web-batches.png"), full_page=True)
    row.locator("a.bid").click()
    page.wait_for_url(f"**/batches/{b.bid}")


def check_batch_page(page, done, dead, slow):
    counts = dict(
        zip(page.locator("#counts th").all_inner_texts(), page.locator("#counts td").all_inner_texts(), strict=True)
    )
    assert (counts["jobs"], counts["succeeded"], counts["pending"]) == ("9", "6", "1")
    assert counts["failed"].startswith("2") and "2 dead, 0 cancelled" in counts["failed"]
    assert widths(page, page.locator("#batch-page-bar svg.batchbar")) == [66.7, 22.2, 11.1]
    states = dict(
        zip(
            page.locator("#jobs td:first-child").all_inner_texts(),
            page.locator("#jobs td:nth-child(3)").all_inner_texts(),
            strict=True,
        )
    )
    assert states == {**{j: "succeeded" for j in done}, **{j: "dead" for j in dead}, slow: "pending"}
    classes = dict(
        zip(
            page.locator("#jobs td:first-child").all_inner_texts(),
            page.locator("#jobs td:nth-child(2)").all_inner_texts(),
            strict=True,
        )
    )
    assert {classes[j] for j in dead} == {"apps.batchjobs.doomed"}, classes  # each job's class, named
    assert all(name.startswith("apps.") for name in classes.values()), classes
    assert page.locator("#callbacks tr[data-callback='on_death'] td:nth-child(4)").inner_text() != "not yet"
    assert page.locator("#callbacks tr[data-callback='on_complete'] td:nth-child(4)").inner_text() == "not yet"


def check_running_job(page, server, b, slow):
    """Its progress on its job page, which links back to its batch, and on Busy."""
    page.locator(f"#jobs a.jid:text-is('{slow}')").click()
    page.wait_for_url(f"**/job/{slow}*")
    assert page.locator("progress").get_attribute("value") == "0.5"
    assert "half of the rows" in page.inner_text(".progress")
    page.locator("a.batch").click()
    page.wait_for_url(f"**/batches/{b.bid}")
    page.goto(server.url + "/busy")
    assert "50% half of the rows" in page.inner_text("td .progress")


def check_done(page, server, b, config, shots):
    page.goto(server.url + f"/batches/{b.bid}")
    assert page.locator("#counts td").nth(3).inner_text() == "0"
    assert widths(page, page.locator("#batch-page-bar svg.batchbar")) == [77.8, 22.2, 0.0]
    assert (
        page.locator("#callbacks tr[data-callback='on_success'] td:nth-child(4)").inner_text().startswith("not fired")
    )  # two jobs died: it never will
    fired = page.locator("#callbacks tr[data-callback='on_complete']")
    assert fired.locator("td:nth-child(4)").inner_text().endswith("ago")
    page.screenshot(path=str(shots / "web-batch.png"), full_page=True)
    cb_jid = api.batch(b.bid, config).callbacks["on_complete"]["jid"]
    fired.locator("a.jid").click()
    page.wait_for_url(f"**/job/{cb_jid}")
    assert page.locator("h1 code").inner_text() == cb_jid
    assert page.goto(server.url + "/batches/b-nosuch").status == 404


def test_the_batches_pages_show_counts_progress_and_link_to_jobs_and_callbacks(tmp_path):
    from apps import batch_faces as bf

    log, go = tmp_path / "runs.log", tmp_path / "go"
    shots = screenshot_dir(tmp_path / "shots")
    with served("apps.batch_faces", log) as (config, server):
        b, done, dead, slow = make_batch(bf, go)
        wait_for(
            lambda: (i := api.batch(b.bid, config)) and (i.succeeded, i.failed, i.pending) == (6, 2, 1),
            30,
            what="six succeeded, two dead, one running",
        )
        wait_for(
            lambda: (p := api.progress(slow, config)) is not None and p.fraction == 0.5,
            20,
            what="the running job's progress",
        )
        with browser_page(server.url + "/batches", "Batches") as page:
            check_list(page, b, shots)
            check_batch_page(page, done, dead, slow)
            check_running_job(page, server, b, slow)
            go.write_text("go")
            wait_for(lambda: api.batch(b.bid, config).done_at is not None, 30, what="the batch done")
            wait_for(
                lambda: sorted(e[1] for e in events(str(log)) if e[0] == "cb") == ["complete", "death"],
                30,
                what="on_complete and on_death ran, on_success not",
            )
            check_done(page, server, b, config, shots)
