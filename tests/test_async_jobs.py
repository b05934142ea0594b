"""``async def`` jobs (and sync jobs returning a coroutine) in real prefork children:
success, failure into retry and dead, the soft timeout (JobTimeout raised inside), the
hard timeout (the task cancelled; the child killed when a sync call blocks its loop),
unique locks and server middleware. Each runs at ``--concurrency`` 1 and above."""

from __future__ import annotations

import json
import time

import pytest
from apps import pf_async
from prefork_harness import in_progress_total, lrange, wait_for

CONCURRENCY = [1, 4]


def tags(config, key):
    return [entry.split(":")[0] for entry in lrange(config, key)]


def dead_entries(config):
    return [json.loads(raw) for raw in config.redis().zrange(config.keys.dead, 0, -1)]


def start(masters, concurrency, procs=1, middleware=False):
    m = masters(
        procs=procs,
        module="apps.pf_async",
        args=("--concurrency", str(concurrency)) if concurrency > 1 else (),
        env={"PF_ASYNC_MIDDLEWARE": "1"} if middleware else None,
    )
    m.wait_children()
    return m


@pytest.mark.parametrize("concurrency", CONCURRENCY)
def test_async_job_runs_and_middleware_wraps_it(own_config, masters, concurrency):
    start(masters, concurrency, middleware=True)
    pf_async.a_sleep.enqueue("mw1", 0.05)
    pf_async.returns_coroutine.enqueue("coro1")
    wait_for(lambda: len(lrange(own_config, "test:done")) == 2, what="both done")
    assert sorted(tags(own_config, "test:done")) == ["coro1", "mw1"]
    # after: once the body ran (the body's "done" lands first, so the test waits for it)
    wait_for(lambda: lrange(own_config, "test:mw") == ["before:mw1", "after:mw1"], what="the middleware's after")
    wait_for(lambda: in_progress_total(own_config) == 0, what="acked")
    r = own_config.redis()
    assert r.zcard(own_config.keys.retry) == 0 and r.zcard(own_config.keys.dead) == 0
    wait_for(lambda: int(r.get(own_config.keys.stats_processed) or 0) == 2, what="counted")


@pytest.mark.parametrize("concurrency", CONCURRENCY)
@pytest.mark.parametrize("middleware", [False, True])
def test_async_failure_retries_then_dies(own_config, masters, concurrency, middleware):
    start(masters, concurrency, middleware=middleware)
    jid = pf_async.a_fail.enqueue("f1")
    wait_for(lambda: dead_entries(own_config), timeout=20, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["jid"] == jid and dead["error_class"] == "ValueError" and dead["retry_count"] == 2
    assert tags(own_config, "test:started") == ["f1", "f1"]  # the first run, and its one retry


@pytest.mark.parametrize("concurrency", CONCURRENCY)
@pytest.mark.parametrize("middleware", [False, True])
def test_soft_timeout_raises_jobtimeout_inside(own_config, masters, concurrency, middleware):
    m = start(masters, concurrency, middleware=middleware)
    pid = next(iter(m.child_pids()))
    pf_async.a_soft.enqueue("s1")
    wait_for(lambda: dead_entries(own_config), timeout=10, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["error_class"] == "cogworker.JobTimeout"
    assert lrange(own_config, "test:caught") == [f"s1:{pid}"]  # raised at its await, caught there
    assert m.child_pids() == {pid}  # nobody was killed


@pytest.mark.parametrize("concurrency", CONCURRENCY)
def test_hard_timeout_cancels_an_async_job_that_ignores_jobtimeout(own_config, masters, concurrency):
    m = start(masters, concurrency)
    pid = next(iter(m.child_pids()))
    pf_async.a_ignores.enqueue("i1")
    pf_async.a_sleep.enqueue("after", 0.01)
    wait_for(lambda: dead_entries(own_config), timeout=10, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["error_class"] == "cogworker.JobTimeout" and "ignored JobTimeout" in dead["error_message"]
    assert lrange(own_config, "test:caught") == [f"i1:{pid}"]
    wait_for(lambda: tags(own_config, "test:done") == ["after"], what="the other job")
    assert m.child_pids() == {pid}  # only the job ended, not its process


def test_hard_timeout_kills_a_child_whose_loop_is_blocked(own_config, masters):
    m = start(masters, 1)
    pid = next(iter(m.child_pids()))
    pf_async.a_blocked.enqueue("b1")
    wait_for(lambda: dead_entries(own_config), timeout=15, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["error_class"] == "cogworker.JobTimeout" and "killed" in dead["error_message"]
    assert pid not in m.wait_children()
    assert tags(own_config, "test:started") == ["b1"]


@pytest.mark.parametrize("concurrency", CONCURRENCY)
def test_unique_async_job_holds_its_lock_while_it_runs(own_config, masters, concurrency):
    start(masters, concurrency)
    assert pf_async.a_unique.enqueue("u1", 0.5)
    wait_for(lambda: tags(own_config, "test:started") == ["u1"], what="started")
    assert pf_async.a_unique.enqueue("u1", 0.5) is None  # a duplicate while it runs
    wait_for(lambda: tags(own_config, "test:done") == ["u1"], what="done")
    wait_for(lambda: pf_async.a_unique.enqueue("u1", 0.01), what="the lock freed on success")


def test_no_coroutine_left_unawaited(own_config, masters):
    m = start(masters, 1)
    for i in range(5):
        pf_async.returns_coroutine.enqueue(f"c{i}")
    wait_for(lambda: len(lrange(own_config, "test:done")) == 5, what="all done")
    time.sleep(0.2)
    assert "never awaited" not in m.output()


@pytest.mark.parametrize("concurrency", CONCURRENCY)
def test_sync_soft_timeout_lands_in_any_thread(own_config, masters, concurrency):
    m = start(masters, concurrency)
    pid = next(iter(m.child_pids()))
    pf_async.sync_soft.enqueue("t1")
    pf_async.sync_sleep.enqueue("neighbour", 1.0)  # no timeout of its own: untouched by the other's
    wait_for(lambda: dead_entries(own_config), timeout=10, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["error_class"] == "cogworker.JobTimeout" and dead["args"] == ["t1"]
    assert dead["error_message"] == "job ran past its timeout of 0.5s"
    assert lrange(own_config, "test:caught") == [f"t1:{pid}"]
    wait_for(lambda: tags(own_config, "test:done") == ["neighbour"], what="the neighbour finished")
    assert m.child_pids() == {pid}


@pytest.mark.parametrize("concurrency", CONCURRENCY)
def test_systemexit_in_an_async_job_fails_it_and_the_loop_goes_on(own_config, masters, concurrency):
    m = start(masters, concurrency)
    pid = next(iter(m.child_pids()))
    pf_async.a_exits.enqueue("x1")
    wait_for(lambda: dead_entries(own_config), timeout=10, what="dead")
    [dead] = dead_entries(own_config)
    assert dead["error_class"] == "SystemExit"
    pf_async.a_sleep.enqueue("next", 0.01)
    wait_for(lambda: tags(own_config, "test:done") == ["next"], what="the next async job")
    assert m.child_pids() == {pid}
