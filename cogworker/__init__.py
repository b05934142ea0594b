"""cogworker: Redis-backed background jobs with a prefork worker that never loses a job.

Public API only (the docs' API reference). Loaded lazily (PEP 562): ``import cogworker`` imports
no submodule and not redis-py, so ``cogworker-prefork`` can take the Redis password out
of its process title before anything slow is imported; each name is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the submodule that defines it
_HOMES = {
    "by_name": "client.jobs",
    "enqueue": "client.jobs",
    "enqueue_at": "client.jobs",
    "enqueue_in": "client.jobs",
    "JobId": "client.jobid",
    "Config": "config",
    "configure": "config",
    "get_config": "config",
    "disable": "cron",
    "enable": "cron",
    "periodic": "cron",
    "BadPayload": "errors",
    "CogworkerError": "errors",
    "EnqueueDropped": "errors",
    "ConfigurationError": "errors",
    "JobTimeout": "errors",
    "ProcessDied": "errors",
    "RedisVersionError": "errors",
    "UnknownJob": "errors",
    "Shutdown": "errors",
    "Retry": "errors",
    "RedisUnavailable": "errors",
    "BoundJob": "client.jobs",
    "Job": "client.jobs",
    "JobOptions": "client.jobs",
    "Signature": "client.jobs",
    "job": "client.jobs",
    "iterable_job": "client.iterable",
    "batch": "client.batches",
    "chain": "client.workflows",
    "chord": "client.workflows",
    "group": "client.workflows",
    "result": "client.results",
    "result_async": "client.results",
    "JobFailed": "errors",
    "BatchNotClosed": "errors",
    "ResultExpired": "errors",
    "ResultTimeout": "errors",
    "client_middleware": "core.middleware",
    "server_middleware": "core.middleware",
    "NotReplicated": "store.replication",
    "NotFsynced": "store.replication",
    "Concurrency": "core.limits",
    "Window": "core.limits",
    "current_job": "core.current",
}

__all__ = [
    "BadPayload",
    "BatchNotClosed",
    "BoundJob",
    "CogworkerError",
    "Concurrency",
    "Config",
    "ConfigurationError",
    "EnqueueDropped",
    "Job",
    "JobId",
    "JobOptions",
    "JobFailed",
    "JobTimeout",
    "NotFsynced",
    "NotReplicated",
    "ProcessDied",
    "Shutdown",
    "Retry",
    "RedisUnavailable",
    "RedisVersionError",
    "ResultExpired",
    "ResultTimeout",
    "Signature",
    "UnknownJob",
    "Window",
    "batch",
    "by_name",
    "chain",
    "chord",
    "client_middleware",
    "configure",
    "current_job",
    "disable",
    "enable",
    "enqueue",
    "enqueue_at",
    "enqueue_in",
    "get_config",
    "group",
    "hooks",
    "iterable_job",
    "job",
    "periodic",
    "result",
    "result_async",
    "server_middleware",
    "stats",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f".{home}", __name__), name)
    elif name == "__version__":
        value = _version()
    else:
        try:  # a submodule not imported yet (``cogworker.config``, ``cogworker.worker``...)
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES) | {"__version__"})


def _version() -> str:
    from .version import __version__  # the one source; pyproject.toml reads it too

    return __version__


if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from . import hooks, stats
    from .client.batches import batch
    from .client.iterable import iterable_job
    from .client.jobid import JobId
    from .client.jobs import BoundJob, Job, JobOptions, Signature, by_name, enqueue, enqueue_at, enqueue_in, job
    from .client.results import result, result_async
    from .client.workflows import chain, chord, group
    from .config import Config, configure, get_config
    from .core.current import current_job
    from .core.limits import Concurrency, Window
    from .core.middleware import client_middleware, server_middleware
    from .cron import disable, enable, periodic
    from .errors import (
        BadPayload,
        BatchNotClosed,
        CogworkerError,
        ConfigurationError,
        EnqueueDropped,
        JobFailed,
        JobTimeout,
        ProcessDied,
        RedisUnavailable,
        RedisVersionError,
        ResultExpired,
        ResultTimeout,
        Retry,
        Shutdown,
        UnknownJob,
    )
    from .store.replication import NotFsynced, NotReplicated

    __version__: str
