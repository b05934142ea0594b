"""``@iterable_job``: a generator job that yields its cursor after each item, and resumes
from its last cursor after a stop, a deploy or a crash (docs/architecture.md#iterable)::

    @cogworker.iterable_job(checkpoint_every=100)   # or seconds=5
    def reindex(cursor=None):
        for item in items_after(cursor):
            index(item)
            yield item.id

The job is a ``Job`` like any other (enqueue, options, a plain call runs it all inline);
``core/iteration.py`` drives the generator in the worker.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..core import iteration
from ..core.payload import is_number
from ..core.registry import register
from ..errors import ConfigurationError
from .jobs import Job, JobOptions


def _policy(checkpoint_every: Any, seconds: Any) -> iteration.Policy:
    if checkpoint_every is None and seconds is None:
        return iteration.Policy()  # 100 items or 5 s, whichever comes first
    if checkpoint_every is not None and (
        isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1
    ):
        raise ConfigurationError(
            f"checkpoint_every must be a whole number of items, at least 1, got {checkpoint_every!r}"
        )
    if seconds is not None and not (is_number(seconds) and seconds > 0):
        raise ConfigurationError(f"seconds must be a positive number, got {seconds!r}")
    return iteration.Policy(checkpoint_every, None if seconds is None else float(seconds))


def _check(func: Any) -> bool:
    """True for an async generator function; ConfigurationError for anything that isn't a
    generator function taking ``cursor``."""
    label = getattr(func, "__qualname__", repr(func))
    is_async = inspect.isasyncgenfunction(func)
    if not (is_async or inspect.isgeneratorfunction(func)):
        raise ConfigurationError(
            f"@iterable_job {label!r} is not a generator function: it must yield its cursor after each item"
        )
    params = inspect.signature(func).parameters
    if "cursor" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise ConfigurationError(
            f"@iterable_job {label!r} takes no 'cursor' argument: it is called with its last cursor (None at the start)"
        )
    return is_async


def iterable_job(
    func: Callable[..., Any] | None = None,
    /,
    *,
    checkpoint_every: int | None = None,
    seconds: float | None = None,
    **options: Any,
) -> Any:
    """Make a generator function a resumable job: ``@iterable_job``, or with
    ``checkpoint_every=N`` items and/or ``seconds=S`` and the options of ``@job``."""
    policy = _policy(checkpoint_every, seconds)
    opts = JobOptions.build(**options)  # an unknown option fails here, at decoration

    def wrap(f: Callable[..., Any]) -> Job[..., Any]:
        is_async = _check(f)
        name = f"{f.__module__}.{f.__qualname__}"
        run: Callable[..., Any]
        if is_async:

            async def run_async(*args: Any, **kwargs: Any) -> None:
                await iteration.drive_async(f, policy, name, args, kwargs)

            run = run_async
        else:

            def run_sync(*args: Any, **kwargs: Any) -> None:
                iteration.drive(f, policy, name, args, kwargs)

            run = run_sync
        functools.update_wrapper(run, f)  # its signature (checked at enqueue) is the generator's
        made: Job[..., Any] = Job(run, opts, name)
        made.iterable = policy
        register(made)
        return made

    return wrap(func) if func is not None else wrap
