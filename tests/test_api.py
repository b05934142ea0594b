"""cogworker.api: pages, moves checked against where the entry was read, bad input."""

from __future__ import annotations

import json
import time

import pytest
import redis
from api_util import entry, failed, fill

import cogworker
from cogworker import api
from cogworker.errors import BadPayload, ConfigurationError, NotFound, WrongType


def test_queue_pages_next_to_run_first_and_edges(config):
    from apps import core_jobs

    core_jobs.record.enqueue_many([(i,) for i in range(7)])
    q = api.Queue("default")
    assert q.size() == 7
    assert [j.args for j in q.jobs(0, 3)] == [[0], [1], [2]]  # the next to run first
    assert [j.args for j in q.jobs(6, 3)] == [[6]]  # the last, partial page
    assert q.jobs(7, 3) == [] and q.jobs(100, 5) == []  # past the end
    assert q.jobs(0, 0) == []
    assert q.latency() >= 0.0 and api.Queue("empty").latency() == 0.0
    assert [x.name for x in api.queues()] == ["default"]
    jid = q.jobs(3, 1)[0].jid
    assert q.find(jid).args == [3]
    assert q.delete(jid) is True and q.delete(jid) is False and q.find(jid) is None
    assert q.clear() == 6 and q.size() == 0


def test_set_pages_soonest_or_newest_first(config):
    r = config.redis()
    now = time.time()
    fill(r, config.keys.dead, [failed("apps.core_jobs.record", [i]) for i in range(5)], now - 100)
    fill(r, config.keys.schedule, [entry("apps.core_jobs.record", [i]) for i in range(5)], now + 100)
    dead, sched = api.DeadSet(), api.ScheduledSet()
    assert [j.args for j in dead.jobs(0, 2)] == [[4], [3]]  # newest first
    assert [j.args for j in sched.jobs(0, 2)] == [[0], [1]]  # soonest first
    assert [j.args for j in dead.jobs(4, 2)] == [[0]] and dead.jobs(5, 2) == [] and dead.jobs(0, 0) == []
    assert sched.jobs(3, 25)[0].at == pytest.approx(now + 103)
    assert dead.size() == 5 and api.RetrySet().size() == 0


def test_moves_are_checked_and_gone_entries_return_false(config):
    r = config.redis()
    now = time.time()
    fill(r, config.keys.retry, [failed("apps.core_jobs.record", [i], jid=f"j{i}") for i in range(4)], now + 60)
    rs = api.RetrySet()
    rec = rs.find("j1")
    assert rec.jid == "j1" and rec.retry_count == 1 and rec.error_class == "ValueError"
    assert rs.retry("j1") is True and rs.retry(rec) is False  # gone: False, nothing raised
    assert json.loads(r.lindex(config.keys.queue("default"), 0))["retry_count"] == 1  # kept
    assert rs.kill("j2") is True and api.DeadSet().find("j2") is not None and rs.kill("j2") is False
    assert rs.delete("j3") is True and rs.delete("j3") is False
    assert [j.jid for j in rs.jobs()] == ["j0"]
    assert api.DeadSet().retry("j2") is True and api.DeadSet().size() == 0
    assert api.Queue("default").size() == 2
    assert not hasattr(api.DeadSet(), "kill")


def test_filter_and_chunked_retry_all_and_clear(config, monkeypatch):
    from cogworker.api import sets

    monkeypatch.setattr(sets, "CHUNK", 7)
    r = config.redis()
    entries = [
        failed(
            "app.a" if i % 2 else "app.b",
            [i],
            queue="q1" if i % 3 else "q2",
            error_class="KeyError" if i % 5 == 0 else "ValueError",
        )
        for i in range(40)
    ]
    fill(r, config.keys.dead, entries + ["not json at all"], time.time() - 1000)
    dead = api.DeadSet()
    assert len(dead.filter(job_class="app.a", limit=100)) == 20
    assert len(dead.filter(job_class="app.a", limit=3)) == 3
    got = dead.filter(error_class="KeyError", queue="q2")
    assert {j.args[0] for j in got} == {i for i in range(40) if i % 5 == 0 and i % 3 == 0}
    assert [j.at for j in got] == sorted((j.at for j in got), reverse=True)
    assert dead.retry_all() == 40  # the unreadable entry stays, for an operator to delete
    assert api.Queue("q1").size() + api.Queue("q2").size() == 40 and dead.size() == 1
    fill(r, config.keys.schedule, entries, time.time() + 1000)
    assert api.ScheduledSet().clear() == 40 and api.ScheduledSet().size() == 0


def test_pause_is_read_by_every_fetch(config):
    from apps import core_jobs

    from cogworker.engine.fetch.fetcher import Fetcher

    core_jobs.record.options(queue="a").enqueue(1)
    core_jobs.record.options(queue="b").enqueue(2)
    a = api.Queue("a")
    a.pause()
    assert a.paused() and "a" in [q.name for q in api.queues()]
    f = Fetcher(config, "host:1:aa", [("a", None), ("b", None)], block_timeout=0)
    assert f.fetch().queue == "b"  # the other queue still runs
    assert f.fetch() is None and a.size() == 1  # nothing taken from the paused one
    a.resume()
    assert not a.paused() and f.fetch().queue == "a"


def test_stats_history_and_processes(config):
    from apps import core_jobs

    from cogworker.lifecycle import stats as stats_module

    core_jobs.record.enqueue_many([(i,) for i in range(3)])
    buf = stats_module.StatsBuffer()
    for ok in (True, True, False):
        buf.record("x", ok, 1.0)
    stats_module.flush(config, buf.take())
    s = api.stats()
    assert (s.processed, s.failed, s.enqueued, s.dead_size, s.processes) == (2, 1, 3, 0, 0)
    today = api.history_stats(days=2)
    assert (today[0].processed, today[0].failed, today[1].processed) == (2, 1, 0)
    assert config.redis().ttl(config.keys.stats_day("processed", today[0].date)) > 30 * 86400
    assert api.processes() == [] and api.unsettled() == []


# -- bad input: one clear line, nothing changed ------------------------------------------


def test_unknown_jid_and_queue(config):
    assert api.DeadSet().find("nope") is None and api.DeadSet().retry("nope") is False
    with pytest.raises(NotFound, match="no job 'nope'"):
        api.locate("nope")
    with pytest.raises(NotFound, match="no queue named 'ghost'"):
        api.queue("ghost")
    with pytest.raises(ConfigurationError):
        api.Queue("has space")


def test_key_of_the_wrong_type(config):
    r = config.redis()
    r.set(config.keys.dead, "oops")
    r.set(config.keys.queue("default"), "oops")
    for call in (
        api.DeadSet().size,
        api.DeadSet().jobs,
        lambda: api.DeadSet().find("x"),
        api.DeadSet().retry_all,
        api.DeadSet().clear,
        api.Queue("default").jobs,
        lambda: api.Queue("default").find("x"),
        api.Queue("default").clear,
    ):
        with pytest.raises(WrongType, match=r"^key cogworker:(dead|queue:default) holds a string") as info:
            call()
        assert "\n" not in str(info.value)
    assert r.get(config.keys.dead) == b"oops" and r.get(config.keys.queue("default")) == b"oops"


def test_corrupted_entry_shown_raw_and_deletable(config):
    r = config.redis()
    r.zadd(config.keys.dead, {b'\xff{"jid":"bad1", broken': 1.0})
    rec = api.DeadSet().jobs()[0]
    assert not rec.readable and rec.jid == "bad1" and "broken" in rec.raw_payload
    assert api.DeadSet().find("bad1") == rec
    with pytest.raises(BadPayload, match="can only be deleted"):
        api.DeadSet().retry("bad1")
    assert api.DeadSet().size() == 1
    assert api.DeadSet().delete(rec) is True and api.DeadSet().size() == 0


def test_limit_minus_one(config):
    for call in (
        lambda: api.DeadSet().jobs(0, -1),
        lambda: api.Queue("default").jobs(limit=-1),
        lambda: api.RetrySet().filter(job_class="x", limit=-1),
        lambda: api.unsettled(limit=-1),
        lambda: api.DeadSet().jobs(-1, 5),
        lambda: api.history_stats(days=0),
    ):
        with pytest.raises(ValueError, match=">= "):
            call()


def test_namespace_with_spaces(config):
    with pytest.raises(ConfigurationError, match="namespace"):
        cogworker.configure(namespace="my app")


def test_redis_unreachable_is_one_line_without_the_password():
    from redis_server import free_port

    cogworker.config._config = None
    cogworker.configure(redis_url=f"redis://:s3cret@127.0.0.1:{free_port()}/0", socket_timeout=0.5)
    try:
        for call in (api.stats, api.DeadSet().size, api.queues):
            with pytest.raises(redis.ConnectionError) as info:
                call()
            assert "\n" not in str(info.value) and "s3cret" not in str(info.value)
    finally:
        cogworker.config._config = None


def test_readme_operating_example_runs(config):
    """The "Operating from Python" guide's block, run against this test's Redis."""
    import re
    from pathlib import Path

    from apps import core_jobs

    section = (Path(__file__).parent.parent / "docs" / "guides" / "operator-api.md").read_text()
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = config.redis()
    core_jobs.record.enqueue(1)
    r.zadd(config.keys.dead, {failed("apps.core_jobs.record", [2], jid="d1"): time.time()})
    exec(compile(block, "docs/guides/operator-api.md", "exec"), {})
    assert api.DeadSet().size() == 0 and api.Queue("default").size() == 2 and not api.Queue("default").paused()
