"""Periodic (cron) jobs: entries registered at import, fired once per slot fleet-wide."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .config import Config, get_config
from .errors import ConfigurationError
from .jobs import Job, dumps

entries: dict[str, Entry] = {}


@dataclass(frozen=True)
class Entry:
    pjid: str
    cron: str
    job_name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    queue: str = "default"
    retry: int = 25
    unique: bool = False
    tz: str = "UTC"
    catch_up: bool | None = None


def periodic(cron: str, job: Job[Any, Any] | str, args: tuple[Any, ...] | list[Any] = (),
             kwargs: dict[str, Any] | None = None, name: str | None = None, queue: str | None = None,
             unique: bool = False, tz: str = "UTC", catch_up: bool | None = None) -> Entry:
    """Register a cron entry (at import time, in the app module). Returns the entry."""
    job_name = job.name if isinstance(job, Job) else job
    if not isinstance(job_name, str) or not job_name:
        raise ConfigurationError(f"periodic: job must be a @job function or a job name, got {job!r}")
    label = name or job_name
    if not isinstance(cron, str) or not croniter.is_valid(cron):
        raise ConfigurationError(f"periodic entry {label!r}: invalid cron expression {cron!r}")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(f"periodic entry {label!r}: unknown time zone {tz!r}") from None
    args = tuple(args)
    kwargs = dict(kwargs or {})
    dumps([list(args), kwargs])  # TypeError now, at import, not at the first slot
    opts = job.opts if isinstance(job, Job) else None
    pjid = name or derived_name(job_name, cron, args, kwargs)
    if pjid in entries:
        raise ConfigurationError(f"periodic entry {pjid!r} is registered twice; give each a distinct name=")
    entry = Entry(pjid, cron, job_name, args, kwargs, queue or (opts.queue if opts else "default"),
                  opts.retry if opts else 25, bool(unique), tz, catch_up)
    entries[pjid] = entry
    return entry


def derived_name(job_name: str, cron: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    digest = hashlib.sha1(dumps([cron, list(args), kwargs]).encode()).hexdigest()[:10]
    return f"{job_name}@{digest}"


def disable(pjid: str, config: Config | None = None) -> None:
    """Stop firing an entry (fleet-wide, at run time) until ``enable``."""
    config = config or get_config()
    config.redis().sadd(config.keys.periodic_disabled, pjid)


def enable(pjid: str, config: Config | None = None) -> None:
    config = config or get_config()
    config.redis().srem(config.keys.periodic_disabled, pjid)


def release_running_lock(config: Config, pjid: str, jid: str) -> None:
    from . import lua

    lua.run(config.redis(), "release_lock", [config.keys.periodic_running(pjid)], [jid])


def ticker_for(config: Config, ready: Any = None, catch_up: bool = True) -> Any:
    """The ticker for the registered entries, or None when there are none."""
    return None
