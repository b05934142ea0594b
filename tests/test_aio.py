"""aio.py in-process (no Redis): the soft timeout is JobTimeout raised at the job's await,
the hard one cancels it for real; a stop-now interrupting the loop leaves no task behind;
the loop thread serves awaitables from other threads."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from cogworker.engine import eventloop as aio
from cogworker.errors import JobTimeout


def test_soft_timeout_raises_jobtimeout_at_the_await_and_finally_runs():
    seen = []

    async def job():
        try:
            await asyncio.sleep(5)
        except JobTimeout as exc:
            seen.append(str(exc))
            raise
        finally:
            seen.append("finally")

    with pytest.raises(JobTimeout):
        aio.run(job(), 0.05, "app.job")
    assert seen == ["job ran past its timeout of 0.05s", "finally"]


def test_a_job_that_swallows_jobtimeout_is_cancelled_for_real(monkeypatch):
    monkeypatch.setattr(aio, "CANCEL_GRACE", 0.1)
    caught = []

    async def stubborn():
        while True:
            try:
                await asyncio.sleep(5)
            except JobTimeout:
                caught.append(1)

    with pytest.raises(JobTimeout, match="ignored JobTimeout"):
        aio.run(stubborn(), 0.05, "app.stubborn")
    assert caught == [1]  # once: the second cancellation is not converted


def test_results_and_errors_pass_through_and_the_job_may_catch_its_timeout_and_return():
    async def ok(x):
        await asyncio.sleep(0)
        return x * 2

    async def boom():
        raise ValueError("no")

    async def recovers():
        try:
            await asyncio.sleep(5)
        except JobTimeout:
            return "gave up cleanly"

    assert aio.run(ok(21), None, "a") == 42
    assert aio.run(ok(1), 1.0, "a") == 2
    with pytest.raises(ValueError):
        aio.run(boom(), 1.0, "b")
    assert aio.run(recovers(), 0.05, "c") == "gave up cleanly"


def test_an_interrupted_loop_leaves_no_task_pending():
    class Stop(BaseException):
        pass

    cleaned = []

    async def job():
        try:
            await asyncio.sleep(5)
        finally:
            cleaned.append(1)

    def stop_now(signum, frame):  # as the runner's second TERM raises HardStop
        raise Stop()

    previous = signal.signal(signal.SIGALRM, stop_now)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(Stop):
            aio.run(job(), None, "x")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert cleaned == [1] and not asyncio.all_tasks(aio.process_loop())


def test_the_loop_thread_runs_awaitables_from_other_threads_concurrently():
    loop_thread = aio.LoopThread()
    loop_thread.start()
    try:
        results = []

        async def job(i):
            await asyncio.sleep(0.2)
            return i

        threads = [threading.Thread(target=lambda i=i: results.append(aio.run(job(i), 1.0, "t"))) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(1.5)  # 20 x 0.2 s one after the other would take 4 s
        assert sorted(results) == list(range(20))
    finally:
        loop_thread.stop()
