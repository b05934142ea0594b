"""Django's Tasks framework on cogworker (``cogworker.django.CogworkerBackend``), every
point of its documentation against a real prefork worker (``cogworker.django.worker``)
and a real Redis: sync and async tasks, ``takes_context``, defer (``run_after``),
results (status, times, return value, arguments, attempts, worker ids), errors, the
three signals, unknown ids, invalid tasks, ``aenqueue``/``aget_result``, retries, the
example project's view, and a task's job under cogworker's own faces.

Each enqueuing side runs as a process of its own (tests/django_tasks_driver.py), since
Django's settings are per process. The same file runs on Django 6 (``django.tasks``,
Python 3.12 and later) and on Django 5.2 with the ``django-tasks`` backport.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django")
from importlib.util import find_spec  # noqa: E402

if find_spec("django.tasks") is None and find_spec("django_tasks") is None:
    pytest.skip("no Tasks framework: Django 6, or the django-tasks backport", allow_module_level=True)

from cogworker.testing.servers import PreforkWorker, RedisServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SETTINGS = "apps.djtasks_settings"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Site:
    """The worker, its Redis, the signal log, and the driver that enqueues and reads."""

    def __init__(self, server: RedisServer, signals: Path) -> None:
        self.server, self.signals = server, signals
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "REDIS_URL": server.url,
            "DJTASKS_SIGNAL_LOG": str(signals),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        }
        self.env.pop("COGWORKER_REDIS_URL", None)

    def drive(self, *args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(TESTS / "django_tasks_driver.py"), *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def enqueue(self, task: str, *args: Any, run_after: float | None = None, mode: str = "", **kwargs: Any) -> Any:
        return self.drive("enqueue", task, json.dumps(args), json.dumps(kwargs), str(run_after or ""), mode)

    def wait(self, result_id: str, mode: str = "") -> dict[str, Any]:
        return self.drive("wait", result_id, mode)

    def signal_log(self, result_id: str) -> list[dict[str, Any]]:
        lines = self.signals.read_text().splitlines() if self.signals.exists() else []
        return [row for row in map(json.loads, lines) if row["id"] == result_id]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    server = RedisServer().start()
    made = Site(server, tmp_path_factory.mktemp("djtasks") / "signals.jsonl")
    worker_env = {k: v for k, v in made.env.items() if k not in os.environ or os.environ[k] != v}
    worker = PreforkWorker(
        server.url, "cogworker.django.worker", procs=2, args=("-q", "reports", "-q", "default"), env=worker_env
    )
    try:
        yield made
    finally:
        worker.stop()
        server.cleanup()


def test_a_task_runs_and_its_result_reads_back(site: Site) -> None:
    made = site.enqueue("add", 2, b=3)
    assert made["status"] == "READY" and made["args"] == [2] and made["kwargs"] == {"b": 3}
    assert made["enqueued_at"] is not None and made["started_at"] is None
    done = site.wait(made["id"])
    assert done["status"] == "SUCCESSFUL", done
    assert done["return_value"] == 5
    assert done["task"] == "examples.django_tasks_site.reports.tasks.add"
    assert (done["args"], done["kwargs"]) == ([2], {"b": 3})
    assert done["enqueued_at"] <= done["started_at"] <= done["finished_at"]
    assert done["last_attempted_at"] == done["started_at"]
    assert done["attempts"] == 1 and len(done["worker_ids"]) == 1 and done["errors"] == []
    assert done["backend"] == "default" and done["is_finished"]


def test_an_async_task_and_the_async_api(site: Site) -> None:
    made = site.enqueue("slow_double", 21, mode="async")
    done = site.wait(made["id"], mode="async")
    assert done["status"] == "SUCCESSFUL" and done["return_value"] == 42


def test_a_task_that_takes_context(site: Site) -> None:
    made = site.enqueue("whoami", note="hi")
    done = site.wait(made["id"])
    assert done["return_value"] == {"id": made["id"], "attempt": 1, "note": "hi"}


def test_run_after_defers_the_task(site: Site) -> None:
    # 5 s: the driver that reads the result is a new Django process, slow to start on a
    # loaded machine, and must still find the task waiting.
    made = site.enqueue("add", 1, 1, run_after=5.0)
    assert site.drive("result", made["id"])["status"] == "READY"
    done = site.wait(made["id"])
    assert done["status"] == "SUCCESSFUL"
    assert done["started_at"] >= made["enqueued_at"] + 4.9  # not before its time


def test_a_failing_task_is_failed_with_its_errors(site: Site) -> None:
    made = site.enqueue("explode", "boom")
    done = site.wait(made["id"])
    assert done["status"] == "FAILED", done
    # The settings retry once: two attempts, two errors, each with its class and traceback.
    assert done["attempts"] == 2 and len(done["worker_ids"]) == 2
    assert [e["class"] for e in done["errors"]] == ["builtins.ValueError"] * 2
    assert "boom" in done["errors"][-1]["traceback"]
    assert done["return_value"] is None and done["finished_at"] is not None
    assert (done["args"], done["kwargs"]) == (["boom"], {})  # read from where the job lies dead


def test_a_retried_task_succeeds_on_its_second_attempt(site: Site) -> None:
    made = site.enqueue("flaky")
    done = site.wait(made["id"])
    assert done["status"] == "SUCCESSFUL" and done["return_value"] == 2
    assert done["attempts"] == 2 and [e["class"] for e in done["errors"]] == ["builtins.RuntimeError"]


def test_signals_are_sent_where_the_framework_sends_them(site: Site) -> None:
    made = site.enqueue("add", 40, 2)
    site.wait(made["id"])
    deadline = time.monotonic() + 10
    while len(site.signal_log(made["id"])) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows = {r["signal"]: r for r in site.signal_log(made["id"])}
    # Two processes append to the log: "enqueued" (sent once the job is written) may land
    # after the worker's two, which come in their order.
    assert [r["signal"] for r in site.signal_log(made["id"]) if r["signal"] != "enqueued"] == ["started", "finished"]
    assert sorted(rows) == ["enqueued", "finished", "started"]
    assert {r["sender"] for r in rows.values()} == {"cogworker.django.backend.CogworkerBackend"}
    assert [rows[k]["status"] for k in ("enqueued", "started", "finished")] == ["READY", "RUNNING", "SUCCESSFUL"]
    assert rows["enqueued"]["pid"] != rows["started"]["pid"] == rows["finished"]["pid"]  # run in a child


def test_signals_of_a_failed_attempt(site: Site) -> None:
    made = site.enqueue("explode", "signals")
    site.wait(made["id"])
    deadline = time.monotonic() + 10
    while len(site.signal_log(made["id"])) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    finished = [r for r in site.signal_log(made["id"]) if r["signal"] == "finished"]
    assert [(r["status"], r["attempts"], r["errors"]) for r in finished] == [
        ("FAILED", 1, ["builtins.ValueError"]),
        ("FAILED", 2, ["builtins.ValueError"]),
    ]


def test_an_unknown_id_does_not_exist(site: Site) -> None:
    assert site.drive("result", "0" * 24)["error"] == "TaskResultDoesNotExist"
    assert site.drive("result", "")["error"] == "TaskResultDoesNotExist"


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("unknown_queue", "Queue 'elsewhere' is not valid for backend"),
        ("no_context", "context"),
    ],
)
def test_invalid_tasks_are_refused(site: Site, case: str, says: str) -> None:
    refused = site.drive("invalid", case)
    assert refused["error"] == "InvalidTask" and says in refused["message"], refused


def test_a_higher_priority_task_runs_first(site: Site) -> None:
    """Four tasks of priority -10 wait, then one of 50 is enqueued: the queue's fetch
    order puts it first (the page), and it starts before the last two low ones, not last,
    as first in, first out would have it. (Two children: the one that fetched it may be
    descheduled on a loaded machine while the other starts, and ends, a low one or two.)"""
    got = site.drive("priorities")
    assert got["page"] == [got["high"], *got["low"]]
    done = got["done"]
    assert all(d["status"] == "SUCCESSFUL" for d in done.values()), done
    assert done[got["high"]]["return_value"] == 100
    by_start = sorted(done, key=lambda i: done[i]["started_at"])
    assert by_start.index(got["high"]) <= 2, by_start


def test_the_example_view_enqueues_and_its_page_shows_the_result(site: Site) -> None:
    shown = site.drive("view", "to be or not to be")
    assert shown["posted"] == 302 and shown["status"] == 200
    assert "SUCCESSFUL" in shown["body"] and "be: 2" in shown["body"] and "to: 2" in shown["body"]


def test_a_task_is_a_cogworker_job_under_its_own_name(site: Site) -> None:
    """cogworker's faces see a task's job as any job: its class, queue and status."""
    import cogworker
    from cogworker import api

    made = site.enqueue("word_count", "a b a")
    site.wait(made["id"])
    cogworker.config._config = None
    config = cogworker.configure(redis_url=site.server.url)
    found = api.status(made["id"], config)
    assert found is not None and found.state == "succeeded"
    assert found.job_class == "examples.django_tasks_site.reports.tasks.word_count"
    assert found.queue == "reports"
    assert api.result(made["id"], config).value["return_value"] == {"a": 2, "b": 1}
