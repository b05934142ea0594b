"""/metrics (docs/architecture.md#metrics): real prefork masters and a real runner,
scraped while their jobs succeed, fail, retry, time out and die; a scraper that never
reads; two masters on one Redis, each with its own host's numbers."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from apps import obs_app
from metrics_util import jobs, scrape, value
from prefork_harness import TESTS, lrange, run_cli, wait_for
from redis_server import free_port

from cogworker.metrics import jobcounts as jobmetrics


def scraped(port):
    """A scrape, or None while the master is still booting, or when a reload's exec cut a
    scrape in flight (its headers sent, its body not: an IncompleteRead)."""
    try:
        return scrape(port)
    except (OSError, http.client.HTTPException):
        return None


def until(port, predicate, timeout=15.0, what="metrics"):
    last = {}

    def check():
        s = scraped(port)
        if s is not None:
            last["s"] = s
        return s is not None and predicate(s) and s

    try:
        return wait_for(check, timeout, 0.1, what)
    except AssertionError as exc:  # say what the last scrape showed, so a CI failure tells why
        shown = {
            f"{name}{dict(labels)}": v
            for (name, labels), v in last.get("s", {}).items()
            if name
            in (
                "cogworker_jobs_total",
                "cogworker_dead_size",
                "cogworker_retry_size",
                "cogworker_children",
                "cogworker_child_exits_total",
            )
        }
        raise AssertionError(f"{exc}; last scrape: {shown}") from None


def _check_durations(s):
    """The run-time histogram: one observation per run that ended in this host's processes
    with a known run time (a hard-killed or SIGKILLed run has none), cumulative buckets."""
    runs = {"ok": 3, "boom": 1, "flaky": 1, "soft": 1, "hang": 1}
    for job_class, n in runs.items():
        labels = {"queue": "default", "job_class": f"apps.obs_app.{job_class}"}
        assert value(s, "cogworker_job_duration_seconds_count", **labels) == n
        buckets = [value(s, "cogworker_job_duration_seconds_bucket", le=repr(b), **labels) for b in jobmetrics.BUCKETS]
        assert buckets == sorted(buckets)  # cumulative
        assert value(s, "cogworker_job_duration_seconds_bucket", le="+Inf", **labels) == n
    soft = {"queue": "default", "job_class": "apps.obs_app.soft"}
    assert value(s, "cogworker_job_duration_seconds_bucket", le="0.25", **soft) == 0
    assert value(s, "cogworker_job_duration_seconds_bucket", le="0.5", **soft) == 1
    assert 0.3 <= value(s, "cogworker_job_duration_seconds_sum", **soft) < 0.5
    assert value(s, "cogworker_job_duration_seconds_count", queue="default", job_class="apps.obs_app.stubborn") is None


def test_scrape_counts_every_outcome_exactly(own_config, masters):
    port = free_port()
    m = masters(procs=2, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    until(port, lambda s: value(s, "cogworker_children") == 2, what="2 children")
    for i in range(3):
        obs_app.ok.enqueue(i)
    obs_app.boom.enqueue("b")
    obs_app.flaky.enqueue("f")
    obs_app.soft.enqueue("s")
    obs_app.stubborn.enqueue("st")  # killed by the master 5 s past its 0.3 s timeout
    until(
        port,
        lambda s: (
            (
                jobs(s, "ok", "succeeded"),
                jobs(s, "boom", "dead"),
                jobs(s, "flaky", "retried"),
                jobs(s, "soft", "timed_out"),
            )
            == (3, 1, 1, 1)
        ),
        what="the quick outcomes",
    )
    s = until(port, lambda s: jobs(s, "stubborn", "timed_out") == 1, 15, what="the hard timeout")
    assert value(s, "cogworker_child_exits_total", reason="timeout") == 1

    obs_app.hang.enqueue("h")  # its first run hangs: its child is SIGKILLed mid-job
    started = wait_for(lambda: [x for x in lrange(own_config, "test:started") if x.startswith("h:")], what="hang")
    os.kill(int(started[0].split(":")[1]), signal.SIGKILL)
    s = until(
        port,
        lambda s: (
            jobs(s, "hang", "orphaned") == 1
            and jobs(s, "hang", "succeeded") == 1
            and value(s, "cogworker_dead_size") == 3
            and value(s, "cogworker_retry_size") == 1
            and value(s, "cogworker_children") == 2
        ),
        what="the orphaned job's rerun and a fresh sample",
    )

    counted = {
        dict(labels)["job_class"].rsplit(".", 1)[1] + "/" + dict(labels)["outcome"]: v
        for (name, labels), v in s.items()
        if name == "cogworker_jobs_total"
    }
    assert counted == {
        "ok/succeeded": 3,
        "boom/dead": 1,
        "flaky/retried": 1,
        "soft/timed_out": 1,
        "stubborn/timed_out": 1,
        "hang/orphaned": 1,
        "hang/succeeded": 1,
    }
    _check_durations(s)
    assert value(s, "cogworker_child_exits_total", reason="crash") == 1
    assert value(s, "cogworker_orphans_requeued_total") >= 1
    assert value(s, "cogworker_queue_size", queue="default") == 0
    assert value(s, "cogworker_queue_latency_seconds", queue="default") == 0
    assert value(s, "cogworker_redis_up") == 1 and value(s, "cogworker_redis_outages_total") == 0
    assert value(s, "cogworker_children_busy") == 0
    for name, _ in s:  # never a jid or args as a label
        assert "jid" not in name


def test_redis_outage_is_counted(own_redis, own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    s = until(port, lambda s: value(s, "cogworker_queue_size", queue="default") == 0, what="a sample")
    assert value(s, "cogworker_redis_up") == 1
    own_redis.pause()
    try:
        s = until(port, lambda s: value(s, "cogworker_redis_up") == 0, 15, what="redis_up 0")
        assert value(s, "cogworker_redis_outages_total") == 1
    finally:
        own_redis.resume()
    s = until(port, lambda s: value(s, "cogworker_redis_up") == 1, 15, what="redis_up 1 again")
    assert value(s, "cogworker_redis_outages_total") == 1


def test_queue_latency_of_a_waiting_job(own_config, masters):
    from cogworker.api import Queue

    Queue("default").pause()  # sampled, not worked
    port = free_port()
    m = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    enqueued = time.time()
    obs_app.ok.enqueue("waits")
    s = until(
        port,
        lambda s: (
            value(s, "cogworker_queue_size", queue="default") == 1
            and value(s, "cogworker_queue_latency_seconds", queue="default") >= 1.0
        ),
        15,
        what="a later sample",
    )
    assert value(s, "cogworker_queue_latency_seconds", queue="default") <= time.time() - enqueued


def test_a_scraper_that_never_reads_stalls_nothing(own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    until(port, lambda s: value(s, "cogworker_children") == 1, what="1 child")
    stuck = []
    for i in range(8):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        sock.connect(("127.0.0.1", port))
        if i % 2:  # half send their request and never read the answer; half never even ask
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        stuck.append(sock)
    try:
        obs_app.ok.enqueue_many([(f"n{i}",) for i in range(50)])
        wait_for(lambda: own_config.redis().llen("test:ran") == 50, 10, what="jobs run meanwhile")
        m.signal(signal.SIGTTIN)  # supervision answers signals meanwhile: one more child
        m.wait_children(2, timeout=5)
        s = scrape(port)  # and another scraper is answered at once
        assert jobs(s, "ok", "succeeded") == 50
        assert value(s, "cogworker_children") == 2
    finally:
        for sock in stuck:
            sock.close()
    m.signal(signal.SIGTERM)
    assert m.wait_exit(15) == 0


def test_a_stuck_scraper_is_dropped_at_its_deadline(own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    until(port, lambda s: True, what="listening")
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    started = time.monotonic()
    assert sock.recv(100) == b""  # it never asked: closed by the master after the deadline
    assert 4 <= time.monotonic() - started < 9
    sock.close()


def test_a_second_master_exports_its_own_numbers(own_config, masters):
    port_a, port_b = free_port(), free_port()
    a = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port_a), "-q", "default"])
    b = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port_b), "-q", "other"])
    a.wait_children()
    b.wait_children()
    for i in range(3):
        obs_app.ok.enqueue(i)
    for i in range(2):
        obs_app.elsewhere.enqueue(i)
    sa = until(port_a, lambda s: jobs(s, "ok", "succeeded") == 3, what="master a's")
    sb = until(port_b, lambda s: jobs(s, "elsewhere", "succeeded", queue="other") == 2, what="master b's")
    assert jobs(sa, "elsewhere", "succeeded", queue="other") == 0
    assert jobs(sb, "ok", "succeeded") == 0
    assert value(sa, "cogworker_queue_size", queue="other") is None  # each samples the queues it works
    assert value(sb, "cogworker_queue_size", queue="default") is None


def test_port_in_use_is_one_line(own_redis):
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        result = run_cli(["--procs", "1", "--redis-url", own_redis.url, "--metrics-port", str(port), "apps.obs_app"])
    finally:
        taken.close()
    assert result.returncode == 1, result.stderr
    assert f"--metrics-port {port}: can't listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_runner_serves_the_same(own_config):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cogworker.worker",
            "apps.obs_app",
            "--redis-url",
            own_config.redis_url,
            "--metrics-port",
            str(port),
        ],
        cwd=str(TESTS),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        obs_app.ok.enqueue(1)
        obs_app.ok.enqueue(2)
        obs_app.boom.enqueue(3)
        s = until(
            port,
            lambda s: (
                jobs(s, "ok", "succeeded") == 2
                and jobs(s, "boom", "dead") == 1
                and value(s, "cogworker_dead_size") == 1
            ),
            what="the runner's counts",
        )
        assert value(s, "cogworker_children") == 1
        assert value(s, "cogworker_job_duration_seconds_count", queue="default", job_class="apps.obs_app.ok") == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_job_classes_past_the_cap_are_other():
    counts = jobmetrics.JobMetrics(max_classes=2)
    for name in ("a", "b", "c", "d", "a"):
        counts.count("q", name, "succeeded", 0.002)
    assert counts.copy()["counts"] == {
        ("q", "a", "succeeded"): 2,
        ("q", "b", "succeeded"): 1,
        ("q", "other", "succeeded"): 2,
    }
    master = jobmetrics.JobMetrics(max_classes=3)
    master.merge(counts.delta())
    other = jobmetrics.JobMetrics(max_classes=2)
    other.count("q", "e", "dead", 0.5)
    other.count("q", "f", "dead", 0.5)
    master.merge(other.delta())  # e is the master's third class; f is past its cap
    snap = master.copy()
    assert snap["counts"][("q", "e", "dead")] == 1 and snap["counts"][("q", "other", "dead")] == 1
    assert snap["durations"][("q", "other")][-1] == pytest.approx(0.002 * 2 + 0.5)
    assert counts.delta() is None  # nothing new since
    counts.count("q", "a", "dead", 0.1)
    [(key, cell)] = counts.delta()["cells"].items()
    outcomes = dict(zip(jobmetrics.OUTCOMES, cell, strict=False))
    assert key == ("q", "a") and outcomes.pop("dead") == 1 and not any(outcomes.values())
    buckets = cell[len(jobmetrics.OUTCOMES) : -1]
    assert buckets[jobmetrics.BUCKETS.index(0.1)] == 1 and sum(buckets) == 1 and cell[-1] == pytest.approx(0.1)


def test_periodic_fires_are_counted(own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.obs_cron", args=["--metrics-port", str(port)])
    m.wait_children()
    s = until(
        port,
        lambda s: (value(s, "cogworker_periodic_fires_total", entry="every-second") or 0) >= 2,
        15,
        what="two fires",
    )
    fires = value(s, "cogworker_periodic_fires_total", entry="every-second")
    runs = own_config.redis().lrange("test:ran", 0, -1).count(b"cron")
    assert runs - 1 <= fires <= runs + 2  # one may be on its way to run, or ran since the scrape


def test_child_exit_reasons(own_config, masters):
    port = free_port()
    m = masters(procs=1, module="apps.obs_app", args=["--metrics-port", str(port), "--max-jobs", "2"])
    m.wait_children()
    obs_app.ok.enqueue_many([(i,) for i in range(4)])
    s = until(
        port,
        lambda s: (
            value(s, "cogworker_child_exits_total", reason="max_jobs") == 2 and value(s, "cogworker_children") == 1
        ),
        what="two children replaced after 2 jobs each",
    )
    assert jobs(s, "ok", "succeeded") == 4
    # A reload: the same pid binds the same port again (the old socket didn't survive the
    # exec), its counters from zero as after any restart, with a fresh child.
    m.signal(signal.SIGHUP)
    until(
        port,
        lambda s: (
            not value(s, "cogworker_child_exits_total", reason="max_jobs") and value(s, "cogworker_children") == 1
        ),
        30,
        what="the reloaded master's metrics",
    )
    assert m.alive()


def test_children_dont_keep_the_port(own_config, masters):
    port = free_port()
    m = masters(procs=2, module="apps.obs_app", args=["--metrics-port", str(port)])
    m.wait_children()
    until(port, lambda s: True, what="listening")
    children = m.child_pids()
    obs_app.hang.enqueue("h")  # one child stays busy after its master is gone
    wait_for(lambda: lrange(own_config, "test:started"), what="hang started")
    os.kill(m.pid, signal.SIGKILL)
    m.proc.wait(5)
    assert any(pid_alive(pid) for pid in children)
    # Free at once, but for a scrape's renderer: no worker child holds the listening socket.
    # A renderer forked for the last scrape drops its copy on its first step after the fork
    # (``close_in_child``), and a loaded machine can run the test first: a moment's grace.
    deadline = time.monotonic() + 2.0
    while True:
        try:
            socket.create_server(("127.0.0.1", port)).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
