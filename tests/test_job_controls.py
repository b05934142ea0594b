"""Job controls: which exceptions are retried (``retry_on``/``no_retry_on``), a retry asked
for from inside a job (``cogworker.Retry``), an expiry for waiting jobs (``expires``), and
an enqueue while Redis is down (``cogworker.RedisUnavailable``)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from core_util import RunningWorker, queued, run_worker_until, wait_for

import cogworker
from cogworker import api
from cogworker.core.payload import build_payload
from cogworker.fleet.poller import Poller


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_enqueue_while_redis_is_down_raises_one_line_without_the_password():
    port = _closed_port()
    cogworker.config._config = None
    cogworker.configure(redis_url=f"redis://:s3cret@127.0.0.1:{port}/0", socket_connect_timeout=1.0)

    @cogworker.job
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(cogworker.RedisUnavailable) as caught:
        add.enqueue(1, 2)
    message = str(caught.value)
    assert "\n" not in message and "s3cret" not in message
    assert message.startswith(f"can't enqueue {add.name}: Redis at redis://:***@127.0.0.1:{port}/0 is unreachable")
    # Existing handlers keep catching it: the built-in and redis-py's ConnectionError.
    assert isinstance(caught.value, ConnectionError)
    assert isinstance(caught.value, redis.exceptions.ConnectionError)

    async def main() -> None:
        await add.enqueue_async(1, 2)

    with pytest.raises(cogworker.RedisUnavailable, match=r"^can't enqueue .*unreachable") as caught_async:
        asyncio.run(main())
    assert "s3cret" not in str(caught_async.value)
    cogworker.config._config = None


# -- retry_on / no_retry_on ---------------------------------------------------------------


def _dead(config):
    return [json.loads(raw) for raw in config.redis().zrange(config.keys.dead, 0, -1)]


def _retrying(config):
    return [(json.loads(raw), score) for raw, score in config.redis().zrange(config.keys.retry, 0, -1, withscores=True)]


def test_retry_on_and_no_retry_on_are_checked_at_decoration():
    with pytest.raises(cogworker.ConfigurationError, match=r"^retry_on must be an exception class") as caught:

        @cogworker.job(retry_on=("ValueError",))
        def bad() -> None: ...

    assert "\n" not in str(caught.value)
    with pytest.raises(cogworker.ConfigurationError, match=r"^no_retry_on must be an exception class"):

        @cogworker.job(no_retry_on=42)
        def worse() -> None: ...

    @cogworker.job
    def fine() -> None: ...

    with pytest.raises(cogworker.ConfigurationError, match=r"^retry_on must"):
        fine.options(retry_on=[ValueError, "KeyError"])
    assert fine.options(retry_on=ValueError).opts.retry_on == (ValueError,)


def _picky_outcomes(config):
    dead = {entry["args"][0]: entry for entry in _dead(config)}
    retrying = {entry["args"][0]: entry for entry, _ in _retrying(config)}
    return dead, retrying


def test_only_retry_on_errors_are_retried_single_process(config):
    from apps import controls

    for kind in ("transient", "fatal", "value"):
        controls.picky.enqueue(kind)
    controls.no_key_errors.enqueue("value")
    assert run_worker_until(lambda: len(_dead(config)) + len(_retrying(config)) == 4, 20)
    dead, retrying = _picky_outcomes(config)
    # Transient is in retry_on: retried. ValueError is not: dead at once. Fatal is a
    # Transient, but in no_retry_on: dead at once. A job with only no_retry_on retries the rest.
    assert set(retrying) == {"transient", "value"} and set(dead) == {"fatal", "value"}
    assert dead["fatal"]["error_class"] == "apps.controls.Fatal" and dead["fatal"]["retry_count"] == 1
    assert dead["value"]["class"] == "apps.controls.picky" and dead["value"]["retry_count"] == 1
    assert retrying["value"]["class"] == "apps.controls.no_key_errors"


def test_only_retry_on_errors_are_retried_prefork(own_config, masters):
    from apps import controls

    m = masters(procs=1, module="apps.controls")
    m.wait_children()
    for kind in ("transient", "fatal", "value"):
        controls.picky.enqueue(kind)
    wait_for(lambda: len(_dead(own_config)) + len(_retrying(own_config)) == 3, 30)
    dead, retrying = _picky_outcomes(own_config)
    assert set(retrying) == {"transient"} and set(dead) == {"fatal", "value"}


# -- raise cogworker.Retry(in_=...) --------------------------------------------------------


def _check_requested(config, jid, before):
    [(entry, score)] = _retrying(config)
    assert entry["jid"] == jid
    assert not entry.get("retry_count") and entry["retries_requested"] == 1 and "error_class" not in entry
    assert before + 30 <= score <= time.time() + 31  # at the delay it asked for
    assert int(config.redis().get(config.keys.stats_failed) or 0) == 0  # not a failure
    assert wait_for(lambda: api.status(jid) is not None and api.status(jid).state == "retrying", 10)
    assert wait_for(lambda: [a.outcome for a in api.history(jid)] == ["retried"], 10)
    [attempt] = api.history(jid)
    assert attempt.error_class is None and attempt.attempt == 1


def test_a_requested_retry_is_not_a_failure_single_process(config):
    from apps import controls

    cogworker.configure(status=True, history=True)
    before = time.time()
    jid = controls.asks.enqueue("a", 30)
    assert run_worker_until(lambda: len(_retrying(config)) == 1, 20)
    _check_requested(config, jid, before)
    # Due now: it runs again and succeeds (its retry budget of 1 untouched by the request).
    r = config.redis()
    [raw] = r.zrange(config.keys.retry, 0, -1)
    r.zadd(config.keys.retry, {raw: time.time() - 1})
    Poller(config).poll()
    with RunningWorker():
        assert wait_for(lambda: r.lrange("test:ran", 0, -1) == [b"a"], 20)
    assert wait_for(lambda: api.status(jid).state == "succeeded", 10)


def test_a_counted_requested_retry_uses_the_retry_budget(config):
    from apps import controls

    before = time.time()
    controls.asks.enqueue("c", 30, count=True)
    assert run_worker_until(lambda: len(_retrying(config)) == 1, 20)
    [(entry, score)] = _retrying(config)
    assert entry["retry_count"] == 1 and entry["error_class"] == "cogworker.Retry"
    assert before + 30 <= score <= time.time() + 31


def test_asking_too_often_ends_dead_with_the_reason(config):
    from apps import controls

    payload = build_payload("apps.controls.asks", ["z", 5], {}, controls.asks.opts)
    payload["retries_requested"] = cogworker.Retry.MAX_REQUESTED
    config.redis().lpush(config.keys.queue("default"), json.dumps(payload))
    assert run_worker_until(lambda: len(_dead(config)) == 1, 20)
    [entry] = _dead(config)
    assert entry["error_class"] == "cogworker.Retry" and "more than 1000 times" in entry["error_message"]


def test_a_requested_retry_is_not_a_failure_prefork(own_config, masters):
    from apps import controls

    m = masters(procs=1, module="apps.controls", env={"COGWORKER_TEST_STATUS": "1"})
    m.wait_children()
    before = time.time()
    jid = controls.asks.enqueue("p", 30)
    wait_for(lambda: len(_retrying(own_config)) == 1, 30)
    cogworker.configure(status=True, history=True)
    assert wait_for(lambda: int(own_config.redis().get(own_config.keys.stats_processed) or 0) == 0, 1)
    _check_requested(own_config, jid, before)


# -- Shutdown at the shutdown deadline ------------------------------------------------------


@pytest.mark.parametrize("name", ["guarded", "guarded_async"])
def test_shutdown_is_raised_in_the_job_before_the_kill_and_it_runs_again(own_config, masters, tmp_path, name):
    from apps import controls

    marker = tmp_path / "finally.txt"
    r = own_config.redis()
    m = masters(procs=1, module="apps.controls", args=["--timeout", "2"])
    m.wait_children()
    jid = getattr(controls, name).enqueue("g", str(marker))
    wait_for(lambda: r.llen("test:started") == 1, 30)
    m.signal(signal.SIGTERM)
    assert m.wait_exit(30) == 0
    # Its finally: ran (Shutdown raised in it), and it is back on its queue: not failed.
    assert marker.read_text() == "finally 1\n"
    assert [entry["jid"] for entry in queued(r, own_config)] == [jid]
    assert not _dead(own_config) and not _retrying(own_config)
    assert int(r.get(own_config.keys.stats_failed) or 0) == 0
    assert "still running at --timeout: killed" not in m.output()  # it left before the kill
    again = masters(procs=1, module="apps.controls", args=["--timeout", "2"])
    wait_for(lambda: r.lrange("test:ran", 0, -1) == [b"g"], 30)
    assert marker.read_text() == "finally 1\nfinally 2\n"
    again.signal(signal.SIGTERM)
    assert again.wait_exit(30) == 0


# -- expires --------------------------------------------------------------------------------


def test_expires_is_checked_at_decoration():
    with pytest.raises(cogworker.ConfigurationError, match=r"^expires must be a positive number of seconds"):

        @cogworker.job(expires=-1)
        def bad() -> None: ...


def _cli(*args, url):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "COGWORKER_REDIS_URL": url}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args], capture_output=True, text=True, timeout=60, env=env
    )


def _expired_everywhere(config, jid):
    assert wait_for(lambda: api.status(jid) is not None and api.status(jid).state == "expired", 10)
    assert wait_for(lambda: [a.outcome for a in api.history(jid)] == ["expired"], 10)
    shown = _cli("job", jid, url=config.redis_url)
    assert shown.returncode == 0 and re.search(r"^status +expired \(since", shown.stdout, re.M), shown
    from web_util import client_for

    from cogworker.web import create_app

    client = client_for(create_app(config=config))
    assert client.get("/").status_code == 200
    page = client.get(f"/job/{jid}")
    assert page.status_code == 200 and '<span class="badge state-expired">expired</span>' in page.text


def test_an_expired_job_is_not_run_but_recorded_single_process(config):
    from apps import controls

    cogworker.configure(status=True, history=True)
    r = config.redis()
    stale = controls.record.options(expires=1).enqueue("stale")
    # Scheduled for after its expiry: the expiry counts from the enqueue.
    late = controls.record.options(expires=1).enqueue_in(2, "late")
    fresh = controls.record.options(expires=3600).enqueue("fresh")
    [entry] = [e for e in queued(r, config) if e["jid"] == stale]
    assert entry["created_at"] + 1 == entry["expires_at"]
    assert wait_for(lambda: time.time() > entry["expires_at"] + 1.1, 5)
    Poller(config).poll()  # the scheduled one is due now
    assert run_worker_until(lambda: r.lrange("test:ran", 0, -1) == [b"fresh"] and not queued(r, config), 20)
    assert r.lrange("test:ran", 0, -1) == [b"fresh"]
    assert not _dead(config) and not _retrying(config)
    for jid in (stale, late):
        _expired_everywhere(config, jid)
    assert api.status(fresh).state == "succeeded"


def test_an_expired_job_is_not_run_but_recorded_prefork(own_config, masters):
    from apps import controls

    r = own_config.redis()
    jid = controls.record.options(expires=1).enqueue("stale")
    assert wait_for(lambda: time.time() > api.status(jid).updated_at + 2.2, 5)
    m = masters(procs=1, module="apps.controls", env={"COGWORKER_TEST_STATUS": "1"})
    m.wait_children()
    controls.record.enqueue("after")
    wait_for(lambda: r.lrange("test:ran", 0, -1) == [b"after"], 30)
    cogworker.configure(status=True, history=True)
    _expired_everywhere(own_config, jid)


# -- the same, in the single-process runner as its own process ------------------------------


def test_retry_on_retry_and_expires_in_the_single_process_runner(config, redis_server):
    from apps import controls

    r = config.redis()
    for kind in ("transient", "fatal", "value"):
        controls.picky.enqueue(kind)
    asked = controls.asks.enqueue("asked", 30)
    stale = controls.record.options(expires=1).enqueue("stale")
    expiry = _enqueued(config, stale) + 1
    assert wait_for(lambda: time.time() > expiry + 1.2, 5)
    controls.record.enqueue("fresh")
    env = dict(os.environ, COGWORKER_REDIS_URL=redis_server.url, PYTHONPATH=str(Path(__file__).parent))
    env.pop("REDIS_URL", None)
    runner = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "apps.controls", "--no-cron"],
        cwd=str(Path(__file__).parent),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: b"fresh" in r.lrange("test:ran", 0, -1) and len(_retrying(config)) == 2, 30)
        assert wait_for(lambda: api.status(stale) is not None and api.status(stale).state == "expired", 10)
    finally:
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(30) == 0
    dead, _ = _picky_outcomes(config)
    assert set(dead) == {"fatal", "value"}
    [requested] = [entry for entry, _ in _retrying(config) if entry["jid"] == asked]
    assert requested["retries_requested"] == 1 and not requested.get("retry_count")
    assert b"stale" not in r.lrange("test:ran", 0, -1)


def _enqueued(config, jid):
    [entry] = [e for e in queued(config.redis(), config) if e["jid"] == jid]
    return entry["enqueued_at"]
