"""What the job page (and the lists) say about a job: where a running one runs and with
which arguments (a real prefork worker), and how many retries it had so far (retries,
not runs); the batch page names each job's class."""

from __future__ import annotations

import json
import socket
import time

import pytest
from api_util import failed
from apps import pf
from prefork_harness import wait_for
from test_cli_queue import cli

import cogworker
from cogworker import api

pytest.importorskip("starlette")
from web_util import client_for  # noqa: E402

from cogworker.web import create_app  # noqa: E402


def test_a_running_jobs_page_shows_its_arguments_and_where_it_runs(own_config, masters):
    m = masters(procs=1, module="apps.pf_control")
    (child,) = m.wait_children(1)
    jid = pf.slow.enqueue("on-the-page", 60)
    client = client_for(create_app(config=own_config))
    page = wait_for(
        lambda: (lambda t: t if "runs on" in t else None)(client.get(f"/job/{jid}").text), 20, what="runs on"
    )
    assert f"host <code>{socket.gethostname()}</code>, pid {child}, a child of master pid {m.pid}" in page
    assert "<h2>Arguments</h2>" in page and "on-the-page" in page and "60" in page
    where = api.running_job(jid, own_config)
    assert where is not None and where[0].pid == child and where[1] is not None and where[1].args == ["on-the-page", 60]
    m.signal_group(9)


def test_retries_so_far_count_retries_not_runs(config):
    r = config.redis()
    now = time.time()
    first = json.loads(failed("apps.x.add", [1, 1], jid="once"))  # failed its first run: no retry yet
    third = {**json.loads(failed("apps.x.add", [2, 2], jid="thrice")), "retry_count": 3}  # 3 runs: 2 retries
    r.zadd(config.keys.retry, {json.dumps(first): now + 60})
    r.zadd(config.keys.dead, {json.dumps(third): now})
    assert {rec.jid: rec.retries for rec in api.RetrySet(config).jobs(0, 10)} == {"once": 0}
    client = client_for(create_app(config=config))
    once = client.get("/job/once?in=retry&at=" + repr(now + 60)).text
    assert "<th>retries so far</th><td>0 <span" in once and "1 failed run" in once
    thrice = client.get("/job/thrice").text
    assert "<th>retries so far</th><td>2 <span" in thrice and "3 failed runs" in thrice
    listed = cli(config.redis_url, "jobs", "dead").stdout.splitlines()
    header, row = listed[0].split(), listed[1].split()
    assert row[header.index("RETRIES") + 1] == "2", listed  # (FAILED is two words: "0.8s ago")


def test_the_batch_page_shows_each_jobs_class(config):
    from apps import core_jobs

    with cogworker.batch() as b:
        one = core_jobs.record.enqueue("in-batch")
        two = core_jobs.charge.enqueue(11)
    page = client_for(create_app(config=config)).get(f"/batches/{b.bid}").text
    assert "<th>class</th>" in page
    for jid, name in ((one, core_jobs.record.name), (two, core_jobs.charge.name)):
        assert jid in page
        row = page[page.index(f">{jid}</a>") :].split("</tr>")[0]
        assert name in row, row
