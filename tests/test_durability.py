"""Redis settings that let Redis itself lose jobs (issue #25, point 10): an eviction policy
other than noeviction, no AOF (or no persistence at all), appendfsync no. Read from a real
redis-server set each way; the master and the runner log one WARNING line for each at boot
(their children never), and ``cogworker health`` reports them without failing on them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from prefork_harness import TESTS, wait_for

from cogworker.store import durability

EVICTS = "maxmemory-policy is 'allkeys-lru'"
NOTHING = "Redis persists nothing"


def configured(client, **settings: str) -> None:
    for name, value in settings.items():
        client.config_set(name.replace("_", "-"), value)
    if settings.get("appendonly") == "yes":  # the rewrite that turns AOF on runs in the background
        wait_for(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0, what="the AOF rewrite")


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({}, [NOTHING]),  # the test servers' own: save "", appendonly no, noeviction
        ({"maxmemory_policy": "allkeys-lru"}, [EVICTS, NOTHING]),
        ({"maxmemory_policy": "volatile-ttl"}, ["maxmemory-policy is 'volatile-ttl'", NOTHING]),
        ({"save": "3600 1"}, ["persists only RDB snapshots (save '3600 1', appendonly no)"]),
        ({"appendonly": "yes", "appendfsync": "no"}, ["appendfsync is 'no'"]),
        ({"appendonly": "yes", "appendfsync": "everysec"}, []),
        ({"appendonly": "yes", "appendfsync": "always", "save": ""}, []),
    ],
)
def test_each_setting_that_can_lose_jobs_is_named(own_redis, settings, expected):
    client = own_redis.client()
    configured(client, **settings)
    found = durability.check(client)
    assert len(found) == len(expected), found
    for risk, words in zip(found, expected, strict=True):
        assert words in risk and "\n" not in risk, risk


def test_without_config_access_info_still_tells(own_redis):
    """A user CONFIG is refused to (as on managed services): INFO gives the policy and AOF."""
    client = own_redis.client()
    client.config_set("maxmemory-policy", "allkeys-random")
    client.acl_setuser("probe", enabled=True, passwords=["+probe-pw"], keys=["*"], commands=["+@all", "-config"])
    import redis

    limited = redis.Redis(host="127.0.0.1", port=own_redis.port, username="probe", password="probe-pw")
    found = durability.check(limited)
    assert len(found) == 2 and "allkeys-random" in found[0] and "has appendonly no" in found[1], found


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "WARNING" in line and "Redis" in line]


def test_the_master_logs_one_warning_each_at_boot_and_its_children_none(own_config, own_redis, masters):
    configured(own_redis.client(), maxmemory_policy="allkeys-lru")
    m = masters(module="apps.obs_app", procs=2)
    m.wait_children()
    wait_for(lambda: len(_warnings(m.output())) >= 2, what="the boot warnings")
    m.signal(signal.SIGHUP)  # every child replaced: still no warning from any of them
    m.signal(signal.SIGTERM)
    assert m.wait_exit(30) == 0
    warned = _warnings(m.output())
    assert len(warned) == 2, warned
    assert EVICTS in warned[0] and "master" in warned[0] and NOTHING in warned[1], warned


def test_the_runner_logs_them_and_a_safe_redis_gets_no_warning(own_config, own_redis, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    command = [sys.executable, "-m", "cogworker.worker", "apps.obs_app", "--redis-url", own_config.redis_url]
    for settings, count in (
        ({"maxmemory_policy": "allkeys-lru"}, 2),
        ({"maxmemory_policy": "noeviction", "appendonly": "yes"}, 0),
    ):
        configured(own_redis.client(), **settings)
        log = tmp_path / f"runner-{count}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(command, cwd=str(TESTS), env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                # Its "worker ... on queues" line comes after the boot's checks.
                wait_for(lambda: " on queues " in log.read_text(), what="the worker's boot")  # noqa: B023
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        assert proc.returncode == 0 and len(_warnings(log.read_text())) == count, log.read_text()


def test_health_reports_them_without_failing(own_config, own_redis):
    configured(own_redis.client(), maxmemory_policy="allkeys-lru")
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    base = [sys.executable, "-m", "cogworker", "health", "--redis-url", own_config.redis_url]
    text = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env, cwd=str(TESTS))
    lines = text.stderr.splitlines()
    assert lines[0].startswith("cogworker: unhealthy: no master") and len(lines) == 3, lines
    assert EVICTS in lines[1] and NOTHING in lines[2] and all(x.startswith("cogworker: warning: ") for x in lines[1:])
    data = json.loads(
        subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60, env=env, cwd=str(TESTS)).stdout
    )
    assert data["healthy"] is False and len(data["redis_warnings"]) == 2 and EVICTS in data["redis_warnings"][0]
