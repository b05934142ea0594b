"""What a new user meets in the first hour: which queues a worker works, enqueue by name
with options, arguments checked at enqueue, six-field cron with seconds first, --version,
one-line errors for a bad namespace or Redis URL, and async generators refused (async def jobs run)."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime
from importlib import metadata

import pytest
from core_util import queued, ran, run_worker_until, wait_for
from worker_process import Process

import cogworker
from cogworker.client import jobs as job_module
from cogworker.cron import ticker as cron
from cogworker.launch.flags import app_queues

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS_DIR)
APP = "apps.first_hour"


def load_app(fresh: bool = True):
    """Imports (or re-imports) the first-hour app into this process's registries; the
    conftest fixture takes its jobs and entries out again after the test."""
    if fresh:
        job_module.registry.clear()
        cron.entries.clear()
    module = sys.modules.get(APP)
    return importlib.reload(module) if module else importlib.import_module(APP)


def command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": TESTS_DIR, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, env=full_env, cwd=TESTS_DIR
    )


# -- 1. queues: without -q, every queue the app declares ----------------------------------------


def test_without_q_every_declared_queue_and_default_with_equal_weights(caplog):
    load_app()
    assert app_queues(None) == [("default", 1), ("critical", 1), ("cpu", 1), ("low", 1)]
    assert "queues: default,critical,cpu,low" in caplog.text


def test_only_default_declared_keeps_the_plain_default_queue():
    job_module.registry.clear()
    cron.entries.clear()

    @cogworker.job
    def plain(x):
        return x

    assert app_queues(None) == [("default", None)]


def test_with_q_each_job_and_entry_left_out_is_named_in_a_warning(caplog):
    load_app()
    assert app_queues(["critical", "default"]) == [("critical", None), ("default", None)]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("job apps.first_hour.crunch uses queue 'cpu'" in w for w in warned), warned
    assert any("job apps.first_hour.report uses queue 'low'" in w for w in warned), warned
    assert any("periodic entry report-5s uses queue 'low'" in w for w in warned), warned
    assert not any("charge" in w or ".add " in w for w in warned), warned


def _enqueue_one_per_queue(app) -> set[str]:
    app.add.enqueue(1, 2)
    app.charge.enqueue(7, amount=5)
    app.crunch.enqueue(10)
    return {"add:1:2", "charge:7:5", "crunch:10"}


def test_prefork_without_q_runs_jobs_of_every_queue_and_the_periodic_entry(own_config, masters):
    app = load_app()
    master = masters(module=APP, procs=2)
    expected = _enqueue_one_per_queue(app)
    r = own_config.redis()
    assert wait_for(lambda: expected <= set(ran(r)) and "report:every-5s" in ran(r), 20), (ran(r), master.output())
    assert "queues: default,critical,cpu,low" in master.output()
    master.signal(signal.SIGTERM)
    assert master.wait_exit() == 0


def test_prefork_with_q_warns_at_boot_about_what_it_leaves_out(own_config, masters):
    master = masters(module=APP, procs=1, args=("-q", "default"))
    assert wait_for(lambda: "periodic entry report-5s uses queue 'low'" in master.output(), 15), master.output()
    out = master.output()
    assert "job apps.first_hour.charge uses queue 'critical'" in out
    assert "job apps.first_hour.crunch uses queue 'cpu'" in out


def test_single_process_worker_without_q_runs_every_queue(own_config, own_redis):
    app = load_app()
    worker = Process("cogworker.worker", APP, url=own_redis.url)
    try:
        expected = _enqueue_one_per_queue(app)
        r = own_config.redis()
        assert wait_for(lambda: expected <= set(ran(r)) and "report:every-5s" in ran(r), 20), worker.output()
        assert "queues: default,critical,cpu,low" in worker.output()
    finally:
        assert worker.stop() == 0


# -- 2. enqueue by name, with options ----------------------------------------------------------


def test_by_name_unregistered_takes_options(config):
    r = config.redis()
    name = "elsewhere.jobs.add"
    assert name not in job_module.registry
    handle = cogworker.by_name(name, queue="critical", retry=3)
    jid = handle.enqueue(1, 2)
    [payload] = queued(r, config, "critical")
    assert (payload["jid"], payload["class"], payload["args"], payload["retry"]) == (jid, name, [1, 2], 3)
    assert handle.options(queue="low", timeout=9).enqueue(x=1)
    [low] = queued(r, config, "low")
    assert (low["retry"], low["timeout"], low["kwargs"]) == (3, 9, {"x": 1})
    handle.enqueue_in(60, 3)
    handle.enqueue_at(datetime(2100, 1, 1, tzinfo=UTC), 4)
    scheduled = [json.loads(raw) for raw in r.zrange(config.keys.schedule, 0, -1)]
    assert [(p["queue"], p["args"]) for p in scheduled] == [("critical", [3]), ("critical", [4])]
    jids = handle.enqueue_many([(5,), ((6,), {"z": 1})])
    assert len(jids) == 2 and all(jids)
    assert [p["args"] for p in queued(r, config, "critical")] == [[6], [5], [1, 2]]
    with pytest.raises(cogworker.ConfigurationError, match="unknown job option"):
        cogworker.by_name(name, queu="x")


def test_a_registered_jobs_declared_options_apply_by_name(config):
    app = load_app()
    r = config.redis()
    cogworker.enqueue("apps.first_hour.charge", 1, amount=2)
    cogworker.by_name("apps.first_hour.charge").enqueue(3)
    cogworker.by_name("apps.first_hour.charge", retry=0).enqueue(4)
    payloads = queued(r, config, "critical")
    assert [(p["args"], p["retry"]) for p in payloads] == [([4], 0), ([3], 3), ([1], 3)]
    assert cogworker.by_name("apps.first_hour.charge").job is app.charge


# -- 3. arguments checked against the signature at enqueue ---------------------------------------


def test_wrong_arguments_raise_at_enqueue_and_write_nothing(config):
    app = load_app()
    r = config.redis()
    attempts = [
        lambda: app.add.enqueue(1),
        lambda: app.add.enqueue(1, 2, 3),
        lambda: app.add.enqueue(1, 2, z=3),
        lambda: app.charge.enqueue(1, 2),  # amount is keyword-only
        lambda: app.add.enqueue_in(10, 1),
        lambda: app.add.enqueue_at(time.time() + 10, 1),
        lambda: app.add.options(queue="low").enqueue(1),
        lambda: app.add.enqueue_many([(1, 2), (3, 4), (5,)]),  # all or nothing
        lambda: cogworker.enqueue("apps.first_hour.add", 1),
        lambda: cogworker.enqueue_at("apps.first_hour.add", time.time() + 10, 1),
        lambda: cogworker.by_name("apps.first_hour.add", queue="low").enqueue(1, 2, 3),
        lambda: cogworker.by_name("apps.first_hour.add").enqueue_many([(1, 2), (1,)]),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError, match=r"apps\.first_hour\.(add|charge)\(.*\) can't take these arguments"):
            attempt()
    assert r.dbsize() == 0
    assert app.add.enqueue(1, y=2) and app.charge.enqueue(1, amount=3)


def test_a_periodic_entry_with_wrong_arguments_fails_at_registration():
    app = load_app()
    with pytest.raises(TypeError, match=r"periodic entry 'nightly': apps\.first_hour\.add\(x, y\) can't take"):
        cogworker.periodic("0 3 * * *", app.add, args=(1,), name="nightly")
    with pytest.raises(TypeError, match="periodic entry 'by-name'"):
        cogworker.periodic("0 3 * * *", "apps.first_hour.charge", kwargs={"amount": 1}, name="by-name")
    assert "nightly" not in cron.entries and "by-name" not in cron.entries


# -- 4. six-field cron: seconds first ---------------------------------------------------------------


def fires(expr: str, count: int = 4) -> list[str]:
    """The first fire times after 2026-01-01 00:00:00 UTC, as the master's ticker computes them."""
    entry = cron.Entry("probe", expr, "x.y")
    ticker = cron.Ticker(cogworker.get_config(), [entry])
    t = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    out = []
    for _ in range(count):
        t = ticker.slot_and_next(entry, t)[1]
        out.append(datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S"))
    return out


def test_six_fields_read_seconds_first():
    assert fires("*/5 * * * * *") == ["00:00:05", "00:00:10", "00:00:15", "00:00:20"]
    assert fires("30 0 3 * * *", 2) == ["03:00:30", "03:00:30"]  # 03:00:30 each day
    assert fires("*/5 * * * *", 2) == ["00:05:00", "00:10:00"]  # five fields: unchanged


def test_the_example_apps_every_5s_entry_fires_every_5_seconds():
    job_module.registry.clear()
    cron.entries.clear()
    sys.path.insert(0, ROOT)
    try:
        sys.modules.pop("examples.app", None)
        importlib.import_module("examples.app")
    finally:
        sys.path.remove(ROOT)
        sys.modules.pop("examples.app", None)
    entry = cron.entries["add-every-5s"]
    assert fires(entry.cron) == ["00:00:05", "00:00:10", "00:00:15", "00:00:20"]


@pytest.mark.parametrize(
    "expr,moved",
    [
        ("* * * * * */10", "*/10 * * * * *"),  # the old README's every-10-seconds
        ("0 3 * * * 30", "30 0 3 * * *"),  # 03:00:30 in the old order
        ("* * * * * 0", "0 * * * * *"),  # every minute at :00 in the old order
        ("*/5 * * * * 0,30", "0,30 */5 * * * *"),
        ("0 9 * * * 1-5", "1-5 0 9 * * *"),  # a numbered weekday reads like seconds: names it is
    ],
)
def test_a_six_field_expression_in_the_old_order_is_refused(expr, moved):
    with pytest.raises(cogworker.ConfigurationError) as raised:
        cogworker.periodic(expr, "x.y", name="migrated")
    message = str(raised.value)
    assert "periodic entry 'migrated'" in message and "seconds come first" in message
    assert repr(moved) in message and "MON-FRI" in message
    assert "migrated" not in cron.entries


@pytest.mark.parametrize(
    "expr",
    [
        "*/10 * * * * *",
        "0 0 9 * * MON-FRI",
        "0 30 9 ? * sun,sat",
        "0 0 0 * * fri#2",
        "* * * * * *",
        "0 0 12 * * ?",
        "0 */5 * * *",
    ],
)
def test_seconds_first_expressions_are_accepted(expr):
    assert cogworker.periodic(expr, "x.y", name="ok").cron == expr


def test_an_invalid_six_field_expression_says_seconds_come_first():
    with pytest.raises(cogworker.ConfigurationError, match="'bad'.*invalid cron.*seconds come first"):
        cogworker.periodic("61 * * * * *", "x.y", name="bad")


def test_the_ticker_fires_a_seconds_first_entry_every_5_seconds(config):
    cogworker.periodic("*/5 * * * * *", "x.y", name="five", queue="q")
    ticker = cron.Ticker(config, [cron.entries["five"]])
    t0 = 1_800_000_000  # a multiple of 5
    assert ticker.slot_and_next(cron.entries["five"], t0 + 2) == (t0, t0 + 5)
    assert ticker.slot_and_next(cron.entries["five"], t0 + 5) == (t0 + 5, t0 + 10)


# -- 5. --version ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,prog",
    [
        (["cogworker.prefork.cli"], "cogworker-prefork"),
        (["cogworker.worker"], "python -m cogworker.worker"),
    ],
)
def test_version(args, prog):
    installed = metadata.version("cogworker")
    assert cogworker.__version__ == installed
    result = command(*args, "--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"{prog} {installed}"), result.stderr


def test_console_scripts_print_their_version():
    installed = metadata.version("cogworker")
    bindir = os.path.dirname(sys.executable)
    for script in ("cogworker-prefork", "cogworker"):
        result = subprocess.run([os.path.join(bindir, script), "--version"], capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stdout.strip()) == (0, f"{script} {installed}"), result.stderr


# -- 6. bad namespace / Redis URL: one line, exit 2 --------------------------------------------------


@pytest.mark.parametrize("module", ["cogworker.prefork.cli", "cogworker.worker"])
@pytest.mark.parametrize(
    "args,message",
    [
        (["--namespace", "a b"], "invalid namespace 'a b'"),
        (["--namespace", ""], "invalid namespace ''"),
        (["--redis-url", "redis://localhost:6379/abc"], "the database must be a number, got 'abc'"),
        (["--redis-url", "redis://localhost:6379/0?db=x"], "the database must be a number, got 'x'"),
        (["--redis-url", "redis://:s3cret@localhost:6379/abc"], "the database must be a number"),
    ],
)
def test_bad_namespace_or_url_is_one_line_and_exit_2(module, args, message):
    result = command(module, *args, "apps.basic")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"namespace": "a b"}, "invalid namespace"),
        ({"namespace": ""}, "invalid namespace"),
        ({"redis_url": "redis://localhost:6379/abc"}, "the database must be a number"),
    ],
)
def test_configure_refuses_them_too(config, settings, message):
    with pytest.raises(cogworker.ConfigurationError, match=message):
        cogworker.configure(**settings)
    assert cogworker.get_config() is config


# -- 8. async jobs -------------------------------------------------------------------------------------


def test_async_def_is_accepted_and_async_generators_refused_at_decoration():
    @cogworker.job
    async def fetch_page(url):
        return url

    assert fetch_page.name in job_module.registry
    with pytest.raises(cogworker.ConfigurationError, match="is an async generator"):

        @cogworker.job(queue="io")
        async def stream(url):
            yield url

    class Handler:
        async def __call__(self, x):
            yield x

    with pytest.raises(cogworker.ConfigurationError, match="is an async generator"):
        cogworker.job(Handler())
    assert not any("stream" in name for name in job_module.registry)


async def _work(x):
    await asyncio.sleep(0)
    return x


@cogworker.job(retry=0)
def returns_a_coroutine(x):
    return _work(x)  # a sync wrapper around an async body: awaited by the worker


def test_a_job_that_returns_an_awaitable_is_awaited(config):
    r = config.redis()
    job_module.registry[returns_a_coroutine.name] = returns_a_coroutine
    returns_a_coroutine.enqueue(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_worker_until(lambda: int(r.get(config.keys.stats_processed) or 0) == 1)
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert r.zcard(config.keys.dead) == 0 and r.zcard(config.keys.retry) == 0
    assert int(r.get(config.keys.stats_failed) or 0) == 0
