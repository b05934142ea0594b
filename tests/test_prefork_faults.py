"""Faults from a red-team pass on the prefork master, each with real masters, real
signals and a private redis-server. Jobs log every start and end to a file (Redis may
be paused)."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest
from apps.pf_faults import events
from prefork_harness import Master, in_progress_total, queue_len, wait_for

from cogworker.client.enqueue import push
from cogworker.client.jobs import JobOptions, build_payload

PASSWORD = "s3cret-pw-4711"


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def enqueue(job, *args):
    return push(build_payload(f"apps.pf_faults.{job}", args, {}, JobOptions()))


def ran(path, tag, event="start"):
    return [e for e in events(path) if e[1] == tag and e[0] == event]


def env_for(log, **extra):
    return {"PF_LOG": log, **extra}


# -- a job that ends its own process ---------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_a_job_that_exits_its_process_is_a_crash_and_ends_dead(own_config, masters, log, code):
    m = masters(module="apps.pf_faults", procs=2, env=env_for(log))
    m.wait_children()
    jid = enqueue("exit_with", "quitter", code)
    r = own_config.redis()
    wait_for(lambda: r.zcard(own_config.keys.dead) == 1, 20, what="job in dead")
    entry = json.loads(r.zrange(own_config.keys.dead, 0, -1)[0])
    assert entry["jid"] == jid and entry["error_class"] == "cogworker.ProcessDied"
    assert len(ran(log, "quitter")) == 4  # orphaned more than max_orphanings (3) times, then no more
    out = m.output()
    assert out.count("ERROR master: child") >= 4 and f"died (exit {code}) running apps.pf_faults.exit_with" in out
    wait_for(lambda: in_progress_total(own_config) == 0, 5, what="in-progress drained")
    assert queue_len(own_config) == 0
    m.wait_children(2)
    assert m.alive()


# -- boot --------------------------------------------------------------------------------------


def catches_term(pid):
    """The process has a handler for TERM (/proc's SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except FileNotFoundError:
        pass
    return False


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8])
def test_term_during_boot_exits_0_without_forking(own_config, masters, tmp_path, delay):
    forks = tmp_path / "forks"
    m = masters(module="apps.pf_slowboot", procs=2, env={"PF_BOOT_SLEEP": "1.5", "PF_FORK_MARK": str(forks)})
    wait_for(lambda: catches_term(m.pid) or not m.alive(), 10, interval=0.005, what="TERM handler")
    time.sleep(delay)
    m.signal(signal.SIGTERM)
    assert m.wait_exit(10) == 0, m.output()
    assert not forks.exists(), f"forked: {forks.read_text()}"


def test_the_redis_password_leaves_the_process_title_before_the_app_loads(own_redis, tmp_path):
    own_redis.client().config_set("requirepass", PASSWORD)
    url = f"redis://:{PASSWORD}@127.0.0.1:{own_redis.port}/0"
    mark = tmp_path / "importing"
    m = Master(url, module="apps.pf_slowboot", procs=1, env={"PF_BOOT_SLEEP": "1.0", "PF_BOOT_MARK": str(mark)})
    try:
        reads = []  # (the app's import had begun before this read, the password was in argv)
        deadline = time.time() + 15
        while time.time() < deadline:
            importing = mark.exists()
            try:
                with open(f"/proc/{m.pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except (FileNotFoundError, ProcessLookupError):
                break
            reads.append((importing, PASSWORD.encode() in cmdline))
            if b"[1 procs]" in cmdline:
                break
            time.sleep(0.002)
        assert any(importing for importing, _ in reads), "no read during the app's import"
        assert not any(shown for importing, shown in reads if importing), "password shown while the app loaded"
        # (before its exec, the process still has the test's own command line)
        first_shown = next((i for i, (_, shown) in enumerate(reads) if shown), 0)
        hidden = next(i for i, (_, shown) in enumerate(reads) if i > first_shown and not shown)
        assert not any(shown for _, shown in reads[hidden:]), "password shown again"
        assert PASSWORD not in m.output()
    finally:
        m.stop()


# -- a child that won't leave ------------------------------------------------------------------


def test_hup_reloads_past_a_child_whose_job_ignores_term(own_config, masters, log):
    m = masters(module="apps.pf_faults", procs=2, args=["--timeout", "1"], env=env_for(log))
    before = m.wait_children()
    jid = enqueue("ignore_term", "deaf", 60)
    wait_for(lambda: ran(log, "deaf"), 10, what="deaf job start")
    m.signal(signal.SIGHUP)

    def replaced():
        now = m.child_pids()
        return len(now) == 2 and not (now & before)

    wait_for(replaced, 15, what="every child replaced")
    # Killed at --timeout and requeued (not counted as orphaned): it runs again in a child
    # of the reloaded master.
    wait_for(lambda: len(ran(log, "deaf")) >= 2, 10, what="deaf job running again")
    assert own_config.redis().get(own_config.keys.orphanings(jid)) is None
    assert "still running at --timeout: killed, its job requeued" in m.output()
    assert not [e for e in events(log) if e[0] == "end"]  # never ran to its end: nothing lost, only requeued
    wait_for(lambda: in_progress_total(own_config) + queue_len(own_config) == 1, 5, what="the job listed once")
    assert m.alive()


# -- Redis hung or down ------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["apps.pf_faults", "apps.cron_mixed"])  # (the latter: a cron ticker too)
def test_a_hung_redis_does_not_stall_reaping(own_redis, own_config, masters, log, module):
    m = masters(module=module, procs=2, env=env_for(log))
    before = m.wait_children()
    time.sleep(0.5)
    own_redis.pause()
    try:
        time.sleep(1.2)  # the master is in (or just out of) a Redis call by now
        victim = min(before)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: victim not in psutil.pids() and len(m.child_pids()) == 2,
            10,
            interval=0.01,
            what="reaped and replaced",
        )
        took = time.monotonic() - killed_at
        assert own_redis.paused
    finally:
        own_redis.resume()
    assert took < 3.0, f"reaped and replaced {took:.1f}s after the kill, with Redis hung"
    assert m.alive()


@pytest.mark.parametrize("how", ["paused", "stopped"])
def test_term_with_redis_down_and_nothing_running_exits_at_once(own_redis, own_config, masters, log, how):
    m = masters(module="apps.pf_faults", procs=2, env=env_for(log))
    children = m.wait_children()
    time.sleep(0.5)
    if how == "paused":
        own_redis.pause()
    else:
        own_redis.kill()
    time.sleep(1.0)
    t0 = time.monotonic()
    m.signal(signal.SIGTERM)
    code = m.wait_exit(40)
    took = time.monotonic() - t0
    out = m.output()
    assert code == 0, out
    assert took < 3.0, f"TERM took {took:.1f}s with nothing running\n{out}"
    assert "left for orphan recovery" in out
    line = next(x for x in out.splitlines() if "left for orphan recovery" in x)
    for pid in children:  # names the identities (host:pid:nonce) whose lists are left
        assert f":{pid}:" in line, line


# -- a job's own fork --------------------------------------------------------------------------


def test_a_jobs_fork_does_not_claim_to_be_a_child(own_config, masters, log, tmp_path):
    title = tmp_path / "title"
    m = masters(module="apps.pf_faults", procs=1, env=env_for(log))
    m.wait_children()
    enqueue("forker", str(title))
    wait_for(lambda: ran(log, "forker", "end"), 10, what="forker done")
    text = title.read_text()
    assert "busy" not in text and "'s fork" in text, text


# -- counters of a killed child ----------------------------------------------------------------


def test_a_killed_childs_processed_count_is_not_lost(own_config, masters, log):
    m = masters(module="apps.pf_faults", procs=1, env=env_for(log))
    m.wait_children()
    time.sleep(1.2)  # past the child's first stats flush
    for i in range(150):
        enqueue("logged", f"f{i}")
    enqueue("logged", "blocker", 60)
    wait_for(lambda: ran(log, "blocker"), 15, what="blocker start")
    done = len([e for e in events(log) if e[0] == "end"])
    assert done == 150
    pid = ran(log, "blocker")[0][2]
    os.kill(pid, signal.SIGKILL)
    r = own_config.redis()
    wait_for(lambda: int(r.get(own_config.keys.stats_processed) or 0) >= done, 5, what="counts flushed")
    time.sleep(1.5)
    assert int(r.get(own_config.keys.stats_processed) or 0) == done
    assert int(r.get(own_config.keys.stats_failed) or 0) == 0


# -- look-ahead hand-overs with Redis stalling -----------------------------------------------------


def test_hand_overs_with_redis_stalling_run_every_job_once(own_redis, own_config, masters, log):
    """Long jobs with short ones fetched ahead behind them, so idle siblings take them
    over, while Redis stalls past the children's socket timeout (lost replies): each job
    starts and ends exactly once, never twice at the same time."""
    m = masters(module="apps.pf_faults", procs=3, env=env_for(log))
    m.wait_children()
    tags = []
    for wave in range(6):
        for i in range(3):
            tags.append(f"w{wave}-long{i}")
            enqueue("logged", tags[-1], 0.8)
            for j in range(2):
                tags.append(f"w{wave}-short{i}-{j}")
                enqueue("logged", tags[-1], 0.05)
    for _ in range(2):
        time.sleep(1.0)
        own_redis.pause()
        time.sleep(5.5)  # past the children's 5 s socket timeout
        own_redis.resume()
    done = lambda: {e[1] for e in events(log) if e[0] == "end"}  # noqa: E731
    wait_for(lambda: done() >= set(tags), 60, what="every job done")
    time.sleep(1.0)
    runs: dict[str, list[tuple[str, float]]] = {}
    for event, tag, _, at in events(log):
        runs.setdefault(tag, []).append((event, at))
    twice = {tag: r for tag, r in runs.items() if [e for e, _ in r] != ["start", "end"]}
    assert not twice, twice
    wait_for(lambda: in_progress_total(own_config) == 0, 15, what="in-progress drained")
    assert queue_len(own_config) == 0 and m.alive()
