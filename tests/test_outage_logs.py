"""A Redis outage, seen by every process of a fleet whose app has a periodic entry: each
process (the prefork master, each child, the one-process runner) logs it once when it
starts and once when it ends, and work resumes within about a second of Redis answering
(the retry interval is capped at ``guard.MAX_BACKOFF``). Real processes, a real
redis-server killed and restarted on its port."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest
from apps.pf_log import events
from prefork_harness import wait_for
from worker_process import Process

from cogworker.client.enqueue import push
from cogworker.client.jobs import JobOptions, build_payload
from cogworker.store import guard

DOWN_LINE = re.compile(r"^\S+ \S+ (\d+) ERROR .*(retrying with backoff|retrying every tick)", re.M)
BACK_LINE = re.compile(r"^\S+ \S+ (\d+) WARNING .*Redis is back after", re.M)
OUTAGE = 7.0  # seconds: the old backoff (0.2 s doubling to 5 s) tried at 6.2 s, next at 11.2 s


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "runs.log")


def test_the_retry_interval_is_capped_near_a_second():
    """A process tries Redis again at most ``MAX_BACKOFF`` after its last try, however long
    the outage: it notices Redis back within about a second, without hammering it."""
    schedule = [guard.backoff(n) for n in range(1, 40)]
    assert schedule[:3] == [0.2, 0.4, 0.8]  # short outages: quick tries, doubling
    assert max(schedule) == guard.MAX_BACKOFF <= 1.0
    assert min(schedule) >= 0.2  # never a hot loop


def outage_then_probe(own_redis, log):
    """Kills Redis for ``OUTAGE`` seconds, restarts it on its port; returns how long after
    it answered a job enqueued then started."""
    time.sleep(2.0)  # past boot: the periodic entry has fired, the children fetch
    own_redis.kill()
    time.sleep(OUTAGE)
    own_redis.restart()  # returns once it answers a PING
    back = time.time()
    push(build_payload("apps.pf_outage.logged", ("probe",), {}, JobOptions()))
    started = wait_for(lambda: [e for e in events(log) if e[1] == "probe"], 20, what="the probe started")
    return started[0][3] - back


def outage_lines(text):
    return "\n".join(line for line in text.splitlines() if DOWN_LINE.match(line) or BACK_LINE.match(line))


def per_process(text):
    return Counter(m.group(1) for m in DOWN_LINE.finditer(text)), Counter(m.group(1) for m in BACK_LINE.finditer(text))


def test_prefork_each_process_logs_an_outage_once_each_way_and_resumes_at_once(own_redis, own_config, masters, log):
    m = masters(module="apps.pf_outage", procs=2, env={"PF_LOG": log})
    children = m.wait_children()
    took = outage_then_probe(own_redis, log)
    pids = {str(m.pid), *map(str, children)}
    # Every process has noticed it back (a child idle in a blocking fetch, too).
    wait_for(lambda: set(per_process(m.output())[1]) >= pids, 10, what="each process logging Redis back")
    time.sleep(2.5)  # room for a second, wrong "back" or "unavailable" (the cron ticks each second)
    down, back = per_process(m.output())
    print(f"probe started {took:.2f}s after Redis answered; down {dict(down)}, back {dict(back)}")
    assert set(down) == pids and set(back) == pids, outage_lines(m.output())
    assert all(n == 1 for n in down.values()) and all(n == 1 for n in back.values()), outage_lines(m.output())
    # Within a second of Redis answering (the capped retry), with room for a slow machine;
    # the old 5 s cap left idle children 3-4 s behind.
    assert took < 2.5, f"the first job started {took:.2f}s after Redis answered"
    assert m.alive()


def test_the_runner_logs_an_outage_once_each_way(own_redis, own_config, log):
    worker = Process("cogworker.worker", "apps.pf_outage", url=own_redis.url, env={"PF_LOG": log})
    try:
        wait_for(lambda: [e for e in events(log) if e[1] == "periodic"], 20, what="the periodic entry run")
        took = outage_then_probe(own_redis, log)
        wait_for(lambda: per_process(worker.output())[1], 10, what="Redis back logged")
        time.sleep(2.5)
        down, back = per_process(worker.output())
        print(f"probe started {took:.2f}s after Redis answered; down {dict(down)}, back {dict(back)}")
        assert list(down.values()) == [1] and list(back.values()) == [1], outage_lines(worker.output())
        assert took < 2.5, f"the first job started {took:.2f}s after Redis answered"
    finally:
        worker.stop()
