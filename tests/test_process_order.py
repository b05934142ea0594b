"""Processes are listed as they are supervised: each master followed by its own children
(``api.processes``, hence ``cogworker processes`` and /busy), with real masters."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from prefork_harness import wait_for

from cogworker import api
from cogworker.api.overview import supervision_order
from cogworker.api.records import ProcessRecord

TESTS_DIR = os.path.dirname(__file__)


def record(kind: str, pid: int, ppid: int = 0, host: str = "h") -> ProcessRecord:
    return ProcessRecord(f"{host}:{pid}:x", kind, host, pid, [], None, None, 0, 0, None, ppid=ppid)


def test_each_master_is_followed_by_its_children_whatever_the_pids():
    found = [
        record("child", 10, ppid=900),
        record("child", 5, ppid=40),
        record("master", 900),
        record("child", 11, ppid=7),
        record("master", 40),
        record("worker", 3),
        record("child", 6, ppid=900),
    ]
    order = [(p.kind, p.pid) for p in supervision_order(found)]
    assert order == [
        ("worker", 3),
        ("master", 40),
        ("child", 5),
        ("master", 900),
        ("child", 6),
        ("child", 10),
        ("child", 11),
    ]  # 11: its master has no live record


def test_two_real_masters_list_their_children_under_them(own_config, masters):
    first, second = masters(procs=2), masters(procs=2)
    first.wait_children()
    second.wait_children()
    wait_for(
        lambda: (
            len(api.processes(own_config)) == 6 and all(p.ppid for p in api.processes(own_config) if p.kind == "child")
        ),
        what="six records",
    )
    found = api.processes(own_config)
    kinds = [p.kind for p in found]
    assert kinds == ["master", "child", "child", "master", "child", "child"], kinds
    for at in (0, 3):
        assert {p.pid for p in found[at + 1 : at + 3]} == set(
            first.child_pids() if found[at].pid == first.pid else second.child_pids()
        )
        assert all(p.ppid == found[at].pid for p in found[at + 1 : at + 3])
    env = {**os.environ, "PYTHONPATH": TESTS_DIR, "COGWORKER_REDIS_URL": own_config.redis_url}
    out = subprocess.run(
        [sys.executable, "-m", "cogworker", "processes", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    ).stdout
    assert [p["identity"] for p in json.loads(out)["processes"]] == [p.identity for p in found]
    table = subprocess.run(
        [sys.executable, "-m", "cogworker", "processes"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    ).stdout.splitlines()[1:]
    assert [line.split()[1] for line in table] == kinds
