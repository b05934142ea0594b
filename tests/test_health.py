"""``cogworker health`` (docs/architecture.md#health) against a live master, a quiet one,
a SIGSTOPped one (0, then 1 once its beat is older than --max-age), one missing a child,
and no master at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from prefork_harness import TESTS, wait_for

FAST = {"OBS_HEARTBEAT": "0.3"}


def health(config, *args):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", "health", "--redis-url", config.redis_url, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        cwd=str(TESTS),
    )


def test_no_master_is_unhealthy(own_config):
    own_config.redis().config_set("appendonly", "yes")  # no durability warning (tests/test_durability.py)
    result = health(own_config)
    assert result.returncode == 1
    assert result.stderr.startswith("cogworker: unhealthy: no master on host ") and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_live_quiet_and_frozen_master(own_config, masters):
    m = masters(procs=2, module="apps.obs_app", env=FAST)
    m.wait_children()
    wait_for(lambda: health(own_config, "--max-age", "2").returncode == 0, 10, 0.2, what="healthy")
    result = health(own_config, "--max-age", "2")
    assert result.stdout.startswith("ok: master ") and "2/2 children" in result.stdout
    m.signal(signal.SIGTSTP)  # quiet: no new jobs, still beating with all its children
    time.sleep(1.0)
    assert health(own_config, "--max-age", "2").returncode == 0
    m.signal(signal.SIGSTOP)
    try:
        stopped = time.time()
        assert health(own_config, "--max-age", "2").returncode == 0  # its last beat is still recent
        result = wait_for(
            lambda: (r := health(own_config, "--max-age", "2")).returncode == 1 and r, 10, 0.2, what="unhealthy"
        )
        assert time.time() - stopped >= 1.5
        assert "last beat" in result.stderr or "no master" in result.stderr
    finally:
        m.signal(signal.SIGCONT)
    wait_for(lambda: health(own_config, "--max-age", "2").returncode == 0, 10, 0.2, what="healthy again")


def test_missing_children_is_unhealthy(own_config, masters):
    m = masters(procs=1, module="apps.pf_bootcrash", env=FAST)
    result = wait_for(
        lambda: (r := health(own_config, "--max-age", "5")).returncode == 1 and "children" in r.stderr and r,
        15,
        0.2,
        what="a master without its child",
    )
    assert "has 0 of its 1 children" in result.stderr or "has 1 of its 1" not in result.stderr
    assert m.alive()


def test_identity_and_json(own_config, masters):
    m = masters(procs=1, module="apps.obs_app", env=FAST)
    m.wait_children()
    r = own_config.redis()
    ident = wait_for(
        lambda: [
            i.decode()
            for i in r.smembers(own_config.keys.processes)
            if r.hget(own_config.keys.process(i.decode()), "role") == b"master"
        ],
        what="master",
    )[0]
    result = wait_for(
        lambda: (x := health(own_config, "--identity", ident, "--json")).returncode == 0 and x,
        10,
        0.2,
        what="its child booted",
    )
    assert '"healthy": true' in result.stdout
    result = health(own_config, "--identity", "nobody:1:x")
    assert result.returncode == 1 and "no process nobody:1:x" in result.stderr
