"""The job running now, as the job sees it: ``cogworker.current_job()``
(docs/architecture.md#cancel).

- ``cancelled``: set once an operator's ``api.cancel(jid)`` took the job off its list and
  the worker heard of it on its beat (``tell_cancelled``). Sync code polls it; an async
  job also gets ``asyncio.CancelledError`` at its next ``await`` (its task is cancelled
  on its loop).
- ``progress(fraction, message)``: kept in ``progress:<jid>`` for ``status_ttl``, written
  at most once per ``PROGRESS_INTERVAL`` per job (the last value wins; one still waiting
  is written by a timer, and at the job's end at the latest), so a tight loop calling it
  costs Redis two writes a second, not one per call.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import routing
from ..config import Config, logger
from ..transitions import process
from .batchscope import BatchScope

clock = time.time  # the progress index's scores (tests inject their own)
PROGRESS_INTERVAL = 0.5  # seconds between two writes of one job's progress
MESSAGE_LIMIT = 200  # characters of a progress message kept

_current: contextvars.ContextVar[CurrentJob | None] = contextvars.ContextVar("cogworker_current_job", default=None)
_running: dict[str, CurrentJob] = {}  # jid -> the job running in this process
# The job of a worker that runs one at a time in its main thread (--concurrency 1, the
# runner): a plain global, cheaper per job than setting and resetting the context var.
_solo: CurrentJob | None = None
_lock = threading.Lock()


def progress_writer(config: Config, jid: str) -> Callable[[str], Any]:
    """Writes a record into ``progress:<jid>`` (``status_ttl``) and its key into the
    progress index, trimmed to ``status_max`` keys in the same script (``progress.lua``)."""
    keys, client = config.keys, config.redis()
    key, index = keys.progress(jid), keys.retained_progress
    ttl, most = max(1, int(config.status_ttl)), config.status_max
    return lambda value: process.progress(
        client, keys, record_key=key, index=index, declared=(), record=value, ttl=ttl, now=repr(clock()), keep=most
    )


def progress_record(fraction: float, message: str | None, at: float) -> str:
    """``progress:<jid>``'s value; ``fraction`` checked: a number in [0, 1]."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or math.isnan(fraction)
        or not 0.0 <= fraction <= 1.0
    ):
        raise ValueError(f"progress must be a number from 0 to 1, not {fraction!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"a progress message must be a string, not {type(message).__name__}")
    return json.dumps({"fraction": float(fraction), "message": (message or "")[:MESSAGE_LIMIT], "at": at})


class ProgressWriter:
    """Coalesces one job's progress calls into at most one write per ``interval``.
    ``clock`` and ``schedule`` (``schedule(delay, fn)`` -> a handle with ``cancel()``) are
    injectable for tests; ``write(value)`` does the write."""

    def __init__(
        self,
        write: Callable[[str], Any],
        interval: float = PROGRESS_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        schedule: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        self._write = write
        self.interval = interval
        self._clock = clock
        self._schedule = schedule if schedule is not None else _timer
        self._lock = threading.Lock()
        self._last: float | None = None  # when the last write went out (clock)
        self._pending: str | None = None
        self._timer: Any = None
        self.writes = 0

    def report(self, value: str) -> None:
        with self._lock:
            now = self._clock()
            if self._last is None or now - self._last >= self.interval:
                self._pending = None
                self._last = now
                due: str | None = value
            else:
                self._pending = value
                due = None
                if self._timer is None:
                    self._timer = self._schedule(self._last + self.interval - now, self.flush)
        if due is not None:
            self._send(due)

    def flush(self) -> None:
        """Writes a value still waiting (the timer's, and the job's end)."""
        with self._lock:
            value, self._pending = self._pending, None
            timer, self._timer = self._timer, None
            if value is not None:
                self._last = self._clock()
        if timer is not None:
            timer.cancel()
        if value is not None:
            self._send(value)

    def _send(self, value: str) -> None:
        self.writes += 1
        try:
            self._write(value)
        except Exception as exc:  # progress is never worth a job: logged, the job goes on
            logger.warning("couldn't write a job's progress: %s: %s", type(exc).__name__, exc)


def _timer(delay: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(max(delay, 0.0), fn)
    timer.daemon = True
    timer.start()
    return timer


class CurrentJob:
    """The running job: ``jid``, ``name`` (its class), ``queue``, ``payload``, ``cancelled``.
    Made for every job a worker runs: kept small (slots, nothing made until used)."""

    # Class-level defaults: the worker makes one per job, and sets only what it must.
    offline = False  # cogworker.testing's inline mode: progress kept here, not in Redis
    cancelled = False
    last_progress: tuple[float, str] | None = None
    _task: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
    _progress: ProgressWriter | None = None

    def __init__(self, config: Config, payload: dict[str, Any], queue: str) -> None:
        self.config = config
        self.payload = payload
        self.jid: str = payload["jid"]
        self.queue = queue

    @property
    def name(self) -> str:
        return str(self.payload.get("class", ""))

    @property
    def batch(self) -> BatchScope | None:
        """This job's batch, or None: ``with current_job().batch: more.enqueue(...)`` adds
        jobs to it (counted before this job settles, so its callbacks wait for them)."""
        wf = self.payload.get("wf")
        bid = wf.get("b") if isinstance(wf, dict) else None
        # Its record is in this job's part (a split layout): what joins it must be too.
        return BatchScope(bid, routing.name_of(self.config)) if isinstance(bid, str) else None

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Reports how far the job got (``fraction`` from 0 to 1, and a short message):
        shown by ``api.status``, the command and the web UI. Cheap to call often."""
        value = progress_record(fraction, message, time.time())
        self.last_progress = (float(fraction), (message or "")[:MESSAGE_LIMIT])
        if self.offline:
            return
        if self._progress is None:
            self._progress = ProgressWriter(progress_writer(self.config, self.jid))
        self._progress.report(value)

    def attach(self, task: asyncio.Task[Any]) -> None:
        """The task running this (async) job: a cancel cancels it."""
        loop = task.get_loop()
        with _lock:
            self._task = (loop, task)
            told = self.cancelled
        if told:
            loop.call_soon_threadsafe(task.cancel)

    def tell(self) -> None:
        """Once: a beat that repeats the news must not cancel the task again (the job may
        be cleaning up after the first ``CancelledError``)."""
        with _lock:
            if self.cancelled:
                return
            self.cancelled = True
            task = self._task
        if task is not None:
            task[0].call_soon_threadsafe(task[1].cancel)


def current_job() -> CurrentJob | None:
    """The job running in this thread (or task), or None outside a job."""
    job = _current.get()
    return job if job is not None else _solo


def begin(
    config: Config, payload: dict[str, Any], queue: str, offline: bool = False, solo: bool = False
) -> tuple[CurrentJob, contextvars.Token[Any] | None]:
    """Per job, on the worker's path: no lock (one dict item set, under the GIL).
    ``solo``: the only job of the process, run in its main thread."""
    global _solo
    job = CurrentJob(config, payload, queue)
    if offline:
        job.offline = True
    _running[job.jid] = job
    if solo:
        _solo = job
        return job, None
    return job, _current.set(job)


def end(job: CurrentJob, token: contextvars.Token[Any] | None) -> None:
    global _solo
    _running.pop(job.jid, None)  # one jid runs at most once at a time in a process
    if token is not None:
        _current.reset(token)
    elif _solo is job:
        _solo = None
    if job._progress is not None:
        job._progress.flush()


def enter(job: CurrentJob) -> None:
    """Makes ``job`` current in this context (a task started on another thread's loop)."""
    _current.set(job)


def tell_cancelled(jid: str) -> bool:
    """The worker heard that ``jid`` was cancelled: True if it runs here now."""
    job = _running.get(jid)
    if job is None:
        return False
    if not job.cancelled:
        logger.info("jid=%s was cancelled: told", jid, extra={"event": "job_told_cancelled", "jid": jid})
    job.tell()
    return True


def running_jids() -> list[str]:
    return list(_running)
