"""Explicit effects: cogworker's own behaviour on a job's events (unique locks, a periodic
entry's running lock, stats, status and history) is subscribed where each process is put
together, never by importing a module. Importing any cogworker module subscribes nothing
(each in a fresh process); a real prefork master, its child and the single-process runner
each have the full list, and their jobs' locks are released, their runs counted, their
history written."""

from __future__ import annotations

import json
import os
import pkgutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apps import effects_app
from prefork_harness import wait_for

import cogworker
from cogworker.api.status import state

TESTS = Path(__file__).parent
ROOT = TESTS.parent

# Each event's built-in subscribers, as each kind of process must have them (the app's own
# hooks come on top). Named, not taken from the code: the list is what this test pins.
BUILT_IN = {
    "started": ["cogworker.lifecycle.unique._on_started", "cogworker.cron.claims._on_started"],
    "succeeded": [
        "cogworker.lifecycle.history._on_success",
        "cogworker.lifecycle.stats._count",
        "cogworker.lifecycle.unique._on_succeeded",
        "cogworker.cron.claims._on_finished",
    ],
    "retrying": [
        "cogworker.lifecycle.history._on_event",
        "cogworker.lifecycle.stats._count",
        "cogworker.lifecycle.unique._on_filed",
        "cogworker.cron.claims._on_retrying",
    ],
    "dead": [
        "cogworker.lifecycle.history._on_event",
        "cogworker.lifecycle.stats._count",
        "cogworker.lifecycle.unique._on_filed",
        "cogworker.cron.claims._on_finished",
    ],
    "given_back": ["cogworker.lifecycle.history._on_event"],
    "orphaned": ["cogworker.lifecycle.history._on_event"],
    "suspended": ["cogworker.lifecycle.history._on_event"],
}

# Imports each named module in a process forked from one that has imported nothing of
# cogworker, and prints what that import subscribed (or why it failed). The third-party
# libraries are imported once, before the forks (they subscribe nothing to cogworker's
# hooks), so each fork pays for its cogworker modules only: 220 forks importing redis,
# Starlette and Django anew took over the test's two minutes on a loaded machine.
IMPORT_EACH = r"""
import importlib, json, os, sys

for library in ("redis", "redis.asyncio", "croniter", "psutil", "setproctitle", "jinja2", "starlette.applications",
                "starlette.routing", "django", "django.conf", "django.db", "prometheus_client", "opentelemetry.trace",
                "asyncio", "logging.handlers", "hashlib", "uuid", "signal", "selectors"):
    try:
        importlib.import_module(library)
    except ImportError:
        pass
out = {}
for name in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            from cogworker.core import hooks
            got = {k: [f"{h.__module__}.{h.__qualname__}" for h, _ in v] for k, v in hooks._subscribers.items() if v}
            message = {"subscribed": got}
        except BaseException as exc:
            message = {"error": repr(exc)}
        os.write(w, json.dumps(message).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out[name] = json.loads(data)
print(json.dumps(out))
"""


def all_modules() -> list[str]:
    return sorted({"cogworker", *(m.name for m in pkgutil.walk_packages(cogworker.__path__, "cogworker."))})


def test_importing_any_module_subscribes_nothing():
    names = all_modules()
    assert "cogworker.lifecycle.unique" in names and "cogworker.prefork.master" in names and len(names) > 100
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        # cogworker.django_worker sets Django up on import: the example project's settings.
        "DJANGO_SETTINGS_MODULE": "examples.django_site.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=600,
        check=True,
    )
    results = json.loads(done.stdout)
    assert sorted(results) == names
    failed = {name: r["error"] for name, r in results.items() if "error" in r}
    assert failed == {}
    subscribing = {name: r["subscribed"] for name, r in results.items() if r["subscribed"]}
    assert subscribing == {}


def missing_built_ins(hooks_of_process: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        event: [name for name in names if name not in hooks_of_process.get(event, [])]
        for event, names in BUILT_IN.items()
        if any(name not in hooks_of_process.get(event, []) for name in names)
    }


def records(config, key="test:effects"):
    return [json.loads(raw) for raw in config.redis().lrange(key, 0, -1)]


def lock_of(config, job, *args):
    from cogworker.lifecycle import unique

    return config.keys.unique(unique.digest({"class": job.name, "queue": "default", "args": list(args), "kwargs": {}}))


def run_the_jobs(config) -> dict[str, str]:
    """A unique job that succeeds, one that goes to dead, and a periodic entry's job
    holding its running lock; returns their jids."""
    r = config.redis()
    jids = {"ok": effects_app.unique_ok.enqueue("a"), "dead": effects_app.unique_dead.enqueue("d")}
    assert r.exists(lock_of(config, effects_app.unique_ok, "a"))
    # A periodic entry's job as its ticker pushes it: the entry's running lock held by its jid.
    jids["periodic"] = "p" * 24
    payload = {
        "class": effects_app.plain.name,
        "args": ["p"],
        "kwargs": {},
        "jid": jids["periodic"],
        "queue": "default",
        "retry": 0,
        "periodic_pjid": "eff",
        "created_at": time.time(),
        "enqueued_at": time.time(),
    }
    r.set(config.keys.periodic_running("eff"), jids["periodic"], ex=3600)
    r.lpush(config.keys.queue("default"), json.dumps(payload))
    return jids


def check_the_effects(config, jids) -> list[dict]:
    r = config.redis()
    wait_for(lambda: r.llen("test:effects") == 3, 30, what="3 runs")
    wait_for(lambda: not r.exists(lock_of(config, effects_app.unique_ok, "a")), 15, what="unique lock released")
    wait_for(lambda: not r.exists(lock_of(config, effects_app.unique_dead, "d")), 15, what="dead's lock released")
    wait_for(lambda: not r.exists(config.keys.periodic_running("eff")), 15, what="running lock released")
    wait_for(lambda: state(jids["ok"], config) == "succeeded", 15, what="success in the status")
    wait_for(lambda: state(jids["dead"], config) == "dead", 15, what="dead in the status")
    went = [json.loads(raw)["went"] for raw in r.lrange(config.keys.history(jids["dead"]), 0, -1)]
    assert went == ["dead"]
    wait_for(
        lambda: int(r.get(config.keys.stats_processed) or 0) == 2 and int(r.get(config.keys.stats_failed) or 0) == 1,
        15,
        what="stats counted",
    )
    ran = records(config)
    for run in ran:
        assert missing_built_ins(run["hooks"]) == {}
    return ran


def test_a_prefork_master_and_its_child_have_the_built_in_subscribers(own_config, masters):
    m = masters(module="apps.effects_app", procs=1, args=["--timeout", "2"])
    (child,) = m.wait_children(1)
    ran = check_the_effects(own_config, run_the_jobs(own_config))
    assert {run["pid"] for run in ran} == {child}
    # The master's own filings: its child dies running a job; the master requeues it, and
    # the orphaning's hooks run in the master (the app's own hook, and history's).
    r = own_config.redis()
    jid = effects_app.unique_slow.enqueue("s", 60)
    wait_for(lambda: r.llen("test:effects") == 4, 30, what="the slow job started")
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: r.llen("test:orphaned") == 1, 30, what="the orphaning filed")
    (orphaned,) = records(own_config, "test:orphaned")
    assert orphaned["pid"] == m.pid and orphaned["jid"] == jid
    assert missing_built_ins(orphaned["hooks"]) == {}
    assert "apps.effects_app.on_orphaned" in orphaned["hooks"]["orphaned"]
    wait_for(lambda: r.llen("test:effects") == 5, 30, what="the requeued job ran again in a new child")
    assert r.exists(lock_of(own_config, effects_app.unique_slow, "s", 60))  # not done: still locked
    m.signal(signal.SIGTERM)
    assert m.wait_exit(40) == 0


@pytest.fixture
def runner(own_redis):
    log = open(TESTS / f".runner-{os.getpid()}-{time.time_ns()}.log", "wb")
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cogworker.worker", "--redis-url", own_redis.url, "apps.effects_app"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(TESTS),
        start_new_session=True,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    log.close()
    os.unlink(log.name)


def test_the_single_process_runner_has_the_built_in_subscribers(own_config, runner):
    ran = check_the_effects(own_config, run_the_jobs(own_config))
    assert {run["pid"] for run in ran} == {runner.pid}
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(40) == 0


# Where each process is put together, in a fresh interpreter: importing the module that
# assembles it subscribes nothing; putting it together installs the full list.
ASSEMBLE = r"""
import json, sys
from cogworker.core import hooks

def listed():
    return {k: [f"{h.__module__}.{h.__qualname__}" for h, _ in v] for k, v in hooks._subscribers.items() if v}

kind, url = sys.argv[1], sys.argv[2]
if kind == "master":
    import cogworker
    from cogworker.prefork.master import Master, Settings
    before = listed()
    Master(Settings(module="apps.effects_app", procs=1, queues=[("default", None)]), cogworker.configure(redis_url=url))
elif kind == "worker":  # a Worker made in a process of its own (the benches')
    import cogworker
    from cogworker.engine.loop import Worker
    before = listed()
    Worker([("default", None)], config=cogworker.configure(redis_url=url))
else:
    from cogworker.worker import runner
    before = listed()
    runner.boot(runner.parse_args(["--redis-url", url, "apps.effects_app"]))
print(json.dumps({"before": before, "after": listed()}))
"""


@pytest.mark.parametrize("kind", ["master", "runner", "worker"])
def test_putting_a_process_together_installs_the_list_importing_it_does_not(own_redis, kind):
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    env.pop("COGWORKER_REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", ASSEMBLE, kind, own_redis.url],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(TESTS),
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == {}
    assert missing_built_ins(seen["after"]) == {}
