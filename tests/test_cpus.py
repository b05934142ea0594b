"""``--procs``'s default: the CPUs this process may use (its affinity, as ``taskset`` sets
it), within its container's CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``);
``$COGWORKER_PROCS`` decides when set, never ``$WEB_CONCURRENCY`` (the web server's setting,
which Heroku sets app-wide). On a Heroku dyno a ``--timeout`` past its 30 s is warned of.
Real masters, and cgroup files laid out as the kernel shows them."""

from __future__ import annotations

import os
import signal

import pytest
from prefork_harness import Master

from cogworker.launch.cpus import available_cpus, cgroup_cpu_quota

needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to pin to fewer")


@needs_two
@pytest.mark.parametrize(
    "env, children",
    [({}, 1), ({"COGWORKER_PROCS": "3"}, 3), ({"WEB_CONCURRENCY": "3"}, 1)],  # the last: 3 before
)
def test_a_pinned_master_starts_one_child_per_cpu_it_may_use(own_redis, env, children):
    clean = {"WEB_CONCURRENCY": "", "COGWORKER_PROCS": ""}
    m = Master(own_redis.url, procs=None, env={**clean, **env}, wrap=["taskset", "-c", "0"])
    try:
        m.procs = children
        m.wait_children()
        m.signal(signal.SIGTERM)
        assert m.wait_exit(20) == 0
        assert f"{children} children on queues" in m.output(), m.output()
    finally:
        m.stop()


def test_a_bad_cogworker_procs_is_one_line(own_redis):
    m = Master(own_redis.url, procs=None, env={"COGWORKER_PROCS": "0"})
    try:
        assert m.wait_exit(30) == 1
        assert m.output().strip() == "cogworker-prefork: COGWORKER_PROCS: must be at least 1, got 0", m.output()
    finally:
        m.stop()


@pytest.mark.parametrize(
    "timeout, dyno, warned", [("40", "worker.1", True), ("25", "worker.1", False), ("40", "", False)]
)
def test_on_heroku_a_timeout_past_its_30_seconds_is_warned_of(own_redis, timeout, dyno, warned):
    m = Master(own_redis.url, procs=1, args=("--timeout", timeout), env={"DYNO": dyno})
    try:
        m.wait_children()
        m.signal(signal.SIGTERM)
        assert m.wait_exit(30) == 0
        lines = [line for line in m.output().splitlines() if "exceeds Heroku's" in line]
        if warned:
            assert len(lines) == 1 and "WARNING --timeout 40s exceeds Heroku's 30s between TERM and SIGKILL" in lines[0]
            assert "DYNO=worker.1" in lines[0] and "use --timeout 25 or less" in lines[0], lines
        else:
            assert lines == [], lines
    finally:
        m.stop()


def test_affinity_is_counted_not_the_machine():
    assert available_cpus(cgroup_root="/nonexistent") == len(os.sched_getaffinity(0))


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    "cpu_max, quota", [("200000 100000\n", 2.0), ("150000 100000\n", 1.5), ("max 100000\n", None), ("garbage\n", None)]
)
def test_cgroup_v2_cpu_max(tmp_path, cpu_max, quota):
    write(tmp_path / "proc", "0::/system.slice/app.service\n")
    write(tmp_path / "cg" / "system.slice" / "app.service" / "cpu.max", cpu_max)
    assert cgroup_cpu_quota(tmp_path / "cg", tmp_path / "proc") == quota


def test_cgroup_v2_in_a_container_namespace_reads_the_mounts_root(tmp_path):
    write(tmp_path / "proc", "0::/\n")
    write(tmp_path / "cg" / "cpu.max", "50000 100000\n")
    assert cgroup_cpu_quota(tmp_path / "cg", tmp_path / "proc") == 0.5
    # Half a CPU still gets one child; the quota caps what the affinity allows.
    assert available_cpus(str(tmp_path / "cg"), str(tmp_path / "proc")) == 1


def test_cgroup_v1_cfs_quota(tmp_path):
    write(tmp_path / "proc", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n")
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "100000\n")
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_quota(tmp_path / "cg", tmp_path / "proc") == 1.0
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "-1\n")
    assert cgroup_cpu_quota(tmp_path / "cg", tmp_path / "proc") is None  # no quota


def test_no_cgroup_files_means_no_quota(tmp_path):
    assert cgroup_cpu_quota(tmp_path / "none", tmp_path / "none") is None
