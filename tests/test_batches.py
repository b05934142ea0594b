"""Batches with callbacks against a real Redis: a single-process worker in a thread runs
the jobs (apps/batchjobs.py logs every start and end to a file), and each rule of
docs/architecture.md#batches is checked from the log and from ``api.batch``."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from apps import batchjobs as bj
from apps.pf_faults import events
from core_util import RunningWorker, wait_for

import cogworker
from cogworker import api
from cogworker.client import batches as client_batches
from cogworker.core.batchscope import BatchScope
from cogworker.errors import ConfigurationError


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = str(tmp_path / "runs.log")
    monkeypatch.setenv("PF_LOG", path)
    return path


def fired(path: str) -> list[str]:
    """The callbacks that ran, as logged: ``name@bid@extra-args``."""
    return [tag for event, tag, _, _ in events(path) if event == "cb-start"]


def names(path: str) -> list[str]:
    return sorted(tag.split("@")[0] for tag in fired(path))


def callbacks(**extra):
    return dict(
        on_success=bj.callback.s("success"),
        on_complete=bj.callback.s("complete"),
        on_death=bj.callback.s("death"),
        **extra,
    )


def last_end_before_callbacks(path: str) -> None:
    """Every job's last end is before every callback's start."""
    log = events(path)
    ends = [at for event, _, _, at in log if event == "end"]
    starts = [at for event, _, _, at in log if event == "cb-start"]
    assert ends and starts and max(ends) < min(starts), (max(ends), min(starts))


def test_on_success_and_on_complete_fire_once_when_every_job_succeeded(config, log):
    with cogworker.batch(**callbacks(description="import 2026-12")) as b:
        jids = [bj.work.enqueue(f"j{i}") for i in range(20)]
    assert b.bid.startswith("b-")
    info = api.batch(b.bid)
    assert (info.total, info.pending, info.closed, info.done_at) == (20, 20, True, None)
    assert info.description == "import 2026-12" and set(info.callbacks) == {"on_success", "on_complete", "on_death"}
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
        time.sleep(0.5)  # nothing more fires
    assert names(log) == ["complete", "success"]
    assert all(tag.split("@")[1] == b.bid for tag in fired(log))  # the callback names its batch
    last_end_before_callbacks(log)
    info = api.batch(b.bid)
    assert (info.total, info.pending, info.succeeded, info.failed, info.dead) == (20, 0, 20, 0, 0)
    assert info.done_at is not None and info.callbacks["on_death"]["fired_at"] is None
    assert info.callbacks["on_success"]["fired_at"] == info.done_at
    assert info.callbacks["on_complete"]["job"] == "apps.batchjobs.callback"
    assert sorted(jid for jid, _ in api.batch_jobs(b.bid)) == sorted(jids)
    assert {state for _, state in api.batch_jobs(b.bid)} == {"succeeded"}
    assert int(config.redis().get(config.keys.stats_batch_callbacks)) == 2
    assert int(config.redis().get(config.keys.stats_batches)) == 1


def test_a_dead_job_fires_on_death_once_and_on_complete_but_never_on_success(config, log):
    with cogworker.batch(**callbacks()) as b:
        for i in range(5):
            bj.work.enqueue(f"j{i}")
        bj.doomed.enqueue("d1")
        bj.doomed.enqueue("d2")
    with RunningWorker():
        wait_for(lambda: api.batch(b.bid).done_at is not None, 20)
        wait_for(lambda: len(fired(log)) == 2, 20)
        time.sleep(0.5)
    assert names(log) == ["complete", "death"]  # on_death once, for two dead jobs
    info = api.batch(b.bid)
    assert (info.succeeded, info.dead, info.cancelled, info.failed, info.pending) == (5, 2, 0, 2, 0)
    assert info.callbacks["on_success"]["fired_at"] is None
    assert sorted(state for _, state in api.batch_jobs(b.bid)).count("dead") == 2


def test_retries_do_not_count_as_done(config, log):
    r = config.redis()
    r.sadd("test:flaky", "f1")
    with cogworker.batch(**callbacks()) as b:
        jid = bj.work.enqueue("f1")
        bj.work.enqueue("j2")
    with RunningWorker():
        wait_for(lambda: r.zcard(config.keys.retry) == 1, 20)
        time.sleep(0.5)
        info = api.batch(b.bid)
        assert (info.pending, info.succeeded, info.failed) == (1, 1, 0)  # retrying: still pending
        assert fired(log) == []
        assert api.RetrySet().retry(jid)  # due now: it runs again and succeeds
        wait_for(lambda: len(fired(log)) == 2, 20)
    assert names(log) == ["complete", "success"]
    assert api.batch(b.bid).succeeded == 2


def test_an_open_batch_never_fires_and_its_close_fires_what_already_settled(config, log):
    with RunningWorker():
        with cogworker.batch(**callbacks()) as b:
            for i in range(3):
                bj.work.enqueue(f"j{i}")
            wait_for(lambda: api.batch(b.bid).succeeded == 3, 20)
            time.sleep(0.5)
            info = api.batch(b.bid)
            assert (info.pending, info.closed, info.done_at) == (0, False, None)
            assert fired(log) == []  # every job done, but the block is open
        info = api.batch(b.bid)
        assert info.closed and info.done_at is not None
        wait_for(lambda: len(fired(log)) == 2, 20)
    assert names(log) == ["complete", "success"]


def test_a_batch_without_jobs_is_complete_and_successful_at_its_close(config, log):
    with cogworker.batch(**callbacks()) as b:
        pass
    info = api.batch(b.bid)
    assert (info.total, info.closed) == (0, True) and info.done_at is not None
    assert info.callbacks["on_complete"]["fired_at"] is not None
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
    assert names(log) == ["complete", "success"]


def test_a_job_adds_jobs_to_its_own_batch_and_the_callbacks_wait_for_them(config, log):
    with cogworker.batch(**callbacks()) as b:
        bj.spawner.enqueue("s", 4)
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
    info = api.batch(b.bid)
    assert (info.total, info.succeeded) == (5, 5)
    assert {tag for event, tag, _, _ in events(log) if event == "end"} == {"s", "s.0", "s.1", "s.2", "s.3"}
    last_end_before_callbacks(log)


def test_a_cancelled_job_counts_as_failed(config, log):
    with cogworker.batch(**callbacks()) as b:
        queued = bj.work.enqueue("j1")
        scheduled = bj.work.enqueue_in(3600, "j2")
        bj.work.enqueue("j3")
    assert api.cancel(queued) and api.cancel(scheduled)
    assert api.cancel(queued) is False  # once
    info = api.batch(b.bid)
    assert (info.cancelled, info.failed, info.pending) == (2, 2, 1)
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 1, 20)
        time.sleep(0.5)
    assert names(log) == ["complete"]
    assert dict(api.batch_jobs(b.bid))[queued] == "cancelled"


def test_a_running_job_cancelled_counts_once_as_cancelled(config, log):
    with cogworker.batch(**callbacks()) as b:
        jid = bj.work.enqueue("long", 1.5)
    with RunningWorker():
        wait_for(lambda: any(e[1] == "long" for e in events(log)), 20)
        assert api.cancel(jid)
        wait_for(lambda: len(fired(log)) == 1, 20)
        wait_for(lambda: any(e[0] == "end" and e[1] == "long" for e in events(log)), 20)
        time.sleep(0.5)
    assert names(log) == ["complete"]
    info = api.batch(b.bid)
    assert (info.cancelled, info.succeeded, info.pending, info.total) == (1, 0, 0, 1)


def test_the_async_client_and_bulk_enqueue_join_too(config, log):
    async def main() -> None:
        async with cogworker.batch(**callbacks()) as b:
            await bj.work.enqueue_async("a1")
            await bj.work.enqueue_many_async([(("a2",), {}), (("a3",), {})])
        holder.append(b.bid)

    holder: list[str] = []
    asyncio.run(main())
    with cogworker.batch(**callbacks()) as b2:
        bj.work.enqueue_many([(("s1",), {}), (("s2",), {})])
    assert api.batch(holder[0]).total == 3 and api.batch(b2.bid).total == 2
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 4, 20)
    assert names(log) == ["complete", "complete", "success", "success"]


def test_a_bulk_enqueue_in_a_batch_keeps_its_order_and_its_queues(config, log):
    r = config.redis()
    with cogworker.batch() as b:
        jids = bj.work.enqueue_many([((f"j{i}",), {}) for i in range(5)])
        other = bj.work.options(queue="other").enqueue_many([(("o1",), {})])
    fetch_order = [json.loads(raw)["jid"] for raw in reversed(r.lrange(config.keys.queue("default"), 0, -1))]
    assert fetch_order == jids  # first in, first out, as outside a batch
    assert [json.loads(raw)["jid"] for raw in r.lrange(config.keys.queue("other"), 0, -1)] == other
    assert r.sismember(config.keys.queues, "other")
    assert api.batch(b.bid).total == 6 and sorted(dict(api.batch_jobs(b.bid))) == sorted(jids + other)


def test_a_unique_job_joins_once_and_a_unique_callback_takes_its_lock(config, log):
    r = config.redis()
    with cogworker.batch() as b:
        assert bj.unique_callback.enqueue("x") is not None
        assert bj.unique_callback.enqueue("x") is None  # a duplicate: not written, not counted
    assert api.batch(b.bid).total == 1
    with cogworker.batch(on_complete=bj.unique_callback.s("u")) as b2:
        pass  # empty: fires at once, taking the callback's lock
    # A third batch whose unique callback finds that lock held (the first not run yet).
    with cogworker.batch(on_complete=bj.unique_callback.s("u")) as b3:
        pass
    assert api.batch(b2.bid).callbacks["on_complete"].get("dropped") is None
    assert api.batch(b3.bid).callbacks["on_complete"].get("dropped") == "unique lock held"
    assert r.llen(config.keys.queue("default")) == 2  # the member "x" and one callback
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
        time.sleep(0.3)
    assert sorted(fired(log)) == ["u@unique", "x@unique"]


def test_bad_input_and_joining_a_done_or_unknown_batch_are_clear_errors(config, log):
    with pytest.raises(TypeError, match="on_success is a signature"):
        cogworker.batch(on_success=bj.callback)
    with pytest.raises(ValueError, match="keep is at least 1 second"):
        cogworker.batch(keep=0)
    with cogworker.batch() as b:
        pass
    with pytest.raises(ConfigurationError, match=f"batch {b.bid} is done"), b:
        bj.work.enqueue("late")
    with pytest.raises(ConfigurationError, match="unknown or expired"), BatchScope("b-never-opened"):
        bj.work.enqueue("nowhere")
    assert config.redis().llen(config.keys.queue("default")) == 0
    assert api.batch("b-nope") is None and api.batch_jobs("b-nope") == []
    with pytest.raises(TypeError, match="a batch id is a non-empty string"):
        api.batch(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit is at least 0"):
        api.batch_jobs("b-nope", limit=-1)


# -- bounds ---------------------------------------------------------------------------------


def test_the_record_and_its_jobs_live_workflow_ttl_then_keep_once_done(config, log):
    r = config.redis()
    with cogworker.batch(keep=120) as b:
        bj.work.enqueue("j1")
    assert config.workflow_ttl - 5 < r.ttl(config.keys.batch(b.bid)) <= config.workflow_ttl
    assert config.workflow_ttl - 5 < r.ttl(config.keys.batch_jobs(b.bid)) <= config.workflow_ttl
    with RunningWorker():
        wait_for(lambda: api.batch(b.bid).done_at is not None, 20)
    assert 100 < r.ttl(config.keys.batch(b.bid)) <= 120 and 100 < r.ttl(config.keys.batch_jobs(b.bid)) <= 120
    info = api.batch(b.bid)
    assert info.expires_at == pytest.approx(info.done_at + 120)


def test_the_index_is_trimmed_by_age_and_count_with_injected_time(config, log, monkeypatch):
    r = config.redis()
    day = 24 * 3600.0
    now = time.time()
    old = []
    for i in range(3):  # opened 8 days ago (injected): past workflow_ttl
        b = cogworker.batch()
        b.open(now=now - 8 * day + i)
        b.close(now=now - 8 * day + i)
        old.append(b.bid)
    monkeypatch.setattr(client_batches, "MAX_BATCHES", 4)
    recent = []
    for i in range(6):
        b = cogworker.batch()
        b.open(now=now - 60 + i)
        if i != 0:
            b.close(now=now - 60 + i)
        recent.append(b.bid)
    index = [m.decode() for m in r.zrevrange(config.keys.batches, 0, -1)]
    assert index == recent[:1:-1]  # the newest 4, newest first; the 8-day-old ones gone by age
    assert api.batch_count() == 4 and [i.bid for i in api.batches()] == recent[:1:-1]
    assert [i.bid for i in api.batches(limit=2, offset=1)] == recent[4:2:-1]
    for bid in old + recent[:2]:  # trimmed: their records went with them, done or still open
        assert not r.exists(config.keys.batch(bid)) and not r.exists(config.keys.batch_jobs(bid))
    with pytest.raises(ValueError, match="at least 0"):
        api.batches(limit=-1)


def test_group_members_join_and_a_chain_joins_by_its_first_step(config, log):
    with cogworker.batch(**callbacks()) as b:
        gid = cogworker.group(bj.work.s(f"g{i}") for i in range(3)).enqueue()
        cogworker.chain(bj.work.s("c1"), bj.work.si("c2")).enqueue()
    assert api.batch(b.bid).total == 4
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
        wait_for(lambda: any(e[0] == "end" and e[1] == "c2" for e in events(log)), 20)
    assert names(log) == ["complete", "success"]
    assert cogworker.result(gid, timeout=5) == ["g0", "g1", "g2"]  # the group's own rules stand
    assert api.batch(b.bid).succeeded == 4


def test_inline_mode_runs_the_jobs_and_writes_no_batch(config, log):
    import cogworker.testing

    with cogworker.testing.inline(), cogworker.batch(**callbacks()) as b:
        bj.work.enqueue("i1")
    assert [tag for event, tag, _, _ in events(log) if event == "end"] == ["i1"]
    assert api.batch(b.bid) is None and config.redis().dbsize() == 0


def test_a_repeat_orphan_and_a_handed_over_failure_count_as_dead(config, log):
    """The two ways into dead that don't go through the job's own list: a repeat orphan
    buried by recovery, and an unsettled failure record filed (file_head.lua)."""
    from cogworker.fleet import recovery

    r, keys = config.redis(), config.keys
    with cogworker.batch(**callbacks()) as b:
        orphan = bj.work.enqueue("o1")
        handed = bj.work.enqueue("h1")
    first, second = (r.rpop(keys.queue("default")) for _ in range(2))
    r.rpush(keys.repeat_orphans, first)  # as requeue.lua parks one past max_orphanings
    failed = json.loads(second) | {"error_class": "RuntimeError", "error_message": "x", "retry_count": 26}
    r.rpush(keys.unsettled, json.dumps({"set": keys.dead, "score": time.time(), "payload": json.dumps(failed)}))
    assert recovery.bury_repeat_orphans(config) == 1
    assert api.batch(b.bid).dead == 1 and api.batch(b.bid).done_at is None
    assert recovery.file_unsettled(config) == 1
    info = api.batch(b.bid)
    assert (info.dead, info.pending) == (2, 0) and info.done_at is not None
    assert dict(api.batch_jobs(b.bid)) == {orphan: "dead", handed: "dead"}
    with RunningWorker():
        wait_for(lambda: len(fired(log)) == 2, 20)
    assert names(log) == ["complete", "death"]


def test_a_repeat_orphan_filed_raw_still_counts_as_dead(config, log):
    """requeue.lua files a repeat orphan raw in dead when the parking list is unusable;
    completing that entry tells its batch (settle_dead.lua)."""
    from cogworker.core.inprogress import InProgressList
    from cogworker.engine.fetch.fetcher import Fetcher
    from cogworker.fleet import recovery

    r, keys = config.redis(), config.keys
    with cogworker.batch(**callbacks()) as b:
        jid = bj.work.enqueue("o1")
    f = Fetcher(config, "gone:1", [("default", None)], block_timeout=0)
    assert f.fetch() is not None
    r.set(keys.orphanings(jid), config.max_orphanings)  # this orphaning is one too many
    r.set(keys.repeat_orphans, "not a list")
    done = InProgressList(config, "gone:1", beats=False).requeue_all(count_orphanings=True, mode="reclaim")
    assert len(done.buried) == 1
    recovery.complete_raw_burials(config, done.buried)
    info = api.batch(b.bid)
    assert (info.dead, info.pending, info.total) == (1, 0, 1) and info.done_at is not None
    assert json.loads(r.zrange(keys.dead, 0, -1)[0])["error_class"] == "cogworker.ProcessDied"
