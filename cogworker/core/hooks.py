"""Lifecycle hooks: a small, fixed set of points in a job's life that code can subscribe
to (as Dramatiq's middleware does), public API.

Events: ``enqueued``, ``started``, ``succeeded``, ``retrying``, ``dead`` (with its
``reason``), ``given_back``, ``orphaned``, ``suspended`` (an iterable job back on its
queue with its cursor), ``cancelled`` (fired by ``api.cancel``). A subscriber is a
callable taking one ``JobEvent``::

    from cogworker import hooks

    @hooks.subscribe("dead")
    def alert(event: hooks.JobEvent) -> None:
        print(event.payload.get("jid"), event.reason, event.error_message)

A hook fires once per transition, in the process that made it, after the transition
that applied its decision (``settlement.TABLE``): after its write went through, or, for
an ack riding on the process's next fetch, once it is handed to that fetch (``succeeded``
then fires before the ack lands). A hook that raises is logged (at most once a
minute per hook) and ignored: it never changes a job's fate. No event object is built
for an event nobody subscribes to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from ..config import logger
from .payload import error_class_name, error_message

EVENTS = (
    "enqueued",
    "started",
    "succeeded",
    "retrying",
    "dead",
    "given_back",
    "orphaned",
    "suspended",
    "cancelled",
    "expired",
)
LOG_EVERY = 60.0


@dataclass(frozen=True)
class JobEvent:
    """One transition of one job. ``payload``: the job as stored (after a failure, with
    its failure fields); ``delay``: seconds before the retry (``retrying``); ``reason``:
    why it went to dead ("failed", "interrupted", "timed_out", "bad_payload",
    "process_died"; an ``orphaned`` job parked past ``max_orphanings``, bound for dead:
    "process_died"); ``counted`` (``orphaned``): whether an orphaning was counted for it
    (its process died running it) or not (it was only listed, or stopped by its master);
    ``later`` (``succeeded``, cogworker's own subscribers): see the field."""

    name: str
    payload: dict[str, Any]
    queue: str | None = None
    identity: str | None = None
    error: BaseException | None = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    duration: float | None = None
    delay: float | None = None
    reason: str | None = None
    counted: bool | None = None
    config: Any = field(default=None, repr=False)
    # ``succeeded`` of a success whose ack rides on the process's next fetch: a write a
    # subscriber hands over (a transitions ``Call``) to ride on that fetch too, in the
    # same round trip, instead of one of its own (the unique lock's release). None: write
    # it at once.
    later: Callable[[Any], None] | None = field(default=None, repr=False)


Hook = Callable[[JobEvent], None]
# What a hook wants to see, asked of the payload before an event is built: a job's life
# fires events per job, and most subscribers care about few jobs (unique, periodic, ...).
# A filter is a callable, or a payload key: the jobs whose payload has it set (asked with
# no Python call: on the hot path, a call costs more than the test).
Filter = Callable[[dict[str, Any]], Any]
# Tuples, replaced (never changed in place) on subscribe: a hook that subscribes or
# unsubscribes while an event is dispatched doesn't change that dispatch.
_subscribers: dict[str, tuple[tuple[Hook, Filter | str | None], ...]] = {name: () for name in EVENTS}
_last_logged: dict[tuple[int, str], float] = {}


def _names(names: str | Iterable[str]) -> list[str]:
    listed = [names] if isinstance(names, str) else list(names)
    for name in listed:
        if name not in _subscribers:
            raise ValueError(f"unknown job event {name!r} (one of: {', '.join(EVENTS)})")
    return listed


def subscribe(names: str | Iterable[str], fn: Hook | None = None, *, when: Filter | str | None = None) -> Any:
    """Calls ``fn`` on each of the events ``names``. Without ``fn``: a decorator.
    ``when(payload)``: only for the jobs it is true of (asked before an event is built);
    ``when="key"``: only for the jobs whose payload has ``key`` set (true)."""
    listed = _names(names)

    def add(hook: Hook) -> Hook:
        for name in listed:
            if all(known is not hook for known, _ in _subscribers[name]):
                _subscribers[name] = (*_subscribers[name], (hook, when))
        return hook

    return add if fn is None else add(fn)


@dataclass(frozen=True)
class Subscription:
    """One hook as a process installs it: what ``subscribe(names, fn, when=when)`` takes.
    cogworker's own behaviour on these events (unique locks, the cron running lock, stats,
    status and history) is a list of these, which each process installs where it is put
    together (``install``): importing a module subscribes nothing."""

    names: tuple[str, ...]
    fn: Hook
    when: Filter | str | None = None


def install(*groups: Iterable[Subscription]) -> None:
    """Subscribes every hook of ``groups``, in order. Idempotent: a hook already subscribed
    to an event stays where it is (a forked child installs what its master did)."""
    for group in groups:
        for subscription in group:
            subscribe(subscription.names, subscription.fn, when=subscription.when)


def unsubscribe(names: str | Iterable[str], fn: Hook) -> None:
    for name in _names(names):
        _subscribers[name] = tuple((hook, when) for hook, when in _subscribers[name] if hook is not fn)


def wanted(name: str, payload: dict[str, Any] | None = None) -> bool:
    """Does anybody listen to ``name`` (for this ``payload``, if given)? The caller may
    then skip building the event."""
    if payload is None:
        return bool(_subscribers[name])
    for _, when in _subscribers[name]:  # a loop, not any(genexpr): asked per job
        if when is None or (payload.get(when) if when.__class__ is str else when(payload)):  # type: ignore[operator]
            return True
    return False


_OPTIONAL = frozenset(f.name for f in dataclass_fields(JobEvent) if f.default is not MISSING)
_JobEvent = JobEvent


def _event(name: str, payload: dict[str, Any], given: dict[str, Any]) -> JobEvent:
    """``JobEvent(name, payload, **given)`` without the frozen dataclass's one
    ``object.__setattr__`` per field (13): events are built per job, on the hot path.
    The instance is the same: its fields are its ``__dict__``, where a field not given
    is read from the class (a dataclass keeps each default there). ``given`` is the
    caller's own ``**fields`` dict: it becomes the instance's."""
    if JobEvent is not _JobEvent or not _OPTIONAL.issuperset(given):
        # An unknown field gets the TypeError it deserves; a replaced JobEvent is called as is.
        return JobEvent(name, payload, **given)
    given["name"] = name
    given["payload"] = payload
    event = object.__new__(_JobEvent)
    object.__setattr__(event, "__dict__", given)
    return event


def fire(name: str, payload: dict[str, Any], **fields: Any) -> None:
    """Calls every subscriber of ``name`` that wants this job, in the order they
    subscribed; what one raises is logged and ignored. The event is built once, for the
    first subscriber that wants it (none: none is built)."""
    event: JobEvent | None = None
    for hook, when in _subscribers[name]:  # one pass, no list built: this runs per job
        if when is not None and not (payload.get(when) if when.__class__ is str else when(payload)):  # type: ignore[operator]
            continue
        if event is None:
            error = fields.get("error")
            if error is not None and "error_class" not in fields:
                fields["error_class"] = error_class_name(error)
                fields["error_message"] = error_message(error)
            event = _event(name, payload, fields)
        try:
            hook(event)
        except Exception as exc:
            _log_failure(hook, name, payload, exc)


def _log_failure(hook: Hook, name: str, payload: dict[str, Any], exc: Exception) -> None:
    key, now = (id(hook), name), time.monotonic()
    if now - _last_logged.get(key, float("-inf")) < LOG_EVERY:
        return
    _last_logged[key] = now
    logger.error(
        "hook %s on %s (jid=%s) failed (ignored): %s: %s",
        getattr(hook, "__qualname__", hook),
        name,
        payload.get("jid"),
        type(exc).__name__,
        exc,
        exc_info=exc,
    )
