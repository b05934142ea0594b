"""The registry of job names: what the app module defined (``@job``), and ``resolve``,
which finds the job a payload names.

The worker runs registered jobs only, plus jobs in modules under
``Config.import_prefixes``, imported on demand. A leaf below the client: it holds job
*definitions* (``JobDef``: function, options, signature); the enqueueing handles
(``jobs.Job``) subclass it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UnknownJob
from .payload import JobOptions, bind_arguments, default_backoff, signature_of


class JobDef:
    """A job's definition: its name, function, options and signature."""

    # An ``@iterable_job``'s checkpoint policy (``iteration.Policy``); None for a plain job.
    iterable: Any = None

    def __init__(self, func: Callable[..., Any], opts: JobOptions, name: str | None = None) -> None:
        self.func = func
        self.opts = opts
        self.name = name or f"{func.__module__}.{func.__qualname__}"
        self.signature: inspect.Signature | None = signature_of(func)
        # An ``async def`` (or an object whose __call__ is one): may start as a task at once.
        self.is_async = inspect.iscoroutinefunction(func if inspect.isroutine(func) else type(func).__call__)

    def check_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """TypeError now, in the caller, for arguments the function can't take."""
        bind_arguments(self.name, self.signature, args, kwargs)

    def refuse_awaitable(self, result: Any) -> Any:
        """A job's return value, unless it is an async generator: nothing iterates it, so
        the job's body never ran, and that must fail, not count as success. (An awaitable
        is awaited before this: ``execute.run_job``.)"""
        if inspect.isasyncgen(result):
            raise TypeError(
                f"job {self.name} returned an async generator, not a result: its body did not run "
                f"(make it an async def that returns)"
            )
        return result

    @property
    def retries(self) -> Callable[[BaseException], bool] | None:
        """Whether an error of this job is retried (its ``retry_on``/``no_retry_on``), or
        None when neither is set: every error is, while retries last (``fate.route_failure``)."""
        return self._retries if self.opts.retry_on or self.opts.no_retry_on else None

    def _retries(self, error: BaseException) -> bool:
        if isinstance(error, self.opts.no_retry_on):
            return False
        return not self.opts.retry_on or isinstance(error, self.opts.retry_on)

    def backoff_for(self, count: int, error: BaseException) -> float:
        if self.opts.backoff is None:
            return default_backoff(count, error)
        return float(self.opts.backoff(count, error))


# name -> job: what the app module registered. The worker runs only these (and jobs under
# Config.import_prefixes, imported on demand).
registry: dict[str, JobDef] = {}


def register(job: JobDef) -> None:
    registry[job.name] = job


def importable(module: str, prefixes: Sequence[str]) -> bool:
    """Whether ``module`` lies under one of ``prefixes``, on whole dotted components:
    ``app`` allows ``app`` and ``app.x``, not ``apple``."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def resolve(name: str, import_prefixes: Sequence[str] = ()) -> JobDef:
    """The job called ``name`` (a ``jobs.Job``): a registered one (what the app module
    imported), else one in a module under ``import_prefixes``, imported now. Nothing else
    is imported: a payload naming any module would otherwise run that module's
    import-time code."""
    found = registry.get(name)
    if found is not None:
        return found
    if not isinstance(name, str) or "." not in name:
        raise UnknownJob(f"unknown job {name!r}")
    # A qualname may be nested (Class.method): try shorter module paths too.
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name, attr_path = ".".join(parts[:cut]), parts[cut:]
        if not importable(module_name, import_prefixes):
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found = registry.get(name)
        if found is not None:
            return found
        obj: Any = module
        try:
            for attr in attr_path:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if isinstance(obj, JobDef):
            return obj
        # Only a @job runs: a payload naming any other callable (os.system, ...) must not
        # make the worker call it.
        raise UnknownJob(f"unknown job {name!r}: {module_name} has it, but it is not a @cogworker.job")
    if import_prefixes:
        raise UnknownJob(
            f"unknown job {name!r}: not registered, and not found under import_prefixes {list(import_prefixes)}"
        )
    raise UnknownJob(
        f"unknown job {name!r}: not registered (only jobs the app module imports run; "
        f"import_prefixes allows importing others on demand)"
    )
