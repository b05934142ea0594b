"""HUP reloads the app: the master stops its children as a clean TERM stop does, then
re-executes its own command in the same process (same pid), which imports the app anew.
Real masters (tests/prefork_harness.py), real signals to the master's pid, a private
redis-server; the app is a module written to a temporary directory and rewritten."""

from __future__ import annotations

import itertools
import signal
import textwrap
from collections import defaultdict
from pathlib import Path

import psutil
from prefork_harness import TESTS, in_progress_total, wait_for

import cogworker

V1 = """
import os, time
import cogworker

VERSION = "v1"


def _log(line):
    with open(os.environ["RELOAD_TEST_LOG"], "a") as f:
        f.write(line + "\\n")


@cogworker.job
def work(tag, seconds):
    _log(f"{VERSION} start {tag}")
    time.sleep(seconds)
    _log(f"{VERSION} end {tag}")
"""

V2 = (
    V1.replace('VERSION = "v1"', 'VERSION = "v2"')
    + """

@cogworker.job
def added(tag):
    _log(f"added start {tag}")
    _log(f"added end {tag}")
"""
)

names = itertools.count()


class App:
    """The app module on disk, and the same jobs (by name) to enqueue from the test."""

    def __init__(self, tmp: Path) -> None:
        self.name = f"reload_app_{next(names)}"
        self.path = tmp / f"{self.name}.py"
        self.log = tmp / "runs.log"
        self.log.touch()
        self.write(V1)
        self.work = self.client_job("work", lambda tag, seconds: None)
        self.added = self.client_job("added", lambda tag: None)
        self.env = {
            "PYTHONPATH": f"{tmp}:{TESTS}",
            "PYTHONDONTWRITEBYTECODE": "1",  # the rewritten file is read, not a stale .pyc
            "RELOAD_TEST_LOG": str(self.log),
        }

    def write(self, source: str) -> None:
        self.path.write_text(textwrap.dedent(source))

    def client_job(self, name: str, func):
        func.__module__, func.__qualname__ = self.name, name
        return cogworker.job(func)

    def runs(self) -> dict[str, list[tuple[str, str]]]:
        """tag -> [(version, "start" | "end"), ...] in the order they were written."""
        seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for line in self.log.read_text().splitlines():
            version, what, tag = line.split()
            seen[tag].append((version, what))
        return seen


def masters_of(config) -> list:
    return [p for p in cogworker.api.processes(config) if p.kind == "master"]


def children_of(pid: int) -> set[int]:
    return {c.pid for c in psutil.Process(pid).children() if c.status() != psutil.STATUS_ZOMBIE}


def test_hup_loads_new_code_in_the_same_pid_losing_nothing_running_nothing_twice(own_config, masters, tmp_path):
    app = App(tmp_path)
    m = masters(module=app.name, procs=2, args=["--timeout", "30"], env=app.env)
    old_children = m.wait_children(2, timeout=30)
    tags: list[str] = []

    def enqueue(prefix: str, n: int) -> None:
        for i in range(n):
            tag = f"{prefix}{i}"
            app.work.enqueue(tag, 0.3 if i % 2 else 0.0)
            tags.append(tag)

    old_master = wait_for(lambda: masters_of(own_config), 20, what="the master's record")
    enqueue("before", 8)
    wait_for(lambda: app.runs(), 20, what="a first job started")
    app.write(V2)
    m.signal(signal.SIGHUP)
    enqueue("during", 10)  # while the children drain: they wait on their queue
    wait_for(lambda: len(children_of(m.pid) - old_children) == 2, 60, what="two fresh children")
    assert m.alive()
    enqueue("after", 8)
    for i in range(3):
        app.added.enqueue(f"added{i}")
        tags.append(f"added{i}")

    wait_for(lambda: all(("end" in {w for _, w in app.runs().get(t, [])}) for t in tags), 60, what="every job run")
    runs = app.runs()
    out = m.output()
    # Nothing lost, nothing run twice (so never twice at once): one start, then its end.
    for tag in tags:
        assert [w for _, w in runs[tag]] == ["start", "end"], (tag, runs[tag], out)
    # After the reload, the new code: the changed body and the job added to the module.
    for tag in tags:
        if tag.startswith("after"):
            assert {v for v, _ in runs[tag]} == {"v2"}, (tag, runs[tag])
    assert {v for t in tags if t.startswith("added") for v, _ in runs[t]} == {"added"}
    assert "UnknownJob" not in out
    assert own_config.redis().zcard(own_config.keys.dead) == 0
    assert in_progress_total(own_config) == 0
    # The same process throughout (systemd's MAINPID), its old children all gone, each
    # left as at a clean stop, none killed.
    assert m.alive() and not (children_of(m.pid) & old_children)
    assert "killed" not in out and "SIGKILL" not in out, out
    assert out.count("master: HUP: reloading") == 1
    # A new identity in the same pid; the old one deregistered, its children's too.
    new_master = wait_for(lambda: masters_of(own_config) != old_master and masters_of(own_config), 20, what="record")
    assert len(new_master) == 1 and len(old_master) == 1
    assert new_master[0].pid == old_master[0].pid == m.pid and new_master[0].identity != old_master[0].identity
    records = {p.pid for p in cogworker.api.processes(own_config) if p.kind == "child"}
    assert not (records & old_children), records


def test_a_second_hup_during_the_drain_is_ignored_and_term_stops_for_good(own_config, masters, tmp_path):
    app = App(tmp_path)
    m = masters(module=app.name, procs=1, args=["--timeout", "30"], env=app.env)
    m.wait_children(1, timeout=30)
    app.work.enqueue("long", 3.0)
    wait_for(lambda: "long" in app.runs(), 20, what="the long job started")
    m.signal(signal.SIGHUP)
    wait_for(lambda: "HUP: reloading" in m.output(), 20, what="the reload")
    m.signal(signal.SIGHUP)
    wait_for(lambda: "HUP ignored: a reload is under way" in m.output(), 20, what="the second HUP ignored")
    m.signal(signal.SIGTERM)
    assert m.wait_exit(40) == 0
    out = m.output()
    assert "stopping for good (no re-exec)" in out
    assert "re-executing to load" not in out and out.count("master: HUP: reloading") == 1, out
    assert app.runs()["long"] == [("v1", "start"), ("v1", "end")]  # it finished, in the old process
    assert in_progress_total(own_config) == 0


def test_a_reload_into_code_that_does_not_import_fails_as_a_start_does(own_config, masters, tmp_path):
    app = App(tmp_path)
    m = masters(module=app.name, procs=1, env=app.env)
    m.wait_children(1, timeout=30)
    app.write(V1 + "\ndef broken(:\n")
    m.signal(signal.SIGHUP)
    assert m.wait_exit(60) != 0
    out = m.output()
    assert f"cogworker-prefork: can't import '{app.name}': SyntaxError" in out, out
    assert "Traceback" not in out, out
