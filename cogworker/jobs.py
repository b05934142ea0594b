"""``@job``: job definitions, their options, payloads and the registry of names."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import random
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic, ParamSpec, TypeVar

from .errors import ConfigurationError, UnknownJob

P = ParamSpec("P")
R = TypeVar("R")

# name -> Job: what the app module registered. The worker runs only these (and jobs under
# Config.import_prefixes, imported on demand).
registry: dict[str, Job[Any, Any]] = {}

UNIQUE_UNTIL = ("success", "start")
BackoffFn = Callable[[int, BaseException], float]


def default_backoff(count: int, error: BaseException | None = None) -> float:
    """Sidekiq's: count**4 + 15 + random(10 * (count + 1)) seconds."""
    return count**4 + 15 + random.randrange(10 * (count + 1))


def new_jid() -> str:
    return secrets.token_hex(12)


def error_class_name(error: BaseException | type) -> str:
    """Qualified name, without the module for builtins: ``ValueError``, ``app.errors.Declined``."""
    cls = error if isinstance(error, type) else type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    module = cls.__module__
    if module.startswith("cogworker."):
        module = "cogworker"  # the public name: cogworker.ProcessDied, cogworker.JobTimeout
    return f"{module}.{cls.__qualname__}"


def error_message(error: BaseException) -> str:
    try:
        return str(error)[:10_000]
    except Exception:  # a __str__ that raises must not break failure handling
        return f"<unprintable {type(error).__name__}>"


@dataclass(frozen=True)
class JobOptions:
    queue: str = "default"
    retry: int = 25
    timeout: float | None = None
    unique_for: float | None = None
    unique_until: str = "success"
    backoff: BackoffFn | None = None

    @classmethod
    def build(cls, base: JobOptions | None = None, **given: Any) -> JobOptions:
        fields = set(cls.__dataclass_fields__)
        unknown = set(given) - fields
        if unknown:
            raise ConfigurationError(f"unknown job option(s) {sorted(unknown)}; known: {sorted(fields)}")
        if "retry" in given:
            given["retry"] = normalize_retry(given["retry"])
        opts = replace(base or cls(), **given)
        opts.validate()
        return opts

    def validate(self) -> None:
        if not isinstance(self.queue, str) or not self.queue or any(c.isspace() for c in self.queue):
            raise ConfigurationError(f"queue must be a non-empty name without spaces, got {self.queue!r}")
        if self.timeout is not None and not (_is_number(self.timeout) and self.timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.unique_for is not None and not (_is_number(self.unique_for) and self.unique_for >= 1):
            raise ConfigurationError(f"unique_for must be at least 1 second, got {self.unique_for!r}")
        if self.unique_until not in UNIQUE_UNTIL:
            raise ConfigurationError(f"unique_until must be one of {UNIQUE_UNTIL}, got {self.unique_until!r}")
        if self.backoff is not None and not callable(self.backoff):
            raise ConfigurationError("backoff must be a callable (count, error) -> seconds")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def normalize_retry(retry: Any) -> int:
    if retry is False:
        return 0
    if retry is True:
        return 25
    if isinstance(retry, int) and retry >= 0:
        return retry
    raise ConfigurationError(f"retry must be an int >= 0 or False, got {retry!r}")


def dumps(value: Any) -> str:
    """Compact JSON; refuses anything JSON can't carry with a TypeError (nothing written)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"job arguments must be JSON-serializable: {exc}") from None


def build_payload(name: str, args: Sequence[Any], kwargs: dict[str, Any], opts: JobOptions,
                  now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    payload: dict[str, Any] = {
        "class": name,
        "args": list(args),
        "kwargs": dict(kwargs),
        "jid": new_jid(),
        "queue": opts.queue,
        "retry": opts.retry,
        "created_at": now,
        "enqueued_at": now,
    }
    if opts.timeout is not None:
        payload["timeout"] = opts.timeout
    if opts.unique_for is not None:
        payload["unique_for"] = opts.unique_for
        payload["unique_until"] = opts.unique_until
    return payload


def to_epoch(when: datetime | float | int) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError("enqueue_at needs a timezone-aware datetime (or epoch seconds)")
        return when.timestamp()
    if _is_number(when):
        return float(when)
    raise TypeError(f"enqueue_at takes a datetime or epoch seconds, got {type(when).__name__}")


class Job(Generic[P, R]):
    """A function that can run inline or be enqueued. Made by ``@cogworker.job``."""

    def __init__(self, func: Callable[P, R], opts: JobOptions, name: str | None = None) -> None:
        self.func = func
        self.opts = opts
        self.name = name or f"{func.__module__}.{func.__qualname__}"
        functools.update_wrapper(self, func)  # type: ignore[arg-type]
        try:
            self.signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # some builtins have none: their arguments go unchecked
            self.signature = None

    def check_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """TypeError now, in the caller, for arguments the function can't take: a job
        enqueued with them would only fail later, in a worker, and retry for weeks."""
        if self.signature is None:
            return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.name}{self.signature} can't take these arguments: {exc}") from None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<cogworker job {self.name} queue={self.opts.queue!r}>"

    def options(self, **overrides: Any) -> BoundJob:
        """Per-call overrides: ``add.options(queue="low", retry=0).enqueue(1, 2)``."""
        return BoundJob(self, JobOptions.build(self.opts, **overrides))

    def refuse_awaitable(self, result: Any) -> Any:
        """A job's return value, unless it is a coroutine or other awaitable: nothing
        awaits it, so the job's body never ran, and that must fail, not count as success."""
        if inspect.isawaitable(result) or inspect.isasyncgen(result):
            if inspect.iscoroutine(result):
                result.close()  # never awaited, on purpose: no RuntimeWarning
            raise TypeError(f"job {self.name} returned {type(result).__name__}, not a result: async jobs "
                            f"are not supported yet, so its body did not run")
        return result

    def enqueue(self, *args: Any, **kwargs: Any) -> str | None:
        """Push the job; returns its jid (None if a unique lock dropped it as a duplicate)."""
        return BoundJob(self, self.opts).enqueue(*args, **kwargs)

    def enqueue_in(self, seconds: float, *args: Any, **kwargs: Any) -> str | None:
        return BoundJob(self, self.opts).enqueue_in(seconds, *args, **kwargs)

    def enqueue_at(self, when: datetime | float, *args: Any, **kwargs: Any) -> str | None:
        return BoundJob(self, self.opts).enqueue_at(when, *args, **kwargs)

    def enqueue_many(self, calls: Iterable[Sequence[Any] | tuple[Sequence[Any], dict[str, Any]]]
                     ) -> list[str | None]:
        return BoundJob(self, self.opts).enqueue_many(calls)

    def backoff_for(self, count: int, error: BaseException) -> float:
        if self.opts.backoff is None:
            return default_backoff(count, error)
        return float(self.opts.backoff(count, error))


@dataclass(frozen=True)
class BoundJob:
    """A job with per-call options (``Job.options``), or known only by its name
    (``cogworker.by_name``: ``job`` is None when it isn't registered in this process)."""

    job: Job[Any, Any] | None
    opts: JobOptions
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            if self.job is None:
                raise TypeError("BoundJob needs a job or a name")
            object.__setattr__(self, "name", self.job.name)

    def options(self, **overrides: Any) -> BoundJob:
        """More overrides on top of these: ``by_name("app.jobs.add").options(retry=0)``."""
        return BoundJob(self.job, JobOptions.build(self.opts, **overrides), self.name)

    def payload(self, args: Sequence[Any], kwargs: dict[str, Any], now: float | None = None) -> dict[str, Any]:
        """The job's payload; a TypeError first if a registered job can't take these arguments."""
        if self.job is not None:
            self.job.check_arguments(args, kwargs)
        return build_payload(self.name, args, kwargs, self.opts, now)

    def enqueue(self, *args: Any, **kwargs: Any) -> str | None:
        from .client import push

        return push(self.payload(args, kwargs))

    def enqueue_in(self, seconds: float, *args: Any, **kwargs: Any) -> str | None:
        if not _is_number(seconds):
            raise TypeError(f"enqueue_in takes seconds as a number, got {seconds!r}")
        return self.enqueue_at(time.time() + seconds, *args, **kwargs)

    def enqueue_at(self, when: datetime | float, *args: Any, **kwargs: Any) -> str | None:
        from .client import push

        at = to_epoch(when)
        return push(self.payload(args, kwargs), at=at)

    def enqueue_many(self, calls: Iterable[Sequence[Any] | tuple[Sequence[Any], dict[str, Any]]]
                     ) -> list[str | None]:
        """Bulk enqueue: each item is an args tuple/list, or ``(args, kwargs)``; pipelined."""
        from .client import push_many

        now = time.time()
        payloads = []
        for call in calls:
            if (isinstance(call, tuple) and len(call) == 2 and isinstance(call[1], dict)
                    and isinstance(call[0], (list, tuple))):
                args, kwargs = call
            elif isinstance(call, (list, tuple)):
                args, kwargs = call, {}
            else:
                raise TypeError(f"enqueue_many takes args tuples or (args, kwargs) pairs, got {call!r}")
            payloads.append(self.payload(args, kwargs, now))  # all checked before any is written
        return push_many(payloads)


def job(func: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """Make a function a job: ``@job`` or ``@job(queue=..., retry=..., timeout=..., unique_for=...)``."""
    opts = JobOptions.build(**options)  # an unknown option fails here, at decoration

    def wrap(f: Callable[P, R]) -> Job[P, R]:
        if not callable(f):
            raise TypeError(f"@job decorates a function, got {f!r}")
        if (inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f)
                or inspect.iscoroutinefunction(type(f).__call__)):
            # A worker would call it, get a coroutine back, and count a job that never ran.
            raise ConfigurationError(f"@job {getattr(f, '__qualname__', f)!r}: async jobs are not supported yet; "
                                     f"make it a plain def (it may call asyncio.run(...))")
        made = Job(f, opts)
        registry[made.name] = made
        return made

    return wrap(func) if func is not None else wrap


def importable(module: str, prefixes: Sequence[str]) -> bool:
    """Whether ``module`` lies under one of ``prefixes``, on whole dotted components:
    ``app`` allows ``app`` and ``app.x``, not ``apple``."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def resolve(name: str, import_prefixes: Sequence[str] = ()) -> Job[Any, Any]:
    """The job called ``name``: a registered one (what the app module imported), else
    one in a module under ``import_prefixes``, imported now. Nothing else is imported:
    a payload naming any module would otherwise run that module's import-time code."""
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
        if isinstance(obj, Job):
            return obj
        # Only a @job runs: a payload naming any other callable (os.system, ...) must not
        # make the worker call it.
        raise UnknownJob(f"unknown job {name!r}: {module_name} has it, but it is not a @cogworker.job")
    if import_prefixes:
        raise UnknownJob(f"unknown job {name!r}: not registered, and not found under import_prefixes "
                         f"{list(import_prefixes)}")
    raise UnknownJob(f"unknown job {name!r}: not registered (only jobs the app module imports run; "
                     f"import_prefixes allows importing others on demand)")
