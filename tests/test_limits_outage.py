"""A Concurrency slot whose release fails (Redis killed and restarted, AOF on; or a Sentinel
master killed under ``wait_replicas=1``) is released once Redis answers again, by the live
process that holds it: the limiter doesn't stall until that process is gone. Real prefork
master and children, real redis-servers killed with SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from apps.pf_faults import events
from prefork_harness import Master, in_progress_total, wait_for
from redis_server import RedisServer
from sentinel_util import sentinel_config, sentinels  # noqa: F401 (fixtures)
from test_limits_prefork import ended, most_at_once, started

import cogworker
from cogworker.client.enqueue import push_many
from cogworker.client.jobs import JobOptions, build_payload

JOBS = 20
LEASE = 60.0  # how long a live holder's slot would otherwise stay (the old behaviour: 60-90 s)


@pytest.fixture
def aof_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own that keeps every write across a SIGKILL."""
    server = RedisServer(args=("--appendonly", "yes", "--appendfsync", "always")).start()
    yield server
    server.cleanup()


def running(runs: list[tuple[str, str, int, float]]) -> list[str]:
    done = {e[1] for e in runs if e[0] == "end"}
    return [e[1] for e in runs if e[0] == "start" and e[1] not in done]


def push_jobs() -> None:
    opts = JobOptions()
    push_many([build_payload("apps.limited.one_at_a_time", (f"j{i}",), {}, opts) for i in range(JOBS)])


def kill_mid_job(log: str, kill: Callable[[], object]) -> float:
    """Runs ``kill`` 0.3 s into the second job (so it ends, and its release fails, in the
    outage) and waits for that job's end; returns when the kill was."""
    wait_for(lambda: len(started(events(log), "j")) == 2 and running(events(log)), 30, what="the second job")
    time.sleep(0.3)
    kill()
    killed_at = time.time()
    held_by = running(events(log))
    wait_for(lambda: ended(events(log), held_by[0]), 10, what="the job to end in the outage")
    return killed_at


def check_after(log: str, back_at: float, config: cogworker.Config, master: Master) -> float:
    """Every job done well within the lease, never two at once, none lost, the slot free;
    returns how long the limiter stalled after Redis was back."""
    wait_for(lambda: len({e[1] for e in ended(events(log), "j")}) == JOBS, LEASE - 15, 0.1, what="every job done")
    runs = events(log)
    after = sorted(e[3] for e in started(runs, "j") if e[3] > back_at)
    stalled = after[0] - back_at if after else float("inf")
    print(f"limiter stalled {stalled:.2f}s after Redis came back; all {JOBS} done {runs[-1][3] - back_at:.2f}s after")
    assert most_at_once(runs) == 1  # the limit held throughout
    assert {e[1] for e in started(runs, "j")} == {f"j{i}" for i in range(JOBS)}  # nothing lost
    r = config.redis()
    _, held, _, _ = config.keys.limit_keys("one")
    wait_for(lambda: r.zcard(held) == 0, 10, what="the slot free")
    wait_for(lambda: in_progress_total(config) == 0, 10, what="lists drained")
    assert r.zcard(config.keys.dead) == 0 and r.zcard(config.keys.retry) == 0
    out = master.output()
    print("\n".join(line for line in out.splitlines() if "limit slots" in line))
    assert "couldn't release the limit slots" in out and "released the limit slots held by a job" in out
    assert master.alive()
    return stalled


def test_a_release_lost_in_an_outage_is_retried_and_the_limiter_never_stalls(aof_redis, tmp_path):
    log = str(tmp_path / "runs.log")
    cogworker.config._config = None
    config = cogworker.configure(redis_url=aof_redis.url, socket_timeout=2.0)
    master = Master(aof_redis.url, module="apps.limited", procs=3, env={"PF_LOG": log})
    try:
        master.wait_children()
        push_jobs()
        killed_at = kill_mid_job(log, aof_redis.kill)
        time.sleep(max(0.0, killed_at + 2.0 - time.time()))
        aof_redis.start()
        check_after(log, time.time(), config, master)
    except BaseException:
        print("\n".join(master.output().splitlines()[-150:]))
        raise
    finally:
        master.stop()


def test_a_release_lost_in_a_sentinel_failover_is_retried(sentinels, sentinel_config, tmp_path):  # noqa: F811
    """The master SIGKILLed mid-job under ``wait_replicas=1``: no write is confirmed until
    the failover is done and the old master has rejoined as the new one's replica."""
    log = str(tmp_path / "runs.log")
    env = {"PF_LOG": log, "COGWORKER_WAIT_REPLICAS": "1", "COGWORKER_WAIT_TIMEOUT": "1.0"}
    master = Master(sentinels.url(), module="apps.limited", procs=3, env=env)
    try:
        master.wait_children()
        push_jobs()
        old: list[RedisServer] = []
        kill_mid_job(log, lambda: old.append(sentinels.kill_master()))
        sentinels.wait_failover(old[0].port)
        sentinels.rejoin(old[0])
        check_after(log, time.time(), sentinel_config, master)
    except BaseException:
        print("\n".join(master.output().splitlines()[-150:]))
        raise
    finally:
        master.stop()
