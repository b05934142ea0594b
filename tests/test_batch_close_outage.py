"""A batch whose ``with`` block ends during a short Redis outage: the close rides it out
and the callbacks fire once after it (Redis SIGKILLed and restarted from its AOF 2 s later;
Redis SIGSTOPped 7 s with the close script not loaded yet). A close that can't be written
within its budget raises one ``BatchNotClosed`` naming the batch and the two ways to close
it; each way, used later, fires the callbacks once. Real prefork workers run the jobs and
the callbacks; each run is logged to a file (apps.pf_log), which outlives the outages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from apps.pf_log import events
from prefork_harness import Master, wait_for
from redis_server import RedisServer
from test_cli import cli, done

import cogworker
from cogworker import api

N = 20
AOF = ("--appendonly", "yes", "--appendfsync", "always")  # a restart loses nothing acknowledged


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    server = RedisServer(args=AOF).start()
    yield server
    server.cleanup()


@pytest.fixture
def setup(aof_redis, tmp_path):
    """Jobs' app imported, cogworker configured on the AOF Redis, a 2-child master running."""
    from apps import batch_faces as bf

    cogworker.config._config = None
    cogworker.configure(redis_url=aof_redis.url, socket_timeout=2.0)
    log = str(tmp_path / "runs.log")
    master = Master(aof_redis.url, module="apps.batch_faces", procs=2, env={"PF_LOG": log})
    master.wait_children(timeout=60)
    yield bf, log, master
    master.stop()


def _callbacks(log: str) -> list[str]:
    return sorted(tag for event, tag, _, _ in events(log) if event == "cb")


def _jobs_ended(log: str) -> int:
    return sum(1 for event, _, _, _ in events(log) if event == "end")


def _open_batch_with_jobs_done(bf, log: str) -> cogworker.batch:
    """A batch (on_success, on_complete) whose 20 jobs all ran, its block still open."""
    b = cogworker.batch(on_success=bf.callback.s("success"), on_complete=bf.callback.s("complete"))
    b.__enter__()
    for i in range(N):
        bf.work.enqueue(f"w{i}")
    wait_for(lambda: _jobs_ended(log) == N and api.batch(b.bid).pending == 0, 60, what="the jobs ran")
    assert _callbacks(log) == []  # open: nothing fires
    return b


def _after(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    thread.start()
    return thread


def _fired_once(log: str, bid: str) -> float:
    """Waits for both callbacks to run; each ran once (and still once a while later)."""
    wait_for(lambda: len(_callbacks(log)) >= 2, 60, what="the callbacks ran")
    time.sleep(1.0)
    assert _callbacks(log) == ["complete", "success"]
    info = api.batch(bid)
    assert info is not None and info.closed and info.done_at is not None
    assert all(cb["fired_at"] is not None for cb in info.callbacks.values())
    return info.done_at


def test_the_close_rides_out_redis_killed_and_restarted_from_its_aof(setup, aof_redis):
    bf, log, _ = setup
    b = _open_batch_with_jobs_done(bf, log)
    aof_redis.kill()  # the close finds Redis gone: connection refused
    restart = _after(2.0, aof_redis.start)
    started = time.monotonic()
    b.__exit__(None, None, None)
    took = time.monotonic() - started
    restart.join()
    assert took >= 1.5  # it waited for Redis to come back
    _fired_once(log, b.bid)
    print(f"closed after {took:.1f} s of outage; callbacks fired: {_callbacks(log)}")


def test_the_close_rides_out_a_7s_pause_with_its_script_not_loaded(setup, aof_redis):
    bf, log, _ = setup
    b = _open_batch_with_jobs_done(bf, log)
    client = aof_redis.client()
    client.script_flush()  # batch_close.lua not loaded: NOSCRIPT, then a load during the pause
    aof_redis.pause()
    resume = _after(7.0, aof_redis.resume)
    started = time.monotonic()
    b.__exit__(None, None, None)
    took = time.monotonic() - started
    resume.join()
    assert took >= 6.0
    _fired_once(log, b.bid)
    print(f"closed after {took:.1f} s of pause; callbacks fired: {_callbacks(log)}")


def _unclosed(bf, log: str, aof_redis) -> tuple[str, str]:
    """A batch whose close failed past its budget (Redis down): the one error, checked."""
    b = _open_batch_with_jobs_done(bf, log)
    b.close_within = 2.0
    aof_redis.kill()
    with pytest.raises(cogworker.BatchNotClosed) as caught:
        b.__exit__(None, None, None)
    message = str(caught.value)
    assert "\n" not in message and caught.value.bid == b.bid
    assert f"batch {b.bid} was not closed" in message
    assert f"cogworker.api.close_batch('{b.bid}')" in message
    assert f"`cogworker batch {b.bid} --close`" in message
    aof_redis.start()  # back, from its AOF: the batch is still open, its jobs done
    info = api.batch(b.bid)
    assert info is not None and not info.closed and info.pending == 0
    time.sleep(1.0)
    assert _callbacks(log) == []
    return b.bid, message


def test_a_close_past_its_budget_names_the_batch_and_api_close_batch_fires_it_once(setup, aof_redis):
    bf, log, _ = setup
    bid, _ = _unclosed(bf, log, aof_redis)
    assert api.close_batch(bid) is True
    _fired_once(log, bid)
    assert api.close_batch(bid) is True  # closing a closed batch changes nothing
    time.sleep(1.0)
    assert _callbacks(log) == ["complete", "success"]
    assert api.close_batch("b-nosuch") is False


def test_a_close_past_its_budget_then_the_cli_close_fires_it_once(setup, aof_redis):
    bf, log, _ = setup
    bid, _ = _unclosed(bf, log, aof_redis)
    shown = done(cli("batch", bid, "--close", url=aof_redis.url))
    assert "state          done" in shown  # closed, and done at once: every job had settled
    _fired_once(log, bid)
    done(cli("batch", bid, "--close", url=aof_redis.url))  # again: nothing more fires
    time.sleep(1.0)
    assert _callbacks(log) == ["complete", "success"]


def test_the_cli_close_with_redis_down_past_the_budget_is_one_line_naming_the_batch(aof_redis):
    """``cogworker batch BID --close`` rides out the outage for the default 30 s, then says
    so in one line (exit 3: unreachable), naming the batch and how to close it."""
    from test_cli import failed

    aof_redis.kill()
    line = failed(cli("batch", "b-stuck", "--close", url=aof_redis.url), 3)
    assert "batch b-stuck was not closed" in line and "cogworker batch b-stuck --close" in line


def test_an_async_block_closes_through_a_pause_too(aof_redis):
    """``async with``: the same close, off the event loop. A batch no job joined fires at
    its close: both callbacks, once, after a 4 s pause."""
    import asyncio

    from apps import batch_faces as bf

    cogworker.config._config = None
    cogworker.configure(redis_url=aof_redis.url, socket_timeout=1.0)

    async def block() -> str:
        async with cogworker.batch(on_success=bf.callback.s("s"), on_complete=bf.callback.s("c")) as b:
            aof_redis.pause()
            _after(4.0, aof_redis.resume)
        return b.bid

    bid = asyncio.run(block())
    info = api.batch(bid)
    assert info is not None and info.closed and info.done_at is not None
    assert all(cb["fired_at"] is not None for cb in info.callbacks.values())
    assert aof_redis.client().llen(cogworker.config.get_config().keys.queue("default")) == 2  # each pushed once
