"""cogworker: Redis-backed background jobs with a prefork worker that never loses a job.

Public API only; see DESIGN §1 and the README.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from .client import by_name, enqueue, enqueue_at
from .config import Config, configure, get_config
from .cron import disable, enable, periodic
from .errors import (
    BadPayload,
    CogworkerError,
    ConfigurationError,
    JobTimeout,
    ProcessDied,
    RedisVersionError,
    UnknownJob,
)
from .jobs import BoundJob, Job, JobOptions, job
from .middleware import client_middleware, server_middleware

try:  # the installed distribution's version: one source of truth, pyproject.toml
    __version__ = _metadata.version("cogworker")
except _metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "BadPayload",
    "BoundJob",
    "CogworkerError",
    "Config",
    "ConfigurationError",
    "Job",
    "JobOptions",
    "JobTimeout",
    "ProcessDied",
    "RedisVersionError",
    "UnknownJob",
    "by_name",
    "client_middleware",
    "configure",
    "disable",
    "enable",
    "enqueue",
    "enqueue_at",
    "get_config",
    "job",
    "periodic",
    "server_middleware",
]
