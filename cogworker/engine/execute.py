"""Running one job: resolve its name, the server middleware around it, its soft timeout
(SIGALRM; for an async job, its loop's: ``engine/eventloop.py``), and what happened as a ``fate``
outcome. Nothing here writes to Redis: the worker settles the outcome."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import inspect
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ..config import Config, logger
from ..core import current, fate, hooks, iteration, tracing
from ..core.middleware import server_middleware
from ..core.payload import default_backoff
from ..core.registry import JobDef, resolve
from ..errors import JobTimeout, Shutdown
from ..lifecycle import history
from . import eventloop as aio


class _ThreadKind(threading.local):
    # A class default, not getattr(local, "pool", False): a missing attribute of a
    # threading.local raises (and formats) an AttributeError inside, ~4k instructions per job.
    pool = False


_thread_kind = _ThreadKind()

# Whether the main thread is inside a job's body (its middleware chain): only there may a
# shutdown deadline raise ``Shutdown`` (``shutdown_now``), never in the worker's own code.
_in_body = False


def shutdown_now(message: str) -> None:
    """Called by a signal handler (main thread) at a shutdown deadline: raises ``Shutdown``
    inside the running job, so its ``finally:`` blocks run before its process is killed;
    nothing when no job body runs there (the worker is between jobs: it is leaving)."""
    if _in_body:
        raise Shutdown(message)


def in_job_pool() -> None:
    """Called in each thread of a worker's job pool (``--concurrency`` above 1): soft
    timeouts there are ``ThreadTimeout``s (SIGALRM reaches the main thread only)."""
    _thread_kind.pool = True


class HardStop(BaseException):
    """Raised inside a running job to abandon it (stop-now): it is handed back, not failed."""


Ran = fate.Succeeded | fate.Raised | fate.Suspended | fate.Cancelled


def execute(
    config: Config, identity: str, queue: str, payload: dict[str, Any], host: iteration.Host | None = None
) -> Ran:
    """Runs the job: what happened to it (the caller settles it). Raises ``HardStop``.
    ``host``: the worker, for an iterable job (its checkpoints, when it should stop).
    ``Cancelled`` whatever it did, once it was told it was cancelled (``current``)."""
    name = payload["class"]
    job: Any = None
    resolution_error: BaseException | None = None
    try:
        job = resolve(name, config.import_prefixes)
    except Exception as exc:  # an unknown or unimportable job fails as the job's own error
        resolution_error = exc
    if config.status or config.history:  # asked here: a call per job saved when both are off
        history.note_started(config, identity, queue, payload)
    if hooks.wanted("started", payload):
        hooks.fire("started", payload, queue=queue, identity=identity, config=config)
    if logger.isEnabledFor(logging.DEBUG):  # cached: no cost per job at INFO
        logger.debug(
            "start: %s jid=%s",
            name,
            payload["jid"],
            extra={"event": "job_started", "jid": payload["jid"], "job_class": name, "queue": queue},
        )
    started = time.perf_counter()
    kept: list[Any] | None = [] if "wf" in payload else None  # its value matters only to a workflow
    running, current_token = current.begin(config, payload, queue, solo=not _thread_kind.pool)
    try:
        if host is not None and getattr(job, "iterable", None) is not None:
            context = iteration.Context(host, payload)
            token = iteration.CURRENT.set(context)
            try:
                error = run_job(job, payload, queue, resolution_error, kept)
            finally:
                iteration.CURRENT.reset(token)
        else:
            context = None
            error = run_job(job, payload, queue, resolution_error, kept)
    finally:
        current.end(running, current_token)
    return _outcome(job, error, time.perf_counter() - started, context, kept, running.cancelled)


def _outcome(
    job: Any,
    error: BaseException | None,
    seconds: float,
    context: iteration.Context | None,
    kept: list[Any] | None = None,
    cancelled: bool = False,
) -> Ran:
    if cancelled:  # an operator's cancel won (docs/architecture.md#cancel): whatever it then did
        return fate.Cancelled(seconds)
    if error is None:
        suspended = context.run.suspended if context is not None and context.run is not None else None
        if suspended is not None:  # an iterable job stopped at a yield (docs/architecture.md#iterable)
            return fate.Suspended(suspended.cursor, suspended.done, seconds)
        return fate.Succeeded(seconds, kept[0] if kept else None)
    if isinstance(job, JobDef):
        return fate.Raised(error, job.backoff_for, seconds, job.retries)
    return fate.Raised(error, default_backoff, seconds)


def launch_async(
    config: Config,
    identity: str,
    queue: str,
    payload: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    done: Callable[[Ran], None],
    host: iteration.Host | None = None,
) -> bool:
    """``execute`` for an ``async def`` job when no server middleware is installed (a
    worker with a loop thread): it starts as a task of ``loop`` from the caller's thread,
    no pool thread waiting on it; ``done`` gets its outcome (called in the loop's thread).
    False, having done nothing: not such a job (middleware needs a stack per job: the
    caller runs ``execute`` in a pool thread)."""
    if len(server_middleware) or tracing.ON and tracing.active(config):
        return False  # a span needs a thread per job, as middleware does
    try:
        job = resolve(payload["class"], config.import_prefixes)
    except Exception:  # the pool's execute fails it as the job's own error, through the chain
        return False
    if not job.is_async:
        return False
    history.note_started(config, identity, queue, payload)
    if hooks.wanted("started", payload):
        hooks.fire("started", payload, queue=queue, identity=identity, config=config)
    logger.debug("start: %s jid=%s", job.name, payload["jid"])
    timeout = payload.get("timeout")
    seconds = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
    args, kwargs = payload.get("args") or [], payload.get("kwargs") or {}

    running, _ = current.begin(config, payload, queue)

    async def body() -> Any:
        return await job.func(*args, **kwargs)  # called on the loop: a bad argument fails the job

    async def in_context() -> Any:
        current.enter(running)  # this task's own context: current_job() inside the job
        return await aio.guarded(body(), seconds, job.name)

    started = time.perf_counter()
    context = iteration.Context(host, payload) if host is not None and job.iterable is not None else None

    def finished(future: concurrent.futures.Future[Any]) -> None:
        current.end(running, None)
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        done(
            _outcome(
                job,
                error,
                time.perf_counter() - started,
                context,
                [future.result()] if error is None and "wf" in payload else None,
                running.cancelled,
            )
        )

    token = iteration.CURRENT.set(context)  # the task copies it as it is made
    try:
        future = asyncio.run_coroutine_threadsafe(in_context(), loop)
    finally:
        iteration.CURRENT.reset(token)
    future.add_done_callback(finished)
    return True


def run_job(
    job: Any, payload: dict[str, Any], queue: str, resolution_error: BaseException | None, kept: list[Any] | None = None
) -> BaseException | None:
    """The job's own outcome: None, or what it (or a middleware) raised. ``kept``: its
    return value is appended there (a workflow's job keeps it).

    A resolution failure is raised as the chain's innermost step, so every server
    middleware sees it like a perform-time error. Traced (``tracing``): in a CONSUMER span.
    """
    if tracing.ON and tracing.active():
        return tracing.consume(payload, queue, lambda: _run(job, payload, queue, resolution_error, kept))
    return _run(job, payload, queue, resolution_error, kept)


def _run(
    job: Any, payload: dict[str, Any], queue: str, resolution_error: BaseException | None, kept: list[Any] | None = None
) -> BaseException | None:
    timeout = payload.get("timeout")
    timer: SoftTimeout | None = None
    if isinstance(timeout, (int, float)) and timeout > 0:
        timer = ThreadTimeout(timeout) if _thread_kind.pool else SoftTimeout(timeout)

    def perform() -> Any:
        if resolution_error is not None:
            raise resolution_error
        func = job.func if isinstance(job, JobDef) else job
        result = func(*payload.get("args") or [], **payload.get("kwargs") or {})
        if result is None:  # most jobs: nothing to await or refuse (two calls saved per job)
            return None
        if inspect.isawaitable(result):
            # An async job (or a sync one returning a coroutine): awaited here, inside
            # the middleware chain, its soft timeout now the loop's (docs/architecture.md#async).
            left = timer.disarm() if timer else None
            return aio.run(result, left, getattr(job, "name", payload["class"]))
        return job.refuse_awaitable(result) if isinstance(job, JobDef) else result

    global _in_body
    main = not _thread_kind.pool
    try:
        try:
            if timer:
                timer.arm()
            if main:
                _in_body = True
            value = server_middleware.invoke((job if resolution_error is None else None, payload, queue), perform)
            if kept is not None:
                kept.append(value)
        finally:
            # Inside the outer try: a timeout (or a Shutdown) landing here is still the job's outcome.
            if main:
                _in_body = False
            if timer:
                timer.disarm()
        return None
    except HardStop:
        raise
    except BaseException as exc:  # the job's own failure (even a SystemExit) is its outcome, not ours
        if isinstance(exc, Shutdown):
            logger.warning(
                "jid=%s still running at the shutdown deadline: cogworker.Shutdown raised in it; handing it back",
                payload.get("jid"),
            )
        if isinstance(exc, JobTimeout) and not exc.args:
            # Raised as a class in a pool thread (ThreadTimeout): given its message here.
            return JobTimeout(f"job ran past its timeout of {timeout:g}s").with_traceback(exc.__traceback__)
        return exc


def deadline_of(payload: dict[str, Any]) -> float | None:
    """When the job's soft timeout expires (``time.time()``), or None."""
    timeout = payload.get("timeout")
    return time.time() + float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None


class SoftTimeout:
    """Raises JobTimeout inside the job at its deadline (SIGALRM: main thread only)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.usable = threading.current_thread() is threading.main_thread()
        self._previous: Any = None
        self._armed = False

    def arm(self) -> None:
        if not self.usable:
            return
        seconds = self.seconds

        def expire(signum: int, frame: Any) -> None:
            raise JobTimeout(f"job ran past its timeout of {seconds:g}s")

        self._previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        self._armed = True

    def disarm(self) -> float | None:
        """Stops the timer; returns the seconds it had left (None: it never ran here).
        Twice is harmless."""
        if not self.usable:
            return self.seconds
        if not self._armed:
            return None
        self._armed = False
        left, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)
        return max(left, 0.001)


class ThreadTimeout(SoftTimeout):
    """Raises JobTimeout inside a job running in a pool thread, at its deadline, as an
    asynchronous exception (``PyThreadState_SetAsyncExc``): it lands at the job's next
    Python instruction, so a thread blocked in one long C call (a ``time.sleep``, a
    socket read without a timeout) sees it only when that call returns; the master's
    hard-timeout kill covers that case. A lock orders it with ``disarm``: once disarmed,
    none can land (one pending is cleared)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._thread_id = threading.get_ident()
        self._fired = False
        self._started = 0.0

    def arm(self) -> None:
        self._started = time.monotonic()
        self._timer = threading.Timer(self.seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if self._timer is None:
                return
            self._fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), ctypes.py_object(JobTimeout))

    def disarm(self) -> float | None:
        with self._lock:
            timer, self._timer = self._timer, None
            if timer is None:
                return None
            timer.cancel()
            if self._fired:  # not yet raised: cleared, so it can't land after the job
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), None)
        return max(self.seconds - (time.monotonic() - self._started), 0.001)
