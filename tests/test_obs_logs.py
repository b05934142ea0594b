"""Logs (docs/architecture.md#logs): --log-level/--log-format and their environment
variables on both commands, JSON lines that parse one object per line across concurrent
children, failures at WARNING/ERROR with their traceback, the app's own logging kept."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys

from apps import obs_app
from prefork_harness import TESTS, run_cli, wait_for

from cogworker.launch import logs as logsetup


def test_json_lines_parse_across_concurrent_children(own_config, masters):
    m = masters(procs=3, module="apps.obs_app", args=["--log-format", "json", "--log-level", "DEBUG"])
    m.wait_children()
    obs_app.ok.enqueue_many([(f"j{i}",) for i in range(60)])
    boom = obs_app.boom.enqueue("x")
    flaky = obs_app.flaky.enqueue("y")
    r = own_config.redis()
    wait_for(
        lambda: r.llen("test:ran") == 60 and r.zcard(own_config.keys.dead) == 1 and r.zcard(own_config.keys.retry) == 1,
        what="every job",
    )
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    lines = [json.loads(line) for line in m.output().splitlines() if line.strip()]  # each line one object
    for line in lines:
        assert {"ts", "level", "process", "pid", "event", "message"} <= line.keys(), line
        assert line["ts"].endswith("Z") and "T" in line["ts"]
    processes = {line["process"] for line in lines}
    assert "master" in processes and {"child 0", "child 1", "child 2"} & processes
    started = [line for line in lines if line["event"] == "job_started"]
    done = [line for line in lines if line["event"] == "job_succeeded"]
    assert len(done) == 60 and all(line["level"] == "DEBUG" for line in done + started)
    assert sorted(line["jid"] for line in done) == sorted({line["jid"] for line in done})
    for line in done:
        assert line["job_class"] == "apps.obs_app.ok" and line["queue"] == "default"
        assert line["outcome"] == "succeeded" and line["duration_ms"] >= 0
        assert line["process"].startswith("child ") and line["pid"] != m.pid
    [dead] = [line for line in lines if line.get("jid") == boom and line["event"] == "job_failed"]
    assert dead["level"] == "ERROR" and dead["outcome"] == "dead" and "ValueError: boom x" in dead["traceback"]
    assert "\n" not in dead["message"]
    [retried] = [line for line in lines if line.get("jid") == flaky and line["event"] == "job_failed"]
    assert retried["level"] == "WARNING" and retried["outcome"] == "retried" and "RuntimeError" in retried["traceback"]
    assert any(line["process"] == "master" and "stopped" in line["message"] for line in lines)
    # Every line has a name to key on, the same whatever its values; the text is in message.
    for line in lines:
        assert re.fullmatch(r"[a-z0-9_.]+", line["event"]), line
    forked = [line for line in lines if line["event"] == "master_child_pid_started"]
    assert len({line["message"] for line in forked}) == 3, forked
    assert [line["event"] for line in lines if line["message"] == "master: stopped"] == ["master_stopped"]
    # redis-py's line per connection about maintenance notifications: off at the source.
    assert not [line for line in lines if "maintenance notifications" in line["message"]]


def test_event_names_leave_the_values_out():
    def name(msg, *args, logger="cogworker"):
        return logsetup.event_name(logging.LogRecord(logger, logging.INFO, "f", 1, msg, args, None))

    assert name("master: child %d (pid %d) left (%s, %s)", 1, 2, "exit 0", "shutdown") == "master_child_pid_left"
    assert name("periodic %s: fired slot %d as jid=%s", "p", 1, "j") == "periodic_fired_slot_as_jid"
    assert name("%s: %s; retrying with backoff", "a", "b") == "retrying_with_backoff"
    # Another library's line: its logger's name, whatever its words (redis-py logs f-strings)
    assert name("Failed to enable x: oops", logger="redis.connection") == "redis.connection"
    assert name(f"Failed to enable x: {'other'}", logger="redis.connection") == "redis.connection"
    assert name("ready", logger="root") == "root"
    record = logging.LogRecord("cogworker", logging.INFO, "f", 1, "start: %s", ("x",), None)
    record.event = "job_started"
    assert logsetup.event_name(record) == "job_started"


def test_our_clients_ask_redis_for_no_maintenance_notifications(config, caplog):
    import asyncio

    from cogworker.client import aio as client_async

    caplog.set_level(logging.DEBUG)
    config.new_client().ping()

    async def ping():
        client = client_async.async_redis(config)
        await client.ping()
        await client.aclose()  # (a new loop per asyncio.run: its own client)

    asyncio.run(ping())
    assert "maintenance notifications" not in caplog.text


def run_worker(config, args, env=None):
    full_env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    full_env.pop("COGWORKER_REDIS_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", *args, "--redis-url", config.redis_url],
        cwd=str(TESTS),
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_runner_takes_level_and_format_from_the_environment(own_config):
    # Redis as docs/operations/redis.md asks (AOF): else the boot's durability WARNINGs come first.
    own_config.redis().config_set("appendonly", "yes")
    proc = run_worker(own_config, ["apps.obs_app"], {"COGWORKER_LOG_FORMAT": "json", "COGWORKER_LOG_LEVEL": "warning"})
    try:
        obs_app.ok.enqueue(1)
        obs_app.boom.enqueue(2)
        wait_for(lambda: own_config.redis().zcard(own_config.keys.dead) == 1, what="the dead job")
        wait_for(lambda: own_config.redis().llen("test:ran") == 1, what="the ok job")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert err == ""  # stdout only
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(line["level"], line["event"], line["outcome"], line["process"]) for line in lines] == [
        ("ERROR", "job_failed", "dead", "worker")
    ]


def test_the_apps_own_logging_is_kept(own_config, masters):
    m = masters(procs=1, module="apps.obs_userlog", args=["--log-format", "json"])
    m.wait_children()
    obs_app.boom.enqueue(1)
    wait_for(lambda: own_config.redis().zcard(own_config.keys.dead) == 1, what="the dead job")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0
    lines = [line for line in m.output().splitlines() if line.strip() and not line.startswith(("Traceback", " "))]
    assert lines and all(line.startswith("USERCONF ") for line in lines if not line.startswith(("ValueError",))), lines
    assert any("USERCONF ERROR fail: apps.obs_app.boom" in line for line in lines)


def test_bad_log_settings_are_one_line(own_redis):
    result = run_cli(["--redis-url", own_redis.url, "--log-format", "xml", "apps.obs_app"])
    assert result.returncode == 2 and "--log-format: must be text or json" in result.stderr
    result = run_cli(["--redis-url", own_redis.url, "apps.obs_app"], env={"COGWORKER_LOG_LEVEL": "LOUD"})
    assert result.returncode == 1 and "COGWORKER_LOG_LEVEL: must be one of" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
