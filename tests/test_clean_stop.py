"""A normal stop never kills a child (issue #31, point 1): an idle child's blocking wait
for a job is cut short by its TERM, so it leaves at once, on its own, with exit 0 and its
atexit handlers run. SIGKILL is for a child that truly hangs, and says what it was doing.
Real forked masters, real signals, a private redis-server."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest
import redis
from apps import pf
from prefork_harness import in_progress_total, lrange, wait_for

from cogworker.store.wakewait import WakeWait

LEFT = re.compile(r"child \d+ \(pid (\d+)\) left \((exit 0|signal \w+|exit \d+), (\w[\w-]*)\)")


def left(out: str) -> dict[int, tuple[str, str]]:
    """pid -> (how, why) for every child the master saw leave."""
    return {int(m.group(1)): (m.group(2), m.group(3)) for m in LEFT.finditer(out)}


def stop_and_check(m, how: str, exit_dir) -> set[int]:
    pids = m.wait_children()
    time.sleep(0.3)  # idle: blocked in the wait for a job
    if how == "group":
        m.signal_group(signal.SIGTERM)  # as Heroku does: every process of the dyno at once
    else:
        m.signal(signal.SIGTERM if how == "master" else signal.SIGINT)
    assert m.wait_exit(20) == 0
    out = m.output()
    assert "killed" not in out and "SIGKILL" not in out, out
    assert left(out) == {pid: ("exit 0", "shutdown") for pid in pids}, out
    ran = {int(p.name) for p in exit_dir.iterdir()}
    assert pids <= ran, f"exit handlers ran in {ran}, children were {pids}\n{out}"
    return pids


def test_twenty_stops_in_a_row_kill_no_child(own_config, masters, tmp_path):
    kinds = ["master", "group", "int", "master"]
    for i in range(20):
        exit_dir = tmp_path / str(i)
        exit_dir.mkdir()
        args = ["--concurrency", "2"] if i % 5 == 4 else []  # the M-in-flight loop too
        m = masters(module="apps.pf_exit", procs=2, args=args, env={"COGWORKER_TEST_EXIT_DIR": str(exit_dir)})
        if i % 4 == 1:  # some of them ran jobs first
            pf.record.enqueue_many([(f"j{i}-{n}",) for n in range(20)])
            wait_for(lambda: len(lrange(own_config, "test:ran")) == 20, what="20 jobs")
            own_config.redis().delete("test:ran")
        stop_and_check(m, kinds[i % 4], exit_dir)
        assert in_progress_total(own_config) == 0
        m.stop()


def test_the_master_leaves_as_a_normal_exit_would_less_the_teardown(own_config, masters, tmp_path):
    """The master skips the interpreter's teardown (launch/leave.py) but not what a normal
    exit owes the app: its non-daemon threads run to their end, then its atexit handlers."""
    m = masters(
        module="apps.pf_exit",
        procs=1,
        env={"COGWORKER_TEST_EXIT_DIR": str(tmp_path), "COGWORKER_TEST_MASTER_THREAD": "1"},
    )
    (child,) = m.wait_children()
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0
    files = {p.name for p in tmp_path.iterdir()}
    assert {str(m.pid), f"thread-{m.pid}", str(child)} <= files, (files, m.output())
    assert m.output().rstrip().endswith("master: stopped"), m.output()[-2000:]  # every line flushed


def test_hup_replaces_idle_children_without_killing_them(own_config, masters, tmp_path):
    m = masters(module="apps.pf_exit", procs=2, env={"COGWORKER_TEST_EXIT_DIR": str(tmp_path)})
    old = m.wait_children()
    for _ in range(3):
        time.sleep(0.3)
        m.signal(signal.SIGHUP)
        wait_for(lambda old=old: len(m.children()) == 2 and not (m.child_pids() & old), what="both replaced")
        wait_for(lambda old=old: old <= set(left(m.output())), what="the old ones reaped")
        out = m.output()
        assert all(left(out)[pid] == ("exit 0", "restart") for pid in old), out
        assert old <= {int(p.name) for p in tmp_path.iterdir()}, out
        old = m.wait_children()
    m.signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0
    assert "killed" not in m.output() and "SIGKILL" not in m.output()


def test_a_child_that_truly_hangs_is_killed_saying_what_it_was_doing(own_config, masters, tmp_path):
    m = masters(module="apps.pf_exit", procs=1, env={"COGWORKER_TEST_EXIT_HANG": "1"})
    (pid,) = m.wait_children()
    time.sleep(0.3)
    m.signal(signal.SIGTERM)
    assert m.wait_exit(30) == 0
    out = m.output()
    line = next(x for x in out.splitlines() if "hasn't left" in x)
    assert f"pid {pid}" in line and "though Redis answers" in line, line
    assert "stopping: exit handlers" in line, line  # what it was doing: its title
    assert left(out)[pid] == ("signal SIGKILL", "killed"), out
    assert in_progress_total(own_config) == 0


# -- the wait itself (cogworker/wakewait.py) --------------------------------------------------

LONG_MS = 30_000  # far past the test's patience: returning at all means it was cut short


def test_a_signal_handler_cuts_the_wait_short_and_the_client_stays_usable(config):
    client = config.redis()
    wait = WakeWait()
    signal.signal(signal.SIGALRM, lambda *_: wait.stop())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        t0 = time.monotonic()
        wait.wait(client, config.keys.wake, "$", LONG_MS)
        assert time.monotonic() - t0 < LONG_MS / 1000 / 3
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    assert wait.stopped
    wait.wait(client, config.keys.wake, "$", LONG_MS)  # stopped: every later wait returns at once
    client.set("after", "1")  # no unread XREAD reply left on a pooled connection
    assert client.get("after") == b"1" and client.ping()


def test_another_thread_cuts_the_wait_short(config):
    wait = WakeWait()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (wait.wait(config.redis(), config.keys.wake, "$", LONG_MS), done.set()))
    thread.start()
    time.sleep(0.3)
    wait.stop()
    assert done.wait(LONG_MS / 1000 / 3)
    thread.join()


def test_a_push_still_ends_the_wait(config):
    client = config.redis()
    wait = WakeWait()
    threading.Timer(0.3, lambda: client.xadd(config.keys.wake, {"q": "default"})).start()
    t0 = time.monotonic()
    wait.wait(client, config.keys.wake, "$", LONG_MS)
    assert time.monotonic() - t0 < LONG_MS / 1000 / 3 and not wait.stopped


def test_a_wrong_type_still_raises(config):
    client = config.redis()
    client.set(config.keys.wake, "not a stream")
    with pytest.raises(redis.ResponseError):
        WakeWait().wait(client, config.keys.wake, "$", 100)
