"""``@cogworker.iterable_job`` in one process (docs/architecture.md#iterable): the decorator's
errors, a plain call, a stop at a yield and the faces that show the cursor (``api.status``,
``cogworker job``, the web UI's job page over HTTP and in a real browser), the checkpoint's
fencing and its bounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from core_util import RunningWorker, wait_for

import cogworker
from cogworker import api
from cogworker.core.inprogress import CHECKPOINT_TTL, InProgressList
from cogworker.errors import ConfigurationError, Fenced


def test_the_decorator_refuses_what_cannot_be_an_iterable_job():
    with pytest.raises(ConfigurationError, match="not a generator function"):
        cogworker.iterable_job(lambda cursor=None: None)
    with pytest.raises(ConfigurationError, match="takes no 'cursor' argument"):

        @cogworker.iterable_job
        def no_cursor(x):
            yield x

    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ConfigurationError, match="checkpoint_every"):
            cogworker.iterable_job(checkpoint_every=bad)
    for bad in (0, -1, "5"):
        with pytest.raises(ConfigurationError, match="seconds"):
            cogworker.iterable_job(seconds=bad)
    with pytest.raises(ConfigurationError, match="unknown job option"):
        cogworker.iterable_job(checkpoint_every=5, colour="red")


def test_a_plain_call_runs_every_item_and_enqueue_checks_the_arguments(config):
    from apps import iter_jobs

    iter_jobs.RAN.clear()
    assert iter_jobs.steps(7) is None
    assert iter_jobs.RAN == list(range(7))
    iter_jobs.RAN.clear()
    iter_jobs.steps(7, cursor=3)  # a cursor given at the start
    assert iter_jobs.RAN == [4, 5, 6]
    with pytest.raises(TypeError):
        iter_jobs.steps.enqueue(1, 2, 3, 4)
    from cogworker import testing

    iter_jobs.RAN.clear()
    with testing.inline():
        iter_jobs.steps.enqueue(4)  # run at once, through the server middleware, every item
    assert iter_jobs.RAN == [0, 1, 2, 3]
    assert not config.redis().keys("*checkpoint*")
    assert iter_jobs.steps.iterable.every == 5


def _cli_shows_the_cursor(config, jid):
    """``cogworker job``, as text and as JSON: 13 items done, the cursor at 12."""
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    args = [sys.executable, "-m", "cogworker", "job", jid, "--redis-url", config.redis_url]
    text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
    assert text.returncode == 0, text.stderr
    assert "items done" in text.stdout and "13" in text.stdout and "cursor" in text.stdout
    data = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, env=env, timeout=30).stdout)
    assert data["status"]["items_done"] == 13 and data["status"]["cursor"] == 12


def _web_shows_the_cursor(config, jid, tmp_path):
    """The web UI's job page, over HTTP and in a real browser (skipped without one)."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    client = TestClient(create_app(config=config), base_url="http://localhost")
    page = client.get(f"/job/{jid}")
    assert page.status_code == 200
    assert 'class="items-done">13<' in page.text and '<code class="cursor">12</code>' in page.text

    # ... and in a real browser
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright
    from redis_server import free_port
    from web_harness import CHROMIUM_ARGS, ServerThread, chromium_path

    if chromium_path() is None:
        pytest.skip("no chromium")
    server = ServerThread(create_app(config=config), free_port()).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{server.url}/job/{jid}")
            assert page.locator("td.items-done").inner_text() == "13"
            assert page.locator("code.cursor").inner_text() == "12"
            page.screenshot(path=str(tmp_path / "iterable-job.png"))
            browser.close()
    finally:
        server.stop()


def test_quiet_stops_it_at_a_yield_and_every_face_shows_its_cursor(config, tmp_path):
    from apps import iter_jobs

    iter_jobs.RAN.clear()
    iter_jobs.GATE.clear()
    iter_jobs.REACHED.clear()
    jid = iter_jobs.steps.enqueue(40, hold_at=12)
    r = config.redis()
    with RunningWorker() as worker:
        assert iter_jobs.REACHED.wait(10)
        saved = {k.decode(): v.decode() for k, v in r.hgetall(config.keys.checkpoint(jid)).items()}
        assert saved["done"] == "10" and saved["cursor"] == "9" and saved["state"] == "running"
        worker.quiet()
        iter_jobs.GATE.set()
        assert wait_for(lambda: r.llen(config.keys.queue("default")) == 1)
    assert iter_jobs.RAN == list(range(13))
    payload = json.loads(r.lrange(config.keys.queue("default"), 0, -1)[0])
    assert (payload["iter_cursor"], payload["iter_done"]) == (12, 13)
    assert wait_for(lambda: (api.status(jid) or api.JobStatus(jid, "?", 0, 0, None)).items_done == 13)
    status = api.status(jid)
    assert status.state == "queued" and status.cursor == 12
    assert [a.outcome for a in api.history(jid)] == ["suspended"]

    _cli_shows_the_cursor(config, jid)
    _web_shows_the_cursor(config, jid, tmp_path)

    # Resumed by the next worker from its cursor, to its end.
    iter_jobs.RAN.clear()
    with RunningWorker():
        assert wait_for(lambda: len(iter_jobs.RAN) == 27, 15)
        assert wait_for(lambda: (api.status(jid) or status).state == "succeeded", 10)
    assert iter_jobs.RAN == list(range(13, 40))
    assert api.status(jid).items_done == 40


def test_a_cursor_json_cannot_carry_fails_the_job(config):
    from apps import iter_jobs  # noqa: F401

    jid = cogworker.by_name("apps.iter_jobs.bad_cursor").enqueue()
    r = config.redis()
    with RunningWorker():
        assert wait_for(lambda: r.zcard(config.keys.dead) == 1)
    entry = json.loads(r.zrange(config.keys.dead, 0, -1)[0])
    assert entry["jid"] == jid and entry["error_class"] == "builtins.TypeError" or "TypeError" in entry["error_class"]
    assert "JSON can't carry" in entry["error_message"]
    assert entry["iter_cursor"] == {"ok": 1} and entry["iter_done"] == 1  # its last good checkpoint


def test_a_fenced_process_never_overwrites_a_newer_checkpoint(config):
    r = config.redis()
    old, new = InProgressList(config, "host:1:aaaa"), InProgressList(config, "host:2:bbbb")
    assert old.checkpoint("j1", "99", 100)
    r.set(config.keys.fenced(old.identity), "1")  # declared dead: its job now runs under `new`
    assert new.checkpoint("j1", "199", 200)
    with pytest.raises(Fenced):
        old.checkpoint("j1", "149", 150)
    with pytest.raises(Fenced):
        old.checkpoint("j1", "299", 300)  # not even with more items done
    assert r.hget(config.keys.checkpoint("j1"), "done") == b"200"
    # A write with fewer items done than the record's is an older run's: skipped.
    assert not new.checkpoint("j1", "120", 121)
    assert r.hget(config.keys.checkpoint("j1"), "cursor") == b"199"


def test_the_checkpoint_is_one_record_per_job_bounded_in_age_and_size(config):
    r = config.redis()
    lst = InProgressList(config, "host:3:cccc")
    for done in range(1, 50):
        lst.checkpoint("j2", str(done - 1), done)
    assert r.hlen(config.keys.checkpoint("j2")) == 5  # cursor, done, at, identity, state
    assert CHECKPOINT_TTL - 5 < r.ttl(config.keys.checkpoint("j2")) <= CHECKPOINT_TTL
    lst.checkpoint("j2", "49", 50, "finished", ttl=config.status_ttl)  # its end: kept as long as its status
    assert 0 < r.ttl(config.keys.checkpoint("j2")) <= config.status_ttl
    lst.checkpoint("j3", "0", 1, ttl=1)
    time.sleep(1.2)
    assert not r.exists(config.keys.checkpoint("j3"))
    from cogworker.core.iteration import MAX_CURSOR_BYTES, encode

    with pytest.raises(TypeError, match="at most"):
        encode("x" * MAX_CURSOR_BYTES, "big")


def test_seconds_checkpoints_by_time(config):
    from apps import iter_jobs

    iter_jobs.RAN.clear()
    iter_jobs.GATE.clear()
    iter_jobs.REACHED.clear()
    jid = iter_jobs.timed.enqueue(10, 8)
    r = config.redis()
    with RunningWorker():
        assert iter_jobs.REACHED.wait(10)
        done = int(r.hget(config.keys.checkpoint(jid), "done") or 0)
        assert 4 <= done <= 8  # about every second item (50 ms of 30 ms items), though no count was given
        iter_jobs.GATE.set()
        assert wait_for(lambda: r.hget(config.keys.checkpoint(jid), "state") == b"finished")
    assert iter_jobs.RAN == list(range(10))
