"""The enqueuing side of tests/test_django_tasks.py, run as a process of its own (Django's
settings are per process): ``python django_tasks_driver.py COMMAND ARG...`` with
``DJANGO_SETTINGS_MODULE`` and ``REDIS_URL`` set; prints one JSON object.

- ``enqueue TASK ARGS_JSON KWARGS_JSON [run_after_seconds] [async]``: the TaskResult made.
- ``wait ID [async]``: polls ``get_result`` until the task is finished (SUCCESSFUL or
  FAILED), at most 30 s; the TaskResult read.
- ``result ID``: ``get_result`` once (or the exception's class and message).
- ``invalid CASE``: the ``InvalidTask`` message of an invalid task.
- ``priorities``: with the default queue paused, four ``add`` tasks of priority -10, then
  one of priority 50; the queue's page (its fetch order) read, the queue resumed, and
  every task waited for: their ids, that order and their results.
- ``view TEXT``: the example's view, through Django's test client: POST, then its page
  once the report is done.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from typing import Any

import django

django.setup()

from django.test import Client  # noqa: E402

from examples.django_tasks_site.reports import tasks  # noqa: E402

try:
    from django.tasks import task
    from django.tasks.exceptions import InvalidTask
except ImportError:
    from django_tasks import task  # type: ignore[no-redef]
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[no-redef]


def shown(result: Any) -> dict[str, Any]:
    def when(value: datetime.datetime | None) -> float | None:
        return value.timestamp() if value is not None else None

    return {
        "id": result.id,
        "status": str(result.status),
        "task": result.task.module_path,
        "args": result.args,
        "kwargs": result.kwargs,
        "backend": result.backend,
        "enqueued_at": when(result.enqueued_at),
        "started_at": when(result.started_at),
        "last_attempted_at": when(result.last_attempted_at),
        "finished_at": when(result.finished_at),
        "return_value": result.return_value if str(result.status) == "SUCCESSFUL" else None,
        "attempts": result.attempts,
        "worker_ids": result.worker_ids,
        "errors": [{"class": e.exception_class_path, "traceback": e.traceback} for e in result.errors],
        "is_finished": result.is_finished,
    }


def enqueue(name: str, args: str, kwargs: str, run_after: str = "", mode: str = "") -> dict[str, Any]:
    chosen = getattr(tasks, name)
    if run_after:
        at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=float(run_after))
        chosen = chosen.using(run_after=at)
    if mode == "async":
        return shown(asyncio.run(chosen.aenqueue(*json.loads(args), **json.loads(kwargs))))
    return shown(chosen.enqueue(*json.loads(args), **json.loads(kwargs)))


def wait(result_id: str, mode: str = "") -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        if mode == "async":
            result = asyncio.run(tasks.add.get_backend().aget_result(result_id))
        else:
            result = tasks.add.get_backend().get_result(result_id)
        if result.is_finished or time.monotonic() > deadline:
            return shown(result)
        time.sleep(0.05)


def result(result_id: str) -> dict[str, Any]:
    try:
        return shown(tasks.add.get_backend().get_result(result_id))
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}


def _unknown_queue() -> Any:
    return tasks.add.using(queue_name="elsewhere")


def _no_context() -> Any:
    def no_context(note: str) -> None: ...

    no_context.__module__, no_context.__qualname__ = tasks.__name__, "no_context"
    return task(takes_context=True)(no_context)


def invalid(case: str) -> dict[str, Any]:
    make = {"unknown_queue": _unknown_queue, "no_context": _no_context}[case]
    try:
        made = make()
        made.enqueue(1)
    except InvalidTask as exc:
        return {"error": "InvalidTask", "message": str(exc)}
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"error": None}


def priorities() -> dict[str, Any]:
    from cogworker import api

    queue = api.Queue("default")
    queue.pause()  # nothing taken until every task is written
    try:
        low = [tasks.add.using(priority=-10).enqueue(i, 0).id for i in range(4)]
        high = tasks.add.using(priority=50).enqueue(100, 0).id
        page = [record.jid for record in queue.jobs(0, 10)]
        # A worker reads the queue's levels in use once a second: both levels new here, it
        # is given that second to see them before the queue opens (documented behaviour),
        # and as much again for a loaded machine, where its loop can be late.
        time.sleep(3.0)
    finally:
        queue.resume()
    done = {i: wait(i) for i in [*low, high]}
    return {"low": low, "high": high, "page": page, "done": done}


def view(text: str) -> dict[str, Any]:
    client = Client()
    posted = client.post("/reports/", {"text": text})
    page = posted.headers["Location"]
    deadline = time.monotonic() + 30
    while True:
        shown_page = client.get(page)
        body = shown_page.content.decode()
        if "SUCCESSFUL" in body or time.monotonic() > deadline:
            return {"posted": posted.status_code, "page": page, "status": shown_page.status_code, "body": body}
        time.sleep(0.05)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    commands = {
        "enqueue": enqueue,
        "wait": wait,
        "result": result,
        "invalid": invalid,
        "view": view,
        "priorities": priorities,
    }
    print(json.dumps(commands[command](*rest)))
