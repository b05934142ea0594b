"""api.quiet_process / api.stop_process: a request in ``control:<identity>`` that a real
prefork master (or a single-process worker) takes on its heartbeat and acts on as on TSTP
or TERM. Checked against the log of job starts/ends: nothing lost, nothing run twice."""

from __future__ import annotations

import time

from apps import pf
from prefork_harness import in_progress_total, lrange, queue_len, wait_for
from worker_process import Process

from cogworker import api


def _process(kind):
    found = [p for p in api.processes() if p.kind == kind]
    return found[0] if found else None


def test_unknown_or_child_identity_is_refused(own_config, masters):
    assert api.quiet_process("no-such-process") is False
    assert api.stop_process("") is False
    m = masters(procs=1, module="apps.pf_control")
    m.wait_children(1)
    child = wait_for(lambda: _process("child"), what="child record")
    assert api.quiet_process(child.identity) is False
    assert api.stop_process(child.identity) is False
    assert not own_config.redis().exists(own_config.keys.control(child.identity))
    assert m.alive()


def test_quiet_master_through_redis(own_config, masters):
    m = masters(procs=2, module="apps.pf_control")
    m.wait_children(2)
    master = wait_for(lambda: _process("master"), what="master record")
    pf.slow.enqueue("running", 1.5)
    wait_for(lambda: lrange(own_config, "test:started"), what="start")
    assert api.quiet_process(master.identity) is True
    wait_for(lambda: _process("master").state == "quiet", what="master quiet")
    assert not own_config.redis().exists(own_config.keys.control(master.identity))  # taken once
    pf.record.enqueue("after-quiet")
    wait_for(lambda: lrange(own_config, "test:done") == ["running"], what="running job finished")
    time.sleep(1.0)
    assert lrange(own_config, "test:ran") == []  # enqueued after the quiet: stays queued
    assert queue_len(own_config) == 1
    assert m.alive() and len(m.children()) == 2
    assert "quiet requested through Redis" in m.output()


def test_stop_master_through_redis_loses_nothing(own_config, masters):
    m = masters(procs=2, module="apps.pf_control")
    m.wait_children(2)
    master = wait_for(lambda: _process("master"), what="master record")
    pf.slow.enqueue_many([(f"s{i}", 1.0) for i in range(6)])
    wait_for(lambda: len(lrange(own_config, "test:started")) == 2, what="two running")
    assert api.stop_process(master.identity) is True
    assert api.quiet_process(master.identity) is True  # a pending stop is not downgraded
    assert own_config.redis().get(own_config.keys.control(master.identity)) in (b"stop", None)
    assert m.wait_exit(30) == 0
    started = [s.split(":")[0] for s in lrange(own_config, "test:started")]
    done = lrange(own_config, "test:done")
    assert sorted(started) == sorted(done) and len(set(done)) == len(done)  # every start ended, once
    assert len(done) + queue_len(own_config) == 6  # the rest still queued: nothing lost
    assert in_progress_total(own_config) == 0
    assert api.processes() == []
    assert api.stop_process(master.identity) is False  # gone now


def test_single_process_worker_quiet_then_stop(own_config):
    worker = Process("cogworker.worker", "apps.pf_control", "--no-cron", url=own_config.redis_url)
    try:
        rec = wait_for(lambda: _process("worker"), what="worker record")
        assert api.quiet_process(rec.identity) is True
        wait_for(lambda: _process("worker").state == "quiet", what="worker quiet")
        pf.record.enqueue("after-quiet")
        time.sleep(1.0)
        assert lrange(own_config, "test:ran") == [] and queue_len(own_config) == 1
        assert api.stop_process(rec.identity) is True
        assert worker.proc.wait(20) == 0
        assert "stop requested through Redis" in worker.output()
        assert queue_len(own_config) == 1 and in_progress_total(own_config) == 0
        assert api.processes() == []
    finally:
        worker.stop()


def _cli(*args, url):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.abspath(__file__)), "COGWORKER_REDIS_URL": url}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "cogworker", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_cli_processes_quiet_and_stop(own_config, masters):
    url = own_config.redis_url
    m = masters(procs=1, module="apps.pf_control")
    m.wait_children(1)
    master = wait_for(lambda: _process("master"), what="master record")
    child = wait_for(lambda: _process("child"), what="child record")
    usage = _cli("processes", "quiet", url=url)
    assert usage.returncode == 2 and "needs the IDENTITY" in usage.stderr
    refused = _cli("processes", "stop", child.identity, url=url)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "with its master" in refused.stderr
    quiet = _cli("processes", "quiet", master.identity, "--json", url=url)
    assert quiet.returncode == 0 and '"requested": "quiet"' in quiet.stdout
    wait_for(lambda: _process("master").state == "quiet", what="master quiet")
    assert m.alive()
    stop = _cli("processes", "stop", master.identity, url=url)
    assert stop.returncode == 0 and "stop requested" in stop.stdout
    assert m.wait_exit(30) == 0


def test_a_control_key_of_another_type_never_stops_the_beat(own_config, masters):
    m = masters(procs=1, module="apps.pf_control")
    m.wait_children(1)
    master = wait_for(lambda: _process("master"), what="master record")
    r = own_config.redis()
    r.hset(own_config.keys.control(master.identity), "junk", "1")
    beat = _process("master").last_beat
    wait_for(lambda: _process("master").last_beat > beat + 0.5, what="beats go on")
    assert "holds another type than a string" in m.output()
    assert api.quiet_process(master.identity) is True  # overwrites it
    wait_for(lambda: _process("master").state == "quiet", what="master quiet")
    pf.record.enqueue("after-quiet")
    time.sleep(1.0)
    assert queue_len(own_config) == 1 and m.alive()


def _states(url):
    """``cogworker processes``'s STATE column, by KIND (master, child)."""
    out = _cli("processes", url=url)
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split()[:4] == ["IDENTITY", "KIND", "STATE", "QUEUES"], header
    return sorted((row.split()[1], row.split()[2]) for row in rows)


def test_cli_processes_shows_each_processs_state(own_config, masters):
    url = own_config.redis_url
    m = masters(procs=1, module="apps.pf_control")
    m.wait_children(1)
    wait_for(lambda: _process("master") and _process("child"), what="both records")
    wait_for(lambda: _states(url) == [("child", "idle"), ("master", "idle")], 15, what="idle")
    pf.slow.enqueue("running", 30)
    wait_for(lambda: _states(url) == [("child", "busy"), ("master", "busy")], 15, what="busy")
    assert api.quiet_process(_process("master").identity) is True
    wait_for(lambda: _states(url) == [("child", "quiet"), ("master", "quiet")], 15, what="quiet")
    assert api.stop_process(_process("master").identity) is True
    wait_for(lambda: ("master", "stopping") in _states(url), 15, what="stopping")
    m.signal_group(9)
