"""Job priorities (docs/architecture.md#priorities): ``@job(priority=N)`` and
``.options(priority=N)``, -100 to 100. Real prefork workers run jobs enqueued with
priorities and the order they ran in is read from their log: higher first, first in
first out within a priority, negative after 0, strict and weighted order between queues
with levels, a pause holding a queue's levels, a killed child's job taken over onto its
level; the API, the command and the web UI show a queue's jobs in fetch order; bad
priorities are one line of error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from apps import pf_prio
from apps.pf_log import events
from cluster_util import cluster, cluster_ns, layout_config  # noqa: F401 (fixtures)
from prefork_harness import TESTS, Master, wait_for

import cogworker
from cogworker import api
from cogworker.errors import ConfigurationError
from cogworker.keys import level_name


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def start(config, log, queues, procs=1):
    args = [arg for q in queues for arg in ("-q", q)]
    return Master(config.redis_url, module="apps.pf_prio", procs=procs, args=args, env={"PF_LOG": log})


def ran(log, n):
    """The tags of the first ``n`` runs, in the order they ran (waited for)."""
    wait_for(lambda: len([e for e in events(log) if e[0] == "ran"]) >= n, timeout=60, what=f"{n} runs")
    return [tag for event, tag, _, _ in events(log) if event == "ran"]


def enqueue(tag, priority=0, queue="default"):
    pf_prio.ran.options(queue=queue, priority=priority).enqueue(tag)


@pytest.mark.parametrize("bad", [101, -101, 1.5, True, "5", None])
def test_a_bad_priority_is_one_line_of_error(bad):
    with pytest.raises(ConfigurationError) as refused:
        pf_prio.ran.options(priority=bad)
    assert str(refused.value) == f"priority must be a whole number from -100 to 100, got {bad!r}"
    with pytest.raises(ConfigurationError, match="priority must be"):
        cogworker.job(priority=bad)(lambda: None)


def test_a_queue_runs_higher_priorities_first_and_each_in_order(config, log):
    plan = [("a", 0), ("b", 5), ("c", -3), ("d", 5), ("e", 100), ("f", 0), ("g", -3), ("h", -100), ("i", 5)]
    for tag, p in plan:
        enqueue(tag, p)
    pf_prio.urgent.enqueue("u")  # its declared priority, 50
    master = start(config, log, ["default"])
    try:
        assert ran(log, 10) == ["e", "u", "b", "d", "i", "a", "f", "c", "g", "h"]
    finally:
        master.stop()


def test_strict_order_between_queues_comes_first(config, log):
    for tag, queue, p in [("b100", "b", 100), ("a-5", "a", -5), ("a0", "a", 0), ("b0", "b", 0), ("a7", "a", 7)]:
        enqueue(tag, p, queue)
    master = start(config, log, ["a", "b"])
    try:
        assert ran(log, 5) == ["a7", "a0", "a-5", "b100", "b0"]
    finally:
        master.stop()


def test_weighted_order_keeps_each_queue_in_priority_order(config, log):
    plan = {q: [(f"{q}{i}", p) for i, p in enumerate([-2, 0, 9, 0, 9, -2, 3])] for q in ("a", "b")}
    for q, jobs in plan.items():
        for tag, p in jobs:
            enqueue(tag, p, q)
    master = start(config, log, ["a,1", "b,1"])
    try:
        order = ran(log, 14)
    finally:
        master.stop()
    for q, jobs in plan.items():
        expected = [tag for _, _, tag in sorted((-p, i, tag) for i, (tag, p) in enumerate(jobs))]
        assert [tag for tag in order if tag.startswith(q)] == expected


def test_a_pause_holds_every_level_of_its_queue(config, log):
    paused = api.Queue("a")
    paused.pause()
    for tag, p in [("a-1", -1), ("a9", 9), ("a0", 0)]:
        enqueue(tag, p, "a")
    enqueue("b0", 0, "b")
    master = start(config, log, ["a", "b"])
    try:
        assert ran(log, 1) == ["b0"]
        time.sleep(1.5)  # the worker fetches on meanwhile: a job of a's taken would run now
        assert paused.size() == 3 and [tag for _, tag, _, _ in events(log)] == ["b0"]
        paused.resume()
        assert ran(log, 4) == ["b0", "a9", "a0", "a-1"]
    finally:
        master.stop()


def test_a_killed_childs_priority_job_is_taken_over_onto_its_level(config, log):
    pf_prio.die_once.enqueue("x")  # priority 10
    master = start(config, log, ["default"])
    r = config.redis()
    level = config.keys.queue(level_name("default", 10))
    try:
        wait_for(lambda: [e for e in events(log) if e[0] == "died"], timeout=60, what="the child's death")
        queue = api.Queue("default")  # paused by the job before its child died: the job waits where it was put
        wait_for(lambda: r.llen(level) == 1, timeout=60, what="the job back on its level")
        assert r.llen(config.keys.queue("default")) == 0
        [record] = queue.jobs()
        assert record.payload["priority"] == 10 and record.payload["class"] == "apps.pf_prio.die_once"
        enqueue("plain")  # priority 0: after the level's job
        queue.resume()
        assert ran(log, 2) == ["x", "plain"]
    finally:
        master.stop()


def test_a_due_job_keeps_its_priority(config, log):
    pf_prio.ran.options(priority=-4).enqueue_in(0.5, "late-4")
    pf_prio.ran.options(priority=8).enqueue_in(0.5, "late8")
    enqueue("now0")
    api.Queue("default").pause()
    master = start(config, log, ["default"])
    try:
        # Both due ones are moved onto their levels by the master's poller while it is paused.
        wait_for(lambda: api.Queue("default").size() == 3, timeout=60, what="the due jobs on their levels")
        assert [r.args[0] for r in api.Queue("default").jobs()] == ["late8", "now0", "late-4"]
        api.Queue("default").resume()
        assert ran(log, 3) == ["late8", "now0", "late-4"]
    finally:
        master.stop()


def filled_with_levels(config):
    for tag, p in [("z0", 0), ("m-7", -7), ("h30", 30), ("z1", 0), ("h99", 99), ("h30b", 30)]:
        enqueue(tag, p)
    return ["h99", "h30", "h30b", "z0", "z1", "m-7"]


def test_the_api_shows_a_queue_in_fetch_order_and_counts_every_level(config):
    expected = filled_with_levels(config)
    queue = api.queue("default")
    assert queue.size() == 6
    assert [r.args[0] for r in queue.jobs()] == expected
    assert [r.args[0] for r in queue.jobs(2, 3)] == expected[2:5]
    found = queue.find(queue.jobs(4, 1)[0].jid)
    assert found is not None and found.args == [expected[4]]
    assert api.stats().enqueued == 6
    assert queue.delete(queue.jobs(0, 1)[0]) and queue.size() == 5
    assert queue.clear() == 5 and queue.size() == 0


def test_the_command_and_the_web_ui_show_fetch_order(config):
    from starlette.testclient import TestClient

    from cogworker.web import create_app

    expected = filled_with_levels(config)
    env = {**os.environ, "PYTHONPATH": str(TESTS), "COGWORKER_REDIS_URL": config.redis_url}
    env.pop("REDIS_URL", None)
    shown = subprocess.run(
        [sys.executable, "-m", "cogworker", "queue", "default"], capture_output=True, text=True, env=env, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith("queue default: 6 jobs")
    rows = [line for line in shown.stdout.splitlines() if "apps.pf_prio.ran" in line]
    assert [row.split("[")[1].split("]")[0].strip("'\"") for row in rows] == expected
    page = TestClient(create_app(config=config), base_url="http://localhost").get("/queues/default").text
    # Each as its arguments cell shows it: a bare tag could also stand in a random token
    # of the page ("z0" once did, before the rows).
    at = [page.index(f"<code>[&#34;{tag}&#34;]</code>") for tag in expected]
    assert at == sorted(at)


def test_the_levels_are_in_the_queues_shard_on_a_cluster(layout_config, log):  # noqa: F811
    """Both cluster layouts: a real worker against a real cluster runs a queue's levels in order."""
    config = layout_config
    for tag, p in [("c0", 0), ("c-1", -1), ("c5", 5)]:
        enqueue(tag, p, "cq")
    shard = config.shard("cq")
    assert shard.redis().llen(shard.keys.queue(level_name("cq", 5))) == 1
    env = {"PF_LOG": log, "COGWORKER_CLUSTER_LAYOUT": config.cluster_layout}
    master = Master(
        config.redis_url, module="apps.pf_prio", procs=1, args=["--namespace", config.namespace, "-q", "cq"], env=env
    )
    try:
        assert ran(log, 3) == ["c5", "c0", "c-1"]
    finally:
        master.stop()


def test_every_enqueue_path_puts_a_job_on_its_level(config):
    """Single, bulk, unique, async and a retry from the dead set: each on its level."""
    import asyncio

    level = config.keys.queue(level_name("default", 7))
    pf_prio.ran.options(priority=7).enqueue_many([("bulk1",), ("bulk2",)])
    pf_prio.ran.options(priority=7, unique_for=60).enqueue("unique")
    asyncio.run(pf_prio.ran.options(priority=7).enqueue_async("async"))
    r = config.redis()
    assert [json.loads(raw)["args"][0] for raw in reversed(r.lrange(level, 0, -1))] == [
        "bulk1",
        "bulk2",
        "unique",
        "async",
    ]
    assert r.llen(config.keys.queue("default")) == 0
    assert r.smembers(config.keys.levels) == {b"default 7"}


def test_a_levels_key_of_the_wrong_type_is_logged_once_and_plain_jobs_still_run(config, caplog):
    from cogworker.engine.fetch.fetcher import Fetcher

    config.redis().set(config.keys.levels, "not a set")
    enqueue("plain")
    fetcher = Fetcher(config, "h:1:levels", [("default", None)], block_timeout=0)
    work = fetcher.fetch()
    assert work is not None and json.loads(work.raw)["args"] == ["plain"]
    fetcher.levels._due = 0.0
    assert fetcher.fetch() is None
    assert [r.message for r in caplog.records if "levels key" in r.message] == [
        f"the levels key {config.keys.levels} holds the wrong type: no priority level is fetched"
    ]


def test_the_metrics_sample_counts_a_queues_levels(config):
    from cogworker.metrics.exporter import sample_redis

    filled_with_levels(config)
    size, waited = sample_redis(config, ["default"]).queues["default"]
    assert size == 6 and waited >= 0.0


def test_a_waiting_priority_job_is_cancelled_off_its_level(config):
    jid = pf_prio.ran.options(priority=-9).enqueue("doomed")
    assert api.cancel(jid) is True
    assert config.redis().llen(config.keys.queue(level_name("default", -9))) == 0
    assert api.cancelled(jid)["was"] == "queue"


def test_a_workflow_step_of_a_priority_is_refused_in_one_line(config):
    with pytest.raises(ConfigurationError) as refused:
        cogworker.chain(pf_prio.ran.s("a"), pf_prio.ran.options(priority=3).si("b")).enqueue()
    assert str(refused.value) == (
        "apps.pf_prio.ran: a job of a priority can't be a step of a chain, group or chord (steps run at 0)"
    )
    assert config.redis().llen(config.keys.queue("default")) == 0


def test_a_periodic_slots_push_keeps_its_priority(config):
    """A periodic slot's push (with its pushed mark, periodic_push.lua) onto its level."""
    from cogworker.client import enqueue as client
    from cogworker.core.payload import JobOptions, build_payload

    payload = build_payload("apps.pf_prio.urgent", ["tick"], {}, JobOptions(priority=50))
    assert client.push(payload, mark=(config.keys.namespace + ":test:mark", 60)) == payload["jid"]
    assert [r.args[0] for r in api.Queue("default").jobs()] == ["tick"]
    assert config.redis().llen(config.keys.queue(level_name("default", 50))) == 1
