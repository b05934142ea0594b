"""cogworker.testing: the inline and fake modes, and the pytest plugin's fixtures.

The inline and fake modes never touch Redis: cogworker is configured on a port nothing
listens on, so any write would fail the test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import pytest
from apps import testing_app as app
from redis_server import free_port

import cogworker
from cogworker import testing
from cogworker.client import enqueue as client
from cogworker.core.middleware import client_middleware, server_middleware


@pytest.fixture(autouse=True)
def no_redis() -> Iterator[None]:
    app.runs.clear()
    app.failures_left.clear()
    cogworker.config._config = None
    cogworker.configure(redis_url=f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.5, socket_connect_timeout=0.5)
    yield
    assert client.sink is None  # every mode put the real write back


# -- inline -------------------------------------------------------------------------------------


def test_inline_runs_the_job_at_once_through_the_server_middleware() -> None:
    seen: list[tuple[str, str]] = []

    @server_middleware.add
    def watch(job: Any, payload: dict[str, Any], queue: str, call_next: Any) -> None:
        seen.append((payload["class"], queue))
        call_next()

    with testing.inline() as inline:
        jid = app.add.enqueue(1, 2)
        app.record.options(queue="low").enqueue_in(3600, (1, 2), tag="t")  # scheduled: runs now too
    assert isinstance(jid, str) and len(jid) == 24
    # The arguments as a worker gets them: through JSON (the tuple is a list).
    assert app.runs == [("add", (1, 2)), ("record", ([1, 2], "t"))]
    assert seen == [(app.add.name, "default"), (app.record.name, "low")]
    assert [p["jid"] for p in inline.ran][0] == jid


def test_inline_raises_the_jobs_error_and_runs_it_once() -> None:
    with testing.inline(), pytest.raises(RuntimeError, match="boom x"):
        app.boom.enqueue("x")
    app.failures_left["k"] = 5
    with testing.inline(), pytest.raises(ValueError, match="flaky k"):
        app.flaky.enqueue("k")  # retry=3, but retries are off
    assert app.runs == [("boom", "x"), ("flaky", "k")]


def test_inline_retries_when_asked() -> None:
    app.failures_left["a"] = 2
    with testing.inline(retries=True) as inline:
        app.flaky.enqueue("a")
    assert app.runs == [("flaky", "a")] * 3
    assert [p["retry_count"] for p in inline.ran] == [1, 2, 2]  # the last try ran as the 2nd retry
    app.failures_left["b"] = 10
    with testing.inline(retries=True), pytest.raises(ValueError):
        app.flaky.enqueue("b")  # 1 + 3 retries, then the error
    assert app.runs.count(("flaky", "b")) == 4


def test_inline_checks_arguments_and_runs_client_middleware() -> None:
    @client_middleware.add
    def drop_low(payload: dict[str, Any], call_next: Any) -> str | None:
        return None if payload["queue"] == "low" else call_next()

    with testing.inline():
        with pytest.raises(TypeError, match="can't take these arguments"):
            app.add.enqueue(1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            app.record.enqueue([object()])  # type: ignore[list-item]
        with pytest.raises(cogworker.EnqueueDropped, match="a client middleware dropped the push"):
            app.add.options(queue="low").enqueue(1, 2)  # not a unique job: never None
        with pytest.raises(cogworker.UnknownJob):
            cogworker.enqueue("nowhere.job", 1)
        assert app.add.enqueue_many([(1, 1), (2, 2)]) is not None
    assert app.runs == [("add", (1, 1)), ("add", (2, 2))]


def test_inline_runs_async_jobs_and_async_enqueues() -> None:
    async def main() -> list[str | None]:
        return [
            await app.add.enqueue_async(1, 2),
            await app.nap.enqueue_async("a"),
            *await app.add.enqueue_many_async([(3, 4)]),
        ]

    with testing.inline():
        app.nap.enqueue("sync")
        jids = asyncio.run(main())
    assert all(jids)
    assert app.runs == [("nap", "sync"), ("add", (1, 2)), ("nap", "a"), ("add", (3, 4))]


def test_modes_do_not_nest() -> None:
    with testing.fake(), pytest.raises(RuntimeError, match="already on"):
        with testing.inline():
            pass


# -- fake ---------------------------------------------------------------------------------------


def test_fake_keeps_jobs_and_runs_nothing_until_drained() -> None:
    with testing.fake() as fake:
        jid = app.add.enqueue(1, 2)
        app.record.options(queue="low").enqueue([3], tag="x")
        assert app.runs == []
        assert [p["jid"] for p in fake.jobs("default")] == [jid]
        assert [(p["class"], p["args"], p["kwargs"]) for p in fake.jobs("low")] == [
            (app.record.name, [[3]], {"tag": "x"})
        ]
        assert len(fake.jobs()) == 2
        assert fake.drain() == 2
        assert fake.jobs() == [] and len(fake.done) == 2
    assert app.runs == [("add", (1, 2)), ("record", ([3], "x"))]


def test_fake_drain_runs_scheduled_jobs_by_the_time_given() -> None:
    now = time.time()
    with testing.fake() as fake:
        app.add.enqueue_in(3600, 1, 1)
        app.add.enqueue_at(now + 60, 2, 2)
        app.add.enqueue(3, 3)
        assert [p.get("at") is not None for p in fake.jobs()] == [True, True, False]
        assert fake.drain(until=now) == 1  # only what is due now
        assert fake.drain(until=now + 120) == 1
        assert app.runs == [("add", (3, 3)), ("add", (2, 2))]
        assert fake.drain() == 1  # None: every scheduled one, whenever due
    assert app.runs[-1] == ("add", (1, 1))


def test_fake_drain_runs_what_jobs_enqueue_and_raises_errors() -> None:
    with testing.fake() as fake:
        app.fan_out.enqueue(3)
        assert fake.drain() == 4
        app.boom.enqueue("y")
        app.add.enqueue(9, 9)
        with pytest.raises(RuntimeError, match="boom y"):
            fake.drain()
        assert [p["args"] for p in fake.jobs()] == [[9, 9]]  # the failed job is dropped, the rest wait
        fake.clear()
        assert fake.jobs() == []


def test_fake_with_retries_reschedules_on_its_clock_then_files_dead() -> None:
    clock = [1_000_000.0]
    app.failures_left.update(ok=2, never=99)
    with testing.fake(clock=lambda: clock[0], retries=True) as fake:
        app.flaky.enqueue("ok")
        app.flaky.enqueue("never")
        assert fake.drain(until=clock[0]) == 2  # both failed once: rescheduled 10 s later
        assert sorted(p["at"] for p in fake.jobs()) == [clock[0] + 10] * 2
        assert fake.drain(until=clock[0] + 9) == 0
        fake.drain()  # every retry, at its time
    assert [p["args"] for p in fake.done] == [["ok"]] and fake.done[0]["retry_count"] == 2
    assert [(p["args"], p["retry_count"]) for p in fake.dead] == [(["never"], 4)]


def test_fake_works_with_async_enqueue() -> None:
    with testing.fake() as fake:
        jid = asyncio.run(app.nap.enqueue_async("later"))
        assert [p["jid"] for p in fake.jobs()] == [jid] and app.runs == []
        fake.drain()
    assert app.runs == [("nap", "later")]


# -- the pytest plugin --------------------------------------------------------------------------


def test_the_plugin_is_an_entry_point() -> None:
    found = [e for e in metadata.entry_points(group="pytest11") if e.name == "cogworker"]
    assert [e.value for e in found] == ["cogworker.pytest_plugin"]


def test_inline_fixture(cogworker_inline: testing.Inline) -> None:
    app.add.enqueue(5, 6)
    assert app.runs == [("add", (5, 6))] and len(cogworker_inline.ran) == 1


def test_fake_fixture(cogworker_fake: testing.Fake) -> None:
    app.add.enqueue(5, 6)
    assert len(cogworker_fake.jobs()) == 1 and app.runs == []
