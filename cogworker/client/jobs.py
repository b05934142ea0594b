"""``@job``: the decorator, and the handles that enqueue a job (``Job``, ``BoundJob``,
``by_name``), which call the client.

The payload (``core/payload.py``) and the registry of names (``core/registry.py``) live below the
client; their names are re-exported here for code that imported them from ``jobs``.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Never, ParamSpec, TypeVar, cast, overload

from typing_extensions import TypeVar as DefaultedTypeVar

from ..core.payload import (  # noqa: F401 (re-exported: their home was this module)
    UNIQUE_UNTIL,
    BackoffFn,
    JobOptions,
    OptionArgs,
    PlainOptionArgs,
    build_payload,
    default_backoff,
    dumps,
    error_class_name,
    error_message,
    is_number,
    new_jid,
    normalize_retry,
    result_ttl,
    to_epoch,
)
from ..core.registry import JobDef, importable, register, registry, resolve  # noqa: F401 (re-exported)
from ..errors import ConfigurationError
from ..names import check_job_name
from . import aio as client_async
from . import enqueue as client
from .jobid import JobId, issued

if TYPE_CHECKING:  # typing.Unpack is 3.11+; annotations are never evaluated at run time
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")
# The parameters after the first: a chain's or chord's step gets the previous result first,
# so ``add.s(10)`` is a right call of ``add(x, y)`` too (the second overload of ``s``).
Rest = ParamSpec("Rest")
Calls = Iterable[Sequence[Any] | tuple[Sequence[Any], dict[str, Any]]]
# What ``enqueue`` may return besides the jid: nothing (``Never``) for a job, ``None`` for a
# unique one (``@job(unique_for=...)``, ``.options(unique_for=...)``), whose duplicate is
# dropped. Covariant: a job goes wherever a unique one may (``Job[P, R]`` is a
# ``Job[P, R, None]``).
N = DefaultedTypeVar("N", covariant=True, default=Never)


class Job(JobDef, Generic[P, R, N]):
    """A function that can run inline or be enqueued. Made by ``@cogworker.job``.

    Generic in the function's parameters (``P``) and result (``R``): type checkers check
    the arguments of ``enqueue`` and its variants against the function's signature, and
    ``enqueue`` returns a ``JobId[R]`` (``cogworker.result`` of it is an ``R``); ``N`` is
    ``None`` for a unique job, whose ``enqueue`` may return None."""

    func: Callable[P, R]

    def __init__(self, func: Callable[P, R], opts: JobOptions, name: str | None = None) -> None:
        super().__init__(func, opts, name)
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<cogworker job {self.name} queue={self.opts.queue!r}>"

    def _bound(self) -> BoundJob[P, R, N]:
        return BoundJob(self, self.opts)

    @overload
    def options(self, *, unique_for: float, **overrides: Unpack[PlainOptionArgs]) -> BoundJob[P, R, None]: ...

    @overload
    def options(self, *, unique_for: None = None, **overrides: Unpack[PlainOptionArgs]) -> BoundJob[P, R, N]: ...

    @overload
    def options(self, **overrides: Unpack[OptionArgs]) -> BoundJob[P, R, None]: ...

    def options(self, **overrides: Any) -> BoundJob[P, R, Any]:
        """Per-call overrides: ``add.options(queue="low", retry=0).enqueue(1, 2)``."""
        return BoundJob(self, JobOptions.build(self.opts, **overrides))

    @overload
    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R, N]: ...

    @overload
    def s(self: Job[Concatenate[Any, Rest], R, N], *args: Rest.args, **kwargs: Rest.kwargs) -> Signature[R, N]: ...

    def s(self, *args: Any, **kwargs: Any) -> Signature[R, N]:
        """The call, made now and enqueued later: ``add.s(1, 2).enqueue_in(30)``; in a chain
        or chord it gets the previous result first (``add.s(10)``)."""
        return self._bound().s(*args, **kwargs)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R, N]:
        """An immutable signature: in a chain or chord it gets no previous result."""
        return self._bound().si(*args, **kwargs)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        """Push the job; returns its jid (None only for a unique job: a duplicate its lock
        dropped, or a client middleware's drop; any other job's dropped push raises
        ``EnqueueDropped``)."""
        # self._bound().enqueue, without building the handle: asked per job.
        self.check_arguments(args, kwargs)
        return cast(
            "JobId[R] | N", issued(client.push(build_payload(self.name, args, kwargs, self.opts)), self.opts, self.name)
        )

    def enqueue_in(self, seconds: float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return self._bound().enqueue_in(seconds, *args, **kwargs)

    def enqueue_at(self, when: datetime | float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return self._bound().enqueue_at(when, *args, **kwargs)

    def enqueue_many(self, calls: Calls) -> list[JobId[R] | None]:
        return self._bound().enqueue_many(calls)

    # From asyncio code (FastAPI, aiohttp): the same payloads, written on redis.asyncio.

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return await self._bound().enqueue_async(*args, **kwargs)

    async def enqueue_in_async(self, seconds: float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return await self._bound().enqueue_in_async(seconds, *args, **kwargs)

    async def enqueue_at_async(self, when: datetime | float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return await self._bound().enqueue_at_async(when, *args, **kwargs)

    async def enqueue_many_async(self, calls: Calls) -> list[JobId[R] | None]:
        return await self._bound().enqueue_many_async(calls)


@dataclass(frozen=True)
class BoundJob(Generic[P, R, N]):
    """A job with per-call options (``Job.options``), or known only by its name
    (``cogworker.by_name``: ``job`` is None when it isn't registered in this process, and
    its arguments are ``...``, unchecked by type checkers; its ``enqueue`` may return None,
    as it may be a unique job's)."""

    job: JobDef | None
    opts: JobOptions
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            if self.job is None:
                raise TypeError("BoundJob needs a job or a name")
            object.__setattr__(self, "name", self.job.name)

    @overload
    def options(self, *, unique_for: float, **overrides: Unpack[PlainOptionArgs]) -> BoundJob[P, R, None]: ...

    @overload
    def options(self, *, unique_for: None = None, **overrides: Unpack[PlainOptionArgs]) -> BoundJob[P, R, N]: ...

    @overload
    def options(self, **overrides: Unpack[OptionArgs]) -> BoundJob[P, R, None]: ...

    def options(self, **overrides: Any) -> BoundJob[P, R, Any]:
        """More overrides on top of these: ``by_name("app.jobs.add").options(retry=0)``."""
        return BoundJob(self.job, JobOptions.build(self.opts, **overrides), self.name)

    @overload
    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R, N]: ...

    @overload
    def s(self: BoundJob[Concatenate[Any, Rest], R, N], *args: Rest.args, **kwargs: Rest.kwargs) -> Signature[R, N]: ...

    def s(self, *args: Any, **kwargs: Any) -> Signature[R, N]:
        """The call with these options, checked now (as called alone, or after a previous
        result given first, as a chain's step gets), enqueued later."""
        if self.job is not None:
            try:
                self.job.check_arguments(args, kwargs)
            except TypeError:
                self.job.check_arguments((None, *args), kwargs)
        return Signature(self, tuple(args), dict(kwargs))

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R, N]:
        """An immutable signature (no previous result), checked as called alone."""
        if self.job is not None:
            self.job.check_arguments(args, kwargs)
        return Signature(self, tuple(args), dict(kwargs), immutable=True)

    def _issued(self, jid: str | None) -> JobId[R] | N:
        return cast("JobId[R] | N", issued(jid, self.opts, self.name))

    def payload(self, args: Sequence[Any], kwargs: dict[str, Any], now: float | None = None) -> dict[str, Any]:
        """The job's payload; a TypeError first if a registered job can't take these arguments."""
        if self.job is not None:
            self.job.check_arguments(args, kwargs)
        return build_payload(self.name, args, kwargs, self.opts, now)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        return self._issued(client.push(self.payload(args, kwargs)))

    def enqueue_in(self, seconds: float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        if not is_number(seconds):
            raise TypeError(f"enqueue_in takes seconds as a number, got {seconds!r}")
        return self.enqueue_at(time.time() + seconds, *args, **kwargs)

    def enqueue_at(self, when: datetime | float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        at = to_epoch(when)
        return self._issued(client.push(self.payload(args, kwargs), at=at))

    def enqueue_many(self, calls: Calls) -> list[JobId[R] | None]:
        """Bulk enqueue: each item is an args tuple/list, or ``(args, kwargs)``; pipelined.
        None in the list for a duplicate or a push a client middleware dropped."""
        return [None if jid is None else JobId(jid) for jid in client.push_many(self._many(calls))]

    def _many(self, calls: Calls) -> list[dict[str, Any]]:
        now = time.time()
        payloads = []
        for call in calls:
            if (
                isinstance(call, tuple)
                and len(call) == 2
                and isinstance(call[1], dict)
                and isinstance(call[0], (list, tuple))
            ):
                args, kwargs = call
            elif isinstance(call, (list, tuple)):
                args, kwargs = call, {}
            else:
                raise TypeError(f"enqueue_many takes args tuples or (args, kwargs) pairs, got {call!r}")
            payloads.append(self.payload(args, kwargs, now))  # all checked before any is written
        return payloads

    async def enqueue_async(self, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        """``enqueue`` from asyncio code, on ``redis.asyncio`` (same payload, same middleware)."""
        return self._issued(await client_async.push(self.payload(args, kwargs)))

    async def enqueue_in_async(self, seconds: float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        if not is_number(seconds):
            raise TypeError(f"enqueue_in takes seconds as a number, got {seconds!r}")
        return await self.enqueue_at_async(time.time() + seconds, *args, **kwargs)

    async def enqueue_at_async(self, when: datetime | float, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | N:
        at = to_epoch(when)
        return self._issued(await client_async.push(self.payload(args, kwargs), at=at))

    async def enqueue_many_async(self, calls: Calls) -> list[JobId[R] | None]:
        return [None if jid is None else JobId(jid) for jid in await client_async.push_many(self._many(calls))]


@overload
def job(func: Callable[P, R], /) -> Job[P, R]: ...


@overload
def job(
    func: None = None, /, *, unique_for: float, **options: Unpack[PlainOptionArgs]
) -> Callable[[Callable[P, R]], Job[P, R, None]]: ...


@overload
def job(
    func: None = None, /, *, unique_for: None = None, **options: Unpack[PlainOptionArgs]
) -> Callable[[Callable[P, R]], Job[P, R]]: ...


@overload
def job(func: None = None, /, **options: Unpack[OptionArgs]) -> Callable[[Callable[P, R]], Job[P, R, None]]: ...


def job(
    func: Callable[P, R] | None = None, /, **options: Any
) -> Job[P, R, Any] | Callable[[Callable[P, R]], Job[P, R, Any]]:
    """Make a function a job: ``@job`` or ``@job(queue=..., retry=..., timeout=..., unique_for=...)``.
    The ``Job`` keeps the function's signature for type checkers (``ParamSpec``)."""
    opts = JobOptions.build(**options)  # an unknown option fails here, at decoration

    def wrap(f: Callable[P, R]) -> Job[P, R, Any]:
        if not callable(f):
            raise TypeError(f"@job decorates a function, got {f!r}")
        if inspect.isasyncgenfunction(f) or inspect.isasyncgenfunction(type(f).__call__):
            # Nothing would iterate it: its body would never run.
            raise ConfigurationError(
                f"@job {getattr(f, '__qualname__', f)!r} is an async generator: a job "
                f"returns (make it an async def without yield, or an @iterable_job)"
            )
        made = Job(f, opts)
        register(made)
        return made

    return wrap(func) if func is not None else wrap


@dataclass(frozen=True)
class Signature(Generic[R, N]):
    """One call of a job, its arguments checked and kept (``add.s(1, 2)``, Celery's
    signature): enqueue it now, later or at a time, as often as needed."""

    bound: BoundJob[..., R, N]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    immutable: bool = False  # ``si``: a chain or chord gives it no previous result

    @property
    def name(self) -> str:
        return self.bound.name

    @overload
    def options(self, *, unique_for: float, **overrides: Unpack[PlainOptionArgs]) -> Signature[R, None]: ...

    @overload
    def options(self, *, unique_for: None = None, **overrides: Unpack[PlainOptionArgs]) -> Signature[R, N]: ...

    @overload
    def options(self, **overrides: Unpack[OptionArgs]) -> Signature[R, None]: ...

    def options(self, **overrides: Any) -> Signature[R, Any]:
        return Signature(self.bound.options(**overrides), self.args, self.kwargs, self.immutable)

    def to_dict(self) -> dict[str, Any]:
        """The signature as JSON can carry it (``Signature.from_dict`` reads it back)."""
        o = self.bound.opts
        options: dict[str, Any] = {"queue": o.queue, "retry": o.retry}
        for name in ("timeout", "result_ttl"):
            if getattr(o, name) is not None:
                options[name] = getattr(o, name)
        if o.results:
            options["results"] = True
        made = {
            "job": self.name,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "options": options,
            "immutable": self.immutable,
        }
        dumps(made)  # TypeError now if an argument can't be JSON
        return made

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Signature[Any, None]:
        """A signature from ``to_dict``'s form (its job found by name, as ``by_name``)."""
        if not isinstance(data, dict) or not isinstance(data.get("job"), str):
            raise TypeError(f"a signature is an object with a 'job' name, got {data!r}")
        bound = by_name(data["job"], **dict(data.get("options") or {}))
        args, kwargs = tuple(data.get("args") or ()), dict(data.get("kwargs") or {})
        return bound.si(*args, **kwargs) if data.get("immutable") else bound.s(*args, **kwargs)

    def step(self, first: bool = False) -> dict[str, Any]:
        """This call as a workflow step (``core/workflow.py``), its jid chosen now; its
        arguments checked as it will be called (``first``: with no previous result)."""
        o = self.bound.opts
        if o.unique_for is not None:
            raise ConfigurationError(
                f"{self.name}: a unique job (unique_for) can't be a step of a chain, group or chord"
            )
        if o.priority:  # its steps are pushed by the scripts of its settlement, onto their queues
            raise ConfigurationError(
                f"{self.name}: a job of a priority can't be a step of a chain, group or chord (steps run at 0)"
            )
        job = self.bound.job
        if job is not None:
            job.check_arguments(self.args if first or self.immutable else (None, *self.args), self.kwargs)
        made: dict[str, Any] = {
            "class": self.name,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "queue": o.queue,
            "retry": o.retry,
            "jid": new_jid(),
            "imm": self.immutable,
        }
        if o.timeout is not None:
            made["timeout"] = o.timeout
        if o.results:
            made["ttl"] = result_ttl(o)
        dumps(made)
        return made

    def enqueue(self) -> JobId[R] | N:
        return self.bound.enqueue(*self.args, **self.kwargs)

    def enqueue_in(self, seconds: float) -> JobId[R] | N:
        return self.bound.enqueue_in(seconds, *self.args, **self.kwargs)

    def enqueue_at(self, when: datetime | float) -> JobId[R] | N:
        return self.bound.enqueue_at(when, *self.args, **self.kwargs)

    async def enqueue_async(self) -> JobId[R] | N:
        return await self.bound.enqueue_async(*self.args, **self.kwargs)

    async def enqueue_in_async(self, seconds: float) -> JobId[R] | N:
        return await self.bound.enqueue_in_async(seconds, *self.args, **self.kwargs)

    async def enqueue_at_async(self, when: datetime | float) -> JobId[R] | N:
        return await self.bound.enqueue_at_async(when, *self.args, **self.kwargs)


def by_name(name: str, **options: Unpack[OptionArgs]) -> BoundJob[..., Any, None]:
    """A job known by its name, with options, as Celery's ``send_task(name, queue=...)``:
    ``by_name("app.jobs.add", queue="critical", retry=3).enqueue(1, 2)``; it has
    ``enqueue``, ``enqueue_in``, ``enqueue_at``, ``enqueue_many`` and ``options``.

    The job's code needn't be importable here. If it is registered in this process, its
    declared options apply (those given override them) and its arguments are checked
    against its signature at enqueue; otherwise the defaults (queue ``default``, retry 25).
    An unknown option raises ``ConfigurationError`` here.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"the job name must be a non-empty string, got {name!r}")
    check_job_name(name)  # a name a page, a table and a log line can show
    known = registry.get(name)
    base = known.opts if known is not None else JobOptions()
    return BoundJob(known, JobOptions.build(base, **options) if options else base, name)


def enqueue(name: str, *args: Any, **kwargs: Any) -> JobId[Any] | None:
    """Enqueue by job name, without importing the job's code (options: ``by_name``).

    A registered job's options apply, and its arguments are checked; otherwise the
    defaults (queue ``default``).
    """
    return by_name(name).enqueue(*args, **kwargs)


def enqueue_at(name: str, when: Any, *args: Any, **kwargs: Any) -> JobId[Any] | None:
    """``enqueue`` at a time: an aware datetime, or epoch seconds."""
    return by_name(name).enqueue_at(when, *args, **kwargs)


def enqueue_in(name: str, seconds: float, *args: Any, **kwargs: Any) -> JobId[Any] | None:
    """``enqueue`` in ``seconds`` from now."""
    return by_name(name).enqueue_in(seconds, *args, **kwargs)
