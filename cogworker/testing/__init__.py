"""Testing helpers (``cogworker.testing``), as Sidekiq::Testing, Celery's
``task_always_eager`` and Dramatiq's StubBroker: jobs enqueued under test, without Redis.

- ``inline()``: an enqueue runs the job at once, in this process, through the server
  middleware, and raises its error (retries off unless ``retries=True``).
- ``fake()``: enqueues are kept and nothing runs; ``fake.jobs(queue)`` shows them and
  ``fake.drain()`` runs them, scheduled ones too, on a clock the test controls.

Both replace only the innermost write (``client.sink``): arguments are checked and
JSON-encoded, and the client middleware runs, exactly as for a real enqueue; the job gets
its arguments as a worker would (decoded from the JSON). Lifecycle hooks don't fire and
unique locks aren't taken (both live in Redis). The pytest fixtures are in
``cogworker.pytest_plugin``; a private ``redis-server`` and a real prefork worker for
integration tests are ``RedisServer`` and ``PreforkWorker`` (``cogworker.testing.servers``);
a Sentinel deployment and a Redis Cluster of 3 masters and 3 replicas on loopback are
``cogworker.testing.sentinel.Sentinels`` and ``cogworker.testing.cluster.Cluster``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..client import enqueue as client
from ..config import get_config
from ..core import current
from ..core.payload import dumps, error_class_name, error_message, to_epoch
from ..core.registry import JobDef, resolve
from ..engine import execute
from .servers import PreforkWorker, RedisServer  # noqa: F401 (part of this module's API)

_lock = threading.Lock()


def run_payload(payload: dict[str, Any]) -> BaseException | None:
    """One attempt of the job, in this process, through the server middleware: None, or
    what it raised (an unknown job fails as ``UnknownJob``, as in a worker)."""
    job: JobDef | None = None
    error: BaseException | None = None
    try:
        job = resolve(payload["class"], get_config().import_prefixes)
    except Exception as exc:
        error = exc
    # current_job() works as in a worker; its progress is kept on it, not written to Redis
    running, token = current.begin(get_config(), payload, payload["queue"], offline=True)
    try:
        return execute.run_job(job, payload, payload["queue"], error)
    finally:
        current.end(running, token)


def _as_stored(payload: dict[str, Any], at: float | None) -> dict[str, Any]:
    """The job as a worker would read it back: through JSON, ``at`` set when scheduled."""
    stored: dict[str, Any] = json.loads(dumps(payload))
    if at is not None:
        stored["at"] = at
    return stored


def _record_failure(payload: dict[str, Any], error: BaseException) -> int:
    count = int(payload.get("retry_count") or 0) + 1
    payload.update(
        retry_count=count,
        error_class=error_class_name(error),
        error_message=error_message(error),
        failed_at=time.time(),
    )
    return count


def _retries_of(payload: dict[str, Any]) -> int:
    retry = payload.get("retry", 25)
    return 0 if retry is False else 25 if retry is True else max(0, int(retry))


@contextlib.contextmanager
def _installed(sink: Callable[[dict[str, Any], float | None], str | None]) -> Iterator[None]:
    with _lock:
        if client.sink is not None:
            raise RuntimeError("cogworker.testing: inline() or fake() is already on")
        client.sink = sink
    try:
        yield
    finally:
        client.sink = None


class Inline:
    """The sink of ``inline()``: each enqueue runs its job now."""

    def __init__(self, retries: bool) -> None:
        self.retries = retries
        self.ran: list[dict[str, Any]] = []

    def __call__(self, payload: dict[str, Any], at: float | None) -> str | None:
        stored = _as_stored(payload, None)  # a scheduled job runs now too
        while True:
            error = run_payload(stored)
            self.ran.append(stored)
            if error is None:
                return str(stored["jid"])
            count = _record_failure(stored, error)
            if not self.retries or count > _retries_of(stored):
                raise error
            stored = dict(stored)  # the next attempt, as the retry set would hand it back


@contextlib.contextmanager
def inline(retries: bool = False) -> Iterator[Inline]:
    """Enqueues run their job at once, here; the job's error is raised from the enqueue.
    ``retries=True``: a failing job is tried again at once, up to its ``retry`` count,
    and the last error is raised. ``.ran`` lists every attempt's payload."""
    sink = Inline(retries)
    with _installed(sink):
        yield sink


@dataclass
class Fake:
    """The sink of ``fake()``: kept jobs, a clock, and ``drain``."""

    clock: Callable[[], float] = time.time
    retries: bool = False
    pending: list[dict[str, Any]] = field(default_factory=list)
    done: list[dict[str, Any]] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, payload: dict[str, Any], at: float | None) -> str | None:
        self.pending.append(_as_stored(payload, at if at is not None and at > self.clock() else None))
        return str(payload["jid"])

    def jobs(self, queue: str | None = None) -> list[dict[str, Any]]:
        """The jobs enqueued and not yet run (all, or ``queue``'s), in enqueue order;
        a scheduled one has ``at``."""
        return [p for p in self.pending if queue is None or p["queue"] == queue]

    def clear(self, queue: str | None = None) -> None:
        self.pending = [p for p in self.pending if queue is not None and p["queue"] != queue]

    def drain(self, until: datetime | float | None = None) -> int:
        """Run the kept jobs in the order they are due, and the jobs they enqueue, until
        none is due by ``until`` (epoch seconds or an aware datetime; None: every one,
        scheduled ones included, whenever due); returns how many ran. A job's error is raised (it is dropped) unless
        ``retries=True``: then it is rescheduled after its backoff, or filed in ``dead``."""
        limit = None if until is None else to_epoch(until)
        ran = 0
        while True:
            due = [p for p in self.pending if limit is None or p.get("at", 0) <= limit]
            if not due:
                return ran
            payload = min(due, key=lambda p: p.get("at", 0))  # min keeps enqueue order on ties
            self.pending.remove(payload)
            ran += 1
            self._run(payload)

    def _run(self, payload: dict[str, Any]) -> None:
        payload.pop("at", None)
        error = run_payload(payload)
        if error is None:
            self.done.append(payload)
            return
        count = _record_failure(payload, error)
        if not self.retries:
            raise error
        if count > _retries_of(payload):
            self.dead.append(payload)
            return
        found = resolve_or_none(payload["class"])
        delay = found.backoff_for(count, error) if found is not None else 0.0
        payload["at"] = self.clock() + delay
        self.pending.append(payload)


def resolve_or_none(name: str) -> JobDef | None:
    try:
        return resolve(name, get_config().import_prefixes)
    except Exception:
        return None


@contextlib.contextmanager
def fake(clock: Callable[[], float] = time.time, retries: bool = False) -> Iterator[Fake]:
    """Enqueues are kept, nothing runs: ``with cogworker.testing.fake() as fake:``, then
    ``fake.jobs("default")`` and ``fake.drain()``. ``clock`` decides what is due."""
    sink = Fake(clock, retries)
    with _installed(sink):
        yield sink
