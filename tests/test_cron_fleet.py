"""Periodic jobs with real ``cogworker-prefork`` masters on one real Redis. Every assert
reads Redis: the fired payloads wait on queues no child works (or runs are recorded by
the jobs themselves)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cogworker
from cogworker.cron import ticker as cron

TESTS = Path(__file__).parent


class Master:
    """One ``cogworker-prefork`` master (its own process group), log kept for failures."""

    def __init__(self, url: str, module: str, *args: str, queues=("idle",), procs: int = 1) -> None:
        self.log_path = TESTS / f".cron-master-{os.getpid()}-{time.time_ns()}.log"
        self.log = open(self.log_path, "wb")
        env = {**os.environ, "PYTHONPATH": str(TESTS)}
        env.pop("COGWORKER_REDIS_URL", None)
        cmd = [
            sys.executable,
            "-m",
            "cogworker.prefork.cli",
            "--procs",
            str(procs),
            "--redis-url",
            url,
            *(a for q in queues for a in ("-q", q)),
            *args,
            module,
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=str(TESTS), start_new_session=True
        )

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful: TERM, and wait for the exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(10)
        self.log.close()
        self.log_path.unlink(missing_ok=True)


@pytest.fixture
def masters():
    started: list[Master] = []

    def start(*args, **kwargs) -> Master:
        master = Master(*args, **kwargs)
        started.append(master)
        return master

    yield start
    for master in started:
        # Shown by pytest only when the test failed.
        sys.stderr.write(f"--- master {master.proc.pid} log ---\n{master.output()[-4000:]}\n")
        master.kill()


def wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def sleep_until(epoch: float) -> None:
    time.sleep(max(0.0, epoch - time.time()))


def fired(config, queue: str, pjid: str | None = None) -> list[dict]:
    jobs = [json.loads(raw) for raw in config.redis().lrange(config.keys.queue(queue), 0, -1)]
    return sorted((j for j in jobs if pjid is None or j["periodic_pjid"] == pjid), key=lambda j: j["periodic_slot"])


def slots(jobs: list[dict]) -> list[int]:
    return [j["periodic_slot"] for j in jobs]


def assert_every_slot_once(slot_list: list[int]) -> None:
    assert slot_list, "nothing fired"
    assert slot_list == list(range(slot_list[0], slot_list[-1] + 1)), f"gaps or repeats in {slot_list}"


def test_three_masters_fire_every_second_exactly_once(config, masters):
    fleet = [masters(config.redis_url, "apps.cron_mixed") for _ in range(3)]
    wait_for(lambda: fired(config, "cronq"), 15, "a first firing")
    time.sleep(20)
    assert all(m.proc.poll() is None for m in fleet)
    healthy = fired(config, "cronq", "healthy")
    assert_every_slot_once(slots(healthy))
    assert len(healthy) >= 20
    # Each slot is enqueued close to its time (claimed by whichever master was first).
    delays = sorted(j["enqueued_at"] - j["periodic_slot"] for j in healthy[1:])
    assert delays[len(delays) // 2] < 0.1 and delays[-1] < 1.0, delays
    winners = {line.split()[2] for m in fleet for line in m.output().splitlines() if "periodic healthy: fired" in line}
    sys.stderr.write(
        f"slots won by {len(winners)} masters; delay p50={delays[len(delays) // 2]:.3f}s max={delays[-1]:.3f}s\n"
    )


def test_slot_passing_while_redis_is_paused_fires_once_after_resume(config, masters, redis_server):
    masters(config.redis_url, "apps.cron_mixed")
    wait_for(lambda: fired(config, "cronq"), 15, "a first firing")
    boundary = int(time.time()) + 2
    sleep_until(boundary - 0.4)
    redis_server.pause()
    try:
        sleep_until(boundary + 0.6)
    finally:
        redis_server.resume()
    resumed = time.time()
    sleep_until(boundary + 2.5)
    healthy = fired(config, "cronq", "healthy")
    assert_every_slot_once(slots(healthy))
    assert slots(healthy)[-1] >= boundary + 2
    (during,) = [j for j in healthy if j["periodic_slot"] == boundary]
    assert during["enqueued_at"] >= resumed - 0.05


def test_catch_up_fires_one_missed_slot_per_entry_setting(config, masters):
    # The master's own setting is off; cu-on overrides it, cu-default follows it.
    args = ("--no-catch-up",)
    first = masters(config.redis_url, "apps.cron_catchup", *args)
    wait_for(
        lambda: {j["periodic_pjid"] for j in fired(config, "cronq")} >= {"cu-on", "cu-off", "cu-default"},
        15,
        "every entry firing",
    )
    first.stop()
    last = max(slots(fired(config, "cronq")))
    # Down over two slots; back 0.3 s after the third, so a catch-up can't be a regular firing.
    restart_slot = last + 6
    while restart_slot < time.time() + 0.2:
        restart_slot += 3
    sleep_until(restart_slot + 0.3)
    masters(config.redis_url, "apps.cron_catchup", *args)

    def after(pjid: str) -> list[int]:
        return [s for s in slots(fired(config, "cronq", pjid)) if s > last]

    # Until each entry fired a regular slot. A loaded machine may boot the master a slot or
    # two late: the catch-up is then a later slot, still the latest one missed.
    wait_for(lambda: len(after("cu-on")) >= 2 and after("cu-off") and after("cu-default"), 20, "regular firings")
    caught = after("cu-on")[0]
    (catch_up,) = [j for j in fired(config, "cronq", "cu-on") if j["periodic_slot"] == caught]
    assert caught >= restart_slot and catch_up["enqueued_at"] >= restart_slot + 0.3  # fired at boot, not by the first
    assert catch_up["enqueued_at"] - caught < 3  # the latest slot missed, not an older one
    assert after("cu-on")[:2] == [caught, caught + 3]  # exactly one catch-up firing, then on time
    assert after("cu-off")[0] == caught + 3  # no catch-up
    assert after("cu-default")[0] == caught + 3  # the master's own setting: off


def test_unique_entry_never_overlaps_a_long_run(config, masters):
    master = masters(config.redis_url, "apps.cron_unique", queues=("default",))
    r = config.redis()
    wait_for(lambda: r.llen("test:cron_runs") >= 3, 20, "three runs")
    master.stop()
    runs = sorted(json.loads(x)[1:] for x in r.lrange("test:cron_runs", 0, -1))
    for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
        assert start >= end, f"overlapping runs: {runs}"
    # Slots while a run was queued or running were skipped, not queued up behind it.
    assert r.llen(r"cogworker:queue:default") <= 1
    holder = r.get(config.keys.periodic_running("long-unique"))
    queued = [json.loads(x)["jid"] for x in r.lrange(config.keys.queue("default"), 0, -1)]
    assert holder is None or [holder.decode()] == queued  # released, or held by the one waiting


def test_disable_then_enable_at_run_time(config, masters):
    masters(config.redis_url, "apps.cron_mixed")
    wait_for(lambda: fired(config, "toggledq"), 15, "a first firing")
    cogworker.disable("toggled")
    disabled_at = time.time()
    time.sleep(2.5)
    cogworker.enable("toggled")
    enabled_at = time.time()
    time.sleep(2.2)
    toggled = slots(fired(config, "toggledq"))
    assert not [s for s in toggled if disabled_at + 1 <= s < enabled_at - 1], toggled
    assert [s for s in toggled if s > enabled_at], "not firing again after enable"
    assert_every_slot_once(slots(fired(config, "cronq", "healthy")))


def test_failed_push_is_rolled_back_and_fires_once_fixed_while_others_keep_firing(config, masters):
    r = config.redis()
    broken_queue = config.keys.queue("brokenq")
    r.set(broken_queue, "not a list")
    master = masters(config.redis_url, "apps.cron_mixed")
    wait_for(lambda: "periodic broken failed" in master.output(), 15, "the broken entry failing")
    time.sleep(1.5)
    # Rolled back: nothing claimed, nothing locked, while the slots keep coming.
    last = int(r.get(config.keys.periodic_last_slot("broken")) or 0)
    assert last < time.time() - 1.5
    assert r.keys(config.keys.periodic_prefix + "lock:broken:*") == []
    r.delete(broken_queue)
    fixed_at = time.time()
    wait_for(lambda: fired(config, "brokenq"), 10, "the broken entry firing once fixed")
    time.sleep(2.2)
    broken = slots(fired(config, "brokenq"))
    # The claimed (rolled-back) slot fires once it can be pushed; of those that passed
    # during the backoff, the latest fires and the others are skipped, in one log line;
    # then every second again.
    rolled_back = int(re.search(r"periodic broken: rolled back slot (\d+)", master.output()).group(1))
    assert broken[0] == rolled_back and broken[0] > fixed_at - 5
    assert_every_slot_once(broken[1:])
    assert len(broken) >= 4
    assert f"periodic broken: {broken[1] - broken[0] - 1} missed slots skipped" in master.output()
    assert_every_slot_once(slots(fired(config, "cronq", "healthy")))
    assert cron.schedule(config)["broken"]["last_slot"] == broken[-1]


def test_single_process_runner_ticks_too(config):
    """``python -m cogworker.worker`` runs the same ticker in its housekeeping thread."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "apps.cron_mixed", "-q", "idle", "--redis-url", config.redis_url],
        cwd=str(TESTS),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(fired(config, "cronq")) >= 3, 15, "three firings")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    assert_every_slot_once(slots(fired(config, "cronq", "healthy")))
    assert cron.schedule(config)["healthy"]["last_slot"] == slots(fired(config, "cronq", "healthy"))[-1]
