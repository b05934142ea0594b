"""Running one job: resolve its name, the server middleware around it, its soft timeout
(SIGALRM), and what happened as a ``fate`` outcome. Nothing here writes to Redis: the
worker settles the outcome."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from . import fate, hooks
from .config import Config, logger
from .errors import JobTimeout
from .middleware import server_middleware
from .payload import default_backoff
from .registry import JobDef, resolve


class HardStop(BaseException):
    """Raised inside a running job to abandon it (stop-now): it is handed back, not failed."""


def execute(config: Config, identity: str, queue: str, payload: dict[str, Any]) -> fate.Succeeded | fate.Raised:
    """Runs the job: what happened to it (the caller settles it). Raises ``HardStop``."""
    name = payload["class"]
    job: Any = None
    resolution_error: BaseException | None = None
    try:
        job = resolve(name, config.import_prefixes)
    except Exception as exc:  # an unknown or unimportable job fails as the job's own error
        resolution_error = exc
    if hooks.wanted("started", payload):
        hooks.fire("started", payload, queue=queue, identity=identity, config=config)
    if logger.isEnabledFor(logging.DEBUG):  # cached: no cost per job at INFO
        logger.debug("start: %s jid=%s", name, payload["jid"],
                     extra={"event": "job_started", "jid": payload["jid"], "job_class": name, "queue": queue})
    started = time.perf_counter()
    error = run_job(job, payload, queue, resolution_error)
    seconds = time.perf_counter() - started
    if error is None:
        return fate.Succeeded(seconds)
    backoff = job.backoff_for if isinstance(job, JobDef) else default_backoff
    return fate.Raised(error, backoff, seconds)


def run_job(job: Any, payload: dict[str, Any], queue: str,
            resolution_error: BaseException | None) -> BaseException | None:
    """The job's own outcome: None, or what it (or a middleware) raised.

    A resolution failure is raised as the chain's innermost step, so every server
    middleware sees it like a perform-time error.
    """
    def perform() -> Any:
        if resolution_error is not None:
            raise resolution_error
        if isinstance(job, JobDef):
            return job.refuse_awaitable(job.func(*payload.get("args") or [], **payload.get("kwargs") or {}))
        return job(*payload.get("args") or [], **payload.get("kwargs") or {})

    timeout = payload.get("timeout")
    timer = SoftTimeout(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
    try:
        if timer:
            timer.arm()
        server_middleware.invoke((job if resolution_error is None else None, payload, queue), perform)
        return None
    except HardStop:
        raise
    except BaseException as exc:  # the job's own failure (even a SystemExit) is its outcome, not ours
        return exc
    finally:
        if timer:
            timer.disarm()


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

    def arm(self) -> None:
        if not self.usable:
            return
        seconds = self.seconds

        def expire(signum: int, frame: Any) -> None:
            raise JobTimeout(f"job ran past its timeout of {seconds:g}s")

        self._previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        if not self.usable:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)
